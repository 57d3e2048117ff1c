//! Cluster-wide through a real Prometheus (#16): ten "nodes", each a kube-proxy style node namespace
//! with its own client, backends and DNAT rules for one Service; three of them still DNAT the
//! Service to a dead backend (stale Service maps, incident 000). One tracer per node, scoped to that
//! node's namespaces, each with its `--node-name` and `--metrics`; Debian's Prometheus scrapes all
//! ten. Prometheus and the ten endpoints listen only inside a "monitoring" namespace the test makes
//! (the tracers run there with `nsenter --net`, and still trace the nodes' namespaces).
//!
//! Every tracer reads the same cluster state (`--cluster-state`): the Service's only endpoint is the
//! live pod, the dead backend's pod is gone, so the stale nodes' black holes carry `backend is no
//! live pod`.
//!
//! Asserted through Prometheus's HTTP API: the black hole is seen from exactly the three stale
//! nodes, the seven others see the Service healthy; and `tracer sweep` prints the 3-of-10 line.
use std::{
    io::{Read as _, Write as _},
    net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::{Value, json};
use tests::{
    testbed::{Listener, Netns, ServiceBed, nft_drop_syn_to},
    tracer::{Tracer, tracer_bin},
};

const NODES: usize = 10;
const STALE: [usize; 3] = [3, 7, 9];
/// The cluster's subnet: every node's bed has the same Service and pod addresses.
const SUBNET: u8 = 203;
const SVC_PORT: u16 = 80;
const POD_PORT: u16 = 8080;
const PROMETHEUS_PORT: u16 = 9090;
const FIRST_METRICS_PORT: u16 = 9201;

/// One HTTP GET inside `ns` (to Prometheus's API there); the body.
fn http_get(ns: &Netns, port: u16, path: String) -> String {
    let request = path.clone();
    ns.run_in("tb-http", move || {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("connect {addr}: {e}"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .map_err(|e| e.to_string())?;
        write!(
            stream,
            "GET {request} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\n\r\n"
        )
        .map_err(|e| e.to_string())?;
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .map_err(|e| e.to_string())?;
        Ok::<String, String>(
            answer
                .split_once("\r\n\r\n")
                .map(|(_, body)| body.to_string())
                .unwrap_or_default(),
        )
    })
    .unwrap_or_else(|e| panic!("GET {path} on port {port}: {e}"))
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// An instant query's result vector, or `None` while Prometheus is not ready.
fn query(mon: &Netns, promql: &str) -> Option<Vec<Value>> {
    let body = http_get(
        mon,
        PROMETHEUS_PORT,
        format!("/api/v1/query?query={}", encode(promql)),
    );
    let answer: Value = serde_json::from_str(&body).ok()?;
    assert_eq!(answer["status"], "success", "query {promql}: {answer}");
    answer["data"]["result"].as_array().cloned()
}

/// The `node` labels of a result whose value is above 0, sorted like node-1 .. node-10.
fn nodes_of(result: &[Value]) -> Vec<String> {
    let mut nodes: Vec<String> = result
        .iter()
        .filter(|s| {
            s["value"][1]
                .as_str()
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(|v| v > 0.0)
        })
        .map(|s| s["metric"]["node"].as_str().unwrap_or("").to_string())
        .collect();
    nodes.sort_by_key(|n| n.trim_start_matches("node-").parse::<usize>().unwrap_or(0));
    nodes
}

/// Polls `promql` until its nodes are `want` (or the deadline passes); returns the last nodes.
fn wait_for_nodes(mon: &Netns, promql: &str, want: &[String], within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    loop {
        let nodes = query(mon, promql).map(|r| nodes_of(&r)).unwrap_or_default();
        if nodes == want || Instant::now() > deadline {
            return nodes;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `n` connects to the Service from the node's client, 10 at a time, each giving up after 1.5 s.
fn connect_many(bed: &ServiceBed, n: usize) {
    let vip = SocketAddr::from(SocketAddrV4::new(bed.vip, SVC_PORT));
    for _ in 0..n.div_ceil(10) {
        let handles: Vec<_> = (0..10)
            .map(|i| {
                bed.client.spawn_in(&format!("tc-prom-{i}"), move || {
                    TcpStream::connect_timeout(&vip, Duration::from_millis(1500)).is_ok()
                })
            })
            .collect();
        for h in handles {
            h.join().expect("client thread");
        }
    }
}

/// The cluster as the API sees it now: pod `frontend` (the client), pod `backend-live`, Service
/// `app/backend` whose EndpointSlice lists only the live pod. The dead backend's pod is gone.
fn cluster_state(bed: &ServiceBed, live: SocketAddrV4, path: &std::path::Path) {
    let pod = |name: &str, ip: Ipv4Addr, owner: &str, labels: Value| {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "app", "uid": format!("uid-{name}"), "labels": labels,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                                              "uid": format!("uid-{owner}"), "controller": true}]},
            "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "app:1"}]},
            "status": {"phase": "Running", "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}],
                       "conditions": [{"type": "Ready", "status": "True"}]}
        })
    };
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        pod("frontend-6b8f7c9d4-x7k2p", bed.client_ip, "frontend-6b8f7c9d4",
            json!({"app": "frontend", "pod-template-hash": "6b8f7c9d4"})),
        pod("backend-5f8d7c6b4-live1", *live.ip(), "backend-5f8d7c6b4",
            json!({"app": "backend", "pod-template-hash": "5f8d7c6b4"})),
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "backend", "namespace": "app"},
         "spec": {"type": "ClusterIP", "clusterIP": bed.vip.to_string(), "selector": {"app": "backend"},
                  "ports": [{"port": SVC_PORT, "targetPort": POD_PORT, "protocol": "TCP"}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
         "metadata": {"name": "backend-q7w2n", "namespace": "app",
                      "labels": {"kubernetes.io/service-name": "backend"}},
         "ports": [{"name": "", "port": POD_PORT, "protocol": "TCP"}],
         "endpoints": [{"addresses": [live.ip().to_string()],
                        "conditions": {"ready": true, "serving": true, "terminating": false},
                        "targetRef": {"kind": "Pod", "namespace": "app", "name": "backend-5f8d7c6b4-live1",
                                      "uid": "uid-backend-5f8d7c6b4-live1"}}]}
    ]});
    std::fs::write(path, serde_json::to_string_pretty(&list).expect("json"))
        .expect("cluster state");
}

