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
mod fentry_probe;
pub mod handshakes;
mod offsets;
pub mod preflight;
pub mod tiers;

use std::{
    fs::File,
    os::fd::{AsFd as _, AsRawFd as _},
    path::PathBuf,
};

use anyhow::{Context as _, anyhow};
use aya::{
    Btf, Ebpf, EbpfLoader, Endianness,
    maps::{MapData, PerCpuArray, PerCpuHashMap, RingBuf},
    programs::{BtfTracePoint, CgroupAttachMode, CgroupSockAddr, FEntry, KProbe, ProgramError},
};
use tokio::io::unix::AsyncFd;
use tracer_common::{
    DnsConfig, HookOffsets, KernelFilter, SockOffsets,
    cilium::{REVERSE_SK4_BOUND, REVERSE_SK6_BOUND},
};

use crate::{cilium::ReverseSkPins, record::HookTier};

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

/// What `KernelSide::load` is asked to do.
pub struct LoadOptions<'a> {
    pub filter: KernelFilter,
    pub max_attempts: u32,
    pub dns_slow_reply: std::time::Duration,
    pub hooks: tiers::HookRequest,
    pub cgroup_root: Option<&'a std::path::Path>,
    /// False only to emulate kernels before 6.15 (`--no-preorder`).
    pub preorder: bool,
    pub cilium: &'a ReverseSkPins,
}

/// A tier the kernel would not load or attach: the next one is tried.
struct TierRefused {
    side: tiers::Side,
    tier: HookTier,
    why: String,
}

enum LoadError {
    Tier(TierRefused),
    Fatal(anyhow::Error),
}

impl From<anyhow::Error> for LoadError {
    fn from(e: anyhow::Error) -> LoadError {
        LoadError::Fatal(e)
    }
}

impl From<aya::maps::MapError> for LoadError {
    fn from(e: aya::maps::MapError) -> LoadError {
        LoadError::Fatal(e.into())
    }
}

/// Everything one load needs that does not change between its attempts.
struct Prepared<'a> {
    options: &'a LoadOptions<'a>,
    kernel_btf: &'a btf::KernelBtf<'a>,
    btf: &'a Btf,
    sock_offsets: SockOffsets,
    hook_offsets: HookOffsets,
    dns_config: DnsConfig,
    cgroup_root: &'a std::path::Path,
}

impl KernelSide {
    /// Must run inside a tokio runtime (the ring buffer is registered with its reactor).
    pub fn load(options: &LoadOptions<'_>) -> anyhow::Result<KernelSide> {
        options.hooks.check().map_err(|e| anyhow!(e))?;
        let paths = preflight::Paths::from_env();
        let (btf_data, mounted_cgroup_root) = preflight::check(&paths)?;
        let given_cgroup_root = options
            .cgroup_root
            .map(preflight::check_cgroup_root)
            .transpose()?;
        raise_memlock_limit();
        let kernel_btf = btf::KernelBtf::parse(&btf_data)
            .with_context(|| format!("kernel BTF {}", paths.btf.display()))?;
        let sock_offsets = offsets::sock_offsets(&kernel_btf, &paths.btf)?;
        let hook_offsets = offsets::hook_offsets(&kernel_btf);
        let probes = tiers::Probes::new(
            &kernel_btf,
            fentry_probe::probe(&kernel_btf),
            hook_offsets
                .as_ref()
                .map(|_| ())
                .map_err(|e| format!("kernel BTF: {e}")),
        );
        let mut ladder = tiers::Ladder::new(options.hooks, &probes).map_err(|e| anyhow!(e))?;
        let mut capabilities = Capabilities::new();
        let (cgroup_root, cgroup_mount) =
            cgroup_root_or_mount(given_cgroup_root.or(mounted_cgroup_root), &mut capabilities)?;
        let btf = Btf::parse(&btf_data, Endianness::default())
            .with_context(|| format!("parsing kernel BTF {}", paths.btf.display()))?;
        let prepared = Prepared {
            options,
            kernel_btf: &kernel_btf,
            btf: &btf,
            sock_offsets,
            hook_offsets: hook_offsets.unwrap_or_default(),
            dns_config: dns::config(options.dns_slow_reply),
            cgroup_root: &cgroup_root,
        };
        // Each tier the kernel refuses is ruled out and the programs loaded again with the next:
        // at most one retry per tier of the two ladders.
        loop {
            let (dns_tier, tcp_tier) = ladder.tiers();
            let mut attempt_capabilities = capabilities.clone();
            match load_with(&prepared, dns_tier, tcp_tier, &mut attempt_capabilities) {
                Ok(mut side) => {
                    dns::capabilities(
                        &mut attempt_capabilities,
                        options.hooks.no_dns,
                        &ladder.report(),
                        probes.error_report_tracepoint,
                    );
                    attempt_capabilities.set_hooks(ladder.report());
                    side.capabilities = attempt_capabilities;
                    #[expect(
                        clippy::used_underscore_binding,
                        reason = "held only to be unmounted on drop"
                    )]
                    {
                        side._cgroup_mount = cgroup_mount;
                    }
                    return Ok(side);
                }
                Err(LoadError::Tier(refused)) => ladder
                    .reject(refused.side, refused.tier, refused.why)
                    .map_err(|e| anyhow!(e))?,
                Err(LoadError::Fatal(e)) => return Err(e),
            }
        }
    }
}

