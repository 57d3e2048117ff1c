//! Load generators, all inside the bed's client namespace (threads that `setns()` there, or worker
//! processes that do so before opening anything):
//! - `connect_load`: short TCP connects to the VIP as fast as the machine allows for a fixed time.
//!   Non-blocking connects, many in flight per thread (epoll); an answered connect is closed at once
//!   with `SO_LINGER` 0 (RST, no `TIME_WAIT`); one with no answer after `timeout` is closed and counted as
//!   a failure (those went to the dropping backend). `connect_load_flows` also returns each failed
//!   connect (source port, times, how it failed) to be matched with the tracer's records one by one.
//! - `flood_worker`: many distinct SYNs to the dropping backend, sockets held open for a while.
//! - `black_holed_connect`: one connect to the dropping backend, timed, for detection latency.
use std::{
    collections::VecDeque,
    io::{BufRead as _, Write as _},
    net::SocketAddrV4,
    os::fd::RawFd,
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime},
};

use anyhow::{Context as _, bail};

use super::{interrupted, testbed};

#[derive(Debug, Default, Clone, Copy)]
pub struct LoadResult {
    /// Connects answered (SYN-ACK) in time.
    pub ok: u64,
    /// Connects with no answer within the timeout (the black hole).
    pub timed_out: u64,
    /// Connects that failed with an error (refused, unreachable, no free port, ...).
    pub errors: u64,
    /// Connects still open when the drain period ended (closed without a verdict).
    pub cut: u64,
    /// From the first connect to the end of the load period.
    pub elapsed: Duration,
}

impl LoadResult {
    /// Finished connects (answered or failed) per second.
    pub fn rate(&self) -> f64 {
        (self.ok + self.timed_out + self.errors) as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    pub fn failed(&self) -> u64 {
        self.timed_out + self.errors
    }

    fn add(&mut self, o: &LoadResult) {
        self.ok += o.ok;
        self.timed_out += o.timed_out;
        self.errors += o.errors;
        self.cut += o.cut;
        self.elapsed = self.elapsed.max(o.elapsed);
    }
}

/// One connect the load counted as failed, as the tracer's records can be matched with it: the
/// source address is the load's client address and `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailedConnect {
    /// The source port it was bound to; `None` when no port could be bound (nothing was sent).
    pub port: Option<u16>,
    /// When `connect()` was called and when the load closed the socket (wall clock, as records).
    pub started: SystemTime,
    pub ended: SystemTime,
    pub how: Failure,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No answer seen within the timeout. `tcp_state` is the socket's state (`TCP_INFO`) as the load
    /// closed it (`TCP_SYN_SENT`, or `TCP_ESTABLISHED` when the answer came as the load gave up, its
    /// readiness not yet read) and `syns` the SYNs it had sent (1 + its retransmits).
    TimedOut { tcp_state: u8, syns: u32 },
    /// `connect()` or the socket's `SO_ERROR` gave this errno.
    Error(i32),
    /// No connect was made: `socket()` or `bind()` failed with this errno.
    NotStarted(i32),
}

#[derive(Debug, Clone, Copy)]
pub struct LoadConfig {
    pub threads: usize,
    /// Connects in flight per thread.
    pub inflight: usize,
    pub duration: Duration,
    /// How long a connect may wait for its answer.
    pub timeout: Duration,
    /// Connects started per second over all threads; None: as fast as the machine allows.
    pub rate: Option<f64>,
}

/// Runs the connect load from `threads` threads in namespace `ns` against `target`.
pub fn connect_load(
    ns: &Path,
    target: SocketAddrV4,
    cfg: LoadConfig,
) -> anyhow::Result<LoadResult> {
    Ok(run_threads(ns, target, cfg, false)?.0)
}

/// As [`connect_load`], and every failed connect, one by one.
pub fn connect_load_flows(
    ns: &Path,
    target: SocketAddrV4,
    cfg: LoadConfig,
) -> anyhow::Result<(LoadResult, Vec<FailedConnect>)> {
    run_threads(ns, target, cfg, true)
}

