//! Pod, Service and cluster-state verdicts end to end: the namespace test bed plus a kubectl-format
//! snapshot that names its addresses as pods and Service endpoints, read by the real tracer with
//! `--cluster-state`; real connects; the records must carry those names and the verdicts.
use std::{
    net::{Ipv4Addr, SocketAddr, SocketAddrV4},
    path::PathBuf,
    time::Duration,
};

use serde_json::{Value, json};
use tests::{
    api_fixture::ApiFixture,
    testbed::{TwoHosts, connect_from, nft_drop_syn_to},
    tracer::{Tracer, run_to_exit},
};

const WORKER: &str = "webhooks-worker-9d9667f58-hqrqt";
const CLIENT_POD: &str = "frontend-6b8f7c9d4-x7k2p";
const GONE_POD: &str = "file-resolver-5f8d7c6b4-9wz2k";

fn pod(name: &str, ip: Ipv4Addr, owner: &str, hash: &str, labels: &Value, ports: &Value) -> Value {
    let mut labels = labels.clone();
    labels["pod-template-hash"] = json!(hash);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "app", "uid": format!("uid-{name}"), "labels": labels,
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                                          "uid": format!("uid-{owner}"), "controller": true}]},
        "spec": {"nodeName": "node-a", "containers": [{"name": "app", "image": "app:1", "ports": ports}]},
        "status": {"phase": "Running", "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}],
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

fn endpoint(ip: Ipv4Addr, pod: &str) -> Value {
    json!({"addresses": [ip.to_string()], "conditions": {"ready": true, "serving": true, "terminating": false},
           "nodeName": "node-a", "targetRef": {"kind": "Pod", "namespace": "app", "name": pod, "uid": format!("uid-{pod}")}})
}

/// The bed as a cluster: the client is pod `frontend`, the server address is a worker pod that
/// Service `webhooks` selects (its selector also matches web pods) and that declares no port 8080,
/// and `dead_ip` is listed by Service `file-service`'s EndpointSlice for a pod that no longer exists.
fn snapshot(bed: &TwoHosts, dead_ip: Ipv4Addr) -> PathBuf {
    let list = cluster(bed, dead_ip);
    let path = std::env::temp_dir().join(format!(
        "tracer-cluster-state-{}-{}.json",
        std::process::id(),
        bed.client.name()
    ));
    std::fs::write(&path, serde_json::to_string_pretty(&list).expect("json"))
        .expect("write the snapshot");
    path
}

fn cluster(bed: &TwoHosts, dead_ip: Ipv4Addr) -> Value {
    let subnet = format!(
        "{}/24",
        Ipv4Addr::from(u32::from(bed.server_ip) & 0xffff_ff00)
    );
    let webhooks = json!({"app": "webhooks", "app.kubernetes.io/component": "webhooks"});
    let web_ip = Ipv4Addr::from(u32::from(bed.server_ip) + 48);
    let list = json!({"apiVersion": "v1", "kind": "List", "items": [
        pod(CLIENT_POD, bed.client_ip, "frontend-6b8f7c9d4", "6b8f7c9d4", &json!({"app": "frontend"}), &json!([])),
        pod("webhooks-86c79d5f77-99fwx", web_ip, "webhooks-86c79d5f77", "86c79d5f77", &webhooks,
            &json!([{"name": "http", "containerPort": 8080, "protocol": "TCP"}])),
        pod(WORKER, bed.server_ip, "webhooks-worker-9d9667f58", "9d9667f58", &webhooks, &json!([])),
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "webhooks", "namespace": "app"},
         "spec": {"type": "ClusterIP", "clusterIP": "10.96.188.1", "selector": webhooks,
                  "ports": [{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
         "metadata": {"name": "webhooks-5lq8t", "namespace": "app", "labels": {"kubernetes.io/service-name": "webhooks"}},
         "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
         "endpoints": [endpoint(web_ip, "webhooks-86c79d5f77-99fwx"), endpoint(bed.server_ip, WORKER)]},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "file-service", "namespace": "app"},
         "spec": {"type": "ClusterIP", "clusterIP": "10.96.31.1", "selector": {"app": "file-service"},
                  "ports": [{"port": 80, "targetPort": 8012, "protocol": "TCP"}]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
         "metadata": {"name": "file-service-q7w2n", "namespace": "app", "labels": {"kubernetes.io/service-name": "file-service"}},
         "ports": [{"name": "", "port": 8012, "protocol": "TCP"}],
         "endpoints": [endpoint(dead_ip, GONE_POD)]},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"},
         "spec": {"podCIDR": subnet, "podCIDRs": [subnet]},
         "status": {"addresses": [{"type": "InternalIP", "address": "10.231.255.254"}]}}
    ]});
    list
}

