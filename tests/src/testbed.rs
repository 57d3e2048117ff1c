// (module of the `tests` crate)
//! Real network-namespace test beds for integration tests of an eBPF TCP flow tracer.
//!
//! Everything here needs root. All traffic stays inside namespaces created by this crate:
//! a [`Netns`] only has `lo` (and, for [`TwoHosts`], one veth pair whose both ends live in
//! freshly created namespaces), so there is no route to the machine's own network and no
//! link to the host namespace. Addresses are taken from `10.231.0.0/16`.
//!
//! Errors are reported by panicking with a clear message: callers are tests.

use std::fs::File;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

/// Every test namespace's name starts with this, then `{prefix}-{pid}-{n}`.
const NAME_MARK: &str = "tb-";

/// A test process killed before its `Drop`s ran (a CI timeout, SIGKILL) leaves its namespaces behind;
/// the next run removes those whose process is gone. Only names with our mark are touched.
fn remove_namespaces_of_dead_test_processes() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(rest) = name.strip_prefix(NAME_MARK) else {
            continue;
        };
        let mut parts = rest.rsplitn(3, '-');
        let (Some(_n), Some(pid), Some(_prefix)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

/// A veth pair: `eth0` in `ns`, its peer `peer` in `other`. Created inside `ns`, so it never
/// exists in the host namespace.
fn veth_pair(ns: &Netns, other: &Netns, peer: &str) {
    ns.ip(&[
        "link",
        "add",
        "eth0",
        "type",
        "veth",
        "peer",
        "name",
        peer,
        "netns",
        other.name(),
    ]);
}

/// Process-wide counter so namespace names (and bed subnets) are unique within the process.
static COUNTER: AtomicU32 = AtomicU32::new(0);

fn next_id() -> u32 {
    COUNTER.fetch_add(1, Ordering::Relaxed) + 1
}

/// Runs a command to completion, panicking with its stderr if it cannot start or fails.
fn run(cmd: &str, args: &[&str]) -> Output {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{cmd} {}`: {e}", args.join(" ")));
    if !out.status.success() {
        panic!(
            "`{cmd} {}` failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        );
    }
    out
}

/// A named network namespace (`ip netns add`), deleted on Drop (also kills any processes
/// spawned in it). Drop never panics, so clean-up also happens while a test is unwinding.
pub struct Netns {
    name: String,
    /// pidfds of processes started by [`Netns::spawn`]; pidfds (not pids) so that killing
    /// on drop cannot hit an unrelated process that reused a pid.
    children: Mutex<Vec<OwnedFd>>,
}

impl Netns {
    /// Creates `"{prefix}-{pid}-{counter}"` and brings its `lo` up.
    pub fn new(prefix: &str) -> Netns {
        static SWEEP: std::sync::Once = std::sync::Once::new();
        SWEEP.call_once(remove_namespaces_of_dead_test_processes);
        let name = format!("{NAME_MARK}{prefix}-{}-{}", std::process::id(), next_id());
        run("ip", &["netns", "add", &name]);
        // Construct before further setup so a failure below still deletes the namespace.
        let ns = Netns {
            name,
            children: Mutex::new(Vec::new()),
        };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// The namespace name as known to `ip netns`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bind-mounted namespace file, `/run/netns/NAME`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.name)
    }

    /// Runs `ip -n NAME args..` (links, addresses, routes of this namespace); panics with the
    /// command's stderr on failure.
    pub fn ip(&self, args: &[&str]) -> Output {
        let mut full = vec!["-n", &self.name];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    fn exec_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).args(args);
        cmd
    }

    /// Runs `ip netns exec NAME args..`; panics with the command's stderr on failure.
    pub fn exec(&self, args: &[&str]) -> Output {
        let mut full = vec!["netns", "exec", &self.name];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// Like [`Netns::exec`] but reports success instead of panicking.
    pub fn exec_ok(&self, args: &[&str]) -> bool {
        self.exec_cmd(args)
            .stdin(Stdio::null())
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    }

    /// Starts a background process in the namespace (stdio null). It is killed (SIGKILL) and
    /// reaped when this `Netns` is dropped, even if the caller still holds the `Child`, so a
    /// later `Child::wait` returns an error; wait before the drop if the status matters.
    pub fn spawn(&self, args: &[&str]) -> Child {
        let child = self
            .exec_cmd(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {args:?} in netns {}: {e}", self.name));
        // SAFETY: plain syscall with a pid we own (unreaped child), no pointers involved.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) };
        if fd < 0 {
            panic!(
                "pidfd_open({}): {}",
                child.id(),
                std::io::Error::last_os_error()
            );
        }
        // SAFETY: pidfd_open returned a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        self.children
            .lock()
            .expect("children list poisoned")
            .push(fd);
        child
    }

    /// Applies an nftables script (`nft -f -`) inside the namespace; panics with stderr on failure.
    pub fn nft(&self, script: &str) {
        self.feed("nft", &["nft", "-f", "-"], script);
    }

    /// Replaces the tables `iptables-save` format names (`*nat ... COMMIT`) with `rules`
    /// (`iptables-restore`, the nf_tables backend Debian ships); panics with stderr on failure.
    pub fn iptables_restore(&self, rules: &str) {
        self.feed("iptables-restore", &["iptables-restore"], rules);
    }

    /// Runs `args` in the namespace with `input` on its stdin; panics with its stderr on failure.
    fn feed(&self, what: &str, args: &[&str], input: &str) {
        let mut child = self
            .exec_cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {what} in netns {}: {e}", self.name));
        child
            .stdin
            .take()
            .expect("stdin was requested as piped")
            .write_all(input.as_bytes())
            .unwrap_or_else(|e| panic!("writing the input to {what}'s stdin: {e}"));
        let out = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("waiting for {what}: {e}"));
        if !out.status.success() {
            panic!(
                "{what} failed in netns {} ({}): {}\ninput:\n{input}",
                self.name,
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }

    /// Runs `f` on a new OS thread named `thread_name` (its comm) that has `setns()`'d into
    /// this namespace, and returns `f`'s result. The thread belongs to the test process, so
    /// sockets it opens are attributed to `std::process::id()` with comm `thread_name`.
    /// A panic inside `f` is re-raised in the caller.
    pub fn run_in<T: Send + 'static>(
        &self,
        thread_name: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> T {
        let ns_file = self.open_ns_file();
        let handle = spawn_in_ns(ns_file, thread_name, f);
        match handle.join() {
            Ok(v) => v,
            Err(payload) => std::panic::resume_unwind(payload),
        }
    }

    /// Like `run_in`, but returns at once with the thread's handle: for a connect that is meant to
    /// hang while the test watches what the tracer reports.
    pub fn spawn_in<T: Send + 'static>(
        &self,
        thread_name: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> JoinHandle<T> {
        spawn_in_ns(self.open_ns_file(), thread_name, f)
    }

    fn open_ns_file(&self) -> File {
        File::open(self.path())
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.path().display()))
    }
}

/// Spawns a named thread that enters the namespace `ns_file` before running `f`.
fn spawn_in_ns<T: Send + 'static>(
    ns_file: File,
    thread_name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    assert!(
        !thread_name.is_empty() && thread_name.len() <= 15,
        "thread name {thread_name:?} must be 1..=15 bytes to be the exact comm"
    );
    std::thread::Builder::new()
        .name(thread_name.to_string())
        .spawn(move || {
            // SAFETY: setns on a valid, open namespace fd; affects only this thread.
            let rc = unsafe { libc::setns(ns_file.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc != 0 {
                panic!("setns(CLONE_NEWNET): {}", std::io::Error::last_os_error());
            }
            drop(ns_file);
            f()
        })
        .expect("spawning a namespace thread")
}

impl Drop for Netns {
    fn drop(&mut self) {
        let own = std::process::id() as i32;
        // Kill what we spawned, and reap it (waitid on the pidfd only reaps that very child).
        let children = match self.children.get_mut() {
            Ok(c) => std::mem::take(c),
            Err(p) => std::mem::take(p.into_inner()),
        };
        for fd in children {
            // SAFETY: syscalls on a pidfd we own; null siginfo pointers are allowed.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
                let mut info: libc::siginfo_t = std::mem::zeroed();
                libc::waitid(
                    libc::P_PIDFD,
                    fd.as_raw_fd() as libc::id_t,
                    &mut info,
                    libc::WEXITED,
                );
            }
        }
        // Anything else still living in the namespace (e.g. started via exec and detached).
        if let Ok(out) = Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
        {
            for pid in String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
                .filter(|&p| p != own)
            {
                // SAFETY: plain kill syscall.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        match Command::new("ip")
            .args(["netns", "del", &self.name])
            .output()
        {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!(
                "testbed: `ip netns del {}` failed: {}",
                self.name,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => eprintln!("testbed: cannot run `ip netns del {}`: {e}", self.name),
        }
    }
}

/// Two namespaces joined by a veth pair (`eth0` in each) on `10.231.N.0/24`:
/// client `.1`, server `.2`, and `absent_ip` `.99` with no host behind it.
/// The veth is created inside the client namespace with its peer created directly in the
/// server namespace, so it never exists in the host namespace; it vanishes with them.
pub struct TwoHosts {
    pub client: Netns,
    pub server: Netns,
    pub client_ip: Ipv4Addr,
    pub server_ip: Ipv4Addr,
    pub absent_ip: Ipv4Addr,
}

impl TwoHosts {
    /// Builds the bed; namespaces are named `{prefix}c-…` and `{prefix}s-…`.
    pub fn new(prefix: &str) -> TwoHosts {
        let client = Netns::new(&format!("{prefix}c"));
        let server = Netns::new(&format!("{prefix}s"));
        // Namespaces isolate addresses, so N only needs to be distinct within the process
        // for readable traces.
        let n = (next_id() % 250 + 1) as u8;
        let client_ip = Ipv4Addr::new(10, 231, n, 1);
        let server_ip = Ipv4Addr::new(10, 231, n, 2);
        let absent_ip = Ipv4Addr::new(10, 231, n, 99);
        veth_pair(&client, &server, "eth0");
        for (ns, ip) in [(&client, client_ip), (&server, server_ip)] {
            // Kernel-default neighbour parameters so an absent host fails ARP after 3 probes
            // 1 s apart (EHOSTUNREACH after ~3 s) regardless of what the host has tuned: a
            // new device copies init_net's `neigh.default` values, and non-init namespaces
            // have no `neigh.default` of their own, so set them on the device itself.
            ns.exec(&[
                "sysctl",
                "-q",
                "-w",
                "net.ipv4.neigh.eth0.mcast_solicit=3",
                "net.ipv4.neigh.eth0.ucast_solicit=3",
                "net.ipv4.neigh.eth0.app_solicit=0",
                "net.ipv4.neigh.eth0.mcast_resolicit=0",
                "net.ipv4.neigh.eth0.retrans_time_ms=1000",
            ]);
            let cidr = format!("{ip}/24");
            ns.ip(&["addr", "add", &cidr, "dev", "eth0"]);
            ns.ip(&["link", "set", "eth0", "up"]);
        }
        TwoHosts {
            client,
            server,
            client_ip,
            server_ip,
            absent_ip,
        }
    }

    /// Adds IPv6 addresses on the link (a ULA /64, without duplicate address detection so they
    /// are usable at once); returns the client's and the server's.
    pub fn add_ipv6(&self) -> (std::net::Ipv6Addr, std::net::Ipv6Addr) {
        let [_, _, n, _] = self.client_ip.octets();
        let client = std::net::Ipv6Addr::new(0xfd00, 0x231, u16::from(n), 0, 0, 0, 0, 1);
        let server = std::net::Ipv6Addr::new(0xfd00, 0x231, u16::from(n), 0, 0, 0, 0, 2);
        for (ns, ip) in [(&self.client, client), (&self.server, server)] {
            ns.exec(&["sysctl", "-q", "-w", "net.ipv6.conf.eth0.disable_ipv6=0"]);
            let cidr = format!("{ip}/64");
            ns.ip(&["-6", "addr", "add", &cidr, "dev", "eth0", "nodad"]);
        }
        (client, server)
    }
}

/// A kube-proxy style node: a "node" namespace with a bridge and nft DNAT rules for Service
/// addresses, and pod namespaces on the bridge (a client and some backends), with `br_netfilter`
/// semantics so replies between pods on the same bridge pass through the node's conntrack (un-DNAT).
///
/// Service addresses (`vip`) exist only in the node's DNAT rules; the client routes only the Service
/// range to the node. No namespace has any other route: traffic never leaves the bed.
pub struct ServiceBed {
    pub node: Netns,
    pub client: Netns,
    pub backends: Vec<Netns>,
    pub client_ip: Ipv4Addr,
    pub backend_ips: Vec<Ipv4Addr>,
    /// A Service address for this bed, in 10.96.N.0/24.
    pub vip: Ipv4Addr,
}

impl ServiceBed {
    pub fn new(prefix: &str, backends: usize) -> ServiceBed {
        ServiceBed::on_subnet(prefix, backends, (next_id() % 250 + 1) as u8)
    }

    /// Like `new`, on `10.231.N.0/24` with Service address `10.96.N.10`: beds built with the same
    /// `n` are nodes of one cluster (the same Service and pod addresses, each node its own rules).
    pub fn on_subnet(prefix: &str, backends: usize, n: u8) -> ServiceBed {
        let node = Netns::new(&format!("{prefix}n"));
        let node_ip = Ipv4Addr::new(10, 231, n, 1);
        node.ip(&["link", "add", "br0", "type", "bridge"]);
        node.exec(&["sysctl", "-q", "-w", "net.ipv4.conf.br0.send_redirects=0"]);
        node.ip(&["addr", "add", &format!("{node_ip}/24"), "dev", "br0"]);
        node.ip(&["link", "set", "br0", "up"]);
        node.exec(&[
            "sysctl",
            "-q",
            "-w",
            "net.ipv4.ip_forward=1",
            "net.bridge.bridge-nf-call-iptables=1",
            // Service traffic leaves a real node by another interface than it came in; here it comes
            // back out of br0, which would make the node send ICMP redirects and then rate-limit the
            // REJECT's port-unreachable to the same pod.
            "net.ipv4.conf.all.send_redirects=0",
            "net.ipv4.conf.default.send_redirects=0",
            "net.ipv4.icmp_ratelimit=0",
        ]);
        let pod = |name: String, index: u8| -> (Netns, Ipv4Addr) {
            let ns = Netns::new(&name);
            let ip = Ipv4Addr::new(10, 231, n, index);
            let host_side = format!("veth{index}");
            veth_pair(&ns, &node, &host_side);
            node.ip(&["link", "set", &host_side, "master", "br0", "up"]);
            ns.ip(&["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
            ns.ip(&["link", "set", "eth0", "up"]);
            (ns, ip)
        };
        let (client, client_ip) = pod(format!("{prefix}c"), 10);
        let mut backend_namespaces = Vec::new();
        let mut backend_ips = Vec::new();
        for i in 0..backends {
            let (ns, ip) = pod(format!("{prefix}b{i}"), 11 + i as u8);
            backend_namespaces.push(ns);
            backend_ips.push(ip);
        }
        let vip = Ipv4Addr::new(10, 96, n, 10);
        let service_range = format!("10.96.{n}.0/24");
        client.ip(&["route", "add", &service_range, "via", &node_ip.to_string()]);
        // A real node routes Service addresses somewhere (its default route), so a SYN that no DNAT
        // rewrote reaches kube-proxy's REJECT in FORWARD. Here "somewhere" is on-link on the bridge:
        // FORWARD runs before any neighbour lookup, and the bridge is inside the bed.
        node.ip(&["route", "add", &service_range, "dev", "br0"]);
        ServiceBed {
            node,
            client,
            backends: backend_namespaces,
            client_ip,
            backend_ips,
            vip,
        }
    }

    /// An address on a routed link (a veth, not the bridge) where no host answers neighbour
    /// discovery: a node that is gone, as a stale datapath may still send to it. Returns the address
    /// and the namespace at the link's other end (it has no address, so it answers nothing).
    pub fn gone_host(&self, name: &str) -> (Ipv4Addr, Netns) {
        let n = self.vip.octets()[2];
        let gone = Netns::new(name);
        veth_pair(&gone, &self.node, "vethgone");
        gone.ip(&["link", "set", "eth0", "up"]);
        self.node.ip(&["link", "set", "vethgone", "up"]);
        self.node.ip(&[
            "route",
            "add",
            &format!("10.232.{n}.0/24"),
            "dev",
            "vethgone",
        ]);
        (Ipv4Addr::new(10, 232, n, 99), gone)
    }

    /// kube-proxy's rules for Service `vip:port`: DNAT to one of `endpoints` at random with equal
    /// shares, or, with no endpoints, REJECT with ICMP port-unreachable.
    pub fn service(&self, port: u16, endpoints: &[(Ipv4Addr, u16)]) {
        let vip = self.vip;
        let script = if endpoints.is_empty() {
            format!(
                "table inet svc_{port} {{\n  chain forward {{\n    type filter hook forward priority 0;\n    \
                 ip daddr {vip} tcp dport {port} reject with icmp type port-unreachable\n  }}\n}}\n"
            )
        } else {
            let map: Vec<String> = endpoints
                .iter()
                .enumerate()
                .map(|(i, (ip, p))| format!("{i} : {ip} . {p}"))
                .collect();
            format!(
                "table ip svc_{port} {{\n  chain prerouting {{\n    type nat hook prerouting priority dstnat;\n    \
                 ip daddr {vip} tcp dport {port} dnat ip to numgen random mod {} map {{ {} }}\n  }}\n}}\n",
                endpoints.len(),
                map.join(", ")
            )
        };
        self.node.nft(&script);
    }
}

/// A TCP listener inside a namespace, on its own thread, that accepts connections and drops
/// them immediately (the server app closes) until the `Listener` is dropped.
pub struct Listener {
    addr: SocketAddrV4,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Listener {
    /// Binds `addr` inside `ns` and returns once the socket is listening.
    pub fn start(ns: &Netns, addr: SocketAddrV4) -> Listener {
        let stop = Arc::new(AtomicBool::new(false));
        let stop_thread = Arc::clone(&stop);
        let (tx, rx) = mpsc::channel();
        let thread = spawn_in_ns(ns.open_ns_file(), "tb-listener", move || {
            let listener = match TcpListener::bind(addr) {
                Ok(l) => l,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            // Non-blocking so the loop can notice `stop`; accepted sockets are blocking.
            if let Err(e) = listener.set_nonblocking(true) {
                let _ = tx.send(Err(e));
                return;
            }
            let _ = tx.send(Ok(()));
            while !stop_thread.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => drop(conn),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        match rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("listener bind {addr} in netns {}: {e}", ns.name()),
            Err(_) => panic!("listener thread for {addr} in netns {} died", ns.name()),
        }
        Listener {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    /// The address the listener is bound to.
    pub fn addr(&self) -> SocketAddrV4 {
        self.addr
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            eprintln!("testbed: listener thread for {} panicked", self.addr);
        }
    }
}

/// Connects from inside `ns` on a thread named `comm` with `TcpStream::connect_timeout`,
/// then drops the stream at once (the app closes the socket). Returns the connect result.
pub fn connect_from(
    ns: &Netns,
    comm: &str,
    to: SocketAddr,
    timeout: Duration,
) -> std::io::Result<()> {
    ns.run_in(comm, move || {
        TcpStream::connect_timeout(&to, timeout).map(drop)
    })
}

/// Server input chain drops TCP SYNs to `port` (a "dead pod" that still answers ARP).
pub fn nft_drop_syn_to(port: u16) -> String {
    format!(
        "table inet tb_dropsyn_{port} {{
  chain input {{
    type filter hook input priority 0; policy accept;
    tcp dport {port} tcp flags & (syn | ack) == syn drop
  }}
}}
"
    )
}

/// Server input chain answers TCP to `port` with ICMP port-unreachable (client: ECONNREFUSED).
pub fn nft_reject_icmp_port_unreachable(port: u16) -> String {
    format!(
        "table inet tb_reject_{port} {{
  chain input {{
    type filter hook input priority 0; policy accept;
    meta nfproto ipv4 tcp dport {port} reject with icmp type port-unreachable
  }}
}}
"
    )
}

/// Server input chain drops only the first IPv4 SYN to `port` from each source address and
/// accepts later ones, so a client connects after its first SYN retransmission (~1 s).
pub fn nft_drop_first_syn(port: u16) -> String {
    format!(
        "table inet tb_firstsyn_{port} {{
  set seen {{
    type ipv4_addr
    flags dynamic
  }}
  chain input {{
    type filter hook input priority 0; policy accept;
    tcp dport {port} tcp flags & (syn | ack) == syn ip saddr @seen accept
    tcp dport {port} tcp flags & (syn | ack) == syn add @seen {{ ip saddr }} drop
  }}
}}
"
    )
}

/// externalTrafficPolicy: Cluster, in three namespaces: a client, an "ingress node" that takes the
/// client's connects on a NodePort address, DNATs them to a pod and SNATs them to its own address on
/// the pod's link (so the replies come back through it), and the server pod. Nothing routes out.
pub struct ReturnPathBed {
    pub client: Netns,
    pub ingress: Netns,
    pub pod: Netns,
    /// The NodePort address the client connects to (on the ingress node).
    pub node_port: SocketAddrV4,
    /// The pod's address and port, where the server listens.
    pub pod_addr: SocketAddrV4,
    /// The ingress node's address on the pod's link: the SNAT address the server sees.
    pub snat_ip: Ipv4Addr,
    pub client_ip: Ipv4Addr,
}

impl ReturnPathBed {
    pub fn new(prefix: &str) -> ReturnPathBed {
        let n = (next_id() % 250 + 1) as u8;
        let client = Netns::new(&format!("{prefix}c"));
        let ingress = Netns::new(&format!("{prefix}i"));
        let pod = Netns::new(&format!("{prefix}p"));
        let client_ip = Ipv4Addr::new(10, 233, n, 2);
        let node_ip = Ipv4Addr::new(10, 233, n, 1);
        let snat_ip = Ipv4Addr::new(10, 234, n, 1);
        let pod_ip = Ipv4Addr::new(10, 234, n, 2);
        veth_pair(&client, &ingress, "vclient");
        veth_pair(&pod, &ingress, "vpod");
        let addr = |ns: &Netns, dev: &str, ip: Ipv4Addr| {
            ns.ip(&["addr", "add", &format!("{ip}/24"), "dev", dev]);
            ns.ip(&["link", "set", dev, "up"]);
        };
        addr(&client, "eth0", client_ip);
        addr(&ingress, "vclient", node_ip);
        addr(&ingress, "vpod", snat_ip);
        addr(&pod, "eth0", pod_ip);
        // The pod answers whatever reaches it back through the ingress node (its default route).
        pod.ip(&["route", "add", "default", "via", &snat_ip.to_string()]);
        ingress.exec(&["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
        let node_port = SocketAddrV4::new(node_ip, 30080);
        let pod_addr = SocketAddrV4::new(pod_ip, 8080);
        ingress.nft(&format!(
            "table ip nodeport {{\n  chain prerouting {{\n    type nat hook prerouting priority dstnat;\n    \
             ip daddr {node_ip} tcp dport 30080 dnat to {pod_addr}\n  }}\n  chain postrouting {{\n    \
             type nat hook postrouting priority srcnat;\n    ip daddr {pod_ip} tcp dport 8080 snat to {snat_ip}\n  }}\n}}\n"
        ));
        ReturnPathBed {
            client,
            ingress,
            pod,
            node_port,
            pod_addr,
            snat_ip,
            client_ip,
        }
    }

    /// Cuts the return path on the ingress node: what the pod sends is dropped there, before the
    /// node's conntrack sees it.
    pub fn cut_return_path(&self) {
        let pod_ip = self.pod_addr.ip();
        self.ingress.nft(&format!(
            "table ip cut {{\n  chain prerouting {{\n    type filter hook prerouting priority raw;\n    \
             ip saddr {pod_ip} drop\n  }}\n}}\n"
        ));
    }

    /// Cuts the return path in the ingress node's forward chain: its conntrack sees what the pod
    /// sends (a SYN-ACK marks the entry replied), then it is dropped.
    pub fn cut_return_path_after_conntrack(&self) {
        let pod_ip = self.pod_addr.ip();
        self.ingress.nft(&format!(
            "table ip cut {{\n  chain forward {{\n    type filter hook forward priority filter;\n    \
             ip saddr {pod_ip} drop\n  }}\n}}\n"
        ));
    }
}
