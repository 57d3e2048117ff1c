//! What the cluster says about the demo's addresses, in the kubectl JSON `--cluster-state` reads
//! (`kubectl get pods,services,endpointslices,nodes -A -o json`), so the demo shows pod and Service
//! names and the cluster verdicts as a node with cluster state would:
//!
//! - the client is pod `demo/frontend-…`;
//! - Service `demo/web` (10.96.0.10:80): its EndpointSlice still lists the deleted pod at
//!   10.250.0.11 next to the live one (`backend is no live pod`);
//! - Service `demo/reports`: its selector also matches a worker pod at 10.250.0.12 that declares no
//!   port 8080 (`endpoint does not listen`);
//! - Service `demo/checkout` (10.96.0.20:80) has no endpoints;
//! - `kube-system/kube-dns` (10.96.0.53): its pod now is 10.250.0.53; the old one, 10.250.0.54,
//!   is gone from the node's pod range (`DNS server is no live pod`).
use std::{net::Ipv4Addr, path::Path};

use anyhow::Context as _;
use serde_json::{Value, json};

use super::addresses::{
    CLIENT, DNS_LIVE, DNS_SERVICE, NO_ENDPOINTS, NOT_LISTENING, POD_NET, WEB_DEAD, WEB_LIVE,
    WEB_PORT, WEB_SERVICE,
};

pub const NODE: &str = "demo-node";
pub const CLIENT_POD: &str = "frontend-7c9f8d6b5-k2x7p";
pub const WEB_POD: &str = "web-6c9d8f7b5-4jz2q";
/// The web pod that was deleted; its EndpointSlice still lists its address.
pub const WEB_GONE_POD: &str = "web-6c9d8f7b5-8wq1n";
pub const WORKER_POD: &str = "reports-worker-5b7d9c8f4-q9m3t";
pub const DNS_POD: &str = "coredns-5d78c9869d-7xk2p";

/// Writes the demo's cluster state to `path`.
pub fn write(path: &Path) -> anyhow::Result<()> {
    std::fs::write(path, state().to_string())
        .with_context(|| format!("writing the demo's cluster state to {}", path.display()))
}

/// The pods, Services, EndpointSlices and the node, as one kubectl `List`.
pub fn state() -> Value {
    let (web_ip, web_port) = WEB_SERVICE;
    let (checkout_ip, checkout_port) = NO_ENDPOINTS;
    let (worker_ip, worker_port) = NOT_LISTENING;
    let web = json!({"app": "web"});
    let reports = json!({"app": "reports"});
    let dns = json!({"k8s-app": "kube-dns"});
    let pod_cidr = format!("{POD_NET}/24");
    json!({"apiVersion": "v1", "kind": "List", "items": [
        pod("demo", CLIENT_POD, CLIENT, &json!({"app": "frontend"}), &json!([])),
        pod("demo", WEB_POD, WEB_LIVE, &web,
            &json!([{"name": "http", "containerPort": WEB_PORT, "protocol": "TCP"}])),
        pod("demo", WORKER_POD, worker_ip, &json!({"app": "reports", "component": "worker"}), &json!([])),
        pod("kube-system", DNS_POD, DNS_LIVE, &dns,
            &json!([{"name": "dns", "containerPort": 53, "protocol": "UDP"}])),
        service("demo", "web", web_ip, &web, &json!([{"name": "http", "port": web_port, "targetPort": WEB_PORT, "protocol": "TCP"}])),
        slice("demo", "web", "web-m4x7p", &json!([{"name": "http", "port": WEB_PORT, "protocol": "TCP"}]),
              &[(WEB_LIVE, WEB_POD), (WEB_DEAD, WEB_GONE_POD)]),
        service("demo", "reports", Ipv4Addr::new(10, 96, 0, 30), &reports,
                &json!([{"name": "http", "port": worker_port, "targetPort": worker_port, "protocol": "TCP"}])),
        slice("demo", "reports", "reports-9tq2w", &json!([{"name": "http", "port": worker_port, "protocol": "TCP"}]),
              &[(worker_ip, WORKER_POD)]),
        service("demo", "checkout", checkout_ip, &json!({"app": "checkout"}),
                &json!([{"name": "http", "port": checkout_port, "targetPort": 8080, "protocol": "TCP"}])),
        slice("demo", "checkout", "checkout-b8r5k", &json!([{"name": "http", "port": 8080, "protocol": "TCP"}]), &[]),
        service("kube-system", "kube-dns", DNS_SERVICE, &dns,
                &json!([{"name": "dns", "port": 53, "targetPort": 53, "protocol": "UDP"}])),
        slice("kube-system", "kube-dns", "kube-dns-h7k4d", &json!([{"name": "dns", "port": 53, "protocol": "UDP"}]),
              &[(DNS_LIVE, DNS_POD)]),
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
         "spec": {"podCIDR": pod_cidr, "podCIDRs": [pod_cidr]},
         // A documentation address: the node's own address carries no demo traffic.
         "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.10"}],
                    "conditions": [{"type": "Ready", "status": "True"}]}}
    ]})
}

