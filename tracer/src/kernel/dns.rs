//! The DNS side of the kernel programs, from userspace: the `cgroup_skb` hooks on the cgroup v2 root
//! and the maps `dns/` reads (`PENDING_DNS`, `DNS_HEALTHY`, `DNS_SOCK_ERRORS`).
use std::{fs::File, path::Path, time::Duration};

use anyhow::{Context as _, anyhow};
use aya::{
    Ebpf,
    maps::{HashMap, MapData, PerCpuHashMap},
    programs::{CgroupAttachMode, CgroupSkb, CgroupSkbAttachType},
};
use tracer_common::{DnsConfig, DnsHealthyStats, DnsKey, Endpoint, PendingDns, SockError};

use super::{load_error, take_map};

/// The settings the DNS programs read: the slow-reply threshold.
pub fn config(slow_reply: Duration) -> DnsConfig {
    DnsConfig {
        slow_reply_ns: u64::try_from(slow_reply.as_nanos()).unwrap_or(u64::MAX),
    }
}

pub struct DnsMaps {
    pub pending: HashMap<MapData, DnsKey, PendingDns>,
    pub healthy: PerCpuHashMap<MapData, Endpoint, DnsHealthyStats>,
    pub sock_errors: HashMap<MapData, u64, SockError>,
    pub sock_answered: HashMap<MapData, u64, u64>,
}

/// Loads and attaches the two `cgroup_skb` programs to the cgroup v2 root (unless `hooks` is false:
/// `--no-dns`, the maps stay empty) and takes the DNS maps.
pub fn attach(
    ebpf: &mut Ebpf,
    cgroup: &File,
    cgroup_root: &Path,
    hooks: bool,
) -> anyhow::Result<DnsMaps> {
    let programs = if hooks {
        &[
            ("dns_egress", CgroupSkbAttachType::Egress),
            ("dns_ingress", CgroupSkbAttachType::Ingress),
        ][..]
    } else {
        &[]
    };
    for &(name, direction) in programs {
        let program: &mut CgroupSkb = ebpf
            .program_mut(name)
            .ok_or_else(|| anyhow!("program {name} missing from the eBPF object"))?
            .try_into()?;
        program.load().map_err(|e| load_error(name, e))?;
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
    Ok(DnsMaps {
        pending: HashMap::try_from(take_map(ebpf, "PENDING_DNS")?)?,
        healthy: PerCpuHashMap::try_from(take_map(ebpf, "DNS_HEALTHY")?)?,
        sock_errors: HashMap::try_from(take_map(ebpf, "DNS_SOCK_ERRORS")?)?,
        sock_answered: HashMap::try_from(take_map(ebpf, "DNS_SOCK_ANSWERED")?)?,
    })
}
