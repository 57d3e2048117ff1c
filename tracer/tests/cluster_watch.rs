//! The live list+watch client (`identity/watch.rs`, `reflector.rs`) and the `--kubeconfig` source
//! against the workspace's one fixture API server, `tests/src/api_fixture/` (a stand-in speaking
//! the API's JSON, not a real API server), included here as a module: what it asks, how it backs
//! off when the API misbehaves (issue 27), and what it says.
use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use kube::Config;
use serde_json::{Value, json};
use tracer::identity::{
    source::ClusterSource,
    watch::{LiveCluster, LiveOptions, LiveView},
};

#[path = "../../tests/src/api_fixture/mod.rs"]
#[allow(
    dead_code,
    reason = "shared with the root tests crate and xtask, which use the rest"
)]
mod api_fixture;

use api_fixture::{ApiFixture, Fault, Kind, Logged, Verb};

const NODE: &str = "node-a";

fn pod_on(name: &str, node: &str, ip: &str, ready: bool, rv: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "app", "uid": format!("uid-{name}"), "resourceVersion": rv},
        "spec": {"containers": [{"name": "c"}], "nodeName": node},
        "status": {"phase": "Running", "podIP": ip,
                   "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
    })
}

fn pod(name: &str, ip: &str, ready: bool, rv: &str) -> Value {
    pod_on(name, NODE, ip, ready, rv)
}

/// What the client said, collected.
#[derive(Clone, Default)]
struct Said(Arc<Mutex<Vec<String>>>);

impl Said {
    fn lines(&self) -> Vec<String> {
        self.0.lock().expect("said").clone()
    }
}

fn start(fx: &ApiFixture) -> (LiveCluster, Said) {
    let said = Said::default();
    let sink = said.clone();
    let options = LiveOptions {
        node_name: NODE.into(),
        say: Arc::new(move |line| sink.0.lock().expect("said").push(line.to_string())),
    };
    let live =
        LiveCluster::start(Config::new(fx.url().parse().expect("url")), options).expect("client");
    (live, said)
}

fn wait_for(live: &LiveCluster, what: &str, ok: impl Fn(&LiveView) -> bool) -> LiveView {
    wait_within(live, Duration::from_secs(30), what, ok)
}

