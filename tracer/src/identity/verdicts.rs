//! Cluster-state verdicts: what the kernel saw, read against what the cluster says the address is.
//!
//! Each is a name and one plain sentence (the sentence that ended an incident):
//! - `backend is no live pod`: nothing answered at an address no current pod has, yet an
//!   EndpointSlice lists it or a Service's datapath sent the connect there (incident 000: a Service
//!   map still pointing at a deleted resolver pod). Names the Service it was reached through.
//! - `endpoint does not listen`: a RST from a Ready endpoint of a Service. Names the pod, its owner,
//!   the Service and the selector terms that made the pod an endpoint (incident 003: a selector that
//!   also matched worker pods with no listener).
//! - `DNS server is no live pod`: DNS queries nobody answers, sent to an address no current pod has
//!   (incident 004: nginx's resolver socket glued to a deleted CoreDNS pod), for unanswered and
//!   refused DNS records.
//! - `peer node is gone` / `peer node is NotReady`: a server's replies go to a node's address (the
//!   node that SNAT'd the client) and that node was deleted or is not Ready (incident 002: the SNAT
//!   state of a terminated node), for `reply_lost` records.
use std::{fmt::Write as _, net::SocketAddr};

use super::{
    cluster::{AddressIdentity, ClusterState, EndpointRef, Pod, Proto, Service, TargetRef},
    known::KnownCluster,
};
use crate::verdict::{ClusterVerdictKind, RefusedBy, Verdict};

/// A verdict from cluster state, attached to a connect (or DNS) record next to the kernel's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterVerdict {
    pub kind: ClusterVerdictKind,
    pub explanation: String,
}

/// The cluster-state verdict of a connect: `backend` is where the SYN went (the socket destination,
/// or the backend a load balancer chose, when known), `service` the Service address the application meant, when load balancing was seen.
pub fn for_connect(
    state: &KnownCluster<'_>,
    verdict: Verdict,
    backend: SocketAddr,
    service: Option<SocketAddr>,
) -> Option<ClusterVerdict> {
    match verdict {
        Verdict::Refused { by: RefusedBy::Rst } => endpoint_does_not_listen(state, backend),
        Verdict::Unanswered
        | Verdict::Abandoned
        | Verdict::TimedOut
        | Verdict::Unreachable { .. } => backend_is_no_live_pod(state, backend, service)
            .or_else(|| service_lists_no_live_pod(state, backend)),
        _ => None,
    }
}

/// `backend` is no current pod's address, and either an EndpointSlice lists it for a pod or the
/// connect reached it through a Service's cluster IP (`service`), so it was meant to be a pod.
pub fn backend_is_no_live_pod(
    state: &KnownCluster<'_>,
    backend: SocketAddr,
    service: Option<SocketAddr>,
) -> Option<ClusterVerdict> {
    let AddressIdentity::Unknown {
        endpoint_of,
        pod_cidr_of,
    } = state.describe(backend.ip(), backend.port(), Proto::Tcp)
    else {
        return None;
    };
    // An endpoint written by hand (no Pod behind it) is an external backend, not a deleted pod.
    if endpoint_of.iter().any(|r| !names_a_pod(r)) {
        return None;
    }
    // Not said until it is certain (a remote pod is looked up first).
    if !state.no_live_pod_at(backend.ip()) {
        return None;
    }
    let through = service.and_then(|d| {
        state
            .service_by_cluster_ip(d.ip(), d.port(), Proto::Tcp)
            .map(|(svc, _)| (svc, d))
    });
    let mut text = format!("No live pod has {backend}: ");
    match (through, endpoint_of.first()) {
        (None, None) => return None,
        (Some((svc, d)), None) => {
            let _ = write!(
                text,
                "the connect to Service {} at {d} was sent there, yet no EndpointSlice lists \
                 that address: the node's Service map still points at a deleted pod",
                svc.key()
            );
        }
        (through, Some(r)) => {
            let svc = r.service.map_or_else(
                || r.service_name.unwrap_or("(no service label)").to_string(),
                Service::key,
            );
            let _ = write!(
                text,
                "EndpointSlice {} of Service {svc} still lists it",
                r.slice.name
            );
            if let Some(t) = &r.endpoint.target_ref {
                let _ = write!(text, " for pod {}, which no longer exists", t.name);
            }
            if let Some((_, d)) = through {
                let _ = write!(text, ", and this connect reached it through {d}");
            }
        }
    }
    if let Some(node) = pod_cidr_of {
        let _ = write!(text, " (the address is in node {}'s pod range)", node.name);
    }
    if let Some(old) = state.finished_pod_with(backend.ip()) {
        let _ = write!(text, "; it last belonged to finished pod {}", old.key());
    }
    text.push_str(". The SYN goes into a black hole.");
    Some(ClusterVerdict {
        kind: ClusterVerdictKind::BackendIsNoLivePod,
        explanation: text,
    })
}

