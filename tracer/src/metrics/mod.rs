//! `--metrics ADDR`: the records as Prometheus metrics, so a `DaemonSet` of tracers and the
//! Prometheus a cluster already runs answer "how many nodes see it" (`tracer sweep` asks).
//!
//! `MetricsSink` is fed the same typed records as the output (through `sink/tee.rs`) and updates
//! the families below; `server.rs` serves them in the `OpenMetrics` text format from a thread of its
//! own, so a scrape never waits on, or holds up, the ring-buffer loop. `capped.rs` bounds each
//! family's label sets. Every series carries `node`. The families, their types and labels are in
//! docs/metrics.md.
pub mod capped;
pub mod server;

use std::{borrow::Cow, io, net::SocketAddr};

use hashbrown::HashSet;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram, info::Info},
    registry::{Registry, Unit},
};

use self::capped::{Capped, Overflow};
use crate::{
    record::{
        Capability, ConnectRecord, DnsHealthyRecord, DnsRecord, DnsStuckSocketRecord, Dropped,
        HealthyRecord, KernelInfo, Record, ReplyLostRecord, ServiceRecord, StaleDatapathRecord,
        StaleNatRecord, StatsRecord,
    },
    sink::Sink,
    verdict::ClusterVerdictKind,
};

/// A cluster verdict as a label value: empty when there is none.
fn label_of(verdict: Option<ClusterVerdictKind>) -> String {
    verdict.map(|v| v.name().to_owned()).unwrap_or_default()
}

/// Distinct label sets a family holds before it folds new ones into `other`.
pub const DEFAULT_LABEL_SET_CAP: usize = 2000;

/// Buckets of `tracer_connect_answer_seconds`: SYN retransmits go out 1 s apart at first, then
/// doubling, so a slow connect is answered after about 1, 2, 3, 4, 5, 7 ... seconds.
const ANSWER_BUCKETS: [f64; 11] = [1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0, 15.0, 30.0, 60.0, 130.0];

/// Labels of `tracer_connects_total`. The cluster-state labels are empty without cluster state.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConnectLabels {
    pub verdict: &'static str,
    pub cause: String,
    /// The socket's destination, `ip:port`.
    pub dst: String,
    /// The Service address, when load balancing was seen.
    pub service: String,
    pub backend: String,
    pub src_namespace: String,
    pub src_workload: String,
    /// `namespace/name` of the destination Service (a `NodePort`'s too).
    pub dst_service: String,
    /// The node the destination is (a node's address: a `NodePort`) or is on (a pod).
    pub dst_node: String,
    pub cluster_verdict: String,
}

impl Overflow for ConnectLabels {
    fn other() -> Self {
        let other = || "other".to_string();
        ConnectLabels {
            verdict: "other",
            cause: other(),
            dst: other(),
            service: other(),
            backend: other(),
            src_namespace: other(),
            src_workload: other(),
            dst_service: other(),
            dst_node: other(),
            cluster_verdict: other(),
        }
    }
}

/// Labels of `tracer_service_connects`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServiceLabels {
    pub service: String,
    pub backend: String,
    pub verdict: &'static str,
}

impl Overflow for ServiceLabels {
    fn other() -> Self {
        ServiceLabels {
            service: "other".into(),
            backend: "other".into(),
            verdict: "other",
        }
    }
}

/// Labels of `tracer_dns_queries_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DnsLabels {
    pub verdict: &'static str,
    /// The server the query went to (the backend, when a Service's DNAT chose it).
    pub server: String,
    pub service: String,
}

impl Overflow for DnsLabels {
    fn other() -> Self {
        DnsLabels {
            verdict: "other",
            server: "other".into(),
            service: "other".into(),
        }
    }
}

/// Labels of `tracer_dns_stuck_sockets_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StuckLabels {
    pub server: String,
    pub service: String,
}

