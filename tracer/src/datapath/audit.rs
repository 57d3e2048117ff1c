//! Each datapath entry judged against the cluster state: stale when no EndpointSlice of its Service
//! lists the backend, or when the pod a slice lists it for is gone. Reported at start and on change:
//! a `stale_datapath` record when an entry becomes stale, another with `gone: true` when it stops
//! being stale; the count of stale entries now is in `stats.datapath`.
use std::collections::{BTreeMap, HashSet};

use super::{Entry, Snapshot, Source, Unread, proto_name};
use crate::{
    clock::Timestamp,
    identity::{
        cluster::TargetRef,
        known::{KnownCluster, PodAt},
        source::ClusterView,
    },
    record::{DatapathStats, SourceState, StaleDatapathRecord, StaleReason},
};

/// An entry, as the diff knows it.
type Key = (
    Source,
    String,
    std::net::SocketAddr,
    std::net::SocketAddr,
    &'static str,
);

#[derive(Default)]
pub struct Audit {
    stats: Option<DatapathStats>,
    /// Stale entries reported and not yet reported gone.
    reported: BTreeMap<Key, StaleDatapathRecord>,
    /// Absences and failures already said on stderr.
    said: HashSet<(Source, String)>,
}

impl Audit {
    /// No cluster state: the audit runs no reader, and `stats` says why nothing is judged.
    pub fn cannot_judge(&mut self) {
        eprintln!(
            "tracer: datapath audit off: no cluster state to judge the node's Service rules against \
             (--cluster-state, --kubeconfig or --in-cluster)"
        );
        self.stats = Some(DatapathStats {
            cluster_state: "none".into(),
            ..DatapathStats::default()
        });
    }

    /// `None` when the audit has not run (it never does without cluster state in live tracing).
    pub fn stats(&self) -> Option<DatapathStats> {
        self.stats.clone()
    }

