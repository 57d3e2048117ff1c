//! The cluster objects the tracer keeps (pods, Services, EndpointSlices, nodes), with only the
//! fields it needs and the small questions each answers about itself.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

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
    pub(super) fn from_vec(mut ips: Vec<IpAddr>) -> Addresses {
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

/// One object of a kind the model keeps, shared between the watch's stores and the snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Pod(Arc<Pod>),
    Service(Arc<Service>),
    EndpointSlice(Arc<EndpointSlice>),
    Node(Arc<Node>),
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
