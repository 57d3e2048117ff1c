//! The live list+watch client (`identity/watch.rs`) and the `--kubeconfig` source against the
//! workspace's one fixture API server, `tests/src/api_fixture.rs` (a scripted stand-in speaking the
//! API's JSON, not a real API server), included here as a module.
use std::time::{Duration, Instant};

use kube::Config;
use serde_json::json;
use tracer::identity::{
    source::ClusterSource,
    watch::{LiveCluster, LiveView},
};

#[path = "../../tests/src/api_fixture.rs"]
#[allow(
    dead_code,
    reason = "shared with the root tests crate, which uses the rest"
)]
mod api_fixture;

use api_fixture::ApiFixture;

fn pod(name: &str, ip: &str, ready: bool, rv: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "app", "uid": format!("uid-{name}"), "resourceVersion": rv},
        "spec": {"containers": [{"name": "c"}], "nodeName": "node-a"},
        "status": {"phase": "Running", "podIP": ip,
                   "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
    })
}

fn wait_for(live: &LiveCluster, what: &str, ok: impl Fn(&LiveView) -> bool) -> LiveView {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let view = live.view();
        if ok(&view) {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; pods: {:?}",
            names(&view)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn names(view: &LiveView) -> Vec<(String, bool)> {
    let mut v: Vec<_> = view
        .state
        .pods()
        .iter()
        .map(|p| (p.name.clone(), p.ready))
        .collect();
    v.sort();
    v
}

/// Against the fixture API server (see `tests/src/api_fixture.rs`: a scripted stand-in speaking the API's JSON,
/// not a real API server): list, watch events, a bookmark that moves the resume point, a `410 Gone`
/// in the stream and one on the watch request, each forcing a relist; then the server goes away
/// and the names are kept but marked stale.
#[test]
fn follows_list_watch_bookmarks_and_relists_after_410_gone() {
    let a = |ready, rv| pod("web-a", "10.244.1.10", ready, rv);
    let fx = ApiFixture::start();
    let pods = "/api/v1/pods";
    fx.list(
        pods,
        "100",
        vec![a(true, "90"), pod("web-b", "10.244.1.11", true, "95")],
    );
    fx.watch(pods, vec![
        json!({"type": "ADDED", "object": pod("web-c", "10.244.1.12", true, "101")}),
        json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "150"}}}),
    ], false);
    fx.watch(pods, vec![
        json!({"type": "MODIFIED", "object": a(false, "160")}),
        json!({"type": "DELETED", "object": pod("web-b", "10.244.1.11", true, "170")}),
        json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
               "status": "Failure", "message": "too old resource version: 170 (180)", "reason": "Expired", "code": 410}}),
    ], false);
    // web-c was deleted while we were not watching: only a relist can tell.
    fx.list(
        pods,
        "200",
        vec![a(false, "160"), pod("web-d", "10.244.1.13", true, "190")],
    );
    fx.gone(pods);
    fx.list(
        pods,
        "300",
        vec![a(true, "250"), pod("web-d", "10.244.1.13", true, "190")],
    );
    // Then the default: watches that stay open until the server stops.

    let live = LiveCluster::start(Config::new(fx.url().parse().expect("url"))).expect("client");
    let view = wait_for(&live, "the state after the second relist", |v| {
        !v.stale && names(v) == [("web-a".to_string(), true), ("web-d".to_string(), true)]
    });
    assert_eq!(view.age, Duration::ZERO);
    assert_eq!(
        view.state
            .pod_by_ip("10.244.1.13".parse().expect("ip"))
            .map(|p| p.name.as_str()),
        Some("web-d")
    );

    let log = fx.requests(pods);
    let expected = [
        "list limit=500",
        "watch rv=100",
        "watch rv=150",   // the bookmark moved the resume point
        "list limit=500", // ERROR 410 in the stream
        "watch rv=200",
        "list limit=500", // HTTP 410 on the watch request
        "watch rv=300",
    ];
    assert_eq!(
        &log[..expected.len()],
        expected,
        "requests for pods: {log:?}"
    );
    assert!(
        fx.requests("/api/v1/nodes")
            .starts_with(&["list limit=500".to_string()])
    );
    assert!(
        fx.requests("/apis/discovery.k8s.io/v1/endpointslices")
            .starts_with(&["list limit=500".to_string()])
    );

    // The API goes away: tracing goes on with the last names, marked stale.
    fx.stop();
    let view = wait_for(&live, "stale names", |v| v.stale);
    assert_eq!(names(&view).len(), 2, "the last snapshot stays in use");
}

