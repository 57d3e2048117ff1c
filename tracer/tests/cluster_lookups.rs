//! Issue 29: with the live watch following only this node's pods, a failing record that needs a
//! pod elsewhere looks it up on demand (`identity/pod_lookup.rs`, `known.rs`), and the cluster
//! verdicts come out exactly as they do from a snapshot file with every pod. Against the fixture
//! API server (`tests/src/api_fixture/`, a stand-in speaking the API's JSON, not a real one), which
//! counts the lookups.
use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use kube::Config;
use serde_json::{Value, json};
use tracer::{
    identity::{
        Identities, Identity,
        cluster::ClusterState,
        source::ClusterSource,
        watch::{LiveCluster, LiveOptions},
    },
    verdict::ClusterVerdictKind,
    verdict::{RefusedBy, Verdict},
};

#[path = "../../tests/src/api_fixture/mod.rs"]
#[allow(
    dead_code,
    reason = "shared with the root tests crate and xtask, which use the rest"
)]
mod api_fixture;

use api_fixture::{ApiFixture, Kind, Logged, Verb};

fn at(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect("fixture")).expect("json")
}

/// Names from a snapshot file with every pod.
fn from_file(snapshot: &Value) -> Identities {
    let state = ClusterState::from_kubectl_json(&snapshot.to_string()).expect("snapshot");
    Identities::new(
        None,
        Some(ClusterSource::File {
            state: Arc::new(state),
            written: std::time::SystemTime::now(),
        }),
    )
}

/// Names from the fixture API serving the same snapshot, following `node`'s pods, once in sync.
fn from_api(fx: &ApiFixture, node: &str) -> Identities {
    let options = LiveOptions {
        node_name: node.into(),
        say: Arc::new(|_| {}),
    };
    let live =
        LiveCluster::start(Config::new(fx.url().parse().expect("url")), options).expect("client");
    let deadline = Instant::now() + Duration::from_secs(15);
    while live.view().stale {
        assert!(Instant::now() < deadline, "never in sync");
        std::thread::sleep(Duration::from_millis(20));
    }
    Identities::new(None, Some(ClusterSource::Live(live)))
}

/// Builds a record's identity until it waits for no lookup (as a held record is built again);
/// the identity and how many times it waited.
fn settled(ids: &mut Identities, build: impl Fn(&mut Identities) -> Identity) -> (Identity, usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for waited in 0.. {
        let id = build(ids);
        if ids.take_waiting().is_empty() {
            return (id, waited);
        }
        assert!(Instant::now() < deadline, "lookups never answered");
        std::thread::sleep(Duration::from_millis(10));
    }
    unreachable!("the loop returns or panics")
}

/// Everything but where the names came from.
fn names(mut id: Identity) -> Identity {
    id.identity_source = None;
    id.identity_age_s = None;
    id.identity_stale = false;
    id
}

fn lookups(fx: &ApiFixture) -> Vec<Logged> {
    fx.log()
        .into_iter()
        .filter(|l| l.kind == Some(Kind::Pod) && !l.field_selector.starts_with("spec.nodeName="))
        .collect()
}

struct Case {
    what: &'static str,
    src: &'static str,
    backend: &'static str,
    service: Option<&'static str>,
    verdict: Verdict,
    /// The cluster verdict both must give (`None`: none).
    expect: Option<&'static str>,
}

const REFUSED: Verdict = Verdict::Refused { by: RefusedBy::Rst };

/// The connects of `cases` named from the file and from the API (this node: `node`) give the
/// same identity, verdict and sentence included; the remote ones through lookups.
fn same_through_lookups(snapshot: &Value, node: &str, cases: &[Case]) {
    let mut file = from_file(snapshot);
    let fx = ApiFixture::serve(snapshot);
    let mut api = from_api(&fx, node);
    for case in cases {
        let build = |ids: &mut Identities| {
            ids.connect(
                0,
                at(case.src),
                at(case.backend),
                case.service.map(at),
                case.verdict,
            )
        };
        let expected = build(&mut file);
        assert_eq!(
            expected.cluster_verdict.map(ClusterVerdictKind::name),
            case.expect,
            "{}: the file's verdict: {expected:#?}",
            case.what
        );
        let before = lookups(&fx).len();
        let (got, waited) = settled(&mut api, build);
        assert_eq!(names(got), names(expected), "{}", case.what);
        let asked = lookups(&fx).len() - before;
        assert_eq!(
            waited > 0,
            asked > 0,
            "{}: a record waits exactly when it asks ({asked} lookups)",
            case.what
        );
    }
}

