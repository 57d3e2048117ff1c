//! A point-in-time model of cluster state, indexed by address.
//!
//! The flow tracer sees only IPs and ports. To say what a destination *is*
//! (a pod, a Service VIP, a node, or an address some EndpointSlice still
//! points at although no pod has it any more) it needs pods, Services,
//! EndpointSlices and Nodes. This module loads them from the output of
//! `kubectl get pods,services,endpointslices,nodes -A -o json` (a `v1/List`
//! of mixed kinds), keeps only the fields the tracer needs, and answers
//! address questions.
//!
//! Each item is deserialized into its k8s-openapi type (as the live watch in
//! `watch.rs` receives them) and converted once into the small lookup model
//! below. Unknown fields and unknown kinds are ignored. Errors carry the JSON
//! path of the offending value (via `serde_path_to_error`, or the conversion's
//! own path for a value the API types hold but the model cannot, such as a
//! port out of range) and the kind/name of the item it sits in.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use k8s_openapi::api::{core::v1 as k8s_core, discovery::v1 as k8s_discovery};
use serde::de::DeserializeOwned;
use serde_json::{Value, value::RawValue};

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/// Failure to load cluster state.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The text is not JSON at all (or is truncated).
    #[error("malformed JSON: {0}")]
    Syntax(#[source] serde_json::Error),
    /// The JSON is well formed but a value does not have the expected shape.
    #[error("unexpected JSON shape at `{path}`{context}: {source}")]
    Shape {
        /// JSON path of the offending value, e.g. `items[3].spec.ports[0].port`.
        path: String,
        /// ` (Service app/webhooks)` when the item is known, else empty.
        context: String,
        /// What serde expected.
        #[source]
        source: serde_json::Error,
    },
    /// The document is neither a `List` with `items` nor a single
    /// Pod/Service/EndpointSlice/Node object.
    #[error("not a kubectl List or supported object: {0}")]
    NotAList(String),
}

// ---------------------------------------------------------------------------
// Public model
// ---------------------------------------------------------------------------

/// Transport protocol of a port (Kubernetes `protocol`; defaults to TCP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Proto {
    /// `TCP` (the Kubernetes default).
    #[default]
    Tcp,
    /// `UDP`.
    Udp,
    /// `SCTP`.
    Sctp,
}

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Proto::Tcp => "TCP",
            Proto::Udp => "UDP",
            Proto::Sctp => "SCTP",
        })
    }
}

/// Pod lifecycle phase (`status.phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PodPhase {
    /// Accepted, not all containers running yet.
    Pending,
    /// Bound to a node, at least one container running.
    Running,
    /// All containers exited 0 and will not restart.
    Succeeded,
    /// All containers exited, at least one failed.
    Failed,
    /// Missing or unrecognised phase.
    #[default]
    Unknown,
}

impl PodPhase {
    /// Succeeded and Failed pods keep `status.podIP` but no longer own it.
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// The controlling owner of an object (from `metadata.ownerReferences`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    /// e.g. `ReplicaSet`, `StatefulSet`, `DaemonSet`, `Job`, `Node`.
    pub kind: String,
    /// Owner name.
    pub name: String,
}

/// A port a container declares in its spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPort {
    /// Name of the declaring container.
    pub container: String,
    /// Port name (`http`), if any; Services may target it by name.
    pub name: Option<String>,
    /// `containerPort`.
    pub port: u16,
    /// Protocol.
    pub protocol: Proto,
    /// `hostPort`, if set.
    pub host_port: Option<u16>,
}

/// A pod, reduced to what identifies it and what it listens on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.uid` (matches the pod UID found in cgroup paths).
    pub uid: String,
    /// `spec.nodeName` (None while unscheduled).
    pub node_name: Option<String>,
    /// `status.podIPs` (falling back to `status.podIP`), deduplicated.
    pub ips: Vec<IpAddr>,
    /// `spec.hostNetwork`: the pod's IPs are its node's IPs.
    pub host_network: bool,
    /// `status.phase`.
    pub phase: PodPhase,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// Controller owner (or first owner if none is marked controller).
    pub owner: Option<OwnerRef>,
    /// Ports declared by containers (and by restartable init "sidecar"
    /// containers).
    pub container_ports: Vec<ContainerPort>,
}

impl Pod {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Not Succeeded/Failed: the pod still owns its IPs.
    pub fn is_current(&self) -> bool {
        !self.phase.is_terminal()
    }

    /// The declared container port matching `port`/`proto`, if any. `None`
    /// means the pod does not advertise a listener there (it may still have
    /// one: declaring ports is optional in Kubernetes).
    pub fn declared_port(&self, port: u16, proto: Proto) -> Option<&ContainerPort> {
        self.container_ports
            .iter()
            .find(|p| p.port == port && p.protocol == proto)
    }

    /// The declared container port named `name` with protocol `proto`.
    pub fn named_port(&self, name: &str, proto: Proto) -> Option<&ContainerPort> {
        self.container_ports
            .iter()
            .find(|p| p.name.as_deref() == Some(name) && p.protocol == proto)
    }

    /// The workload behind the pod: for a ReplicaSet owner whose name ends
    /// in `-<pod-template-hash>` this is the (inferred) `Deployment`;
    /// otherwise the owner as recorded.
    pub fn workload(&self) -> Option<OwnerRef> {
        let owner = self.owner.as_ref()?;
        if owner.kind == "ReplicaSet"
            && let Some(hash) = self.labels.get("pod-template-hash")
            && let Some(dep) = owner
                .name
                .strip_suffix(hash.as_str())
                .and_then(|s| s.strip_suffix('-'))
        {
            return Some(OwnerRef {
                kind: "Deployment".to_owned(),
                name: dep.to_owned(),
            });
        }
        Some(owner.clone())
    }
}

