//! UDP DNS: queries paired with replies in the kernel (`tracer-ebpf/src/cgroup_skb_dns.rs`); here
//! what needs attention becomes records.
//!
//! - `question.rs`: the query's first question, read from the bytes the kernel copied after the
//!   header (they come from packets anyone can send).
//! - `queries.rs`: one query, its question and its outcome (`slow`, `error`, `unanswered`,
//!   `refused`).
//! - `stuck.rs`: the `stuck socket` verdict.
//!
//! The kernel sends only slow and error replies. Every tick (`tick`) the pending queries older than
//! `--dns-timeout` are taken out of `PENDING_DNS` and reported `unanswered`, or `refused` when their
//! socket was told `ECONNREFUSED`; the per-server healthy counts are read to know which servers
//! answer others; they are reported on the stats interval (`healthy_records`).
pub mod queries;
pub mod question;
pub mod stuck;

use std::{
    collections::HashMap,
    net::SocketAddr,
    time::{Duration, SystemTime},
};

use tracer_common::{DnsEvent, EVENT_DNS_REPLY, Endpoint};

use self::{
    queries::{Outcome, Query, rcode_name},
    question::qtype_name,
    stuck::{Lost, Stuck, StuckDetector},
};
use crate::{
    clock::rfc3339,
    conntrack::netlink::Direction,
    decode::{DecodeError, ip_from_kernel, read_record},
    enrich::Enricher,
    filter::DestinationFilter,
    kernel::dns::DnsMaps,
    record::{DnsHealthyRecord, DnsRecord, DnsStats, DnsStuckSocketRecord, Record},
};

/// How often pending queries are checked for their timeout.
pub const TICK: Duration = Duration::from_millis(250);

/// Whether a ring-buffer record is a DNS one (its first `u32` is the kind).
pub fn is_dns_record(bytes: &[u8]) -> bool {
    bytes
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .is_some_and(|b| u32::from_ne_bytes(b) == EVENT_DNS_REPLY)
}

pub struct DnsTracker {
    timeout_ns: u64,
    stuck: StuckDetector,
    pub stats: DnsStats,
    /// Healthy totals per server at the previous read, to compute what is new.
    healthy_previous: HashMap<Endpoint, (u64, u64)>,
    /// New healthy replies not yet reported: count, summed latency.
    healthy_unreported: HashMap<Endpoint, (u64, u64)>,
}

