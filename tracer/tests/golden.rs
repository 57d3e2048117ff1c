//! Golden outputs: the same input gives byte-for-byte the same output, whatever the code's inner
//! types. Recordings (JSON lines the tracer wrote) read and written back, the text sink and
//! `summary` on them, and synthetic kernel records through the live stages into JSON lines.
use std::{
    io::Write as _,
    net::{IpAddr, SocketAddr},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use tracer::{
    args::SummaryArgs,
    clock::KernelClock,
    conntrack::subscription::{DestroyEventsMode, DestroySubscription},
    identity::Identities,
    record::Line,
    sink::{Sink, json::JsonSink, text::TextSink},
    stages::{
        filter::DestinationFilter,
        {StageOptions, Stages},
    },
};
use tracer_common::{
    AF_INET, AF_INET6, Attempt, ConnectEvent, DnsEvent, DnsKey, EVENT_CONNECT_END, EVENT_DNS_REPLY,
    EVENT_REPLY_END, EVENT_REPLY_RETRANSMIT, EVENT_SYN_RETRANSMIT, FLAG_ANSWERED,
    FLAG_DIALED_KNOWN, FLAG_RST_RECEIVED, PendingDns, ReplyEvent, ReplyLoss,
};

fn recordings() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("tests/golden/demo_recording.jsonl")];
    for name in [
        "a_dead_backend",
        "b_refused_two_of_six",
        "c_no_endpoints_icmp",
        "d_mixed_with_drops",
        "e_reply_lost",
    ] {
        files.push(root.join(format!("tests/fixtures/tui/{name}.jsonl")));
    }
    files
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .expect("a file name")
        .to_string_lossy()
        .into_owned()
}

/// A recording the current tracer wrote reads back into the same bytes.
#[test]
fn a_recording_read_and_written_back_is_byte_identical() {
    let path = &recordings()[0];
    let text = std::fs::read_to_string(path).expect("read the recording");
    for (n, line) in text.lines().enumerate() {
        let parsed: Line = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), n + 1));
        let written = serde_json::to_string(&parsed).expect("serialize");
        assert_eq!(written, line, "{}:{}", path.display(), n + 1);
    }
}

/// Older recordings (fewer fields) read and written back: the same text on every run.
#[test]
fn older_recordings_are_written_back_the_same_way() {
    for path in &recordings()[1..] {
        let text = std::fs::read_to_string(path).expect("read the recording");
        let mut written = String::new();
        for line in text.lines() {
            let parsed: Line = serde_json::from_str(line).expect("parse");
            written.push_str(&serde_json::to_string(&parsed).expect("serialize"));
            written.push('\n');
        }
        insta::assert_snapshot!(format!("written_back_{}", stem(path)), written);
    }
}

#[test]
fn the_text_sink_writes_the_same_text_for_each_recording() {
    for path in recordings() {
        let text = std::fs::read_to_string(&path).expect("read the recording");
        let mut out = Vec::new();
        {
            let mut sink = TextSink::new(&mut out);
            for line in text.lines() {
                let parsed: Line = serde_json::from_str(line).expect("parse");
                sink.write(&parsed.record).expect("write");
            }
            sink.flush().expect("flush");
        }
        insta::assert_snapshot!(
            format!("text_{}", stem(&path)),
            String::from_utf8(out).expect("utf8")
        );
    }
}

#[test]
fn summary_prints_the_same_table_for_each_recording() {
    for path in recordings() {
        let text = tracer::tui::summary(&SummaryArgs { file: path.clone() }).expect("summary");
        insta::assert_snapshot!(format!("summary_{}", stem(&path)), text);
    }
}

/// Monotonic zero of the synthetic kernel: a fixed wall time, so records' times never change.
fn boot() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_000_000)
}

fn stages() -> Stages {
    Stages::new(StageOptions {
        clock: KernelClock::with_boot(boot()),
        identities: Identities::new(None, None),
        conntrack: None,
        destroyed: DestroySubscription::start(None, DestroyEventsMode::Never),
        filter: DestinationFilter::default(),
        service_window: Duration::from_mins(1),
        dns_timeout: Duration::from_secs(2),
        dns_stuck_after: 3,
    })
}