/// `targetPort` of a Service port: a number or a container port name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetPort {
    /// Numeric target port.
    Number(u16),
    /// Named container port.
    Name(String),
}

impl fmt::Display for TargetPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetPort::Number(n) => write!(f, "{n}"),
            TargetPort::Name(s) => f.write_str(s),
        }
    }
}

/// One entry of `spec.ports` of a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    /// Port name (required by Kubernetes when there are several).
    pub name: Option<String>,
    /// Port on the cluster IP.
    pub port: u16,
    /// Where traffic goes on the backend (defaults to `port`).
    pub target_port: TargetPort,
    /// Protocol.
    pub protocol: Proto,
    /// `nodePort` for NodePort/LoadBalancer Services.
    pub node_port: Option<u16>,
}

/// A Service, reduced to its addresses, ports and selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `spec.type` (`ClusterIP`, `NodePort`, `LoadBalancer`, `ExternalName`).
    pub service_type: String,
    /// `spec.clusterIPs` (or `spec.clusterIP`); empty for headless and
    /// ExternalName Services.
    pub cluster_ips: Vec<IpAddr>,
    /// `spec.ports`.
    pub ports: Vec<ServicePort>,
    /// `spec.selector`, sorted by key; empty means the Service selects no pods itself. (A list,
    /// not a map: a cluster has a selector per Service, and a map's node is ten times the size.)
    pub selector: Vec<(String, String)>,
}

impl Service {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The Service port for `port`/`proto`.
    pub fn port(&self, port: u16, proto: Proto) -> Option<&ServicePort> {
        self.ports
            .iter()
            .find(|p| p.port == port && p.protocol == proto)
    }
}

/// A port of an EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPort {
    /// Matches the Service port name (empty string in the API = `None`).
    pub name: Option<String>,
    /// Backend port; `None` means "all ports".
    pub port: Option<u16>,
    /// Protocol.
    pub protocol: Proto,
}

/// Reference from an endpoint to the object behind it (usually a Pod). A cluster has one per pod:
/// its kind and namespace are interned ([`intern`]), its name boxed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetRef {
    /// Usually `Pod`.
    pub kind: Arc<str>,
    /// Object name.
    pub name: Box<str>,
    /// Object namespace.
    pub namespace: Option<Arc<str>>,
}

impl TargetRef {
    pub fn is_pod(&self) -> bool {
        &*self.kind == "Pod"
    }
}

/// The addresses of an endpoint: one, nearly always (kept inline, no allocation), or several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addresses {
    One(IpAddr),
    Many(Box<[IpAddr]>),
}

impl Addresses {
    fn from_vec(mut ips: Vec<IpAddr>) -> Addresses {
        if ips.len() == 1
            && let Some(ip) = ips.pop()
        {
            return Addresses::One(ip);
        }
        Addresses::Many(ips.into_boxed_slice())
    }
}

impl std::ops::Deref for Addresses {
    type Target = [IpAddr];

    fn deref(&self) -> &[IpAddr] {
        match self {
            Addresses::One(ip) => std::slice::from_ref(ip),
            Addresses::Many(ips) => ips,
        }
    }
}

impl<'a> IntoIterator for &'a Addresses {
    type Item = &'a IpAddr;
    type IntoIter = std::slice::Iter<'a, IpAddr>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// One endpoint of an EndpointSlice (one per pod of the cluster: kept small).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// IP addresses (FQDN addresses are not kept).
    pub addresses: Addresses,
    /// `conditions.ready`; absent is read as `true`, as the API specifies.
    pub ready: bool,
    /// `conditions.serving`, if reported.
    pub serving: Option<bool>,
    /// `conditions.terminating`, absent = false.
    pub terminating: bool,
    /// `targetRef`.
    pub target_ref: Option<TargetRef>,
    /// `nodeName` (interned).
    pub node_name: Option<Arc<str>>,
}

/// One shared copy of a string many objects repeat (node names, namespaces, kinds): a cluster's
/// EndpointSlices name each node once per pod on it.
pub fn intern(s: &str) -> Arc<str> {
    static STRINGS: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<Arc<str>>>> =
        std::sync::LazyLock::new(Default::default);
    let mut strings = STRINGS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(found) = strings.get(s) {
        return Arc::clone(found);
    }
    let new: Arc<str> = Arc::from(s);
    strings.insert(Arc::clone(&new));
    new
}

/// An EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSlice {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// Label `kubernetes.io/service-name`.
    pub service_name: Option<String>,
    /// `addressType` (`IPv4`, `IPv6`, `FQDN`).
    pub address_type: String,
    /// `ports`.
    pub ports: Vec<EndpointPort>,
    /// `endpoints`.
    pub endpoints: Vec<Endpoint>,
}

/// A node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// `metadata.name`.
    pub name: String,
    /// `status.addresses` of type `InternalIP`.
    pub internal_ips: Vec<IpAddr>,
    /// `status.addresses` of type `ExternalIP`.
    pub external_ips: Vec<IpAddr>,
    /// `spec.podCIDRs` (or `spec.podCIDR`), as written.
    pub pod_cidrs: Vec<String>,
    /// Its `Ready` condition is there and not `True`.
    pub not_ready: bool,
}

impl Node {
    /// Whether `ip` falls in one of this node's pod CIDRs.
    pub fn pod_cidr_contains(&self, ip: IpAddr) -> bool {
        self.pod_cidrs.iter().any(|c| cidr_contains(c, ip))
    }
}

