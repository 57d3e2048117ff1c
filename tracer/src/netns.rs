//! Network namespaces: from what a user types (`--netns NAME|PATH|pid:N|host`) to the namespace cookie
//! the kernel side filters on, and from cookies back to names for display.
//!
//! The kernel identifies a namespace by its cookie (`bpf_get_netns_cookie`); userspace gets the cookie
//! of a namespace with `SO_NETNS_COOKIE` on a socket created inside it, from a short-lived thread that
//! `setns()` into it (a thread may switch network namespace; the rest of the process does not move).
use std::{
    fs::File,
    io,
    os::fd::{AsRawFd, FromRawFd},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use hashbrown::HashMap;

/// Where `ip netns add` puts named namespaces.
pub const NAMED_NETNS_DIR: &str = "/run/netns";
const SO_NETNS_COOKIE: libc::c_int = 71;

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error(
        "unknown network namespace '{spec}': no {path} (see `ip netns list`; a path or pid:N also works)"
    )]
    Unknown { spec: String, path: PathBuf },
    #[error("cannot enter network namespace {path}: {source} (needs CAP_SYS_ADMIN)")]
    Enter { path: PathBuf, source: io::Error },
    #[error(
        "cannot read the cookie of network namespace {path}: {source} (kernel 5.14 or later needed)"
    )]
    Cookie { path: PathBuf, source: io::Error },
}

/// A namespace the user named, with the cookie the kernel knows it by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Netns {
    pub name: String,
    pub cookie: u64,
}

/// `host`, `pid:N`, a path, or a name under /run/netns.
pub fn resolve(spec: &str) -> Result<Netns, NetnsError> {
    let path = spec_path(spec);
    if !path.exists() {
        return Err(NetnsError::Unknown {
            spec: spec.into(),
            path,
        });
    }
    let cookie = cookies_of(std::slice::from_ref(&path))
        .pop()
        .unwrap_or_else(|| {
            Err(NetnsError::Unknown {
                spec: spec.into(),
                path: path.clone(),
            })
        })?;
    Ok(Netns {
        name: spec.into(),
        cookie,
    })
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

/// The cookie of the namespace the calling thread is in.
pub fn current_cookie() -> io::Result<u64> {
    // SAFETY: plain socket(2); the fd is owned by `sock` at once.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket nobody else owns.
    let sock = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let mut cookie: u64 = 0;
    let mut len = size_of::<u64>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cookie`, which we own.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&raw mut cookie).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cookie)
}

/// Cookies of several namespaces, from one thread that enters each in turn.
fn cookies_of(paths: &[PathBuf]) -> Vec<Result<u64, NetnsError>> {
    let paths = paths.to_vec();
    std::thread::spawn(move || paths.iter().map(|p| cookie_in(p)).collect())
        .join()
        .unwrap_or_default()
}

fn cookie_in(path: &Path) -> Result<u64, NetnsError> {
    enter(path)?;
    // An unbound socket is enough for SO_NETNS_COOKIE; binding would need the namespace's loopback
    // up, which a node's or pod's namespace does not promise.
    current_cookie().map_err(|source| NetnsError::Cookie {
        path: path.into(),
        source,
    })
}

/// Cookie -> readable name (`host`, the `ip netns` name), rescanned when an unknown cookie shows up.
pub struct NetnsNames {
    by_cookie: HashMap<u64, String>,
    last_scan: Option<Instant>,
}

/// New namespaces appear with new pods; a rescan costs one thread and a socket per namespace.
const RESCAN_INTERVAL: Duration = Duration::from_secs(2);

impl NetnsNames {
    pub fn new() -> NetnsNames {
        let mut names = NetnsNames {
            by_cookie: HashMap::new(),
            last_scan: None,
        };
        names.rescan();
        names
    }

    pub fn name(&mut self, cookie: u64) -> String {
        if cookie == 0 {
            return "unknown".into();
        }
        if !self.by_cookie.contains_key(&cookie)
            && self
                .last_scan
                .is_none_or(|t| t.elapsed() >= RESCAN_INTERVAL)
        {
            self.rescan();
        }
        self.by_cookie
            .get(&cookie)
            .cloned()
            .unwrap_or_else(|| format!("netns:{cookie}"))
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
        for (name, cookie) in names.into_iter().zip(cookies_of(&paths)) {
            if let Ok(cookie) = cookie {
                self.by_cookie.insert(cookie, name);
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
    fn cookie_of_a_namespace_whose_loopback_is_down() {
        // Regression: the cookie was read from a socket bound to 127.0.0.1, which fails with
        // EADDRNOTAVAIL in a namespace whose `lo` is down (a node namespace, freshly made).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return; // creating a namespace needs root; the integration tests run as root
        }
        let name = format!("tracer-unit-lo-{}", std::process::id());
        let made = std::process::Command::new("ip")
            .args(["netns", "add", &name])
            .status();
        if !made.is_ok_and(|s| s.success()) {
            return;
        }
        let result = resolve(&name);
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &name])
            .status();
        let ns = result.expect("cookie of a namespace with lo down");
        assert_ne!(ns.cookie, 0);
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