fn run_threads(
    ns: &Path,
    target: SocketAddrV4,
    cfg: LoadConfig,
    keep_failures: bool,
) -> anyhow::Result<(LoadResult, Vec<FailedConnect>)> {
    let handles: Vec<_> = (0..cfg.threads)
        .map(|i| {
            let ns = ns.to_path_buf();
            // Each thread cycles through its own share of the source ports.
            let span = (65_535 - 1024) / cfg.threads as u32;
            let ports = (1024 + i as u32 * span) as u16..(1024 + (i as u32 + 1) * span) as u16;
            std::thread::Builder::new()
                .name(format!("bench-load{i}"))
                .spawn(
                    move || -> anyhow::Result<(LoadResult, Vec<FailedConnect>)> {
                        testbed::enter(&ns)?;
                        load_thread(target, cfg, ports, keep_failures)
                    },
                )
                .context("spawning a load thread")
        })
        .collect::<anyhow::Result<_>>()?;
    let mut total = LoadResult::default();
    let mut failures = Vec::new();
    let mut first_error = None;
    for h in handles {
        match h.join() {
            Ok(Ok((r, f))) => {
                total.add(&r);
                failures.extend(f);
            }
            Ok(Err(e)) => first_error = first_error.or(Some(e)),
            Err(_) => {
                first_error =
                    first_error.or_else(|| Some(anyhow::anyhow!("a load thread panicked")));
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok((total, failures)),
    }
}

struct Slot {
    fd: RawFd,
    generation: u32,
    port: u16,
    started: SystemTime,
}

/// One thread's loop: keep `inflight` connects open, for `duration`, then drain (bounded).
///
/// Source ports are chosen here, round-robin over `ports`, not by the kernel: the kernel reuses a
/// freed port within a few connects, and a port whose last SYN went to the dropping backend still has
/// a `SYN_SENT` conntrack entry in the node, so its next connect would be sent to the black hole
/// again (conntrack keeps the DNAT of the entry). That would make failures pile up far beyond the
/// configured share. Cycling through ~32k ports gives entries seconds to expire.
fn load_thread(
    target: SocketAddrV4,
    cfg: LoadConfig,
    ports: std::ops::Range<u16>,
    keep_failures: bool,
) -> anyhow::Result<(LoadResult, Vec<FailedConnect>)> {
    let mut port = (ports.clone(), ports.start);
    let mut failures = Failures {
        keep: keep_failures,
        list: Vec::new(),
    };
    // SAFETY: epoll_create1(2); the fd is closed by the guard below.
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epfd < 0 {
        bail!("epoll_create1: {}", std::io::Error::last_os_error());
    }
    let _epoll = FdGuard(epfd);
    let mut slots: Vec<Option<Slot>> = (0..cfg.inflight).map(|_| None).collect();
    let mut free: Vec<usize> = (0..cfg.inflight).rev().collect();
    let mut deadlines: VecDeque<(usize, u32, Instant)> = VecDeque::with_capacity(cfg.inflight);
    let mut generation = 0u32;
    let mut result = LoadResult::default();
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    let start = Instant::now();
    let load_end = start + cfg.duration;
    // Connects in flight at the end get their timeout to finish, then are cut.
    let hard_end = load_end + cfg.timeout + Duration::from_millis(200);
    let mut pacer = Pacer::new(&cfg, start);
    let in_flight = |slots: &[Option<Slot>]| slots.iter().any(Option::is_some);

    loop {
        let now = Instant::now();
        let loading = now < load_end && !interrupted();
        if !loading && (!in_flight(&slots) || now >= hard_end || interrupted()) {
            break;
        }
        if loading {
            while let Some(i) = free.pop() {
                if !pacer.may_start() {
                    free.push(i);
                    break;
                }
                generation = generation.wrapping_add(1);
                let started = SystemTime::now();
                match start_connect(epfd, target, i, generation, || next_port(&mut port)) {
                    Started::Pending { fd, port } => {
                        slots[i] = Some(Slot {
                            fd,
                            generation,
                            port,
                            started,
                        });
                        deadlines.push_back((i, generation, Instant::now() + cfg.timeout));
                    }
                    Started::Connected => {
                        result.ok += 1;
                        free.push(i);
                        break;
                    }
                    Started::Failed { port, error } => {
                        result.errors += 1;
                        let errno = error.raw_os_error().unwrap_or(0);
                        let how = if port.is_some() {
                            Failure::Error(errno)
                        } else {
                            Failure::NotStarted(errno)
                        };
                        failures.push(port, started, how);
                        free.push(i);
                        break;
                    }
                }
            }
        }
        // SAFETY: epoll_wait(2) into our buffer of `events.len()` entries.
        let n = unsafe {
            libc::epoll_wait(
                epfd,
                events.as_mut_ptr(),
                i32::try_from(events.len()).unwrap_or(i32::MAX),
                2,
            )
        };
        let ready = events.iter().take(usize::try_from(n).unwrap_or(0));
        free.extend(settle(ready, &mut slots, &mut result, &mut failures));
        let timed_out = expire(&mut deadlines, &mut slots, &mut failures);
        result.timed_out += timed_out.len() as u64;
        free.extend(timed_out);
    }
    for slot in slots.iter_mut().filter_map(Option::take) {
        close(slot.fd);
        result.cut += 1;
    }
    result.elapsed = load_end
        .saturating_duration_since(start)
        .min(start.elapsed());
    Ok((result, failures.list))
}

/// A load thread's failed connects, kept only when asked for.
struct Failures {
    keep: bool,
    list: Vec<FailedConnect>,
}

impl Failures {
    /// A failure of a connect started at `started`, ending now.
    fn push(&mut self, port: Option<u16>, started: SystemTime, how: Failure) {
        if self.keep {
            self.list.push(FailedConnect {
                port,
                started,
                ended: SystemTime::now(),
                how,
            });
        }
    }
}

/// Counts and closes the connects epoll says are done (answered or failed); returns their slots,
/// now free.
fn settle<'a>(
    ready: impl Iterator<Item = &'a libc::epoll_event>,
    slots: &mut [Option<Slot>],
    result: &mut LoadResult,
    failures: &mut Failures,
) -> Vec<usize> {
    let mut freed = Vec::new();
    for ev in ready {
        let (i, g) = ((ev.u64 & 0xffff_ffff) as usize, (ev.u64 >> 32) as u32);
        let Some(slot) = slots.get_mut(i).and_then(Option::take) else {
            continue;
        };
        if slot.generation != g {
            slots[i] = Some(slot);
            continue;
        }
        match socket_error(slot.fd) {
            0 => result.ok += 1,
            errno => {
                result.errors += 1;
                failures.push(Some(slot.port), slot.started, Failure::Error(errno));
            }
        }
        close(slot.fd);
        freed.push(i);
    }
    freed
}

/// Closes the connects whose deadline passed unanswered; returns their slots, now free.
fn expire(
    deadlines: &mut VecDeque<(usize, u32, Instant)>,
    slots: &mut [Option<Slot>],
    failures: &mut Failures,
) -> Vec<usize> {
    let now = Instant::now();
    let mut freed = Vec::new();
    while let Some(&(i, g, deadline)) = deadlines.front() {
        if deadline > now {
            break;
        }
        deadlines.pop_front();
        if slots[i].as_ref().is_some_and(|s| s.generation == g)
            && let Some(slot) = slots[i].take()
        {
            // Read just before the close: an answer racing the deadline shows here.
            let (tcp_state, syns) = tcp_state_and_syns(slot.fd);
            close(slot.fd);
            failures.push(
                Some(slot.port),
                slot.started,
                Failure::TimedOut { tcp_state, syns },
            );
            freed.push(i);
        }
    }
    freed
}

/// The next source port of `range`, round-robin (`cursor` is the one to hand out).
fn next_port((range, cursor): &mut (std::ops::Range<u16>, u16)) -> u16 {
    let p = *cursor;
    *cursor = if p + 1 >= range.end {
        range.start
    } else {
        p + 1
    };
    p
}

/// A thread's share of a paced rate: one start per interval; after a wait, the missed starts come in
/// a burst so the mean rate holds.
struct Pacer {
    interval: Option<Duration>,
    next: Instant,
}

impl Pacer {
    fn new(cfg: &LoadConfig, start: Instant) -> Pacer {
        Pacer {
            interval: cfg
                .rate
                .map(|r| Duration::from_secs_f64(cfg.threads as f64 / r.max(1.0))),
            next: start,
        }
    }

    /// Whether a connect may start now (and then counts it).
    fn may_start(&mut self) -> bool {
        let Some(interval) = self.interval else {
            return true;
        };
        if Instant::now() < self.next {
            return false;
        }
        self.next += interval;
        true
    }
}

/// What `start_connect` did.
enum Started {
    /// In progress from `port`, registered with epoll.
    Pending { fd: RawFd, port: u16 },
    /// Connected at once (and closed).
    Connected,
    /// Failed; `port` is the source port it was bound to, if it got that far.
    Failed {
        port: Option<u16>,
        error: std::io::Error,
    },
}

/// Starts one non-blocking connect from a source port `next_port` gives.
fn start_connect(
    epfd: RawFd,
    target: SocketAddrV4,
    slot: usize,
    generation: u32,
    mut next_port: impl FnMut() -> u16,
) -> Started {
    let fd = match nonblocking_socket() {
        Ok(fd) => fd,
        Err(error) => return Started::Failed { port: None, error },
    };
    let mut bound = Err(std::io::Error::from_raw_os_error(libc::EADDRINUSE));
    let mut port = 0;
    // A port still held by an earlier socket is skipped; bounded tries.
    for _ in 0..16 {
        port = next_port();
        bound = bind_port(fd, port);
        if bound.is_ok() {
            break;
        }
    }
    if let Err(error) = bound {
        close(fd);
        return Started::Failed { port: None, error };
    }
    // An RST on close: the connect is done, and no TIME_WAIT piles up on either side.
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt(2) with a pointer to a linger struct we own and its exact size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    let failed = |error| Started::Failed {
        port: Some(port),
        error,
    };
    match connect(fd, target) {
        Ok(()) => {
            close(fd);
            Started::Connected
        }
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
            let mut ev = libc::epoll_event {
                events: (libc::EPOLLOUT | libc::EPOLLONESHOT) as u32,
                u64: (u64::from(generation) << 32) | slot as u64,
            };
            // SAFETY: epoll_ctl(2) adding an fd we own with an event struct we own.
            if unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, &raw mut ev) } != 0 {
                let e = std::io::Error::last_os_error();
                close(fd);
                return failed(e);
            }
            Started::Pending { fd, port }
        }
        Err(e) => {
            close(fd);
            failed(e)
        }
    }
}