/// `vip` is a Service cluster IP (the backend was chosen after the socket, by kube-proxy's DNAT,
/// and is not known here) and the Service lists an endpoint that no current pod has: the likely
/// black hole among its backends.
pub fn service_lists_no_live_pod(
    state: &KnownCluster<'_>,
    vip: SocketAddr,
) -> Option<ClusterVerdict> {
    let (svc, port) = state.service_by_cluster_ip(vip.ip(), vip.port(), Proto::Tcp)?;
    let mut dead = Vec::new();
    for slice in state.endpoint_slices() {
        if slice.namespace != svc.namespace
            || slice.service_name.as_deref() != Some(svc.name.as_str())
        {
            continue;
        }
        let slice_port = slice
            .ports
            .iter()
            .find(|p| p.name == port.name)
            .and_then(|p| p.port)
            .unwrap_or(port.port);
        for e in &slice.endpoints {
            let gone = e.target_ref.as_ref().filter(|t| t.is_pod());
            for ip in &e.addresses {
                if let Some(t) = gone
                    && state.no_live_pod_at(*ip)
                {
                    dead.push(format!(
                        "{} (pod {}, gone)",
                        SocketAddr::new(*ip, slice_port),
                        t.name
                    ));
                }
            }
        }
    }
    if dead.is_empty() {
        return None;
    }
    Some(ClusterVerdict {
        kind: ClusterVerdictKind::BackendIsNoLivePod,
        explanation: format!(
            "Service {} ({vip}) balances connects to {}, which no live pod has: the connects sent there \
             go into a black hole (the backend was chosen after this socket and is not shown).",
            svc.key(),
            dead.join(", ")
        ),
    })
}

/// A RST from `backend`, a Ready endpoint of a Service: names the pod, its owner, the Service and
/// the selector terms that made it an endpoint.
pub fn endpoint_does_not_listen(
    state: &KnownCluster<'_>,
    backend: SocketAddr,
) -> Option<ClusterVerdict> {
    let pod = state.pod_by_ip(backend.ip())?;
    let endpoint_of = state.endpoints_with_address(backend.ip(), Some(backend.port()));
    let r = endpoint_of.iter().find(|r| r.endpoint.ready)?;
    let port = backend.port();
    let declares = pod.declared_port(port, Proto::Tcp).is_some();
    let svc_text = r.service.map_or_else(
        || {
            format!(
                "{}/{}",
                r.slice.namespace,
                r.service_name.unwrap_or("(no service label)")
            )
        },
        Service::key,
    );
    let mut text = format!(
        "Refused by pod {}{}, a Ready endpoint of Service {svc_text}",
        pod.key(),
        owner_suffix(pod)
    );
    match r.service.filter(|s| !s.selector.is_empty()) {
        Some(svc) => {
            let terms: Vec<String> = state
                .selector_terms(svc, pod)
                .iter()
                .filter(|t| t.matched)
                .map(|t| format!("{}={}", t.key, t.value))
                .collect();
            let _ = write!(
                text,
                ": selector {} also matches {}",
                terms.join(","),
                pod.name
            );
            if declares {
                let _ = write!(
                    text,
                    ", which declares port {port} but nothing listens on it (not started yet, crashed, \
                     or bound to another address)"
                );
            } else {
                let _ = write!(text, ", which declares no port {port}");
                let selected = state.pods_selected_by(svc).unwrap_or_default();
                let silent = selected
                    .iter()
                    .filter(|p| p.declared_port(port, Proto::Tcp).is_none())
                    .count();
                if selected.len() > 1 {
                    let _ = write!(
                        text,
                        " ({silent} of the {} pods it matches declare no port {port}: about that share \
                         of connects is refused)",
                        selected.len()
                    );
                }
            }
        }
        None => {
            let _ = write!(
                text,
                " (EndpointSlice {} was written without a selector){}",
                r.slice.name,
                if declares {
                    format!(": it declares port {port} but nothing listens on it")
                } else {
                    format!(": it declares no port {port}")
                }
            );
        }
    }
    text.push('.');
    Some(ClusterVerdict {
        kind: ClusterVerdictKind::EndpointDoesNotListen,
        explanation: text,
    })
}

