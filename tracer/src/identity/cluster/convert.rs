//! The conversion from the Kubernetes API types (what both the kubectl snapshot and the live watch
//! deserialize into) to the model, once per object; defaults as the API documents them.

use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::{core::v1 as k8s_core, discovery::v1 as k8s_discovery};
use k8s_openapi::apimachinery::pkg::{
    apis::meta::v1::{ObjectMeta, OwnerReference},
    util::intstr::IntOrString,
};

use super::model::{
    Addresses, ContainerPort, Endpoint, EndpointPort, EndpointSlice, Item, Node, OwnerRef, Pod,
    PodPhase, Proto, Service, ServicePort, TargetPort, TargetRef, intern,
};

/// A value the Kubernetes API types hold but the model cannot: a port out of range, an unknown
/// protocol, an object without a name. `path` is relative to the object (`spec.ports[0].port`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}`: {message}")]
pub struct ModelError {
    pub path: String,
    pub message: String,
}

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
