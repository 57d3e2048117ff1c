//! Why a `connect()` failed before any SYN left. The kernel side only sees that the socket never
//! reached `SYN_SENT` (`tcp_destroy_sock.rs`); the errno stayed in the syscall's return value, which
//! the tracer does not hook (a syscall tracepoint slows every syscall on the node). The usual cause
//! is no route, and that is a question the kernel answers without sending anything: a UDP socket
//! connected to the same address in the same network namespace goes through the same route lookup
//! and fails with the same errno (`ENETUNREACH`, `EHOSTUNREACH`, ...). 0: a route exists.
use std::{
    net::{IpAddr, SocketAddr, UdpSocket},
    path::PathBuf,
    time::{Duration, Instant},
};

use hashbrown::HashMap;

use crate::netns::{self, NAMED_NETNS_DIR};

/// A failing application retries fast; one lookup per namespace and address per second is plenty.
const CACHE_FOR: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct RouteCheck {
    recent: HashMap<(u64, IpAddr), (Instant, i32)>,
}

impl RouteCheck {
    /// The errno a `connect()` to `dst` gets from the route lookup in namespace `netns_inode`, where
    /// thread `tid` of process `pid` made it; 0 if a route exists or the namespace cannot be found.
    pub fn errno(&mut self, netns_inode: u64, pid: u32, tid: u32, dst: SocketAddr) -> i32 {
        let now = Instant::now();
        if let Some((at, errno)) = self.recent.get(&(netns_inode, dst.ip()))
            && now.duration_since(*at) < CACHE_FOR
        {
            return *errno;
        }
        let errno = lookup(netns_inode, pid, tid, dst);
        if self.recent.len() > 4096 {
            self.recent
                .retain(|_, (at, _)| now.duration_since(*at) < CACHE_FOR);
        }
        self.recent.insert((netns_inode, dst.ip()), (now, errno));
        errno
    }
}

/// Candidate namespaces, likeliest first: the calling thread's, its process's, then the named ones
/// (pods' namespaces under /run/netns). The first whose cookie matches answers.
fn candidates(pid: u32, tid: u32) -> Vec<PathBuf> {
    let mut paths = vec![
        PathBuf::from(format!("/proc/{pid}/task/{tid}/ns/net")),
        PathBuf::from(format!("/proc/{pid}/ns/net")),
    ];
    if let Ok(dir) = std::fs::read_dir(NAMED_NETNS_DIR) {
        paths.extend(dir.flatten().map(|e| e.path()));
    }
    paths
}

/// One disposable thread enters each candidate in turn and asks the first that matches.
fn lookup(netns_inode: u64, pid: u32, tid: u32, dst: SocketAddr) -> i32 {
    let paths = candidates(pid, tid);
    std::thread::spawn(move || {
        for path in paths {
            if netns::enter(&path).is_ok() && netns::current_inode().is_ok_and(|c| c == netns_inode)
            {
                return route_errno(dst);
            }
        }
        0
    })
    .join()
    .unwrap_or(0)
}

/// Connects a UDP socket to `dst` in the current namespace: a route lookup, no packet.
fn route_errno(dst: SocketAddr) -> i32 {
    let local: SocketAddr = if dst.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal")
    } else {
        "[::]:0".parse().expect("literal")
    };
    UdpSocket::bind(local)
        .and_then(|s| s.connect(dst))
        .map_or_else(|e| e.raw_os_error().unwrap_or(0), |()| 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_routed_address_has_no_errno_and_answers_are_cached() {
        let mut check = RouteCheck::default();
        let cookie = netns::current_inode().expect("our own namespace");
        let me = std::process::id();
        // Loopback always has a route; nothing is sent.
        let dst: SocketAddr = "127.0.0.1:9".parse().expect("literal");
        assert_eq!(check.errno(cookie, me, me, dst), 0);
        assert_eq!(check.recent.len(), 1);
        // A namespace nobody is in: no candidate matches, so nothing is claimed.
        assert_eq!(check.errno(u64::MAX, me, me, dst), 0);
    }
}
