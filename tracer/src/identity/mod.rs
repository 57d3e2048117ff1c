//! Names for the addresses and processes in records: who connected, what the destination is, and
//! what cluster state says about a failure.
//!
//! - `cgroup_ids.rs`: cgroup id (from the kernel) -> cgroup path, by walking the cgroup2 mount.
//! - `cgroup.rs`: cgroup path -> container id, pod UID, runtime, QoS (containerd, CRI-O, Docker;
//!   systemd and cgroupfs drivers; v1 and v2).
//! - `cluster.rs`: pods, Services, EndpointSlices, nodes, indexed by address and UID.
//! - `source.rs`: where that state comes from (a kubectl JSON file, or `watch.rs`: list+watch of the
//!   API), and how fresh it is.
//! - `verdicts.rs`: the cluster-state verdicts (`backend is no live pod`, `endpoint does not
//!   listen`, `DNS server is no live pod`) and their sentences.
//! - `fields.rs`: the fields records carry.
//! - `node_address.rs`: what a node's address stands for (the Service of a `NodePort`, the node a
//!   reply went to).
//!
//! Source identity: cgroup id -> path -> container -> pod (by UID), else the pod whose address the
//! source is; without Kubernetes the record keeps the process (`pid`, `comm`), its cgroup path and
//! network namespace. Destination identity: the Service address the app meant (or the socket's
//! destination) -> Service, pod, node, EndpointSlice membership; the backend a load balancer chose
//! (socket-level LB, or kube-proxy's DNAT seen in conntrack) -> `backend_*`.
pub mod cgroup;
pub mod cgroup_ids;
pub mod cluster;
pub mod fields;
pub mod node_address;
pub mod socket_owner;
pub mod source;
pub mod verdicts;
pub mod watch;

use std::{
    net::{IpAddr, SocketAddr},
    path::PathBuf,
};

pub use fields::Identity;

use self::{
    cgroup_ids::{CgroupPaths, MIN_RESCAN},
    cluster::{AddressIdentity, ClusterState, EndpointRef, Pod, Proto, Service},
    source::{ClusterSource, ClusterView},
    verdicts::ClusterVerdict,
};
use crate::verdict::Verdict;

pub struct Identities {
    cgroups: CgroupPaths,
    cluster: Option<ClusterSource>,
}

impl Identities {
    /// `cgroup_root`: the cgroup2 mount (`None`: no source cgroup paths). `cluster`: pod and Service
    /// names (`None`: a plain host, or no state given).
    pub fn new(cgroup_root: Option<PathBuf>, cluster: Option<ClusterSource>) -> Identities {
        Identities {
            cgroups: CgroupPaths::new(cgroup_root, MIN_RESCAN),
            cluster,
        }
    }

    fn view(&self) -> Option<ClusterView> {
        self.cluster.as_ref().map(ClusterSource::view)
    }

    /// The cluster state as of now and where it comes from, when there is one (the datapath audit
    /// judges against it).
    pub fn cluster_view(&self) -> Option<ClusterView> {
        self.view()
    }

    /// Identities and the cluster-state verdict of one connect attempt. `backend` is where the SYN
    /// went (the socket's destination, or the backend conntrack saw kube-proxy choose), `service` the
    /// Service address the application meant, when load balancing was seen.
    pub fn connect(
        &mut self,
        cgroup_id: u64,
        src: SocketAddr,
        backend: SocketAddr,
        service: Option<SocketAddr>,
        verdict: Verdict,
    ) -> Identity {
        let view = self.view();
        let mut id = self.source(cgroup_id, Some(src.ip()), view.as_ref());
        let Some(view) = view else { return id };
        let state = &view.state;
        describe_destination(&mut id, state, service.unwrap_or(backend));
        node_address::name_node_port(&mut id, state, service.unwrap_or(backend));
        if service.is_some() {
            describe_backend(&mut id, state, backend);
        }
        if let Some(v) = verdicts::for_connect(state, verdict, backend, service) {
            id.cluster_verdict = Some(v.name.into());
            id.cluster_explanation = Some(v.explanation);
        }
        id
    }

    /// Identities for a server socket whose replies were lost: the pod at the local address, and
    /// what the peer is (a node, a pod, unknown).
    pub fn server_end(&mut self, local: SocketAddr, peer: SocketAddr) -> Identity {
        let view = self.view();
        let mut id = self.source(0, Some(local.ip()), view.as_ref());
        if let Some(view) = view {
            describe_destination(&mut id, &view.state, peer);
            if let Some(v) = verdicts::for_reply_peer(&view.state, peer) {
                id.cluster_verdict = Some(v.name.into());
                id.cluster_explanation = Some(v.explanation);
            }
        }
        id
    }