fn node_names(range: impl Iterator<Item = usize>) -> Vec<String> {
    range.map(|i| format!("node-{i}")).collect()
}

#[test]
fn prometheus_sees_the_black_hole_from_exactly_the_three_stale_nodes_and_sweep_says_so() {
    let version = Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    assert!(
        version.is_ok_and(|s| s.success()),
        "prometheus is not installed: `cargo xtask setup` installs it (the Debian package \
         `prometheus`)"
    );
    let mon = Netns::new("mon");
    let beds: Vec<ServiceBed> = (1..=NODES)
        .map(|i| ServiceBed::on_subnet(&format!("p{i}"), 2, SUBNET))
        .collect();
    let live = SocketAddrV4::new(beds[0].backend_ips[0], POD_PORT);
    let dead = SocketAddrV4::new(beds[0].backend_ips[1], POD_PORT);
    let vip = SocketAddrV4::new(beds[0].vip, SVC_PORT);
    let mut listeners = Vec::new();
    for (i, bed) in (1..=NODES).zip(&beds) {
        listeners.push(Listener::start(&bed.backends[0], live));
        bed.backends[1].nft(&nft_drop_syn_to(POD_PORT));
        if STALE.contains(&i) {
            // Stale Service maps: the deleted pod is still one of the endpoints here.
            bed.service(SVC_PORT, &[(*live.ip(), POD_PORT), (*dead.ip(), POD_PORT)]);
        } else {
            bed.service(SVC_PORT, &[(*live.ip(), POD_PORT)]);
        }
    }

    let dir = std::env::temp_dir().join(format!("tracer-prometheus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("prometheus dir");
    let state = dir.join("cluster.json");
    cluster_state(&beds[0], live, &state);
    let state_arg = state.to_str().expect("a UTF-8 path");

    let in_mon = format!("--net={}", mon.path().display());
    let wrapper = ["nsenter", in_mon.as_str()];
    let tracers: Vec<Tracer> = (1..=NODES)
        .zip(&beds)
        .map(|(i, bed)| {
            let node = format!("node-{i}");
            let port = FIRST_METRICS_PORT + i as u16 - 1;
            let metrics = format!("127.0.0.1:{port}");
            Tracer::start_wrapped(
                &wrapper,
                &[
                    "--no-dns",
                    "--netns",
                    bed.client.name(),
                    "--conntrack-netns",
                    bed.node.name(),
                    "--node-name",
                    &node,
                    "--metrics",
                    &metrics,
                    "--cluster-state",
                    state_arg,
                ],
            )
        })
        .collect();

    let targets: Vec<String> = (0..NODES)
        .map(|i| format!("'127.0.0.1:{}'", FIRST_METRICS_PORT + i as u16))
        .collect();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: tracer\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
    )
    .expect("prometheus config");
    let config_arg = format!("--config.file={}", config.display());
    let data_arg = format!("--storage.tsdb.path={}", dir.join("data").display());
    let listen_arg = format!("--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}");
    let mut prometheus = mon.spawn(&["prometheus", &config_arg, &data_arg, &listen_arg]);

    // Every node's client connects to the Service at once.
    std::thread::scope(|s| {
        for bed in &beds {
            s.spawn(|| connect_many(bed, 20));
        }
    });

    let stale = node_names(STALE.into_iter());
    let healthy = node_names((1..=NODES).filter(|i| !STALE.contains(i)));
    let all = node_names(1..=NODES);
    let scraped = wait_for_nodes(
        &mon,
        "max by (node) (tracer_build_info)",
        &all,
        Duration::from_secs(60),
    );
    assert_eq!(scraped, all, "Prometheus scrapes every node's tracer");
    let black_holes = format!(
        "sum by (node) (tracer_connects_total{{verdict=~\"unanswered|abandoned|timed_out\",\
         service=\"{vip}\",backend=\"{dead}\",cluster_verdict=\"backend is no live pod\",\
         src_namespace=\"app\",src_workload=\"Deployment/frontend\",dst_service=\"app/backend\"}})"
    );
    let seen = wait_for_nodes(&mon, &black_holes, &stale, Duration::from_secs(30));
    assert_eq!(
        seen, stale,
        "the black hole is seen from exactly the stale nodes"
    );
    let established = format!(
        "sum by (node) (tracer_service_connects{{service=\"{vip}\",verdict=\"established\"}})"
    );
    let answered = wait_for_nodes(&mon, &established, &all, Duration::from_secs(30));
    assert_eq!(answered, all, "every node sees the Service answer");
    let failing = format!(
        "sum by (node) (tracer_service_connects{{service=\"{vip}\",verdict!~\"established|slow\"}})"
    );
    let failing_nodes = nodes_of(&query(&mon, &failing).expect("prometheus answers"));
    assert_eq!(
        failing_nodes, stale,
        "only the stale nodes see the Service failing; {healthy:?} see it healthy"
    );

    // The sweep, from the same Prometheus.
    let url = format!("http://127.0.0.1:{PROMETHEUS_PORT}");
    let sweep = |format: &str| {
        let out = Command::new("nsenter")
            .arg(&in_mon)
            .arg(tracer_bin())
            .args(["sweep", "--prometheus", &url, "--window", "10m"])
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
    };
    let text = sweep("text");
    eprintln!("tracer sweep:\n{text}");
    let line = format!(
        "{vip} -> {dead} (no live pod): black holes from 3 of 10 nodes: node-3, node-7, node-9"
    );
    assert!(
        text.lines().any(|l| l == line),
        "the sweep names the three nodes:\n{text}"
    );
    assert!(
        text.contains("Tracers missing, down or degraded\n  none\n"),
        "--no-dns is a choice, not a degraded tracer:\n{text}"
    );
    assert!(
        !text.contains(&format!("-> {live}")),
        "the live backend is not failing:\n{text}"
    );
    let json: Value = serde_json::from_str(&sweep("json")).expect("sweep --format json");
    assert_eq!(
        json["nodes"].as_array().map(Vec::len),
        Some(NODES),
        "{json}"
    );
    let finding = &json["connects"][0];
    assert_eq!(finding["backend"], dead.to_string(), "{json}");
    let share = finding["backend_failing_share"].as_f64().expect("a share");
    assert!(
        (share - 1.0).abs() < 1e-9,
        "the dead backend fails all: {json}"
    );

    // A tracer that goes away is named: node-5's endpoint stops answering.
    let mut tracers = tracers;
    drop(tracers.remove(4));
    let down_instance = format!(
        "up{{instance=\"127.0.0.1:{}\"}} == 0",
        FIRST_METRICS_PORT + 4
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while query(&mon, &down_instance).is_none_or(|r| r.is_empty()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    let text = sweep("text");
    assert!(
        text.lines().any(|l| l.starts_with("node-5: down: ")),
        "the sweep names the tracer that is down:\n{text}"
    );
    assert!(
        text.lines().any(|l| l == line),
        "the black hole is still seen from the same 3 of 10 nodes in the window:\n{text}"
    );

    // An unreachable Prometheus is one sentence.
    let empty = Command::new("nsenter")
        .arg(&in_mon)
        .arg(tracer_bin())
        .args(["sweep", "--prometheus", "http://127.0.0.1:1"])
        .output()
        .expect("run tracer sweep");
    assert!(!empty.status.success());
    let stderr = String::from_utf8_lossy(&empty.stderr);
    assert!(
        stderr.starts_with("tracer: error: cannot reach Prometheus at http://127.0.0.1:1")
            && stderr.lines().count() == 1,
        "{stderr}"
    );

    drop(tracers);
    drop(listeners);
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