#[test]
fn webhooks_verdicts_are_the_same_through_lookups() {
    // This node is node-a; the refusing pods run on node-b.
    same_through_lookups(
        &fixture("webhooks.json"),
        "node-a",
        &[
            Case {
                what: "a RST from a worker pod on another node",
                src: "10.244.131.21:40522",
                backend: "10.244.154.32:8080",
                service: None,
                verdict: REFUSED,
                expect: Some("endpoint does not listen"),
            },
            Case {
                what: "a RST from a web pod on another node, which declares the port",
                src: "10.244.131.21:40522",
                backend: "10.244.154.22:8080",
                service: None,
                verdict: REFUSED,
                expect: Some("endpoint does not listen"),
            },
            Case {
                what: "a RST from the backend kube-proxy chose behind the Service",
                src: "10.244.131.21:40522",
                backend: "10.244.154.32:8080",
                service: Some("10.96.188.1:8080"),
                verdict: REFUSED,
                expect: Some("endpoint does not listen"),
            },
            Case {
                what: "a RST from a worker pod on this node",
                src: "10.244.131.21:40522",
                backend: "10.244.131.31:8080",
                service: None,
                verdict: REFUSED,
                expect: Some("endpoint does not listen"),
            },
        ],
    );
}

#[test]
fn file_service_verdicts_are_the_same_through_lookups() {
    same_through_lookups(
        &fixture("file-service.json"),
        "node-a",
        &[
            Case {
                what: "a listed backend whose pod is gone, its address once a finished pod's",
                src: "10.244.131.5:1234",
                backend: "10.244.154.66:8012",
                service: Some("10.96.31.1:80"),
                verdict: Verdict::Abandoned,
                expect: Some("backend is no live pod"),
            },
            Case {
                what: "a Service map pointing at an address no slice lists",
                src: "10.244.131.5:1234",
                backend: "10.244.154.77:8012",
                service: Some("10.96.31.1:80"),
                verdict: Verdict::Unanswered,
                expect: Some("backend is no live pod"),
            },
            Case {
                what: "a black hole through the cluster IP, backend not seen",
                src: "10.244.131.5:1234",
                backend: "10.96.31.1:80",
                service: None,
                verdict: Verdict::Unanswered,
                expect: Some("backend is no live pod"),
            },
            Case {
                what: "a live pod on this node",
                src: "10.244.131.5:1234",
                backend: "10.244.131.127:8012",
                service: None,
                verdict: Verdict::TimedOut,
                expect: None,
            },
        ],
    );
}

/// Incident 004: DNS sent to a deleted CoreDNS pod, named through lookups as from the file.
#[test]
fn dns_verdicts_are_the_same_through_lookups() {
    let snapshot = json!({"kind": "List", "items": [
      {"kind": "Node", "metadata": {"name": "node-a"}, "spec": {"podCIDR": "10.244.1.0/24"}},
      {"kind": "Node", "metadata": {"name": "node-z"}, "spec": {"podCIDR": "10.244.9.0/24"}},
      {"kind": "Service", "metadata": {"name": "kube-dns", "namespace": "kube-system"},
       "spec": {"clusterIP": "10.96.0.10", "selector": {"k8s-app": "kube-dns"},
                "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}},
      {"kind": "Pod", "metadata": {"name": "coredns-5d78c9869d-r2xkq", "namespace": "kube-system", "uid": "u1",
        "labels": {"k8s-app": "kube-dns"}}, "spec": {"nodeName": "node-a"},
        "status": {"phase": "Running", "podIP": "10.244.1.9"}},
      {"kind": "EndpointSlice", "metadata": {"name": "kube-dns-abcde", "namespace": "kube-system",
        "labels": {"kubernetes.io/service-name": "kube-dns"}}, "addressType": "IPv4",
       "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}],
       "endpoints": [{"addresses": ["10.244.1.7"], "conditions": {"ready": true},
                      "targetRef": {"kind": "Pod", "name": "coredns-5d78c9869d-8fz4w", "namespace": "kube-system"}},
                     {"addresses": ["10.244.1.9"], "conditions": {"ready": true},
                      "targetRef": {"kind": "Pod", "name": "coredns-5d78c9869d-r2xkq", "namespace": "kube-system"}}]}
    ]});
    let mut file = from_file(&snapshot);
    let fx = ApiFixture::serve(&snapshot);
    // The CoreDNS pods run on node-a; this tracer runs on node-z.
    let mut api = from_api(&fx, "node-z");
    for server in [
        "10.244.1.7:53",
        "10.244.1.8:53",
        "10.244.1.9:53",
        "8.8.8.8:53",
    ] {
        let expected = file.dns_server_verdict(at(server));
        let deadline = Instant::now() + Duration::from_secs(10);
        let got = loop {
            let got = api.dns_server_verdict(at(server));
            if api.take_waiting().is_empty() {
                break got;
            }
            assert!(Instant::now() < deadline, "never answered");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(got, expected, "DNS server {server}");
    }
    assert!(
        lookups(&fx).iter().all(|l| l.line.contains("rv=0")),
        "every lookup from the API server's cache: {:#?}",
        lookups(&fx)
    );
}

fn pod(name: &str, node: &str, ip: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "batch", "uid": format!("uid-{name}"),
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "nightly",
                                             "uid": "uid-job", "controller": true}]},
           "spec": {"nodeName": node, "containers": [{"name": "c"}]},
           "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// Two nodes; node-b runs `pods` batch pods that no EndpointSlice lists.
fn batch_cluster(pods: u8) -> Value {
    let mut items = vec![
        json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "node-a"}, "spec": {"podCIDR": "10.244.1.0/24"}}),
        json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "node-b"}, "spec": {"podCIDR": "10.244.2.0/24"}}),
    ];
    for n in 0..pods {
        items.push(pod(
            &format!("batch-{n}"),
            "node-b",
            &format!("10.244.2.{}", 10 + u32::from(n)),
        ));
    }
    json!({"kind": "List", "items": items})
}

