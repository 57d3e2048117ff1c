//! The cluster, live (#28): six node namespaces, one tracer each (`--metrics`, `--node-name`, the
//! same cluster state), Debian's Prometheus scraping them. Clients on node-1 and node-2 call Service
//! app/web through node-4's NodePort; node-4 DNATs to the pod on node-5 and SNATs to its own
//! address, so the pod's replies go back through node-4. Then node-4 drops the pod's replies: the
//! clients' nodes see black holes to node-4's address and port, node-5 sees its replies lost
//! towards node-4. `tracer sweep` joins both halves into one finding that names all of them, the
//! Cluster view in a real terminal (tmux) shows it while the fault lasts and lets it go once the
//! fault is removed, every panel of deploy/grafana-dashboard.json returns series, and no series
//! carries a client's port.
//!
//! The rest of the bed gives the Cluster view's other rows something to show: node-3 still holds
//! kube-proxy's rule to a deleted pod of Service app/db (a stale rule), and on node-6 a resolver
//! socket stays glued (by its conntrack entry) to a DNS pod that died while fresh sockets get
//! answers from the live one (incident 004's stuck socket).
//!
//! Prometheus, the six `--metrics` endpoints and the TUI's queries stay inside a "monitoring"
//! namespace (the tracers and the TUI run there with `nsenter --net`).
use std::{
    io::{Read as _, Write as _},
    net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket},
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tests::{
    cluster_bed::{ClusterBed, node_addr, pod_addr},
    prometheus::{Prometheus, nodes_of, query, wait_for},
    testbed::Netns,
    tmux::Tmux,
    tracer::{Tracer, tracer_bin},
};

const NODES: u8 = 6;
const NODE_PORT: u16 = 30080;
const POD_PORT: u16 = 8080;
const FIRST_METRICS_PORT: u16 = 9301;
/// Where the server pod runs, and the node whose NodePort the clients dial.
const SERVER_NODE: u8 = 5;
const INGRESS_NODE: u8 = 4;
const CLIENT_NODES: [u8; 2] = [1, 2];
const ANSWER_BYTES: usize = 16 * 1024;
/// Service app/db's cluster IP; node-3's stale rule sends it to a pod that is gone.
const DB_VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 235, 20);
const DB_PORT: u16 = 5432;
/// node-6's DNS Service address.
const DNS_VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 235, 53);

fn nodeport() -> SocketAddrV4 {
    SocketAddrV4::new(node_addr(INGRESS_NODE), NODE_PORT)
}

fn server_addr() -> SocketAddrV4 {
    SocketAddrV4::new(pod_addr(SERVER_NODE, 10), POD_PORT)
}

/// The cluster as the API would list it: six Ready nodes, the clients, the server pod web-1 of
/// NodePort Service app/web, and Service app/db whose one endpoint is pod db-1.
fn cluster_state(path: &std::path::Path) {
    let node = |n: u8| {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("node-{n}")},
               "spec": {"podCIDR": format!("10.235.{n}.0/24")},
               "status": {"addresses": [{"type": "InternalIP", "address": node_addr(n).to_string()}],
                          "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    let pod = |name: &str, n: u8, ip: Ipv4Addr, owner: &str, app: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "app", "uid": format!("uid-{name}"),
                            "labels": {"app": app},
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                 "name": owner, "uid": format!("uid-{owner}"),
                                                 "controller": true}]},
               "spec": {"nodeName": format!("node-{n}"), "containers": [{"name": "c", "image": "i:1"}]},
               "status": {"phase": "Running", "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}],
                          "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    let slice = |service: &str, ip: Ipv4Addr, port: u16, pod: &str| {
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
               "metadata": {"name": format!("{service}-x1"), "namespace": "app",
                            "labels": {"kubernetes.io/service-name": service}},
               "ports": [{"name": "", "port": port, "protocol": "TCP"}],
               "endpoints": [{"addresses": [ip.to_string()], "conditions": {"ready": true},
                              "targetRef": {"kind": "Pod", "namespace": "app", "name": pod}}]})
    };
    let mut items: Vec<Value> = (1..=NODES).map(node).collect();
    items.extend([
        pod("client-7d9f-a1", 1, pod_addr(1, 10), "client-7d9f", "client"),
        pod("client-7d9f-b2", 2, pod_addr(2, 10), "client-7d9f", "client"),
        pod("web-5c6b-x1", SERVER_NODE, *server_addr().ip(), "web-5c6b", "web"),
        pod("db-8f2a-x1", 3, pod_addr(3, 20), "db-8f2a", "db"),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "app"},
               "spec": {"type": "NodePort", "clusterIP": "10.96.235.10", "selector": {"app": "web"},
                        "ports": [{"port": 80, "targetPort": POD_PORT, "nodePort": NODE_PORT,
                                   "protocol": "TCP"}]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "namespace": "app"},
               "spec": {"clusterIP": DB_VIP.to_string(), "selector": {"app": "db"},
                        "ports": [{"port": DB_PORT, "protocol": "TCP"}]}}),
        slice("web", *server_addr().ip(), POD_PORT, "web-5c6b-x1"),
        slice("db", pod_addr(3, 20), DB_PORT, "db-8f2a-x1"),
    ]);
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    std::fs::write(path, list.to_string()).expect("cluster state");
}