fn is_connect(v: &Value, dst: SocketAddr, verdict: &str, is_final: bool) -> bool {
    v["kind"] == "connect"
        && v["dst"] == dst.to_string()
        && v["verdict"] == verdict
        && v["final"] == is_final
}

/// The test process's cgroup v2 path, as `/proc/self/cgroup` says (`0::/...`).
fn own_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
}

#[test]
fn cluster_state_refused_by_a_worker_pod_is_endpoint_does_not_listen() {
    let bed = TwoHosts::new("cid");
    let dead_ip = Ipv4Addr::from(u32::from(bed.server_ip) + 96);
    let state = snapshot(&bed, dead_ip);
    let mut tracer = Tracer::start(&[
        "--netns",
        bed.client.name(),
        "--cluster-state",
        state.to_str().expect("path"),
    ]);
    let dst = SocketAddr::from(SocketAddrV4::new(bed.server_ip, 8080));
    let err = connect_from(&bed.client, "tc-cid", dst, Duration::from_secs(3))
        .expect_err("nothing listens");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    let r = tracer.expect("refused by the worker pod", Duration::from_secs(5), |v| {
        is_connect(v, dst, "refused", true)
    });
    let _ = std::fs::remove_file(&state);

    assert_eq!(r["src_pod"], CLIENT_POD, "source pod, by its address: {r}");
    assert_eq!(r["src_namespace"], "app", "{r}");
    assert_eq!(r["src_owner"], "Deployment/frontend", "{r}");
    if let Some(cgroup) = own_cgroup() {
        assert_eq!(r["src_cgroup"], cgroup.as_str(), "cgroup id -> path: {r}");
    }
    assert_eq!(r["dst_pod"], WORKER, "{r}");
    assert_eq!(r["dst_owner"], "Deployment/webhooks-worker", "{r}");
    assert_eq!(r["dst_node"], "node-a", "{r}");
    assert_eq!(r["dst_ready"], true, "{r}");
    assert_eq!(r["dst_service"], "app/webhooks", "{r}");
    assert_eq!(r["identity_source"], "file", "{r}");
    assert_eq!(r["cluster_verdict"], "endpoint does not listen", "{r}");
    let why = r["cluster_explanation"]
        .as_str()
        .expect("cluster_explanation");
    assert!(
        why.contains(&format!(
            "Refused by pod app/{WORKER} (Deployment webhooks-worker), a Ready endpoint of Service app/webhooks: \
             selector app=webhooks,app.kubernetes.io/component=webhooks also matches {WORKER}, which declares no port 8080"
        )),
        "{why}"
    );
    assert!(
        why.contains("1 of the 2 pods it matches declare no port 8080"),
        "{why}"
    );
}

