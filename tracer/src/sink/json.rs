//! JSON lines: one object per line, each with `"schema": 1` and a `"kind"`.
//!
//! Record kinds (fields in `record.rs`):
//! - `connect`: a TCP connect attempt that needs attention. `verdict` is one of `unanswered` (live,
//!   `final: false`, re-sent at each SYN retransmit), `slow`, `refused` (`cause`: `rst` | `icmp`),
//!   `unreachable` (`cause`: `host` | `network`), `timed_out`, `abandoned`, `failed` (`cause`: errno).
//!   `src`, `dst`, `dialed` (the address the app passed to `connect()`, when it differs), `syns`,
//!   `syn_sent_ms`, `errno`, `pid`, `tid`, `comm`, `cgroup_id`, `netns`, `netns_cookie`, `flow` (id shared
//!   by an attempt's live updates and its end), `explanation` (one sentence).
//! - `healthy`: per destination and process, connects answered on the first SYN since the last such
//!   record: `verdict: "established"`, `dst`, `pid`, `comm`, `cgroup_id`, `netns`, `netns_cookie`,
//!   `established`, `mean_syn_sent_ms`.
//! - `dns`: a UDP DNS query that needs attention: `verdict` `unanswered` | `refused` | `error`
//!   (`rcode`) | `slow`; `name`, `qtype` (null when the question did not parse), `id`, `server`,
//!   `dialed`, `service` and `backend` (load balancing seen), `client`, `pid`, `tid`, `comm`,
//!   `cgroup_id`, `netns`, `netns_cookie`, `socket_cookie`,
//!   `latency_ms` (answered) or `waited_ms`, `explanation`.
//! - `dns_healthy`: per server and namespace, fast NOERROR replies since the last such record:
//!   `server`, `netns`, `netns_cookie`, `answered`, `mean_latency_ms`.
//! - `dns_stuck_socket`: a socket whose last N queries to one server went unanswered while other
//!   sockets got answers from it or its Service: `pid`, `comm`, `netns`, `netns_cookie`,
//!   `socket_cookie`, `client`, `server`, `service`, `since`, `lost`, `others_answered`,
//!   `explanation`.
//! - `connect` records to port 53 carry `"dns": true` (DNS over TCP).
//! - `stats`: totals and losses: `attempts`, `established_first_syn`, `events`, `open_flows`,
//!   `dropped` {`ring_buffer_full`, `attempts_map_full`, `healthy_map_full`,
//!   `decode_errors`, `expired_flows`, `dns_pending_full`, `dns_ring_buffer_full`,
//!   `dns_healthy_map_full`}, `dns` {`queries`, `healthy`, `slow_or_error`, `unanswered`, `refused`,
//!   `stuck_sockets`, `malformed`}; written periodically and once at exit with `final: true`.
//!
//! Example:
//! ```text
//! {"schema":1,"kind":"connect","time":"2026-11-30T16:40:02.118Z","verdict":"abandoned","final":true,"src":"10.231.1.1:40522","dst":"10.231.1.2:9","syns":3,"syn_sent_ms":3002,"pid":4242,"tid":4250,"comm":"curl","cgroup_id":1234,"netns":"tb-c","netns_cookie":4097,"flow":"ffff8881-2f3a","explanation":"The application gave up after 3.0s and 3 SYNs with no answer from 10.231.1.2:9: ..."}
//! ```
use std::io::{self, Write};

use super::Sink;
use crate::record::{Line, Record, SCHEMA_VERSION};

pub struct JsonSink<W: Write> {
    out: W,
}

impl<W: Write> JsonSink<W> {
    pub fn new(out: W) -> JsonSink<W> {
        JsonSink { out }
    }
}

impl<W: Write> Sink for JsonSink<W> {
    fn write(&mut self, record: &Record) -> io::Result<()> {
        let line = Line {
            schema: SCHEMA_VERSION,
            record: record.clone(),
        };
        serde_json::to_writer(&mut self.out, &line)?;
        self.out.write_all(b"\n")
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}
