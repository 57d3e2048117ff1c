//! The benchmark's test bed: three network namespaces joined by veth pairs, routed (no bridge), with no
//! link to the host namespace and no route out of `10.232.0.0/16`.
//!
//! ```text
//!  client ns                node ns ("the node")                      backend ns
//!  10.232.0.1  --veth--  10.232.0.254 | 10.232.1.254  --veth--  10.232.1.1:80 listener (live)
//!                        nft DNAT VIP 10.232.100.1:80                10.232.1.2:80 listener (live)
//!                        numgen random mod 100 -> backends          10.232.1.3     SYNs dropped (black hole)
//! ```
//!
//! Everything is deleted on Drop (namespaces, the processes in them, listener threads), also while
//! unwinding from an error. Namespace names carry our pid; `remove_stale` deletes those of dead runs.
use std::{
    fs::File,
    io::Write as _,
    net::{Ipv4Addr, SocketAddrV4, TcpListener},
    os::fd::{AsRawFd, RawFd},
    path::PathBuf,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::JoinHandle,
};

use anyhow::{Context as _, bail};

const PREFIX: &str = "bhb";
pub const VIP: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 232, 100, 1), 80);
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 232, 0, 1);
pub const LIVE_BACKENDS: [Ipv4Addr; 2] =
    [Ipv4Addr::new(10, 232, 1, 1), Ipv4Addr::new(10, 232, 1, 2)];
