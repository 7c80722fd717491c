//! Ctrl-C, SIGTERM and SIGHUP. One thread receives the signals and fires the trigger that is
//! armed at the moment: for `nod mcp` the command's own, whose actions cancel every request
//! in flight (servers receive `notifications/cancelled`) and shut the engine down, and the
//! command exits 130. A shell arms a new trigger for each turn and command; SIGTERM and
//! SIGHUP also fire the process's trigger (the one installed first), which ends the shell.

use std::sync::{Arc, Mutex, PoisonError};

use crate::util::Trigger;

/// The process's signal handling: which trigger a signal fires now.
#[derive(Clone)]
pub struct Signals {
    armed: Arc<Mutex<Trigger>>,
    process: Trigger,
}

impl Signals {
    /// Starts the signal thread with `trigger` armed. Call once, early in `main`.
    pub fn install(trigger: Trigger) -> Signals {
        let signals = Signals { armed: Arc::new(Mutex::new(trigger.clone())), process: trigger };
        let Ok(mut incoming) = signal_hook::iterator::Signals::new([
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGHUP,
        ]) else {
            return signals;
        };
        let armed = signals.armed.clone();
        let process = signals.process.clone();
        let _ = std::thread::Builder::new().name("nod-signals".into()).spawn(move || {
            for signal in incoming.forever() {
                let trigger = armed.lock().unwrap_or_else(PoisonError::into_inner).clone();
                trigger.fire();
                if signal != signal_hook::consts::SIGINT {
                    process.fire();
                }
            }
        });
        signals
    }

    /// Makes the next signal fire `trigger`.
    pub fn arm(&self, trigger: Trigger) {
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = trigger;
    }

    /// A new trigger, armed: Ctrl-C fires it (and nothing else) until another is armed.
    pub fn arm_new(&self) -> Trigger {
        let trigger = Trigger::default();
        self.arm(trigger.clone());
        trigger
    }
}
