//! The SYNs the tracer reports, under load, against the SYNs the client's own namespace sent (an
//! nft counter on its output hook).
//!
//! Regression: at ~40 unanswered connects/s about 0.3% of SYN retransmits reached the wire with no
//! run of the retransmit program (the kernel ran none and counted none), and those flows ended
//! with `syns: 1` and no live update, with every `dropped` counter at 0.
use std::{
    collections::VecDeque,
    net::SocketAddrV4,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    time::{Duration, Instant},
};

use serde_json::Value;
use tests::{
    testbed::{Netns, TwoHosts, nft_drop_syn_to},
    tracer::Tracer,
};

const PORT: u16 = 8080;
/// Connects opened, one every `1 / RATE` s: enough retransmits for a 0.3% loss to show (about five
/// expected), in about 15 s.
const FLOWS: u32 = 1_500;
const RATE: u32 = 100;
/// How long the client holds each socket before closing it: one retransmit (1 s) and no second
/// (2 s), as a client with a 1.5 s connect timeout does.
const HOLD: Duration = Duration::from_millis(1_500);

/// Counts the SYNs the client sends to `PORT`, in the client's namespace.
fn count_syns(client: &Netns) {
    client.nft(&format!(
        "table inet tb_syncount {{
  counter syns {{
  }}
  chain output {{
    type filter hook output priority 0; policy accept;
    tcp dport {PORT} tcp flags & (syn | ack) == syn counter name syns
  }}
}}
"
    ));
}

fn syns_counted(client: &Netns) -> u64 {
    let out = client.exec(&[
        "nft",
        "-j",
        "list",
        "counter",
        "inet",
        "tb_syncount",
        "syns",
    ]);
    let listing: Value = serde_json::from_slice(&out.stdout).expect("nft -j prints JSON");
    listing["nftables"]
        .as_array()
        .expect("an nftables array")
        .iter()
        .find_map(|o| o["counter"]["packets"].as_u64())
        .unwrap_or_else(|| panic!("no counter in {listing}"))
}

/// A non-blocking `connect()` to `dst`: its SYN leaves, the call returns at once.
fn start_connect(dst: SocketAddrV4) -> OwnedFd {
    // SAFETY: plain syscall, no pointers.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: dst.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*dst.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: `addr` is a valid sockaddr_in of the length passed.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&raw const addr).cast::<libc::sockaddr>(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    let err = std::io::Error::last_os_error();
    assert!(
        rc == -1 && err.raw_os_error() == Some(libc::EINPROGRESS),
        "connect to a dropping port: {rc} {err}"
    );
    fd
}

/// Opens `FLOWS` connects at `RATE`, closing each `HOLD` after it started.
fn load(dst: SocketAddrV4) {
    let start = Instant::now();
    let mut open: VecDeque<(Instant, OwnedFd)> = VecDeque::new();
    for n in 0..FLOWS {
        let due = start + Duration::from_secs(1) * n / RATE;
        while Instant::now() < due {
            close_due(&mut open);
            std::thread::sleep(Duration::from_millis(2));
        }
        open.push_back((Instant::now() + HOLD, start_connect(dst)));
    }
    while !open.is_empty() {
        close_due(&mut open);
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn close_due(open: &mut VecDeque<(Instant, OwnedFd)>) {
    while open.front().is_some_and(|(at, _)| *at <= Instant::now()) {
        open.pop_front();
    }
}

#[test]
fn syn_retransmits_under_load_add_up_to_what_the_wire_saw() {
    let bed = TwoHosts::new("syns");
    bed.server.nft(&nft_drop_syn_to(PORT));
    count_syns(&bed.client);
    let tracer = Tracer::start(&["--netns", bed.client.name()]);
    let dst = SocketAddrV4::new(bed.server_ip, PORT);
    bed.client.run_in("tc-synload", move || load(dst));
    // The last closes reach the tracer within its drain period; give it a second.
    std::thread::sleep(Duration::from_secs(1));
    let wire = syns_counted(&bed.client);
    let (ok, records, stderr) = tracer.stop();
    assert!(ok, "tracer exit: {stderr}");

    let to_dst = |r: &&Value| r["kind"] == "connect" && r["dst"] == dst.to_string();
    let ends: Vec<&Value> = records
        .iter()
        .filter(to_dst)
        .filter(|r| r["final"] == true)
        .collect();
    let live = records
        .iter()
        .filter(to_dst)
        .filter(|r| r["final"] == false)
        .count() as u64;
    let stats = records
        .iter()
        .rev()
        .find(|r| r["kind"] == "stats" && r["final"] == true)
        .unwrap_or_else(|| panic!("no final stats record; stderr:\n{stderr}"));
    let dropped = &stats["dropped"];

    assert_eq!(
        ends.len() as u64,
        u64::from(FLOWS),
        "one end per connect; dropped: {dropped}"
    );
    let reported: u64 = ends.iter().filter_map(|r| r["syns"].as_u64()).sum();
    let short: Vec<String> = ends
        .iter()
        .filter(|r| r["syns"].as_u64().is_none_or(|s| s < 2))
        .map(|r| {
            format!(
                "{} syns={} after {} ms",
                r["src"], r["syns"], r["syn_sent_ms"]
            )
        })
        .collect();
    assert_eq!(
        reported,
        wire,
        "SYNs reported vs SYNs the client's namespace sent; {} flows held {HOLD:?} reported fewer \
         than 2: {short:?}; dropped: {dropped}",
        short.len()
    );
    // Every retransmit either was sent live or is counted as unseen.
    let unseen = dropped["syn_retransmits_unseen"]
        .as_u64()
        .unwrap_or_else(|| panic!("no dropped.syn_retransmits_unseen in {stats}"));
    eprintln!("{wire} SYNs on the wire, {live} live updates, {unseen} retransmits unseen");
    assert_eq!(
        live + unseen,
        wire - u64::from(FLOWS),
        "live updates ({live}) + unseen retransmits ({unseen}) vs retransmits on the wire; \
         dropped: {dropped}"
    );
}