    /// One read of every source: the records of what changed since the previous one. `known` is
    /// `view`'s state with the pods looked up on demand; an entry whose backend is not known yet
    /// is judged at a later read.
    pub fn judge(
        &mut self,
        snapshot: Snapshot,
        cluster: Option<(&ClusterView, &KnownCluster<'_>)>,
        time: Timestamp,
    ) -> Vec<StaleDatapathRecord> {
        let Some((view, known)) = cluster else {
            if self.stats.is_none() {
                self.cannot_judge();
            }
            return Vec::new();
        };
        let mut stats = DatapathStats {
            cluster_state: view.source.into(),
            ..DatapathStats::default()
        };
        let mut now: BTreeMap<Key, StaleDatapathRecord> = BTreeMap::new();
        let mut held: HashSet<Key> = HashSet::new();
        let mut unread: HashSet<Source> = HashSet::new();
        for (source, read) in snapshot.reads {
            let state_of_source = match read {
                Ok(entries) => {
                    let mut stale_here = 0;
                    for entry in &entries {
                        let key = key(source, entry);
                        held.insert(key.clone());
                        match judge_entry(known, source, entry, time) {
                            Judged::Stale(record) => {
                                stale_here += 1;
                                now.insert(key, record);
                            }
                            // Still what it was until its pod is known.
                            Judged::NotYetKnown => {
                                if let Some(old) = self.reported.get(&key) {
                                    stale_here += 1;
                                    now.insert(key, old.clone());
                                }
                            }
                            Judged::Current => {}
                        }
                    }
                    SourceState::Read {
                        entries: entries.len() as u64,
                        stale: stale_here,
                    }
                }
                Err(unread_because) => {
                    unread.insert(source);
                    self.say_once(source, &unread_because);
                    match unread_because {
                        Unread::Absent(reason) => SourceState::Absent { reason },
                        Unread::Failed(reason) => SourceState::Failed { reason },
                    }
                }
            };
            stats
                .sources
                .insert(source.name().to_string(), state_of_source);
        }
        let before = std::mem::take(&mut self.reported);
        let mut out = Vec::new();
        for (key, old) in &before {
            if now.contains_key(key) {
                continue;
            }
            if unread.contains(&key.0) {
                // A source that failed this time says nothing about its entries: still stale.
                now.insert(key.clone(), old.clone());
                continue;
            }
            out.push(gone(old.clone(), held.contains(key), time));
        }
        for (key, record) in &now {
            if !before.contains_key(key) {
                out.push(record.clone());
            }
        }
        stats.stale_entries = now.len() as u64;
        self.reported = now;
        self.stats = Some(stats);
        out
    }

    fn say_once(&mut self, source: Source, why: &Unread) {
        let (kind, text) = match why {
            Unread::Absent(t) => ("not present", t),
            Unread::Failed(t) => ("cannot be read", t),
        };
        if self.said.insert((source, text.clone())) {
            eprintln!("tracer: datapath audit: {} {kind}: {text}", source.name());
        }
    }
}

fn key(source: Source, e: &Entry) -> Key {
    (
        source,
        e.location.clone(),
        e.service,
        e.backend,
        proto_name(e.proto),
    )
}

enum Judged {
    Current,
    Stale(StaleDatapathRecord),
    /// The backend's pod is being looked up.
    NotYetKnown,
}

/// The record for a stale entry, `Current` when the cluster backs it.
fn judge_entry(state: &KnownCluster<'_>, source: Source, e: &Entry, time: Timestamp) -> Judged {
    let service = state
        .service_by_cluster_ip(e.service.ip(), e.service.port(), e.proto)
        .map(|(s, _)| (s.namespace.clone(), s.name.clone()))
        .or_else(|| {
            e.name_hint
                .as_deref()
                .and_then(|n| n.split_once('/'))
                .map(|(ns, n)| (ns.to_string(), n.to_string()))
        });
    let listings: Vec<_> = state
        .endpoints_with_address(e.backend.ip(), Some(e.backend.port()))
        .into_iter()
        .filter(|r| {
            service.as_ref().is_none_or(|(ns, name)| {
                r.slice.namespace == *ns && r.service_name == Some(name.as_str())
            })
        })
        .collect();
    let ip = e.backend.ip();
    let is_node = state.node_by_ip(ip).is_some();
    let reason = match listings.first() {
        // An unlisted backend is rare: its pod is looked up.
        None if is_node => StaleReason::Unlisted,
        None => match state.pod_at(ip) {
            PodAt::Live(_) => StaleReason::Unlisted,
            PodAt::Absent => StaleReason::UnlistedPodGone,
            PodAt::Unknown => return Judged::NotYetKnown,
        },
        // A listed one is what the rules should hold: gone only if already known to be (no
        // lookup for every backend of the node's rules).
        Some(r)
            if !is_node
                && state.without_asking(|s| s.no_live_pod_at(ip))
                && r.endpoint
                    .target_ref
                    .as_ref()
                    .is_some_and(TargetRef::is_pod) =>
        {
            StaleReason::PodGone
        }
        Some(_) => return Judged::Current,
    };
    let service_name = service.map(|(ns, n)| format!("{ns}/{n}"));
    let of = service_name
        .as_deref()
        .map_or_else(|| "its Service".to_string(), |n| format!("Service {n}"));
    let holds = format!(
        "{} on this node still send{} {} {} to {} ({})",
        source.described(),
        if matches!(source, Source::Ipvs) {
            "s"
        } else {
            ""
        },
        proto_name(e.proto),
        e.service,
        e.backend,
        e.location
    );
    let explanation = match reason {
        StaleReason::UnlistedPodGone => format!(
            "{holds}, which no EndpointSlice of {of} lists and no pod has: connects sent there go \
             nowhere."
        ),
        StaleReason::Unlisted => format!(
            "{holds}, which no EndpointSlice of {of} lists: the node's rules are behind the \
             cluster's, and connects sent there reach a pod the Service no longer selects."
        ),
        StaleReason::PodGone => format!(
            "{holds}; EndpointSlice {} of {of} still lists it, but no pod has that address: \
             connects sent there go nowhere.",
            listings.first().map_or("?", |r| r.slice.name.as_str())
        ),
    };
    Judged::Stale(StaleDatapathRecord {
        time,
        service: e.service,
        protocol: proto_name(e.proto).into(),
        service_name,
        backend: e.backend,
        source,
        location: e.location.clone(),
        reason,
        gone: false,
        explanation,
    })
}

/// The record that ends a stale entry: dropped from the datapath, or backed again.
fn gone(old: StaleDatapathRecord, still_held: bool, time: Timestamp) -> StaleDatapathRecord {
    let what = format!(
        "{} {} -> {} ({})",
        old.protocol, old.service, old.backend, old.location
    );
    let explanation = if still_held {
        format!("{what} is no longer stale: the cluster backs it again.")
    } else {
        format!(
            "{what} is gone from {}: the stale entry was removed.",
            old.source.described()
        )
    };
    StaleDatapathRecord {
        time,
        gone: true,
        explanation,
        ..old
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, time::Duration};

    use super::*;
    use crate::identity::cluster::{ClusterState, Proto};

    /// Service app/web (10.96.0.10:80); its EndpointSlice lists 10.244.1.11:8080 (pod web-live)
    /// and, when `slice_lists_dead`, 10.244.1.30:8080 for pod web-old, which no longer exists.
    fn cluster(slice_lists_dead: bool) -> ClusterView {
        let endpoint = |ip: &str, pod: &str| {
            serde_json::json!({"addresses": [ip], "conditions": {"ready": true},
                "targetRef": {"kind": "Pod", "namespace": "app", "name": pod}})
        };
        let mut endpoints = vec![endpoint("10.244.1.11", "web-live")];
        if slice_lists_dead {
            endpoints.push(endpoint("10.244.1.30", "web-old"));
        }
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "web-live", "namespace": "app", "uid": "u1"},
             "spec": {"nodeName": "node-a", "containers": []},
             "status": {"phase": "Running", "podIP": "10.244.1.11", "podIPs": [{"ip": "10.244.1.11"}]}},
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "app"},
             "spec": {"clusterIP": "10.96.0.10", "selector": {"app": "web"},
                      "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
             "metadata": {"name": "web-abcde", "namespace": "app",
                          "labels": {"kubernetes.io/service-name": "web"}},
             "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
             "endpoints": endpoints}
        ]});
        ClusterView {
            state: Arc::new(ClusterState::from_kubectl_json(&list.to_string()).expect("state")),
            source: "file",
            age: Duration::ZERO,
            stale: false,
        }
    }

    fn entry(backend: &str, chain: &str) -> Entry {
        Entry {
            service: "10.96.0.10:80".parse().expect("addr"),
            proto: Proto::Tcp,
            backend: backend.parse().expect("addr"),
            location: chain.into(),
            name_hint: Some("app/web".into()),
        }
    }

    fn snapshot(iptables: Result<Vec<Entry>, Unread>) -> Snapshot {
        Snapshot {
            reads: vec![
                (Source::Iptables, iptables),
                (
                    Source::Ipvs,
                    Err(Unread::Absent(
                        "no /proc/net/ip_vs: the ip_vs module is not loaded".into(),
                    )),
                ),
            ],
        }
    }

    fn both() -> Vec<Entry> {
        vec![
            entry("10.244.1.11:8080", "KUBE-SEP-LIVE"),
            entry("10.244.1.30:8080", "KUBE-SEP-DEAD"),
        ]
    }

    #[test]
    fn a_backend_no_slice_lists_and_no_pod_has_is_reported_once_then_gone() {
        let mut audit = Audit::default();
        let view = cluster(false);
        let t = Timestamp::default();
        let first = audit.judge(
            snapshot(Ok(both())),
            Some((&view, &KnownCluster::complete(&view.state))),
            t,
        );
        assert_eq!(first.len(), 1, "{first:?}");
        let r = &first[0];
        assert_eq!(r.backend.to_string(), "10.244.1.30:8080");
        assert_eq!(r.location, "KUBE-SEP-DEAD");
        assert_eq!(r.reason, StaleReason::UnlistedPodGone);
        assert_eq!(r.service_name.as_deref(), Some("app/web"));
        assert!(!r.gone);
        assert_eq!(
            r.explanation,
            "kube-proxy's iptables rules on this node still send tcp 10.96.0.10:80 to \
             10.244.1.30:8080 (KUBE-SEP-DEAD), which no EndpointSlice of Service app/web lists and \
             no pod has: connects sent there go nowhere."
        );
        let stats = audit.stats().expect("stats");
        assert_eq!(stats.stale_entries, 1);
        assert_eq!(stats.cluster_state, "file");
        assert_eq!(
            stats.sources.get("iptables"),
            Some(&SourceState::Read {
                entries: 2,
                stale: 1
            })
        );
        assert!(
            matches!(stats.sources.get("ipvs"), Some(SourceState::Absent { reason }) if reason.contains("ip_vs module is not loaded"))
        );

        assert!(
            audit
                .judge(
                    snapshot(Ok(both())),
                    Some((&view, &KnownCluster::complete(&view.state))),
                    t
                )
                .is_empty(),
            "no change, no record"
        );
        // A failed read says nothing about the entries: still stale, nothing reported.
        assert!(
            audit
                .judge(
                    snapshot(Err(Unread::Failed("x".into()))),
                    Some((&view, &KnownCluster::complete(&view.state))),
                    t
                )
                .is_empty()
        );
        assert_eq!(audit.stats().expect("stats").stale_entries, 1);

        let fixed = audit.judge(
            snapshot(Ok(vec![entry("10.244.1.11:8080", "KUBE-SEP-LIVE")])),
            Some((&view, &KnownCluster::complete(&view.state))),
            t,
        );
        assert_eq!(fixed.len(), 1, "{fixed:?}");
        assert!(fixed[0].gone);
        assert_eq!(fixed[0].location, "KUBE-SEP-DEAD");
        assert!(
            fixed[0]
                .explanation
                .ends_with("the stale entry was removed."),
            "{}",
            fixed[0].explanation
        );
        assert_eq!(audit.stats().expect("stats").stale_entries, 0);
    }

    #[test]
    fn a_backend_a_slice_lists_for_a_pod_that_is_gone_is_stale_too() {
        let mut audit = Audit::default();
        let view = cluster(true);
        let found = audit.judge(
            snapshot(Ok(both())),
            Some((&view, &KnownCluster::complete(&view.state))),
            Timestamp::default(),
        );
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].reason, StaleReason::PodGone);
        assert!(
            found[0]
                .explanation
                .contains("EndpointSlice web-abcde of Service app/web still lists it"),
            "{}",
            found[0].explanation
        );
    }

    #[test]
    fn without_cluster_state_nothing_is_judged_and_stats_say_so() {
        let mut audit = Audit::default();
        assert!(audit.stats().is_none(), "not run: no stats field");
        let found = audit.judge(snapshot(Ok(both())), None, Timestamp::default());
        assert!(found.is_empty());
        let stats = audit.stats().expect("stats");
        assert_eq!(stats.cluster_state, "none");
        assert_eq!(stats.stale_entries, 0);
    }
}