/// A refused connect straight to a pod on another node that no EndpointSlice lists is named by
/// one `status.podIP` lookup, kept: the same record again asks nothing; a healthy connect never
/// asks, nor one to an address outside every pod range.
#[test]
fn a_pod_no_endpointslice_lists_is_named_by_one_cached_lookup() {
    let fx = ApiFixture::serve(&batch_cluster(3));
    let mut api = from_api(&fx, "node-a");
    let refused = |to: &'static str| {
        move |ids: &mut Identities| ids.connect(0, at("10.244.1.5:40000"), at(to), None, REFUSED)
    };
    let (id, waited) = settled(&mut api, refused("10.244.2.11:9000"));
    assert!(waited > 0, "it waited for the lookup");
    assert_eq!(id.dst_pod.as_deref(), Some("batch-1"), "{id:#?}");
    assert_eq!(id.dst_namespace.as_deref(), Some("batch"));
    assert_eq!(id.dst_owner.as_deref(), Some("Job/nightly"));
    assert_eq!(id.dst_node.as_deref(), Some("node-b"));
    let asked = lookups(&fx);
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert_eq!(asked[0].verb, Verb::List);
    assert_eq!(asked[0].field_selector, "status.podIP=10.244.2.11");
    assert!(asked[0].line.contains("rv=0"), "{asked:#?}");

    for _ in 0..5 {
        let (again, waited) = settled(&mut api, refused("10.244.2.11:9000"));
        assert_eq!(waited, 0);
        assert_eq!(again.dst_pod.as_deref(), Some("batch-1"));
    }
    let healthy = api.healthy(0, at("10.244.2.12:9000"));
    assert_eq!(healthy.dst_pod, None, "not looked up, in no slice");
    let (outside, waited) = settled(&mut api, refused("93.184.216.34:443"));
    assert_eq!((outside.dst_pod, waited), (None, 0));
    assert_eq!(lookups(&fx).len(), 1, "{:#?}", lookups(&fx));
    let stats = api.stats(0).and_then(|s| s.api).expect("api stats");
    assert_eq!(stats.lookups.requests, 1);
    assert_eq!(stats.lookups.answered, 1);
    // The held record built again once answered, then the five.
    assert_eq!(stats.lookups.cache_hits, 6);
}

/// A healthy connect to a pod elsewhere is named from its EndpointSlice, with no lookup.
#[test]
fn a_healthy_connect_names_a_remote_endpoint_from_its_slice_without_a_lookup() {
    let fx = ApiFixture::serve(&fixture("webhooks.json"));
    let mut api = from_api(&fx, "node-a");
    let id = api.healthy(0, at("10.244.154.22:8080"));
    assert!(api.take_waiting().is_empty());
    assert_eq!(id.dst_pod.as_deref(), Some("webhooks-86c79d5f77-7fjlm"));
    assert_eq!(id.dst_node.as_deref(), Some("node-b"));
    assert_eq!(id.dst_service.as_deref(), Some("app/webhooks"));
    assert!(lookups(&fx).is_empty(), "{:#?}", lookups(&fx));
}

/// A burst of failing connects to many pods elsewhere: the lookups stop at the burst and are
/// counted; the records go out with what is known.
#[test]
fn lookups_are_rate_limited_and_counted() {
    let fx = ApiFixture::serve(&batch_cluster(60));
    let mut api = from_api(&fx, "node-a");
    for n in 0..60 {
        let to = at(&format!("10.244.2.{}:9000", 10 + n));
        let _ = api.connect(0, at("10.244.1.5:40000"), to, None, Verdict::TimedOut);
        let _ = api.take_waiting();
    }
    std::thread::sleep(Duration::from_millis(500));
    let stats = api.stats(0).and_then(|s| s.api).expect("api stats");
    assert!(
        (20..=22).contains(&stats.lookups.requests),
        "the burst of 20, and what 2/s adds meanwhile: {stats:#?}"
    );
    assert_eq!(
        stats.lookups.requests + stats.lookups.rate_limited,
        60,
        "{stats:#?}"
    );
    assert_eq!(lookups(&fx).len() as u64, stats.lookups.requests);
}