/// "This address is an endpoint of Service X": one endpoint of one slice,
/// optionally narrowed to one slice port.
#[derive(Debug, Clone, Copy)]
pub struct EndpointRef<'a> {
    /// The slice.
    pub slice: &'a EndpointSlice,
    /// The endpoint within it holding the address.
    pub endpoint: &'a Endpoint,
    /// The slice port that matched the requested port (None when no port
    /// was requested).
    pub port: Option<&'a EndpointPort>,
    /// Owning Service name (label `kubernetes.io/service-name`).
    pub service_name: Option<&'a str>,
    /// The owning Service, when it is present in the snapshot.
    pub service: Option<&'a Service>,
}

/// What an address is, as far as the snapshot can tell.
#[derive(Debug, Clone)]
pub enum AddressIdentity<'a> {
    /// A Service cluster IP.
    Service {
        /// The Service.
        service: &'a Service,
        /// The Service port matching the requested port/protocol; `None`
        /// when the Service does not expose that port.
        port: Option<&'a ServicePort>,
    },
    /// A current (not Succeeded/Failed), non-hostNetwork pod's IP.
    Pod {
        /// The pod (name, namespace, node, ready, owner, ...).
        pod: &'a Pod,
        /// The container port the pod declares for the requested
        /// port/protocol, if any.
        declared_port: Option<&'a ContainerPort>,
        /// EndpointSlice entries naming this address (which Services send
        /// traffic here).
        endpoint_of: Vec<EndpointRef<'a>>,
    },
    /// A node's InternalIP or ExternalIP.
    Node {
        /// The node.
        node: &'a Node,
        /// A hostNetwork pod on this node declaring the requested port.
        host_network_pod: Option<&'a Pod>,
        /// EndpointSlice entries naming this address (e.g. `kubernetes`).
        endpoint_of: Vec<EndpointRef<'a>>,
    },
    /// Nothing current has this address.
    Unknown {
        /// EndpointSlice entries that still name it: a non-empty list means
        /// "a Service routes here but no live pod has this IP".
        endpoint_of: Vec<EndpointRef<'a>>,
        /// The node whose pod CIDR contains it, if any.
        pod_cidr_of: Option<&'a Node>,
    },
}

/// Per-term result of matching a Service selector against pod labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorTerm<'a> {
    /// Selector key.
    pub key: &'a str,
    /// Selector value.
    pub value: &'a str,
    /// The pod's value for that key, if any.
    pub pod_value: Option<&'a str>,
    /// `pod_value == Some(value)`.
    pub matched: bool,
}

/// Indexed cluster snapshot. Objects are shared (`Arc`) with the live watch's stores, so a
/// snapshot built after each change costs its indexes, not a copy of the cluster.
#[derive(Debug, Clone, Default)]
pub struct ClusterState {
    pods: Vec<Arc<Pod>>,
    services: Vec<Arc<Service>>,
    slices: Vec<Arc<EndpointSlice>>,
    nodes: Vec<Arc<Node>>,
    pod_by_ip: HashMap<IpAddr, usize>,
    pod_by_uid: HashMap<String, usize>,
    svc_by_ip: HashMap<IpAddr, usize>,
    /// Service indexes sorted by namespace and name (no copy of the names).
    svc_by_key: Vec<u32>,
    node_by_ip: HashMap<IpAddr, usize>,
    /// Every endpoint address, sorted: (ip, slice index, endpoint index). A sorted array, not a
    /// map of lists: a cluster has one entry per pod here, and this is a third of the size. IPv4
    /// apart from IPv6: 12 bytes an entry instead of the 28 of an `IpAddr` one, and a snapshot is
    /// built beside the one in use at every change of the cluster.
    endpoints_v4: Vec<(Ipv4Addr, u32, u32)>,
    endpoints_v6: Vec<(Ipv6Addr, u32, u32)>,
    /// Nodes the live watch saw deleted since the tracer started, newest last: their addresses
    /// may still be where some connection's state lived.
    departed_nodes: Vec<Arc<Node>>,
}

impl ClusterState {
    /// Load from `kubectl get pods,services,endpointslices,nodes -A -o json`.
    ///
    /// Also accepts a single Pod/Service/EndpointSlice/Node object and any
    /// `*List` with `items`. Items of other kinds are ignored.
    pub fn from_kubectl_json(text: &str) -> Result<ClusterState, ClusterError> {
        // The document is read as raw slices first and each item is turned into a JSON value only
        // while it is converted: a 52 MB snapshot never lives in memory as one `Value` tree
        // (about 16 times the file), only the model it leaves.
        let doc: &RawValue = serde_json::from_str(text).map_err(ClusterError::Syntax)?;
        let Ok(top) = serde_json::from_str::<BTreeMap<String, &RawValue>>(doc.get()) else {
            let value: Value = serde_json::from_str(doc.get()).map_err(ClusterError::Syntax)?;
            return Err(ClusterError::NotAList(format!(
                "top-level value is {}, expected an object",
                json_type(&value)
            )));
        };
        let mut st = ClusterState::default();
        if let Some(items) = top.get("items") {
            let items: Vec<&RawValue> = match items.get() {
                "null" => Vec::new(),
                raw if raw.starts_with('[') => {
                    serde_json::from_str(raw).map_err(ClusterError::Syntax)?
                }
                raw => {
                    let value: Value = serde_json::from_str(raw).map_err(ClusterError::Syntax)?;
                    return Err(ClusterError::NotAList(format!(
                        "`items` is {}, expected an array",
                        json_type(&value)
                    )));
                }
            };
            for (i, raw) in items.iter().enumerate() {
                let item: Value = serde_json::from_str(raw.get()).map_err(ClusterError::Syntax)?;
                if let Some(item) = parse_item(&item, &format!("items[{i}]"))? {
                    st.push(item);
                }
            }
        } else {
            let kind = top
                .get("kind")
                .and_then(|k| serde_json::from_str::<String>(k.get()).ok());
            match kind.as_deref() {
                Some("Pod" | "Service" | "EndpointSlice" | "Node") => {
                    let item: Value =
                        serde_json::from_str(doc.get()).map_err(ClusterError::Syntax)?;
                    if let Some(item) = parse_item(&item, "")? {
                        st.push(item);
                    }
                }
                Some(kind) => {
                    return Err(ClusterError::NotAList(format!(
                        "top-level kind `{kind}` has no `items`"
                    )));
                }
                None => {
                    return Err(ClusterError::NotAList(
                        "top-level object has neither `items` nor `kind`".to_owned(),
                    ));
                }
            }
        }
        st.build_indexes();
        Ok(st)
    }

