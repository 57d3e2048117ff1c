//! The demo's little cluster, in two network namespaces of its own and nothing else: a client (with
//! kube-proxy-like rules for its Services) and the pods, joined by one veth pair. No namespace has a
//! link to the host's, so no demo packet can leave.
//!
//! - web Service 10.96.0.10:80 -> a live pod 10.250.0.10:8080 and a deleted one 10.250.0.11:8080;
//! - 10.250.0.12:8080: a pod where nothing listens (refused by RST);
//! - 10.96.0.20:80: a Service without endpoints (kube-proxy's REJECT: refused by ICMP);
//! - DNS Service 10.96.0.53:53 -> first the deleted DNS pod 10.250.0.54, then the live 10.250.0.53.
//!
//! The namespaces, links, addresses and routes are made through netlink (`named_netns.rs`,
//! `rtnl.rs`). A deleted pod is an address the client's neighbour table maps to a MAC address no
//! interface has: its packets leave and vanish, as a black hole's do, with no rule. The Services are
//! nft rules: where `nft` is missing or refuses them they are skipped (`Services::Skipped`, with the
//! reason) and the client dials the pods directly.
use std::{
    io::{self, Write as _},
    net::Ipv4Addr,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};

use super::{
    addresses::{
        CLIENT, DNS_DEAD, DNS_LIVE, DNS_SERVICE, NO_ENDPOINTS, NOT_LISTENING, WEB_DEAD, WEB_LIVE,
        WEB_PORT, WEB_SERVICE,
    },
    cluster, named_netns,
    rtnl::Rtnl,
};

pub const CLIENT_NS: &str = "tracer-demo-client";
pub const PODS_NS: &str = "tracer-demo-pods";
/// Who runs the demo: refuses a second one, tells a dead one's leftovers.
const PID_FILE: &str = "/run/tracer-demo.pid";
/// The demo's cluster state (`cluster.rs`), read by the tracer with `--cluster-state`.
pub const CLUSTER_STATE: &str = "/run/tracer-demo-cluster.json";

/// Where the client sends Service addresses (kube-proxy's cluster IP range).
const SERVICE_NET: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 16);
/// A locally administered MAC address no interface has: frames sent to it are taken by nobody.
const NOBODY_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0xde, 0xad];

/// What became of the Services' rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Services {
    Built,
    /// Not built; the sentence says why.
    Skipped(String),
}

/// The built bed. Everything it made is removed on drop (also while a panic unwinds).
pub struct Bed {
    pub services: Services,
    _made: Made,
}

/// What the demo made so far: the namespaces (with their links, rules and routes), the cluster
/// state file and the pid file; removed on drop.
struct Made;

impl Bed {
    /// Checks that no other demo runs (cleaning a dead one's leftovers), then builds.
    pub fn create() -> anyhow::Result<Bed> {
        if let Some(pid) = live_owner() {
            bail!(
                "a demo is already running (pid {pid}, namespaces {CLIENT_NS} and {PODS_NS}); \
                 stop it first"
            );
        }
        remove_namespaces(); // a dead demo's, if any
        std::fs::write(PID_FILE, std::process::id().to_string())
            .with_context(|| format!("writing {PID_FILE} (the demo needs root)"))?;
        // From here on, a failure removes whatever was made.
        let made = Made;
        build()?;
        let services = match services() {
            Ok(()) => Services::Built,
            Err(why) => Services::Skipped(why),
        };
        cluster::write(Path::new(CLUSTER_STATE))?;
        Ok(Bed {
            services,
            _made: made,
        })
    }

    pub fn client_path() -> PathBuf {
        named_netns::path_of(CLIENT_NS)
    }

    pub fn pods_path() -> PathBuf {
        named_netns::path_of(PODS_NS)
    }
}

