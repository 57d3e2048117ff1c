//! What a node's address stands for. With a port: the Service whose `NodePort` it is (kube-proxy
//! opens a `NodePort` on the addresses of every node), so a connect to `<node>:30080` is named like
//! one to the Service's cluster IP even though the DNAT happens on that other node. Without: the
//! node itself, for a server whose replies go to another node's SNAT address.
use std::net::{IpAddr, SocketAddr};

use super::{
    Identity,
    cluster::{AddressIdentity, ClusterState, Node, Proto, Service, ServicePort},
};

/// A Service reached through a node's address and one of its `NodePort`s.
#[derive(Debug, Clone, Copy)]
pub struct NodePortService<'a> {
    pub node: &'a Node,
    pub service: &'a Service,
    pub port: &'a ServicePort,
}

/// The Service whose `nodePort` is `port` (for `proto`), when `ip` is a node's address.
pub fn service_by_node_port(
    state: &ClusterState,
    ip: IpAddr,
    port: u16,
    proto: Proto,
) -> Option<NodePortService<'_>> {
    let node = state.node_by_ip(ip)?;
    state.services().iter().find_map(|service| {
        service
            .ports
            .iter()
            .find(|p| p.node_port == Some(port) && p.protocol == proto)
            .map(|port| NodePortService {
                node,
                service,
                port,
            })
    })
}

/// A connect to a node's address on a `NodePort` (and not to a hostNetwork pod there): the
/// Service, in the fields a cluster IP would give (`dst_service`, `dst_namespace`,
/// `dst_port_name`); `dst_node` is already the node.
pub fn name_node_port(id: &mut Identity, state: &ClusterState, to: SocketAddr) {
    if id.dst_service.is_some() || id.dst_pod.is_some() {
        return;
    }
    if let Some(np) = service_by_node_port(state, to.ip(), to.port(), Proto::Tcp) {
        id.dst_service = Some(np.service.key());
        id.dst_namespace = Some(np.service.namespace.clone());
        id.dst_port_name.clone_from(&np.port.name);
    }
}

/// The node whose address `ip` is, or was (a node the live watch saw deleted).
pub fn node_of(state: &ClusterState, ip: IpAddr) -> Option<&Node> {
    state
        .node_by_ip(ip)
        .or_else(|| state.departed_node_by_ip(ip))
}

/// Names for both ends of a server socket whose replies are lost, as bounded labels: the Service
/// whose EndpointSlices list the server's address (`namespace/name`), and the node whose address
/// the replies go to (another node's SNAT address), never the peer's port.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplyEnds {
    pub local_service: Option<String>,
    pub peer_node: Option<String>,
}

pub fn reply_ends(state: &ClusterState, local: SocketAddr, peer: SocketAddr) -> ReplyEnds {
    let mut services: Vec<String> = state
        .endpoints_with_address(local.ip(), Some(local.port()))
        .iter()
        .filter_map(|r| {
            r.service
                .map(Service::key)
                .or_else(|| r.service_name.map(|n| format!("{}/{n}", r.slice.namespace)))
        })
        .collect();
    services.sort();
    services.dedup();
    let peer_is_a_node = matches!(
        state.describe(peer.ip(), peer.port(), Proto::Tcp),
        AddressIdentity::Node { .. }
    ) || state.departed_node_by_ip(peer.ip()).is_some();
    ReplyEnds {
        local_service: services.into_iter().next(),
        peer_node: peer_is_a_node
            .then(|| node_of(state, peer.ip()).map(|n| n.name.clone()))
            .flatten(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nodes node-4 (10.0.0.4) and node-5, a `NodePort` Service app/web (30080 -> 8080) whose
    /// endpoint is pod web-1 on node-5, and a `ClusterIP` Service without a `NodePort`.
    fn state() -> ClusterState {
        let text = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-4"},
             "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.4"}]}},
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-5"},
             "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}},
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "web-1", "namespace": "app", "uid": "u1", "labels": {"app": "web"}},
             "spec": {"nodeName": "node-5", "containers": [{"name": "c", "image": "i"}]},
             "status": {"phase": "Running", "podIP": "10.244.5.2", "podIPs": [{"ip": "10.244.5.2"}]}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "app"},
             "spec": {"type": "NodePort", "clusterIP": "10.96.0.20", "selector": {"app": "web"},
                      "ports": [{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080}]}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "namespace": "app"},
             "spec": {"clusterIP": "10.96.0.21", "ports": [{"port": 5432}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
             "metadata": {"name": "web-abc", "namespace": "app",
                          "labels": {"kubernetes.io/service-name": "web"}},
             "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
             "endpoints": [{"addresses": ["10.244.5.2"], "conditions": {"ready": true},
                            "targetRef": {"kind": "Pod", "namespace": "app", "name": "web-1"}}]}
        ]});
        ClusterState::from_kubectl_json(&text.to_string()).expect("a valid snapshot")
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    #[test]
    fn a_node_address_and_a_node_port_name_the_service() {
        let state = state();
        let np = service_by_node_port(&state, addr("10.0.0.4:1").ip(), 30080, Proto::Tcp)
            .expect("app/web's NodePort");
        assert_eq!(
            (np.node.name.as_str(), np.service.key()),
            ("node-4", "app/web".into())
        );
        assert!(service_by_node_port(&state, addr("10.0.0.4:1").ip(), 30081, Proto::Tcp).is_none());
        assert!(service_by_node_port(&state, addr("10.0.0.4:1").ip(), 30080, Proto::Udp).is_none());
        assert!(
            service_by_node_port(&state, addr("10.9.9.9:1").ip(), 30080, Proto::Tcp).is_none(),
            "not a node's address"
        );
        let mut id = Identity {
            dst_node: Some("node-4".into()),
            ..Identity::default()
        };
        name_node_port(&mut id, &state, addr("10.0.0.4:30080"));
        assert_eq!(id.dst_service.as_deref(), Some("app/web"));
        assert_eq!(id.dst_port_name.as_deref(), Some("http"));
    }

    #[test]
    fn replies_to_a_node_name_the_node_and_the_servers_service_never_a_port() {
        let state = state();
        let ends = reply_ends(&state, addr("10.244.5.2:8080"), addr("10.0.0.4:41234"));
        assert_eq!(ends.local_service.as_deref(), Some("app/web"));
        assert_eq!(ends.peer_node.as_deref(), Some("node-4"));
        let to_a_pod = reply_ends(&state, addr("10.0.0.5:22"), addr("10.244.5.2:50000"));
        assert_eq!(to_a_pod, ReplyEnds::default(), "a pod is no node");
    }
}
