//! DNS findings (`dns/`) -> records: wall time, namespace name, the Service a query meant (from the
//! connected address or the node's conntrack), the question, and the cluster-state verdict.
use std::time::SystemTime;

use super::Enricher;
use crate::{
    clock::Timestamp,
    conntrack::netlink::Direction,
    record::{DnsHealthyRecord, DnsRecord, DnsStuckSocketRecord},
    stages::dns::{
        Healthy, ServiceServer,
        queries::{self, Outcome, Query, rcode_name},
        question::qtype_name,
        stuck::Stuck,
    },
};

const IPPROTO_UDP: u8 = 17;

impl Enricher {
    /// The Service and the server behind it, when load balancing was seen: the connected address
    /// versus the packet's destination (DNAT in the sender's namespace, or Cilium's socket LB as
    /// the kernel hook read its map), else Cilium's reverse socket NAT map read here, else the node's
    /// conntrack entry of the query (kube-proxy DNAT after the packet left the sender's namespace).
    pub fn dns_service_server(&mut self, query: &Query) -> Option<ServiceServer> {
        if let Some(dialed) = query.dialed {
            if query.dialed_by_socket_lb
                && let Some(cilium) = &mut self.cilium
            {
                cilium.named_at_connect(dialed, query.server, IPPROTO_UDP);
            }
            return Some((dialed, query.server));
        }
        let server = query.server;
        // Cilium keys its map by the socket's cookie, which it asked for; on the hook tiers that
        // know a socket by its address the query carries the cookie beside that id.
        let cookie = query.cookie;
        if let Some(service) = (cookie != 0)
            .then_some(())
            .and(self.cilium.as_mut())
            .and_then(|c| c.service_of(cookie, server, IPPROTO_UDP, query.sent_ns))
        {
            return Some((service, server));
        }
        let original = Direction {
            src: query.client,
            dst: query.server,
        };
        let entry = self.conntrack.as_mut()?.get_udp(original).ok()??;
        entry.backend().map(|backend| (query.server, backend))
    }

    /// The record of one query that needs attention; `malformed` is told whether its question
    /// parsed.
    pub fn dns_record(
        &mut self,
        query: &Query,
        outcome: Outcome,
        at_ns: u64,
        via: Option<ServiceServer>,
    ) -> DnsRecord {
        // Where the query went: the backend when a load balancer (a DNAT, a socket LB) chose one,
        // whether the hook saw the datagram before or after it (the hook tiers differ there).
        let server = via.map_or_else(|| query.server, |(_, backend)| backend);
        let question = query.question().ok();
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
            Outcome::Unanswered { .. } | Outcome::Refused { .. } => self
                .identities
                .dns_server_verdict(via.map_or(server, |(_, backend)| backend)),
        };
        DnsRecord {
            time: self.time_of(at_ns),
            verdict: outcome.verdict(),
            name: question.as_ref().map(|q| q.name.clone()),
            qtype: question.as_ref().map(|q| qtype_name(q.qtype).into_owned()),
            id: query.key.id,
            server,
            // A socket LB's Service is what the application dialled (see `connect_record`).
            dialed: query.dialed.or_else(|| {
                via.filter(|&(service, backend)| service != backend)
                    .map(|(service, _)| service)
            }),
            service: via.map(|(s, _)| s),
            backend: via.map(|(_, b)| b),
            client: query.client,
            pid: query.pid,
            tid: query.tid,
            comm: query.comm.clone(),
            cgroup_id: query.cgroup_id,
            netns: self.netns.name(query.key.netns_inode),
            netns_inode: query.key.netns_inode,
            socket_cookie: query.key.socket_cookie,
            rcode,
            latency_ms,
            waited_ms,
            explanation: queries::explanation(&outcome, &what, &shown, server.port()),
            cluster_verdict: cluster.as_ref().map(|c| c.kind),
            cluster_explanation: cluster.map(|c| c.explanation),
        }
    }

    pub fn dns_stuck_record(&mut self, stuck: &Stuck) -> DnsStuckSocketRecord {
        let q = &stuck.latest;
        let service = (q.service != q.server).then_some(q.service);
        let via = service.map_or_else(String::new, |s| format!(" (Service {s})"));
        DnsStuckSocketRecord {
            time: Timestamp(SystemTime::now()),
            pid: q.pid,
            comm: q.comm.clone(),
            netns: self.netns.name(q.netns_inode),
            netns_inode: q.netns_inode,
            socket_cookie: q.socket_cookie,
            client: q.client,
            server: q.server,
            service,
            since: self.time_of(stuck.since_ns),
            lost: stuck.lost,
            others_answered: stuck.others_answered,
            explanation: format!(
                "Socket {} of {} (pid {}) sent its last {} queries to {}{via} and got no answer, \
                 while {} queries from other sockets to it were answered: the socket is stuck on a \
                 dead server; restarting the process or closing the socket moves it to a live one.",
                q.client, q.comm, q.pid, stuck.lost, q.server, stuck.others_answered
            ),
        }
    }

    #[expect(
        clippy::cast_precision_loss,
        reason = "a mean in milliseconds needs no 64-bit precision"
    )]
    pub fn dns_healthy_record(&mut self, h: &Healthy, time: Timestamp) -> DnsHealthyRecord {
        DnsHealthyRecord {
            time,
            server: h.server.addr,
            netns: self.netns.name(h.server.netns_inode),
            netns_inode: h.server.netns_inode,
            answered: h.answered,
            mean_latency_ms: h.latency_ns as f64 / h.answered.max(1) as f64 / 1e6,
        }
    }
}
