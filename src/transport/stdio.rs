//! The stdio worker: one thread per local server, all of whose pipes are non-blocking and
//! driven by one mio `Poll`. A server that stops reading its stdin, floods its stderr or
//! writes without end cannot block nod: writes wait in a queue, stderr is drained into a
//! bounded tail, and stdout is framed under the 8 MiB cap.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use mio::unix::SourceFd;
use mio::unix::pipe;
use mio::{Events, Interest, Poll, Token, Waker};

use super::child::{ChildGuard, Spawn, describe_status};
use super::{Link, Outbound, Outlet, TransportError, WorkerHandle};
use crate::jsonrpc::frame::{FrameReader, Line};
use crate::util::{JoinOnDrop, Tail};

/// How long a server gets after stdin is closed, and again after SIGTERM.
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(1000);

const STDOUT: Token = Token(0);
const STDERR: Token = Token(1);
const STDIN: Token = Token(2);
const WAKER: Token = Token(3);
const EXIT: Token = Token(4);

/// The stdout read buffer starts at `FIRST_READ` (a page) and doubles after every read that
/// fills it, up to `READ_CHUNK`: a server that answers in small frames never costs the worker
/// a mapping of its own (glibc maps 128 KiB and more with mmap, a fault a page, an munmap at
/// the end), and a big result is still read in large blocks after a few reads.
const FIRST_READ: usize = 4 * 1024;
const READ_CHUNK: usize = 256 * 1024;
/// The stderr read buffer likewise starts small and grows on full reads: most servers write
/// little there, and 16 KiB zeroed for each was four page faults a server.
const FIRST_ERR_READ: usize = 1024;
const ERR_READ: usize = 16 * 1024;

/// How far `read_stdout` reads: in the event loop, until a read comes back short (the pipe
/// was empty then); once the server has exited, until the pipe says it is empty or ended,
/// so that a last frame without its newline is still delivered.
#[derive(Clone, Copy)]
enum Drain {
    UntilShort,
    UntilEmpty,
}
/// Bytes read from stdout in one go before the worker turns to its writes: a server that
/// writes without end must not starve the answers nod owes it.
const READ_BUDGET: usize = 1024 * 1024;
/// Bytes waiting to be written before nod gives up on a server that does not read them.
const MAX_QUEUED_WRITES: usize = 32 * 1024 * 1024;
/// How long queued frames may take to go out after `Close`, before stdin is closed.
const DRAIN_GRACE: Duration = Duration::from_millis(500);
const STDERR_LINES: usize = 64;
const STDERR_SHOWN: usize = 3;

/// Starts `spec` and a new thread named `nod-stdio:<name>` that drives its pipes. Returns once
/// the process is running, or with the reason it could not start. The process is started on
/// the calling thread, so the caller does not wait for the worker's thread to come up and
/// report back (two context switches a server).
pub fn spawn(link: Link, spec: Spawn) -> Result<WorkerHandle, TransportError> {
    let io = |e: std::io::Error| TransportError::Io(e.to_string());
    let poll = Poll::new().map_err(io)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(io)?);
    let (outbox, inbox) = crossbeam_channel::unbounded();
    let name = format!("nod-stdio:{}", link.name);
    let worker = Worker::start(link, &spec, poll, inbox, waker.clone())?;
    let writer = worker.writer.clone();
    // A worker that cannot get its thread drops here: the process is killed and reaped.
    let thread = std::thread::Builder::new().name(name).spawn(move || worker.run()).map_err(io)?;
    Ok(WorkerHandle::new(Outlet::new(outbox, Some(waker)).with_sink(writer), JoinOnDrop::new(thread)))
}

enum Phase {
    Running,
    /// Closing: queued frames go out first, until the deadline.
    Draining(Instant),
    /// stdin closed; SIGTERM at the deadline.
    StdinClosed(Instant),
    /// SIGTERM sent; SIGKILL at the deadline.
    Terminated(Instant),
}