/// One load of the programs with the given tiers.
fn load_with(
    prepared: &Prepared<'_>,
    dns_tier: Option<HookTier>,
    tcp_tier: HookTier,
    capabilities: &mut Capabilities,
) -> Result<KernelSide, LoadError> {
    let options = prepared.options;
    let filter = KernelFilter {
        state_changes_seen: u32::from(tcp_tier == HookTier::Tracepoint),
        ..options.filter
    };
    let syscalls = offsets::syscall_numbers();
    let mut loader = EbpfLoader::new();
    loader
        .btf(Some(prepared.btf))
        .override_global("FILTER", &filter, true)
        .override_global("SOCK_OFFSETS", &prepared.sock_offsets, true)
        .override_global("HOOK_OFFSETS", &prepared.hook_offsets, true)
        .override_global("SYSCALLS", &syscalls, true)
        .override_global("DNS_CONFIG", &prepared.dns_config, true)
        .map_max_entries("ATTEMPTS", options.max_attempts);
    // Cilium's reverse socket NAT maps, where userspace could read them (so their layouts are
    // ours): the connect() hook reads the pinned maps themselves.
    let mut bound = 0;
    for (pin, map, bit) in [
        (&options.cilium.v4, "CILIUM_REVERSE_SK4", REVERSE_SK4_BOUND),
        (&options.cilium.v6, "CILIUM_REVERSE_SK6", REVERSE_SK6_BOUND),
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
    let cgroup = File::open(prepared.cgroup_root).with_context(|| {
        format!(
            "opening the cgroup v2 root {}",
            prepared.cgroup_root.display()
        )
    })?;
    let preorder_links = attach_connect_hooks(
        &mut ebpf,
        &cgroup,
        prepared.cgroup_root,
        options.preorder,
        capabilities,
    )?;
    attach_tracepoints(&mut ebpf, prepared.kernel_btf, prepared.btf, capabilities)?;
    attach_tcp_tier(&mut ebpf, prepared.btf, tcp_tier).map_err(|why| {
        LoadError::Tier(TierRefused {
            side: tiers::Side::Tcp,
            tier: tcp_tier,
            why,
        })
    })?;
    if let Some(tier) = dns_tier {
        dns::attach(&mut ebpf, prepared.btf, &cgroup, prepared.cgroup_root, tier).map_err(
            |why| {
                LoadError::Tier(TierRefused {
                    side: tiers::Side::Dns,
                    tier,
                    why,
                })
            },
        )?;
    }
    let dns = dns::DnsMaps::take(&mut ebpf)?;

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
            .filter(|(name, _)| !preflight::SKIPS_ACCOUNTED.contains(name))
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
        _cgroup_mount: None,
        ring,
        counters,
        healthy,
        skipped,
        dns,
        handshakes,
        capabilities: Capabilities::new(),
    })
}