impl DnsTracker {
    pub fn new(timeout: Duration, stuck_after: u32) -> DnsTracker {
        DnsTracker {
            timeout_ns: u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX),
            stuck: StuckDetector::new(stuck_after),
            stats: DnsStats::default(),
            healthy_previous: HashMap::new(),
            healthy_unreported: HashMap::new(),
        }
    }

    /// A slow or error reply from the ring buffer.
    pub fn reply(
        &mut self,
        bytes: &[u8],
        enricher: &mut Enricher,
        filter: &DestinationFilter,
    ) -> Result<Option<Record>, DecodeError> {
        let ev: DnsEvent = read_record(bytes)?;
        let from = SocketAddr::new(
            ip_from_kernel(ev.query.family, ev.reply_addr)
                .unwrap_or(std::net::IpAddr::from([0u8; 4])),
            ev.reply_port,
        );
        self.stuck.answered(from, ev.reply_ns, 1);
        self.stats.slow_or_error += 1;
        let query = Query {
            key: ev.key,
            pending: ev.query,
        };
        let outcome = Outcome::Reply {
            rcode: ev.rcode,
            latency_ns: ev.reply_ns.saturating_sub(ev.query.sent_ns),
            from,
        };
        Ok(self.record(&query, outcome, ev.reply_ns, enricher, filter))
    }

    fn record(
        &mut self,
        query: &Query,
        outcome: Outcome,
        at_ns: u64,
        enricher: &mut Enricher,
        filter: &DestinationFilter,
    ) -> Option<Record> {
        let server = query.server();
        let dialed = query.dialed();
        let via = service_backend(query, enricher);
        let mut dests = vec![(server.ip(), server.port())];
        dests.extend(dialed.map(|d| (d.ip(), d.port())));
        dests.extend(via.map(|(_, b)| (b.ip(), b.port())));
        if !filter.matches(&dests) {
            return None;
        }
        let question = query.question();
        if question.is_err() {
            self.stats.malformed += 1;
        }
        let question = question.ok();
        let what = question.as_ref().map_or_else(
            || format!("query {}", query.key.id),
            |q| format!("{} {}", q.name, qtype_name(q.qtype)),
        );
        let (rcode, latency_ms, waited_ms) = match outcome {
            Outcome::Reply {
                rcode, latency_ns, ..
            } => (
                Some(rcode_name(rcode).into_owned()),
                Some(latency_ns / 1_000_000),
                None,
            ),
            Outcome::Unanswered { waited_ns } | Outcome::Refused { waited_ns, .. } => {
                (None, None, Some(waited_ns / 1_000_000))
            }
        };
        let shown = via.map_or_else(
            || server.to_string(),
            |(service, backend)| format!("{backend} (Service {service})"),
        );
        // Judged on where the query went: the backend when a load balancer chose one.
        let cluster = match outcome {
            Outcome::Reply { .. } => None,
            Outcome::Unanswered { .. } | Outcome::Refused { .. } => enricher
                .identities
                .dns_server_verdict(via.map_or(server, |(_, backend)| backend)),
        };
        Some(Record::Dns(DnsRecord {
            time: rfc3339(enricher.clock.wall(at_ns)),
            verdict: outcome.verdict().into(),
            name: question.as_ref().map(|q| q.name.clone()),
            qtype: question.as_ref().map(|q| qtype_name(q.qtype).into_owned()),
            id: query.key.id,
            server: server.to_string(),
            dialed: dialed.map(|d| d.to_string()),
            service: via.map(|(s, _)| s.to_string()),
            backend: via.map(|(_, b)| b.to_string()),
            client: query.client().to_string(),
            pid: query.pending.pid,
            tid: query.pending.tid,
            comm: query.comm(),
            cgroup_id: query.pending.cgroup_id,
            netns: enricher.netns.name(query.key.netns_inode),
            netns_inode: query.key.netns_inode,
            socket_cookie: query.key.socket_cookie,
            rcode,
            latency_ms,
            waited_ms,
            explanation: queries::explanation(&outcome, &what, server)
                .replace(&format!("{server} "), &format!("{shown} ")),
            cluster_verdict: cluster.as_ref().map(|c| c.name.to_string()),
            cluster_explanation: cluster.map(|c| c.explanation),
        }))
    }

    /// Every `TICK`: new healthy counts, expired pending queries, stuck sockets.
    pub fn tick(
        &mut self,
        maps: &mut DnsMaps,
        now_ns: u64,
        enricher: &mut Enricher,
        filter: &DestinationFilter,
    ) -> Vec<Record> {
        self.read_healthy(maps, now_ns);
        let mut expired: Vec<(Query, Outcome)> = Vec::new();
        for (key, pending) in maps.pending.iter().flatten() {
            let error = maps.sock_errors.get(&key.socket_cookie, 0).ok();
            if let Some(outcome) = queries::expiry(&pending, now_ns, self.timeout_ns, error) {
                expired.push((Query { key, pending }, outcome));
            }
        }
        expired.sort_by_key(|(q, _)| q.pending.sent_ns);
        let mut records = Vec::new();
        for (query, outcome) in expired {
            let _ = maps.pending.remove(&query.key);
            if let Outcome::Refused { .. } = outcome {
                self.stats.refused += 1;
            } else {
                self.stats.unanswered += 1;
                let answered = maps.sock_answered.get(&query.key.socket_cookie, 0).ok();
                let lost = lost(&query, service_backend(&query, enricher));
                if let Some(stuck) = self.stuck.lost(lost, answered) {
                    records.extend(self.stuck_record(&stuck, enricher, filter));
                }
            }
            records.extend(self.record(&query, outcome, now_ns, enricher, filter));
        }
        for stuck in self.stuck.check(now_ns) {
            records.extend(self.stuck_record(&stuck, enricher, filter));
        }
        records
    }

    fn read_healthy(&mut self, maps: &DnsMaps, now_ns: u64) {
        for (server, per_cpu) in maps.healthy.iter().flatten() {
            let total = per_cpu.iter().fold((0, 0), |(n, ns), s| {
                (n + s.answered, ns + s.latency_ns_total)
            });
            let before = self
                .healthy_previous
                .insert(server, total)
                .unwrap_or_default();
            let new = (
                total.0.saturating_sub(before.0),
                total.1.saturating_sub(before.1),
            );
            if new.0 == 0 {
                continue;
            }
            let Some(ip) = ip_from_kernel(server.family, server.addr) else {
                continue;
            };
            self.stuck
                .answered(SocketAddr::new(ip, server.port), now_ns, new.0);
            let unreported = self.healthy_unreported.entry(server).or_default();
            unreported.0 += new.0;
            unreported.1 += new.1;
        }
    }

    #[expect(
        clippy::cast_precision_loss,
        reason = "a mean in milliseconds needs no 64-bit precision"
    )]
    pub fn healthy_records(
        &mut self,
        enricher: &mut Enricher,
        filter: &DestinationFilter,
    ) -> Vec<Record> {
        let time = rfc3339(SystemTime::now());
        let mut records = Vec::new();
        for (server, (answered, latency_ns)) in self.healthy_unreported.drain() {
            let Some(ip) = ip_from_kernel(server.family, server.addr) else {
                continue;
            };
            if !filter.matches(&[(ip, server.port)]) {
                continue;
            }
            records.push(Record::DnsHealthy(DnsHealthyRecord {
                time: time.clone(),
                server: SocketAddr::new(ip, server.port).to_string(),
                netns: enricher.netns.name(server.netns_inode),
                netns_inode: server.netns_inode,
                answered,
                mean_latency_ms: latency_ns as f64 / answered.max(1) as f64 / 1e6,
            }));
        }
        records
    }

    fn stuck_record(
        &mut self,
        stuck: &Stuck,
        enricher: &mut Enricher,
        filter: &DestinationFilter,
    ) -> Option<Record> {
        let q = &stuck.latest;
        if !filter.matches(&[
            (q.server.ip(), q.server.port()),
            (q.service.ip(), q.service.port()),
        ]) {
            return None;
        }
        self.stats.stuck_sockets += 1;
        let service = (q.service != q.server).then_some(q.service);
        let via = service.map_or_else(String::new, |s| format!(" (Service {s})"));
        Some(Record::DnsStuckSocket(DnsStuckSocketRecord {
            time: rfc3339(SystemTime::now()),
            pid: q.pid,
            comm: q.comm.clone(),
            netns: enricher.netns.name(q.netns_inode),
            netns_inode: q.netns_inode,
            socket_cookie: q.socket_cookie,
            client: q.client.to_string(),
            server: q.server.to_string(),
            service: service.map(|s| s.to_string()),
            since: rfc3339(enricher.clock.wall(stuck.since_ns)),
            lost: stuck.lost,
            others_answered: stuck.others_answered,
            explanation: format!(
                "Socket {} of {} (pid {}) sent its last {} queries to {}{via} and got no answer, \
                 while {} queries from other sockets to it were answered: the socket is stuck on a \
                 dead server; restarting the process or closing the socket moves it to a live one.",
                q.client, q.comm, q.pid, stuck.lost, q.server, stuck.others_answered
            ),
        }))
    }
}

