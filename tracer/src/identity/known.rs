//! What is known of the cluster for one record: the snapshot (a `--cluster-state` file with every
//! pod, or the live watch with this node's pods and every Service, EndpointSlice and node), plus
//! the pods looked up on demand (`pod_lookup.rs`).
//!
//! With the live watch, "no pod has this address" can no longer be read from an index of every
//! pod: a remote address is a live pod, no pod, or not known yet. [`KnownCluster::pod_at`] says
//! which, from the lookups' cache; a record that may ask (a failing one) notes the lookups it
//! needs ([`KnownCluster::into_wanted`]), and its record waits for them (`stages/held.rs`). The verdicts
//! call the same methods as on [`ClusterState`] (which this derefs to), so they read the same with
//! either source.
use std::{
    cell::{Cell, RefCell},
    net::IpAddr,
    ops::Deref,
};

use super::{
    cluster::{AddressIdentity, ClusterState, Node, Pod, Proto, Service},
    pod_lookup::{Lookup, LookupKey, PodLookups},
};

/// A remote address and the pods there.
pub enum PodAt<'a> {
    /// A current pod (not Succeeded/Failed, not hostNetwork) has it.
    Live(&'a Pod),
    /// No current pod has it.
    Absent,
    /// Not known (yet): a lookup is on its way, failed, or was not asked for.
    Unknown,
}

/// The pods the live watch does not follow, and whether this record may ask for them.
pub struct Remote<'a> {
    pub lookups: &'a PodLookups,
    /// This node: its pods are all in the snapshot.
    pub node: &'a str,
    /// A failing record: it may ask the API server. A healthy one reads the cache only.
    pub may_ask: bool,
}

pub struct KnownCluster<'a> {
    state: &'a ClusterState,
    /// `None`: the snapshot has every pod (a file).
    remote: Option<Remote<'a>>,
    /// Asking is on (for a record that may ask): off inside [`KnownCluster::without_asking`].
    asking: Cell<bool>,
    wanted: RefCell<Vec<LookupKey>>,
    /// Lookups this record needed that the cache answered.
    hits: RefCell<Vec<LookupKey>>,
}

impl Deref for KnownCluster<'_> {
    type Target = ClusterState;

    fn deref(&self) -> &ClusterState {
        self.state
    }
}

