//! What the node's Service datapath believes, read as the node holds it, and audited against the
//! cluster's EndpointSlices (incident 000: Service maps on 3 of 10 nodes still pointed at a deleted
//! pod).
//!
//! - `iptables.rs`: kube-proxy's iptables mode, from `iptables-save -t nat` (`KUBE-SERVICES` ->
//!   `KUBE-SVC-*` -> `KUBE-SEP-*` DNAT).
//! - `nftables.rs`: kube-proxy's nftables mode, from `nft -j list table ip kube-proxy` (the
//!   `service-ips` map -> `service-*` -> `endpoint-*` chains' `dnat`).
//! - `ipvs.rs`: kube-proxy's IPVS mode, from `/proc/net/ip_vs` (virtual and real servers), when the
//!   `ip_vs` module is loaded.
//! - `cilium.rs`: Cilium's kube-proxy replacement, from its pinned services and backends maps.
//! - `reader.rs`: a thread in the node's network namespace (`--conntrack-netns`) that reads every
//!   source each interval, so a slow tool never delays the ring buffer.
//! - `audit.rs`: each entry judged against the cluster state, reported at start and on change
//!   (`stale_datapath` records), counted in `stats.datapath`.
//! - `backends.rs`: the backends the rules allow per Service address, for a connect whose backend
//!   conntrack cannot name (a SYN waiting for ARP on the node's bridge).
//!
//! Every source is one `Source` behind the `Reader` trait.
pub mod audit;
pub mod backends;
pub mod cilium;
pub mod iptables;
pub mod ipvs;
pub mod nftables;
pub mod reader;

use std::net::SocketAddr;

use crate::{identity::cluster::Proto, record::Source};

/// One (Service address -> backend) translation the node's datapath holds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    pub service: SocketAddr,
    pub proto: Proto,
    pub backend: SocketAddr,
    /// The chain, map or table that holds it (`KUBE-SEP-ABC123`, `endpoint-...`, `ip_vs`).
    pub location: String,
    /// `namespace/name` of the Service as the datapath itself names it (kube-proxy's comments and
    /// chain names), for a Service the cluster state no longer has.
    pub name_hint: Option<String>,
}

impl std::fmt::Display for Entry {
    /// `TCP 10.96.0.10:80 -> 10.244.1.30:8080 KUBE-SEP-... Some("app/web")`: one line per entry,
    /// for tests and debugging.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} -> {} {} {:?}",
            self.proto, self.service, self.backend, self.location, self.name_hint
        )
    }
}

/// A protocol as the datapath spells it (`tcp`, `TCP`, `6`).
pub fn parse_proto(s: &str) -> Option<Proto> {
    match s.to_ascii_lowercase().as_str() {
        "tcp" | "6" => Some(Proto::Tcp),
        "udp" | "17" => Some(Proto::Udp),
        "sctp" | "132" => Some(Proto::Sctp),
        _ => None,
    }
}

/// `tcp`, `udp`, `sctp`: how records name it.
pub fn proto_name(proto: Proto) -> &'static str {
    match proto {
        Proto::Tcp => "tcp",
        Proto::Udp => "udp",
        Proto::Sctp => "sctp",
    }
}

/// Why a source gave no entries: not there on this node (a stated fact, not a failure), or there
/// and unreadable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unread {
    Absent(String),
    Failed(String),
}

/// One source, read once.
pub trait Reader {
    fn source(&self) -> Source;
    fn read(&self) -> Result<Vec<Entry>, Unread>;
}

/// Every source, read once: what the reader thread sends.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub reads: Vec<(Source, Result<Vec<Entry>, Unread>)>,
}

/// `namespace/name` from kube-proxy's `namespace/name:port` (iptables comments).
fn service_of_port_name(s: &str) -> Option<String> {
    let name = s.split_whitespace().next()?;
    let name = name.split(':').next()?;
    (name.contains('/') && !name.starts_with('/') && !name.ends_with('/')).then(|| name.to_string())
}

/// Runs a tool to completion; a missing binary is `Absent`, a failing run `Failed` with its stderr.
fn run_tool(program: &str, args: &[&str]) -> Result<String, Unread> {
    let out = match std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Unread::Absent(format!("no `{program}` on this host")));
        }
        Err(e) => return Err(Unread::Failed(format!("cannot run `{program}`: {e}"))),
    };
    if !out.status.success() {
        return Err(Unread::Failed(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| Unread::Failed(format!("`{program}` printed something that is not UTF-8")))
}
