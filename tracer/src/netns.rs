//! Network namespaces: from what a user types (`--netns NAME|PATH|pid:N|host`) to the namespace the
//! kernel side filters on, and from the kernel's namespace ids back to names for display.
//!
//! A namespace is known by its inode number on nsfs: the kernel side reads it from the socket
//! (`net->ns.inum`), userspace `stat`s `/run/netns/NAME` or `/proc/PID/ns/net`. That works on every
//! kernel the tracer supports, where the netns cookie does not (`SO_NETNS_COOKIE` came in 5.14, and
//! `cgroup_skb` programs may not call `bpf_get_netns_cookie` before 6.x). It is also the number
//! `lsns` and `ls -l /proc/PID/ns/net` show.
use std::{
    fs::File,
    io,
    os::{fd::AsRawFd as _, unix::fs::MetadataExt as _},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use hashbrown::HashMap;

/// Where `ip netns add` puts named namespaces.
pub const NAMED_NETNS_DIR: &str = "/run/netns";

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error(
        "unknown network namespace '{spec}': no {path} (see `ip netns list`; a path or pid:N also works)"
    )]
    Unknown { spec: String, path: PathBuf },
    #[error("cannot enter network namespace {path}: {source} (needs CAP_SYS_ADMIN)")]
    Enter { path: PathBuf, source: io::Error },
    #[error("cannot read network namespace {path}: {}", reason(source))]
    Read { path: PathBuf, source: io::Error },
    #[error(
        "{path} is not a network namespace (a namespace file is /run/netns/NAME or /proc/PID/ns/net)"
    )]
    NotANamespace { path: PathBuf },
}

/// The cause, once, with the hint that helps: root reads every process's namespace.
fn reason(e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::PermissionDenied {
        "permission denied (run the tracer as root)".into()
    } else {
        e.to_string()
    }
}

/// A namespace the user named, with the inode number the kernel knows it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Netns {
    pub name: String,
    pub inode: u64,
}

/// `host`, `pid:N`, a path, or a name under /run/netns.
pub fn resolve(spec: &str) -> Result<Netns, NetnsError> {
    let path = spec_path(spec);
    // Not `exists()`: a namespace we may not look at (EACCES) is not a missing one.
    match path.try_exists() {
        Ok(true) => {}
        Ok(false) => {
            return Err(NetnsError::Unknown {
                spec: spec.into(),
                path,
            });
        }
        Err(source) => return Err(NetnsError::Read { path, source }),
    }
    Ok(Netns {
        name: spec.into(),
        inode: inode_of(&path)?,
    })
}

/// The inode number of the namespace file at `path`, checked to be a namespace.
pub fn inode_of(path: &Path) -> Result<u64, NetnsError> {
    let read = |source| NetnsError::Read {
        path: path.into(),
        source,
    };
    if crate::fs_type::magic(path).map_err(read)? != crate::fs_type::NSFS_MAGIC {
        return Err(NetnsError::NotANamespace { path: path.into() });
    }
    std::fs::metadata(path).map(|m| m.ino()).map_err(read)
}

/// The namespace the calling thread is in.
pub fn current_inode() -> io::Result<u64> {
    std::fs::metadata("/proc/thread-self/ns/net").map(|m| m.ino())
}

pub fn spec_path(spec: &str) -> PathBuf {
    if spec == "host" {
        PathBuf::from("/proc/1/ns/net")
    } else if let Some(pid) = spec.strip_prefix("pid:") {
        PathBuf::from(format!("/proc/{pid}/ns/net"))
    } else if spec.contains('/') {
        PathBuf::from(spec)
    } else {
        Path::new(NAMED_NETNS_DIR).join(spec)
    }
}

/// Moves the calling thread into the network namespace at `path`. Only for disposable threads: the
/// rest of the process stays where it is.
pub fn enter(path: &Path) -> Result<(), NetnsError> {
    let enter = |source| NetnsError::Enter {
        path: path.into(),
        source,
    };
    let ns = File::open(path).map_err(enter)?;
    // SAFETY: setns on a valid namespace fd; it only moves this thread.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(enter(io::Error::last_os_error()));
    }
    Ok(())
}

/// Namespace inode -> readable name (`host`, the `ip netns` name), rescanned when an unknown one
/// shows up.
pub struct NetnsNames {
    by_inode: HashMap<u64, String>,
    last_scan: Option<Instant>,
}

/// New namespaces appear with new pods; a rescan costs a `stat` per namespace.
const RESCAN_INTERVAL: Duration = Duration::from_secs(2);

impl Default for NetnsNames {
    fn default() -> NetnsNames {
        NetnsNames::new()
    }
}

impl NetnsNames {
    pub fn new() -> NetnsNames {
        let mut names = NetnsNames {
            by_inode: HashMap::new(),
            last_scan: None,
        };
        names.rescan();
        names
    }

    pub fn name(&mut self, inode: u64) -> String {
        if inode == 0 {
            return "unknown".into();
        }
        if !self.by_inode.contains_key(&inode)
            && self
                .last_scan
                .is_none_or(|t| t.elapsed() >= RESCAN_INTERVAL)
        {
            self.rescan();
        }
        self.by_inode
            .get(&inode)
            .cloned()
            .unwrap_or_else(|| format!("netns:{inode}"))
    }

    fn rescan(&mut self) {
        self.last_scan = Some(Instant::now());
        let mut names = vec!["host".to_string()];
        let mut paths = vec![PathBuf::from("/proc/1/ns/net")];
        if let Ok(dir) = std::fs::read_dir(NAMED_NETNS_DIR) {
            for entry in dir.flatten() {
                names.push(entry.file_name().to_string_lossy().into_owned());
                paths.push(entry.path());
            }
        }
        for (name, path) in names.into_iter().zip(paths) {
            if let Ok(inode) = inode_of(&path) {
                self.by_inode.insert(inode, name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_forms_map_to_paths() {
        assert_eq!(spec_path("host"), PathBuf::from("/proc/1/ns/net"));
        assert_eq!(spec_path("pid:42"), PathBuf::from("/proc/42/ns/net"));
        assert_eq!(
            spec_path("/var/run/netns/x"),
            PathBuf::from("/var/run/netns/x")
        );
        assert_eq!(spec_path("cni-1234"), PathBuf::from("/run/netns/cni-1234"));
    }

    #[test]
    fn the_host_namespace_is_its_nsfs_inode() {
        let ns = resolve("pid:self").expect("our own namespace resolves");
        assert_eq!(Some(ns.inode), current_inode().ok());
        assert_ne!(ns.inode, 0);
    }

    #[test]
    fn a_regular_file_is_not_a_namespace() {
        let err = resolve("/proc/self/status").expect_err("a regular file");
        assert!(
            err.to_string().contains("is not a network namespace"),
            "{err}"
        );
    }

    #[test]
    fn unknown_namespace_is_a_clear_error() {
        let err = resolve("no-such-namespace-here").expect_err("must not resolve");
        assert!(
            err.to_string()
                .contains("unknown network namespace 'no-such-namespace-here'"),
            "{err}"
        );
    }
}
