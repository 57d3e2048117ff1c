//! A large generated cluster for the fixture (the API benchmark's 150,000 pods over 5,000 nodes),
//! made object by object when a request needs it, never held whole: pod `i` runs on node
//! `i % nodes`; pods come in apps of ten (`app-A`, namespace `ns-(A % 50)`); every app but each
//! tenth has a `ClusterIP` Service selecting `app=app-A` and one EndpointSlice listing its ten pods,
//! so a tenth of the pods are in no EndpointSlice (batch pods, say). Node `n` has the pod range
//! `10.(64 + n / 256).(n % 256).0/24` and the address `192.168.(n / 256).(n % 256)`.
//!
//! Shapes follow the objects the API server writes (k8s-openapi 0.29 types: `core/v1` Pod, Service,
//! Node, `discovery/v1` EndpointSlice), with the fields a real object of each kind carries
//! (owner references, conditions, container statuses, node images) so that list pages weigh about
//! what they weigh on a real cluster.
use std::net::Ipv4Addr;

use serde_json::{Value, json};

use super::{
    objects::Kind,
    selectors::{FieldSelector, LabelSelector},
};

/// Pods per app (and endpoints per EndpointSlice).
const APP_SIZE: u32 = 10;
const NAMESPACES: u32 = 50;

#[derive(Debug, Clone, Copy)]
pub struct Synthetic {
    pub nodes: u32,
    pub pods_per_node: u32,
}

impl Synthetic {
    /// `nodes` up to 16,384 and `pods_per_node` up to 250 (the address plan's room).
    #[must_use]
    pub fn new(nodes: u32, pods_per_node: u32) -> Synthetic {
        assert!((1..=16_384).contains(&nodes), "1 to 16384 nodes");
        assert!((1..=250).contains(&pods_per_node), "1 to 250 pods per node");
        Synthetic {
            nodes,
            pods_per_node,
        }
    }

    #[must_use]
    pub fn pods(self) -> u32 {
        self.nodes * self.pods_per_node
    }

    fn apps(self) -> u32 {
        self.pods().div_ceil(APP_SIZE)
    }

    /// Apps with a Service: all but each tenth.
    #[must_use]
    pub fn services(self) -> u32 {
        let apps = self.apps();
        apps - apps / 10
    }

    /// The app of Service (and EndpointSlice) `j`.
    fn service_app(j: u32) -> u32 {
        (j / 9) * 10 + j % 9
    }

    fn has_service(app: u32) -> bool {
        app % 10 != 9
    }

    #[must_use]
    pub fn count(self, kind: Kind) -> usize {
        (match kind {
            Kind::Pod => self.pods(),
            Kind::Service | Kind::EndpointSlice => self.services(),
            Kind::Node => self.nodes,
        }) as usize
    }

    #[must_use]
    pub fn node_name(n: u32) -> String {
        format!("node-{n}")
    }

    #[must_use]
    pub fn node_of(self, pod: u32) -> u32 {
        pod % self.nodes
    }

    #[must_use]
    pub fn pod_ip(self, pod: u32) -> Ipv4Addr {
        let n = self.node_of(pod);
        let slot = pod / self.nodes;
        Ipv4Addr::new(10, 64 + (n / 256) as u8, (n % 256) as u8, (slot + 2) as u8)
    }

    /// The pod with this address.
    #[must_use]
    pub fn pod_at(self, ip: Ipv4Addr) -> Option<u32> {
        let [ten, high, low, host] = ip.octets();
        if ten != 10 || !(64..128).contains(&high) || host < 2 {
            return None;
        }
        let n = u32::from(high - 64) * 256 + u32::from(low);
        let slot = u32::from(host) - 2;
        (n < self.nodes && slot < self.pods_per_node).then_some(n + slot * self.nodes)
    }

    /// Whether an EndpointSlice lists pod `i`.
    #[must_use]
    pub fn is_listed(pod: u32) -> bool {
        Self::has_service(pod / APP_SIZE)
    }

