//! The identity fields records carry (flattened into `connect` and `healthy` JSON lines). All are
//! optional: absent when unknown, so a plain host without Kubernetes gets only `src_cgroup`.
use serde::{Deserialize, Serialize};

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

    /// What was dialled (`dialed` when present, else `dst`) is this pod ...
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
    /// `namespace/name` of the Service the connect went through: the dialled cluster IP's, else the
    /// Service whose EndpointSlice lists the destination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_service: Option<String>,
    /// The Service port's name (`http`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_port_name: Option<String>,
    /// Every Service (`namespace/name`) whose EndpointSlices list the destination on this port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dst_endpoint_of: Vec<String>,

    /// When the socket's destination is not what was dialled (a socket-level load balancer chose a
    /// backend): the pod that backend is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_ready: Option<bool>,

    /// A cluster-state verdict: `backend is no live pod`, `endpoint does not listen`,
    /// `DNS server is no live pod`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_verdict: Option<String>,
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