/// The TCP tier's own programs: what follows a connect's first SYN and its answer.
fn attach_tcp_tier(ebpf: &mut Ebpf, btf: &Btf, tier: HookTier) -> Result<(), String> {
    match tier {
        HookTier::Fentry => {
            attach_fentry(ebpf, btf, "fentry_tcp_connect", "tcp_connect")?;
            attach_fentry(ebpf, btf, "fentry_tcp_init_transfer", "tcp_init_transfer")
        }
        HookTier::Kprobe => {
            attach_kprobe(ebpf, "kprobe_tcp_connect", "tcp_connect")?;
            attach_kprobe(ebpf, "kprobe_tcp_init_transfer", "tcp_init_transfer")
        }
        HookTier::Tracepoint if std::env::var_os(BENCH_UNATTACHED_SET_STATE).is_some() => {
            eprintln!(
                "tracer: {BENCH_UNATTACHED_SET_STATE} is set: inet_sock_set_state is left out, so \
                 connects are not followed (benchmark only)"
            );
            Ok(())
        }
        HookTier::Tracepoint => {
            attach_tp_btf(ebpf, btf, "inet_sock_set_state", "inet_sock_set_state")
        }
        HookTier::CgroupSkb => Err("not a TCP tier".into()),
    }
}

/// Benchmark only (`cargo xtask bench`, docs/performance.md): set, the TCP tracepoint tier leaves
/// `inet_sock_set_state` unattached, so the benchmark can measure what that one program costs.
const BENCH_UNATTACHED_SET_STATE: &str = "TRACER_BENCH_UNATTACHED_SET_STATE";

/// Loads and attaches fentry program `name` to kernel function `function`.
pub(crate) fn attach_fentry(
    ebpf: &mut Ebpf,
    btf: &Btf,
    name: &str,
    function: &str,
) -> Result<(), String> {
    let program: &mut FEntry = program(ebpf, name)?;
    program
        .load(function, btf)
        .map_err(|e| load_error(name, e).to_string())?;
    program
        .attach()
        .map(drop)
        .map_err(|e| format!("attaching {name} to {function}: {e}"))
}

/// Loads and attaches kprobe program `name` to kernel function `function`.
pub(crate) fn attach_kprobe(ebpf: &mut Ebpf, name: &str, function: &str) -> Result<(), String> {
    let program: &mut KProbe = program(ebpf, name)?;
    program
        .load()
        .map_err(|e| load_error(name, e).to_string())?;
    program
        .attach(function, 0)
        .map(drop)
        .map_err(|e| format!("attaching kprobe {name} to {function}: {e}"))
}

/// Loads and attaches `tp_btf` program `name` to `tracepoint`.
pub(crate) fn attach_tp_btf(
    ebpf: &mut Ebpf,
    btf: &Btf,
    name: &str,
    tracepoint: &str,
) -> Result<(), String> {
    let program: &mut BtfTracePoint = program(ebpf, name)?;
    program
        .load(tracepoint, btf)
        .map_err(|e| load_error(name, e).to_string())?;
    program
        .attach()
        .map(drop)
        .map_err(|e| format!("attaching {name} to tracepoint {tracepoint}: {e}"))
}

/// Program `name` of the object, as its type.
fn program<'e, T>(ebpf: &'e mut Ebpf, name: &str) -> Result<&'e mut T, String>
where
    &'e mut T: TryFrom<&'e mut aya::programs::Program, Error = ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or_else(|| format!("program {name} missing from the eBPF object"))?
        .try_into()
        .map_err(|e: ProgramError| format!("program {name}: {e}"))
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

/// The `tp_btf` programs every TCP tier shares.
fn attach_tracepoints(
    ebpf: &mut Ebpf,
    kernel_btf: &btf::KernelBtf<'_>,
    btf: &Btf,
    capabilities: &mut Capabilities,
) -> anyhow::Result<()> {
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
    Ok(())
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
