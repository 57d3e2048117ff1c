//! Stage 1: the kernel side, from userspace. Loads the programs built from `tracer-ebpf`, attaches
//! them, and hands out the ring buffer and counter maps.
//!
//! Every attachment is a kernel link owned by `KernelSide`: dropping it (normal exit, Ctrl-C,
//! SIGTERM, a panic that unwinds) detaches everything, and so does the kernel when the process dies
//! any other way, since the links are file descriptors.
pub mod btf;
pub mod capabilities;
mod cgroup_link;
mod cgroup_mount;
pub mod counters;
pub mod dns;
pub mod handshakes;
pub mod preflight;

use std::{
    fs::File,
    os::fd::{AsFd as _, AsRawFd as _},
    path::PathBuf,
};

use anyhow::{Context as _, anyhow};
use aya::{
    Btf, Ebpf, EbpfLoader, Endianness,
    maps::{MapData, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::{BtfTracePoint, CgroupAttachMode, CgroupSockAddr, ProgramError},
};
use tokio::io::unix::AsyncFd;
use tracer_common::{
    KernelFilter, SockOffsets,
    cilium::{REVERSE_SK4_BOUND, REVERSE_SK6_BOUND},
};

use crate::cilium::ReverseSkPins;

use self::{
    capabilities::Capabilities,
    counters::{Counters, Healthy, SkippedRuns},
};

pub struct KernelSide {
    /// Owns the programs and their links; kept alive for as long as we trace.
    _ebpf: Ebpf,
    /// `connect()` hook links made outside aya (see `cgroup_link.rs`); dropped after `_ebpf`'s links.
    _preorder_links: Vec<std::os::fd::OwnedFd>,
    /// The cgroup v2 hierarchy the tracer mounted itself, when the node had none; unmounted last.
    _cgroup_mount: Option<cgroup_mount::CgroupMount>,
    pub ring: AsyncFd<RingBuf<MapData>>,
    pub counters: Counters,
    pub healthy: Healthy,
    pub skipped: SkippedRuns,
    pub dns: dns::DnsMaps,
    /// Handshakes whose SYN-ACKs were retransmitted (`handshakes.rs`).
    pub handshakes: handshakes::Handshakes,
    /// What this kernel lets the tracer do.
    pub capabilities: Capabilities,
}

/// The compiled kernel programs, built by `build.rs`.
static PROGRAMS: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf"));

impl KernelSide {
    /// Must run inside a tokio runtime (the ring buffer is registered with its reactor).
    pub fn load(
        filter: KernelFilter,
        max_attempts: u32,
        dns_slow_reply: std::time::Duration,
        dns_hooks: bool,
        cgroup_root: Option<&std::path::Path>,
        preorder: bool,
        cilium: &ReverseSkPins,
    ) -> anyhow::Result<KernelSide> {
        let paths = preflight::Paths::from_env();
        let (btf_data, mounted_cgroup_root) = preflight::check(&paths)?;
        let given_cgroup_root = cgroup_root.map(preflight::check_cgroup_root).transpose()?;
        raise_memlock_limit();
        let kernel_btf = btf::KernelBtf::parse(&btf_data)
            .with_context(|| format!("kernel BTF {}", paths.btf.display()))?;
        let sock_offsets = sock_offsets(&kernel_btf, &paths.btf)?;
        let mut capabilities = Capabilities::new();
        let (cgroup_root, cgroup_mount) =
            cgroup_root_or_mount(given_cgroup_root.or(mounted_cgroup_root), &mut capabilities)?;
        let btf = Btf::parse(&btf_data, Endianness::default())
            .with_context(|| format!("parsing kernel BTF {}", paths.btf.display()))?;
        let dns_config = dns::config(dns_slow_reply);
        let mut loader = EbpfLoader::new();
        loader
            .btf(Some(&btf))
            .override_global("FILTER", &filter, true)
            .override_global("SOCK_OFFSETS", &sock_offsets, true)
            .override_global("DNS_CONFIG", &dns_config, true)
            .map_max_entries("ATTEMPTS", max_attempts);
        // Cilium's reverse socket NAT maps, where userspace could read them (so their layouts are
        // ours): the connect() hook reads the pinned maps themselves.
        let mut bound = 0;
        for (pin, map, bit) in [
            (&cilium.v4, "CILIUM_REVERSE_SK4", REVERSE_SK4_BOUND),
            (&cilium.v6, "CILIUM_REVERSE_SK6", REVERSE_SK6_BOUND),
        ] {
            if let Some(pin) = pin {
                loader.map_pin_path(map, pin.as_path());
                bound |= bit;
            }
        }
        let mut ebpf = loader
            .override_global("CILIUM_REVERSE_SK", &bound, true)
            .load(PROGRAMS)
            .context("loading the eBPF object (maps and programs)")?;

        // connect() hooks first: attempts that start after this know their namespace.
        let cgroup = File::open(&cgroup_root)
            .with_context(|| format!("opening the cgroup v2 root {}", cgroup_root.display()))?;
        let preorder_links = attach_connect_hooks(
            &mut ebpf,
            &cgroup,
            &cgroup_root,
            preorder,
            &mut capabilities,
        )?;
        let error_report = attach_tracepoints(&mut ebpf, &kernel_btf, &btf, &mut capabilities)?;
        let dns = dns::attach(
            &mut ebpf,
            &cgroup,
            &cgroup_root,
            dns_hooks,
            &mut capabilities,
        )?;
        dns::refused_capability(&mut capabilities, error_report);

        let ring = RingBuf::try_from(take_map(&mut ebpf, "EVENTS")?)?;
        // SAFETY: the ring buffer owns its fd and the AsyncFd owns the ring buffer, so the fd stays
        // open for as long as it is registered.
        let ring = unsafe { AsyncFd::register(ring) }
            .map_err(|e| anyhow!("registering the ring buffer with the event loop: {e}"))?;
        let counters = Counters::new(PerCpuArray::try_from(take_map(&mut ebpf, "COUNTERS")?)?);
        let healthy = Healthy::new(PerCpuHashMap::try_from(take_map(&mut ebpf, "HEALTHY")?)?);
        let handshakes = handshakes::Handshakes::new(aya::maps::HashMap::try_from(take_map(
            &mut ebpf,
            "HANDSHAKES",
        )?)?);
        let skipped = SkippedRuns::new(
            ebpf.programs()
                .filter(|(name, _)| *name != preflight::SKIPS_ACCOUNTED)
                .filter_map(|(_, p)| p.fd().ok())
                .map(|fd| fd.as_fd().as_raw_fd())
                .collect(),
        );
        if skipped.counted_by_kernel() {
            capabilities.full(capabilities::SKIPPED_RUNS_COUNTED);
        } else {
            capabilities.degraded(
                capabilities::SKIPPED_RUNS_COUNTED,
                "no recursion_misses in program fdinfo (Linux 5.12+): program runs the kernel \
                 skips are not counted in dropped.skipped_program_runs",
            );
        }
        Ok(KernelSide {
            _ebpf: ebpf,
            _preorder_links: preorder_links,
            _cgroup_mount: cgroup_mount,
            ring,
            counters,
            healthy,
            skipped,
            dns,
            handshakes,
            capabilities,
        })
    }
}

/// The cgroup v2 root to attach to: the one given or mounted, else one the tracer mounts itself.
fn cgroup_root_or_mount(
    root: Option<PathBuf>,
    capabilities: &mut Capabilities,
) -> anyhow::Result<(PathBuf, Option<cgroup_mount::CgroupMount>)> {
    if let Some(root) = root {
        capabilities.full(capabilities::CGROUP_V2);
        return Ok((root, None));
    }
    let mount = cgroup_mount::CgroupMount::new().context(
        "no cgroup v2 is mounted and mounting one failed: the connect() and DNS hooks attach to \
         the cgroup v2 root",
    )?;
    capabilities.degraded(
        capabilities::CGROUP_V2,
        format!(
            "no cgroup v2 mounted (cgroup v1 only): the tracer mounted one at {} for its hooks, \
             removed at exit; processes' cgroup paths (src_cgroup) are not known",
            mount.path().display()
        ),
    );
    Ok((mount.path().to_path_buf(), Some(mount)))
}

/// The `connect()` hooks, first in order where the kernel allows it (and `preorder`, false only
/// to emulate older kernels); returns those links.
fn attach_connect_hooks(
    ebpf: &mut Ebpf,
    cgroup: &File,
    cgroup_root: &std::path::Path,
    preorder: bool,
    capabilities: &mut Capabilities,
) -> anyhow::Result<Vec<std::os::fd::OwnedFd>> {
    let mut preorder_links = Vec::new();
    for (name, attach_type) in [
        ("connect4", cgroup_link::BPF_CGROUP_INET4_CONNECT),
        ("connect6", cgroup_link::BPF_CGROUP_INET6_CONNECT),
    ] {
        preorder_links.extend(attach_cgroup(
            ebpf,
            name,
            attach_type,
            cgroup,
            cgroup_root,
            preorder,
        )?);
    }
    if preorder_links.is_empty() {
        capabilities.degraded(
            capabilities::DIALLED_BEFORE_SOCKET_LB,
            "no BPF_F_PREORDER (Linux 6.15+): a socket-level load balancer attached below the root \
             cgroup rewrites a Service address before the tracer's connect() hook sees it: on a \
             Cilium node its maps name the Service (stats.socket_lb), other socket LBs' connects \
             name the backend, not the Service",
        );
    } else {
        capabilities.full(capabilities::DIALLED_BEFORE_SOCKET_LB);
    }
    Ok(preorder_links)
}

/// The `tp_btf` programs; returns whether the optional error-report tracepoint is there.
fn attach_tracepoints(
    ebpf: &mut Ebpf,
    kernel_btf: &btf::KernelBtf<'_>,
    btf: &Btf,
    capabilities: &mut Capabilities,
) -> anyhow::Result<bool> {
    let has = |tracepoint| kernel_btf.first_missing_tracepoint(&[tracepoint]).is_none();
    let error_report = has("inet_sk_error_report");
    if error_report {
        capabilities.full(capabilities::CONNECT_ERRORS);
    } else {
        capabilities.degraded(
            capabilities::CONNECT_ERRORS,
            "no tracepoint inet_sk_error_report: the errno of a failed connect is read when its \
             socket closes, so one whose close the kernel skipped (a nested program run) is \
             counted in dropped.end_unseen instead of reported",
        );
    }
    // A missing one is optional here: preflight stopped at a missing required one.
    for (tracepoint, name, _) in preflight::TRACEPOINTS.into_iter().filter(|t| has(t.0)) {
        let program: &mut BtfTracePoint = ebpf
            .program_mut(name)
            .ok_or_else(|| anyhow!("program {name} missing from the eBPF object"))?
            .try_into()?;
        program
            .load(tracepoint, btf)
            .map_err(|e| load_error(name, e))?;
        program
            .attach()
            .with_context(|| format!("attaching {name} to tracepoint {tracepoint}"))?;
    }
    Ok(error_report)
}

/// Before 5.11 the kernel charges BPF maps to `RLIMIT_MEMLOCK` (64 KiB by default on many systems),
/// so a load fails with EPERM. Raised as far as allowed; later kernels charge the memory cgroup and
/// ignore it, so a refusal (no `CAP_SYS_RESOURCE`) is not an error here.
fn raise_memlock_limit() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit(2) reads the struct we pass.
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &raw const unlimited) };
}