/// DNS queries to `server` went unanswered, and no current pod has its address while an
/// EndpointSlice lists it or it sits in a node's pod range (a DNS pod that was deleted).
/// Names the DNS pods that do exist now.
/// A server's unacknowledged replies go to `peer`: a verdict when that is the address of a node
/// that was deleted (seen by the live watch) or is not Ready.
pub fn for_reply_peer(state: &ClusterState, peer: SocketAddr) -> Option<ClusterVerdict> {
    let ip = peer.ip();
    if let Some(node) = state.node_by_ip(ip) {
        return node.not_ready.then(|| ClusterVerdict {
            kind: ClusterVerdictKind::PeerNodeIsNotReady,
            explanation: format!(
                "The replies go to {ip}, node {}'s address, and node {} is not Ready: the \
                 connection's NAT state lives on that node, so the replies go nowhere while it is \
                 down.",
                node.name, node.name
            ),
        });
    }
    let node = state.departed_node_by_ip(ip)?;
    Some(ClusterVerdict {
        kind: ClusterVerdictKind::PeerNodeIsGone,
        explanation: format!(
            "The replies go to {ip}, the address of node {}, which is gone: the connection's NAT \
             state went with it, so the client never gets them. Keep nodes that forward \
             external traffic until their connections drain (externalTrafficPolicy: Local avoids \
             the extra node).",
            node.name
        ),
    })
}

pub fn dns_server_is_no_live_pod(
    state: &KnownCluster<'_>,
    server: SocketAddr,
) -> Option<ClusterVerdict> {
    let AddressIdentity::Unknown {
        endpoint_of,
        pod_cidr_of,
    } = state.describe(server.ip(), server.port(), Proto::Udp)
    else {
        return None;
    };
    if !state.no_live_pod_at(server.ip()) {
        return None;
    }
    let listed = endpoint_of.iter().find(|r| names_a_pod(r));
    let held_by_old_pod = state.finished_pod_with(server.ip()).is_some();
    if listed.is_none() && pod_cidr_of.is_none() && !held_by_old_pod {
        return None;
    }
    let dns = listed
        .and_then(|r| r.service)
        .or_else(|| state.service("kube-system", "kube-dns"));
    let mut text = format!("No live pod has DNS server {server}");
    if let Some(r) = listed {
        let _ = write!(text, ": EndpointSlice {} still lists it", r.slice.name);
        if let Some(t) = &r.endpoint.target_ref {
            let _ = write!(text, " for pod {}, which no longer exists", t.name);
        }
    } else if let Some(node) = pod_cidr_of {
        let _ = write!(
            text,
            ": it is in node {}'s pod range, and no current pod has it",
            node.name
        );
    }
    if let Some(svc) = dns {
        let live: Vec<String> = state
            .pods_selected_by(svc)
            .unwrap_or_default()
            .iter()
            .map(|p| {
                let ips: Vec<String> = p.ips.iter().map(ToString::to_string).collect();
                format!("{} ({})", p.name, ips.join(", "))
            })
            .collect();
        if !live.is_empty() {
            let _ = write!(
                text,
                "; Service {}'s pods now are {}",
                svc.key(),
                live.join(", ")
            );
        }
    }
    text.push_str(
        ". A client that keeps one socket to a deleted DNS pod (nginx's resolver) never asks \
         another: re-resolve through the Service, or restart the client.",
    );
    Some(ClusterVerdict {
        kind: ClusterVerdictKind::DnsServerIsNoLivePod,
        explanation: text,
    })
}

fn names_a_pod(r: &EndpointRef<'_>) -> bool {
    r.endpoint
        .target_ref
        .as_ref()
        .is_some_and(TargetRef::is_pod)
}

/// ` (Deployment webhooks-worker)`, or nothing for a pod without owner.
pub fn owner_suffix(pod: &Pod) -> String {
    pod.workload()
        .map_or_else(String::new, |o| format!(" ({} {})", o.kind, o.name))
}