struct Worker {
    link: Link,
    name: String,
    poll: Poll,
    inbox: Receiver<Outbound>,
    child: ChildGuard,
    writer: Arc<Writer>,
    stdout: Option<pipe::Receiver>,
    stderr: Option<pipe::Receiver>,
    /// The last read stopped at its budget: stdout may hold more.
    more_stdout: bool,
    frames: FrameReader,
    tail: Tail,
    phase: Phase,
    closed_by_client: bool,
    reported: bool,
    not_json_lines: u64,
    /// Read buffers, kept so a wakeup does not allocate and zero them again.
    out_buf: Vec<u8>,
    err_buf: Vec<u8>,
    stdin_registered: bool,
}

impl Worker {
    fn start(
        link: Link,
        spec: &Spawn,
        poll: Poll,
        inbox: Receiver<Outbound>,
        waker_for_writer: Arc<Waker>,
    ) -> Result<Worker, TransportError> {
        let name = link.name.clone();
        let (child, pipes) = super::sched::normal_for(|| ChildGuard::spawn(spec)).map_err(|e| {
            TransportError::Spawn { program: spec.argv.first().cloned().unwrap_or_default(), reason: e.to_string() }
        })?;
        let io = |e: std::io::Error| TransportError::Io(e.to_string());
        let stdin = pipe::Sender::from(pipes.stdin);
        let mut stdout = pipe::Receiver::from(pipes.stdout);
        let mut stderr = pipe::Receiver::from(pipes.stderr);
        stdin.set_nonblocking(true).map_err(io)?;
        stdout.set_nonblocking(true).map_err(io)?;
        stderr.set_nonblocking(true).map_err(io)?;
        let registry = poll.registry();
        registry.register(&mut stdout, STDOUT, Interest::READABLE).map_err(io)?;
        registry.register(&mut stderr, STDERR, Interest::READABLE).map_err(io)?;
        if let Some(fd) = child.exit_fd() {
            registry.register(&mut SourceFd(&fd), EXIT, Interest::READABLE).map_err(io)?;
        }
        log::debug!("server {name}: started pid {}", child.pid());
        Ok(Worker {
            link,
            name,
            poll,
            inbox,
            child,
            writer: Arc::new(Writer {
                state: Mutex::new(WriterState { pipe: Some(stdin), ..WriterState::default() }),
                waker: waker_for_writer,
            }),
            stdout: Some(stdout),
            stderr: Some(stderr),
            more_stdout: false,
            frames: FrameReader::default(),
            tail: Tail::new(STDERR_LINES),
            phase: Phase::Running,
            closed_by_client: false,
            reported: false,
            not_json_lines: 0,
            out_buf: vec![0u8; FIRST_READ],
            err_buf: vec![0u8; FIRST_ERR_READ],
            stdin_registered: false,
        })
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(16);
        // Until when this worker looks for the next answer before it sleeps (sched::LINGER).
        let mut linger: Option<Instant> = None;
        // Whether this thread asked for a short time slice (a sequential stream runs).
        let mut short_slice = false;
        loop {
            if super::sched::in_sequential_stream() != short_slice {
                short_slice = !short_slice;
                super::sched::worker_slice(short_slice);
            }
            let mut timeout = match self.phase {
                _ if self.more_stdout => Some(Duration::ZERO),
                Phase::Running if self.child.exit_fd().is_none() => Some(Duration::from_millis(100)),
                Phase::Running => None,
                Phase::Draining(at) | Phase::StdinClosed(at) | Phase::Terminated(at) => {
                    Some(at.saturating_duration_since(Instant::now()))
                }
            };
            if let (None, Some(until)) = (timeout, linger) {
                if Instant::now() < until {
                    // Others on this CPU (the server) go first.
                    std::thread::yield_now();
                    timeout = Some(Duration::ZERO);
                } else {
                    linger = None;
                    super::sched::lingered(false);
                }
            }
            if let Err(err) = self.poll.poll(&mut events, timeout) {
                if err.kind() == ErrorKind::Interrupted {
                    continue;
                }
                self.report(TransportError::Io(err.to_string()));
                break;
            }
            let mut wake = false;
            // Without a pidfd, or once nod is ending the process, exits are found by polling.
            let mut exited =
                self.child.exit_fd().is_none() || !matches!(self.phase, Phase::Running | Phase::Draining(_));
            let mut readable = std::mem::take(&mut self.more_stdout);
            for event in events.iter() {
                match event.token() {
                    STDOUT => readable = true,
                    STDERR => self.read_stderr(),
                    STDIN => self.flush(),
                    WAKER => wake = true,
                    EXIT => exited = true,
                    _ => {}
                }
            }
            if readable {
                self.read_stdout(Drain::UntilShort);
                if linger.take().is_some() {
                    super::sched::lingered(true);
                }
                if super::sched::linger_now() {
                    linger = Some(Instant::now() + super::sched::LINGER);
                }
            }
            // After a read that stopped at its budget the waker may have fired unseen.
            if wake || self.more_stdout {
                self.drain_inbox();
            }
            if !exited && self.stdout.is_none() && !matches!(self.phase, Phase::Running) {
                exited = true;
            }
            if let Some(status) = exited.then(|| self.child.try_wait()).flatten() {
                // Whatever the server wrote before it exited is still in the pipe.
                self.read_stdout(Drain::UntilEmpty);
                self.read_stderr();
                let cause =
                    TransportError::Exited { status: describe_status(status), stderr: self.tail.summary(STDERR_SHOWN) };
                self.report(cause);
                break;
            }
            self.escalate();
        }
        // The leader is gone; anything left in its group (a grandchild holding the pipes) goes too.
        if self.child.group_alive() {
            self.child.signal_group(libc::SIGKILL);
        }
        log::debug!("server {}: worker finished", self.name);
    }