/// The namespaces, the veth between them, addresses, routes, and the deleted pods' neighbours.
fn build() -> anyhow::Result<()> {
    let client_path = named_netns::create(CLIENT_NS)?;
    let pods_path = named_netns::create(PODS_NS)?;
    let mut client = Rtnl::open_in(&client_path)?;
    let mut pods = Rtnl::open_in(&pods_path)?;
    client.set_up("lo")?;
    pods.set_up("lo")?;
    let pods_ns = std::fs::File::open(&pods_path)
        .with_context(|| format!("opening {}", pods_path.display()))?;
    client.add_veth("demo0", "demo1", &pods_ns)?;
    client.add_address("demo0", CLIENT, 24)?;
    client.set_up("demo0")?;
    // Service addresses are routed to the veth, as kube-proxy's cluster IPs are to the node.
    let (services, prefix) = SERVICE_NET;
    client.add_link_route("demo0", services, prefix)?;
    for gone in [WEB_DEAD, DNS_DEAD] {
        client.add_permanent_neighbour("demo0", gone, NOBODY_MAC)?;
    }
    for pod in [WEB_LIVE, NOT_LISTENING.0, DNS_LIVE] {
        pods.add_address("demo1", pod, 24)?;
    }
    pods.set_up("demo1")?;
    Ok(())
}

/// kube-proxy's rules for the three Services, in the client's namespace; the reason when they
/// cannot be loaded.
fn services() -> Result<(), String> {
    let (web, web_port) = WEB_SERVICE;
    let (none, none_port) = NO_ENDPOINTS;
    nft(&format!(
        "table ip demo_services {{
  chain dns {{
udp dport 53 dnat ip to {DNS_DEAD}
  }}
  chain output_nat {{
type nat hook output priority -100; policy accept;
ip daddr {web} tcp dport {web_port} dnat ip to numgen random mod 2 map {{ 0 : {WEB_LIVE} . {WEB_PORT}, 1 : {WEB_DEAD} . {WEB_PORT} }}
ip daddr {DNS_SERVICE} udp dport 53 jump dns
  }}
  chain output_filter {{
type filter hook output priority 0; policy accept;
ip daddr {none} tcp dport {none_port} reject with icmp type port-unreachable
  }}
}}
"
    ))
}

/// The DNS pod died and was replaced: the Service now sends new flows to the live one. Sockets
/// whose conntrack entry points at the dead one keep it.
pub fn replace_dns_pod() -> anyhow::Result<()> {
    nft(&format!(
        "flush chain ip demo_services dns\nadd rule ip demo_services dns udp dport 53 dnat ip to {DNS_LIVE}\n"
    ))
    .map_err(|why| anyhow::anyhow!("replacing the DNS pod in its Service: {why}"))
}

impl Drop for Made {
    fn drop(&mut self) {
        remove_namespaces();
        let _ = std::fs::remove_file(CLUSTER_STATE);
        let _ = std::fs::remove_file(PID_FILE);
    }
}

/// The pid of a running demo, if the pid file names a live process.
fn live_owner() -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(PID_FILE)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists()).then_some(pid)
}

/// Deleting a namespace removes its veth end, its nft rules and its routes with it.
fn remove_namespaces() {
    for ns in [CLIENT_NS, PODS_NS] {
        named_netns::remove(ns);
    }
}

/// `nft -f -` with `script`, run in the client's namespace (from a thread that entered it, so the
/// child starts there); the reason as one sentence when it cannot run or fails.
fn nft(script: &str) -> Result<(), String> {
    let script = script.to_string();
    let ran = std::thread::spawn(move || -> io::Result<std::process::Output> {
        crate::netns::enter(&Bed::client_path()).map_err(io::Error::other)?;
        let mut child = Command::new("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        child
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("no stdin"))?
            .write_all(script.as_bytes())?;
        child.wait_with_output()
    })
    .join()
    .unwrap_or_else(|_| Err(io::Error::other("the nft thread panicked")));
    match ran {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            Err("no `nft` on this machine (Debian package nftables)".into())
        }
        Err(e) => Err(format!("`nft` did not run: {e}")),
        Ok(out) if !out.status.success() => Err(format!(
            "`nft` refused them: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("no message")
        )),
        Ok(_) => Ok(()),
    }
}
