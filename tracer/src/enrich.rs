//! Stage 4: a flow plus what userspace knows about its surroundings (wall-clock time, namespace names)
//! -> the record users read.
use std::net::{IpAddr, SocketAddr};

use tracer_common::FLAG_DIALED_KNOWN;

use crate::{
    clock::{KernelClock, rfc3339},
    decode::{comm_to_string, ip_from_kernel},
    flows::Flow,
    netns::NetnsNames,
    record::ConnectRecord,
    verdict::errno_name,
};

pub struct Enricher {
    pub clock: KernelClock,
    pub netns: NetnsNames,
}

/// Socket destination, and the dialled one when known and different.
pub fn destinations(flow: &Flow) -> (SocketAddr, Option<SocketAddr>) {
    let a = &flow.attempt;
    let unspecified = IpAddr::from([0u8; 4]);
    let dst = SocketAddr::new(
        ip_from_kernel(a.family, a.daddr).unwrap_or(unspecified),
        a.dport,
    );
    let dialed = (a.flags & FLAG_DIALED_KNOWN != 0)
        .then(|| ip_from_kernel(a.family, a.dialed_addr))
        .flatten()
        .map(|ip| SocketAddr::new(ip, a.dialed_port))
        .filter(|d| *d != dst);
    (dst, dialed)
}

impl Enricher {
    pub fn connect_record(&mut self, flow: &Flow) -> ConnectRecord {
        let a = &flow.attempt;
        let (dst, dialed) = destinations(flow);
        let unspecified = IpAddr::from([0u8; 4]);
        let src = SocketAddr::new(
            ip_from_kernel(a.family, a.saddr).unwrap_or(unspecified),
            a.sport,
        );
        let waited = flow.syn_sent_for();
        let shown_dst = dialed.map_or_else(|| dst.to_string(), |d| format!("{d} (backend {dst})"));
        ConnectRecord {
            time: rfc3339(self.clock.wall(flow.at_ns)),
            verdict: flow.verdict.name().into(),
            cause: flow.verdict.cause(),
            is_final: flow.is_final,
            src: src.to_string(),
            dst: dst.to_string(),
            dialed: dialed.map(|d| d.to_string()),
            syns: a.syn_count,
            syn_sent_ms: waited.as_millis() as u64,
            errno: (flow.error != 0).then(|| errno_name(flow.error)),
            pid: a.pid,
            tid: a.tid,
            comm: comm_to_string(&a.comm),
            cgroup_id: a.cgroup_id,
            netns: self.netns.name(a.netns_cookie),
            netns_cookie: a.netns_cookie,
            flow: format!("{:x}-{:x}", a.sock, a.start_ns),
            explanation: flow.verdict.explain(&shown_dst, a.syn_count, waited),
        }
    }
}
