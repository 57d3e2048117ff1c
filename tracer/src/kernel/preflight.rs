//! Checks made before loading anything, so that a missing privilege, BTF or tracepoint is one clear
//! sentence instead of a verifier dump or an EPERM from deep inside aya.
use std::{fs, path::PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error(
        "missing capabilities {missing}: the tracer loads eBPF programs and attaches to the root cgroup. \
         Run it as root, or grant CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN and CAP_SYS_ADMIN"
    )]
    Capabilities { missing: String },
    #[error(
        "no kernel BTF at {0}: this kernel was built without CONFIG_DEBUG_INFO_BTF. The tracer needs a \
         kernel with BTF (most distribution kernels since 5.8 have it)"
    )]
    NoBtf(PathBuf),
    #[error(
        "this kernel has no tracepoint {0} for BTF-typed programs (no btf_trace_{0} in its BTF): \
         the tracer needs it to follow connects, so nothing can be traced"
    )]
    MissingTracepoint(String),
    #[error("kernel BTF {path}: {message}")]
    BadBtf { path: PathBuf, message: String },
    #[error(
        "no cgroup v2 mount found in /proc/mounts: mount one, e.g. mount -t cgroup2 none /sys/fs/cgroup/unified"
    )]
    NoCgroup2,
    #[error("--cgroup-root {0}: {1}")]
    BadCgroupRoot(PathBuf, String),
}

/// Where things are; overridable so the error paths can be tested on a healthy machine.
pub struct Paths {
    pub btf: PathBuf,
}

impl Paths {
    pub fn from_env() -> Paths {
        let var = |name, default: &str| {
            std::env::var_os(name).map_or_else(|| PathBuf::from(default), PathBuf::from)
        };
        Paths {
            btf: var("TRACER_BTF_PATH", "/sys/kernel/btf/vmlinux"),
        }
    }
}

/// Tracepoints every TCP tier attaches `tp_btf` programs to. Their programs read the `TP_PROTO`
/// arguments (a `struct sock *` first) and the socket at BTF offsets, not the formatted record.
/// (tracepoint, program, required). Without a required one nothing can be traced; an optional one
/// missing costs a capability (`capabilities.rs`). The tiers' own hooks (`tiers.rs`) come on top.
pub const TRACEPOINTS: [(&str, &str, bool); 5] = [
    ("tcp_retransmit_skb", "tcp_retransmit_skb", true),
    ("tcp_receive_reset", "tcp_receive_reset", true),
    // Not in 5.10: the errno is then read when the socket closes.
    ("inet_sk_error_report", "inet_sk_error_report", false),
    ("tcp_destroy_sock", "tcp_destroy_sock", true),
    // Since 4.15, on every kernel we know; without it SYN-ACKs never answered are not seen.
    ("tcp_retransmit_synack", "tcp_retransmit_synack", false),
];

/// The programs whose skipped (nested) runs the kernel side accounts for itself: each is harmless,
/// recovered (`answered_seen_late`) or counted as an attempt lost (`end_unseen`), see
/// `tracer-ebpf/src/inet_sock_set_state.rs` and `tcp_init_transfer.rs`. Their skipped runs are not
/// counted again as drops.
pub const SKIPS_ACCOUNTED: [&str; 3] = [
    "inet_sock_set_state",
    "fentry_tcp_init_transfer",
    "kprobe_tcp_init_transfer",
];

/// Checks privileges, BTF and tracepoints; returns the kernel's BTF and the cgroup v2 root, if one
/// is mounted (`cgroup_mount.rs` mounts one otherwise).
pub fn check(paths: &Paths) -> Result<(Vec<u8>, Option<PathBuf>), PreflightError> {
    check_capabilities()?;
    let Ok(btf) = fs::read(&paths.btf) else {
        return Err(PreflightError::NoBtf(paths.btf.clone()));
    };
    let names: Vec<&str> = TRACEPOINTS
        .iter()
        .filter(|(_, _, required)| *required)
        .map(|(tp, _, _)| *tp)
        .collect();
    let parsed = super::btf::KernelBtf::parse(&btf).map_err(|e| PreflightError::BadBtf {
        path: paths.btf.clone(),
        message: e.to_string(),
    })?;
    if let Some(missing) = parsed.first_missing_tracepoint(&names) {
        return Err(PreflightError::MissingTracepoint(missing.into()));
    }
    Ok((btf, cgroup2_root().ok()))
}

fn check_capabilities() -> Result<(), PreflightError> {
    const NEEDED: [(u32, &str); 4] = [
        (39, "CAP_BPF"),
        (38, "CAP_PERFMON"),
        (12, "CAP_NET_ADMIN"),
        (21, "CAP_SYS_ADMIN"),
    ];
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    let missing: Vec<&str> = NEEDED
        .iter()
        .filter(|(bit, _)| effective & (1 << bit) == 0)
        .map(|(_, name)| *name)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(PreflightError::Capabilities {
            missing: missing.join(", "),
        })
    }
}

/// `--cgroup-root`: a directory on a cgroup v2 filesystem.
pub fn check_cgroup_root(path: &std::path::Path) -> Result<PathBuf, PreflightError> {
    let bad = |why: String| PreflightError::BadCgroupRoot(path.into(), why);
    match crate::fs_type::magic(path) {
        Ok(crate::fs_type::CGROUP2_SUPER_MAGIC) => Ok(path.into()),
        Ok(_) => Err(bad("not a cgroup v2 filesystem (mount -t cgroup2)".into())),
        Err(e) => Err(bad(e.to_string())),
    }
}

/// The cgroup v2 hierarchy root: `/sys/fs/cgroup` on pure v2 nodes, `/sys/fs/cgroup/unified` on hybrid.
pub fn cgroup2_root() -> Result<PathBuf, PreflightError> {
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let (_, dir, fstype) = (parts.next()?, parts.next()?, parts.next()?);
            (fstype == "cgroup2").then(|| PathBuf::from(dir))
        })
        .min_by_key(|p| p.as_os_str().len())
        .ok_or(PreflightError::NoCgroup2)
}
