//! The DNS side of the kernel programs, from userspace: the `cgroup_skb` hooks on the cgroup v2 root,
//! and the maps swept for `dns/` (`PENDING_DNS`, `DNS_HEALTHY`, `DNS_SOCK_ERRORS`,
//! `DNS_SOCK_ANSWERED`).
use std::{fs::File, path::Path, time::Duration};

use anyhow::{Context as _, anyhow};
use aya::{
    Ebpf,
    maps::{HashMap, MapData, PerCpuHashMap},
    programs::{CgroupAttachMode, CgroupSkb, CgroupSkbAttachType},
};
use tracer_common::{DnsConfig, DnsHealthyStats, DnsKey, Endpoint, PendingDns, SockError};

use crate::dns::{
    Expired, HealthyTotals,
    queries::{self, Query},
};

use super::{
    capabilities::{self, Capabilities},
    load_error, take_map,
};

/// Loads every program before any is attached, so a refusal leaves nothing half attached.
fn load(ebpf: &mut Ebpf, programs: &[(&str, CgroupSkbAttachType)]) -> anyhow::Result<()> {
    for &(name, _) in programs {
        let program: &mut CgroupSkb = ebpf
            .program_mut(name)
            .ok_or_else(|| anyhow!("program {name} missing from the eBPF object"))?
            .try_into()?;
        program.load().map_err(|e| load_error(name, e))?;
    }
    Ok(())
}

/// DNS queries refused by ICMP are told from unanswered ones by the error-report tracepoint.
pub fn refused_capability(capabilities: &mut Capabilities, error_report: bool) {
    if !capabilities.is_full(capabilities::DNS) {
        capabilities.off(capabilities::DNS_REFUSED, "DNS is off");
    } else if error_report {
        capabilities.full(capabilities::DNS_REFUSED);
    } else {
        capabilities.degraded(
            capabilities::DNS_REFUSED,
            "no tracepoint inet_sk_error_report: a DNS query refused by ICMP port-unreachable is \
             reported unanswered",
        );
    }
}

/// The settings the DNS programs read: the slow-reply threshold.
pub fn config(slow_reply: Duration) -> DnsConfig {
    DnsConfig {
        slow_reply_ns: u64::try_from(slow_reply.as_nanos()).unwrap_or(u64::MAX),
    }
}

pub struct DnsMaps {
    pending: HashMap<MapData, DnsKey, PendingDns>,
    healthy: PerCpuHashMap<MapData, Endpoint, DnsHealthyStats>,
    sock_errors: HashMap<MapData, u64, SockError>,
    sock_answered: HashMap<MapData, u64, u64>,
}

impl DnsMaps {
    /// Takes the queries that waited `timeout_ns` or whose socket was refused out of
    /// `PENDING_DNS`, oldest first.
    pub fn take_expired(&mut self, now_ns: u64, timeout_ns: u64) -> Vec<Expired> {
        let mut expired = Vec::new();
        for (key, pending) in self.pending.iter().flatten() {
            let error = self.sock_errors.get(&key.socket_cookie, 0).ok();
            if let Some(outcome) = queries::expiry(&pending, now_ns, timeout_ns, error) {
                expired.push(Expired {
                    query: Query { key, pending },
                    outcome,
                    socket_answered_ns: self.sock_answered.get(&key.socket_cookie, 0).ok(),
                });
            }
        }
        expired.sort_by_key(|e| e.query.pending.sent_ns);
        for e in &expired {
            let _ = self.pending.remove(&e.query.key);
        }
        expired
    }

    /// The healthy counts of every server, summed over CPUs.
    pub fn healthy_totals(&self) -> HealthyTotals {
        self.healthy
            .iter()
            .flatten()
            .map(|(server, per_cpu)| {
                let total = per_cpu.iter().fold((0, 0), |(n, ns), s| {
                    (n + s.answered, ns + s.latency_ns_total)
                });
                (server, total)
            })
            .collect()
    }
}

/// Loads and attaches the two `cgroup_skb` programs to the cgroup v2 root (unless `hooks` is false:
/// `--no-dns`, the maps stay empty) and takes the DNS maps. A kernel that refuses the programs
/// turns DNS off (said in `capabilities`), it does not stop the run.
pub fn attach(
    ebpf: &mut Ebpf,
    cgroup: &File,
    cgroup_root: &Path,
    hooks: bool,
    capabilities: &mut Capabilities,
) -> anyhow::Result<DnsMaps> {
    const PROGRAMS: [(&str, CgroupSkbAttachType); 2] = [
        ("dns_egress", CgroupSkbAttachType::Egress),
        ("dns_ingress", CgroupSkbAttachType::Ingress),
    ];
    if !hooks {
        capabilities.off(capabilities::DNS, "--no-dns");
    } else if let Err(e) = load(ebpf, &PROGRAMS) {
        capabilities.off(
            capabilities::DNS,
            format!("{e:#}: no DNS queries are followed"),
        );
    } else {
        for (name, direction) in PROGRAMS {
            let program: &mut CgroupSkb = ebpf
                .program_mut(name)
                .ok_or_else(|| anyhow!("program {name} missing from the eBPF object"))?
                .try_into()?;
            // Multi mode coexists with other tools' programs on the root; some kernels refuse it there.
            program
                .attach(cgroup, direction, CgroupAttachMode::AllowMultiple)
                .or_else(|_| program.attach(cgroup, direction, CgroupAttachMode::Single))
                .with_context(|| {
                    format!(
                        "attaching {name} to the cgroup v2 root {}",
                        cgroup_root.display()
                    )
                })?;
        }
        capabilities.full(capabilities::DNS);
    }
    Ok(DnsMaps {
        pending: HashMap::try_from(take_map(ebpf, "PENDING_DNS")?)?,
        healthy: PerCpuHashMap::try_from(take_map(ebpf, "DNS_HEALTHY")?)?,
        sock_errors: HashMap::try_from(take_map(ebpf, "DNS_SOCK_ERRORS")?)?,
        sock_answered: HashMap::try_from(take_map(ebpf, "DNS_SOCK_ANSWERED")?)?,
    })
}