/// `struct sock` field offsets of the running kernel, from its BTF.
fn sock_offsets(
    kernel_btf: &btf::KernelBtf<'_>,
    btf_path: &std::path::Path,
) -> anyhow::Result<SockOffsets> {
    let offset = |strukt, member| {
        kernel_btf
            .member_offset(strukt, member)
            .with_context(|| format!("kernel BTF {}", btf_path.display()))
    };
    // The `skc_` fields are read at their `sock_common` offsets from a `struct sock` pointer.
    let common = offset("sock", "__sk_common")?;
    if common != 0 {
        anyhow::bail!(
            "kernel BTF {}: struct sock does not start with its sock_common (offset {common})",
            btf_path.display()
        );
    }
    Ok(SockOffsets {
        skc_daddr: offset("sock_common", "skc_daddr")?,
        skc_rcv_saddr: offset("sock_common", "skc_rcv_saddr")?,
        skc_dport: offset("sock_common", "skc_dport")?,
        inet_sport: offset("inet_sock", "inet_sport")?,
        skc_family: offset("sock_common", "skc_family")?,
        skc_state: offset("sock_common", "skc_state")?,
        skc_v6_daddr: offset("sock_common", "skc_v6_daddr")?,
        skc_v6_rcv_saddr: offset("sock_common", "skc_v6_rcv_saddr")?,
        skc_cookie: offset("sock_common", "skc_cookie")?,
        sk_protocol: offset("sock", "sk_protocol")?,
        sk_err: offset("sock", "sk_err")?,
        sk_error_queue: offset("sock", "sk_error_queue")?,
        skb_cb: offset("sk_buff", "cb")?,
        exterr_ee: offset("sock_exterr_skb", "ee")?,
        tcp_rcv_nxt: offset("tcp_sock", "rcv_nxt")?,
        skc_net: offset("sock_common", "skc_net")?,
        net_inum: offset("net", "ns")? + offset("ns_common", "inum")?,
        task_tgid: offset("task_struct", "tgid")?,
        task_pid: offset("task_struct", "pid")?,
        task_comm: offset("task_struct", "comm")?,
        sk_err_soft: offset("sock", "sk_err_soft")?,
        tcp_snd_una: offset("tcp_sock", "snd_una")?,
        tcp_snd_nxt: offset("tcp_sock", "snd_nxt")?,
        sk_socket: offset("sock", "sk_socket")?,
        skc_num: offset("sock_common", "skc_num")?,
        socket_ino: (offset("socket_alloc", "vfs_inode")? - offset("socket_alloc", "socket")?)
            + offset("inode", "i_ino")?,
        sk_max_ack_backlog: offset("sock", "sk_max_ack_backlog")?,
        _pad: 0,
    })
}