/// A Running, Ready pod of a Deployment (owned by its ReplicaSet, as kubectl shows it).
fn pod(namespace: &str, name: &str, ip: Ipv4Addr, labels: &Value, ports: &Value) -> Value {
    let replica_set = name.rsplit_once('-').map_or(name, |(rs, _)| rs);
    let hash = replica_set.rsplit_once('-').map_or("", |(_, h)| h);
    let mut labels = labels.clone();
    labels["pod-template-hash"] = json!(hash);
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"), "labels": labels,
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replica_set,
                                          "uid": format!("uid-{replica_set}"), "controller": true}]},
        "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "demo:1", "ports": ports}]},
        "status": {"phase": "Running", "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}],
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

fn service(namespace: &str, name: &str, ip: Ipv4Addr, selector: &Value, ports: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
           "spec": {"type": "ClusterIP", "clusterIP": ip.to_string(), "clusterIPs": [ip.to_string()],
                    "selector": selector, "ports": ports}})
}

/// An EndpointSlice of Service `service` with one Ready endpoint per (address, pod).
fn slice(
    namespace: &str,
    service: &str,
    name: &str,
    ports: &Value,
    endpoints: &[(Ipv4Addr, &str)],
) -> Value {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|(ip, pod)| {
            json!({"addresses": [ip.to_string()],
                   "conditions": {"ready": true, "serving": true, "terminating": false},
                   "nodeName": NODE,
                   "targetRef": {"kind": "Pod", "namespace": namespace, "name": pod, "uid": format!("uid-{pod}")}})
        })
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
           "metadata": {"name": name, "namespace": namespace, "labels": {"kubernetes.io/service-name": service}},
           "ports": ports, "endpoints": endpoints})
}

#[cfg(test)]
mod tests {
    use std::net::{SocketAddr, SocketAddrV4};

    use super::*;
    use crate::demo::addresses::DNS_DEAD;
    use crate::identity::{
        cluster::{AddressIdentity, ClusterState, Proto},
        verdicts,
    };
    use crate::verdict::ClusterVerdictKind;

    fn parsed() -> ClusterState {
        ClusterState::from_kubectl_json(&state().to_string()).expect("the demo's state parses")
    }

    fn at(ip: Ipv4Addr, port: u16) -> SocketAddr {
        SocketAddr::from(SocketAddrV4::new(ip, port))
    }

    #[test]
    fn names_the_client_and_the_live_pods() {
        let state = parsed();
        for (ip, name) in [
            (CLIENT, CLIENT_POD),
            (WEB_LIVE, WEB_POD),
            (NOT_LISTENING.0, WORKER_POD),
            (DNS_LIVE, DNS_POD),
        ] {
            let pod = state.pod_by_ip(ip.into()).expect("a pod");
            assert_eq!(pod.name, name);
            assert_eq!(
                pod.workload().map(|o| o.name),
                Some(name.rsplitn(3, '-').nth(2).expect("deployment").to_string()),
                "{name} belongs to its Deployment"
            );
        }
        let (web, port) = WEB_SERVICE;
        assert!(matches!(
            state.describe(web.into(), port, Proto::Tcp),
            AddressIdentity::Service { service, .. } if service.key() == "demo/web"
        ));
    }

    #[test]
    fn gives_each_black_hole_its_cluster_verdict() {
        let state = parsed();
        let state = crate::identity::known::KnownCluster::complete(&state);
        let (web, web_port) = WEB_SERVICE;
        let dead = verdicts::backend_is_no_live_pod(
            &state,
            at(WEB_DEAD, WEB_PORT),
            Some(at(web, web_port)),
        )
        .expect("the deleted web pod");
        assert_eq!(dead.kind, ClusterVerdictKind::BackendIsNoLivePod);
        assert!(
            dead.explanation.contains(WEB_GONE_POD),
            "{}",
            dead.explanation
        );

        let (worker, worker_port) = NOT_LISTENING;
        let refused = verdicts::endpoint_does_not_listen(&state, at(worker, worker_port))
            .expect("the worker pod");
        assert_eq!(refused.kind, ClusterVerdictKind::EndpointDoesNotListen);

        let dns = verdicts::dns_server_is_no_live_pod(&state, at(DNS_DEAD, 53))
            .expect("the deleted DNS pod");
        assert_eq!(dns.kind, ClusterVerdictKind::DnsServerIsNoLivePod);
        assert!(
            dns.explanation.contains(DNS_POD),
            "names the live one: {}",
            dns.explanation
        );
        assert!(
            verdicts::dns_server_is_no_live_pod(&state, at(DNS_LIVE, 53)).is_none(),
            "the live DNS pod is no black hole"
        );
    }
}