    /// Builds a snapshot from objects already parsed one by one with [`parse_item`] (the live
    /// watcher's stores): the same model as a file gives.
    pub fn from_items(items: impl IntoIterator<Item = Item>) -> ClusterState {
        let mut st = ClusterState::default();
        for item in items {
            st.push(item);
        }
        st.build_indexes();
        st
    }

    fn push(&mut self, item: Item) {
        match item {
            Item::Pod(p) => self.pods.push(p),
            Item::Service(s) => self.services.push(s),
            Item::EndpointSlice(e) => self.slices.push(e),
            Item::Node(n) => self.nodes.push(n),
        }
    }

    fn build_indexes(&mut self) {
        for (i, p) in self.pods.iter().enumerate() {
            self.pod_by_uid.insert(p.uid.clone(), i);
            if !p.is_current() || p.host_network {
                continue;
            }
            for ip in &p.ips {
                // Two current pods should never share an IP; if a stale
                // snapshot has that, prefer the Running one.
                match self.pod_by_ip.get(ip) {
                    Some(&j)
                        if self.pods[j].phase == PodPhase::Running
                            || p.phase != PodPhase::Running => {}
                    _ => {
                        self.pod_by_ip.insert(*ip, i);
                    }
                }
            }
        }
        self.svc_by_key = (0..self.services.len() as u32).collect();
        let services = &self.services;
        self.svc_by_key.sort_unstable_by(|&a, &b| {
            let (a, b) = (&services[a as usize], &services[b as usize]);
            (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name))
        });
        for (i, s) in self.services.iter().enumerate() {
            for ip in &s.cluster_ips {
                self.svc_by_ip.entry(*ip).or_insert(i);
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            for ip in n.internal_ips.iter().chain(&n.external_ips) {
                self.node_by_ip.entry(*ip).or_insert(i);
            }
        }
        let addresses = || {
            self.slices
                .iter()
                .flat_map(|s| &s.endpoints)
                .flat_map(|e| &e.addresses)
        };
        let v4 = addresses().filter(|ip| ip.is_ipv4()).count();
        let v6 = addresses().count() - v4;
        self.endpoints_v4 = Vec::with_capacity(v4);
        self.endpoints_v6 = Vec::with_capacity(v6);
        for (si, s) in self.slices.iter().enumerate() {
            for (ei, e) in s.endpoints.iter().enumerate() {
                for ip in &e.addresses {
                    match *ip {
                        IpAddr::V4(a) => self.endpoints_v4.push((a, si as u32, ei as u32)),
                        IpAddr::V6(a) => self.endpoints_v6.push((a, si as u32, ei as u32)),
                    }
                }
            }
        }
        self.endpoints_v4.sort_unstable();
        self.endpoints_v6.sort_unstable();
    }

    /// All pods in the snapshot (including Succeeded/Failed).
    pub fn pods(&self) -> &[Arc<Pod>] {
        &self.pods
    }

    /// All Services.
    pub fn services(&self) -> &[Arc<Service>] {
        &self.services
    }

    /// All EndpointSlices.
    pub fn endpoint_slices(&self) -> &[Arc<EndpointSlice>] {
        &self.slices
    }

    /// All nodes.
    pub fn nodes(&self) -> &[Arc<Node>] {
        &self.nodes
    }

    /// The current pod (not Succeeded/Failed, not hostNetwork) with this IP.
    pub fn pod_by_ip(&self, ip: IpAddr) -> Option<&Pod> {
        self.pod_by_ip.get(&ip).map(|&i| &*self.pods[i])
    }

    /// The pod with this UID (e.g. from [`crate::cgroup::ContainerRef`]),
    /// whatever its phase.
    pub fn pod_by_uid(&self, uid: &str) -> Option<&Pod> {
        self.pod_by_uid.get(uid).map(|&i| &*self.pods[i])
    }

    /// The Service by namespace and name.
    pub fn service(&self, namespace: &str, name: &str) -> Option<&Service> {
        let found = self.svc_by_key.binary_search_by(|&i| {
            let s = &self.services[i as usize];
            (s.namespace.as_str(), s.name.as_str()).cmp(&(namespace, name))
        });
        found
            .ok()
            .map(|at| &*self.services[self.svc_by_key[at] as usize])
    }

    /// The Service whose cluster IP is `ip` and which exposes `port`/`proto`.
    pub fn service_by_cluster_ip(
        &self,
        ip: IpAddr,
        port: u16,
        proto: Proto,
    ) -> Option<(&Service, &ServicePort)> {
        let svc = &*self.services[*self.svc_by_ip.get(&ip)?];
        Some((svc, svc.port(port, proto)?))
    }

