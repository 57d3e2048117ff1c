//! Replays two incidents against hand-written `kubectl get ... -o json`
//! fixtures, to pin down the answers the tracer must give:
//! (a) "webhooks": a Service selector that also matched a worker Deployment
//! whose pods do not listen on the Service port;
//! (b) "file-service": an EndpointSlice still pointing at a deleted pod's IP.
#![expect(clippy::unwrap_used, reason = "test assertions")]

use std::net::IpAddr;

use super::cluster::{AddressIdentity, ClusterError, ClusterState, Proto, TargetPort};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A fixture from `identity/fixtures/`, as `kubectl get pods,services,endpointslices,nodes -A -o json`
/// prints it.
pub fn fixture(name: &str) -> String {
    let path = format!(
        "{}/src/identity/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap()
}

pub fn load(name: &str) -> ClusterState {
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
        assert_eq!((t.kind.as_str(), t.name.as_str()), ("Pod", name));
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
    assert_eq!(t.name, "file-resolver-5f8d7c6b4-9wz2k");
    // The pod it names does not exist any more.
    assert!(st.pod_by_uid(t.uid.as_deref().unwrap()).is_none());

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