impl Overflow for StuckLabels {
    fn other() -> Self {
        StuckLabels {
            server: "other".into(),
            service: "other".into(),
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BackendLabels {
    pub backend: String,
}

impl Overflow for BackendLabels {
    fn other() -> Self {
        BackendLabels {
            backend: "other".into(),
        }
    }
}

/// Labels of `tracer_replies_lost_total`: the server's end (a listening address of the node's own
/// pods, so bounded: only accepted sockets are followed), its Service, how it ended, the node the
/// replies went to and the cluster verdict about it. Never the peer's address or port (clients are
/// unbounded).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReplyLabels {
    pub local: String,
    /// `namespace/name` of the Service whose endpoint `local` is.
    pub local_service: String,
    pub outcome: &'static str,
    /// `true` for SYN-ACKs never acknowledged (the handshake), else `false`.
    pub handshake: &'static str,
    /// The node whose address the replies went to (its SNAT), from cluster state.
    pub peer_node: String,
    pub cluster_verdict: String,
}

impl Overflow for ReplyLabels {
    fn other() -> Self {
        ReplyLabels {
            local: "other".into(),
            local_service: "other".into(),
            outcome: "other",
            handshake: "other",
            peer_node: "other".into(),
            cluster_verdict: "other".into(),
        }
    }
}

/// Labels of `tracer_stale_datapath_entries`: one entry of the node's Service rules.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DatapathLabels {
    pub source: &'static str,
    pub service: String,
    pub backend: String,
    pub reason: &'static str,
}

impl Overflow for DatapathLabels {
    fn other() -> Self {
        DatapathLabels {
            source: "other",
            service: "other".into(),
            backend: "other".into(),
            reason: "other",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DropLabels {
    cause: &'static str,
    /// `kernel` (the eBPF side) or `pipeline` (userspace).
    stage: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FamilyLabel {
    family: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabel {
    source: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReleaseLabel {
    release: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CapabilityLabels {
    capability: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HookLabels {
    side: &'static str,
    tier: &'static str,
}

/// The families, fed by records (`MetricsSink`); the registry that encodes them goes to the server.
pub struct Metrics {
    connects: Capped<ConnectLabels, Counter>,
    open_attempts: Gauge,
    answer_seconds: Histogram,
    service_connects: Capped<ServiceLabels, Gauge>,
    dns_queries: Capped<DnsLabels, Counter>,
    dns_stuck: Capped<StuckLabels, Counter>,
    stale_nat: Capped<BackendLabels, Counter>,
    replies_lost: Capped<ReplyLabels, Counter>,
    stale_datapath: Capped<DatapathLabels, Gauge>,
    dropped: Family<DropLabels, Counter>,
    attempts: Counter,
    events: Counter,
    identity_age: Family<SourceLabel, Gauge>,
    identity_stale: Family<SourceLabel, Gauge>,
    kernel: Family<ReleaseLabel, Gauge>,
    capabilities: Family<CapabilityLabels, Gauge>,
    hooks: Family<HookLabels, Gauge>,
    degraded: Gauge,
    /// The last stats record's totals, to turn them into counter increments.
    last: StatsRecord,
    /// `tracer_service_connects` series set since the previous stats record, and before it: a
    /// Service or backend with nothing left in its window gets no record, so its gauges go to 0.
    service_now: HashSet<ServiceLabels>,
    service_before: HashSet<ServiceLabels>,
}

impl Metrics {
    /// The families and the registry that serves them; every series carries `node`.
    #[expect(
        clippy::too_many_lines,
        reason = "one registration per family, in the order they are served"
    )]
    pub fn new(node: &str, cap: usize) -> (Metrics, Registry) {
        let mut registry = Registry::with_prefix_and_labels(
            "tracer",
            [(Cow::Borrowed("node"), Cow::Owned(node.to_string()))].into_iter(),
        );
        let overflow = Family::<FamilyLabel, Counter>::default();
        let capped = |name: &'static str| -> Counter {
            overflow
                .get_or_create(&FamilyLabel { family: name })
                .clone()
        };
        let connects = Family::default();
        let open_attempts = Gauge::default();
        let answer_seconds = Histogram::new(ANSWER_BUCKETS);
        let service_connects = Family::default();
        let dns_queries = Family::default();
        let dns_stuck = Family::default();
        let stale_nat = Family::default();
        let replies_lost = Family::default();
        let stale_datapath = Family::default();
        let dropped = Family::<DropLabels, Counter>::default();
        let attempts = Counter::default();
        let events = Counter::default();
        let identity_age = Family::default();
        let identity_stale = Family::default();
        let kernel = Family::default();
        let capabilities = Family::default();
        let hooks = Family::default();
        let degraded = Gauge::default();
        registry.register(
            "build",
            "The tracer's version and commit",
            Info::new([
                ("version", env!("CARGO_PKG_VERSION")),
                ("commit", env!("TRACER_GIT_COMMIT")),
            ]),
        );
        registry.register(
            "connects",
            "Connect attempts by verdict: each failing or slow one when it ends, answered ones from \
             the healthy counts",
            connects.clone(),
        );
        registry.register(
            "open_attempts",
            "Connect attempts open now: unanswered, no end yet",
            open_attempts.clone(),
        );
        registry.register_with_unit(
            "connect_answer",
            "SYN-to-answer time of slow connects (answered after a SYN retransmit)",
            Unit::Seconds,
            answer_seconds.clone(),
        );
        registry.register(
            "service_connects",
            "Connects per Service, backend and verdict in the last --service-window",
            service_connects.clone(),
        );
        registry.register(
            "dns_queries",
            "UDP DNS queries by verdict: healthy (fast NOERROR), slow, error, unanswered, refused",
            dns_queries.clone(),
        );
        registry.register(
            "dns_stuck_sockets",
            "Sockets found stuck on a DNS server that does not answer while others get answers",
            dns_stuck.clone(),
        );
        registry.register(
            "stale_nat_entries",
            "Conntrack entries still SYN_SENT, unreplied, after --stale-after, by backend",
            stale_nat.clone(),
        );
        registry.register(
            "replies_lost",
            "Server sockets whose replies (or SYN-ACKs) the peer never acknowledged, when they ended",
            replies_lost.clone(),
        );
        registry.register(
            "stale_datapath_entries",
            "Entries of the node's Service rules that no EndpointSlice backs: 1 while present",
            stale_datapath.clone(),
        );
        registry.register(
            "dropped_events",
            "Events lost by cause, in the kernel side or the userspace pipeline",
            dropped.clone(),
        );
        registry.register(
            "attempts",
            "Connect attempts the kernel side followed",
            attempts.clone(),
        );
        registry.register("events", "Records received from the kernel", events.clone());
        registry.register_with_unit(
            "identity_age",
            "How old the pod and Service names are (0 while the API watches are in sync)",
            Unit::Seconds,
            identity_age.clone(),
        );
        registry.register(
            "identity_stale",
            "1 when the names may be out of date (the API unreachable or not yet listed)",
            identity_stale.clone(),
        );
        registry.register(
            "kernel_info",
            "The running kernel's release",
            kernel.clone(),
        );
        registry.register(
            "kernel_capability",
            "Each capability of the tracer on this kernel: 1 at its state (full, degraded, off, or disabled by an option)",
            capabilities.clone(),
        );
        registry.register(
            "kernel_hooks",
            "Where each side's kernel programs hook in: 1 at its tier (fentry, tracepoint, kprobe, cgroup-skb)",
            hooks.clone(),
        );
        registry.register(
            "kernel_capabilities_degraded",
            "Capabilities degraded or off on this kernel (not counting those disabled by an option)",
            degraded.clone(),
        );
        // Every cause of loss has a series from the start, zero or not: a rate over a series that
        // appears only at the first loss misses that loss.
        for cause in Dropped::default().by_cause() {
            dropped
                .get_or_create(&DropLabels {
                    cause: drop_cause_label(cause.name),
                    stage: drop_stage(cause.name),
                })
                .inc_by(0);
        }
        let metrics = Metrics {
            connects: Capped::new(connects, cap, capped("tracer_connects_total")),
            open_attempts,
            answer_seconds,
            service_connects: Capped::new(service_connects, cap, capped("tracer_service_connects")),
            dns_queries: Capped::new(dns_queries, cap, capped("tracer_dns_queries_total")),
            dns_stuck: Capped::new(dns_stuck, cap, capped("tracer_dns_stuck_sockets_total")),
            stale_nat: Capped::new(stale_nat, cap, capped("tracer_stale_nat_entries_total")),
            replies_lost: Capped::new(replies_lost, cap, capped("tracer_replies_lost_total")),
            stale_datapath: Capped::new(
                stale_datapath,
                cap,
                capped("tracer_stale_datapath_entries"),
            ),
            dropped,
            attempts,
            events,
            identity_age,
            identity_stale,
            kernel,
            capabilities,
            hooks,
            degraded,
            last: StatsRecord::default(),
            service_now: HashSet::new(),
            service_before: HashSet::new(),
        };
        registry.register(
            "metrics_overflow",
            "Updates folded into a family's `other` series because it held its cap of label sets",
            overflow,
        );
        (metrics, registry)
    }

    pub fn update(&mut self, record: &Record) {
        match record {
            Record::Connect(r) => self.connect(r),
            Record::Healthy(r) => self.healthy(r),
            Record::Service(r) => self.service(r),
            Record::StaleNat(r) => self.stale_nat(r),
            Record::Stats(r) => self.stats(r),
            Record::Dns(r) => self.dns(r),
            Record::DnsHealthy(r) => self.dns_healthy(r),
            Record::DnsStuckSocket(r) => self.dns_stuck(r),
            Record::ReplyLost(r) => self.reply_lost(r),
            Record::StaleDatapath(r) => self.stale_datapath(r),
        }
    }

    fn reply_lost(&mut self, r: &ReplyLostRecord) {
        // Live reports are the same socket again; it counts once, when it ends.
        if !r.is_final {
            return;
        }
        let labels = ReplyLabels {
            local: r.local.to_string(),
            local_service: r.local_service.clone().unwrap_or_default(),
            outcome: r.outcome.name(),
            handshake: if r.handshake { "true" } else { "false" },
            peer_node: r.peer_node.clone().unwrap_or_default(),
            cluster_verdict: label_of(r.identity.cluster_verdict),
        };
        self.replies_lost.with(&labels, |c| {
            c.inc();
        });
    }

    fn stale_datapath(&mut self, r: &StaleDatapathRecord) {
        let labels = DatapathLabels {
            source: r.source.name(),
            service: r.service.to_string(),
            backend: r.backend.to_string(),
            reason: r.reason.text(),
        };
        let present = i64::from(!r.gone);
        if r.gone {
            self.stale_datapath.existing(&labels, |g| {
                g.set(present);
            });
        } else {
            self.stale_datapath.with(&labels, |g| {
                g.set(present);
            });
        }
    }

    fn connect(&mut self, r: &ConnectRecord) {
        // Live updates (`final: false`) are the same attempt again; it counts once, when it ends.
        if !r.is_final {
            return;
        }
        let kind = r.verdict.kind();
        let id = &r.identity;
        let labels = ConnectLabels {
            verdict: kind.name(),
            cause: r.verdict.cause().map(|c| c.to_string()).unwrap_or_default(),
            dst: r.dst.to_string(),
            service: addr(r.service),
            backend: addr(r.backend),
            src_namespace: id.src_namespace.clone().unwrap_or_default(),
            src_workload: id.src_owner.clone().unwrap_or_default(),
            dst_service: id.dst_service.clone().unwrap_or_default(),
            dst_node: id.dst_node.clone().unwrap_or_default(),
            cluster_verdict: label_of(id.cluster_verdict),
        };
        self.connects.with(&labels, |c| {
            c.inc();
        });
        if kind == crate::verdict::VerdictKind::Slow {
            #[expect(clippy::cast_precision_loss, reason = "milliseconds far below 2^52")]
            self.answer_seconds.observe(r.syn_sent_ms as f64 / 1000.0);
        }
        self.identity(&r.identity);
    }

    fn healthy(&mut self, r: &HealthyRecord) {
        let id = &r.identity;
        let labels = ConnectLabels {
            verdict: r.verdict.name(),
            cause: String::new(),
            dst: r.dst.to_string(),
            service: String::new(),
            backend: String::new(),
            src_namespace: id.src_namespace.clone().unwrap_or_default(),
            src_workload: id.src_owner.clone().unwrap_or_default(),
            dst_service: id.dst_service.clone().unwrap_or_default(),
            dst_node: id.dst_node.clone().unwrap_or_default(),
            cluster_verdict: String::new(),
        };
        self.connects.with(&labels, |c| {
            c.inc_by(r.established);
        });
        self.identity(&r.identity);
    }

    fn identity(&mut self, id: &crate::identity::Identity) {
        let Some(source) = &id.identity_source else {
            return;
        };
        let labels = SourceLabel {
            source: source.clone(),
        };
        let age = i64::try_from(id.identity_age_s.unwrap_or(0)).unwrap_or(i64::MAX);
        self.identity_age.get_or_create(&labels).set(age);
        self.identity_stale
            .get_or_create(&labels)
            .set(i64::from(id.identity_stale));
    }

    fn service(&mut self, r: &ServiceRecord) {
        for share in &r.backends {
            for (verdict, count) in &share.verdicts {
                let labels = ServiceLabels {
                    service: r.service.to_string(),
                    backend: share.backend.to_string(),
                    verdict: verdict.name(),
                };
                self.service_connects.with(&labels, |g| {
                    g.set(i64::try_from(*count).unwrap_or(i64::MAX));
                });
                self.service_now.insert(labels);
            }
        }
    }

    fn stale_nat(&mut self, r: &StaleNatRecord) {
        let labels = BackendLabels {
            backend: r.backend.unwrap_or(r.reply.src).to_string(),
        };
        self.stale_nat.with(&labels, |c| {
            c.inc();
        });
    }

    fn dns(&mut self, r: &DnsRecord) {
        let labels = DnsLabels {
            verdict: r.verdict.name(),
            server: r.backend.unwrap_or(r.server).to_string(),
            service: addr(r.service),
        };
        self.dns_queries.with(&labels, |c| {
            c.inc();
        });
    }

    fn dns_healthy(&mut self, r: &DnsHealthyRecord) {
        let labels = DnsLabels {
            verdict: "healthy",
            server: r.server.to_string(),
            service: String::new(),
        };
        self.dns_queries.with(&labels, |c| {
            c.inc_by(r.answered);
        });
    }

    fn dns_stuck(&mut self, r: &DnsStuckSocketRecord) {
        let labels = StuckLabels {
            server: r.server.to_string(),
            service: addr(r.service),
        };
        self.dns_stuck.with(&labels, |c| {
            c.inc();
        });
    }

    /// Totals since start become counter increments; the Service gauges not refreshed since the
    /// previous stats record go to 0.
    fn stats(&mut self, r: &StatsRecord) {
        self.open_attempts
            .set(i64::try_from(r.open_flows).unwrap_or(i64::MAX));
        self.attempts
            .inc_by(r.attempts.saturating_sub(self.last.attempts));
        self.events
            .inc_by(r.events.saturating_sub(self.last.events));
        let before = self.last.dropped.by_cause();
        for (now, before) in r.dropped.by_cause().iter().zip(before.iter()) {
            let labels = DropLabels {
                cause: drop_cause_label(now.name),
                stage: drop_stage(now.name),
            };
            self.dropped
                .get_or_create(&labels)
                .inc_by(now.count.saturating_sub(before.count));
        }
        if let Some(kernel) = &r.kernel {
            self.set_kernel(kernel);
        }
        for labels in std::mem::take(&mut self.service_before) {
            if !self.service_now.contains(&labels) {
                self.service_connects.existing(&labels, |g| {
                    g.set(0);
                });
            }
        }
        self.service_before = std::mem::take(&mut self.service_now);
        self.last = r.clone();
    }

    /// The running kernel and the tracer's capabilities on it.
    pub fn set_kernel(&mut self, kernel: &KernelInfo) {
        self.kernel.clear();
        self.kernel
            .get_or_create(&ReleaseLabel {
                release: kernel.release.clone(),
            })
            .set(1);
        self.capabilities.clear();
        let mut lacking = 0;
        let by_option = kernel
            .capabilities
            .values()
            .any(|c| matches!(c, Capability::Off { reason } if reason.starts_with("--")));
        for (name, capability) in &kernel.capabilities {
            let state = match capability {
                Capability::Full => "full",
                Capability::Degraded { .. } => "degraded",
                // Turned off by an option (`--no-dns`), or off because such a one is (`DNS is
                // off`): the user's choice, not the kernel's lack.
                Capability::Off { reason }
                    if reason.starts_with("--") || (by_option && reason.ends_with(" is off")) =>
                {
                    "disabled"
                }
                Capability::Off { .. } => "off",
            };
            if matches!(state, "degraded" | "off") {
                lacking += 1;
            }
            self.capabilities
                .get_or_create(&CapabilityLabels {
                    capability: name.clone(),
                    state,
                })
                .set(1);
        }
        self.degraded.set(lacking);
        self.hooks.clear();
        for (side, tier) in [("tcp", &kernel.hooks.tcp), ("dns", &kernel.hooks.dns)] {
            if let Some(tier) = tier.tier {
                self.hooks
                    .get_or_create(&HookLabels {
                        side,
                        tier: tier.name(),
                    })
                    .set(1);
            }
        }
    }

    /// Distinct label sets of `tracer_connects_total` and its folded updates (for tests and the
    /// benchmark).
    pub fn connect_series(&self) -> (usize, u64) {
        (self.connects.len(), self.connects.overflowed())
    }
}

fn addr(a: Option<SocketAddr>) -> String {
    a.map(|a| a.to_string()).unwrap_or_default()
}

/// `ring buffer full` -> `ring_buffer_full`: the cause as a label value.
fn drop_cause_label(name: &'static str) -> &'static str {
    match name {
        "ring buffer full" => "ring_buffer_full",
        "attempts map full" => "attempts_map_full",
        "healthy map full" => "healthy_map_full",
        "decode errors" => "decode_errors",
        "expired flows" => "expired_flows",
        "conntrack events lost" => "conntrack_events_lost",
        "dns pending full" => "dns_pending_full",
        "dns ring buffer full" => "dns_ring_buffer_full",
        "dns healthy map full" => "dns_healthy_map_full",
        "skipped program runs" => "skipped_program_runs",
        "ends unseen" => "end_unseen",
        "dns unreadable" => "dns_unreadable",
        "dns mmsg beyond" => "dns_mmsg_beyond",
        "syn retransmits unseen" => "syn_retransmits_unseen",
        other => other,
    }
}

/// Where a cause of loss happens: the kernel side (a full map or ring, a skipped program run) or
/// the userspace pipeline (decode, expiry, the conntrack event socket).
fn drop_stage(name: &str) -> &'static str {
    match name {
        "decode errors" | "expired flows" | "conntrack events lost" => "pipeline",
        _ => "kernel",
    }
}

/// The records into the metrics; never fails, never blocks.
pub struct MetricsSink {
    pub metrics: Metrics,
}

impl Sink for MetricsSink {
    fn write(&mut self, record: &Record) -> io::Result<()> {
        self.metrics.update(record);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `--node-name`, else the hostname (the Kubernetes node name on most clusters).
pub fn node_label(node_name: Option<&str>) -> String {
    node_name.map_or_else(
        || {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map_or_else(|_| "unknown".into(), |s| s.trim().to_string())
        },
        str::to_string,
    )
}

#[cfg(test)]
mod tests;
