//! The cluster model, its verdicts and the identities of records, against hand-written
//! `kubectl get pods,services,endpointslices,nodes -A -o json` fixtures (`fixtures/`,
//! `fixtures/make_fixtures.py` regenerates them), to pin down the answers the tracer must give for
//! two incidents:
//! (a) "webhooks": a Service selector that also matched a worker Deployment whose pods do not
//! listen on the Service port;
//! (b) "file-service": an EndpointSlice still pointing at a deleted pod's IP.
#![expect(clippy::unwrap_used, reason = "test assertions")]

#[path = "../../tests/src/temp_file.rs"]
mod temp_file;

use std::net::{IpAddr, SocketAddr};

use tracer::{
    identity::cluster::{AddressIdentity, ClusterError, ClusterState, Proto, TargetPort},
    verdict::{RefusedBy, Verdict},
};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn at(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

/// A fixture from `fixtures/`, as `kubectl get pods,services,endpointslices,nodes -A -o json`
/// prints it.
fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn load(name: &str) -> ClusterState {
    ClusterState::from_kubectl_json(&fixture(name)).unwrap()
}

const WEB: [(&str, &str, &str); 4] = [
    ("webhooks-86c79d5f77-2xk9p", "10.244.131.21", "node-a"),
    ("webhooks-86c79d5f77-7fjlm", "10.244.154.22", "node-b"),
    ("webhooks-86c79d5f77-b8q4z", "10.244.131.23", "node-a"),
    ("webhooks-86c79d5f77-tz6wn", "10.244.154.24", "node-b"),
];
const WORKERS: [(&str, &str, &str); 2] = [
    ("webhooks-worker-9d9667f58-hm2vd", "10.244.131.31", "node-a"),
    ("webhooks-worker-9d9667f58-qs8rx", "10.244.154.32", "node-b"),
];

// ---------------------------------------------------------------- webhooks

#[test]
fn webhooks_loads_everything() {
    let st = load("webhooks.json");
    assert_eq!(st.pods().len(), 7);
    assert_eq!(st.services().len(), 2);
    assert_eq!(st.endpoint_slices().len(), 2);
    assert_eq!(st.nodes().len(), 2);
}

#[test]
fn webhooks_describe_service_vip() {
    let st = load("webhooks.json");
    match st.describe(ip("10.96.188.1"), 8080, Proto::Tcp) {
        AddressIdentity::Service { service, port } => {
            assert_eq!(service.key(), "app/webhooks");
            let port = port.unwrap();
            assert_eq!(port.name.as_deref(), Some("http"));
            assert_eq!(port.target_port, TargetPort::Name("http".into()));
        }
        other => panic!("{other:?}"),
    }
    // VIP, but a port the Service does not expose.
    match st.describe(ip("10.96.188.1"), 9090, Proto::Tcp) {
        AddressIdentity::Service { service, port } => {
            assert_eq!(service.name, "webhooks");
            assert!(port.is_none());
        }
        other => panic!("{other:?}"),
    }
    let (svc, port) = st
        .service_by_cluster_ip(ip("10.96.188.1"), 8080, Proto::Tcp)
        .unwrap();
    assert_eq!((svc.name.as_str(), port.port), ("webhooks", 8080));
    assert!(
        st.service_by_cluster_ip(ip("10.96.188.1"), 8080, Proto::Udp)
            .is_none()
    );
    assert!(
        st.service_by_cluster_ip(ip("10.96.188.2"), 8080, Proto::Tcp)
            .is_none()
    );
}

#[test]
fn webhooks_describe_web_pods() {
    let st = load("webhooks.json");
    for (name, addr, node) in WEB {
        match st.describe(ip(addr), 8080, Proto::Tcp) {
            AddressIdentity::Pod {
                pod,
                declared_port,
                endpoint_of,
            } => {
                assert_eq!(pod.name, name);
                assert_eq!(pod.namespace, "app");
                assert_eq!(pod.node_name.as_deref(), Some(node));
                assert!(pod.ready);
                let owner = pod.owner.as_ref().unwrap();
                assert_eq!(
                    (owner.kind.as_str(), owner.name.as_str()),
                    ("ReplicaSet", "webhooks-86c79d5f77")
                );
                assert_eq!(pod.workload().unwrap().name, "webhooks");
                assert_eq!(declared_port.unwrap().name.as_deref(), Some("http"));
                assert_eq!(endpoint_of.len(), 1);
                assert_eq!(endpoint_of[0].service_name, Some("webhooks"));
            }
            other => panic!("{addr}: {other:?}"),
        }
    }
}

#[test]
fn webhooks_describe_worker_pods() {
    let st = load("webhooks.json");
    for (name, addr, node) in WORKERS {
        match st.describe(ip(addr), 8080, Proto::Tcp) {
            AddressIdentity::Pod {
                pod,
                declared_port,
                endpoint_of,
            } => {
                assert_eq!(pod.name, name);
                assert_eq!(pod.node_name.as_deref(), Some(node));
                assert!(pod.ready);
                let owner = pod.owner.as_ref().unwrap();
                assert_eq!(
                    (owner.kind.as_str(), owner.name.as_str()),
                    ("ReplicaSet", "webhooks-worker-9d9667f58")
                );
                assert_eq!(pod.workload().unwrap().name, "webhooks-worker");
                // The worker does not declare a listener on 8080 ...
                assert!(declared_port.is_none());
                assert!(pod.container_ports.is_empty());
                // ... yet the webhooks Service sends traffic to it.
                assert_eq!(endpoint_of.len(), 1);
                assert_eq!(endpoint_of[0].service_name, Some("webhooks"));
            }
            other => panic!("{addr}: {other:?}"),
        }
    }
}

#[test]
fn webhooks_worker_is_endpoint_of_service() {
    let st = load("webhooks.json");
    let (name, addr, _) = WORKERS[0];
    for port in [None, Some(8080)] {
        let refs = st.endpoints_with_address(ip(addr), port);
        assert_eq!(refs.len(), 1, "{port:?}");
        let r = refs[0];
        assert_eq!(r.service_name, Some("webhooks"));
        assert_eq!(r.service.unwrap().key(), "app/webhooks");
        assert_eq!(r.slice.name, "webhooks-5lq8t");
        assert!(r.endpoint.ready);
        let t = r.endpoint.target_ref.as_ref().unwrap();
        assert_eq!((&*t.kind, &*t.name), ("Pod", name));
        assert_eq!(r.port.map(|p| p.port), port.map(Some));
    }
    // Another port: the slice does not carry it.
    assert!(st.endpoints_with_address(ip(addr), Some(9090)).is_empty());
}

#[test]
fn webhooks_selector_matches_workers_too() {
    let st = load("webhooks.json");
    let svc = st.service("app", "webhooks").unwrap();
    let worker = st.pod_by_ip(ip(WORKERS[0].1)).unwrap();
    assert!(st.selector_matches(svc, worker));
    // Explain which terms matched.
    let terms = st.selector_terms(svc, worker);
    assert_eq!(terms.len(), 2);
    assert!(terms.iter().all(|t| t.matched));
    assert!(
        terms
            .iter()
            .any(|t| t.key == "app" && t.value == "webhooks")
    );
    // No declared listener on the Service's target port.
    assert!(worker.declared_port(8080, Proto::Tcp).is_none());
    let svc_port = svc.port(8080, Proto::Tcp).unwrap();
    assert_eq!(st.target_port_on(svc_port, worker), None);
    let web = st.pod_by_ip(ip(WEB[0].1)).unwrap();
    assert_eq!(st.target_port_on(svc_port, web), Some(8080));

    let selected: Vec<&str> = st
        .pods_selected_by(svc)
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let mut expected: Vec<&str> = WEB.iter().chain(&WORKERS).map(|p| p.0).collect();
    expected.sort_unstable();
    assert_eq!(selected, expected);

    // kube-proxy is in another namespace and has other labels.
    let kp = st
        .pod_by_uid("1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d")
        .unwrap();
    assert!(!st.selector_matches(svc, kp));
    // A Service without selector selects nothing.
    let k8s = st.service("default", "kubernetes").unwrap();
    assert!(st.pods_selected_by(k8s).is_empty());
}

#[test]
fn webhooks_pod_by_uid() {
    let st = load("webhooks.json");
    let p = st
        .pod_by_uid("e6a8c0d2-4186-4fc2-935a-e6a8c0d2f4b5")
        .unwrap();
    assert_eq!(p.name, "webhooks-worker-9d9667f58-hm2vd");
    assert!(
        st.pod_by_uid("00000000-0000-0000-0000-000000000000")
            .is_none()
    );
}

#[test]
fn webhooks_describe_nodes_and_host_network() {
    let st = load("webhooks.json");
    // node-a's IP is also kube-proxy's (hostNetwork) pod IP: not a pod IP.
    assert!(st.pod_by_ip(ip("172.18.0.2")).is_none());
    assert_eq!(st.node_by_ip(ip("172.18.0.3")).unwrap().name, "node-b");
    match st.describe(ip("172.18.0.2"), 10249, Proto::Tcp) {
        AddressIdentity::Node {
            node,
            host_network_pod,
            ..
        } => {
            assert_eq!(node.name, "node-a");
            assert_eq!(node.pod_cidrs, vec!["10.244.131.0/24".to_string()]);
            assert_eq!(host_network_pod.unwrap().name, "kube-proxy-7hxqv");
            assert_eq!(
                host_network_pod.unwrap().owner.as_ref().unwrap().kind,
                "DaemonSet"
            );
        }
        other => panic!("{other:?}"),
    }
    // The apiserver endpoint of Service `kubernetes` is node-a.
    match st.describe(ip("172.18.0.2"), 6443, Proto::Tcp) {
        AddressIdentity::Node {
            node,
            host_network_pod,
            endpoint_of,
        } => {
            assert_eq!(node.name, "node-a");
            assert!(host_network_pod.is_none());
            assert_eq!(endpoint_of.len(), 1);
            assert_eq!(endpoint_of[0].service_name, Some("kubernetes"));
        }
        other => panic!("{other:?}"),
    }
    match st.describe(ip("172.18.0.3"), 22, Proto::Tcp) {
        AddressIdentity::Node { node, .. } => assert_eq!(node.name, "node-b"),
        other => panic!("{other:?}"),
    }
    match st.describe(ip("10.96.0.1"), 443, Proto::Tcp) {
        AddressIdentity::Service { service, port } => {
            assert_eq!(service.key(), "default/kubernetes");
            assert_eq!(port.unwrap().target_port, TargetPort::Number(6443));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn describe_outside_cluster_is_unknown() {
    let st = load("webhooks.json");
    match st.describe(ip("93.184.216.34"), 443, Proto::Tcp) {
        AddressIdentity::Unknown {
            endpoint_of,
            pod_cidr_of,
        } => {
            assert!(endpoint_of.is_empty());
            assert!(pod_cidr_of.is_none());
        }
        other => panic!("{other:?}"),
    }
}

// ------------------------------------------------------------ file-service

#[test]
fn file_service_describe_vip() {
    let st = load("file-service.json");
    match st.describe(ip("10.96.31.1"), 80, Proto::Tcp) {
        AddressIdentity::Service { service, port } => {
            assert_eq!(service.key(), "app/file-service");
            assert_eq!(port.unwrap().target_port, TargetPort::Number(8012));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn file_service_backend_is_no_live_pod() {
    let st = load("file-service.json");
    let gone = ip("10.244.154.66");
    // A Succeeded Job pod still lists this IP in status, but it is not current.
    assert!(st.pods().iter().any(|p| p.ips.contains(&gone)));
    assert!(st.pod_by_ip(gone).is_none());

    let refs = st.endpoints_with_address(gone, Some(8012));
    assert_eq!(refs.len(), 1);
    let r = refs[0];
    assert_eq!(r.service_name, Some("file-service"));
    assert_eq!(r.port.unwrap().port, Some(8012));
    assert!(r.endpoint.ready, "the stale endpoint is still marked ready");
    assert_eq!(r.endpoint.node_name.as_deref(), Some("node-b"));
    let t = r.endpoint.target_ref.as_ref().unwrap();
    assert_eq!(&*t.name, "file-resolver-5f8d7c6b4-9wz2k");
    // The pod it names does not exist any more.
    assert!(st.pods().iter().all(|p| *p.name != *t.name));

    match st.describe(gone, 8012, Proto::Tcp) {
        AddressIdentity::Unknown {
            endpoint_of,
            pod_cidr_of,
        } => {
            assert_eq!(endpoint_of.len(), 1);
            assert_eq!(endpoint_of[0].service_name, Some("file-service"));
            assert_eq!(pod_cidr_of.unwrap().name, "node-b");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn file_service_live_pod() {
    let st = load("file-service.json");
    match st.describe(ip("10.244.131.127"), 8012, Proto::Tcp) {
        AddressIdentity::Pod {
            pod,
            declared_port,
            endpoint_of,
        } => {
            assert_eq!(pod.name, "file-service-7d4b9c8f6-x2x9z");
            assert_eq!(pod.node_name.as_deref(), Some("node-a"));
            assert!(pod.ready);
            assert_eq!(pod.owner.as_ref().unwrap().name, "file-service-7d4b9c8f6");
            assert_eq!(declared_port.unwrap().port, 8012);
            assert_eq!(endpoint_of.len(), 1);
            assert_eq!(endpoint_of[0].service_name, Some("file-service"));
        }
        other => panic!("{other:?}"),
    }
    let svc = st.service("app", "file-service").unwrap();
    let names: Vec<&str> = st
        .pods_selected_by(svc)
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["file-service-7d4b9c8f6-x2x9z"]);
}

// ------------------------------------------------------------------ errors

#[test]
fn malformed_json_is_an_error() {
    for text in [
        "",
        "{",
        "{\"items\": [",
        "not json",
        "{\"items\": []} trailing",
    ] {
        let err = ClusterState::from_kubectl_json(text).unwrap_err();
        assert!(matches!(err, ClusterError::Syntax(_)), "{text:?}: {err:?}");
        let msg = err.to_string();
        assert!(msg.starts_with("malformed JSON"), "{msg}");
        assert!(msg.contains("line"), "{msg}");
    }
}

#[test]
fn wrong_top_level_shape_is_an_error() {
    for (text, needle) in [
        ("[1, 2]", "an array"),
        ("42", "a number"),
        ("{\"foo\": 1}", "neither `items` nor `kind`"),
        ("{\"kind\": \"ConfigMap\"}", "`ConfigMap`"),
        (
            "{\"kind\": \"List\", \"items\": {}}",
            "`items` is an object",
        ),
    ] {
        let err = ClusterState::from_kubectl_json(text).unwrap_err();
        assert!(matches!(err, ClusterError::NotAList(_)), "{text}: {err:?}");
        assert!(err.to_string().contains(needle), "{err}");
    }
}

#[test]
fn wrong_field_shape_names_path_and_object() {
    let text = r#"{"apiVersion":"v1","kind":"List","items":[
        {"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}},
        {"apiVersion":"v1","kind":"Service","metadata":{"name":"webhooks","namespace":"app"},
         "spec":{"ports":[{"name":"http","port":"eighty"}]}}
    ]}"#;
    let err = ClusterState::from_kubectl_json(text).unwrap_err();
    match &err {
        ClusterError::Shape { path, .. } => assert_eq!(path, "items[1].spec.ports[0].port"),
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("items[1].spec.ports[0].port"), "{msg}");
    assert!(msg.contains("Service app/webhooks"), "{msg}");
    assert!(msg.contains("invalid type"), "{msg}");

    // Missing required field.
    let text = r#"{"kind":"List","items":[{"kind":"Pod","metadata":{"namespace":"x"}}]}"#;
    let msg = ClusterState::from_kubectl_json(text)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("items[0].metadata"), "{msg}");
    assert!(msg.contains("missing field `name`"), "{msg}");

    // Item that is not an object.
    let text = r#"{"kind":"List","items":[17]}"#;
    let msg = ClusterState::from_kubectl_json(text)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("items[0]"), "{msg}");

    // Port out of range for a u16.
    let text = r#"{"kind":"List","items":[{"kind":"Pod","metadata":{"name":"p","namespace":"x"},
        "spec":{"containers":[{"name":"c","ports":[{"containerPort":70000}]}]}}]}"#;
    let msg = ClusterState::from_kubectl_json(text)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("items[0].spec.containers[0].ports[0].containerPort"),
        "{msg}"
    );
}

#[test]
fn lenient_inputs() {
    // Unknown kinds are skipped, headless Services have no VIP, null items ok,
    // a single object is accepted.
    let text = r#"{"apiVersion":"v1","kind":"List","items":[
        {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"x"},"data":{"a":"b"}},
        {"apiVersion":"v1","kind":"Service","metadata":{"name":"db","namespace":"x"},
         "spec":{"clusterIP":"None","clusterIPs":["None"],"ports":[{"port":5432}],"selector":{"app":"db"}}}
    ]}"#;
    let st = ClusterState::from_kubectl_json(text).unwrap();
    assert_eq!(st.services().len(), 1);
    assert!(st.services()[0].cluster_ips.is_empty());
    assert_eq!(st.services()[0].ports[0].protocol, Proto::Tcp);
    assert_eq!(
        st.services()[0].ports[0].target_port,
        TargetPort::Number(5432)
    );

    let st = ClusterState::from_kubectl_json(r#"{"kind":"List","items":null}"#).unwrap();
    assert!(st.pods().is_empty());

    let st = ClusterState::from_kubectl_json(
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"x","uid":"u"},
            "status":{"phase":"Running","podIP":"10.1.2.3"}}"#,
    )
    .unwrap();
    assert_eq!(st.pod_by_ip(ip("10.1.2.3")).unwrap().name, "p");
}

