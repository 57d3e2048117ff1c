//! Names for the addresses and processes in records: who connected, what the destination is, and
//! what cluster state says about a failure.
//!
//! - `cgroup_ids.rs`: cgroup id (from the kernel) -> cgroup path, by walking the cgroup2 mount.
//! - `cgroup.rs`: cgroup path -> container id, pod UID, runtime, QoS (containerd, CRI-O, Docker;
//!   systemd and cgroupfs drivers; v1 and v2).
//! - `cluster/`: pods, Services, EndpointSlices, nodes, indexed by address and UID (the model,
//!   its indexes, kubectl JSON parsing and the k8s-openapi conversions, a file each).
//! - `source.rs`: where that state comes from (a kubectl JSON file, or `watch.rs`: list+watch of the
//!   API, this node's pods only, one loop per kind in `reflector.rs`, the stores and health they
//!   share with the publisher in `watch_state.rs`, list pages streamed into the
//!   model by `list_page.rs`, backing off as `backoff.rs` says, failures in `api_failure.rs`), and
//!   how fresh it is.
//! - `pod_lookup.rs`: pods elsewhere, looked up on demand for failing records (rate-limited,
//!   cached); `known.rs`: the snapshot plus those lookups, which the verdicts read.
//! - `verdicts.rs`: the cluster-state verdicts (`backend is no live pod`, `endpoint does not
//!   listen`, `DNS server is no live pod`) and their sentences.
//! - `node_address.rs`: what a node's address stands for (the Service of a `NodePort`, the node a
//!   reply went to).
//!
//! Source identity: cgroup id -> path -> container -> pod (by UID), else the pod whose address the
//! source is; without Kubernetes the record keeps the process (`pid`, `comm`), its cgroup path and
//! network namespace. Destination identity: the Service address the app meant (or the socket's
//! destination) -> Service, pod, node, EndpointSlice membership; the backend a load balancer chose
//! (socket-level LB, or kube-proxy's DNAT seen in conntrack) -> `backend_*`.
pub mod api_failure;
pub mod backoff;
pub mod cgroup;
pub mod cgroup_ids;
pub mod cluster;
pub mod known;
mod list_page;
pub mod node_address;
pub mod pod_lookup;
mod reflector;
pub mod socket_owner;
pub mod source;
pub mod verdicts;
pub mod watch;
mod watch_state;

use std::{
    net::{IpAddr, SocketAddr},
    path::PathBuf,
};

pub use crate::record::Identity;

use self::{
    cgroup_ids::{CgroupPaths, MIN_RESCAN},
    cluster::{AddressIdentity, ClusterState, EndpointRef, Pod, Proto, Service},
    known::{KnownCluster, Remote},
    pod_lookup::LookupKey,
    source::{ClusterSource, ClusterView},
    verdicts::ClusterVerdict,
    watch::ApiRequests,
};
use crate::{
    record::{ApiStats, IdentityStats, KindRequests, LookupStats},
    verdict::Verdict,
};

pub struct Identities {
    cgroups: CgroupPaths,
    cluster: Option<ClusterSource>,
    /// Lookups the latest record needed that are on their way: its record waits for them.
    waiting: Vec<LookupKey>,
}

/// Verdicts whose destination is worth a lookup: a failure at the other end.
fn names_remote_pods(verdict: Verdict) -> bool {
    matches!(
        verdict,
        Verdict::Unanswered
            | Verdict::Abandoned
            | Verdict::TimedOut
            | Verdict::Refused { .. }
            | Verdict::Unreachable { .. }
    )
}

impl Identities {
    /// `cgroup_root`: the cgroup2 mount (`None`: no source cgroup paths). `cluster`: pod and Service
    /// names (`None`: a plain host, or no state given).
    pub fn new(cgroup_root: Option<PathBuf>, cluster: Option<ClusterSource>) -> Identities {
        Identities {
            cgroups: CgroupPaths::new(cgroup_root, MIN_RESCAN),
            cluster,
            waiting: Vec::new(),
        }
    }

    /// What is known for one record: `may_ask`, whether it may look pods up.
    fn known<'a>(&'a self, state: &'a ClusterState, may_ask: bool) -> KnownCluster<'a> {
        let remote = match &self.cluster {
            Some(ClusterSource::Live(live)) => Some(Remote {
                lookups: live.lookups(),
                node: live.node(),
                may_ask,
            }),
            Some(ClusterSource::File { .. }) | None => None,
        };
        KnownCluster::new(state, remote)
    }

    /// Asks for what a record needed; those on their way make it wait.
    fn ask(&mut self, (wanted, hits): (Vec<LookupKey>, u64)) {
        let Some(ClusterSource::Live(live)) = &mut self.cluster else {
            return;
        };
        live.lookups_mut().count_hits(hits);
        for key in wanted {
            if live.lookups_mut().request(&key) {
                self.waiting.push(key);
            }
        }
    }

    /// Whether pod and Service names come from somewhere.
    pub fn has_cluster(&self) -> bool {
        self.cluster.is_some()
    }

    /// Takes in lookup answers that arrived.
    pub fn receive_lookups(&mut self) {
        if let Some(ClusterSource::Live(live)) = &mut self.cluster {
            live.lookups_mut().receive();
        }
    }

    /// The lookups the record just built waits for (empty: write it now).
    pub fn take_waiting(&mut self) -> Vec<LookupKey> {
        std::mem::take(&mut self.waiting)
    }