    /// The pod's namespace and name.
    #[must_use]
    pub fn pod_key(pod: u32) -> (String, String) {
        let app = pod / APP_SIZE;
        (
            format!("ns-{}", app % NAMESPACES),
            format!("app-{app}-{pod:08x}"),
        )
    }

    #[must_use]
    pub fn pods_on(self, node: u32) -> Vec<u32> {
        (0..self.pods_per_node)
            .map(|slot| node + slot * self.nodes)
            .collect()
    }

    fn uid(kind: u32, i: u32) -> String {
        format!("{i:08x}-{kind:04x}-4000-8000-000000000000")
    }

    /// Namespace and name of object `index` of `kind`.
    #[must_use]
    pub fn key(self, kind: Kind, index: usize) -> (String, String) {
        debug_assert!(index < self.count(kind), "{kind:?} {index}");
        let i = index as u32;
        match kind {
            Kind::Pod => Self::pod_key(i),
            Kind::Service => {
                let app = Self::service_app(i);
                (format!("ns-{}", app % NAMESPACES), format!("app-{app}"))
            }
            Kind::EndpointSlice => {
                let app = Self::service_app(i);
                (
                    format!("ns-{}", app % NAMESPACES),
                    format!("app-{app}-{:05x}", app % 0xfffff),
                )
            }
            Kind::Node => (String::new(), Self::node_name(i)),
        }
    }

    /// The index of the object with this namespace and name.
    #[must_use]
    pub fn index_of(self, kind: Kind, namespace: &str, name: &str) -> Option<usize> {
        let index = match kind {
            Kind::Pod => {
                let (_, hex) = name.rsplit_once('-')?;
                u32::from_str_radix(hex, 16)
                    .ok()
                    .filter(|&i| i < self.pods())
            }
            Kind::Service => {
                let app: u32 = name.strip_prefix("app-")?.parse().ok()?;
                (Self::has_service(app) && app < self.apps()).then(|| (app / 10) * 9 + app % 10)
            }
            Kind::EndpointSlice => {
                let (svc, _) = name.rsplit_once('-')?;
                return self
                    .index_of(Kind::Service, namespace, svc)
                    .filter(|&j| self.key(Kind::EndpointSlice, j).1 == name);
            }
            Kind::Node => name
                .strip_prefix("node-")?
                .parse()
                .ok()
                .filter(|&n| n < self.nodes),
        }? as usize;
        (self.key(kind, index) == (namespace.to_string(), name.to_string())).then_some(index)
    }

    /// The indexes a selector can match, computed from the layout instead of a scan of every
    /// object, where it can be (`None`: scan). What they give is still checked against the whole
    /// selector by the caller.
    #[must_use]
    pub fn candidates(
        self,
        kind: Kind,
        namespace: Option<&str>,
        fields: &FieldSelector,
        labels: &LabelSelector,
    ) -> Option<Vec<usize>> {
        if let Some(name) = fields.equals("metadata.name") {
            let found = match namespace.or(fields.equals("metadata.namespace")) {
                Some(ns) => self.index_of(kind, ns, name),
                None if kind == Kind::Node => self.index_of(kind, "", name),
                None => {
                    (0..NAMESPACES).find_map(|ns| self.index_of(kind, &format!("ns-{ns}"), name))
                }
            };
            return Some(found.into_iter().collect());
        }
        if kind != Kind::Pod {
            return None;
        }
        if let Some(node) = fields.equals("spec.nodeName") {
            let n: u32 = node.strip_prefix("node-")?.parse().ok()?;
            return Some(if n < self.nodes {
                self.pods_on(n).into_iter().map(|i| i as usize).collect()
            } else {
                Vec::new()
            });
        }
        if let Some(ip) = fields
            .equals("status.podIP")
            .or(fields.equals("status.podIPs"))
        {
            return Some(
                ip.parse()
                    .ok()
                    .and_then(|ip| self.pod_at(ip))
                    .map(|i| i as usize)
                    .into_iter()
                    .collect(),
            );
        }
        if let Some(app) = labels.equals("app") {
            let app: u32 = app.strip_prefix("app-")?.parse().ok()?;
            let pods = self.pods();
            return Some(
                (app * APP_SIZE..(app + 1) * APP_SIZE)
                    .filter(|&i| i < pods)
                    .map(|i| i as usize)
                    .collect(),
            );
        }
        None
    }

