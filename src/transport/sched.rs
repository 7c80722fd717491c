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
//!
//! During a sequential stream of calls (`tool call --jsonl` without `--parallel`,
//! `sequential_stream`) the server's worker asks for a short time slice, so that on one CPU
//! it reads an answer before the caller resumes (`worker_slice`). With a CPU to spare the
//! stream also keeps its threads awake a moment between answers: the caller looks for its
//! answer before it sleeps (the caller of any `--jsonl` stream does, `--parallel` too), and
//! the worker looks for the next answer before it sleeps. On a
//! virtual machine a sleeping CPU takes tens of microseconds to wake, more than a fast
//! server's round trip; with neither CPU asleep, the answer and the next request cross
//! without a wakeup. Each look gives up after a short while, and one that found nothing
//! makes the next rarer (`Backoff`), so a slow server costs almost no CPU.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

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

/// How long the worker of a sequential stream looks for the next answer before it sleeps.
pub const LINGER: Duration = Duration::from_micros(50);

/// Sequential streams running now (`Sequential` guards alive).
static STREAMS: AtomicU32 = AtomicU32::new(0);
/// Those of them with a CPU to spare, whose workers look for the next answer.
static LINGERING: AtomicU32 = AtomicU32::new(0);

/// The workers' looks after an answer, one backoff for all: a stream has one server. Two
/// misses in a row are forgiven: a worker that stops looking lets its CPU sleep, and the
/// caller's own look then misses too.
static LINGERS: Backoff = Backoff::new(2);

/// A sequential stream of calls is running (`tool call --jsonl` without `--parallel`; the
/// shell runs it too, so it ends with the stream). While the guard lives, the stdio workers
/// - look for the next answer a moment before they sleep, where more than one CPU is ours
///   (on one, looking would only keep the server from running);
/// - run with a short time slice on batch scheduling (`worker_slice`).
pub fn sequential_stream() -> Sequential {
    STREAMS.fetch_add(1, Ordering::Relaxed);
    let lingers = spare_cpu();
    if lingers {
        LINGERING.fetch_add(1, Ordering::Relaxed);
    }
    Sequential { lingers }
}

pub struct Sequential {
    lingers: bool,
}