/// Regression: a record once said "in sync" and named nothing, between a list and its publication.
#[test]
fn names_are_current_only_once_the_list_is_in_the_snapshot() {
    let fx = ApiFixture::start();
    fx.list(
        "/api/v1/pods",
        "5",
        vec![pod("web-a", "10.244.1.10", true, "5")],
    );
    let live = LiveCluster::start(Config::new(fx.url().parse().expect("url"))).expect("client");
    let deadline = Instant::now() + Duration::from_secs(10);
    while live.view().stale {
        assert!(Instant::now() < deadline, "never in sync");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        names(&live.view()).len(),
        1,
        "in sync means the list is in the snapshot"
    );
}

#[test]
fn an_api_that_never_answers_gives_stale_empty_state_not_an_error() {
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let live = LiveCluster::start(Config::new(
        format!("http://127.0.0.1:{port}").parse().expect("url"),
    ))
    .expect("client");
    std::thread::sleep(Duration::from_millis(300));
    let view = live.view();
    assert!(view.stale);
    assert!(view.state.pods().is_empty());
    assert!(view.age >= Duration::from_millis(250), "{:?}", view.age);
}

#[tokio::test]
async fn a_kubeconfig_naming_the_fixture_server_follows_it() {
    let fx = ApiFixture::start();
    fx.list(
        "/api/v1/pods",
        "5",
        vec![json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-a", "namespace": "app", "uid": "u", "resourceVersion": "5"},
            "status": {"phase": "Running", "podIP": "10.244.1.10"}
        })],
    );
    let path = fx.kubeconfig(
        &std::env::temp_dir(),
        &format!("tracer-watch-kubeconfig-{}", std::process::id()),
    );
    let source = ClusterSource::from_kubeconfig(&path)
        .await
        .expect("kubeconfig");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let view = source.view();
        if !view.stale && view.state.pods().len() == 1 {
            assert_eq!(view.source, "api");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the kubeconfig's server was not followed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn node(name: &str, ip: &str, ready: bool, rv: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "resourceVersion": rv},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}],
                   "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
    })
}

/// Incident 002: replies that go to a node's SNAT address are named against that node: `NotReady`
/// while it is listed so, gone once the watch saw it deleted.
#[test]
fn replies_to_a_node_deleted_or_not_ready_get_its_verdict() {
    use tracer::identity::verdicts::{PEER_NODE_IS_GONE, PEER_NODE_IS_NOT_READY, for_reply_peer};
    let fx = ApiFixture::start();
    let nodes = "/api/v1/nodes";
    fx.list(
        nodes,
        "100",
        vec![
            node("node-a", "10.0.1.5", true, "90"),
            node("node-b", "10.0.1.6", false, "91"),
        ],
    );
    fx.watch(
        nodes,
        vec![json!({"type": "DELETED", "object": node("node-a", "10.0.1.5", true, "110")})],
        true,
    );
    let live = LiveCluster::start(Config::new(fx.url().parse().expect("url"))).expect("client");
    let view = wait_for(&live, "node-a deleted", |v| {
        v.state.nodes().iter().all(|n| n.name != "node-a") && !v.state.nodes().is_empty()
    });
    let peer = |ip: &str| format!("{ip}:37980").parse().expect("address");
    let gone = for_reply_peer(&view.state, peer("10.0.1.5")).expect("a verdict");
    assert_eq!(gone.name, PEER_NODE_IS_GONE);
    assert!(gone.explanation.contains("node-a"), "{}", gone.explanation);
    let down = for_reply_peer(&view.state, peer("10.0.1.6")).expect("a verdict");
    assert_eq!(down.name, PEER_NODE_IS_NOT_READY);
    assert_eq!(for_reply_peer(&view.state, peer("203.0.113.9")), None);
    fx.stop();
}
