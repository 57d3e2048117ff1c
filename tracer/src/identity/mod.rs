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
pub mod source;
pub mod verdicts;
pub mod watch;

#[cfg(test)]
mod cluster_incidents;

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
        if service.is_some() {
            describe_backend(&mut id, state, backend);
        }
        if let Some(v) = verdicts::for_connect(state, verdict, backend, service) {
            id.cluster_verdict = Some(v.name.into());
            id.cluster_explanation = Some(v.explanation);
        }
        id
    }

    /// Identities for a healthy-connects record.
    pub fn healthy(&mut self, cgroup_id: u64, dst: SocketAddr) -> Identity {
        let view = self.view();
        let mut id = self.source(cgroup_id, None, view.as_ref());
        if let Some(view) = view {
            describe_destination(&mut id, &view.state, dst);
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{identity::cluster_incidents::load, verdict::RefusedBy};

    fn with_state(file: &str) -> Identities {
        let source = ClusterSource::File {
            state: Arc::new(load(file)),
            written: std::time::SystemTime::now(),
        };
        Identities::new(None, Some(source))
    }

    fn at(s: &str) -> SocketAddr {
        s.parse().expect("socket address")
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
            id.cluster_verdict.as_deref(),
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
            id.cluster_verdict.as_deref(),
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