    /// Identities for a healthy-connects record.
    pub fn healthy(&mut self, cgroup_id: u64, dst: SocketAddr) -> Identity {
        let view = self.view();
        let mut id = self.source(cgroup_id, None, view.as_ref());
        if let Some(view) = view {
            describe_destination(&mut id, &view.state, dst);
            node_address::name_node_port(&mut id, &view.state, dst);
        }
        id
    }

    /// The verdict for unanswered or refused DNS queries to `server`.
    pub fn dns_server_verdict(&self, server: SocketAddr) -> Option<ClusterVerdict> {
        verdicts::dns_server_is_no_live_pod(&self.view()?.state, server)
    }

    fn source(
        &mut self,
        cgroup_id: u64,
        src_ip: Option<IpAddr>,
        view: Option<&ClusterView>,
    ) -> Identity {
        let mut id = Identity::default();
        if let Some(view) = view {
            id.identity_source = Some(view.source.into());
            id.identity_age_s = Some(view.age.as_secs());
            id.identity_stale = view.stale;
        }
        let mut pod_uid = None;
        if let Some(cgroup) = self.cgroups.entry(cgroup_id) {
            id.src_cgroup = Some(cgroup.path.clone());
            if let Some(container) = &cgroup.container {
                id.src_container = Some(container.container_id.chars().take(12).collect());
                pod_uid = container.pod_uid.as_deref();
            }
        }
        let Some(state) = view.map(|v| &v.state) else {
            return id;
        };
        let pod = pod_uid.and_then(|uid| state.pod_by_uid(uid)).or_else(|| {
            src_ip
                .filter(|ip| !ip.is_unspecified())
                .and_then(|ip| state.pod_by_ip(ip))
        });
        if let Some(pod) = pod {
            id.src_pod = Some(pod.name.clone());
            id.src_namespace = Some(pod.namespace.clone());
            id.src_owner = owner(pod);
        }
        id
    }
}

fn owner(pod: &Pod) -> Option<String> {
    pod.workload().map(|o| format!("{}/{}", o.kind, o.name))
}

fn service_key(r: &EndpointRef<'_>) -> Option<String> {
    r.service
        .map(Service::key)
        .or_else(|| r.service_name.map(|n| format!("{}/{n}", r.slice.namespace)))
}

fn endpoint_services(id: &mut Identity, endpoint_of: &[EndpointRef<'_>]) {
    let mut services: Vec<String> = endpoint_of.iter().filter_map(service_key).collect();
    services.sort();
    services.dedup();
    if id.dst_service.is_none() {
        id.dst_service = services.first().cloned();
    }
    id.dst_endpoint_of = services;
}

fn describe_destination(id: &mut Identity, state: &ClusterState, to: SocketAddr) {
    match state.describe(to.ip(), to.port(), Proto::Tcp) {
        AddressIdentity::Service { service, port } => {
            id.dst_service = Some(service.key());
            id.dst_namespace = Some(service.namespace.clone());
            id.dst_port_name = port.and_then(|p| p.name.clone());
        }
        AddressIdentity::Pod {
            pod, endpoint_of, ..
        } => {
            id.dst_pod = Some(pod.name.clone());
            id.dst_namespace = Some(pod.namespace.clone());
            id.dst_owner = owner(pod);
            id.dst_node.clone_from(&pod.node_name);
            id.dst_ready = Some(pod.ready);
            endpoint_services(id, &endpoint_of);
        }
        AddressIdentity::Node {
            node,
            host_network_pod,
            endpoint_of,
        } => {
            id.dst_node = Some(node.name.clone());
            if let Some(pod) = host_network_pod {
                id.dst_pod = Some(pod.name.clone());
                id.dst_namespace = Some(pod.namespace.clone());
                id.dst_owner = owner(pod);
                id.dst_ready = Some(pod.ready);
            }
            endpoint_services(id, &endpoint_of);
        }
        AddressIdentity::Unknown { endpoint_of, .. } => endpoint_services(id, &endpoint_of),
    }
}

fn describe_backend(id: &mut Identity, state: &ClusterState, backend: SocketAddr) {
    match state.describe(backend.ip(), backend.port(), Proto::Tcp) {
        AddressIdentity::Pod { pod, .. } => {
            id.backend_pod = Some(pod.name.clone());
            id.backend_namespace = Some(pod.namespace.clone());
            id.backend_node.clone_from(&pod.node_name);
            id.backend_ready = Some(pod.ready);
        }
        AddressIdentity::Node { node, .. } => id.backend_node = Some(node.name.clone()),
        AddressIdentity::Service { .. } | AddressIdentity::Unknown { .. } => {}
    }
}