    /// Object `index` of `kind`, as the API server returns it in a list (no `kind`/`apiVersion`:
    /// the caller adds them where the API does).
    #[must_use]
    pub fn object(self, kind: Kind, index: usize) -> Value {
        let i = index as u32;
        match kind {
            Kind::Pod => self.pod(i),
            Kind::Service => self.service(i),
            Kind::EndpointSlice => self.slice(i),
            Kind::Node => self.node(i),
        }
    }

    fn pod(self, i: u32) -> Value {
        let app = i / APP_SIZE;
        let (ns, name) = Self::pod_key(i);
        let n = self.node_of(i);
        let ip = self.pod_ip(i).to_string();
        json!({
            "metadata": {
                "name": name, "namespace": ns, "uid": Self::uid(1, i), "resourceVersion": "1",
                "creationTimestamp": "2026-11-30T10:00:00Z",
                "generateName": format!("app-{app}-{app:08x}-"),
                "labels": {"app": format!("app-{app}"), "pod-template-hash": format!("{app:08x}"),
                           "team": format!("team-{}", app % 20), "version": "v1"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                     "name": format!("app-{app}-{app:08x}"), "uid": Self::uid(9, app),
                                     "controller": true, "blockOwnerDeletion": true}]
            },
            "spec": {
                "nodeName": Self::node_name(n), "restartPolicy": "Always",
                "schedulerName": "default-scheduler", "serviceAccountName": "default",
                "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30,
                "containers": [{
                    "name": "main", "image": "registry.example/app:1.2.3", "imagePullPolicy": "IfNotPresent",
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                                       "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1,
                                       "failureThreshold": 3},
                    "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
                }]
            },
            "status": {
                "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                "hostIP": format!("192.168.{}.{}", n / 256, n % 256), "qosClass": "Burstable",
                "startTime": "2026-11-30T10:00:01Z",
                "conditions": [
                    {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-30T10:00:01Z"},
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T10:00:09Z"},
                    {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-30T10:00:09Z"},
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-30T10:00:00Z"}
                ],
                "containerStatuses": [{"name": "main", "ready": true, "restartCount": 0, "started": true,
                                       "image": "registry.example/app:1.2.3",
                                       "imageID": "registry.example/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                                       "containerID": format!("containerd://{:064x}", u64::from(i)),
                                       "state": {"running": {"startedAt": "2026-11-30T10:00:02Z"}}}]
            }
        })
    }

    fn service(self, j: u32) -> Value {
        let app = Self::service_app(j);
        let (ns, name) = self.key(Kind::Service, j as usize);
        let ip = format!("10.96.{}.{}", app / 256, app % 256);
        json!({
            "metadata": {"name": name, "namespace": ns, "uid": Self::uid(2, j), "resourceVersion": "1",
                         "creationTimestamp": "2026-11-30T10:00:00Z", "labels": {"app": format!("app-{app}")}},
            "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip], "ipFamilies": ["IPv4"],
                     "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster",
                     "sessionAffinity": "None", "selector": {"app": format!("app-{app}")},
                     "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]},
            "status": {"loadBalancer": {}}
        })
    }