#[test]
fn cluster_state_unanswered_connect_to_a_deleted_pod_ip_is_backend_is_no_live_pod() {
    let bed = TwoHosts::new("cgone");
    // A "dead pod" address that still answers ARP but drops SYNs: the black hole of incident 000.
    let dead_ip = Ipv4Addr::from(u32::from(bed.server_ip) + 96);
    bed.server
        .exec(&["ip", "addr", "add", &format!("{dead_ip}/24"), "dev", "eth0"]);
    bed.server.nft(&nft_drop_syn_to(8012));
    let state = snapshot(&bed, dead_ip);
    let mut tracer = Tracer::start(&[
        "--netns",
        bed.client.name(),
        "--cluster-state",
        state.to_str().expect("path"),
    ]);
    let dst = SocketAddr::from(SocketAddrV4::new(dead_ip, 8012));
    let client = bed.client.spawn_in("tc-cgone", move || {
        std::net::TcpStream::connect_timeout(&dst, Duration::from_secs(3)).map(drop)
    });
    let live = tracer.expect("live unanswered", Duration::from_secs(3), |v| {
        is_connect(v, dst, "unanswered", false)
    });
    assert_eq!(
        live["cluster_verdict"], "backend is no live pod",
        "said while the connect still hangs: {live}"
    );
    let err = client
        .join()
        .expect("client thread")
        .expect_err("the SYNs are dropped");
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
    let end = tracer.expect("abandoned", Duration::from_secs(5), |v| {
        is_connect(v, dst, "abandoned", true)
    });
    let _ = std::fs::remove_file(&state);
    assert_eq!(end["cluster_verdict"], "backend is no live pod", "{end}");
    assert_eq!(
        end["dst_service"], "app/file-service",
        "the Service it was reached through: {end}"
    );
    assert_eq!(end["src_pod"], CLIENT_POD, "{end}");
    assert!(
        end.get("dst_pod").is_none(),
        "no pod has that address: {end}"
    );
    let why = end["cluster_explanation"]
        .as_str()
        .expect("cluster_explanation");
    assert!(
        why.starts_with(&format!(
            "No live pod has {dst}: EndpointSlice file-service-q7w2n of Service app/file-service still lists it \
             for pod {GONE_POD}, which no longer exists"
        )),
        "{why}"
    );
}

#[test]
fn cluster_state_from_the_api_names_the_same_pods_as_the_file() {
    let bed = TwoHosts::new("clive");
    let api = ApiFixture::serve(&cluster(
        &bed,
        Ipv4Addr::from(u32::from(bed.server_ip) + 96),
    ));
    let kubeconfig = api.kubeconfig(
        &std::env::temp_dir(),
        &format!("tracer-kubeconfig-live-{}", std::process::id()),
    );
    let mut tracer = Tracer::start(&[
        "--netns",
        bed.client.name(),
        "--kubeconfig",
        kubeconfig.to_str().expect("path"),
        "--node-name",
        "node-a",
    ]);
    let dst = SocketAddr::from(SocketAddrV4::new(bed.server_ip, 8080));
    // The first lists may still be on their way right after attach (those records say `identity_stale`):
    // connect a few times and take the first record named from a complete list.
    for _ in 0..5 {
        let err = connect_from(&bed.client, "tc-clive", dst, Duration::from_secs(3))
            .expect_err("nothing listens");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let r = tracer.expect("refused, named from the API", Duration::from_secs(5), |v| {
        is_connect(v, dst, "refused", true) && v.get("identity_stale").is_none()
    });
    let _ = std::fs::remove_file(&kubeconfig);
    assert_eq!(r["identity_source"], "api", "{r}");
    assert!(r.get("identity_stale").is_none(), "in sync: {r}");
    assert_eq!(r["identity_age_s"], 0, "{r}");
    assert_eq!(r["src_pod"], CLIENT_POD, "{r}");
    assert_eq!(r["dst_pod"], WORKER, "{r}");
    assert_eq!(r["dst_service"], "app/webhooks", "{r}");
    assert_eq!(r["cluster_verdict"], "endpoint does not listen", "{r}");
}

#[test]
fn cluster_state_api_unreachable_keeps_tracing_with_stale_names() {
    let bed = TwoHosts::new("capi");
    // A kubeconfig whose API server is a closed port on this machine's loopback.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let kubeconfig = std::env::temp_dir().join(format!("tracer-kubeconfig-{}", std::process::id()));
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             users:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n\
             current-context: c\n"
        ),
    )
    .expect("write kubeconfig");
    let mut tracer = Tracer::start(&[
        "--netns",
        bed.client.name(),
        "--kubeconfig",
        kubeconfig.to_str().expect("path"),
        "--node-name",
        "node-a",
    ]);
    let dst = SocketAddr::from(SocketAddrV4::new(bed.server_ip, 8080));
    let err = connect_from(&bed.client, "tc-capi", dst, Duration::from_secs(3))
        .expect_err("nothing listens");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
    let r = tracer.expect(
        "refused, traced without the API",
        Duration::from_secs(5),
        |v| is_connect(v, dst, "refused", true),
    );
    let _ = std::fs::remove_file(&kubeconfig);
    assert_eq!(r["identity_source"], "api", "{r}");
    assert_eq!(r["identity_stale"], true, "{r}");
    // Issue 27: the message names the address and the OS error, once per kind.
    let refused = format!(
        "cannot reach the API server at http://127.0.0.1:{port}: Connection refused (os error 111)"
    );
    let stderr = tracer.stderr();
    assert_eq!(
        stderr.matches(&refused).count(),
        4,
        "once per kind, with the address and the OS error: {stderr}"
    );
    // A quiet period: no record needs a name, and the stats records still say they are stale.
    std::thread::sleep(Duration::from_secs(2));
    let (_, records, _) = tracer.stop();
    let stats = records
        .iter()
        .rfind(|v| v["kind"] == "stats" && v["final"] == true)
        .expect("a final stats record");
    let identity = &stats["identity"];
    assert_eq!(identity["source"], "api", "{stats}");
    assert_eq!(identity["stale"], true, "{stats}");
    assert!(identity["age_s"].as_u64() >= Some(2), "{stats}");
    for kind in ["pods", "services", "endpointslices", "nodes"] {
        let failures = identity["api"]["requests"][kind]["failures"].as_u64();
        assert!(failures >= Some(1), "{kind}: {stats}");
    }
}