/// The Service and the server behind it, when load balancing was seen: the connected address
/// versus the packet's destination (DNAT in the sender's namespace), else the node's conntrack entry
/// of the query (kube-proxy DNAT after the packet left the sender's namespace).
fn service_backend(query: &Query, enricher: &mut Enricher) -> Option<(SocketAddr, SocketAddr)> {
    if let Some(dialed) = query.dialed() {
        return Some((dialed, query.server()));
    }
    let original = Direction {
        src: query.client(),
        dst: query.server(),
    };
    let entry = enricher.conntrack.as_mut()?.get_udp(original).ok()??;
    entry.backend().map(|backend| (query.server(), backend))
}

fn lost(query: &Query, via: Option<(SocketAddr, SocketAddr)>) -> Lost {
    let (service, server) = via.unwrap_or((query.server(), query.server()));
    Lost {
        socket_cookie: query.key.socket_cookie,
        netns_inode: query.key.netns_inode,
        pid: query.pending.pid,
        comm: query.comm(),
        client: query.client(),
        server,
        service,
        sent_ns: query.pending.sent_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_records_are_told_apart_by_their_kind() {
        let ev = DnsEvent {
            kind: EVENT_DNS_REPLY,
            ..DnsEvent::default()
        };
        // SAFETY: DnsEvent is Pod.
        let bytes = unsafe {
            std::slice::from_raw_parts(std::ptr::from_ref(&ev).cast::<u8>(), size_of::<DnsEvent>())
        };
        assert!(is_dns_record(bytes));
        assert!(!is_dns_record(&[1, 0, 0, 0]));
        assert!(!is_dns_record(&[3, 0]));
    }
}