    fn slice(self, j: u32) -> Value {
        let app = Self::service_app(j);
        let (ns, name) = self.key(Kind::EndpointSlice, j as usize);
        let pods = self.pods();
        let endpoints: Vec<Value> = (app * APP_SIZE..(app + 1) * APP_SIZE)
            .filter(|&i| i < pods)
            .map(|i| {
                let n = self.node_of(i);
                json!({"addresses": [self.pod_ip(i).to_string()],
                       "conditions": {"ready": true, "serving": true, "terminating": false},
                       "nodeName": Self::node_name(n), "zone": format!("zone-{}", n % 3),
                       "targetRef": {"kind": "Pod", "name": Self::pod_key(i).1, "namespace": ns,
                                     "uid": Self::uid(1, i)}})
            })
            .collect();
        json!({
            "metadata": {"name": name, "namespace": ns, "uid": Self::uid(3, j), "resourceVersion": "1",
                         "generateName": format!("app-{app}-"),
                         "creationTimestamp": "2026-11-30T10:00:00Z",
                         "labels": {"kubernetes.io/service-name": format!("app-{app}"),
                                    "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": format!("app-{app}"),
                                              "uid": Self::uid(2, j), "controller": true,
                                              "blockOwnerDeletion": true}]},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": endpoints
        })
    }

    fn node(self, n: u32) -> Value {
        debug_assert!(n < self.nodes);
        let (a, b) = (n / 256, n % 256);
        let images: Vec<Value> = (0..10)
            .map(|k| {
                json!({"names": [format!("registry.example/image-{k}@sha256:{:064x}", k),
                                      format!("registry.example/image-{k}:1.{k}")],
                            "sizeBytes": 50_000_000 + k * 1_000_000})
            })
            .collect();
        json!({
            "metadata": {"name": Self::node_name(n), "uid": Self::uid(4, n), "resourceVersion": "1",
                         "creationTimestamp": "2026-11-30T09:00:00Z",
                         "labels": {"kubernetes.io/hostname": Self::node_name(n), "kubernetes.io/os": "linux",
                                    "topology.kubernetes.io/zone": format!("zone-{}", n % 3)}},
            "spec": {"podCIDR": format!("10.{}.{b}.0/24", 64 + a), "podCIDRs": [format!("10.{}.{b}.0/24", 64 + a)],
                     "providerID": format!("fake://node-{n}")},
            "status": {
                "addresses": [{"type": "InternalIP", "address": format!("192.168.{a}.{b}")},
                              {"type": "Hostname", "address": Self::node_name(n)}],
                "conditions": [
                    {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                    {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                    {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID"},
                    {"type": "Ready", "status": "True", "reason": "KubeletReady"}
                ],
                "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": "7800m", "memory": "31Gi", "pods": "110"},
                "nodeInfo": {"machineID": format!("{n:032x}"), "systemUUID": Self::uid(5, n),
                             "bootID": Self::uid(6, n), "kernelVersion": "6.12.0", "osImage": "Debian GNU/Linux 13",
                             "containerRuntimeVersion": "containerd://2.0.0", "kubeletVersion": "v1.34.0",
                             "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
                "images": images
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_indexes_agree_with_the_objects() {
        let c = Synthetic::new(50, 30);
        for kind in Kind::ALL {
            for index in [0, 1, c.count(kind) - 1] {
                let obj = c.object(kind, index);
                let ns = obj["metadata"]["namespace"].as_str().unwrap_or("");
                let name = obj["metadata"]["name"].as_str().expect("name");
                assert_eq!(c.index_of(kind, ns, name), Some(index), "{kind:?} {index}");
            }
        }
        let pod = c.object(Kind::Pod, 777);
        let ip = pod["status"]["podIP"]
            .as_str()
            .expect("ip")
            .parse()
            .expect("v4");
        assert_eq!(c.pod_at(ip), Some(777));
        assert_eq!(c.pods_on(7).len(), 30);
        assert!(c.pods_on(7).iter().all(|&i| c.node_of(i) == 7));
        let listed = (0..c.pods()).filter(|&i| Synthetic::is_listed(i)).count();
        assert_eq!(listed, 1350, "nine pods in ten are endpoints");
    }
}