fn kernel_addr(ip: IpAddr) -> ([u8; 16], u16) {
    let mut a = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => {
            a[..4].copy_from_slice(&v4.octets());
            (a, AF_INET)
        }
        IpAddr::V6(v6) => (v6.octets(), AF_INET6),
    }
}

fn comm(name: &str) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[..name.len()].copy_from_slice(name.as_bytes());
    c
}

/// A namespace inode no real namespace has, so its name is the same on every machine.
const NETNS: u64 = 4_026_999_999;

struct Connect {
    kind: u32,
    error: i32,
    event_ms: u64,
    sock: u64,
    src: SocketAddr,
    dst: SocketAddr,
    dialed: Option<SocketAddr>,
    syns: u16,
    flags: u16,
}

fn connect_bytes(c: &Connect) -> Vec<u8> {
    let (saddr, family) = kernel_addr(c.src.ip());
    let (daddr, _) = kernel_addr(c.dst.ip());
    let (dialed_addr, dialed_port, dialed_flag) = c.dialed.map_or(([0; 16], 0, 0), |d| {
        (kernel_addr(d.ip()).0, d.port(), FLAG_DIALED_KNOWN)
    });
    let event = ConnectEvent {
        kind: c.kind,
        error: c.error,
        event_ns: c.event_ms * 1_000_000,
        attempt: Attempt {
            sock: c.sock,
            start_ns: 1_000_000_000,
            netns_inode: NETNS,
            cgroup_id: 1,
            closed_ns: if c.kind == EVENT_CONNECT_END {
                c.event_ms * 1_000_000
            } else {
                0
            },
            cookie: 0,
            pid: 4242,
            tid: 4243,
            comm: comm("curl"),
            saddr,
            daddr,
            dialed_addr,
            family,
            sport: c.src.port(),
            dport: c.dst.port(),
            dialed_port,
            syn_count: c.syns,
            flags: c.flags | dialed_flag,
            soft_error: 0,
        },
    };
    as_bytes(&event)
}

fn as_bytes<T: Copy>(value: &T) -> Vec<u8> {
    // SAFETY: the kernel ABI structs are repr(C) with explicit padding (asserted in
    // tracer-common), so every byte is initialised; the slice is copied at once.
    unsafe { std::slice::from_raw_parts(std::ptr::from_ref(value).cast::<u8>(), size_of::<T>()) }
        .to_vec()
}

fn dns_bytes(rcode: u8, sent_ms: u64, reply_ms: u64, question: &[u8]) -> Vec<u8> {
    let client: SocketAddr = "10.231.1.1:40000".parse().expect("addr");
    let server: SocketAddr = "10.96.0.53:53".parse().expect("addr");
    let (client_addr, family) = kernel_addr(client.ip());
    let (server_addr, _) = kernel_addr(server.ip());
    let mut q = [0u8; tracer_common::DNS_QUESTION_BYTES];
    q[..question.len()].copy_from_slice(question);
    let event = DnsEvent {
        kind: EVENT_DNS_REPLY,
        rcode,
        _pad: [0; 3],
        reply_ns: reply_ms * 1_000_000,
        key: DnsKey {
            netns_inode: NETNS,
            socket_cookie: 77,
            id: 0x1234,
            _pad: [0; 6],
        },
        reply_addr: server_addr,
        reply_port: 53,
        _pad2: [0; 6],
        query: PendingDns {
            sent_ns: sent_ms * 1_000_000,
            cgroup_id: 1,
            pid: 4242,
            tid: 4242,
            comm: comm("nginx"),
            client_addr,
            server_addr,
            dialed_addr: [0; 16],
            client_port: client.port(),
            server_port: server.port(),
            family,
            question_len: question.len() as u16,
            flags: 0,
            dialed_by_socket_lb: 0,
            _pad: [0; 5],
            cookie: 77,
            question: q,
        },
    };
    as_bytes(&event)
}