    fn drain_inbox(&mut self) {
        loop {
            match self.inbox.try_recv() {
                // Frames normally reach the writer directly; these came the long way.
                Ok(Outbound::Request { frame, .. } | Outbound::Notify { frame, .. }) => self.writer.queue(frame),
                // A pipe has no per-request stream; notifications/cancelled is the signal.
                Ok(Outbound::CancelStream(_)) => {}
                Ok(Outbound::Close) | Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    // Frames queued before the close (answers, a final notifications/cancelled)
                    // go out first, for a short while; then stdin closes.
                    self.closed_by_client = true;
                    if matches!(self.phase, Phase::Running) {
                        self.phase = Phase::Draining(Instant::now() + DRAIN_GRACE);
                    }
                    break;
                }
                Err(crossbeam_channel::TryRecvError::Empty) => break,
            }
        }
        self.flush();
    }

    /// Writes what the pipe takes, and watches for room when frames are left.
    fn flush(&mut self) {
        let mut state = self.writer.lock();
        if state.pipe.is_none() {
            return;
        }
        if let Err(err) = state.write_queued() {
            // EPIPE: the server closed its stdin or died; its exit is reported separately.
            log::debug!("server {}: write failed: {err}", self.name);
            drop(state);
            self.close_stdin();
            return;
        }
        let (empty, queued) = (state.queue.is_empty(), state.queued);
        if empty && matches!(self.phase, Phase::Draining(_)) {
            drop(state);
            self.begin_close();
            return;
        }
        if queued > MAX_QUEUED_WRITES {
            drop(state);
            self.read_stderr();
            let cause = TransportError::Stalled { stderr: self.tail.summary(STDERR_SHOWN) };
            self.report(cause);
            self.terminate();
            return;
        }
        let want_writable = !empty;
        if want_writable != self.stdin_registered
            && let Some(pipe) = state.pipe.as_mut()
        {
            let registry = self.poll.registry();
            let _ = if want_writable {
                registry.register(pipe, STDIN, Interest::WRITABLE)
            } else {
                registry.deregister(pipe)
            };
            self.stdin_registered = want_writable;
        }
    }

    fn close_stdin(&mut self) {
        let mut state = self.writer.lock();
        if let Some(mut pipe) = state.pipe.take()
            && self.stdin_registered
        {
            let _ = self.poll.registry().deregister(&mut pipe);
        }
        self.stdin_registered = false;
        state.queue.clear();
        state.written = 0;
        state.queued = 0;
    }

    fn read_stdout(&mut self, drain: Drain) {
        let Some(stdout) = self.stdout.as_mut() else {
            return;
        };
        let buf = &mut self.out_buf;
        let mut eof = false;
        let mut failure = None;
        let mut read = 0;
        loop {
            if read >= READ_BUDGET {
                self.more_stdout = true;
                break;
            }
            match stdout.read(buf) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    read += n;
                    let (link, not_json) = (&self.link, &mut self.not_json_lines);
                    let pushed = self.frames.push_owning(&buf[..n], OWN_ABOVE, |frame| deliver(link, not_json, frame));
                    if let Err(err) = pushed {
                        failure = Some(err);
                        break;
                    }
                    // A read shorter than the buffer emptied the pipe; what the server writes
                    // next raises a new edge, so the read that would say WouldBlock is skipped
                    // (one system call less per answer).
                    if n < buf.len() {
                        if matches!(drain, Drain::UntilShort) {
                            break;
                        }
                    } else if buf.len() < READ_CHUNK {
                        buf.resize(buf.len() * 2, 0);
                    }
                }
                Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    eof = true;
                    break;
                }
            }
        }
        if let Some(error) = failure {
            self.drop_stdout();
            self.read_stderr();
            self.report(TransportError::Protocol { error, stderr: self.tail.summary(STDERR_SHOWN) });
            self.terminate();
            return;
        }
        if eof {
            let (link, not_json) = (&self.link, &mut self.not_json_lines);
            let _ = self.frames.finish_owning(OWN_ABOVE, |frame| deliver(link, not_json, frame));
            self.drop_stdout();
            if self.child.try_wait().is_none() && !self.closed_by_client {
                // Give the exit a moment to be seen: most servers close stdout by exiting.
                if !self.wait_exit(Duration::from_millis(50)) {
                    self.read_stderr();
                    self.report(TransportError::StdoutClosed { stderr: self.tail.summary(STDERR_SHOWN) });
                    self.begin_close();
                }
            }
        }
    }

    fn wait_exit(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut events = Events::with_capacity(4);
        while Instant::now() < deadline {
            if self.child.try_wait().is_some() {
                return true;
            }
            let _ = self.poll.poll(
                &mut events,
                Some(Duration::from_millis(5).min(deadline.saturating_duration_since(Instant::now()))),
            );
        }
        self.child.try_wait().is_some()
    }

    fn drop_stdout(&mut self) {
        if let Some(mut stdout) = self.stdout.take() {
            let _ = self.poll.registry().deregister(&mut stdout);
        }
    }

    fn read_stderr(&mut self) {
        let Some(stderr) = self.stderr.as_mut() else {
            return;
        };
        let buf = &mut self.err_buf;
        loop {
            match stderr.read(buf) {
                Ok(0) => {
                    if let Some(mut stderr) = self.stderr.take() {
                        let _ = self.poll.registry().deregister(&mut stderr);
                    }
                    return;
                }
                Ok(n) => {
                    if log::log_enabled!(target: "nod::server", log::Level::Debug) {
                        log::debug!(target: "nod::server", "{} stderr: {}", self.name, String::from_utf8_lossy(&buf[..n]).trim_end());
                    }
                    self.tail.push(&buf[..n]);
                    if n == buf.len() && buf.len() < ERR_READ {
                        buf.resize(buf.len() * 4, 0);
                    }
                }
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        }
    }

    fn begin_close(&mut self) {
        if matches!(self.phase, Phase::Running | Phase::Draining(_)) {
            self.close_stdin();
            self.phase = Phase::StdinClosed(Instant::now() + SHUTDOWN_GRACE);
        }
    }

    fn terminate(&mut self) {
        self.close_stdin();
        self.child.signal_group(libc::SIGTERM);
        self.phase = Phase::Terminated(Instant::now() + SHUTDOWN_GRACE);
    }

    fn escalate(&mut self) {
        let now = Instant::now();
        match self.phase {
            Phase::Draining(at) if now >= at => {
                log::debug!("server {}: {} bytes not written before the close", self.name, self.writer.lock().queued);
                self.begin_close();
            }
            Phase::StdinClosed(at) if now >= at => {
                log::debug!("server {}: still running after stdin closed; sending SIGTERM", self.name);
                self.terminate();
            }
            Phase::Terminated(at) if now >= at => {
                log::debug!("server {}: still running after SIGTERM; sending SIGKILL", self.name);
                self.child.kill_and_reap();
            }
            _ => {}
        }
    }

    fn report(&mut self, cause: TransportError) {
        if self.reported {
            return;
        }
        self.reported = true;
        let cause = if self.closed_by_client { TransportError::ClosedByClient } else { cause };
        self.link.closed(cause);
    }
}

