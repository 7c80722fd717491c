//! Ctrl-C, SIGTERM and SIGHUP: the first one cancels every request in flight (servers receive
//! `notifications/cancelled`), shuts the engine down, and makes the command exit 130.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::dispatch::Engine;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static ENGINE: Mutex<Option<Engine>> = Mutex::new(None);
static DONE: OnceLock<(Sender<()>, Receiver<()>)> = OnceLock::new();

/// Starts the signal thread. Call once, early in `main`.
pub fn install() {
    let done = DONE.get_or_init(|| crossbeam_channel::bounded(1));
    let Ok(mut signals) = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ]) else {
        return;
    };
    let done = done.0.clone();
    let _ = std::thread::Builder::new().name("nod-signals".into()).spawn(move || {
        if signals.forever().next().is_some() {
            INTERRUPTED.store(true, Ordering::SeqCst);
            let engine = ENGINE.lock().ok().and_then(|mut e| e.take());
            if let Some(engine) = engine {
                engine.cancel_all("interrupted by the user");
                engine.shutdown();
            }
            let _ = done.send(());
        }
    });
}

/// Registers the engine that an interrupt should stop.
pub fn watch(engine: &Engine) {
    if let Ok(mut slot) = ENGINE.lock() {
        *slot = Some(engine.clone());
    }
    if interrupted() {
        engine.shutdown();
    }
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// After an interrupt: wait (bounded) until the signal thread has shut the servers down.
pub fn wait_shutdown() {
    if let Some((_, rx)) = DONE.get() {
        let _ = rx.recv_timeout(Duration::from_secs(10));
    }
}
