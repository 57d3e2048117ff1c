//! Checks made before loading anything, so that a missing privilege, BTF or tracefs is one clear
//! sentence instead of a verifier dump or an EPERM from deep inside aya.
use std::{
    fs,
    path::{Path, PathBuf},
};

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
        "tracefs is not mounted at {path} and mounting it failed: {source}. Mount it: mount -t tracefs nodev {path}"
    )]
    Tracefs {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("tracepoint {tracepoint} is missing on this kernel ({path}): {source}")]
    MissingTracepoint {
        tracepoint: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "no cgroup v2 mount found in /proc/mounts: mount one, e.g. mount -t cgroup2 none /sys/fs/cgroup/unified"
    )]
    NoCgroup2,
}

/// Where things are; overridable so the error paths can be tested on a healthy machine.
pub struct Paths {
    pub btf: PathBuf,
    pub tracefs: PathBuf,
}

impl Paths {
    pub fn from_env() -> Paths {
        let var = |name, default: &str| {
            std::env::var_os(name).map_or_else(|| PathBuf::from(default), PathBuf::from)
        };
        Paths {
            btf: var("TRACER_BTF_PATH", "/sys/kernel/btf/vmlinux"),
            tracefs: var("TRACER_TRACEFS", "/sys/kernel/tracing"),
        }
    }
}

/// Raw tracepoints the kernel side attaches to. Their programs read the `TP_PROTO` arguments (a
/// `struct sock *` first) and the socket at BTF offsets, not the formatted record, so only their
/// existence is checked.
/// (category, tracepoint, program).
pub const RAW_TRACEPOINTS: [(&str, &str, &str); 6] = [
    ("sock", "inet_sock_set_state", "syn_sent_enter"),
    ("sock", "inet_sock_set_state", "syn_sent_leave"),
    ("tcp", "tcp_retransmit_skb", "tcp_retransmit_skb"),
    ("tcp", "tcp_receive_reset", "tcp_receive_reset"),
    ("sock", "inet_sk_error_report", "inet_sk_error_report"),
    ("tcp", "tcp_destroy_sock", "tcp_destroy_sock"),
];

/// The program whose skipped (nested) runs lose nothing: it acts on `CLOSE -> SYN_SENT` only, which
/// never happens in the softirq a nested run comes from (`tracer-ebpf/src/inet_sock_set_state.rs`).
pub const SKIPS_LOSE_NOTHING: &str = "syn_sent_enter";

pub fn check(paths: &Paths) -> Result<PathBuf, PreflightError> {
    check_capabilities()?;
    if !paths.btf.exists() {
        return Err(PreflightError::NoBtf(paths.btf.clone()));
    }
    ensure_tracefs(&paths.tracefs)?;
    for (category, name, _) in RAW_TRACEPOINTS {
        check_exists(&paths.tracefs, category, name)?;
    }
    cgroup2_root()
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

fn ensure_tracefs(path: &Path) -> Result<(), PreflightError> {
    if path.join("events").is_dir() {
        return Ok(());
    }
    let c = |s: &str| std::ffi::CString::new(s).unwrap_or_default();
    let target = c(&path.to_string_lossy());
    let (source, fstype) = (c("nodev"), c("tracefs"));
    // SAFETY: all pointers are valid NUL-terminated strings for the duration of the call.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(PreflightError::Tracefs {
            path: path.into(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// The tracepoint exists on this kernel (its tracefs directory has a `format` file).
fn check_exists(tracefs: &Path, category: &str, name: &str) -> Result<(), PreflightError> {
    let path = tracefs
        .join("events")
        .join(category)
        .join(name)
        .join("format");
    fs::metadata(&path)
        .map(drop)
        .map_err(|source| PreflightError::MissingTracepoint {
            tracepoint: format!("{category}:{name}"),
            path,
            source,
        })
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
