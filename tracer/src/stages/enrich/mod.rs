//! Stage 5: a flow plus what userspace knows about its surroundings (wall-clock time, namespace names,
//! the Service and backend from conntrack) -> the record users read. Pod, Service and node names
//! come from `identity/`. DNS findings are named in `dns.rs`, the same way.
mod dns;
pub mod replies;

use std::{borrow::Cow, net::SocketAddr, time::Instant};

use hashbrown::HashMap;

use crate::{
    conntrack::{
        netlink::{Conntrack, Direction, Entry},
        subscription::DestroySubscription,
    },
    datapath::backends::RuleBackends,
    identity::cluster::Proto,
};

use crate::{
    addr_text::AddrText,
    cilium::CiliumMaps,
    clock::{KernelClock, Timestamp},
    identity::Identities,
    netns::NetnsNames,
    record::{ConnectRecord, HealthyRecord},
    stages::{decode::HealthyConnects, flows::Flow},
    verdict::{Errno, RefusedBy, Verdict, VerdictKind},
};

pub struct Enricher {
    pub clock: KernelClock,
    pub netns: NetnsNames,
    pub identities: Identities,
    /// The node's conntrack table, for the backend behind a Service address; None if unavailable.
    pub conntrack: Option<Conntrack>,
    /// Entries conntrack already destroyed (a RST kills an unanswered entry at once), followed as
    /// `--conntrack-destroy-events` says.
    pub destroyed: DestroySubscription,
    /// The process that held each socket whose replies are being lost, as found at its live
    /// report, by (socket, first retransmit) and with the time of that report: at the socket's end
    /// the process has usually closed it.
    pub reply_owners: HashMap<(u64, u64), ((u32, String), u64)>,
    /// Cilium's load-balancing maps, for the Service of a socket its socket LB rewrote before our
    /// `connect()` hook ran; `None` where not looked for (replay, tests).
    pub cilium: Option<CiliumMaps>,
    /// The backends the node's Service rules allow (read by the datapath audit), for a connect
    /// whose conntrack entry does not exist.
    pub rule_backends: RuleBackends,
}

/// The Service a connect meant and the backend it was sent to, when load balancing was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceBackend {
    pub service: SocketAddr,
    pub backend: SocketAddr,
}

const IPPROTO_TCP: u8 = 6;

impl Enricher {
    /// Socket-level LB: the app dialled the Service, the socket holds the backend; when our hook
    /// ran after the rewrite, Cilium's reverse socket NAT map says what was dialled (read by the
    /// hook itself, else here: an entry exists only for a socket Cilium rewrote, so it is asked
    /// first, with no netlink round trip).
    /// Otherwise ask conntrack whether the socket's destination was DNAT'd (kube-proxy) and to
    /// which backend; if the entry is gone, the destroy events. A refusal by RST with no entry
    /// left is what makes `auto` follow destroy events. With no entry at all, the node's Service
    /// rules, when they send the destination to one backend only.
    pub fn service_backend(&mut self, flow: &Flow) -> Option<ServiceBackend> {
        let dst = flow.attempt.dst;
        if let Some(service) = flow.attempt.dialed {
            if flow.is_final
                && flow.attempt.flags.dialed_by_socket_lb()
                && let Some(cilium) = &mut self.cilium
            {
                cilium.named_at_connect(service, dst, IPPROTO_TCP);
            }
            return Some(ServiceBackend {
                service,
                backend: dst,
            });
        }
        let a = &flow.attempt;
        if let Some(service) = self
            .cilium
            .as_mut()
            .and_then(|c| c.service_of(a.cookie, dst, IPPROTO_TCP, flow.at_ns))
        {
            return Some(ServiceBackend {
                service,
                backend: dst,
            });
        }
        self.conntrack_backend(flow, dst).or_else(|| {
            self.rule_backends
                .only_backend(dst, Proto::Tcp)
                .map(|backend| ServiceBackend {
                    service: dst,
                    backend,
                })
        })
    }