fn take_map(ebpf: &mut Ebpf, name: &str) -> anyhow::Result<aya::maps::Map> {
    ebpf.take_map(name)
        .ok_or_else(|| anyhow!("map {name} missing from the eBPF object"))
}

/// Attaches a `connect()` hook to the root cgroup, first in order if the kernel allows it (then the
/// link fd is returned), else the plain way through aya.
fn attach_cgroup(
    ebpf: &mut Ebpf,
    name: &str,
    attach_type: u32,
    cgroup: &File,
    cgroup_root: &std::path::Path,
    preorder: bool,
) -> anyhow::Result<Option<std::os::fd::OwnedFd>> {
    let program: &mut CgroupSockAddr = ebpf
        .program_mut(name)
        .ok_or_else(|| anyhow!("program {name} missing from the eBPF object"))?
        .try_into()?;
    program.load().map_err(|e| load_error(name, e))?;
    if preorder && let Ok(link) = cgroup_link::attach_preorder(program.fd()?, cgroup, attach_type) {
        return Ok(Some(link));
    }
    // Multi mode lets us coexist with other tools' programs on the root cgroup (Cilium's socket LB).
    program
        .attach(cgroup, CgroupAttachMode::AllowMultiple)
        .or_else(|_| program.attach(cgroup, CgroupAttachMode::Single))
        .with_context(|| {
            format!(
                "attaching {name} to the cgroup v2 root {}",
                cgroup_root.display()
            )
        })?;
    Ok(None)
}

/// A verifier rejection becomes one sentence; the log goes to a file for whoever wants it.
fn load_error(name: &str, error: ProgramError) -> anyhow::Error {
    if let ProgramError::LoadError {
        io_error,
        verifier_log,
    } = &error
    {
        let log_path = PathBuf::from(format!("/tmp/tracer-verifier-{name}.log"));
        let saved = std::fs::write(&log_path, verifier_log.to_string()).is_ok();
        return anyhow!(
            "the kernel refused to load program {name}: {io_error}{}",
            if saved {
                format!(" (verifier log in {})", log_path.display())
            } else {
                String::new()
            }
        );
    }
    anyhow!(error).context(format!("loading program {name}"))
}