    /// A node deleted since the tracer started (live watch only) that had `ip`.
    pub fn departed_node_by_ip(&self, ip: IpAddr) -> Option<&Node> {
        self.departed_nodes
            .iter()
            .rev()
            .find(|n| n.internal_ips.contains(&ip) || n.external_ips.contains(&ip))
            .map(|n| &**n)
    }

    /// The same state, knowing these nodes were deleted.
    #[must_use]
    pub fn with_departed_nodes(mut self, departed: Vec<Arc<Node>>) -> ClusterState {
        self.departed_nodes = departed;
        self
    }

    /// The node with this InternalIP or ExternalIP.
    pub fn node_by_ip(&self, ip: IpAddr) -> Option<&Node> {
        self.node_by_ip.get(&ip).map(|&i| &*self.nodes[i])
    }

    /// The node whose pod CIDR contains `ip`.
    pub fn node_by_pod_cidr(&self, ip: IpAddr) -> Option<&Node> {
        self.nodes
            .iter()
            .find(|n| n.pod_cidr_contains(ip))
            .map(|n| &**n)
    }

    /// Every EndpointSlice endpoint whose address is `ip` (and, if given,
    /// whose slice has a port equal to `port` or an "all ports" entry), with
    /// the owning Service name: this says "ip is an endpoint of Service X".
    ///
    /// With `port = None` there is one entry per endpoint; with a port, one
    /// per matching slice port.
    pub fn endpoints_with_address(&self, ip: IpAddr, port: Option<u16>) -> Vec<EndpointRef<'_>> {
        let (v4, v6) = match ip {
            IpAddr::V4(a) => (equal_range(&self.endpoints_v4, a), &[][..]),
            IpAddr::V6(a) => (&[][..], equal_range(&self.endpoints_v6, a)),
        };
        let hits = v4.iter().map(|e| (e.1, e.2));
        let mut out = Vec::new();
        for (si, ei) in hits.chain(v6.iter().map(|e| (e.1, e.2))) {
            let slice = &*self.slices[si as usize];
            let endpoint = &slice.endpoints[ei as usize];
            let service_name = slice.service_name.as_deref();
            let service = service_name.and_then(|n| self.service(&slice.namespace, n));
            let mk = |port| EndpointRef {
                slice,
                endpoint,
                port,
                service_name,
                service,
            };
            match port {
                None => out.push(mk(None)),
                Some(want) => out.extend(
                    slice
                        .ports
                        .iter()
                        .filter(|p| p.port.is_none_or(|p| p == want))
                        .map(|p| mk(Some(p))),
                ),
            }
        }
        out
    }

    /// Describe an address: Service VIP, pod, node, or unknown (with any
    /// EndpointSlice entries that still point at it).
    pub fn describe(&self, ip: IpAddr, port: u16, proto: Proto) -> AddressIdentity<'_> {
        if let Some(&i) = self.svc_by_ip.get(&ip) {
            let service = &*self.services[i];
            return AddressIdentity::Service {
                service,
                port: service.port(port, proto),
            };
        }
        let endpoint_of = self.endpoints_with_address(ip, Some(port));
        if let Some(pod) = self.pod_by_ip(ip) {
            return AddressIdentity::Pod {
                pod,
                declared_port: pod.declared_port(port, proto),
                endpoint_of,
            };
        }
        if let Some(node) = self.node_by_ip(ip) {
            let host_network_pod = self
                .pods
                .iter()
                .find(|p| {
                    p.host_network
                        && p.is_current()
                        && p.node_name.as_deref() == Some(node.name.as_str())
                        && p.declared_port(port, proto).is_some()
                })
                .map(|p| &**p);
            return AddressIdentity::Node {
                node,
                host_network_pod,
                endpoint_of,
            };
        }
        AddressIdentity::Unknown {
            endpoint_of,
            pod_cidr_of: self.node_by_pod_cidr(ip),
        }
    }

    /// Whether the Service's selector selects the pod: same namespace,
    /// non-empty selector, every term equal to the pod's label.
    pub fn selector_matches(&self, svc: &Service, pod: &Pod) -> bool {
        svc.namespace == pod.namespace
            && !svc.selector.is_empty()
            && self.selector_terms(svc, pod).iter().all(|t| t.matched)
    }

    /// Term-by-term comparison of the Service selector with the pod's labels,
    /// to explain a (mis)match: "app=webhooks matched webhooks-worker-... too".
    pub fn selector_terms<'a>(&self, svc: &'a Service, pod: &'a Pod) -> Vec<SelectorTerm<'a>> {
        svc.selector
            .iter()
            .map(|(k, v)| {
                let pod_value = pod.labels.get(k).map(String::as_str);
                SelectorTerm {
                    key: k,
                    value: v,
                    pod_value,
                    matched: pod_value == Some(v.as_str()),
                }
            })
            .collect()
    }

    /// Current pods the Service selects, sorted by name.
    pub fn pods_selected_by(&self, svc: &Service) -> Vec<&Pod> {
        let mut v: Vec<&Pod> = self
            .pods
            .iter()
            .filter(|p| p.is_current() && self.selector_matches(svc, p))
            .map(|p| &**p)
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// The backend port a Service port sends to on `pod`: numeric targetPort
    /// as is, named targetPort resolved through the pod's declared ports
    /// (`None` if the pod declares no port of that name).
    pub fn target_port_on(&self, port: &ServicePort, pod: &Pod) -> Option<u16> {
        match &port.target_port {
            TargetPort::Number(n) => Some(*n),
            TargetPort::Name(name) => pod.named_port(name, port.protocol).map(|p| p.port),
        }
    }
}
/// One object of a kind the model keeps, shared between the watch's stores and the snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Pod(Arc<Pod>),
    Service(Arc<Service>),
    EndpointSlice(Arc<EndpointSlice>),
    Node(Arc<Node>),
}

