//! `ClusterState`: the indexed snapshot (by address, UID, namespace/name) and the address
//! questions it answers (what an IP is, which endpoints name it, which pods a Service selects).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use super::model::{
    ContainerPort, Endpoint, EndpointPort, EndpointSlice, Item, Node, Pod, PodPhase, Proto,
    Service, ServicePort, TargetPort,
};

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
    /// Builds a snapshot from objects already parsed one by one with [`parse_item`](super::parse_item) (the live
    /// watcher's stores): the same model as a file gives.
    pub fn from_items(items: impl IntoIterator<Item = Item>) -> ClusterState {
        let mut st = ClusterState::default();
        for item in items {
            st.push(item);
        }
        st.build_indexes();
        st
    }

    pub(super) fn push(&mut self, item: Item) {
        match item {
            Item::Pod(p) => self.pods.push(p),
            Item::Service(s) => self.services.push(s),
            Item::EndpointSlice(e) => self.slices.push(e),
            Item::Node(n) => self.nodes.push(n),
        }
    }

    pub(super) fn build_indexes(&mut self) {
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

/// The entries of a sorted endpoint index at `ip`.
fn equal_range<A: Ord + Copy>(sorted: &[(A, u32, u32)], ip: A) -> &[(A, u32, u32)] {
    let first = sorted.partition_point(|e| e.0 < ip);
    let end = first + sorted[first..].partition_point(|e| e.0 == ip);
    &sorted[first..end]
}