/// The server's stdin, shared by the worker and the threads that send to it. A caller whose
/// frame has nothing queued before it writes the frame itself, which saves waking the worker
/// (the larger part of a call's cost); what the pipe does not take waits in the queue, and
/// the worker writes it when the pipe has room. Order is kept: one queue, one lock.
pub(super) struct Writer {
    state: Mutex<WriterState>,
    waker: Arc<Waker>,
}

#[derive(Default)]
struct WriterState {
    pipe: Option<pipe::Sender>,
    queue: VecDeque<Vec<u8>>,
    /// Bytes of the queue's first frame already written.
    written: usize,
    /// Bytes in the queue not yet written.
    queued: usize,
    /// A caller's write failed (the pipe broke): the worker closes stdin.
    broken: bool,
}

impl Writer {
    fn lock(&self) -> std::sync::MutexGuard<'_, WriterState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues a frame without writing (the worker's own path).
    fn queue(&self, frame: Vec<u8>) {
        let mut state = self.lock();
        if state.pipe.is_some() {
            state.queued += frame.len();
            state.queue.push_back(frame);
        }
    }
}

impl super::FrameSink for Writer {
    fn send_frame(&self, frame: Vec<u8>, queued: &mut dyn FnMut()) {
        let mut state = self.lock();
        if state.pipe.is_none() || state.broken {
            drop(state);
            return queued();
        }
        let first = state.queue.is_empty();
        state.queued += frame.len();
        state.queue.push_back(frame);
        queued();
        if first && state.write_queued().is_err() {
            state.broken = true;
        }
        let wake = !state.queue.is_empty() || state.broken;
        drop(state);
        if wake {
            let _ = self.waker.wake();
        }
    }
}

