//! Traffic between the two namespaces of a `Pair`, for the per-packet cost the connect storm does
//! not show: a bulk TCP transfer (one connection, 128 KiB writes, 256 KiB reads) and a flood of
//! small UDP datagrams (64 bytes each, one `send` per datagram).
//!
//! One thread drives both ends, with non-blocking sockets: it writes what the socket takes, then
//! reads what has arrived. On a veth the receive path runs in softirq on the sending CPU, in the
//! sender's context, so every packet's whole cost, both ends and the tracer's programs included,
//! is that thread's CPU time (and its CPU's `ksoftirqd`'s, for work deferred there). Two threads
//! would also pay the scheduler's wake-ups, and on two CPUs feed two receive queues and reorder the
//! TCP stream. The thread is pinned, at nice -20, and its CPU time read once per batch. A UDP
//! round's figure is its cheapest batch (other work on a shared machine only ever adds to a batch,
//! and every datagram of a batch is received within it); a TCP round's is the whole round, since
//! acknowledgements and window updates carry work from one batch into the next.
use std::{
    io::{ErrorKind, Read as _, Write as _},
    net::{SocketAddrV4, TcpListener, TcpStream, UdpSocket},
    os::fd::AsRawFd as _,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use super::{
    cpu_time, interrupted,
    testbed::{self, PAIR_RECEIVER, PAIR_SENDER, Pair},
};

const TCP_PORT: u16 = 5001;
const UDP_PORT: u16 = 5002;
const WRITE_BYTES: usize = 128 * 1024;
const READ_BYTES: usize = 256 * 1024;
pub const DATAGRAM_BYTES: usize = 64;
/// Bytes (TCP) or datagrams (UDP) per batch.
pub const TCP_BATCH: u64 = 1 << 20;
pub const UDP_BATCH: u64 = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Traffic {
    BulkTcp,
    UdpFlood,
}

impl Traffic {
    pub fn name(self) -> &'static str {
        match self {
            Traffic::BulkTcp => "bulk TCP",
            Traffic::UdpFlood => "UDP flood",
        }
    }
}

/// What one run of the traffic moved.
#[derive(Debug, Clone, Copy, Default)]
pub struct Moved {
    /// Bytes (TCP) or datagrams (UDP) the receiving end got.
    pub units: u64,
    pub secs: f64,
    /// CPU time of the thread and its CPU's `ksoftirqd` over the run.
    pub cpu: Duration,
    /// The cheapest batch's CPU time per unit, ns.
    pub least_ns_per_unit: f64,
    /// Whether the batches are self-contained (the cheapest one is the round's figure).
    pub batches_stand_alone: bool,
    /// Packets through the veth, both directions.
    pub packets: u64,
    /// `send`/`recv` calls of both ends (those that found nothing to do included).
    pub calls: u64,
}

impl Moved {
    /// Bytes or datagrams per second of wall time.
    pub fn rate(&self) -> f64 {
        self.units as f64 / self.secs.max(1e-9)
    }

    /// Bytes or datagrams per CPU-second: at the cheapest batch where batches stand alone, else
    /// over the round.
    pub fn per_cpu_second(&self) -> f64 {
        if self.batches_stand_alone {
            1e9 / self.least_ns_per_unit
        } else {
            self.units as f64 / self.cpu.as_secs_f64().max(1e-9)
        }
    }
}

/// Runs `traffic` for `duration` between the pair's namespaces.
pub fn run(pair: &Pair, traffic: Traffic, duration: Duration) -> anyhow::Result<Moved> {
    let cpu = cpu_time::cpus() - 1;
    let packets_before = pair.packets()?;
    let (sender_ns, receiver_ns) = (pair.sender.path(), pair.receiver.path());
    let moved = std::thread::Builder::new()
        .name("bench-traffic".into())
        .spawn(move || -> anyhow::Result<Moved> {
            cpu_time::pin_this_thread(cpu)?;
            cpu_time::favour_this_thread()?;
            let softirq_thread = cpu_time::ksoftirqd(cpu)?;
            let clock = move || -> anyhow::Result<Duration> {
                Ok(cpu_time::this_thread()? + cpu_time::process(softirq_thread)?)
            };
            match traffic {
                Traffic::BulkTcp => bulk_tcp(&sender_ns, &receiver_ns, duration, clock),
                Traffic::UdpFlood => udp_flood(&sender_ns, &receiver_ns, duration, clock),
            }
        })
        .context("spawning the traffic thread")?
        .join()
        .map_err(|_| anyhow::anyhow!("the traffic thread panicked"))??;
    Ok(Moved {
        packets: pair.packets()?.saturating_sub(packets_before),
        ..moved
    })
}