/// kube-proxy's iptables rules on node-3 for app/db, still sending it to a pod that is gone.
fn stale_db_rules() -> String {
    let gone = SocketAddrV4::new(pod_addr(3, 99), DB_PORT);
    let (svc, sep) = ("KUBE-SVC-TBDB000000000000", "KUBE-SEP-TBDBGONE00000000");
    format!(
        "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:{svc} - [0:0]\n:{sep} - [0:0]\n\
         -A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
         -A KUBE-SERVICES -d {DB_VIP}/32 -p tcp -m comment --comment \"app/db cluster IP\" -m tcp --dport {DB_PORT} -j {svc}\n\
         -A {svc} -m comment --comment \"app/db -> {gone}\" -j {sep}\n\
         -A {sep} -p tcp -m comment --comment \"app/db\" -m tcp -j DNAT --to-destination {gone}\n\
         COMMIT\n"
    )
}

/// node-4's NodePort: DNAT to the pod on node-5, SNAT to node-4's own address (externalTrafficPolicy:
/// Cluster), so the pod's replies come back through node-4.
fn nodeport_rules() -> String {
    let (node, pod) = (node_addr(INGRESS_NODE), server_addr());
    format!(
        "table ip nodeport {{\n  chain prerouting {{\n    type nat hook prerouting priority dstnat;\n    \
         ip daddr {node} tcp dport {NODE_PORT} dnat to {pod}\n  }}\n  chain postrouting {{\n    \
         type nat hook postrouting priority srcnat;\n    ip daddr {ip} tcp dport {POD_PORT} ct status dnat snat to {node}\n  }}\n}}\n",
        ip = pod.ip()
    )
}

/// Serves on the pod until `stop`: each connection gets its answer, then waits for the client.
fn serve(pod: &Netns, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    let addr = SocketAddr::V4(server_addr());
    let listener = pod
        .run_in("cl-bind", move || TcpListener::bind(addr))
        .expect("the server listens");
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok((mut conn, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            std::thread::spawn(move || {
                let _ = conn.set_nonblocking(false);
                let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                let _ = conn.set_write_timeout(Some(Duration::from_secs(10)));
                let mut request = [0u8; 64];
                if conn.read(&mut request).is_ok_and(|n| n > 0) {
                    let _ = conn.write_all(&[b'x'; ANSWER_BYTES]);
                    let mut rest = [0u8; 1];
                    let _ = conn.read(&mut rest);
                }
            });
        }
    })
}