fn nonblocking_socket() -> std::io::Result<RawFd> {
    // SAFETY: socket(2) with constant arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

fn bind_port(fd: RawFd, port: u16) -> std::io::Result<()> {
    let addr = sockaddr_in(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, port));
    // SAFETY: bind(2) with a sockaddr_in we own and its exact size.
    checked(unsafe { libc::bind(fd, (&raw const addr).cast(), SOCKADDR_IN_LEN) })
}

fn connect(fd: RawFd, target: SocketAddrV4) -> std::io::Result<()> {
    let addr = sockaddr_in(target);
    // SAFETY: connect(2) with a sockaddr_in we own and its exact size.
    checked(unsafe { libc::connect(fd, (&raw const addr).cast(), SOCKADDR_IN_LEN) })
}

const SOCKADDR_IN_LEN: libc::socklen_t = size_of::<libc::sockaddr_in>() as libc::socklen_t;

fn sockaddr_in(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// A libc return code as a Result: 0 is success, anything else is errno.
fn checked(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn socket_error(fd: RawFd) -> i32 {
    let mut err: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt(2) writing at most `len` bytes into `err`, which we own.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&raw mut err).cast(),
            &raw mut len,
        )
    };
    if rc != 0 { -1 } else { err }
}

/// The socket's TCP state and the SYNs it sent (1 + its retransmits, while it sent nothing else),
/// from `TCP_INFO`; `(0, 0)` if that cannot be read.
fn tcp_state_and_syns(fd: RawFd) -> (u8, u32) {
    // SAFETY: tcp_info is plain integers: all-zero is valid.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt(2) writing at most `len` bytes into `info`, which we own.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return (0, 0);
    }
    (info.tcpi_state, info.tcpi_total_retrans + 1)
}

