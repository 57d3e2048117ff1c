//! A single thread, pinned to one CPU inside a bed namespace, that connects to its own loopback
//! listener, accepts, and closes both ends (the client with a RST, so no `TIME_WAIT` piles up),
//! as many times as asked. On loopback the handshake's packets are processed in softirq on the
//! same CPU, in the thread's own context: its CPU time is the whole cost of a connect, the
//! tracer's programs included (and what its CPU's `ksoftirqd` took over). The thread lives across
//! rounds, so every round runs on the same listener, CPU and warm caches, at nice -20 so the rest
//! of a shared machine preempts it less.
use std::{
    net::{Ipv4Addr, SocketAddrV4, TcpListener},
    os::fd::{AsRawFd as _, RawFd},
    path::Path,
    sync::mpsc,
    thread::JoinHandle,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use super::{cpu_time, interrupted, testbed};

/// Connects per batch: a round's CPU time is read once per batch, and its figure is the mean of its
/// cheapest tenth of batches. Other work on a shared machine only ever adds to a batch (a
/// preemption that leaves the caches cold, an interrupt landing on the thread), and it comes and
/// goes within a round: the cheapest batches are the connect's own cost, while the tracer's
/// programs run on every connect of every batch. A tenth, not the single cheapest, so that one
/// lucky batch does not set the round.
pub const BATCH: u64 = 100;

/// One round of the loop.
#[derive(Debug, Clone)]
pub struct LoopRound {
    pub connects: u64,
    /// CPU time per batch of `BATCH` connects: the loop thread's (softirq work in its context
    /// included) plus its CPU's softirq thread's.
    pub batches: Vec<Duration>,
    pub wall: Duration,
}

impl LoopRound {
    fn ns_per_connect(&self) -> Vec<f64> {
        self.batches
            .iter()
            .map(|d| d.as_nanos() as f64 / BATCH as f64)
            .collect()
    }

    /// The mean CPU time per connect of the cheapest tenth of the batches (at least one), ns.
    pub fn cheapest_ns_per_connect(&self) -> f64 {
        let mut per = self.ns_per_connect();
        per.sort_by(f64::total_cmp);
        let n = (per.len() / 10).max(1);
        per.iter().take(n).sum::<f64>() / n as f64
    }

    /// The median batch's CPU time per connect, ns.
    pub fn median_ns_per_connect(&self) -> f64 {
        super::report::median(&self.ns_per_connect())
    }
}

pub struct LoopbackLoop {
    commands: Option<mpsc::Sender<u64>>,
    results: mpsc::Receiver<anyhow::Result<LoopRound>>,
    thread: Option<JoinHandle<()>>,
    /// What reading the loop's CPU time once costs (two clocks), measured on its thread at start:
    /// each batch pays it twice, in every arm alike.
    pub clock_read: Duration,
}

impl LoopbackLoop {
    /// Starts the thread in namespace `ns`, pinned to `cpu`, with its listener bound.
    pub fn start(ns: &Path, cpu: usize) -> anyhow::Result<LoopbackLoop> {
        let softirq_thread = cpu_time::ksoftirqd(cpu)?;
        let (command_tx, command_rx) = mpsc::channel::<u64>();
        let (ready_tx, ready_rx) = mpsc::channel::<anyhow::Result<Duration>>();
        let (result_tx, result_rx) = mpsc::channel();
        let ns = ns.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("bench-loopback".into())
            .spawn(move || {
                let listener = testbed::enter(&ns)
                    .and_then(|()| cpu_time::pin_this_thread(cpu))
                    .and_then(|()| cpu_time::favour_this_thread())
                    .and_then(|()| {
                        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("loopback listener")
                    })
                    .and_then(|l| Ok((cpu_time::clock_read_cost(softirq_thread)?, l)));
                let listener = match listener {
                    Ok((cost, l)) => {
                        let _ = ready_tx.send(Ok(cost));
                        l
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let Ok(std::net::SocketAddr::V4(addr)) = listener.local_addr() else {
                    let _ = result_tx.send(Err(anyhow::anyhow!("listener has no IPv4 address")));
                    return;
                };
                while let Ok(n) = command_rx.recv() {
                    let round = one_round(listener.as_raw_fd(), addr, n, softirq_thread);
                    if result_tx.send(round).is_err() {
                        return;
                    }
                }
            })
            .context("spawning the loopback thread")?;
        let clock_read = ready_rx
            .recv()
            .context("the loopback thread died at start")??;
        Ok(LoopbackLoop {
            commands: Some(command_tx),
            results: result_rx,
            thread: Some(thread),
            clock_read,
        })
    }

    /// Runs `connects` connect/accept/close cycles and returns what they took.
    pub fn run(&self, connects: u64) -> anyhow::Result<LoopRound> {
        self.commands
            .as_ref()
            .context("loopback thread stopped")?
            .send(connects)
            .context("the loopback thread has exited")?;
        self.results
            .recv()
            .context("the loopback thread has exited")?
    }
}

impl Drop for LoopbackLoop {
    fn drop(&mut self) {
        // Closing the command channel ends the thread's loop.
        self.commands = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `n` connects, rounded up to whole batches.
fn one_round(
    listener: RawFd,
    addr: SocketAddrV4,
    n: u64,
    softirq_thread: u32,
) -> anyhow::Result<LoopRound> {
    let cpu_now = || -> anyhow::Result<Duration> {
        Ok(cpu_time::this_thread()? + cpu_time::process(softirq_thread)?)
    };
    let started = Instant::now();
    let mut batches = Vec::new();
    let mut done = 0;
    while done < n {
        if interrupted() {
            bail!("interrupted");
        }
        let before = cpu_now()?;
        for _ in 0..BATCH {
            connect_accept_close(listener, addr)
                .with_context(|| format!("loopback connect {} of {n}", done + 1))?;
            done += 1;
        }
        batches.push(cpu_now()?.saturating_sub(before));
    }
    Ok(LoopRound {
        connects: done,
        batches,
        wall: started.elapsed(),
    })
}

fn connect_accept_close(listener: RawFd, addr: SocketAddrV4) -> std::io::Result<()> {
    // SAFETY: socket(2) with constant arguments; the fd is closed below on every path.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let result = (|| {
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt(2) with a linger struct we own and its exact size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&raw const linger).cast(),
                size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let sa = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: addr.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(*addr.ip()).to_be(),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: connect(2) with a sockaddr_in we own and its exact size.
        let rc = unsafe {
            libc::connect(
                fd,
                (&raw const sa).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: accept4(2) on our blocking listener; null address pointers are allowed.
        let conn = unsafe {
            libc::accept4(
                listener,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            )
        };
        if conn < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The client first: its RST ends the accepted socket too.
        // SAFETY: closing the fd socket(2) gave us; not used after.
        unsafe { libc::close(fd) };
        // SAFETY: closing the fd accept4 just gave us.
        unsafe { libc::close(conn) };
        Ok(())
    })();
    if result.is_err() {
        // SAFETY: closing our own fd after a failed step.
        unsafe { libc::close(fd) };
    }
    result
}
