//! JSON lines: one object per line, each with `"schema": 1` and a `"kind"`.
//!
//! Record kinds (fields in `record.rs`):
//! - `connect`: a TCP connect attempt that needs attention. `verdict` is one of `unanswered` (live,
//!   `final: false`, re-sent at each SYN retransmit), `slow`, `refused` (`cause`: `rst` | `icmp`),
//!   `unreachable` (`cause`: `host` | `network`), `timed_out`, `abandoned`, `failed` (`cause`: errno, or
//!   `no_syn` when `connect()` failed before any SYN left and a route exists).
//!   `src`, `dst`, `dialed` (the address the app passed to `connect()`, when it differs), `syns`,
//!   `syn_sent_ms`, `errno`, `pid`, `tid`, `comm`, `cgroup_id`, `netns`, `netns_inode`, `flow` (id shared
//!   by an attempt's live updates and its end), `explanation` (one sentence).
//!   Identity fields, each present only when known (`identity/fields.rs`):
//!   - source: `src_pod`, `src_namespace`, `src_owner` (`Deployment/web`), `src_container` (12 hex),
//!     `src_cgroup` (cgroup v2 path; on a host without Kubernetes with `pid`, `comm`, `netns`);
//!   - destination, what the connect meant (`service`, else `dst`): `dst_pod`, `dst_namespace`,
//!     `dst_owner`, `dst_node`, `dst_ready`, `dst_service` (`namespace/name`: that cluster IP's, else the
//!     Service whose EndpointSlice lists it), `dst_port_name`, `dst_endpoint_of` (every such Service);
//!   - the pod behind `backend`, when a load balancer chose it: `backend_pod`,
//!     `backend_namespace`, `backend_node`, `backend_ready`;
//!   - `cluster_verdict` (`backend is no live pod` | `endpoint does not listen` |
//!     `DNS server is no live pod`) and `cluster_explanation` (one sentence);
//!   - with `--cluster-state`, `--kubeconfig` or `--in-cluster`: `identity_source` (`file` | `api`),
//!     `identity_age_s`, and `identity_stale: true` while the API is unreachable.
//! - `healthy`: per destination and process, connects answered on the first SYN since the last such
//!   record: `verdict: "established"`, `dst`, `pid`, `comm`, `cgroup_id`, `netns`, `netns_inode`,
//!   `established`, `mean_syn_sent_ms`, and the source and destination identity fields.
//! - `dns`: a UDP DNS query that needs attention: `verdict` `unanswered` | `refused` | `error`
//!   (`rcode`) | `slow`; `name`, `qtype` (null when the question did not parse), `id`, `server`,
//!   `dialed`, `service` and `backend` (load balancing seen), `client`, `pid`, `tid`, `comm`,
//!   `cgroup_id`, `netns`, `netns_inode`, `socket_cookie`,
//!   `latency_ms` (answered) or `waited_ms`, `explanation`; with cluster state, `cluster_verdict`
//!   (`DNS server is no live pod`) and `cluster_explanation` for unanswered and refused queries.
//! - `dns_healthy`: per server and namespace, fast NOERROR replies since the last such record:
//!   `server`, `netns`, `netns_inode`, `answered`, `mean_latency_ms`.
//! - `dns_stuck_socket`: a socket whose last N queries to one server went unanswered while other
//!   sockets got answers from it or its Service: `pid`, `comm`, `netns`, `netns_inode`,
//!   `socket_cookie`, `client`, `server`, `service`, `since`, `lost`, `others_answered`,
//!   `explanation`.
//! - `connect` records to port 53 carry `"dns": true` (DNS over TCP).
//! - `stats`: totals and losses: `attempts`, `established_first_syn`, `answered_seen_late`,
//!   `events`, `open_flows`, `dropped` {`ring_buffer_full`, `attempts_map_full`,
//!   `healthy_map_full`, `decode_errors`, `expired_flows`, `conntrack_events_lost`,
//!   `dns_pending_full`, `dns_ring_buffer_full`, `dns_healthy_map_full`, `skipped_program_runs`,
//!   `end_unseen`}, `dns` {`queries`, `healthy`, `slow_or_error`, `unanswered`, `refused`,
//!   `stuck_sockets`, `malformed`}, `conntrack` {`destroy_events` (`auto` | `always` | `never`),
//!   `destroy_events_subscribed`, `refused_before_subscription` (refused connects whose conntrack
//!   entry was gone before destroy events were followed: a Service backend behind them is not
//!   named)}, `node` (with `--node-name`); written periodically and once at exit with
//!   `final: true`. The first and the final
//!   record also carry `kernel` {`release`, `capabilities`: by name (`cgroup_v2`, `connect_errors`,
//!   `dialled_before_socket_lb`, `dns`, `dns_refused`, `skipped_runs_counted`), each
//!   {`state`: `full` | `degraded` | `off`, `reason` (what is missing, what it costs; not when
//!   full)}}.
//!
//! `netns_inode` is the namespace's nsfs inode number (`ls -l /proc/PID/ns/net`, `lsns`); recordings
//! made before it replaced the netns cookie name it `netns_cookie`, and replay reads both.
//!
//! Example:
//! ```text
//! {"schema":1,"kind":"connect","time":"2026-11-30T16:40:02.118Z","verdict":"abandoned","final":true,"src":"10.231.1.1:40522","dst":"10.231.1.2:9","syns":3,"syn_sent_ms":3002,"pid":4242,"tid":4250,"comm":"curl","cgroup_id":1234,"netns":"tb-c","netns_inode":4097,"flow":"ffff8881-2f3a","explanation":"The application gave up after 3.0s and 3 SYNs with no answer from 10.231.1.2:9: ..."}
//! {"schema":1,"kind":"connect","time":"2026-11-30T16:40:03.001Z","verdict":"refused","cause":"rst","final":true,"src":"10.244.131.21:40522","dst":"10.244.154.32:8080","syns":1,"syn_sent_ms":0,"errno":"ECONNREFUSED","pid":4242,"tid":4242,"comm":"curl","cgroup_id":77,"netns":"cni-3f2a","netns_inode":4097,"flow":"f-1","explanation":"10.244.154.32:8080 answered with a RST: ...","src_pod":"web-1","src_namespace":"app","src_owner":"Deployment/web","dst_pod":"worker-2","dst_namespace":"app","dst_owner":"Deployment/worker","dst_node":"node-b","dst_ready":true,"dst_service":"app/webhooks","dst_endpoint_of":["app/webhooks"],"cluster_verdict":"endpoint does not listen","cluster_explanation":"Refused by pod app/worker-2 (Deployment worker), a Ready endpoint of Service app/webhooks: selector app=webhooks also matches worker-2, which declares no port 8080.","identity_source":"file","identity_age_s":12}
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ConnectRecord;

    #[test]
    fn identity_fields_are_flat_optional_and_round_trip() {
        let text = r#"{"schema":1,"kind":"connect","time":"2026-11-30T16:40:02.118Z","verdict":"refused","cause":"rst","final":true,"src":"10.244.131.21:40522","dst":"10.244.154.32:8080","syns":1,"syn_sent_ms":0,"pid":1,"tid":1,"comm":"curl","cgroup_id":77,"netns":"n","netns_inode":2,"flow":"f","explanation":"e","src_pod":"web-1","src_namespace":"app","dst_pod":"worker-2","dst_ready":true,"dst_service":"app/webhooks","dst_endpoint_of":["app/webhooks"],"cluster_verdict":"endpoint does not listen","cluster_explanation":"Refused by pod app/worker-2.","identity_source":"api","identity_age_s":42,"identity_stale":true}"#;
        let line: Line = serde_json::from_str(text).expect("parse");
        let Record::Connect(c) = &line.record else {
            panic!("a connect record")
        };
        assert_eq!(c.identity.dst_pod.as_deref(), Some("worker-2"));
        assert!(c.identity.identity_stale);
        let mut sink = JsonSink::new(Vec::new());
        sink.write(&line.record).expect("write");
        assert_eq!(String::from_utf8(sink.out).expect("utf8").trim_end(), text);
    }

    #[test]
    fn records_without_names_carry_no_identity_keys() {
        let line = r#"{"schema":1,"kind":"connect","time":"2026-11-30T16:40:02.118Z","verdict":"abandoned","final":true,"src":"10.0.0.1:40000","dst":"10.0.0.2:80","syns":3,"syn_sent_ms":3002,"pid":1,"tid":1,"comm":"c","cgroup_id":1,"netns":"n","netns_inode":2,"flow":"f","explanation":"e"}"#;
        let c: Line = serde_json::from_str(line).expect("parse");
        let Record::Connect(ConnectRecord { identity, .. }) = &c.record else {
            panic!("connect")
        };
        assert_eq!(*identity, crate::identity::Identity::default());
        assert_eq!(serde_json::to_string(&c).expect("serialize"), line);
    }
}