/// Local port of a socket (assigned by `connect()`).
fn local_port(fd: RawFd) -> Option<u16> {
    // SAFETY: an all-zero sockaddr_in is valid; getsockname(2) writes at most `len` bytes into it.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: see above.
    let rc = unsafe { libc::getsockname(fd, (&raw mut addr).cast(), &raw mut len) };
    (rc == 0).then(|| u16::from_be(addr.sin_port))
}

fn close(fd: RawFd) {
    // SAFETY: closing an fd this module opened and owns.
    unsafe { libc::close(fd) };
}

struct FdGuard(RawFd);
impl Drop for FdGuard {
    fn drop(&mut self) {
        close(self.0);
    }
}

/// A connect to the dropping backend that stays in `SYN_SENT` until dropped (closed then).
pub struct PendingConnect {
    fd: RawFd,
    pub local_port: u16,
    pub started: Instant,
}

impl Drop for PendingConnect {
    fn drop(&mut self) {
        close(self.fd);
    }
}

/// One non-blocking connect from the calling thread (already in the client namespace).
pub fn black_holed_connect(target: SocketAddrV4) -> anyhow::Result<PendingConnect> {
    let fd = nonblocking_socket()?;
    let started = Instant::now();
    match connect(fd, target) {
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
        other => {
            close(fd);
            bail!("connect to the dropping backend {target} did not stay pending: {other:?}");
        }
    }
    let Some(local_port) = local_port(fd) else {
        close(fd);
        bail!(
            "getsockname after connect: {}",
            std::io::Error::last_os_error()
        );
    };
    Ok(PendingConnect {
        fd,
        local_port,
        started,
    })
}

