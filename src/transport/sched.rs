//! Batch scheduling for the one-shot `nod mcp` commands (Linux `SCHED_BATCH`).
//!
//! A call's answer crosses three threads of nod's design: the caller writes the request,
//! the server's worker reads the answer and hands it over on a channel, the caller wakes.
//! Under the default policy a woken thread preempts the one that woke it, and on a busy or
//! single CPU it does so while the waker still holds the channel's lock: the woken caller
//! finds it held, sleeps again, and the call costs six context switches instead of three
//! (measured with `perf stat` on 2000 sequential calls pinned to one CPU). `SCHED_BATCH`
//! is the kernel's policy for non-interactive work: the same share of the CPU, but a woken
//! thread waits for the running one to block instead of preempting it.
//!
//! Only nod's own threads take it. A server inherits the policy of the thread that starts
//! it, so that thread steps back to the normal policy for the spawn (`normal_for`).

use std::sync::atomic::{AtomicBool, Ordering};

static BATCH: AtomicBool = AtomicBool::new(false);

/// Puts the calling thread, and every thread it starts from now on, on batch scheduling.
/// Where the policy cannot be set, nothing changes.
pub fn enter_batch() {
    if set(Policy::Batch) {
        BATCH.store(true, Ordering::Relaxed);
    }
}

/// Runs `spawn` (which starts a server process) under the normal policy when the calling
/// thread is on batch scheduling, so the server does not inherit it.
pub fn normal_for<T>(spawn: impl FnOnce() -> T) -> T {
    if !BATCH.load(Ordering::Relaxed) {
        return spawn();
    }
    set(Policy::Normal);
    let result = spawn();
    set(Policy::Batch);
    result
}

enum Policy {
    Normal,
    Batch,
}

#[cfg(target_os = "linux")]
fn set(policy: Policy) -> bool {
    let policy = match policy {
        Policy::Normal => libc::SCHED_OTHER,
        Policy::Batch => libc::SCHED_BATCH,
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` outlives the call.
    unsafe { libc::sched_setscheduler(0, policy, &param) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn set(_: Policy) -> bool {
    false
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn policy_of(pid: libc::pid_t) -> i32 {
        // SAFETY: a plain query of a thread's or process's policy.
        unsafe { libc::sched_getscheduler(pid) }
    }

    #[test]
    fn a_batch_thread_starts_batch_threads_and_normal_processes() {
        std::thread::spawn(|| {
            enter_batch();
            assert_eq!(policy_of(0), libc::SCHED_BATCH);
            let inner = std::thread::spawn(|| policy_of(0)).join().unwrap();
            assert_eq!(inner, libc::SCHED_BATCH, "threads inherit the policy");
            let mut child = normal_for(|| std::process::Command::new("sleep").arg("5").spawn().unwrap());
            let policy = policy_of(child.id() as libc::pid_t);
            let _ = child.kill();
            let _ = child.wait();
            assert_eq!(policy, libc::SCHED_OTHER, "a server keeps the normal policy");
            assert_eq!(policy_of(0), libc::SCHED_BATCH, "the thread is batch again after the spawn");
        })
        .join()
        .unwrap();
    }
}
