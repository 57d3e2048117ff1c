//! The demo's little cluster, in two network namespaces of its own and nothing else: a client (with
//! kube-proxy-like nft rules for three Services) and the pods, joined by one veth pair. No namespace
//! has a link to the host's, so no demo packet can leave.
//!
//! - web Service 10.96.0.10:80 -> a live pod 10.250.0.10:8080 and a dead one 10.250.0.11:8080 (its
//!   SYNs dropped: the pod is gone, the rule still points at it);
//! - 10.250.0.12:8080: a pod where nothing listens (refused by RST);
//! - 10.96.0.20:80: a Service without endpoints (kube-proxy's REJECT: refused by ICMP);
//! - DNS Service 10.96.0.53:53 -> first the dead DNS pod 10.250.0.54, then the live 10.250.0.53.
use std::{
    io::Write as _,
    net::Ipv4Addr,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};

pub const CLIENT_NS: &str = "tracer-demo-client";
pub const PODS_NS: &str = "tracer-demo-pods";
/// Who runs the demo: refuses a second one, tells a dead one's leftovers.
const PID_FILE: &str = "/run/tracer-demo.pid";

pub const WEB_SERVICE: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 96, 0, 10), 80);
pub const WEB_LIVE: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 10);
pub const WEB_DEAD: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 11);
pub const WEB_PORT: u16 = 8080;
pub const NOT_LISTENING: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 250, 0, 12), 8080);
pub const NO_ENDPOINTS: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 96, 0, 20), 80);
pub const DNS_SERVICE: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 53);
pub const DNS_LIVE: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 53);
pub const DNS_DEAD: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 54);
const CLIENT_IP: &str = "10.250.0.1/24";

/// The namespaces and rules; everything is removed on drop (also while a panic unwinds).
pub struct Bed {
    _private: (),
}

impl Bed {
    /// Checks the tools and that no other demo runs (cleaning a dead one's leftovers), then builds.
    pub fn create() -> anyhow::Result<Bed> {
        for (tool, package) in [("ip", "iproute2"), ("nft", "nftables")] {
            if Command::new(tool)
                .arg("-V")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_err()
            {
                bail!("the demo needs `{tool}` (Debian package {package}) to build its namespaces");
            }
        }
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
        let bed = Bed { _private: () };
        build()?;
        Ok(bed)
    }
}

fn build() -> anyhow::Result<()> {
    run("ip", &["netns", "add", CLIENT_NS])?;
    run("ip", &["netns", "add", PODS_NS])?;
    for ns in [CLIENT_NS, PODS_NS] {
        run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
    }
    run(
        "ip",
        &[
            "-n", CLIENT_NS, "link", "add", "demo0", "type", "veth", "peer", "name", "demo1",
            "netns", PODS_NS,
        ],
    )?;
    run(
        "ip",
        &["-n", CLIENT_NS, "addr", "add", CLIENT_IP, "dev", "demo0"],
    )?;
    run("ip", &["-n", CLIENT_NS, "link", "set", "demo0", "up"])?;
    // Service addresses are routed to the veth, as kube-proxy's cluster IPs are to the node.
    run(
        "ip",
        &[
            "-n",
            CLIENT_NS,
            "route",
            "add",
            "10.96.0.0/16",
            "dev",
            "demo0",
        ],
    )?;
    for pod in [WEB_LIVE, WEB_DEAD, NOT_LISTENING.0, DNS_LIVE, DNS_DEAD] {
        run(
            "ip",
            &[
                "-n",
                PODS_NS,
                "addr",
                "add",
                &format!("{pod}/24"),
                "dev",
                "demo1",
            ],
        )?;
    }
    run("ip", &["-n", PODS_NS, "link", "set", "demo1", "up"])?;
    nft(
        PODS_NS,
        &format!(
            "table inet demo_pods {{
  chain input {{
type filter hook input priority 0; policy accept;
ip daddr {WEB_DEAD} tcp dport {WEB_PORT} drop
ip daddr {DNS_DEAD} udp dport 53 drop
  }}
}}
"
        ),
    )?;
    let (web, web_port) = WEB_SERVICE;
    let (none, none_port) = NO_ENDPOINTS;
    nft(
        CLIENT_NS,
        &format!(
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
        ),
    )
}

impl Bed {
    pub fn client_path() -> PathBuf {
        Path::new("/run/netns").join(CLIENT_NS)
    }

    pub fn pods_path() -> PathBuf {
        Path::new("/run/netns").join(PODS_NS)
    }
}

/// The DNS pod died and was replaced: the Service now sends new flows to the live one. Sockets
/// whose conntrack entry points at the dead one keep it.
pub fn replace_dns_pod() -> anyhow::Result<()> {
    nft(
        CLIENT_NS,
        &format!(
            "flush chain ip demo_services dns\nadd rule ip demo_services dns udp dport 53 dnat ip to {DNS_LIVE}\n"
        ),
    )
}

impl Drop for Bed {
    fn drop(&mut self) {
        remove_namespaces();
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
        if Path::new("/run/netns").join(ns).exists() {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn run(tool: &str, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("starting {tool}"))?;
    if !out.status.success() {
        bail!(
            "`{tool} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn nft(ns: &str, script: &str) -> anyhow::Result<()> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting nft")?;
    child
        .stdin
        .take()
        .context("nft stdin")?
        .write_all(script.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "nft in {ns} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