/// Parses one API object (as `kubectl -o json` or the API server writes it) by its `kind` into the
/// Kubernetes API type, then into the model; `Ok(None)` for kinds the model does not keep. `path`
/// names it in errors (`items[3]`).
pub fn parse_item(item: &Value, path: &str) -> Result<Option<Item>, ClusterError> {
    let kind = match item {
        Value::Object(m) => m.get("kind").and_then(Value::as_str).unwrap_or(""),
        other => {
            return Err(ClusterError::Shape {
                path: path.to_owned(),
                context: String::new(),
                source: serde::de::Error::custom(format!(
                    "invalid type: {}, expected a Kubernetes object",
                    json_type(other)
                )),
            });
        }
    };
    let converted = match kind {
        "Pod" => Item::try_from(from_item::<k8s_core::Pod>(item, path, kind)?),
        "Service" => Item::try_from(from_item::<k8s_core::Service>(item, path, kind)?),
        "EndpointSlice" => {
            Item::try_from(from_item::<k8s_discovery::EndpointSlice>(item, path, kind)?)
        }
        "Node" => Item::try_from(from_item::<k8s_core::Node>(item, path, kind)?),
        _ => return Ok(None),
    };
    converted.map(Some).map_err(|e| ClusterError::Shape {
        path: join_path(path, &e.path),
        context: context(item, kind),
        source: serde::de::Error::custom(e.message),
    })
}

/// Deserialize one item into its API type with path tracking; errors name the item.
fn from_item<T: DeserializeOwned>(item: &Value, path: &str, kind: &str) -> Result<T, ClusterError> {
    serde_path_to_error::deserialize(item).map_err(|e| {
        let inner = e.path().to_string();
        ClusterError::Shape {
            path: join_path(path, if inner == "." { "" } else { &inner }),
            context: context(item, kind),
            source: e.into_inner(),
        }
    })
}

fn join_path(outer: &str, inner: &str) -> String {
    match (outer.is_empty(), inner.is_empty()) {
        (true, _) => inner.to_owned(),
        (false, true) => outer.to_owned(),
        (false, false) => format!("{outer}.{inner}"),
    }
}