/// Flood worker processes: each holds up to `per_worker` unanswered connects (the fd limit is per
/// process and cannot be raised here). Killed and reaped on Drop, which closes their sockets.
pub struct Flood {
    workers: Vec<std::process::Child>,
    pub opened: u64,
    pub failed: u64,
}

/// Sockets a worker opens: below the hard fd limit (20,000 here) with room for the process's own.
pub const PER_WORKER: u64 = 19_000;

impl Flood {
    /// Starts workers until `total` connects are pending, each to its own flood port (so every
    /// 4-tuple is distinct with one source address). Returns once every worker reported.
    pub fn start(ns: &Path, total: u64) -> anyhow::Result<Flood> {
        let exe = std::env::current_exe().context("locating the xtask binary")?;
        let mut flood = Flood {
            workers: Vec::new(),
            opened: 0,
            failed: 0,
        };
        let mut left = total;
        let mut port = testbed::FLOOD_PORTS.start;
        while left > 0 {
            if port >= testbed::FLOOD_PORTS.end {
                bail!("not enough flood ports for {total} connects");
            }
            let count = left.min(PER_WORKER);
            let child = std::process::Command::new(&exe)
                .args([
                    "bench-flood-worker",
                    &ns.display().to_string(),
                    &port.to_string(),
                    &count.to_string(),
                ])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .context("starting a flood worker")?;
            flood.workers.push(child);
            left -= count;
            port += 1;
        }
        for w in &mut flood.workers {
            let out = w.stdout.take().context("flood worker stdout")?;
            let mut line = String::new();
            // The worker prints one line when its sockets are open (bounded by its own timeouts).
            std::io::BufReader::new(out).read_line(&mut line)?;
            let mut parts = line.split_whitespace().skip(1).map(str::parse::<u64>);
            match (parts.next(), parts.next()) {
                (Some(Ok(opened)), Some(Ok(failed))) => {
                    flood.opened += opened;
                    flood.failed += failed;
                }
                _ => bail!("flood worker reported {line:?}"),
            }
        }
        Ok(flood)
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        for w in &mut self.workers {
            // Closing stdin tells the worker to close its sockets and exit; kill if it does not.
            drop(w.stdin.take());
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for w in &mut self.workers {
            while Instant::now() < deadline && matches!(w.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// `xtask bench-flood-worker NS PORT COUNT`: opens COUNT non-blocking connects from namespace NS to
/// the dropping backend's PORT, prints `ready OPENED FAILED`, holds them until stdin closes (at most
/// 60 s), then exits (the kernel closes them).
pub fn flood_worker(ns: &str, port: u16, count: u64) -> anyhow::Result<()> {
    testbed::enter(&PathBuf::from(ns))?;
    raise_fd_limit();
    let target = SocketAddrV4::new(testbed::DROPPING_BACKEND, port);
    let mut fds = Vec::with_capacity(usize::try_from(count)?);
    let mut failed = 0u64;
    let deadline = Instant::now() + Duration::from_secs(30);
    for _ in 0..count {
        if Instant::now() > deadline {
            break;
        }
        match nonblocking_socket() {
            Ok(fd) => match connect(fd, target) {
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => fds.push(FdGuard(fd)),
                _ => {
                    close(fd);
                    failed += 1;
                }
            },
            Err(_) => failed += 1,
        }
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "ready {} {failed}", fds.len())?;
    stdout.flush()?;
    drop(stdout);
    // Hold until the parent closes our stdin (or 60 s pass: the parent died).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = std::io::stdin().read_line(&mut sink);
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(Duration::from_mins(1));
    drop(fds);
    Ok(())
}

fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit(2) on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &raw const lim);
        }
    }
}