fn wait_within(
    live: &LiveCluster,
    limit: Duration,
    what: &str,
    ok: impl Fn(&LiveView) -> bool,
) -> LiveView {
    let deadline = Instant::now() + limit;
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

const PODS: &str = "/api/v1/pods";
const ON_NODE: &str = "fieldSelector=spec.nodeName=node-a";

/// Against the fixture API server: list, watch events, a bookmark that moves the resume point, a
/// `410 Gone` in the stream and one on the watch request, each forcing a relist (after a step of
/// the backoff); then the server goes away and the names are kept but marked stale. Every pod
/// request carries this node's field selector.
#[test]
fn follows_list_watch_bookmarks_and_relists_after_410_gone() {
    let a = |ready, rv| pod("web-a", "10.244.1.10", ready, rv);
    let fx = ApiFixture::start();
    fx.list(
        PODS,
        "100",
        vec![a(true, "90"), pod("web-b", "10.244.1.11", true, "95")],
    );
    fx.watch(PODS, vec![
        json!({"type": "ADDED", "object": pod("web-c", "10.244.1.12", true, "101")}),
        json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "150"}}}),
    ], false);
    fx.watch(PODS, vec![
        json!({"type": "MODIFIED", "object": a(false, "160")}),
        json!({"type": "DELETED", "object": pod("web-b", "10.244.1.11", true, "170")}),
        json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
               "status": "Failure", "message": "too old resource version: 170 (180)", "reason": "Expired", "code": 410}}),
    ], false);
    // web-c was deleted while we were not watching: only a relist can tell.
    fx.list(
        PODS,
        "200",
        vec![a(false, "160"), pod("web-d", "10.244.1.13", true, "190")],
    );
    fx.gone(PODS);
    fx.list(
        PODS,
        "300",
        vec![a(true, "250"), pod("web-d", "10.244.1.13", true, "190")],
    );
    // Then the default: watches that stay open.

    let (live, _) = start(&fx);
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

    let log = fx.requests(PODS);
    let list = format!("list rv=0 {ON_NODE}");
    let watch = |rv: u32| format!("watch rv={rv} {ON_NODE}");
    let expected = [
        list.clone(),
        watch(100),
        watch(150),   // the bookmark moved the resume point
        list.clone(), // ERROR 410 in the stream
        watch(200),
        list, // HTTP 410 on the watch request
        watch(300),
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

/// Issue 29: only this node's pods are listed and watched (the field selector on every pod
/// request, the list read from the API server's cache), and a pod elsewhere never reaches the
/// model; Services, EndpointSlices and nodes are followed cluster-wide.
#[test]
fn pods_are_listed_and_watched_for_this_node_only() {
    let fx = ApiFixture::serve(&json!({"items": [
        pod_on("here-1", NODE, "10.244.1.10", true, "1"),
        pod_on("there-1", "node-b", "10.244.2.10", true, "1"),
    ]}));
    let (live, _) = start(&fx);
    wait_for(&live, "the first list", |v| !v.stale);
    fx.change(
        Kind::Pod,
        pod_on("here-2", NODE, "10.244.1.11", true, "0"),
        false,
    );
    fx.change(
        Kind::Pod,
        pod_on("there-2", "node-b", "10.244.2.11", true, "0"),
        false,
    );
    let view = wait_for(&live, "here-2 from the watch", |v| names(v).len() == 2);
    assert_eq!(
        names(&view),
        [("here-1".to_string(), true), ("here-2".to_string(), true)]
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(names(&live.view()).len(), 2, "no pod of node-b arrives");
    let pod_requests: Vec<Logged> = fx
        .log()
        .into_iter()
        .filter(|l| l.kind == Some(Kind::Pod))
        .collect();
    assert!(pod_requests.len() >= 2, "{pod_requests:?}");
    for r in &pod_requests {
        assert_eq!(r.field_selector, "spec.nodeName=node-a", "{r:?}");
        assert!(!r.is_cluster_wide_pod_request(), "{r:?}");
    }
    assert!(
        pod_requests[0].line.contains("rv=0"),
        "listed from the API server's cache: {pod_requests:?}"
    );
    for kind in [Kind::Service, Kind::EndpointSlice, Kind::Node] {
        let first = fx
            .log()
            .into_iter()
            .find(|l| l.kind == Some(kind))
            .expect("followed");
        assert_eq!(first.path, kind.collection(), "cluster-wide: {first:?}");
        assert!(first.field_selector.is_empty(), "{first:?}");
    }
}

/// Regression: a record once said "in sync" and named nothing, between a list and its publication.
#[test]
fn names_are_current_only_once_the_list_is_in_the_snapshot() {
    let fx = ApiFixture::start();
    fx.list(PODS, "5", vec![pod("web-a", "10.244.1.10", true, "5")]);
    let (live, _) = start(&fx);
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

/// Issue 27: the unreachable-API message names the address and the OS error, once per kind.
#[test]
fn an_api_that_never_answers_gives_stale_empty_state_and_names_the_address() {
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let said = Said::default();
    let sink = said.clone();
    let live = LiveCluster::start(
        Config::new(format!("http://127.0.0.1:{port}").parse().expect("url")),
        LiveOptions {
            node_name: NODE.into(),
            say: Arc::new(move |line| sink.0.lock().expect("said").push(line.to_string())),
        },
    )
    .expect("client");
    std::thread::sleep(Duration::from_millis(2500));
    let view = live.view();
    assert!(view.stale);
    assert!(view.state.pods().is_empty());
    assert!(view.age >= Duration::from_secs(2), "{:?}", view.age);
    let lines = said.lines();
    assert_eq!(
        lines.len(),
        4,
        "one line per kind, not per retry: {lines:#?}"
    );
    for line in &lines {
        assert!(
            line.contains(&format!(
                "cannot reach the API server at http://127.0.0.1:{port}: Connection refused (os error 111)"
            )),
            "{line}"
        );
    }
}

#[tokio::test]
async fn a_kubeconfig_naming_the_fixture_server_follows_it() {
    let fx = ApiFixture::start();
    fx.list(
        PODS,
        "5",
        vec![json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-a", "namespace": "app", "uid": "u", "resourceVersion": "5"},
            "spec": {"nodeName": NODE},
            "status": {"phase": "Running", "podIP": "10.244.1.10"}
        })],
    );
    let path = fx.kubeconfig(
        &std::env::temp_dir(),
        &format!("tracer-watch-kubeconfig-{}", std::process::id()),
    );
    let source = ClusterSource::from_kubeconfig(&path, NODE)
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
    let _ = std::fs::remove_file(&path);
}

fn node(name: &str, ip: &str, ready: bool, rv: &str) -> Value {
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
    use tracer::{identity::verdicts::for_reply_peer, verdict::ClusterVerdictKind};
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
    let (live, _) = start(&fx);
    let view = wait_for(&live, "node-a deleted", |v| {
        v.state.nodes().iter().all(|n| n.name != "node-a") && !v.state.nodes().is_empty()
    });
    let peer = |ip: &str| format!("{ip}:37980").parse().expect("address");
    let gone = for_reply_peer(&view.state, peer("10.0.1.5")).expect("a verdict");
    assert_eq!(gone.kind, ClusterVerdictKind::PeerNodeIsGone);
    assert!(gone.explanation.contains("node-a"), "{}", gone.explanation);
    let down = for_reply_peer(&view.state, peer("10.0.1.6")).expect("a verdict");
    assert_eq!(down.kind, ClusterVerdictKind::PeerNodeIsNotReady);
    assert_eq!(for_reply_peer(&view.state, peer("203.0.113.9")), None);
    fx.stop();
}

// ------------------------------------------------------------ a broken API (issue 27)

/// How long each broken mode runs.
const BROKEN_FOR: Duration = Duration::from_secs(22);
/// The backoff's first step, as the client waits at least (`identity/backoff.rs`).
const FIRST_STEP: Duration = Duration::from_millis(800);

/// The requests of one kind after `since`.
fn requests_of(fx: &ApiFixture, kind: Kind, since: Instant) -> Vec<Logged> {
    fx.log()
        .into_iter()
        .filter(|l| l.kind == Some(kind) && l.at >= since)
        .collect()
}

/// Each gap between `times` is at least a step of the backoff: the k-th at least 0.8 s x 2^k
/// (before jitter, which only adds), up to the 30 s cap.
fn assert_backed_off(what: &str, times: &[Instant]) {
    for (k, pair) in times.windows(2).enumerate() {
        let gap = pair[1].duration_since(pair[0]);
        let step = (FIRST_STEP * (1 << k.min(6))).min(Duration::from_secs(30));
        // A few milliseconds of scheduling either way.
        assert!(
            gap + Duration::from_millis(30) >= step,
            "{what}: gap {k} is {gap:?}, less than the backoff step {step:?}: {times:?}"
        );
    }
}

/// A cluster with a pod on this node, synced, then `fault` for [`BROKEN_FOR`]: requests spaced by
/// the backoff (lists too when `relists`), names stale throughout, one warning per kind, then
/// current again once the API is fixed, said once per kind.
fn a_broken_api_is_backed_off(fault: Fault, relists: bool) {
    let fx = ApiFixture::serve(&json!({"items": [pod("web-a", "10.244.1.10", true, "1")]}));
    let (live, said) = start(&fx);
    wait_for(&live, "the first list", |v| !v.stale && names(v).len() == 1);
    // Past the time a watch takes to count as healthy, so that the cut below is a normal end.
    std::thread::sleep(Duration::from_millis(5500));
    let broken = Instant::now();
    fx.set_fault(fault);
    // The API restarts broken: open watches end, and every new one meets the fault.
    fx.cut_connections();
    std::thread::sleep(Duration::from_secs(3));
    assert!(live.view().stale, "{fault:?}: names are stale while broken");
    let mut flips = 0;
    while broken.elapsed() < BROKEN_FOR {
        if !live.view().stale {
            flips += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        flips, 0,
        "{fault:?}: names never looked current while broken"
    );
    for kind in Kind::ALL {
        let requests = requests_of(&fx, kind, broken);
        let lists: Vec<Instant> = requests
            .iter()
            .filter(|r| r.verb == Verb::List)
            .map(|r| r.at)
            .collect();
        let watches: Vec<Instant> = requests
            .iter()
            .filter(|r| r.verb == Verb::Watch)
            .map(|r| r.at)
            .collect();
        // The old client made 90-128 requests a second here (or 45 lists a second on 410s).
        assert!(
            requests.len() <= 12,
            "{fault:?} {kind:?}: {} requests in {BROKEN_FOR:?}: {requests:#?}",
            requests.len()
        );
        assert!(
            watches.len() >= 3,
            "{fault:?} {kind:?}: still retried: {requests:#?}"
        );
        if relists {
            assert!(lists.len() >= 3, "{fault:?} {kind:?}: {requests:#?}");
            assert_backed_off(&format!("{fault:?} {kind:?} lists"), &lists);
        } else {
            // The first list was before; a watch that breaks is watched again, not relisted.
            assert!(lists.is_empty(), "{fault:?} {kind:?}: {requests:#?}");
        }
        // The first watch after the cut is made at once (the cut was a normal end), then each is
        // a step of the backoff after the one before.
        assert_backed_off(&format!("{fault:?} {kind:?} watches"), &watches);
    }
    let warnings: Vec<String> = said
        .lines()
        .into_iter()
        .filter(|l| l.contains("warning"))
        .collect();
    assert_eq!(
        warnings.len(),
        4,
        "{fault:?}: each kind says its cause once: {warnings:#?}"
    );
    // A watch that opens and breaks a moment later never counts as following again (the poll
    // above can miss a current spell of a few milliseconds; the client's own word cannot).
    let recovered: Vec<String> = said
        .lines()
        .into_iter()
        .filter(|l| l.contains("following") && l.contains("again"))
        .collect();
    assert!(
        recovered.is_empty(),
        "{fault:?}: said current while broken: {recovered:#?}"
    );

    fx.set_fault(Fault::None);
    // At most the step being waited (25.6 s at this point) and the healthy watch it takes.
    wait_within(&live, Duration::from_secs(40), "names current again", |v| {
        !v.stale
    });
    let again = said
        .lines()
        .into_iter()
        .filter(|l| l.contains("following") && l.contains("again"))
        .count();
    std::thread::sleep(Duration::from_millis(300));
    assert!(again >= 1, "{:#?}", said.lines());
    assert!(said.lines().len() <= 8, "{:#?}", said.lines());
}

/// Each broken watch, side by side (each waits out about 50 s of the real backoff, so one after
/// the other they held the unit tests for minutes), each on a thread named after its fault; the
/// test fails naming every fault whose checks failed.
/// - `WatchNotJson`: a watch answered 200 and then a line that is not JSON (a proxy's error page);
/// - `WatchError500`: a watch answered 200 and then an `ERROR` event with code 500;
/// - `WatchGone`: every watch answered `410 Gone`: list, watch, 410, list ... one list per step;
/// - `WatchGoneEvent`: every watch answered 200 and an `ERROR` 410 event, relisted the same way.
#[test]
fn every_broken_watch_is_backed_off_and_recovers() {
    let faults = [
        (Fault::WatchNotJson, false),
        (Fault::WatchError500, false),
        (Fault::WatchGone, true),
        (Fault::WatchGoneEvent, true),
    ];
    let failed: Vec<String> = std::thread::scope(|scope| {
        let threads: Vec<_> = faults
            .into_iter()
            .map(|(fault, relists)| {
                let name = format!("{fault:?}");
                let thread = std::thread::Builder::new()
                    .name(name.clone())
                    .spawn_scoped(scope, move || a_broken_api_is_backed_off(fault, relists))
                    .expect("a thread per fault");
                (name, thread)
            })
            .collect();
        threads
            .into_iter()
            .filter_map(|(name, thread)| thread.join().is_err().then_some(name))
            .collect()
    });
    assert!(
        failed.is_empty(),
        "failed (their panics are above): {failed:?}"
    );
}

/// Every request answered 500: lists fail and are backed off.
#[test]
fn an_api_answering_500_to_everything_is_backed_off() {
    let fx = ApiFixture::start();
    fx.set_fault(Fault::Status(500));
    let (live, said) = start(&fx);
    let started = Instant::now();
    std::thread::sleep(BROKEN_FOR);
    assert!(live.view().stale);
    for kind in Kind::ALL {
        let lists: Vec<Instant> = requests_of(&fx, kind, started)
            .iter()
            .map(|r| r.at)
            .collect();
        assert!(
            (3..=7).contains(&lists.len()),
            "{kind:?}: {} lists in {BROKEN_FOR:?}",
            lists.len()
        );
        assert_backed_off(&format!("{kind:?} lists"), &lists);
    }
    let lines = said.lines();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(
        lines[0].contains("the API server answered HTTP 500"),
        "{lines:#?}"
    );
}

// ------------------------------------------------------------ a relist, paginated

fn slice(name: &str, ip: &str, ready: bool) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "app", "resourceVersion": "1",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}, "nodeName": "node-b"}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
    })
}