#[test]
fn cluster_state_malformed_file_or_unreadable_kubeconfig_is_a_clear_error() {
    let bad = std::env::temp_dir().join(format!("tracer-bad-state-{}.json", std::process::id()));
    std::fs::write(&bad, r#"{"kind":"List","items":[{"kind":"Service","metadata":{"name":"s","namespace":"x"},"spec":{"ports":[{"port":"eighty"}]}}]}"#)
        .expect("write");
    let (code, stderr) = run_to_exit(
        &["trace", "--cluster-state", bad.to_str().expect("path")],
        &[],
        &[],
    );
    let _ = std::fs::remove_file(&bad);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.starts_with("tracer: error: the cluster state file"),
        "{stderr}"
    );
    assert!(
        stderr.contains("`items[0].spec.ports[0].port` (Service x/s)"),
        "names the bad value: {stderr}"
    );
    assert_eq!(stderr.matches("eighty").count(), 1, "said once: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let (code, stderr) = run_to_exit(
        &[
            "trace",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
            "--node-name",
            "node-a",
        ],
        &[],
        &[],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.starts_with("tracer: error: cannot read the kubeconfig /nonexistent/kubeconfig"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Issue 29: with the API, the tracer follows only its node's pods, so it needs the node's name;
/// without it, a clear error before anything is attached.
#[test]
fn cluster_state_api_without_a_node_name_is_a_clear_error() {
    let api = ApiFixture::start();
    let kubeconfig = api.kubeconfig(
        &std::env::temp_dir(),
        &format!("tracer-kubeconfig-nonode-{}", std::process::id()),
    );
    let (code, stderr) = run_to_exit(
        // Bounded, should a tracer ever start without the name.
        &[
            "trace",
            "--duration",
            "3",
            "--kubeconfig",
            kubeconfig.to_str().expect("path"),
        ],
        &[("NODE_NAME", "")],
        &[],
    );
    let _ = std::fs::remove_file(&kubeconfig);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.starts_with("tracer: error: --kubeconfig and --in-cluster need this node's name"),
        "{stderr}"
    );
    assert!(!stderr.contains("attached"), "{stderr}");
    assert!(
        api.log().is_empty(),
        "nothing asked of the API: {:?}",
        api.log()
    );
}
