//! Why a `connect()` failed before any SYN left. The kernel side only sees that the socket never
//! reached `SYN_SENT` (`tcp_destroy_sock.rs`); the errno stayed in the syscall's return value, which
//! the tracer does not hook (a syscall tracepoint slows every syscall on the node). The usual cause
//! is no route, and that is a question the kernel answers without sending anything: a UDP socket
//! connected to the same address in the same network namespace goes through the same route lookup
//! and fails with the same errno (`ENETUNREACH`, `EHOSTUNREACH`, ...). 0: a route exists.
//!
//! The same lookup names the source address the kernel picks for a destination: what a UDP DNS
//! query from an unbound, unconnected socket left from, where the hook saw only the socket (the
//! `sock_send_length` tracepoint tier).
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
    recent: HashMap<(u64, IpAddr), (Instant, Route)>,
}

/// What the route lookup to a destination said: the source address it picks, or its errno.
type Route = Result<IpAddr, i32>;

impl RouteCheck {
    /// The errno a `connect()` to `dst` gets from the route lookup in namespace `netns_inode`, where
    /// thread `tid` of process `pid` made it; 0 if a route exists or the namespace cannot be found.
    pub fn errno(&mut self, netns_inode: u64, pid: u32, tid: u32, dst: SocketAddr) -> i32 {
        self.route(netns_inode, pid, tid, dst).err().unwrap_or(0)
    }

    /// The source address the kernel picks for `dst` in namespace `netns_inode`, if it routes
    /// there and the namespace can be found.
    pub fn source(
        &mut self,
        netns_inode: u64,
        pid: u32,
        tid: u32,
        dst: SocketAddr,
    ) -> Option<IpAddr> {
        self.route(netns_inode, pid, tid, dst)
            .ok()
            .filter(|ip| !ip.is_unspecified())
    }

    fn route(&mut self, netns_inode: u64, pid: u32, tid: u32, dst: SocketAddr) -> Route {
        let now = Instant::now();
        if let Some((at, route)) = self.recent.get(&(netns_inode, dst.ip()))
            && now.duration_since(*at) < CACHE_FOR
        {
            return *route;
        }
        let route = lookup(netns_inode, pid, tid, dst);
        if self.recent.len() > 4096 {
            self.recent
                .retain(|_, (at, _)| now.duration_since(*at) < CACHE_FOR);
        }
        self.recent.insert((netns_inode, dst.ip()), (now, route));
        route
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

/// One disposable thread enters each candidate in turn and asks the first that matches; a
/// namespace that cannot be found answers "routed, source unknown".
fn lookup(netns_inode: u64, pid: u32, tid: u32, dst: SocketAddr) -> Route {
    let unknown = move || Ok(unspecified(dst));
    let paths = candidates(pid, tid);
    std::thread::spawn(move || {
        for path in paths {
            if netns::enter(&path).is_ok() && netns::current_inode().is_ok_and(|c| c == netns_inode)
            {
                return route_to(dst);
            }
        }
        unknown()
    })
    .join()
    .unwrap_or_else(|_| unknown())
}

fn unspecified(dst: SocketAddr) -> IpAddr {
    if dst.is_ipv4() {
        IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
    }
}

/// Connects a UDP socket to `dst` in the current namespace: a route lookup, no packet.
fn route_to(dst: SocketAddr) -> Route {
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(0);
    let socket = UdpSocket::bind(SocketAddr::new(unspecified(dst), 0)).map_err(errno)?;
    socket.connect(dst).map_err(errno)?;
    Ok(socket.local_addr().map_or(unspecified(dst), |a| a.ip()))
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
        assert_eq!(
            check.source(cookie, me, me, dst),
            Some("127.0.0.1".parse().expect("literal")),
            "the source the kernel picks for loopback"
        );
        // A namespace nobody is in: no candidate matches, so nothing is claimed.
        assert_eq!(check.errno(u64::MAX, me, me, dst), 0);
    }
}