/// Batches timed by `clock`, each moving at least `batch` units with `step` (which returns the
/// units it moved and the calls it made), until `duration` has passed.
fn batches(
    duration: Duration,
    batch: u64,
    clock: impl Fn() -> anyhow::Result<Duration>,
    mut step: impl FnMut() -> anyhow::Result<(u64, u64)>,
) -> anyhow::Result<Moved> {
    let started = Instant::now();
    let end = started + duration;
    let first = clock()?;
    let mut moved = Moved {
        least_ns_per_unit: f64::INFINITY,
        ..Moved::default()
    };
    while Instant::now() < end && !interrupted() {
        let before = clock()?;
        let mut units = 0;
        // Bounded: a batch that does not complete within the whole round's time is an error.
        while units < batch {
            let (u, calls) = step()?;
            units += u;
            moved.calls += calls;
            if started.elapsed() > duration * 2 + Duration::from_secs(5) {
                bail!("traffic stalled: {units} of a batch of {batch} moved");
            }
        }
        let spent = clock()?.saturating_sub(before);
        moved.units += units;
        moved.least_ns_per_unit = moved
            .least_ns_per_unit
            .min(spent.as_nanos() as f64 / units as f64);
    }
    moved.secs = started.elapsed().as_secs_f64();
    moved.cpu = clock()?.saturating_sub(first);
    if moved.units == 0 {
        bail!("no traffic moved");
    }
    Ok(moved)
}

fn would_block(e: &std::io::Error) -> bool {
    e.kind() == ErrorKind::WouldBlock
}

/// Sleeps until `socket` can take more data (at most 100 ms).
fn wait_writable(socket: &TcpStream) -> anyhow::Result<()> {
    let mut pfd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: poll(2) on one pollfd we own.
    if unsafe { libc::poll(&raw mut pfd, 1, 100) } < 0 {
        bail!("poll: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

fn bulk_tcp(
    sender_ns: &Path,
    receiver_ns: &Path,
    duration: Duration,
    clock: impl Fn() -> anyhow::Result<Duration>,
) -> anyhow::Result<Moved> {
    testbed::enter(receiver_ns)?;
    let listener = TcpListener::bind(SocketAddrV4::new(PAIR_RECEIVER, TCP_PORT))
        .context("bulk TCP listener")?;
    testbed::enter(sender_ns)?;
    let mut sender = TcpStream::connect(SocketAddrV4::new(PAIR_RECEIVER, TCP_PORT))
        .context("bulk TCP connect")?;
    let (mut receiver, _) = listener.accept()?;
    sender.set_nonblocking(true)?;
    receiver.set_nonblocking(true)?;
    // Small socket buffers keep the data in the caches: a copy that goes to memory every time
    // is a figure of the machine's memory traffic, which the rest of a shared machine sets.
    for (socket, option) in [(&sender, libc::SO_SNDBUF), (&receiver, libc::SO_RCVBUF)] {
        let bytes: libc::c_int = 512 * 1024;
        // SAFETY: setsockopt(2) with an int we own and its exact size.
        unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&raw const bytes).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
    let out = vec![0x5au8; WRITE_BYTES];
    let mut input = vec![0u8; READ_BYTES];
    // One write and one read a step: what a write delivers is in the receive queue when it
    // returns (the veth's receive path ran in this thread), and the read buffer takes twice that.
    let moved = batches(duration, TCP_BATCH, clock, || {
        let wrote = match sender.write(&out) {
            Ok(n) => n,
            Err(e) if would_block(&e) => 0,
            Err(e) => return Err(e.into()),
        };
        let got = match receiver.read(&mut input) {
            Ok(0) => bail!("bulk TCP: the connection closed"),
            Ok(n) => n as u64,
            Err(e) if would_block(&e) => 0,
            Err(e) => return Err(e.into()),
        };
        let calls = 2;
        if wrote == 0 && got == 0 {
            // Waiting for an acknowledgement or a window: sleep, do not spin.
            wait_writable(&sender)?;
        }
        Ok((got, calls))
    })?;
    Ok(Moved {
        batches_stand_alone: false,
        ..moved
    })
}

fn udp_flood(
    sender_ns: &Path,
    receiver_ns: &Path,
    duration: Duration,
    clock: impl Fn() -> anyhow::Result<Duration>,
) -> anyhow::Result<Moved> {
    testbed::enter(receiver_ns)?;
    let receiver = UdpSocket::bind(SocketAddrV4::new(PAIR_RECEIVER, UDP_PORT))
        .context("UDP flood receiver")?;
    testbed::enter(sender_ns)?;
    let sender = UdpSocket::bind(SocketAddrV4::new(PAIR_SENDER, 0))?;
    sender.connect(SocketAddrV4::new(PAIR_RECEIVER, UDP_PORT))?;
    sender.set_nonblocking(true)?;
    receiver.set_nonblocking(true)?;
    let payload = [0x5au8; DATAGRAM_BYTES];
    let mut input = [0u8; 2048];
    let mut lost = 0u64;
    let moved = batches(duration, UDP_BATCH, clock, || {
        let mut calls = 0;
        let mut sent = 0;
        for _ in 0..64 {
            calls += 1;
            match sender.send(&payload) {
                Ok(_) => sent += 1,
                Err(e) if would_block(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let mut got = 0;
        loop {
            calls += 1;
            match receiver.recv(&mut input) {
                Ok(_) => got += 1,
                Err(e) if would_block(&e) => break,
                Err(e) => return Err(e.into()),
            }
        }
        lost += sent - got.min(sent);
        Ok((got, calls))
    })?;
    if lost > moved.units / 100 {
        bail!(
            "UDP flood: {lost} datagrams did not arrive by the next receive ({} did)",
            moved.units
        );
    }
    Ok(Moved {
        batches_stand_alone: true,
        ..moved
    })
}