pub const DROPPING_BACKEND: Ipv4Addr = Ipv4Addr::new(10, 232, 1, 3);
/// Destination ports of the SYN flood straight to the dropping backend (not conntracked in the node).
pub const FLOOD_PORTS: std::ops::Range<u16> = 9000..9100;

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running ip")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// One `ip netns` namespace; deleted (with whatever still runs in it) on Drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    fn new(role: &str) -> anyhow::Result<Netns> {
        let name = format!("{PREFIX}-{role}-{}", std::process::id());
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// A command that runs inside the namespace (`ip netns exec` execs it: same pid).
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, program]);
        cmd
    }

    /// Runs `program args` inside the namespace; a failure carries its stderr.
    fn run(&self, program: &str, args: &[&str]) -> anyhow::Result<()> {
        let out = self
            .command(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {program} in {}", self.name))?;
        if !out.status.success() {
            bail!(
                "`{program} {}` in {}: {}",
                args.join(" "),
                self.name,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    fn sysctl(&self, settings: &[&str]) -> anyhow::Result<()> {
        self.run("sysctl", &[&["-q", "-w"], settings].concat())
    }

    fn nft(&self, script: &str) -> anyhow::Result<()> {
        let mut child = self
            .command("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting nft")?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(script.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "nft in {}: {}\n{script}",
                self.name,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        delete_netns(&self.name);
    }
}

fn delete_netns(name: &str) {
    let own = std::process::id().to_string();
    if let Ok(out) = Command::new("ip").args(["netns", "pids", name]).output() {
        for pid in String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter(|p| *p != own)
        {
            if let Ok(pid) = pid.parse::<i32>() {
                // SAFETY: plain kill(2). The pid was listed as living in our own namespace just now.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
    match Command::new("ip").args(["netns", "del", name]).output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => eprintln!(
            "bench: `ip netns del {name}` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => eprintln!("bench: cannot run `ip netns del {name}`: {e}"),
    }
}

/// Deletes namespaces left by an earlier run that died without cleaning up (its pid is gone).
pub fn remove_stale() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(&format!("{PREFIX}-"))
            .and_then(|r| r.rsplit('-').next())
        else {
            continue;
        };
        let alive = PathBuf::from("/proc").join(pid).exists();
        if !alive && pid.parse::<u32>().is_ok() {
            eprintln!("bench: removing stale namespace {name} of a dead run");
            delete_netns(&name);
        }
    }
}

pub struct Testbed {
    // Field order is drop order: listener threads stop before their namespace goes.
    listeners: Vec<Listener>,
    pub client: Netns,
    pub node: Netns,
    pub backend: Netns,
}

impl Testbed {
    /// `drop_percent` of the connects to the VIP go to the dropping backend.
    pub fn new(drop_percent: u32) -> anyhow::Result<Testbed> {
        let client = Netns::new("c")?;
        let node = Netns::new("n")?;
        let backend = Netns::new("b")?;
        let mut bed = Testbed {
            listeners: Vec::new(),
            client,
            node,
            backend,
        };
        bed.wire()?;
        bed.rules(drop_percent)?;
        for addr in LIVE_BACKENDS {
            bed.listeners.push(Listener::start(
                &bed.backend,
                SocketAddrV4::new(addr, VIP.port()),
            )?);
        }
        Ok(bed)
    }

    fn wire(&self) -> anyhow::Result<()> {
        let (c, n, b) = (&self.client.name, &self.node.name, &self.backend.name);
        // Each veth is created inside one bed namespace with its peer put straight into another, so
        // it never exists in the host namespace.
        ip(&[
            "-n", c, "link", "add", "c0", "type", "veth", "peer", "name", "n0", "netns", n,
        ])?;
        ip(&[
            "-n", n, "link", "add", "n1", "type", "veth", "peer", "name", "b0", "netns", b,
        ])?;
        ip(&["-n", c, "addr", "add", "10.232.0.1/24", "dev", "c0"])?;
        ip(&["-n", n, "addr", "add", "10.232.0.254/24", "dev", "n0"])?;
        ip(&["-n", n, "addr", "add", "10.232.1.254/24", "dev", "n1"])?;
        for a in ["10.232.1.1/24", "10.232.1.2/24", "10.232.1.3/24"] {
            ip(&["-n", b, "addr", "add", a, "dev", "b0"])?;
        }
        for (ns, dev) in [(c, "c0"), (n, "n0"), (n, "n1"), (b, "b0")] {
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        // Only routes inside the bed: nothing has a default route.
        ip(&[
            "-n",
            c,
            "route",
            "add",
            "10.232.0.0/16",
            "via",
            "10.232.0.254",
        ])?;
        ip(&[
            "-n",
            b,
            "route",
            "add",
            "10.232.0.0/16",
            "via",
            "10.232.1.254",
        ])?;
        self.node.sysctl(&["net.ipv4.ip_forward=1"])?;
        // Many short connects and a 100k-socket flood from one address.
        self.client.sysctl(&[
            "net.ipv4.ip_local_port_range=1024 65535",
            "net.ipv4.tcp_tw_reuse=1",
        ])?;
        self.backend.sysctl(&[
            "net.core.somaxconn=8192",
            "net.ipv4.tcp_max_syn_backlog=8192",
        ])?;
        Ok(())
    }

    fn rules(&self, drop_percent: u32) -> anyhow::Result<()> {
        let drop_percent = drop_percent.min(100);
        // numgen random mod 100 -> backend: [0, p) dropping, then the two live ones share the rest.
        let mut ranges = Vec::new();
        let mut add = |lo: u32, hi: u32, addr: Ipv4Addr| {
            if lo < hi {
                let r = if hi - lo == 1 {
                    lo.to_string()
                } else {
                    format!("{lo}-{}", hi - 1)
                };
                ranges.push(format!("{r} : {addr}"));
            }
        };
        let half = drop_percent + (100 - drop_percent) / 2;
        add(0, drop_percent, DROPPING_BACKEND);
        add(drop_percent, half, LIVE_BACKENDS[0]);
        add(half, 100, LIVE_BACKENDS[1]);
        let (vip, port) = (VIP.ip(), VIP.port());
        let (flood_lo, flood_hi) = (FLOOD_PORTS.start, FLOOD_PORTS.end - 1);
        self.node.nft(&format!(
            "table ip {PREFIX} {{
  chain raw {{
    type filter hook prerouting priority raw; policy accept;
    ip daddr {DROPPING_BACKEND} tcp dport {flood_lo}-{flood_hi} notrack
  }}
  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr {vip} tcp dport {port} dnat to numgen random mod 100 map {{ {} }}
  }}
}}
",
            ranges.join(", ")
        ))?;
        // Short conntrack timeouts in the node so entries of one round do not pile up, and a source
        // port whose SYN was black-holed is free for a fresh DNAT choice soon (see load.rs).
        if let Err(e) = self.node.sysctl(&[
            "net.netfilter.nf_conntrack_tcp_timeout_syn_sent=1",
            "net.netfilter.nf_conntrack_tcp_timeout_close=1",
            "net.netfilter.nf_conntrack_tcp_timeout_time_wait=1",
        ]) {
            eprintln!("bench: warning: conntrack timeouts of the node unchanged: {e:#}");
        }
        // The "dead pod": answers ARP, drops every SYN.
        self.backend.nft(&format!(
            "table inet {PREFIX} {{
  chain input {{
    type filter hook input priority 0; policy accept;
    ip daddr {DROPPING_BACKEND} tcp flags & (syn | ack) == syn drop
  }}
}}
"
        ))
    }

    /// Empties the node's conntrack table, so every round starts from the same state: the entries a
    /// round leaves (closed connects linger 10 s) would otherwise slow down the round after it, and
    /// the fastest round (no tracer) would always handicap the one that follows it.
    pub fn flush_conntrack(&self) -> anyhow::Result<()> {
        self.node.run("conntrack", &["-F"])
    }

    /// Connections the live listeners accepted so far.
    pub fn accepted(&self) -> u64 {
        self.listeners
            .iter()
            .map(|l| l.accepted.load(Ordering::Relaxed))
            .sum()
    }
}

