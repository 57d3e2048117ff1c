//! Stage 3 for UDP DNS: queries paired with replies in the kernel (`tracer-ebpf/src/cgroup_skb_dns.rs`); here
//! what needs attention becomes records.
//!
//! - `question.rs`: the query's first question, read from the bytes the kernel copied after the
//!   header (they come from packets anyone can send).
//! - `queries.rs`: one query, its question and its outcome (`slow`, `error`, `unanswered`,
//!   `refused`).
//! - `stuck.rs`: the `stuck socket` verdict.
//!
//! The kernel sends only slow and error replies. Every tick the pending queries older than
//! `--dns-timeout` are taken out of `PENDING_DNS` (`kernel/dns.rs`) and become `unanswered`, or
//! `refused` when their socket was told `ECONNREFUSED`; the per-server healthy counts are read to
//! know which servers answer others, and reported on the stats interval. What this module finds
//! (`Finding`) carries no names: `stages/mod.rs` filters it, `enrich/dns.rs` names it and a sink
//! writes it, as for TCP.
pub mod queries;
pub mod question;
pub mod stuck;

use std::net::SocketAddr;

use hashbrown::HashMap;

use self::{
    queries::{Outcome, Query},
    stuck::{Lost, Stuck, StuckDetector},
};
use crate::{
    record::DnsStats,
    stages::decode::{DnsReply, DnsServer},
};

/// How often pending queries are checked for their timeout.
pub const TICK: std::time::Duration = std::time::Duration::from_millis(250);

/// A pending query taken out of the kernel's table: what became of it, and when its socket last
/// got an answer (for the stuck-socket verdict).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    pub query: Query,
    pub outcome: Outcome,
    pub socket_answered_ns: Option<u64>,
}

/// Per server: fast NOERROR replies and their summed latency, since the start.
pub type HealthyTotals = hashbrown::HashMap<DnsServer, (u64, u64)>;

/// The Service a query meant and the server it was sent to, when load balancing was seen.
pub type ServiceServer = (SocketAddr, SocketAddr);

/// What needs a record.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// A query that needs attention: slow or error reply, unanswered, refused.
    Query {
        query: Query,
        outcome: Outcome,
        at_ns: u64,
        via: Option<ServiceServer>,
    },
    /// A socket whose queries to one server all go unanswered while other sockets get answers.
    StuckSocket(Stuck),
}

/// Fast NOERROR replies from one server since the last report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Healthy {
    pub server: DnsServer,
    pub answered: u64,
    pub latency_ns: u64,
}

pub struct DnsTracker {
    pub timeout_ns: u64,
    stuck: StuckDetector,
    pub stats: DnsStats,
    /// Healthy totals per server at the previous read, to compute what is new.
    healthy_previous: HashMap<DnsServer, (u64, u64)>,
    /// New healthy replies not yet reported: count, summed latency.
    healthy_unreported: HashMap<DnsServer, (u64, u64)>,
}

impl DnsTracker {
    pub fn new(timeout: std::time::Duration, stuck_after: u32) -> DnsTracker {
        DnsTracker {
            timeout_ns: u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX),
            stuck: StuckDetector::new(stuck_after),
            stats: DnsStats::default(),
            healthy_previous: HashMap::new(),
            healthy_unreported: HashMap::new(),
        }
    }

    /// A slow or error reply from the ring buffer; `via` is what the query's naming found.
    pub fn reply(&mut self, reply: DnsReply, via: Option<ServiceServer>) -> Finding {
        self.stuck.answered(reply.from, reply.reply_ns, 1);
        self.stats.slow_or_error += 1;
        Finding::Query {
            outcome: Outcome::Reply {
                rcode: reply.rcode,
                latency_ns: reply.reply_ns.saturating_sub(reply.query.sent_ns),
                from: reply.from,
            },
            query: reply.query,
            at_ns: reply.reply_ns,
            via,
        }
    }

    /// Every `TICK`: the servers' new healthy counts, then the queries the kernel side took out as
    /// expired (oldest first), then sockets found stuck. `via` names each query's Service.
    pub fn tick(
        &mut self,
        healthy: &HealthyTotals,
        expired: Vec<Expired>,
        now_ns: u64,
        mut via: impl FnMut(&Query) -> Option<ServiceServer>,
    ) -> Vec<Finding> {
        self.read_healthy(healthy, now_ns);
        let mut findings = Vec::new();
        for Expired {
            query,
            outcome,
            socket_answered_ns,
        } in expired
        {
            let via = via(&query);
            if let Outcome::Refused { .. } = outcome {
                self.stats.refused += 1;
            } else {
                self.stats.unanswered += 1;
                if let Some(stuck) = self.stuck.lost(lost(&query, via), socket_answered_ns) {
                    findings.push(Finding::StuckSocket(stuck));
                }
            }
            findings.push(Finding::Query {
                query,
                outcome,
                at_ns: now_ns,
                via,
            });
        }
        findings.extend(
            self.stuck
                .check(now_ns)
                .into_iter()
                .map(Finding::StuckSocket),
        );
        findings
    }

    fn read_healthy(&mut self, healthy: &HealthyTotals, now_ns: u64) {
        for (&server, &total) in healthy {
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
            self.stuck.answered(server.addr, now_ns, new.0);
            let unreported = self.healthy_unreported.entry(server).or_default();
            unreported.0 += new.0;
            unreported.1 += new.1;
        }
    }

    /// The healthy replies since the last call, per server.
    pub fn take_healthy(&mut self) -> Vec<Healthy> {
        self.healthy_unreported
            .drain()
            .map(|(server, (answered, latency_ns))| Healthy {
                server,
                answered,
                latency_ns,
            })
            .collect()
    }
}

fn lost(query: &Query, via: Option<ServiceServer>) -> Lost {
    let (service, server) = via.unwrap_or((query.server, query.server));
    Lost {
        socket_cookie: query.key.socket_cookie,
        netns_inode: query.key.netns_inode,
        pid: query.pid,
        comm: query.comm.clone(),
        client: query.client,
        server,
        service,
        sent_ns: query.sent_ns,
    }
}
