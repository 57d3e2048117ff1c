//! Checks made before loading anything, so that a missing privilege, BTF or tracefs is one clear
//! sentence instead of a verifier dump or an EPERM from deep inside aya.
use std::{
    fs,
    path::{Path, PathBuf},
};

use tracer_common::tracepoint::{Field, sys_exit_connect};

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
        "tracepoint {tracepoint} has a different layout on this kernel: field {field} {found}, expected \
         offset {offset} size {size}. This tracer build does not support this kernel version"
    )]
    Layout {
        tracepoint: String,
        field: String,
        found: String,
        offset: usize,
        size: usize,
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

/// Formatted tracepoints the kernel side attaches to, with the fields it reads from their records.
pub fn tracepoints() -> Vec<(&'static str, &'static str, Vec<Field>)> {
    vec![(
        "syscalls",
        "sys_exit_connect",
        sys_exit_connect::FIELDS.into(),
    )]
}

/// Raw tracepoints the kernel side attaches to. Their programs read the `TP_PROTO` arguments (a
/// `struct sock *` first) and the socket at BTF offsets, not the formatted record, so only their
/// existence is checked.
pub const RAW_TRACEPOINTS: [(&str, &str); 5] = [
    ("sock", "inet_sock_set_state"),
    ("tcp", "tcp_retransmit_skb"),
    ("tcp", "tcp_receive_reset"),
    ("sock", "inet_sk_error_report"),
    ("tcp", "tcp_destroy_sock"),
];

pub fn check(paths: &Paths) -> Result<PathBuf, PreflightError> {
    check_capabilities()?;
    if !paths.btf.exists() {
        return Err(PreflightError::NoBtf(paths.btf.clone()));
    }
    ensure_tracefs(&paths.tracefs)?;
    for (category, name, fields) in tracepoints() {
        check_layout(&paths.tracefs, category, name, &fields)?;
    }
    for (category, name) in RAW_TRACEPOINTS {
        check_layout(&paths.tracefs, category, name, &[])?;
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

fn check_layout(
    tracefs: &Path,
    category: &str,
    name: &str,
    fields: &[Field],
) -> Result<(), PreflightError> {
    let path = tracefs
        .join("events")
        .join(category)
        .join(name)
        .join("format");
    let tracepoint = format!("{category}:{name}");
    let text = fs::read_to_string(&path).map_err(|source| PreflightError::MissingTracepoint {
        tracepoint: tracepoint.clone(),
        path: path.clone(),
        source,
    })?;
    for field in fields {
        let found = field_layout(&text, field.name);
        if found != Some((field.offset, field.size)) {
            return Err(PreflightError::Layout {
                tracepoint,
                field: field.name.into(),
                found: found.map_or_else(
                    || "is missing".into(),
                    |(o, s)| format!("is at offset {o} size {s}"),
                ),
                offset: field.offset,
                size: field.size,
            });
        }
    }
    Ok(())
}

/// Offset and size of `name` in a tracepoint `format` file (`field:__u16 sport; offset:24; size:2;`).
fn field_layout(format: &str, name: &str) -> Option<(usize, usize)> {
    format.lines().find_map(|line| {
        let decl = line.trim().strip_prefix("field:")?.split(';').next()?;
        let field_name = decl.split_whitespace().last()?;
        let field_name = field_name.split('[').next()?;
        if field_name != name {
            return None;
        }
        let number = |key: &str| -> Option<usize> {
            line.split(';')
                .find_map(|part| part.trim().strip_prefix(key)?.parse().ok())
        };
        Some((number("offset:")?, number("size:")?))
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

#[cfg(test)]
mod tests {
    use super::*;

    const FORMAT: &str = "name: inet_sock_set_state\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:const void * skaddr;\toffset:8;\tsize:8;\tsigned:0;\n\
        \tfield:__u8 saddr_v6[16];\toffset:40;\tsize:16;\tsigned:0;\n";

    #[test]
    fn reads_field_layouts_from_format_files() {
        assert_eq!(field_layout(FORMAT, "skaddr"), Some((8, 8)));
        assert_eq!(field_layout(FORMAT, "saddr_v6"), Some((40, 16)));
        assert_eq!(field_layout(FORMAT, "saddr"), None);
    }
}