fn reply_bytes(kind: u32, event_ms: u64, error: i32) -> Vec<u8> {
    let local: SocketAddr = "10.244.2.7:8080".parse().expect("addr");
    let peer: SocketAddr = "10.0.1.5:37980".parse().expect("addr");
    let (saddr, family) = kernel_addr(local.ip());
    let (daddr, _) = kernel_addr(peer.ip());
    let event = ReplyEvent {
        kind,
        _pad: 0,
        event_ns: event_ms * 1_000_000,
        loss: ReplyLoss {
            sock: 0xffff_8881_0000_0a00,
            first_ns: 5_000_000_000,
            last_ns: event_ms * 1_000_000,
            netns_inode: NETNS,
            socket_inode: 0,
            saddr,
            daddr,
            family,
            sport: local.port(),
            dport: peer.port(),
            state: 1,
            _pad: 0,
            retransmits: if kind == EVENT_REPLY_END { 6 } else { 3 },
            unacked: 15_928,
            error,
            _pad2: 0,
        },
    };
    as_bytes(&event)
}

/// `example.com` `A` `IN`, as it follows the DNS header on the wire.
const QUESTION: &[u8] = b"\x07example\x03com\x00\x00\x01\x00\x01";

fn kernel_records() -> Vec<Vec<u8>> {
    let a = |s: &str| s.parse::<SocketAddr>().expect("addr");
    let end = |sock, ms, error, syns, flags, dst: &str| Connect {
        kind: EVENT_CONNECT_END,
        error,
        event_ms: ms,
        sock,
        src: a("10.231.1.1:40522"),
        dst: a(dst),
        dialed: None,
        syns,
        flags,
    };
    vec![
        // Unanswered, then abandoned.
        connect_bytes(&Connect {
            kind: EVENT_SYN_RETRANSMIT,
            ..end(1, 2_000, 0, 2, 0, "10.231.1.2:9")
        }),
        connect_bytes(&end(1, 4_000, 0, 3, 0, "10.231.1.2:9")),
        // Refused by RST, by ICMP; unreachable; timed out; failed before any SYN.
        connect_bytes(&end(
            2,
            4_100,
            libc::ECONNREFUSED,
            1,
            FLAG_RST_RECEIVED,
            "10.231.1.2:81",
        )),
        connect_bytes(&end(3, 4_200, libc::ECONNREFUSED, 1, 0, "10.231.1.2:82")),
        connect_bytes(&end(4, 7_200, libc::EHOSTUNREACH, 3, 0, "10.231.1.9:80")),
        connect_bytes(&end(5, 130_000, libc::ETIMEDOUT, 7, 0, "10.231.1.2:83")),
        connect_bytes(&end(6, 4_300, libc::EACCES, 0, 0, "10.231.1.2:84")),
        // Slow: answered after a retransmit.
        connect_bytes(&Connect {
            src: a("[fd00::1]:40600"),
            ..end(7, 2_050, 0, 2, FLAG_ANSWERED, "[fd00::2]:443")
        }),
        // A socket-level load balancer: dialled the Service, sent to a backend; refused.
        connect_bytes(&Connect {
            dialed: Some(a("10.96.0.10:80")),
            ..end(
                8,
                4_400,
                libc::ECONNREFUSED,
                1,
                FLAG_RST_RECEIVED,
                "10.244.1.30:8080",
            )
        }),
        // DNS over TCP, abandoned.
        connect_bytes(&end(9, 5_000, 0, 3, 0, "10.96.0.53:53")),
        // DNS: an error reply, a slow reply, a question that does not parse.
        dns_bytes(3, 5_000, 5_020, QUESTION),
        dns_bytes(0, 5_000, 5_900, QUESTION),
        dns_bytes(2, 5_000, 5_010, b"\x3fshort"),
        // A server's replies: reported live, then lost when the kernel gave up.
        reply_bytes(EVENT_REPLY_RETRANSMIT, 6_000, 0),
        reply_bytes(EVENT_REPLY_END, 9_000, libc::ETIMEDOUT),
    ]
}

#[test]
fn kernel_records_through_the_live_stages_give_the_same_json_lines() {
    let mut stages = stages();
    let mut out = Vec::new();
    {
        let mut sink = JsonSink::new(&mut out);
        for bytes in kernel_records() {
            stages.process(&bytes, &mut sink).expect("process");
        }
        sink.flush().expect("flush");
    }
    out.flush().expect("flush");
    assert_eq!(stages.decode_errors, 0);
    insta::assert_snapshot!("pipeline_json", String::from_utf8(out).expect("utf8"));
}
