//! Both halves of a half-open flow, joined: clients on some nodes see black holes to a Service, and
//! the node that runs the Service's backend B reports B's replies (or SYN-ACKs) lost towards
//! another node's address. Each half is one node's view; together they are one finding: the
//! clients' nodes, the Service, B and its node, and the node the replies went to (its SNAT).
//!
//! A failing destination joins a server whose replies go to node P when either
//! - the clients dialled P's address (a `NodePort`: `dst_node` is P, no DNAT on the client's node)
//!   and its Service is the one B is an endpoint of (`dst_service` = `local_service`), or
//! - the clients' own node P translated the connect to B (`backend` = B) and SNAT'd it, so the
//!   replies went back to P, one of the clients' nodes.
//!
//! Both need cluster state on the tracers (node and Service names); without it the halves stay
//! apart.
use std::collections::BTreeMap;

use serde::Serialize;

use super::{ConnectFinding, Failure, NodeCount, ReplyFinding, natural};
use crate::verdict::ClusterVerdictKind;

/// One half-open flow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HalfOpenFinding {
    /// `namespace/name` of the Service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// What the failing clients connected to: a node's address and `NodePort`, a Service address.
    pub dialed: Vec<String>,
    /// The backend whose replies are lost (the server's address).
    pub backend: String,
    /// The nodes reporting the backend's replies lost (the backend's node), with the connections.
    pub backend_nodes: Vec<NodeCount>,
    /// The node whose address the replies went to.
    pub peer_node: String,
    /// `gone` or `NotReady`, from the cluster state the backend's tracer has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_node_state: Option<String>,
    /// The clients' nodes, with their failing connects.
    pub client_nodes: Vec<NodeCount>,
    pub connects: u64,
    pub replies_lost: u64,
    /// Seconds since either half last grew (the Cluster view; absent in `tracer sweep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_grew_s: Option<u64>,
}

fn joins(c: &ConnectFinding, r: &ReplyFinding, peer: &str) -> bool {
    if c.failure != Failure::BlackHoles {
        return false;
    }
    let through_node_port = c.service.is_none()
        && c.dst_node.as_deref() == Some(peer)
        && c.dst_service.is_some()
        && c.dst_service == r.local_service;
    let translated_on_client_node =
        c.backend.as_deref() == Some(r.local.as_str()) && c.nodes.iter().any(|n| n.node == peer);
    through_node_port || translated_on_client_node
}

fn merged(counts: impl Iterator<Item = (String, u64)>) -> Vec<NodeCount> {
    let mut by_node: BTreeMap<String, u64> = BTreeMap::new();
    for (node, count) in counts {
        *by_node.entry(node).or_default() += count;
    }
    let mut nodes: Vec<NodeCount> = by_node
        .into_iter()
        .map(|(node, count)| NodeCount { node, count })
        .collect();
    nodes.sort_by(|a, b| natural(&a.node, &b.node));
    nodes
}

/// The half-open flows among the findings; what joins is taken out of `connects` and `replies`
/// (it is shown once, joined).
pub fn join(
    connects: &mut Vec<ConnectFinding>,
    replies: &mut Vec<ReplyFinding>,
) -> Vec<HalfOpenFinding> {
    let mut found = Vec::new();
    let mut joined_connects = vec![false; connects.len()];
    let mut kept_replies = Vec::new();
    for r in replies.drain(..) {
        let Some(peer) = r.peer_node.clone().filter(|p| !p.is_empty()) else {
            kept_replies.push(r);
            continue;
        };
        let matching: Vec<usize> = connects
            .iter()
            .enumerate()
            .filter(|(_, c)| joins(c, &r, &peer))
            .map(|(i, _)| i)
            .collect();
        if matching.is_empty() {
            kept_replies.push(r);
            continue;
        }
        let mut dialed: Vec<String> = matching
            .iter()
            .map(|&i| {
                let c = &connects[i];
                c.service.clone().unwrap_or_else(|| c.dst.clone())
            })
            .collect();
        dialed.sort();
        dialed.dedup();
        let service = matching
            .iter()
            .find_map(|&i| connects[i].dst_service.clone())
            .or_else(|| r.local_service.clone());
        let client_nodes = merged(
            matching
                .iter()
                .flat_map(|&i| connects[i].nodes.iter())
                .map(|n| (n.node.clone(), n.count)),
        );
        let last_grew_s = matching
            .iter()
            .filter_map(|&i| connects[i].last_grew_s)
            .chain(r.last_grew_s)
            .min();
        for &i in &matching {
            joined_connects[i] = true;
        }
        found.push(HalfOpenFinding {
            service,
            dialed,
            backend: r.local.clone(),
            backend_nodes: r.nodes.clone(),
            peer_node: peer,
            peer_node_state: r
                .cluster_verdict
                .and_then(ClusterVerdictKind::peer_node_state)
                .map(str::to_owned),
            connects: client_nodes.iter().map(|n| n.count).sum(),
            client_nodes,
            replies_lost: r.lost,
            last_grew_s,
        });
    }
    *replies = kept_replies;
    let mut i = 0;
    connects.retain(|_| {
        let keep = !joined_connects[i];
        i += 1;
        keep
    });
    found.sort_by(|a, b| {
        b.client_nodes
            .len()
            .cmp(&a.client_nodes.len())
            .then(b.connects.cmp(&a.connects))
    });
    found
}