impl Drop for Sequential {
    fn drop(&mut self) {
        STREAMS.fetch_sub(1, Ordering::Relaxed);
        if self.lingers {
            LINGERING.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Whether a sequential stream is running (the slice its workers want).
pub fn in_sequential_stream() -> bool {
    STREAMS.load(Ordering::Relaxed) > 0
}

/// How long a worker's time slice is during a sequential stream (the shortest the kernel
/// allows a task to ask for).
const SHORT_SLICE: Duration = Duration::from_micros(100);

/// Asks, for the calling thread (a stdio worker), a short time slice (`short`) or the
/// default one, where nod runs on batch scheduling. A call of a sequential stream crosses
/// three tasks on one CPU: the caller's write wakes the server, which runs at once (it keeps
/// the normal policy, which preempts batch tasks); when the server has answered and sleeps,
/// the kernel picks the caller (back from its write, to wait) or the worker (to read the
/// answer). With the same slice it picked the caller (then the worker, then the caller
/// again: 3.85 context switches a call); a shorter slice gives the woken worker the earlier
/// virtual deadline, so it reads the answer first and the caller, back from its write, finds
/// it waiting (3.0 a call; 2000 calls pinned 43.6 -> 37.5 ms). Linux 6.12 and later honour
/// a fair task's own slice (EEVDF); older kernels ignore it. Only while a sequential stream
/// runs (then every stdio worker of the process takes it: a one-shot command has one
/// server, and the shell runs nothing else during the stream): with 16 calls in flight the
/// same slice cost more switches (600 -> 830-940). The thread's nice value and policy are
/// kept (`set_slice` changes the slice alone).
pub fn worker_slice(short: bool) {
    if !BATCH.load(Ordering::Relaxed) {
        return;
    }
    set_slice(if short { SHORT_SLICE } else { Duration::ZERO });
}

/// Whether a worker that has just read an answer should look for the next one now.
pub fn linger_now() -> bool {
    LINGERING.load(Ordering::Relaxed) > 0 && LINGERS.try_now()
}

/// What a worker's look found.
pub fn lingered(found: bool) {
    LINGERS.found(found);
}

/// Whether more than one CPU is ours.
pub fn spare_cpu() -> bool {
    static SPARE: OnceLock<bool> = OnceLock::new();
    *SPARE.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// How often a look for something that may come soon is worth making: after `grace + n`
/// looks in a row that found nothing, only one in `2^n` (at most one in 64) is made, and a
/// look that finds something makes the next one at once.
pub struct Backoff {
    grace: u32,
    misses: AtomicU32,
    skipped: AtomicU32,
}

impl Backoff {
    pub const fn new(grace: u32) -> Backoff {
        Backoff { grace, misses: AtomicU32::new(0), skipped: AtomicU32::new(0) }
    }

    /// Whether to look this time.
    pub fn try_now(&self) -> bool {
        let Some(over) = self.misses.load(Ordering::Relaxed).checked_sub(self.grace).filter(|&n| n > 0) else {
            return true;
        };
        self.skipped.fetch_add(1, Ordering::Relaxed).is_multiple_of(1 << over.min(6))
    }

    pub fn found(&self, found: bool) {
        if found {
            self.misses.store(0, Ordering::Relaxed);
        } else {
            let misses = self.misses.load(Ordering::Relaxed);
            self.misses.store(misses.saturating_add(1), Ordering::Relaxed);
        }
    }
}

enum Policy {
    Normal,
    Batch,
}

/// `sched_setattr` on batch scheduling with the slice `slice` (zero: the default).
#[cfg(target_os = "linux")]
fn set_slice(slice: Duration) {
    /// `struct sched_attr` (include/uapi/linux/sched/types.h), in its first published size.
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    let size = std::mem::size_of::<SchedAttr>() as u32;
    let mut attr = SchedAttr { size, policy: 0, flags: 0, nice: 0, priority: 0, runtime: 0, deadline: 0, period: 0 };
    // The thread's own attributes first: only the slice changes (its nice value, which an
    // unprivileged thread could not lower again, and its policy stay as they are).
    // SAFETY: pid 0 is the calling thread; `attr` is writable for the `size` bytes given.
    let read = unsafe { libc::syscall(libc::SYS_sched_getattr, 0, &mut attr as *mut SchedAttr, size, 0) };
    if read != 0 || attr.policy != libc::SCHED_BATCH as u32 {
        return;
    }
    attr.size = size;
    attr.runtime = slice.as_nanos() as u64;
    // SAFETY: pid 0 is the calling thread; `attr` outlives the call and its size is given.
    let done = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if done != 0 {
        log::debug!("sched_setattr: {}", std::io::Error::last_os_error());
    }
}

#[cfg(not(target_os = "linux"))]
fn set_slice(_: Duration) {}

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
    fn a_look_that_finds_nothing_makes_the_next_ones_rarer_and_a_find_restores_them() {
        let backoff = Backoff::new(1);
        assert!((0..10).all(|_| backoff.try_now()), "no misses: every look is made");
        backoff.found(false);
        assert!((0..10).all(|_| backoff.try_now()), "one miss is forgiven");
        backoff.found(false);
        backoff.found(false);
        let made = (0..64).filter(|_| backoff.try_now()).count();
        assert_eq!(made, 16, "three misses, one forgiven: one look in four");
        for _ in 0..10 {
            backoff.found(false);
        }
        let made = (0..640).filter(|_| backoff.try_now()).count();
        assert_eq!(made, 10, "at most one in 64");
        backoff.found(true);
        assert!((0..10).all(|_| backoff.try_now()), "a find: every look again");
    }

    #[test]
    fn workers_look_after_answers_only_while_a_stream_holds_its_guard_and_a_cpu_is_spare() {
        assert!(!linger_now(), "no stream: no looking");
        assert!(!in_sequential_stream());
        let first = sequential_stream();
        assert_eq!(linger_now(), spare_cpu());
        assert!(in_sequential_stream(), "a short slice whatever the CPUs");
        let second = sequential_stream();
        drop(first);
        assert_eq!(linger_now(), spare_cpu(), "another stream still runs");
        assert!(in_sequential_stream());
        drop(second);
        assert!(!linger_now(), "every stream ended: no looking");
        assert!(!in_sequential_stream(), "every stream ended: the default slice");
    }

    /// The slice the kernel reports for the calling thread (`sched_getattr`), in ns.
    fn reported_slice() -> u64 {
        let mut attr = [0u64; 7];
        // SAFETY: a 56-byte buffer for the first published `struct sched_attr`; pid 0 is this thread.
        let done = unsafe { libc::syscall(libc::SYS_sched_getattr, 0, attr.as_mut_ptr(), 56u32, 0u32) };
        assert_eq!(done, 0, "sched_getattr: {}", std::io::Error::last_os_error());
        attr[3]
    }

    #[test]
    fn a_worker_of_a_batch_process_takes_a_short_slice_and_gives_it_back() {
        std::thread::spawn(|| {
            enter_batch();
            assert_eq!(policy_of(0), libc::SCHED_BATCH);
            // A nicer thread stays as nice: it could not lower its nice value again.
            // SAFETY: plain calls on the calling thread (Linux: a thread's own nice value).
            let nice = unsafe {
                libc::setpriority(libc::PRIO_PROCESS, 0, 5);
                libc::getpriority(libc::PRIO_PROCESS, 0)
            };
            let before = reported_slice();
            worker_slice(true);
            let short = reported_slice();
            worker_slice(false);
            let back = reported_slice();
            assert_eq!(policy_of(0), libc::SCHED_BATCH, "the policy stays batch");
            // SAFETY: a plain query of the calling thread's nice value.
            assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, nice, "the nice value stays");
            // Kernels before 6.12 report no slice for a fair task; from 6.12 on they report it.
            if short != 0 {
                assert_eq!(short, SHORT_SLICE.as_nanos() as u64);
                assert_eq!(back, before, "the default slice again");
                assert_ne!(back, short);
            }
        })
        .join()
        .unwrap();
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
