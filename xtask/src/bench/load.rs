//! Load generators, all inside the bed's client namespace (threads that `setns()` there, or worker
//! processes that do so before opening anything):
//! - `connect_load`: short TCP connects to the VIP as fast as the machine allows for a fixed time.
//!   Non-blocking connects, many in flight per thread (epoll); an answered connect is closed at once
//!   with `SO_LINGER` 0 (RST, no `TIME_WAIT`); one with no answer after `timeout` is closed and counted as
//!   a failure (those went to the dropping backend).
//! - `flood_worker`: many distinct SYNs to the dropping backend, sockets held open for a while.
//! - `black_holed_connect`: one connect to the dropping backend, timed, for detection latency.
use std::{
    collections::VecDeque,
    io::{BufRead as _, Write as _},
    net::SocketAddrV4,
    os::fd::RawFd,
    path::{Path, PathBuf},
    time::{Duration, Instant},
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
    let handles: Vec<_> = (0..cfg.threads)
        .map(|i| {
            let ns = ns.to_path_buf();
            // Each thread cycles through its own share of the source ports.
            let span = (65_535 - 1024) / cfg.threads as u32;
            let ports = (1024 + i as u32 * span) as u16..(1024 + (i as u32 + 1) * span) as u16;
            std::thread::Builder::new()
                .name(format!("bench-load{i}"))
                .spawn(move || -> anyhow::Result<LoadResult> {
                    testbed::enter(&ns)?;
                    load_thread(target, cfg, ports)
                })
                .context("spawning a load thread")
        })
        .collect::<anyhow::Result<_>>()?;
    let mut total = LoadResult::default();
    let mut first_error = None;
    for h in handles {
        match h.join() {
            Ok(Ok(r)) => total.add(&r),
            Ok(Err(e)) => first_error = first_error.or(Some(e)),
            Err(_) => {
                first_error =
                    first_error.or_else(|| Some(anyhow::anyhow!("a load thread panicked")));
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(total),
    }
}

struct Slot {
    fd: RawFd,
    generation: u32,
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
) -> anyhow::Result<LoadResult> {
    let mut port = (ports.clone(), ports.start);
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
                match start_connect(epfd, target, i, generation, || next_port(&mut port)) {
                    Ok(Some(fd)) => {
                        slots[i] = Some(Slot { fd, generation });
                        deadlines.push_back((i, generation, Instant::now() + cfg.timeout));
                    }
                    Ok(None) => {
                        result.ok += 1;
                        free.push(i);
                        break;
                    }
                    Err(_) => {
                        result.errors += 1;
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
        for ev in events.iter().take(usize::try_from(n).unwrap_or(0)) {
            let (i, g) = ((ev.u64 & 0xffff_ffff) as usize, (ev.u64 >> 32) as u32);
            let Some(slot) = slots.get_mut(i).and_then(Option::take) else {
                continue;
            };
            if slot.generation != g {
                slots[i] = Some(slot);
                continue;
            }
            if socket_error(slot.fd) == 0 {
                result.ok += 1;
            } else {
                result.errors += 1;
            }
            close(slot.fd);
            free.push(i);
        }
        let now = Instant::now();
        while let Some(&(i, g, deadline)) = deadlines.front() {
            if deadline > now {
                break;
            }
            deadlines.pop_front();
            if slots[i].as_ref().is_some_and(|s| s.generation == g)
                && let Some(slot) = slots[i].take()
            {
                close(slot.fd);
                result.timed_out += 1;
                free.push(i);
            }
        }
    }
    for slot in slots.iter_mut().filter_map(Option::take) {
        close(slot.fd);
        result.cut += 1;
    }
    result.elapsed = load_end
        .saturating_duration_since(start)
        .min(start.elapsed());
    Ok(result)
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

/// Starts one non-blocking connect from a source port `next_port` gives. `Ok(Some(fd))`: in
/// progress, registered with epoll; `Ok(None)`: connected at once (and closed).
fn start_connect(
    epfd: RawFd,
    target: SocketAddrV4,
    slot: usize,
    generation: u32,
    mut next_port: impl FnMut() -> u16,
) -> std::io::Result<Option<RawFd>> {
    let fd = nonblocking_socket()?;
    let mut bound = Err(std::io::Error::from_raw_os_error(libc::EADDRINUSE));
    // A port still held by an earlier socket is skipped; bounded tries.
    for _ in 0..16 {
        bound = bind_port(fd, next_port());
        if bound.is_ok() {
            break;
        }
    }
    if let Err(e) = bound {
        close(fd);
        return Err(e);
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
    match connect(fd, target) {
        Ok(()) => {
            close(fd);
            Ok(None)
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
                return Err(e);
            }
            Ok(Some(fd))
        }
        Err(e) => {
            close(fd);
            Err(e)
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
