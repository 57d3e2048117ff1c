//! The DNS part of the TUI's model: per DNS server, what happened to the queries that crossed from the
//! kernel (and the healthy counts), and the stuck sockets, which are listed first.
use std::{collections::BTreeMap, net::SocketAddr};

use crate::{
    record::{DnsHealthyRecord, DnsRecord, DnsStuckSocketRecord},
    verdict::DnsVerdict,
};

/// Counts for one DNS server (the address the queries went to; the DNS pod when a Service was
/// load balanced).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DnsServer {
    pub answered: u64,
    pub unanswered: u64,
    pub refused: u64,
    pub errors: u64,
    pub slow: u64,
}

impl DnsServer {
    pub fn failing(&self) -> u64 {
        self.unanswered + self.refused
    }
}

#[derive(Debug, Default, Clone)]
pub struct DnsModel {
    pub servers: BTreeMap<SocketAddr, DnsServer>,
    /// One entry per (socket, dead server), the latest report of it.
    pub stuck: Vec<DnsStuckSocketRecord>,
}

impl DnsModel {
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.stuck.is_empty()
    }

    pub fn query(&mut self, d: &DnsRecord) {
        let counts = self
            .servers
            .entry(d.backend.unwrap_or(d.server))
            .or_default();
        match d.verdict {
            DnsVerdict::Unanswered => counts.unanswered += 1,
            DnsVerdict::Refused => counts.refused += 1,
            DnsVerdict::Slow => counts.slow += 1,
            DnsVerdict::Error => counts.errors += 1,
        }
    }

    pub fn healthy(&mut self, h: &DnsHealthyRecord) {
        self.servers.entry(h.server).or_default().answered += h.answered;
    }

    pub fn stuck_socket(&mut self, s: DnsStuckSocketRecord) {
        match self
            .stuck
            .iter_mut()
            .find(|k| k.socket_cookie == s.socket_cookie && k.server == s.server)
        {
            Some(known) => *known = s,
            None => self.stuck.push(s),
        }
    }

    /// Servers, the ones losing the most queries first.
    pub fn ranked_servers(&self) -> Vec<(&SocketAddr, &DnsServer)> {
        let mut servers: Vec<_> = self.servers.iter().collect();
        servers.sort_by(|a, b| b.1.failing().cmp(&a.1.failing()).then(a.0.cmp(b.0)));
        servers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(server: &str, verdict: &str) -> DnsRecord {
        serde_json::from_value(serde_json::json!({
            "time": "2026-11-30T16:00:00Z", "verdict": verdict, "name": "web.test", "qtype": "A",
            "id": 1, "server": server, "client": "10.0.0.1:40000", "pid": 1, "tid": 1,
            "comm": "nginx", "cgroup_id": 1, "netns": "ns", "netns_inode": 1,
            "socket_cookie": 7, "explanation": "x"
        }))
        .expect("a dns record")
    }

    #[test]
    fn servers_losing_queries_rank_first() {
        let mut m = DnsModel::default();
        m.query(&query("10.0.0.2:53", "slow"));
        m.query(&query("10.0.0.3:53", "unanswered"));
        m.query(&query("10.0.0.3:53", "unanswered"));
        let ranked = m.ranked_servers();
        assert_eq!(ranked[0].0.to_string(), "10.0.0.3:53");
        assert_eq!(ranked[0].1.unanswered, 2);
    }
}