#[test]
fn target_port_int_or_string() {
    let svc = |tp: &str| {
        format!(
            r#"{{"kind":"Service","metadata":{{"name":"s","namespace":"x"}},"spec":{{"clusterIP":"10.96.0.9","ports":[{{"port":80,"targetPort":{tp}}}]}}}}"#
        )
    };
    let tp = |t: &str| {
        ClusterState::from_kubectl_json(&svc(t))
            .map(|s| s.services()[0].ports[0].target_port.clone())
    };
    assert_eq!(tp("8080").unwrap(), TargetPort::Number(8080));
    assert_eq!(tp("\"http\"").unwrap(), TargetPort::Name("http".into()));
    assert_eq!(tp("\"8080\"").unwrap(), TargetPort::Number(8080));
    let msg = tp("true").unwrap_err().to_string();
    assert!(msg.contains("spec.ports[0].targetPort"), "{msg}");
    assert!(msg.contains("expected IntOrString"), "{msg}");
    let msg = tp("70000").unwrap_err().to_string();
    assert!(msg.contains("spec.ports[0].targetPort"), "{msg}");
    assert!(msg.contains("a port number (0-65535)"), "{msg}");
}

// ----------------------------------------------------------------- verdicts

mod verdicts {
    use tracer::identity::{known::KnownCluster, verdicts::*};
    use tracer::verdict::ClusterVerdictKind;