/// Opens a namespace file and moves the calling thread into it.
pub fn enter(ns: &std::path::Path) -> anyhow::Result<()> {
    let file = File::open(ns).with_context(|| format!("opening {}", ns.display()))?;
    // SAFETY: setns(2) on a namespace fd we hold open; it moves only the calling thread.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        bail!(
            "setns into {}: {}",
            ns.display(),
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// A listener thread inside the backend namespace: accepts and closes at once, until dropped.
struct Listener {
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Listener {
    fn start(ns: &Netns, addr: SocketAddrV4) -> anyhow::Result<Listener> {
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicU64::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let path = ns.path();
        let (stop_t, accepted_t) = (Arc::clone(&stop), Arc::clone(&accepted));
        let thread = std::thread::Builder::new()
            .name("bench-listen".into())
            .spawn(move || {
                let listener = enter(&path).and_then(|()| {
                    let l = TcpListener::bind(addr)?;
                    l.set_nonblocking(true)?;
                    // std listens with a backlog of 128; a connect storm needs more.
                    // SAFETY: listen(2) on the socket we own, to raise its backlog.
                    unsafe { libc::listen(l.as_raw_fd(), 8192) };
                    Ok(l)
                });
                let listener = match listener {
                    Ok(l) => {
                        let _ = tx.send(Ok(()));
                        l
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                accept_loop(listener.as_raw_fd(), &stop_t, &accepted_t);
            })?;
        rx.recv().context("listener thread died")??;
        Ok(Listener {
            stop,
            accepted,
            thread: Some(thread),
        })
    }
}

fn accept_loop(fd: RawFd, stop: &AtomicBool, accepted: &AtomicU64) {
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll(2) on one pollfd we own; 100 ms so the stop flag is seen promptly.
        if unsafe { libc::poll(&raw mut pfd, 1, 100) } <= 0 {
            continue;
        }
        loop {
            // SAFETY: accept4(2) on our non-blocking listener; null address pointers are allowed.
            let conn = unsafe {
                libc::accept4(
                    fd,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                )
            };
            if conn < 0 {
                break;
            }
            // SAFETY: closing the fd accept4 just gave us.
            unsafe { libc::close(conn) };
            accepted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The sender's and the receiver's address in `Pair`.
pub const PAIR_SENDER: Ipv4Addr = Ipv4Addr::new(10, 232, 2, 1);
pub const PAIR_RECEIVER: Ipv4Addr = Ipv4Addr::new(10, 232, 2, 2);

/// Two namespaces joined by one veth pair, for bulk traffic between them, with no other link and
/// no route. Both ends send one MSS per packet (`gso_max_segs 1`): with segmentation offload a
/// veth carries 64 KiB per packet, and a per-packet hook would run once per 45 packets a NIC
/// puts on the wire.
pub struct Pair {
    pub sender: Netns,
    pub receiver: Netns,
}

impl Pair {
    pub fn new() -> anyhow::Result<Pair> {
        let pair = Pair {
            sender: Netns::new("s")?,
            receiver: Netns::new("r")?,
        };
        let (s, r) = (&pair.sender.name, &pair.receiver.name);
        ip(&[
            "-n", s, "link", "add", "p0", "type", "veth", "peer", "name", "p1", "netns", r,
        ])?;
        for (ns, dev, addr) in [(s, "p0", PAIR_SENDER), (r, "p1", PAIR_RECEIVER)] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "gso_max_segs", "1", "up"])?;
        }
        Ok(pair)
    }

    /// Packets through the sender's veth so far, both directions (data and acknowledgements).
    pub fn packets(&self) -> anyhow::Result<u64> {
        let out = Command::new("ip")
            .args(["-n", &self.sender.name, "-s", "-j", "link", "show", "p0"])
            .output()
            .context("running ip -s link")?;
        let links: serde_json::Value =
            serde_json::from_slice(&out.stdout).context("parsing ip -s -j link show p0")?;
        let stats = &links[0]["stats64"];
        let count = |dir: &str| stats[dir]["packets"].as_u64();
        count("tx")
            .zip(count("rx"))
            .map(|(tx, rx)| tx + rx)
            .context("ip -s -j link show p0 has no packet counts")
    }
}