    /// Whether none of `keys` is on its way any more.
    pub fn answered(&mut self, keys: &[LookupKey]) -> bool {
        self.receive_lookups();
        match &self.cluster {
            Some(ClusterSource::Live(live)) => keys.iter().all(|k| !live.lookups().is_pending(k)),
            _ => true,
        }
    }

    /// A record went out before its lookups were answered.
    pub fn count_late(&mut self) {
        if let Some(ClusterSource::Live(live)) = &mut self.cluster {
            live.lookups_mut().count_late();
        }
    }

    /// For the `stats` record: the source, its freshness, and (live) what was asked of the API;
    /// `held` records wait for lookups now.
    pub fn stats(&self, held: u64) -> Option<IdentityStats> {
        let cluster = self.cluster.as_ref()?;
        let view = cluster.view();
        let api = match cluster {
            ClusterSource::Live(live) => {
                Some(api_stats(live.requests(), live.lookups().stats(), held))
            }
            ClusterSource::File { .. } => None,
        };
        Some(IdentityStats {
            source: view.source.into(),
            age_s: view.age.as_secs(),
            stale: view.stale,
            api,
        })
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
        self.receive_lookups();
        let view = self.view();
        let mut id = self.source(cgroup_id, Some(src.ip()), view.as_ref());
        let Some(view) = view else { return id };
        let known = self.known(&view.state, names_remote_pods(verdict));
        describe_destination(&mut id, &known, service.unwrap_or(backend));
        node_address::name_node_port(&mut id, &view.state, service.unwrap_or(backend));
        if service.is_some() {
            describe_backend(&mut id, &known, backend);
        }
        if let Some(v) = verdicts::for_connect(&known, verdict, backend, service) {
            id.cluster_verdict = Some(v.kind);
            id.cluster_explanation = Some(v.explanation);
        }
        let wanted = known.into_wanted();
        self.ask(wanted);
        id
    }

    /// Identities for a server socket whose replies were lost: the pod at the local address, and
    /// what the peer is (a node, a pod, unknown).
    pub fn server_end(&mut self, local: SocketAddr, peer: SocketAddr) -> Identity {
        let view = self.view();
        let mut id = self.source(0, Some(local.ip()), view.as_ref());
        if let Some(view) = view {
            // Named from what is known: the record is not held for a lookup.
            describe_destination(&mut id, &self.known(&view.state, false), peer);
            if let Some(v) = verdicts::for_reply_peer(&view.state, peer) {
                id.cluster_verdict = Some(v.kind);
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
            // Never a lookup for a healthy connect: the cache and the EndpointSlices only.
            describe_destination(&mut id, &self.known(&view.state, false), dst);
            node_address::name_node_port(&mut id, &view.state, dst);
        }
        id
    }

    /// The verdict for unanswered or refused DNS queries to `server`.
    pub fn dns_server_verdict(&mut self, server: SocketAddr) -> Option<ClusterVerdict> {
        self.receive_lookups();
        let view = self.view()?;
        let known = self.known(&view.state, true);
        let verdict = verdicts::dns_server_is_no_live_pod(&known, server);
        let wanted = known.into_wanted();
        self.ask(wanted);
        verdict
    }

    /// Runs `f` with what is known of the cluster, asking for the lookups it needs (the datapath
    /// audit, which judges the entries whose pods are not known yet at a later read). `None`
    /// without cluster state.
    pub fn with_known<R>(
        &mut self,
        f: impl FnOnce(&ClusterView, &KnownCluster<'_>) -> R,
    ) -> Option<R> {
        self.receive_lookups();
        let view = self.view()?;
        let known = self.known(&view.state, true);
        let result = f(&view, &known);
        let wanted = known.into_wanted();
        self.ask(wanted);
        // Nothing is held for the audit's lookups.
        self.waiting.clear();
        Some(result)
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

fn api_stats(requests: ApiRequests, lookups: LookupStats, held: u64) -> ApiStats {
    let requests = watch::KINDS
        .iter()
        .enumerate()
        .map(|(i, kind)| {
            (
                (*kind).to_string(),
                KindRequests {
                    lists: requests.lists[i],
                    watches: requests.watches[i],
                    failures: requests.failures[i],
                },
            )
        })
        .collect();
    ApiStats {
        requests,
        lookups,
        held_records: held,
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

fn describe_destination(id: &mut Identity, state: &KnownCluster<'_>, to: SocketAddr) {
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
        AddressIdentity::Unknown { endpoint_of, .. } => {
            // A remote pod not looked up (a healthy connect): as its EndpointSlice names it.
            if !state.no_live_pod_at(to.ip())
                && let Some(r) = endpoint_of.iter().find(|r| names_pod(r))
                && let Some(t) = &r.endpoint.target_ref
            {
                id.dst_pod = Some(t.name.to_string());
                id.dst_namespace = Some(
                    t.namespace
                        .as_deref()
                        .map_or_else(|| r.slice.namespace.clone(), str::to_string),
                );
                id.dst_node = r.endpoint.node_name.as_deref().map(str::to_string);
                id.dst_ready = Some(r.endpoint.ready);
            }
            endpoint_services(id, &endpoint_of);
        }
    }
}

fn names_pod(r: &EndpointRef<'_>) -> bool {
    r.endpoint
        .target_ref
        .as_ref()
        .is_some_and(cluster::TargetRef::is_pod)
}

fn describe_backend(id: &mut Identity, state: &KnownCluster<'_>, backend: SocketAddr) {
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
