//! The DNS side of the kernel programs, from userspace: the hooks of the DNS tier (`tiers.rs`), and
//! the maps swept for `dns/` (`PENDING_DNS`, `DNS_HEALTHY`, `DNS_SOCK_ERRORS`,
//! `DNS_SOCK_ANSWERED`).
use std::{fs::File, path::Path, time::Duration};

use aya::{
    Btf, Ebpf,
    maps::{HashMap, MapData, PerCpuHashMap},
    programs::{CgroupAttachMode, CgroupSkb, CgroupSkbAttachType},
};
use tracer_common::{DnsConfig, DnsHealthyStats, DnsKey, Endpoint, PendingDns, SockError};

use crate::{
    record::{HookTier, HookTiers},
    stages::{
        decode,
        dns::{Expired, HealthyTotals, queries},
    },
};

use super::{
    attach_fentry, attach_kprobe, attach_tp_btf,
    capabilities::{self, Capabilities},
    load_error, take_map,
};

/// What DNS can do with the tier it got: every tier names the same verdicts; the syscall
/// tracepoints see a reply only when the application reads it. (They see an unconnected socket's
/// bound address, not the one its datagram left from: userspace asks the route for that,
/// `stages/mod.rs`.) DNS queries refused by ICMP are told from unanswered ones by the error-report
/// tracepoint.
pub fn capabilities(
    capabilities: &mut Capabilities,
    no_dns: bool,
    hooks: &HookTiers,
    error_report: bool,
) {
    let Some(tier) = hooks.dns.tier else {
        let why = if no_dns {
            "--no-dns".to_string()
        } else {
            format!(
                "no DNS hook tier loaded here ({}): no DNS queries are followed",
                hooks
                    .dns
                    .not_used
                    .iter()
                    .map(|(t, why)| format!("{t}: {why}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        };
        capabilities.off(capabilities::DNS, why);
        for name in [capabilities::DNS_REFUSED, capabilities::DNS_UNREAD_REPLIES] {
            capabilities.off(name, "DNS is off");
        }
        return;
    };
    capabilities.full(capabilities::DNS);
    if error_report {
        capabilities.full(capabilities::DNS_REFUSED);
    } else {
        capabilities.degraded(
            capabilities::DNS_REFUSED,
            "no tracepoint inet_sk_error_report: a DNS query refused by ICMP port-unreachable is \
             reported unanswered",
        );
    }
    if tier == HookTier::Tracepoint {
        capabilities.degraded(
            capabilities::DNS_UNREAD_REPLIES,
            "DNS hooks on the sock_recv_length tracepoint see a reply when the application reads \
             it: one that arrived but was never read (the socket closed first) is reported \
             unanswered",
        );
    } else {
        capabilities.full(capabilities::DNS_UNREAD_REPLIES);
    }
}

/// The settings the DNS programs read: the slow-reply threshold, and the key that turns a socket's
/// address into its id where the hooks cannot ask for its cookie (random per run: no kernel
/// address reaches the output).
pub fn config(slow_reply: Duration) -> DnsConfig {
    let mut key = [0u8; 8];
    let random = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut key));
    let socket_id_key = if random.is_ok() {
        u64::from_ne_bytes(key)
    } else {
        // Without randomness, still no raw address: the time of start.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    };
    DnsConfig {
        slow_reply_ns: u64::try_from(slow_reply.as_nanos()).unwrap_or(u64::MAX),
        socket_id_key,
    }
}

/// Loads and attaches the programs of DNS tier `tier`; `Err` says why the kernel refused them.
pub fn attach(
    ebpf: &mut Ebpf,
    btf: &Btf,
    cgroup: &File,
    cgroup_root: &Path,
    tier: HookTier,
) -> Result<(), String> {
    match tier {
        HookTier::Fentry => {
            attach_fentry(ebpf, btf, "fentry_udp_send_skb", "udp_send_skb")?;
            attach_fentry(ebpf, btf, "fentry_udp_v6_send_skb", "udp_v6_send_skb")?;
            attach_fentry(
                ebpf,
                btf,
                "fentry_udp_enqueue",
                "__udp_enqueue_schedule_skb",
            )
        }
        HookTier::Kprobe => {
            attach_kprobe(ebpf, "kprobe_udp_send_skb", "udp_send_skb")?;
            attach_kprobe(ebpf, "kprobe_udp_v6_send_skb", "udp_v6_send_skb")?;
            attach_kprobe(ebpf, "kprobe_udp_enqueue", "__udp_enqueue_schedule_skb")
        }
        HookTier::Tracepoint => {
            attach_tp_btf(ebpf, btf, "sock_send_length", "sock_send_length")?;
            attach_tp_btf(ebpf, btf, "sock_recv_length", "sock_recv_length")
        }
        HookTier::CgroupSkb => attach_cgroup_skb(ebpf, cgroup, cgroup_root),
    }
}

/// The `cgroup_skb` pair on the cgroup v2 root, both loaded before either is attached.
fn attach_cgroup_skb(ebpf: &mut Ebpf, cgroup: &File, cgroup_root: &Path) -> Result<(), String> {
    const PROGRAMS: [(&str, CgroupSkbAttachType); 2] = [
        ("dns_egress", CgroupSkbAttachType::Egress),
        ("dns_ingress", CgroupSkbAttachType::Ingress),
    ];
    for (name, _) in PROGRAMS {
        cgroup_skb(ebpf, name)?
            .load()
            .map_err(|e| load_error(name, e).to_string())?;
    }
    for (name, direction) in PROGRAMS {
        let program = cgroup_skb(ebpf, name)?;
        // Multi mode coexists with other tools' programs on the root; some kernels refuse it there.
        program
            .attach(cgroup, direction, CgroupAttachMode::AllowMultiple)
            .or_else(|_| program.attach(cgroup, direction, CgroupAttachMode::Single))
            .map_err(|e| {
                format!(
                    "attaching {name} to the cgroup v2 root {}: {e}",
                    cgroup_root.display()
                )
            })?;
    }
    Ok(())
}

fn cgroup_skb<'e>(ebpf: &'e mut Ebpf, name: &str) -> Result<&'e mut CgroupSkb, String> {
    ebpf.program_mut(name)
        .ok_or_else(|| format!("program {name} missing from the eBPF object"))?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| format!("program {name}: {e}"))
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
                    query: decode::query(key, &pending),
                    outcome,
                    socket_answered_ns: self.sock_answered.get(&key.socket_cookie, 0).ok(),
                });
            }
        }
        expired.sort_by_key(|e| e.query.sent_ns);
        for e in &expired {
            let _ = self.pending.remove(&e.query.key);
        }
        expired
    }

    /// The healthy counts of every server, summed over CPUs (a server of an address family we do
    /// not know is left out: nothing could name it).
    pub fn healthy_totals(&self) -> HealthyTotals {
        self.healthy
            .iter()
            .flatten()
            .filter_map(|(server, per_cpu)| {
                let total = per_cpu.iter().fold((0, 0), |(n, ns), s| {
                    (n + s.answered, ns + s.latency_ns_total)
                });
                Some((decode::dns_server(&server).ok()?, total))
            })
            .collect()
    }
}

impl DnsMaps {
    /// The DNS maps, whatever tier fills them (empty with DNS off).
    pub fn take(ebpf: &mut Ebpf) -> anyhow::Result<DnsMaps> {
        Ok(DnsMaps {
            pending: HashMap::try_from(take_map(ebpf, "PENDING_DNS")?)?,
            healthy: PerCpuHashMap::try_from(take_map(ebpf, "DNS_HEALTHY")?)?,
            sock_errors: HashMap::try_from(take_map(ebpf, "DNS_SOCK_ERRORS")?)?,
            sock_answered: HashMap::try_from(take_map(ebpf, "DNS_SOCK_ANSWERED")?)?,
        })
    }
}
