//! The demo's pods (a web server, a DNS server) and its client's light traffic, each a thread in
//! the demo's namespaces. Every loop ends soon after `stop` is set.
use std::{
    io,
    net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use super::{
    addresses::{
        DNS_DEAD, DNS_LIVE, DNS_SERVICE, NO_ENDPOINTS, NOT_LISTENING, WEB_DEAD, WEB_LIVE, WEB_PORT,
        WEB_SERVICE,
    },
    bed::{self, Bed, Services},
};
use crate::netns;

/// How long the client waits for a connect: the dead pod's connects end `abandoned` after it.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(1500);
/// One round of the client's traffic.
const ROUND: Duration = Duration::from_secs(2);

pub struct Traffic {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// Where the client's traffic goes: through the Services when their rules were built, else to the
/// pods themselves.
struct Destinations {
    connects: [SocketAddrV4; 3],
    /// A new socket per lookup, answered.
    lookups: SocketAddrV4,
    /// The resolver socket that stays on the deleted DNS pod.
    glued: SocketAddrV4,
}

impl Destinations {
    fn for_services(services: &Services) -> Destinations {
        let at = |(ip, port): (Ipv4Addr, u16)| SocketAddrV4::new(ip, port);
        match services {
            Services::Built => Destinations {
                connects: [at(WEB_SERVICE), at(NOT_LISTENING), at(NO_ENDPOINTS)],
                lookups: SocketAddrV4::new(DNS_SERVICE, 53),
                glued: SocketAddrV4::new(DNS_SERVICE, 53),
            },
            Services::Skipped(_) => Destinations {
                connects: [
                    SocketAddrV4::new(WEB_LIVE, WEB_PORT),
                    SocketAddrV4::new(WEB_DEAD, WEB_PORT),
                    at(NOT_LISTENING),
                ],
                lookups: SocketAddrV4::new(DNS_LIVE, 53),
                glued: SocketAddrV4::new(DNS_DEAD, 53),
            },
        }
    }
}

impl Traffic {
    /// Starts the pods, connects the resolver socket that will stay glued to the dead DNS pod
    /// (and, with the Services built, replaces that pod in its Service), then starts the client's
    /// loop.
    pub fn start(services: &Services) -> anyhow::Result<Traffic> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let web = in_namespace(Bed::pods_path(), "demo-web", {
            let stop = Arc::clone(&stop);
            move || web_server(&stop)
        })?;
        threads.push(web);
        threads.push(in_namespace(Bed::pods_path(), "demo-dns", {
            let stop = Arc::clone(&stop);
            move || dns_server(&stop)
        })?);
        let destinations = Destinations::for_services(services);
        // The glued socket: connected (and, through the Service, its conntrack entry made) while
        // the DNS pod it reaches is the one that is about to die.
        let (glued_tx, glued_rx) = std::sync::mpsc::channel();
        let dead_server = destinations.glued;
        let first = in_namespace(Bed::client_path(), "demo-resolver", move || {
            let socket = UdpSocket::bind("0.0.0.0:0").and_then(|s| {
                s.connect(dead_server)?;
                s.send(&query(1, "web.demo.svc.cluster.local"))?;
                Ok(s)
            });
            let _ = glued_tx.send(socket);
        })?;
        let _ = first.join();
        let glued = glued_rx
            .recv()
            .map_err(|_| anyhow::anyhow!("the demo's resolver thread ended early"))??;
        if *services == Services::Built {
            bed::replace_dns_pod()?;
        }
        threads.push(in_namespace(Bed::client_path(), "demo-client", {
            let stop = Arc::clone(&stop);
            move || client(&stop, &destinations, &glued)
        })?);
        Ok(Traffic { stop, threads })
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// A thread that runs `f` inside the namespace at `path` (only that thread moves).
fn in_namespace(
    path: std::path::PathBuf,
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> anyhow::Result<JoinHandle<()>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle =
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || match netns::enter(&path) {
                Ok(()) => {
                    let _ = ready_tx.send(Ok(()));
                    f();
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            })?;
    ready_rx
        .recv()
        .map_err(|_| anyhow::anyhow!("thread {name} ended early"))??;
    Ok(handle)
}

fn web_server(stop: &AtomicBool) {
    let Ok(listener) = TcpListener::bind(SocketAddrV4::new(WEB_LIVE, WEB_PORT)) else {
        return;
    };
    let _ = listener.set_nonblocking(true);
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => drop(conn),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Answers every query with an empty NOERROR reply: enough for a resolver, and for the tracer to
/// count it healthy.
fn dns_server(stop: &AtomicBool) {
    let Ok(socket) = UdpSocket::bind(SocketAddrV4::new(DNS_LIVE, 53)) else {
        return;
    };
    let _ = socket.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 512];
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, from)) = socket.recv_from(&mut buf)
            && n >= 12
        {
            let mut reply = buf[..n].to_vec();
            reply[2] |= 0x80; // QR: a response
            reply[3] = 0x80; // RA, rcode NOERROR
            let _ = socket.send_to(&reply, from);
        }
    }
}

/// Every round: a connect to each destination (through the Services: the web Service, where half
/// reach the dead pod, the pod that does not listen, the Service without endpoints), a lookup on a
/// new socket (answered), and one on the glued socket (lost).
fn client(stop: &AtomicBool, to: &Destinations, glued: &UdpSocket) {
    // Nothing ever comes back on it; it is only written to.
    let _ = glued.set_nonblocking(true);
    let mut id: u16 = 2;
    while !stop.load(Ordering::Relaxed) {
        let started = std::time::Instant::now();
        for dst in to.connects {
            let _ = TcpStream::connect_timeout(&SocketAddr::V4(dst), CONNECT_TIMEOUT);
        }
        id = id.wrapping_add(1);
        let _ = lookup_on_new_socket(to.lookups, id);
        let _ = glued.send(&query(id, "web.demo.svc.cluster.local"));
        std::thread::sleep(ROUND.saturating_sub(started.elapsed()));
    }
}

fn lookup_on_new_socket(server: SocketAddrV4, id: u16) -> io::Result<()> {
    let socket = UdpSocket::bind("0.0.0.0:0")?;
    socket.connect(server)?;
    socket.set_read_timeout(Some(Duration::from_millis(500)))?;
    socket.send(&query(id, "web.demo.svc.cluster.local"))?;
    socket.recv(&mut [0u8; 512]).map(drop)
}

/// A DNS query for an A record of `name`.
fn query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]); // RD; one question
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]); // root, type A, class IN
    q
}
