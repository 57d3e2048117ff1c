//! A small cluster of node namespaces for the cluster-wide tests: each node has an address on one
//! shared fabric (a bridge in a namespace of its own, `10.235.0.N`), a bridge for its pods
//! (`10.235.N.0/24`, the node at `.1`), and a route to every other node's pods through that node
//! (a flat layer-3 network, as many CNIs build). Pods route everything through their node; nodes
//! have no default route and the fabric has no way out: traffic never leaves the bed.
use std::net::Ipv4Addr;

use crate::testbed::Netns;

/// One node: its namespace, its fabric address and its pod bridge.
pub struct Node {
    pub name: String,
    pub ns: Netns,
    pub addr: Ipv4Addr,
    /// The node's number N: its pods are on `10.235.N.0/24`.
    pub n: u8,
}

pub struct ClusterBed {
    pub fabric: Netns,
    pub nodes: Vec<Node>,
}

/// A node's fabric address.
pub fn node_addr(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 235, 0, n)
}

/// Pod `index` of node `n`.
pub fn pod_addr(n: u8, index: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 235, n, index)
}

impl ClusterBed {
    /// Nodes `node-1` .. `node-{count}`.
    pub fn new(prefix: &str, count: u8) -> ClusterBed {
        let fabric = Netns::new(&format!("{prefix}f"));
        fabric.ip(&["link", "add", "fab0", "type", "bridge"]);
        fabric.ip(&["link", "set", "fab0", "up"]);
        let mut nodes = Vec::new();
        for n in 1..=count {
            let ns = Netns::new(&format!("{prefix}n{n}"));
            let addr = node_addr(n);
            let port = format!("vn{n}");
            ns.ip(&[
                "link",
                "add",
                "eth0",
                "type",
                "veth",
                "peer",
                "name",
                &port,
                "netns",
                fabric.name(),
            ]);
            fabric.ip(&["link", "set", &port, "master", "fab0", "up"]);
            ns.ip(&["addr", "add", &format!("{addr}/24"), "dev", "eth0"]);
            ns.ip(&["link", "set", "eth0", "up"]);
            ns.ip(&["link", "add", "br0", "type", "bridge"]);
            ns.ip(&[
                "addr",
                "add",
                &format!("{}/24", pod_addr(n, 1)),
                "dev",
                "br0",
            ]);
            ns.ip(&["link", "set", "br0", "up"]);
            ns.exec(&["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]);
            nodes.push(Node {
                name: format!("node-{n}"),
                ns,
                addr,
                n,
            });
        }
        for node in &nodes {
            for other in nodes.iter().filter(|o| o.n != node.n) {
                node.ns.ip(&[
                    "route",
                    "add",
                    &format!("10.235.{}.0/24", other.n),
                    "via",
                    &other.addr.to_string(),
                ]);
            }
        }
        ClusterBed { fabric, nodes }
    }

    /// Node `node-{n}`.
    pub fn node(&self, n: u8) -> &Node {
        &self.nodes[usize::from(n) - 1]
    }

    /// A pod namespace on node `n` at `10.235.n.index`, routing everything through its node.
    pub fn pod(&self, n: u8, index: u8, name: &str) -> (Netns, Ipv4Addr) {
        let node = self.node(n);
        let ns = Netns::new(name);
        let ip = pod_addr(n, index);
        let host_side = format!("vp{index}");
        ns.ip(&[
            "link",
            "add",
            "eth0",
            "type",
            "veth",
            "peer",
            "name",
            &host_side,
            "netns",
            node.ns.name(),
        ]);
        node.ns
            .ip(&["link", "set", &host_side, "master", "br0", "up"]);
        ns.ip(&["addr", "add", &format!("{ip}/24"), "dev", "eth0"]);
        ns.ip(&["link", "set", "eth0", "up"]);
        ns.ip(&[
            "route",
            "add",
            "default",
            "via",
            &pod_addr(n, 1).to_string(),
        ]);
        (ns, ip)
    }
}
