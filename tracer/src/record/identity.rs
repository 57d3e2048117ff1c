//! The identity fields records carry (flattened into `connect` and `healthy` JSON lines). All are
//! optional: absent when unknown, so a plain host without Kubernetes gets only `src_cgroup`.
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::verdict::ClusterVerdictKind;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    /// The connecting pod (from the cgroup of the process, else from the source address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_namespace: Option<String>,
    /// The pod's workload, `Kind/name` (`Deployment/frontend`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_owner: Option<String>,
    /// Container id (first 12 hex digits) from the cgroup path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_container: Option<String>,
    /// The process's cgroup v2 path: names systemd units and containers on hosts without Kubernetes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_cgroup: Option<String>,

    /// What the connect meant (the Service address `service` when load balancing was seen, else
    /// `dst`) is this pod ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_pod: Option<String>,
    /// ... in this namespace (the Service's namespace when `dst` is a Service IP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_owner: Option<String>,
    /// The pod's node, or the node whose address this is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_node: Option<String>,
    /// The pod's Ready condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_ready: Option<bool>,
    /// `namespace/name` of the Service the connect went through: that cluster IP's, else the
    /// Service whose EndpointSlice lists the destination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_service: Option<String>,
    /// The Service port's name (`http`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_port_name: Option<String>,
    /// Every Service (`namespace/name`) whose EndpointSlices list the destination on this port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dst_endpoint_of: Vec<String>,

    /// When a load balancer chose a backend (`backend`: socket-level LB, or kube-proxy's DNAT seen in
    /// conntrack): the pod that backend is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_ready: Option<bool>,

    /// A cluster-state verdict: `backend is no live pod`, `endpoint does not listen`,
    /// `peer node is gone`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_verdict: Option<ClusterVerdictKind>,
    /// Its one sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_explanation: Option<String>,

    /// Where pod and Service names came from: `file` (`--cluster-state`) or `api` (list+watch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_source: Option<String>,
    /// How old the names are: seconds since the file was written, or since the API was last known in
    /// sync (0 while the watches are healthy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_age_s: Option<u64>,
    /// True when the API is unreachable or not yet listed: names may be out of date.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub identity_stale: bool,
}

impl Identity {
    /// One line for text mode: `pod app/web-1 (Deployment/web) -> pod app/worker-2 (Deployment/worker,
    /// node-b, ready) of Service app/webhooks`; `None` when nothing is named.
    pub fn summary(&self) -> Option<String> {
        let src = match (&self.src_pod, &self.src_container) {
            (Some(pod), _) => Some(format!(
                "pod {}{}",
                qualified(self.src_namespace.as_ref(), pod),
                paren(std::slice::from_ref(&self.src_owner))
            )),
            (None, Some(container)) => Some(format!("container {container}")),
            (None, None) => None,
        };
        let ready = |r: Option<bool>| r.map(|r| if r { "ready" } else { "not ready" }.to_string());
        let mut dst = match (&self.dst_pod, &self.dst_service, &self.dst_node) {
            (Some(pod), service, _) => {
                let mut s = format!(
                    "pod {}{}",
                    qualified(self.dst_namespace.as_ref(), pod),
                    paren(&[
                        self.dst_owner.clone(),
                        self.dst_node.clone(),
                        ready(self.dst_ready)
                    ])
                );
                if let Some(service) = service {
                    s.push_str(" of Service ");
                    s.push_str(service);
                }
                Some(s)
            }
            (None, Some(service), _) => Some(format!(
                "Service {service}{}",
                self.dst_port_name
                    .as_ref()
                    .map_or_else(String::new, |p| format!(" port {p}"))
            )),
            (None, None, Some(node)) => Some(format!("node {node}")),
            (None, None, None) => None,
        };
        if let Some(backend) = &self.backend_pod {
            let b = format!(
                "backend pod {}{}",
                qualified(self.backend_namespace.as_ref(), backend),
                paren(&[self.backend_node.clone(), ready(self.backend_ready)])
            );
            dst = Some(dst.map_or(b.clone(), |d| format!("{d}, {b}")));
        }
        let mut line = match (src, dst) {
            (Some(src), Some(dst)) => format!("{src} -> {dst}"),
            (Some(src), None) => format!("from {src}"),
            (None, Some(dst)) => format!("to {dst}"),
            (None, None) => return None,
        };
        if self.identity_stale {
            let age = self.identity_age_s.unwrap_or(0);
            let _ = write!(
                line,
                " [names stale: {age}s old, Kubernetes API unreachable]"
            );
        }
        Some(line)
    }
}

fn qualified(namespace: Option<&String>, name: &str) -> String {
    namespace.map_or_else(|| name.to_string(), |ns| format!("{ns}/{name}"))
}

/// ` (a, b)` from the parts that are known, or nothing.
fn paren(parts: &[Option<String>]) -> String {
    let known: Vec<&str> = parts.iter().flatten().map(String::as_str).collect();
    if known.is_empty() {
        String::new()
    } else {
        format!(" ({})", known.join(", "))
    }
}