    /// kube-proxy's DNAT as the node's conntrack holds it, or as a destroy event said.
    fn conntrack_backend(&mut self, flow: &Flow, dst: SocketAddr) -> Option<ServiceBackend> {
        let src = flow.attempt.src;
        if src.port() == 0 {
            return None;
        }
        let original = Direction { src, dst };
        let live = self
            .conntrack
            .as_mut()
            .and_then(|c| c.get(original).ok().flatten());
        if let Some(backend) = live.as_ref().and_then(Entry::backend) {
            return Some(ServiceBackend {
                service: dst,
                backend,
            });
        }
        let refused_without_entry = live.is_none()
            && flow.is_final
            && flow.verdict == Verdict::Refused { by: RefusedBy::Rst };
        let backend = self.destroyed.backend_after_miss(
            original,
            refused_without_entry.then_some(flow.at_ns),
            Instant::now(),
        )?;
        Some(ServiceBackend {
            service: dst,
            backend,
        })
    }

    /// Forgets the owners of sockets whose end never came (as the flow table forgets attempts).
    pub fn expire(&mut self, now_ns: u64) {
        let ttl = u64::try_from(crate::stages::flows::OPEN_FLOW_TTL.as_nanos()).unwrap_or(u64::MAX);
        self.reply_owners
            .retain(|_, (_, at_ns)| now_ns.saturating_sub(*at_ns) < ttl);
        if let Some(cilium) = &mut self.cilium {
            cilium.expire(now_ns, ttl);
        }
    }

    /// The wall-clock time of a kernel timestamp.
    pub fn time_of(&self, ktime_ns: u64) -> Timestamp {
        Timestamp(self.clock.wall(ktime_ns))
    }

    pub fn connect_record(&mut self, flow: &Flow, via: Option<ServiceBackend>) -> ConnectRecord {
        let a = &flow.attempt;
        let dst = a.dst;
        // A socket LB's Service (named from Cilium's maps when our hook came too late) is what
        // the application dialled; a conntrack DNAT's Service is the socket's own destination.
        let dialed = a.dialed.or_else(|| {
            via.filter(|v| v.backend == dst && v.service != dst)
                .map(|v| v.service)
        });
        let src = a.src;
        let waited = flow.syn_sent_for();
        let dst_text = AddrText::new(dst);
        let shown_dst = via.map_or(Cow::Borrowed(dst_text.as_str()), |v| {
            Cow::Owned(format!(
                "backend {} of Service {}",
                AddrText::new(v.backend).as_str(),
                AddrText::new(v.service).as_str()
            ))
        });
        ConnectRecord {
            time: self.time_of(flow.at_ns),
            verdict: flow.verdict,
            is_final: flow.is_final,
            src,
            dst,
            dialed,
            service: via.map(|v| v.service),
            backend: via.map(|v| v.backend),
            syns: a.syn_count,
            syn_sent_ms: waited.as_millis() as u64,
            errno: (flow.error != 0).then_some(Errno(flow.error)),
            pid: a.pid,
            tid: a.tid,
            comm: a.comm.clone(),
            cgroup_id: a.cgroup_id,
            netns: self.netns.name(a.netns_inode),
            netns_inode: a.netns_inode,
            flow: format!("{:x}-{:x}", a.sock, a.start_ns),
            explanation: flow.verdict.explain(&shown_dst, a.syn_count, waited),
            identity: self.identities.connect(
                a.cgroup_id,
                src,
                via.map_or(dst, |v| v.backend),
                via.map(|v| v.service),
                flow.verdict,
            ),
            dns: dst.port() == 53 || dialed.is_some_and(|d| d.port() == 53),
        }
    }
}

impl Enricher {
    /// Connects from one process to one destination answered on the first SYN, as the kernel
    /// counted them since the last report.
    #[expect(
        clippy::cast_precision_loss,
        reason = "a mean in milliseconds needs no 64-bit precision"
    )]
    pub fn healthy_record(&mut self, h: &HealthyConnects, time: Timestamp) -> HealthyRecord {
        HealthyRecord {
            time,
            verdict: VerdictKind::Established,
            dst: h.dst,
            pid: h.pid,
            comm: h.comm.clone(),
            cgroup_id: h.cgroup_id,
            netns: self.netns.name(h.netns_inode),
            netns_inode: h.netns_inode,
            established: h.established,
            mean_syn_sent_ms: h.syn_sent_ns_total as f64 / h.established as f64 / 1e6,
            identity: self.identities.healthy(h.cgroup_id, h.dst),
        }
    }
}