impl<'a> KnownCluster<'a> {
    pub fn new(state: &'a ClusterState, remote: Option<Remote<'a>>) -> KnownCluster<'a> {
        KnownCluster {
            asking: Cell::new(remote.as_ref().is_some_and(|r| r.may_ask)),
            state,
            remote,
            wanted: RefCell::new(Vec::new()),
            hits: RefCell::new(Vec::new()),
        }
    }

    /// Every pod is in the snapshot.
    pub fn complete(state: &'a ClusterState) -> KnownCluster<'a> {
        KnownCluster::new(state, None)
    }

    /// The lookups this record needs that were not answered, and how many the cache answered.
    pub fn into_wanted(self) -> (Vec<LookupKey>, u64) {
        let mut wanted = self.wanted.into_inner();
        wanted.sort();
        wanted.dedup();
        let mut hits = self.hits.into_inner();
        hits.sort();
        hits.dedup();
        (wanted, hits.len() as u64)
    }

    fn want(&self, key: LookupKey) {
        if self.asking.get() {
            self.wanted.borrow_mut().push(key);
        }
    }

    /// `f` reads the cache only, whatever this record may do.
    pub fn without_asking<R>(&self, f: impl FnOnce(&Self) -> R) -> R {
        let was = self.asking.replace(false);
        let result = f(self);
        self.asking.set(was);
        result
    }

    fn cached(&self, key: LookupKey) -> Option<&'a [Pod]> {
        let remote = self.remote.as_ref()?;
        match remote.lookups.get(&key) {
            Lookup::Known(pods) => {
                if self.asking.get() {
                    self.hits.borrow_mut().push(key);
                }
                Some(pods)
            }
            Lookup::Pending | Lookup::Unavailable => {
                self.want(key);
                None
            }
        }
    }

    /// Whether `ip` is in this node's pod range (its pods are all in the snapshot).
    fn on_this_node(&self, ip: IpAddr, node: &str) -> bool {
        self.state
            .node_by_pod_cidr(ip)
            .is_some_and(|n| n.name == node)
    }

    /// Whether `ip` can be a pod's: in some node's pod range, or, when no node says its range,
    /// a private address.
    fn could_be_a_pod(&self, ip: IpAddr) -> bool {
        if self.state.node_by_pod_cidr(ip).is_some() {
            return true;
        }
        let any_ranges = self.state.nodes().iter().any(|n| !n.pod_cidrs.is_empty());
        !any_ranges && is_private(ip)
    }

    /// The pod an EndpointSlice names for `ip`: (namespace, name).
    fn endpoint_pod(&self, ip: IpAddr) -> Option<(String, String)> {
        self.state
            .endpoints_with_address(ip, None)
            .into_iter()
            .find_map(|r| {
                let t = r.endpoint.target_ref.as_ref().filter(|t| t.is_pod())?;
                let ns = t
                    .namespace
                    .as_deref()
                    .map_or_else(|| r.slice.namespace.clone(), str::to_string);
                Some((ns, t.name.to_string()))
            })
    }

    /// The lookup that says which pod has `ip`: by the name an EndpointSlice gives it, else by
    /// the address. `None` when no lookup can say more than the snapshot.
    fn lookup_for(&self, ip: IpAddr) -> Option<LookupKey> {
        let remote = self.remote.as_ref()?;
        if self.on_this_node(ip, remote.node) {
            return None;
        }
        match self.endpoint_pod(ip) {
            Some((namespace, name)) => Some(LookupKey::PodName { namespace, name }),
            None if self.could_be_a_pod(ip) => Some(LookupKey::PodIp(ip)),
            None => None,
        }
    }

    /// Whether a current pod has `ip`, as far as is known.
    pub fn pod_at(&self, ip: IpAddr) -> PodAt<'a> {
        if let Some(pod) = self.state.pod_by_ip(ip) {
            return PodAt::Live(pod);
        }
        let Some(key) = self.lookup_for(ip) else {
            return PodAt::Absent;
        };
        match self.cached(key) {
            Some(pods) => pods
                .iter()
                .find(|p| p.is_current() && !p.host_network && p.ips.contains(&ip))
                .map_or(PodAt::Absent, PodAt::Live),
            None => PodAt::Unknown,
        }
    }

    /// No current pod has `ip`, for certain.
    pub fn no_live_pod_at(&self, ip: IpAddr) -> bool {
        matches!(self.pod_at(ip), PodAt::Absent)
    }

    /// The current pod with `ip`, when known.
    pub fn pod_by_ip(&self, ip: IpAddr) -> Option<&'a Pod> {
        match self.pod_at(ip) {
            PodAt::Live(pod) => Some(pod),
            PodAt::Absent | PodAt::Unknown => None,
        }
    }

    /// A Succeeded or Failed pod that had `ip`, when known: a remote address is looked up by
    /// itself for this (the pods that ever had it, whatever an EndpointSlice names).
    pub fn finished_pod_with(&self, ip: IpAddr) -> Option<&'a Pod> {
        let finished = |p: &&Pod| !p.is_current() && p.ips.contains(&ip);
        if let Some(pod) = self.state.pods().iter().map(|p| &**p).find(finished) {
            return Some(pod);
        }
        let remote = self.remote.as_ref()?;
        if self.on_this_node(ip, remote.node) || !self.could_be_a_pod(ip) {
            return None;
        }
        self.cached(LookupKey::PodIp(ip))?.iter().find(finished)
    }

    /// Current pods the Service selects, sorted by name; `None` until a lookup says (live watch).
    pub fn pods_selected_by(&self, svc: &Service) -> Option<Vec<&'a Pod>> {
        if self.remote.is_none() {
            return Some(self.state.pods_selected_by(svc));
        }
        if svc.selector.is_empty() {
            return Some(Vec::new());
        }
        let selector = svc
            .selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let pods = self.cached(LookupKey::Selected {
            namespace: svc.namespace.clone(),
            selector,
        })?;
        let mut selected: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.is_current() && self.state.selector_matches(svc, p))
            .collect();
        selected.sort_by(|a, b| a.name.cmp(&b.name));
        Some(selected)
    }

    /// What an address is: as [`ClusterState::describe`], with remote pods from the lookups.
    pub fn describe(&self, ip: IpAddr, port: u16, proto: Proto) -> AddressIdentity<'a> {
        match self.state.describe(ip, port, proto) {
            AddressIdentity::Unknown {
                endpoint_of,
                pod_cidr_of,
            } => match self.pod_at(ip) {
                PodAt::Live(pod) => AddressIdentity::Pod {
                    pod,
                    declared_port: pod.declared_port(port, proto),
                    endpoint_of,
                },
                PodAt::Absent | PodAt::Unknown => AddressIdentity::Unknown {
                    endpoint_of,
                    pod_cidr_of,
                },
            },
            AddressIdentity::Node {
                node,
                host_network_pod: None,
                endpoint_of,
            } => AddressIdentity::Node {
                node,
                host_network_pod: self.host_network_pod(node, ip, port, proto),
                endpoint_of,
            },
            other => other,
        }
    }

    /// A hostNetwork pod on a remote node that declares `port`: the pods whose address is the
    /// node's.
    fn host_network_pod(
        &self,
        node: &Node,
        ip: IpAddr,
        port: u16,
        proto: Proto,
    ) -> Option<&'a Pod> {
        let remote = self.remote.as_ref()?;
        if node.name == remote.node {
            return None;
        }
        self.cached(LookupKey::PodIp(ip))?
            .iter()
            .find(|p| p.host_network && p.is_current() && p.declared_port(port, proto).is_some())
    }
}

/// RFC 1918, shared address space (RFC 6598), unique local IPv6.
fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_private() || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => (v6.segments()[0] & 0xfe00) == 0xfc00,
    }
}