impl WriterState {
    /// Writes queued frames until the pipe is full or the queue empty.
    fn write_queued(&mut self) -> std::io::Result<()> {
        if self.broken {
            return Err(std::io::Error::from(ErrorKind::BrokenPipe));
        }
        let Some(pipe) = self.pipe.as_mut() else { return Ok(()) };
        while let Some(front) = self.queue.front() {
            match pipe.write(&front[self.written..]) {
                Ok(n) => {
                    self.written += n;
                    self.queued -= n;
                    if self.written == front.len() {
                        self.queue.pop_front();
                        self.written = 0;
                    }
                }
                Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == ErrorKind::Interrupted => continue,
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }
}

/// A frame longer than this leaves the frame reader as the buffer it was read into
/// (`Line::Owned`), not as a copy.
const OWN_ABOVE: usize = 64 * 1024;

/// A plain answer goes to its caller as text, to be read there (`dispatch::Finished`): a
/// small one as a copy of the frame, a big one as the reader's own buffer. Its caller may
/// write a big result out of that text without ever building its value (`nod mcp tool call`),
/// which spares a second copy of the result and the memory for it.
fn deliver(link: &Link, not_json: &mut u64, line: Line<'_>) {
    let name = &link.name;
    let frame = line.as_str();
    if let Some((id, span)) = crate::jsonrpc::answer_span(frame) {
        if log::log_enabled!(target: "nod::wire", log::Level::Trace) {
            log::trace!(target: "nod::wire", "< {name} {frame}");
        }
        let frame = match line {
            Line::Owned(frame) => frame,
            Line::Borrowed(frame) => frame.to_owned(),
        };
        link.deliver_answer(id, frame, span);
        return;
    }
    match crate::jsonrpc::decode_text(frame, true) {
        Ok(msgs) => {
            if log::log_enabled!(target: "nod::wire", log::Level::Trace) {
                log::trace!(target: "nod::wire", "< {name} {frame}");
            }
            let batch = frame.starts_with('[');
            link.deliver(msgs, batch);
        }
        Err(err) => {
            *not_json += 1;
            if *not_json <= 3 {
                log::warn!("server {name} wrote {err} on stdout; ignored");
            } else {
                log::debug!("server {name} wrote {err} on stdout; ignored");
            }
        }
    }
}