/// ` (Service app/webhooks)`: the item's kind and `namespace/name`, as far as it has them.
fn context(item: &Value, kind: &str) -> String {
    let meta = item.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str);
    let ns = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str);
    match (ns, name) {
        (Some(ns), Some(n)) => format!(" ({kind} {ns}/{n})"),
        (None, Some(n)) => format!(" ({kind} {n})"),
        _ => format!(" ({kind})"),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The entries of a sorted endpoint index at `ip`.
fn equal_range<A: Ord + Copy>(sorted: &[(A, u32, u32)], ip: A) -> &[(A, u32, u32)] {
    let first = sorted.partition_point(|e| e.0 < ip);
    let end = first + sorted[first..].partition_point(|e| e.0 == ip);
    &sorted[first..end]
}

/// `10.244.1.0/24` style containment; false on unparsable CIDRs or family
/// mismatch.
fn cidr_contains(cidr: &str, ip: IpAddr) -> bool {
    let Some((net, len)) = cidr.split_once('/') else {
        return false;
    };
    let (Ok(net), Ok(len)) = (net.parse::<IpAddr>(), len.parse::<u32>()) else {
        return false;
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) if len <= 32 => {
            let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) if len <= 128 => {
            let mask = u128::MAX.checked_shl(128 - len).unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// Parse the addresses we keep; non-IP strings (`None`, hostnames, FQDNs)
/// are skipped.
fn parse_ips<'a>(it: impl IntoIterator<Item = &'a str>) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = Vec::new();
    for s in it {
        if let Ok(ip) = s.trim().parse::<IpAddr>()
            && !out.contains(&ip)
        {
            out.push(ip);
        }
    }
    out.shrink_to_fit();
    out
}

/// A value the Kubernetes API types hold but the model cannot: a port out of range, an unknown
/// protocol, an object without a name. `path` is relative to the object (`spec.ports[0].port`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}`: {message}")]
pub struct ModelError {
    pub path: String,
    pub message: String,
}

/// The conversion from the Kubernetes API types (what both the kubectl snapshot and the live watch
/// deserialize into) to the model, once per object; defaults as the API documents them.
mod convert {
    use k8s_openapi::apimachinery::pkg::{
        apis::meta::v1::{ObjectMeta, OwnerReference},
        util::intstr::IntOrString,
    };

    use super::{
        Addresses, Arc, ContainerPort, Endpoint, EndpointPort, EndpointSlice, Item, ModelError,
        Node, OwnerRef, Pod, PodPhase, Proto, Service, ServicePort, TargetPort, TargetRef, intern,
        k8s_core, k8s_discovery, parse_ips,
    };

    fn error(path: impl Into<String>, message: impl Into<String>) -> ModelError {
        ModelError {
            path: path.into(),
            message: message.into(),
        }
    }

    fn port(value: i32, path: impl FnOnce() -> String) -> Result<u16, ModelError> {
        u16::try_from(value).map_err(|_| {
            error(
                path(),
                format!("invalid value: integer `{value}`, expected a port number (0-65535)"),
            )
        })
    }

    /// `protocol`, TCP when absent.
    fn proto(value: Option<&str>, path: impl FnOnce() -> String) -> Result<Proto, ModelError> {
        match value {
            None | Some("TCP") => Ok(Proto::Tcp),
            Some("UDP") => Ok(Proto::Udp),
            Some("SCTP") => Ok(Proto::Sctp),
            Some(other) => Err(error(
                path(),
                format!("unknown variant `{other}`, expected one of `TCP`, `UDP`, `SCTP`"),
            )),
        }
    }

    fn non_empty(s: Option<String>) -> Option<String> {
        s.filter(|s| !s.is_empty())
    }

    /// `metadata.name` (required), `metadata.namespace` (empty for cluster-scoped kinds).
    fn name(meta: &mut ObjectMeta) -> Result<(String, String), ModelError> {
        let name = meta
            .name
            .take()
            .ok_or_else(|| error("metadata", "missing field `name`"))?;
        Ok((name, meta.namespace.take().unwrap_or_default()))
    }

    fn phase(value: Option<&str>) -> PodPhase {
        match value {
            Some("Pending") => PodPhase::Pending,
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            _ => PodPhase::Unknown,
        }
    }

    /// The controller owner, else the first.
    fn owner(refs: Option<&[OwnerReference]>) -> Option<OwnerRef> {
        let refs = refs.unwrap_or_default();
        let pick = refs
            .iter()
            .find(|r| r.controller == Some(true))
            .or_else(|| refs.first())?;
        Some(OwnerRef {
            kind: pick.kind.clone(),
            name: pick.name.clone(),
        })
    }

    impl TryFrom<k8s_core::Pod> for Pod {
        type Error = ModelError;

        fn try_from(pod: k8s_core::Pod) -> Result<Pod, ModelError> {
            let mut meta = pod.metadata;
            let (name, namespace) = name(&mut meta)?;
            let spec = pod.spec.unwrap_or_default();
            let status = pod.status.unwrap_or_default();
            let ips = parse_ips(
                status
                    .pod_ips
                    .iter()
                    .flatten()
                    .map(|p| p.ip.as_str())
                    .chain(status.pod_ip.as_deref()),
            );
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            // Restartable init containers ("sidecars") listen like containers.
            let containers = spec
                .containers
                .iter()
                .enumerate()
                .map(|(i, c)| ("containers", i, c));
            let sidecars = spec
                .init_containers
                .iter()
                .flatten()
                .enumerate()
                .filter(|(_, c)| c.restart_policy.as_deref() == Some("Always"))
                .map(|(i, c)| ("initContainers", i, c));
            let mut container_ports = Vec::new();
            for (list, i, c) in containers.chain(sidecars) {
                for (j, p) in c.ports.iter().flatten().enumerate() {
                    let at = |field: &str| format!("spec.{list}[{i}].ports[{j}].{field}");
                    container_ports.push(ContainerPort {
                        container: c.name.clone(),
                        name: non_empty(p.name.clone()),
                        port: port(p.container_port, || at("containerPort"))?,
                        protocol: proto(p.protocol.as_deref(), || at("protocol"))?,
                        host_port: match p.host_port {
                            None | Some(0) => None,
                            Some(h) => Some(port(h, || at("hostPort"))?),
                        },
                    });
                }
            }
            Ok(Pod {
                owner: owner(meta.owner_references.as_deref()),
                name,
                namespace,
                uid: meta.uid.unwrap_or_default(),
                node_name: non_empty(spec.node_name),
                ips,
                host_network: spec.host_network.unwrap_or(false),
                phase: phase(status.phase.as_deref()),
                ready,
                terminating: meta.deletion_timestamp.is_some(),
                labels: meta.labels.unwrap_or_default(),
                container_ports,
            })
        }
    }

    /// `targetPort`: 0 and "" mean unset (the API defaults it to `port`); a numeric string is a
    /// number, as the API server reads it.
    fn target_port(
        value: Option<IntOrString>,
        port_number: u16,
        path: impl FnOnce() -> String,
    ) -> Result<TargetPort, ModelError> {
        Ok(match value {
            None | Some(IntOrString::Int(0)) => TargetPort::Number(port_number),
            Some(IntOrString::Int(n)) => TargetPort::Number(port(n, path)?),
            Some(IntOrString::String(s)) if s.is_empty() => TargetPort::Number(port_number),
            Some(IntOrString::String(s)) => match s.parse::<u16>() {
                Ok(n) => TargetPort::Number(n),
                Err(_) => TargetPort::Name(s),
            },
        })
    }

    impl TryFrom<k8s_core::Service> for Service {
        type Error = ModelError;

        fn try_from(svc: k8s_core::Service) -> Result<Service, ModelError> {
            let mut meta = svc.metadata;
            let (name, namespace) = name(&mut meta)?;
            let spec = svc.spec.unwrap_or_default();
            let cluster_ips = parse_ips(
                spec.cluster_ips
                    .iter()
                    .flatten()
                    .map(String::as_str)
                    .chain(spec.cluster_ip.as_deref()),
            );
            let mut ports = Vec::new();
            for (i, p) in spec.ports.into_iter().flatten().enumerate() {
                let at = |field: &str| format!("spec.ports[{i}].{field}");
                let number = port(p.port, || at("port"))?;
                ports.push(ServicePort {
                    name: non_empty(p.name),
                    port: number,
                    target_port: target_port(p.target_port, number, || at("targetPort"))?,
                    protocol: proto(p.protocol.as_deref(), || at("protocol"))?,
                    node_port: match p.node_port {
                        None | Some(0) => None,
                        Some(n) => Some(port(n, || at("nodePort"))?),
                    },
                });
            }
            ports.shrink_to_fit();
            Ok(Service {
                name,
                namespace,
                service_type: spec.type_.unwrap_or_else(|| "ClusterIP".to_owned()),
                cluster_ips,
                ports,
                selector: spec.selector.unwrap_or_default().into_iter().collect(),
            })
        }
    }

    impl TryFrom<k8s_discovery::EndpointSlice> for EndpointSlice {
        type Error = ModelError;

        fn try_from(slice: k8s_discovery::EndpointSlice) -> Result<EndpointSlice, ModelError> {
            let mut meta = slice.metadata;
            let (name, namespace) = name(&mut meta)?;
            let service_name = meta
                .labels
                .as_mut()
                .and_then(|l| l.remove("kubernetes.io/service-name"));
            let mut ports = Vec::new();
            for (i, p) in slice.ports.into_iter().flatten().enumerate() {
                let at = |field: &str| format!("ports[{i}].{field}");
                ports.push(EndpointPort {
                    name: non_empty(p.name),
                    port: p.port.map(|n| port(n, || at("port"))).transpose()?,
                    protocol: proto(p.protocol.as_deref(), || at("protocol"))?,
                });
            }
            let endpoints = slice
                .endpoints
                .into_iter()
                .flatten()
                .map(|e| {
                    let c = e.conditions.unwrap_or_default();
                    Endpoint {
                        addresses: Addresses::from_vec(parse_ips(
                            e.addresses.iter().map(String::as_str),
                        )),
                        // Absent `ready` is read as ready, as the API specifies.
                        ready: c.ready.unwrap_or(true),
                        serving: c.serving,
                        terminating: c.terminating.unwrap_or(false),
                        target_ref: e.target_ref.map(|t| TargetRef {
                            kind: intern(t.kind.as_deref().unwrap_or_default()),
                            name: t.name.unwrap_or_default().into_boxed_str(),
                            namespace: t.namespace.as_deref().map(intern),
                        }),
                        node_name: e.node_name.as_deref().map(intern),
                    }
                })
                .collect::<Vec<_>>();
            // One per pod of the cluster: no spare capacity.
            let mut endpoints = endpoints;
            endpoints.shrink_to_fit();
            ports.shrink_to_fit();
            Ok(EndpointSlice {
                name,
                namespace,
                service_name,
                address_type: slice.address_type,
                ports,
                endpoints,
            })
        }
    }

    impl TryFrom<k8s_core::Node> for Node {
        type Error = ModelError;

        fn try_from(node: k8s_core::Node) -> Result<Node, ModelError> {
            let mut meta = node.metadata;
            let (name, _) = name(&mut meta)?;
            let spec = node.spec.unwrap_or_default();
            let status = node.status.unwrap_or_default();
            let status_conditions = status.conditions.unwrap_or_default();
            let addresses = status.addresses.unwrap_or_default();
            let of_type = |t: &str| {
                parse_ips(
                    addresses
                        .iter()
                        .filter(|a| a.type_ == t)
                        .map(|a| a.address.as_str()),
                )
            };
            let mut pod_cidrs = spec.pod_cidrs.unwrap_or_default();
            if let Some(c) = spec.pod_cidr
                && !c.is_empty()
                && !pod_cidrs.contains(&c)
            {
                pod_cidrs.push(c);
            }
            let not_ready = status_conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status != "True");
            Ok(Node {
                name,
                internal_ips: of_type("InternalIP"),
                external_ips: of_type("ExternalIP"),
                pod_cidrs,
                not_ready,
            })
        }
    }

    impl TryFrom<k8s_core::Pod> for Item {
        type Error = ModelError;
        fn try_from(o: k8s_core::Pod) -> Result<Item, ModelError> {
            Pod::try_from(o).map(|x| Item::Pod(Arc::new(x)))
        }
    }

    impl TryFrom<k8s_core::Service> for Item {
        type Error = ModelError;
        fn try_from(o: k8s_core::Service) -> Result<Item, ModelError> {
            Service::try_from(o).map(|x| Item::Service(Arc::new(x)))
        }
    }

    impl TryFrom<k8s_discovery::EndpointSlice> for Item {
        type Error = ModelError;
        fn try_from(o: k8s_discovery::EndpointSlice) -> Result<Item, ModelError> {
            EndpointSlice::try_from(o).map(|x| Item::EndpointSlice(Arc::new(x)))
        }
    }

    impl TryFrom<k8s_core::Node> for Item {
        type Error = ModelError;
        fn try_from(o: k8s_core::Node) -> Result<Item, ModelError> {
            Node::try_from(o).map(|x| Item::Node(Arc::new(x)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr() {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        assert!(cidr_contains("10.244.154.0/24", ip("10.244.154.66")));
        assert!(!cidr_contains("10.244.131.0/24", ip("10.244.154.66")));
        assert!(cidr_contains("0.0.0.0/0", ip("1.2.3.4")));
        assert!(cidr_contains("fd00:10:244:1::/64", ip("fd00:10:244:1::5")));
        assert!(!cidr_contains("fd00:10:244:1::/64", ip("10.0.0.1")));
        assert!(!cidr_contains("garbage", ip("10.0.0.1")));
    }

    #[test]
    fn workload_from_replicaset() {
        let mut labels = BTreeMap::new();
        labels.insert("pod-template-hash".to_owned(), "86c79d5f77".to_owned());
        let pod = Pod {
            name: "webhooks-86c79d5f77-2xk9p".into(),
            namespace: "app".into(),
            uid: "u".into(),
            node_name: None,
            ips: vec![],
            host_network: false,
            phase: PodPhase::Running,
            ready: true,
            terminating: false,
            labels,
            owner: Some(OwnerRef {
                kind: "ReplicaSet".into(),
                name: "webhooks-86c79d5f77".into(),
            }),
            container_ports: vec![],
        };
        assert_eq!(
            pod.workload(),
            Some(OwnerRef {
                kind: "Deployment".into(),
                name: "webhooks".into()
            })
        );
    }
}