/// `slice-N` at `10.245.(N / 250).(N % 250)`.
fn numbered_slice(n: u32) -> Value {
    slice(
        &format!("slice-{n}"),
        &format!("10.245.{}.{}", n / 250, n % 250),
        true,
    )
}

fn slice_named<'a>(
    view: &'a LiveView,
    name: &str,
) -> Option<&'a Arc<tracer::identity::cluster::EndpointSlice>> {
    view.state.endpoint_slices().iter().find(|s| s.name == name)
}

/// Issue 29: a relist applies its pages to the model in place. After changes no watch delivered
/// (the API away, then compacted), the relist of 1,200 EndpointSlices in three pages leaves exactly
/// what the API lists: slices deleted on the first and last page gone, a changed one changed, a new
/// one there, the unchanged ones the very objects held before (not decoded again); a node deleted
/// meanwhile is gone and, as no watch saw it go, not remembered as departed.
#[test]
fn a_paginated_relist_leaves_exactly_what_the_api_lists() {
    const SLICES: u32 = 1_200;
    let mut items: Vec<Value> = (0..SLICES).map(numbered_slice).collect();
    items.push(node("node-b", "10.0.1.6", true, "1"));
    items.push(node("node-c", "10.0.1.7", true, "1"));
    let fx = ApiFixture::serve(&json!({ "items": items }));
    let (live, _) = start(&fx);
    let before = wait_for(&live, "the first lists", |v| {
        !v.stale && v.state.endpoint_slices().len() == SLICES as usize
    });

    fx.set_fault(Fault::Refuse);
    wait_for(&live, "stale names while the API is away", |v| v.stale);
    let changed_ip = "10.245.9.9";
    fx.change(Kind::EndpointSlice, numbered_slice(3), true);
    fx.change(Kind::EndpointSlice, numbered_slice(1_150), true);
    fx.change(
        Kind::EndpointSlice,
        slice("slice-700", changed_ip, false),
        false,
    );
    fx.change(
        Kind::EndpointSlice,
        slice("slice-new", "10.245.8.8", true),
        false,
    );
    fx.change(Kind::Node, node("node-c", "10.0.1.7", true, "1"), true);
    fx.expire_watches();
    let relisted_from = Instant::now();
    fx.set_fault(Fault::None);

    let after = wait_for(&live, "the relist", |v| {
        !v.stale && slice_named(v, "slice-new").is_some()
    });
    let mut names: Vec<&str> = after
        .state
        .endpoint_slices()
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    names.sort_unstable();
    let mut expected: Vec<String> = (0..SLICES)
        .filter(|n| ![3, 1_150].contains(n))
        .map(|n| format!("slice-{n}"))
        .chain(["slice-new".to_string()])
        .collect();
    expected.sort_unstable();
    assert_eq!(names, expected, "the slices the API lists, no more");
    let changed = slice_named(&after, "slice-700").expect("slice-700");
    assert_eq!(
        changed.endpoints[0].addresses.first(),
        Some(&changed_ip.parse().expect("ip"))
    );
    assert!(!changed.endpoints[0].ready);
    assert!(
        after
            .state
            .endpoints_with_address("10.245.2.200".parse().expect("ip"), None)
            .is_empty(),
        "slice-700's old address is no endpoint any more"
    );
    for unchanged in ["slice-0", "slice-699", "slice-1199"] {
        assert!(
            Arc::ptr_eq(
                slice_named(&before, unchanged).expect("before"),
                slice_named(&after, unchanged).expect("after")
            ),
            "{unchanged}: the object already held, not a copy"
        );
    }
    let nodes: Vec<&str> = after
        .state
        .nodes()
        .iter()
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(nodes, ["node-b"]);
    assert!(
        after
            .state
            .departed_node_by_ip("10.0.1.7".parse().expect("ip"))
            .is_none(),
        "a node gone in a relist is not one the watch saw deleted"
    );

    let slice_lists: Vec<String> = requests_of(&fx, Kind::EndpointSlice, relisted_from)
        .into_iter()
        .filter(|l| l.verb == Verb::List)
        .map(|l| l.line)
        .collect();
    assert_eq!(
        slice_lists,
        [
            "list limit=500",
            "list limit=500 continue",
            "list limit=500 continue"
        ],
        "one relist, in pages"
    );
    fx.stop();
}