/// A client pod calling the NodePort over and over until `stop`; counts whole answers.
fn call(
    client: &Netns,
    name: &str,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicU64>,
) -> JoinHandle<()> {
    let to = SocketAddr::V4(nodeport());
    client.spawn_in(name, move || {
        while !stop.load(Ordering::Relaxed) {
            if let Ok(mut conn) = TcpStream::connect_timeout(&to, Duration::from_millis(1500)) {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                if conn.write_all(b"GET /").is_ok() {
                    let mut got = 0;
                    let mut buf = [0u8; 8192];
                    while got < ANSWER_BYTES {
                        match conn.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => got += n,
                        }
                    }
                    if got >= ANSWER_BYTES {
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    })
}

/// A DNS query for `web.test A`, as a resolver sends it.
fn dns_query(id: u16) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in ["web", "test"] {
        q.push(u8::try_from(label.len()).expect("short label"));
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// node-6's DNS Service: its address DNAT'd (kube-proxy style, on the node) to `backend`.
fn dns_service(node: &Netns, backend: Ipv4Addr) {
    node.nft(&format!(
        "table ip dns_svc {{\n  chain prerouting {{\n    type nat hook prerouting priority dstnat;\n  }}\n}}\n\
         flush chain ip dns_svc prerouting\n\
         add rule ip dns_svc prerouting ip daddr {DNS_VIP} udp dport 53 dnat to {backend}\n"
    ));
}

/// dnsmasq in `ns` answering `web.test` on `ip`; returns once it answers.
#[expect(
    clippy::zombie_processes,
    reason = "the Netns kills and reaps what it spawned when it drops"
)]
fn dnsmasq(ns: &Netns, ip: Ipv4Addr) {
    ns.spawn(&[
        "dnsmasq",
        "--no-daemon",
        "--conf-file=/dev/null",
        "--no-resolv",
        "--no-hosts",
        "--bind-interfaces",
        "--user=root",
        "--pid-file",
        "--address=/web.test/10.235.6.80",
        &format!("--listen-address={ip}"),
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ns.exec_ok(&[
        "dig",
        &format!("@{ip}"),
        "web.test",
        "A",
        "+short",
        "+tries=1",
        "+time=1",
    ]) {
        assert!(Instant::now() < deadline, "dnsmasq did not answer on {ip}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// node-6's resolver: one connected socket that keeps asking the DNS Service (glued by its
/// conntrack entry to the pod it first reached), and a fresh socket per question beside it (sent
/// where the Service points now), once a second until `stop`.
fn resolve(client: &Netns, glued: UdpSocket, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    client.spawn_in("cl-dns", move || {
        let mut id = 100;
        while !stop.load(Ordering::Relaxed) {
            let _ = glued.send(&dns_query(id));
            if let Ok(fresh) = UdpSocket::bind("0.0.0.0:0") {
                let _ = fresh.set_read_timeout(Some(Duration::from_millis(500)));
                if fresh.send_to(&dns_query(id + 1), (DNS_VIP, 53)).is_ok() {
                    let mut answer = [0u8; 512];
                    let _ = fresh.recv(&mut answer);
                }
            }
            id += 2;
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}

fn sweep(mon: &Netns, format: &str) -> String {
    let out = Command::new("nsenter")
        .arg(format!("--net={}", mon.path().display()))
        .arg(tracer_bin())
        .args([
            "sweep",
            "--prometheus",
            &Prometheus::url(),
            "--window",
            "2m",
        ])
        .args(["--format", format])
        .stdin(Stdio::null())
        .output()
        .expect("run tracer sweep");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "tracer sweep failed: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Every label value of every tracer series: none may be a client's address with its port.
fn assert_no_series_carries_a_client_port(mon: &Netns) {
    let all = query(mon, "{__name__=~\"tracer_.+\"}").expect("prometheus answers");
    assert!(all.len() > 50, "the tracers' series: {}", all.len());
    let clients: Vec<String> = CLIENT_NODES
        .iter()
        .map(|&n| format!("{}:", pod_addr(n, 10)))
        .collect();
    for series in &all {
        let labels = series["metric"].as_object().expect("labels");
        for (label, value) in labels {
            let value = value.as_str().unwrap_or_default();
            assert!(
                !clients.iter().any(|c| value.starts_with(c.as_str())),
                "{label}={value} carries a client's port: {series}"
            );
        }
    }
    let lost = query(mon, "tracer_replies_lost_total").expect("prometheus answers");
    assert!(!lost.is_empty(), "replies were lost");
    for series in &lost {
        assert_eq!(
            series["metric"]["local"],
            server_addr().to_string(),
            "only the server's own end: {series}"
        );
    }
}

/// Every target of every panel of the dashboard, with Grafana's variables given values, returns
/// series from this Prometheus.
fn assert_every_dashboard_panel_returns_series(mon: &Netns) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/grafana-dashboard.json"
    );
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the dashboard")).expect("JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 6, "the cluster picture as panels");
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or("?");
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{title}: no query");
        for target in targets {
            let expr = target["expr"].as_str().expect("expr");
            let promql = expr
                .replace("$__rate_interval", "20s")
                .replace("$__range", "2m")
                .replace("$__interval", "5s");
            assert!(
                !promql.replace("\"$1\"", "").contains('$'),
                "{title}: a variable the test does not fill: {promql}"
            );
            let result = wait_for(mon, &promql, Duration::from_secs(20), |r| !r.is_empty());
            assert!(
                !result.is_empty(),
                "panel {title:?} returns no series: {promql}"
            );
        }
    }
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario: a healthy cluster, the fault, its end, each seen through Prometheus"
)]
fn a_return_path_cut_through_a_nodeport_is_one_finding_across_six_nodes_live() {
    let mon = Netns::new("clmon");
    let bed = ClusterBed::new("cl", NODES);
    let (client1, _) = bed.pod(1, 10, "clc1");
    let (client2, _) = bed.pod(2, 10, "clc2");
    let (server, _) = bed.pod(SERVER_NODE, 10, "clsv");
    let (dns_client, _) = bed.pod(6, 10, "cldc");
    let (dead_dns, dead_dns_ip) = bed.pod(6, 53, "clds");
    let (live_dns, live_dns_ip) = bed.pod(6, 54, "cldl");
    dnsmasq(&live_dns, live_dns_ip);
    dead_dns.nft(
        "table inet dead_dns {\n  chain input {\n    type filter hook input priority 0;\n    \
         udp dport 53 drop\n  }\n}\n",
    );
    // The resolver's socket reaches the DNS pod that is about to die; then the Service moves on.
    dns_service(&bed.node(6).ns, dead_dns_ip);
    let glued = dns_client
        .run_in("cl-glue", || {
            let socket = UdpSocket::bind("0.0.0.0:0")?;
            socket.connect((DNS_VIP, 53))?;
            socket.send(&dns_query(1)).map(|_| socket)
        })
        .expect("the resolver's socket");
    dns_service(&bed.node(6).ns, live_dns_ip);
    // The server's kernel gives up on lost replies and handshakes in seconds, not minutes.
    server.exec(&[
        "sysctl",
        "-q",
        "-w",
        "net.ipv4.tcp_retries2=3",
        "net.ipv4.tcp_synack_retries=2",
    ]);
    bed.node(INGRESS_NODE).ns.nft(&nodeport_rules());
    bed.node(3).ns.iptables_restore(&stale_db_rules());

    let dir = TempDir::new("tracer-cluster-live");
    let state = dir.0.join("cluster.json");
    cluster_state(&state);
    let state_arg = state.to_str().expect("a UTF-8 path").to_string();

    let in_mon = format!("--net={}", mon.path().display());
    let wrapper = ["nsenter", in_mon.as_str()];
    let traced: Vec<(u8, &Netns)> = vec![
        (1, &client1),
        (2, &client2),
        (3, &bed.node(3).ns),
        (4, &bed.node(4).ns),
        (5, &server),
        (6, &dns_client),
    ];
    let tracers: Vec<Tracer> = traced
        .iter()
        .map(|&(n, netns)| {
            let node = format!("node-{n}");
            let metrics = format!("127.0.0.1:{}", FIRST_METRICS_PORT + u16::from(n) - 1);
            let mut args = vec![
                "--netns",
                netns.name(),
                "--conntrack-netns",
                bed.node(n).ns.name(),
                "--node-name",
                &node,
                "--metrics",
                &metrics,
                "--cluster-state",
                &state_arg,
            ];
            // DNS is followed where the DNS client is: the per-packet hooks of six tracers would
            // tax the whole machine.
            if n != 6 {
                args.push("--no-dns");
            }
            Tracer::start_wrapped(&wrapper, &args)
        })
        .collect();
    let targets: Vec<String> = (0..NODES)
        .map(|i| format!("127.0.0.1:{}", FIRST_METRICS_PORT + u16::from(i)))
        .collect();
    let mut prometheus = Prometheus::start(&mon, &targets);
    let all: Vec<String> = (1..=NODES).map(|n| format!("node-{n}")).collect();
    let scraped = wait_for(
        &mon,
        "max by (node) (tracer_build_info)",
        Duration::from_secs(60),
        |r| nodes_of(r) == all,
    );
    assert_eq!(
        nodes_of(&scraped),
        all,
        "Prometheus scrapes every node's tracer"
    );

    // A healthy cluster: both clients get their answers through node-4.
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let server_thread = serve(&server, Arc::clone(&stop));
    let clients = [
        call(
            &client1,
            "cl-client1",
            Arc::clone(&stop),
            Arc::clone(&answered),
        ),
        call(
            &client2,
            "cl-client2",
            Arc::clone(&stop),
            Arc::clone(&answered),
        ),
    ];
    let dns = resolve(&dns_client, glued, Arc::clone(&stop));
    let deadline = Instant::now() + Duration::from_secs(10);
    while answered.load(Ordering::Relaxed) < 10 {
        assert!(
            Instant::now() < deadline,
            "the clients get answers through the NodePort"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // The Cluster view, in a real terminal, from the same Prometheus.
    let tui = Tmux::start(
        "cluster",
        &format!(
            "nsenter {in_mon} {} tui --prometheus {} --cluster-only --cluster-window 30s \
             --cluster-refresh 2; echo exit=$?; sleep 60",
            tracer_bin(),
            Prometheus::url()
        ),
        140,
        32,
    );
    let screen = tui.wait_until(
        "the stale rule and the stuck resolver socket",
        Duration::from_secs(40),
        |s| s.contains("stale rule") && s.contains("1 stuck socket") && s.contains("6 nodes"),
    );
    eprintln!("the Cluster view before the fault:\n{screen}");
    assert!(
        screen.contains("CLUSTER") && screen.contains("Cluster"),
        "{screen}"
    );
    assert!(
        !screen.contains("half-open"),
        "nothing half-open yet:\n{screen}"
    );
    assert!(
        screen.contains(&format!("{DB_VIP}:{DB_PORT} -> {}", pod_addr(3, 99)))
            && screen.contains("node-3"),
        "node-3's stale rule:\n{screen}"
    );

    // The fault: node-4 drops what the pod sends back.
    let cut = format!(
        "table ip cut {{\n  chain prerouting {{\n    type filter hook prerouting priority raw;\n    \
         ip saddr {} drop\n  }}\n}}\n",
        server_addr().ip()
    );
    bed.node(INGRESS_NODE).ns.nft(&cut);
    let clients_half = format!(
        "sum by (node) (tracer_connects_total{{verdict=~\"abandoned|timed_out\",dst=\"{}\",\
         dst_service=\"app/web\",dst_node=\"node-{INGRESS_NODE}\",service=\"\",backend=\"\"}})",
        nodeport()
    );
    let seen = wait_for(&mon, &clients_half, Duration::from_secs(30), |r| {
        nodes_of(r) == ["node-1", "node-2"]
    });
    assert_eq!(
        nodes_of(&seen),
        ["node-1", "node-2"],
        "the clients' nodes see black holes"
    );
    let servers_half = format!(
        "sum by (node) (tracer_replies_lost_total{{local=\"{}\",local_service=\"app/web\",\
         peer_node=\"node-{INGRESS_NODE}\"}})",
        server_addr()
    );
    let seen = wait_for(&mon, &servers_half, Duration::from_secs(30), |r| {
        nodes_of(r) == ["node-5"]
    });
    assert_eq!(
        nodes_of(&seen),
        ["node-5"],
        "the server's node loses its replies towards node-4"
    );

    let screen = tui.wait_until("the half-open flow", Duration::from_secs(30), |s| {
        s.lines().any(|l| {
            l.contains("half-open")
                && l.contains("app/web")
                && l.contains(&format!("{} (node-5)", server_addr()))
                && l.contains("node-1")
                && l.contains("node-2")
                && l.contains("node-4")
        })
    });
    eprintln!("the Cluster view with the fault:\n{screen}");
    assert!(
        screen.lines().any(|l| l.starts_with(">half-open")),
        "the half-open flow ranks first:\n{screen}"
    );
    tui.keys(&["Enter"]);
    let detail = tui.wait_until("the detail with the PromQL", Duration::from_secs(10), |s| {
        s.contains("PromQL")
            && s.contains("tracer_replies_lost_total")
            && s.contains("tracer_connects_total")
    });
    eprintln!("its detail:\n{detail}");
    tui.keys(&["Escape"]);

    let text = sweep(&mon, "text");
    eprintln!("tracer sweep:\n{text}");
    let joined = format!(
        "app/web {} -> {} on node-5: black holes from 2 of 6 nodes: node-1, node-2; its replies \
         are lost towards node node-4",
        nodeport(),
        server_addr()
    );
    assert!(
        text.lines().any(|l| l == joined),
        "the sweep joins both halves:\n{text}"
    );
    let json: Value = serde_json::from_str(&sweep(&mon, "json")).expect("sweep --format json");
    let h = &json["half_open"][0];
    assert_eq!(h["service"], "app/web", "{json}");
    assert_eq!(h["dialed"], json!([nodeport().to_string()]), "{json}");
    assert_eq!(h["backend"], server_addr().to_string(), "{json}");
    assert_eq!(h["backend_nodes"][0]["node"], "node-5", "{json}");
    assert_eq!(h["peer_node"], "node-4", "{json}");
    let client_nodes: Vec<&str> = h["client_nodes"]
        .as_array()
        .expect("client nodes")
        .iter()
        .filter_map(|n| n["node"].as_str())
        .collect();
    assert_eq!(client_nodes, ["node-1", "node-2"], "{json}");
    assert!(
        json["replies_lost"].as_array().is_some_and(Vec::is_empty),
        "the server's half is in the joined finding, not apart: {json}"
    );

    assert_no_series_carries_a_client_port(&mon);
    assert_every_dashboard_panel_returns_series(&mon);

    // The fault removed: the clients get answers again, and the Cluster view lets the flow go once
    // it has not grown for its window.
    bed.node(INGRESS_NODE)
        .ns
        .exec(&["nft", "delete", "table", "ip", "cut"]);
    let before = answered.load(Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(15);
    while answered.load(Ordering::Relaxed) < before + 5 {
        assert!(Instant::now() < deadline, "the clients get answers again");
        std::thread::sleep(Duration::from_millis(100));
    }
    let screen = tui.wait_until("the half-open flow gone", Duration::from_secs(90), |s| {
        !s.contains("half-open") && s.contains("stale rule")
    });
    eprintln!("the Cluster view after the fault:\n{screen}");

    // A Prometheus that stops answering is one line in the header; the screen still answers keys
    // and keeps the last answer. Its refresh is 2 s: slow after that, failed after 6 s.
    prometheus.pause();
    let screen = tui.wait_until("Prometheus slow", Duration::from_secs(10), |s| {
        header_line(s).contains("Prometheus slow: no answer for")
    });
    assert!(
        screen.contains("stale rule"),
        "the last answer stays:\n{screen}"
    );
    tui.keys(&["?"]);
    tui.wait_until(
        "the help, while Prometheus hangs",
        Duration::from_secs(5),
        |s| s.contains("Keys (? or Esc closes)"),
    );
    tui.keys(&["Escape"]);
    let screen = tui.wait_until("the round given up", Duration::from_secs(15), |s| {
        header_line(s).contains("did not answer within 6s")
    });
    eprintln!("the Cluster view while Prometheus hangs:\n{screen}");
    prometheus.resume();
    tui.wait_until("an answer again", Duration::from_secs(15), |s| {
        header_line(s).contains("6 nodes, answered") && !header_line(s).contains("did not answer")
    });
    prometheus.stop();
    let screen = tui.wait_until("Prometheus unreachable", Duration::from_secs(15), |s| {
        header_line(s).contains("cannot reach Prometheus at http://127.0.0.1:9090")
    });
    assert!(
        screen.contains("stale rule"),
        "the last answer stays:\n{screen}"
    );

    tui.keys(&["q"]);
    let screen = tui.wait_until("the TUI's exit", Duration::from_secs(10), |s| {
        s.contains("exit=")
    });
    assert!(screen.contains("exit=0"), "q quits cleanly:\n{screen}");

    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().expect("client thread");
    }
    dns.join().expect("dns thread");
    server_thread.join().expect("server thread");
    drop(tracers);
    drop((dead_dns, live_dns));
}

/// The Cluster view's line about Prometheus (the header's second with `--cluster-only`).
fn header_line(screen: &str) -> &str {
    screen.lines().nth(1).unwrap_or("")
}

/// A directory of the test's, removed when the test ends, passing or not.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("test dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