    use super::*;

    /// A snapshot file has every pod: nothing is looked up.
    fn known(st: &ClusterState) -> KnownCluster<'_> {
        KnownCluster::complete(st)
    }

    #[test]
    fn a_rst_from_a_worker_pod_selected_by_the_webhooks_service_names_pod_owner_service_and_selector()
     {
        let st = load("webhooks.json");
        let v = for_connect(
            &known(&st),
            Verdict::Refused { by: RefusedBy::Rst },
            at("10.244.131.31:8080"),
            None,
        )
        .expect("verdict");
        assert_eq!(v.kind, ClusterVerdictKind::EndpointDoesNotListen);
        assert_eq!(
            v.explanation,
            "Refused by pod app/webhooks-worker-9d9667f58-hm2vd (Deployment webhooks-worker), a Ready \
             endpoint of Service app/webhooks: selector app=webhooks,app.kubernetes.io/component=webhooks \
             also matches webhooks-worker-9d9667f58-hm2vd, which declares no port 8080 (2 of the 6 pods \
             it matches declare no port 8080: about that share of connects is refused)."
        );
    }

    #[test]
    fn a_rst_from_a_web_pod_that_declares_the_port_says_nothing_listens() {
        let st = load("webhooks.json");
        let v = endpoint_does_not_listen(&known(&st), at("10.244.131.21:8080")).expect("verdict");
        assert!(
            v.explanation
                .contains("declares port 8080 but nothing listens"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn a_rst_from_an_address_that_is_no_endpoint_has_no_cluster_verdict() {
        let st = load("webhooks.json");
        assert_eq!(
            endpoint_does_not_listen(&known(&st), at("10.244.131.31:9090")),
            None
        );
        assert_eq!(
            endpoint_does_not_listen(&known(&st), at("93.184.216.34:443")),
            None
        );
    }

    #[test]
    fn an_unanswered_connect_to_the_deleted_resolver_ip_is_backend_is_no_live_pod() {
        let st = load("file-service.json");
        let v = for_connect(
            &known(&st),
            Verdict::Abandoned,
            at("10.244.154.66:8012"),
            Some(at("10.96.31.1:80")),
        )
        .expect("verdict");
        assert_eq!(v.kind, ClusterVerdictKind::BackendIsNoLivePod);
        assert_eq!(
            v.explanation,
            "No live pod has 10.244.154.66:8012: EndpointSlice file-service-q7w2n of Service \
             app/file-service still lists it for pod file-resolver-5f8d7c6b4-9wz2k, which no longer \
             exists, and this connect reached it through 10.96.31.1:80 (the address is in node node-b's \
             pod range); it last belonged to finished pod app/files-gc-28499520-kq7zt. The SYN goes \
             into a black hole."
        );
    }

    #[test]
    fn a_service_map_pointing_at_an_address_no_slice_lists_still_names_the_service() {
        // Incident 000: the slice was rewritten to the live resolver, the datapath kept the dead one.
        let st = load("file-service.json");
        let v = backend_is_no_live_pod(
            &known(&st),
            at("10.244.154.77:8012"),
            Some(at("10.96.31.1:80")),
        )
        .expect("verdict");
        assert!(
            v.explanation
                .contains("Service app/file-service at 10.96.31.1:80"),
            "{}",
            v.explanation
        );
        assert!(
            v.explanation
                .contains("Service map still points at a deleted pod"),
            "{}",
            v.explanation
        );
        // Without a Service in between and no slice listing it, an unknown address is not accused.
        assert_eq!(
            backend_is_no_live_pod(&known(&st), at("93.184.216.34:443"), None),
            None
        );
        assert_eq!(
            backend_is_no_live_pod(&known(&st), at("10.244.154.77:8012"), None),
            None
        );
    }

    #[test]
    fn live_pods_nodes_and_service_ips_are_not_backends_gone() {
        let st = load("file-service.json");
        assert_eq!(
            for_connect(
                &known(&st),
                Verdict::TimedOut,
                at("10.244.131.127:8012"),
                None
            ),
            None
        );
        assert_eq!(
            for_connect(&known(&st), Verdict::Slow, at("10.244.154.66:8012"), None),
            None
        );
    }

    #[test]
    fn a_black_hole_through_a_cluster_ip_names_the_dead_endpoint_the_service_balances_to() {
        let st = load("file-service.json");
        let v = for_connect(&known(&st), Verdict::Unanswered, at("10.96.31.1:80"), None)
            .expect("verdict");
        assert_eq!(v.kind, ClusterVerdictKind::BackendIsNoLivePod);
        assert!(
            v.explanation.contains(
                "balances connects to 10.244.154.66:8012 (pod file-resolver-5f8d7c6b4-9wz2k, gone)"
            ),
            "{}",
            v.explanation
        );
    }

    const DNS: &str = r#"{"kind":"List","items":[
      {"kind":"Node","metadata":{"name":"node-a"},"spec":{"podCIDR":"10.244.1.0/24"}},
      {"kind":"Service","metadata":{"name":"kube-dns","namespace":"kube-system"},
       "spec":{"clusterIP":"10.96.0.10","selector":{"k8s-app":"kube-dns"},
               "ports":[{"name":"dns","port":53,"protocol":"UDP"}]}},
      {"kind":"Pod","metadata":{"name":"coredns-5d78c9869d-r2xkq","namespace":"kube-system","uid":"u1",
        "labels":{"k8s-app":"kube-dns"}},"status":{"phase":"Running","podIP":"10.244.1.9"}},
      {"kind":"EndpointSlice","metadata":{"name":"kube-dns-abcde","namespace":"kube-system",
        "labels":{"kubernetes.io/service-name":"kube-dns"}},"addressType":"IPv4",
       "ports":[{"name":"dns","port":53,"protocol":"UDP"}],
       "endpoints":[{"addresses":["10.244.1.7"],"conditions":{"ready":true},
                     "targetRef":{"kind":"Pod","name":"coredns-5d78c9869d-8fz4w","namespace":"kube-system"}},
                    {"addresses":["10.244.1.9"],"conditions":{"ready":true},
                     "targetRef":{"kind":"Pod","name":"coredns-5d78c9869d-r2xkq","namespace":"kube-system"}}]}
    ]}"#;

    #[test]
    fn unanswered_dns_to_a_deleted_coredns_pod_names_the_live_ones() {
        let st = ClusterState::from_kubectl_json(DNS).expect("fixture");
        let v = dns_server_is_no_live_pod(&known(&st), at("10.244.1.7:53")).expect("verdict");
        assert_eq!(v.kind, ClusterVerdictKind::DnsServerIsNoLivePod);
        assert!(v.explanation.starts_with(
            "No live pod has DNS server 10.244.1.7:53: EndpointSlice kube-dns-abcde still lists it for pod \
             coredns-5d78c9869d-8fz4w, which no longer exists; Service kube-system/kube-dns's pods now are \
             coredns-5d78c9869d-r2xkq (10.244.1.9)."
        ), "{}", v.explanation);
        // A deleted DNS pod no slice lists any more: still in a pod range, still no pod.
        let v = dns_server_is_no_live_pod(&known(&st), at("10.244.1.8:53")).expect("verdict");
        assert!(
            v.explanation.contains("node node-a's pod range"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn dns_to_a_live_pod_the_service_ip_or_outside_the_cluster_is_no_verdict() {
        let st = ClusterState::from_kubectl_json(DNS).expect("fixture");
        assert_eq!(
            dns_server_is_no_live_pod(&known(&st), at("10.244.1.9:53")),
            None
        );
        assert_eq!(
            dns_server_is_no_live_pod(&known(&st), at("10.96.0.10:53")),
            None
        );
        assert_eq!(
            dns_server_is_no_live_pod(&known(&st), at("8.8.8.8:53")),
            None
        );
    }
}

// --------------------------------------------------------------- identities

mod identities {
    use std::sync::Arc;

    use tracer::identity::{Identities, Identity, source::ClusterSource};
    use tracer::verdict::ClusterVerdictKind;

    use super::*;

    fn with_state(file: &str) -> Identities {
        let source = ClusterSource::File {
            state: Arc::new(load(file)),
            written: std::time::SystemTime::now(),
        };
        Identities::new(None, Some(source))
    }

    #[test]
    fn a_refused_connect_from_one_pod_to_a_worker_pod_carries_both_names_and_the_verdict() {
        let mut ids = with_state("webhooks.json");
        // From a web pod (named by its address: no cgroup here) to a worker pod.
        let id = ids.connect(
            0,
            at("10.244.131.21:40522"),
            at("10.244.154.32:8080"),
            None,
            Verdict::Refused { by: RefusedBy::Rst },
        );
        assert_eq!(id.src_pod.as_deref(), Some("webhooks-86c79d5f77-2xk9p"));
        assert_eq!(id.src_namespace.as_deref(), Some("app"));
        assert_eq!(id.src_owner.as_deref(), Some("Deployment/webhooks"));
        assert_eq!(
            id.dst_pod.as_deref(),
            Some("webhooks-worker-9d9667f58-qs8rx")
        );
        assert_eq!(id.dst_owner.as_deref(), Some("Deployment/webhooks-worker"));
        assert_eq!(
            (id.dst_node.as_deref(), id.dst_ready),
            (Some("node-b"), Some(true))
        );
        assert_eq!(id.dst_service.as_deref(), Some("app/webhooks"));
        assert_eq!(id.dst_endpoint_of, ["app/webhooks"]);
        assert_eq!(
            id.cluster_verdict.map(ClusterVerdictKind::name),
            Some("endpoint does not listen")
        );
        assert_eq!(
            (id.identity_source.as_deref(), id.identity_stale),
            (Some("file"), false)
        );
    }

    #[test]
    fn a_dialled_service_ip_names_the_service_and_the_backend_pod() {
        let mut ids = with_state("file-service.json");
        let id = ids.connect(
            0,
            at("10.244.131.5:1234"),
            at("10.244.131.127:8012"),
            Some(at("10.96.31.1:80")),
            Verdict::Slow,
        );
        assert_eq!(id.dst_service.as_deref(), Some("app/file-service"));
        assert_eq!(id.dst_pod, None);
        assert_eq!(
            id.backend_pod.as_deref(),
            Some("file-service-7d4b9c8f6-x2x9z")
        );
        assert_eq!(
            (id.backend_node.as_deref(), id.backend_ready),
            (Some("node-a"), Some(true))
        );
        assert_eq!(id.cluster_verdict, None, "answered: nothing to say");
    }

    #[test]
    fn a_rst_from_the_backend_kube_proxy_chose_is_judged_on_that_backend() {
        // The app dialled the webhooks cluster IP; conntrack showed the DNAT to a worker pod.
        let mut ids = with_state("webhooks.json");
        let id = ids.connect(
            0,
            at("10.244.131.21:40522"),
            at("10.244.131.31:8080"),
            Some(at("10.96.188.1:8080")),
            Verdict::Refused { by: RefusedBy::Rst },
        );
        assert_eq!(id.dst_service.as_deref(), Some("app/webhooks"));
        assert_eq!(id.dst_port_name.as_deref(), Some("http"));
        assert_eq!(
            id.backend_pod.as_deref(),
            Some("webhooks-worker-9d9667f58-hm2vd")
        );
        assert_eq!(
            id.cluster_verdict.map(ClusterVerdictKind::name),
            Some("endpoint does not listen")
        );
    }

    #[test]
    fn without_cluster_state_only_the_process_side_is_named() {
        let mut ids = Identities::new(None, None);
        let id = ids.connect(
            0,
            at("10.0.0.1:1"),
            at("10.0.0.2:2"),
            None,
            Verdict::Abandoned,
        );
        assert_eq!(id, Identity::default());
        assert_eq!(ids.dns_server_verdict(at("10.0.0.2:53")), None);
    }

    #[test]
    fn a_kubepods_cgroup_names_the_pod_by_uid() {
        let root = std::env::temp_dir().join(format!("tracer-identity-cg-{}", std::process::id()));
        let dir = root.join(
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pode6a8c0d2_4186_4fc2_935a_e6a8c0d2f4b5.slice/\
             cri-containerd-4f9d1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7.scope",
        );
        std::fs::create_dir_all(&dir).expect("mkdir");
        let cgroup_id =
            std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&dir).expect("stat"));
        let source = ClusterSource::File {
            state: Arc::new(load("webhooks.json")),
            written: std::time::SystemTime::now(),
        };
        let mut ids = Identities::new(Some(root.clone()), Some(source));
        let id = ids.healthy(cgroup_id, at("10.96.188.1:8080"));
        std::fs::remove_dir_all(&root).expect("cleanup");
        assert_eq!(
            id.src_pod.as_deref(),
            Some("webhooks-worker-9d9667f58-hm2vd")
        );
        assert_eq!(id.src_container.as_deref(), Some("4f9d1a2b3c4d"));
        assert!(
            id.src_cgroup
                .as_deref()
                .is_some_and(|p| p.starts_with("/kubepods.slice/"))
        );
        assert_eq!(
            (id.dst_service.as_deref(), id.dst_port_name.as_deref()),
            (Some("app/webhooks"), Some("http"))
        );
    }
}

// ------------------------------------------------------------------- source

mod source {
    use std::time::Duration;

    use tracer::identity::source::ClusterSource;

    use super::*;

    #[test]
    fn a_snapshot_file_loads_and_says_where_names_come_from() {
        // A fresh copy: the age is the file's.
        let path = temp_file::temp_file("webhooks.json", fixture("webhooks.json"));
        let view = ClusterSource::from_file(std::path::Path::new(&*path))
            .expect("load")
            .view();
        assert_eq!((view.source, view.stale), ("file", false));
        assert_eq!(view.state.pods().len(), 7);
        assert!(view.age < Duration::from_mins(1));
    }
}
