//! `tracer sweep`: the cluster-wide picture from the Prometheus that scrapes the tracers
//! (`--metrics` on every node): per Service and backend, which nodes see black holes and what share
//! of the connects fail; half-open flows (clients failing on some nodes while another node loses
//! the backend's replies on their way back); DNS servers losing queries, by node; tracers missing,
//! down or degraded. "3 of 10 nodes" is the answer a single node cannot give.
//!
//! `client.rs` asks the HTTP API and parses its answers into `Sample`s; `promql.rs` holds the
//! queries; `query` turns samples into the typed `Sweep` (`half_open.rs` joins the two halves of a
//! half-open flow); `format_text` prints it like `tracer summary` (`--format json`: the same as
//! JSON). The TUI's Cluster view asks the same over a short window (`query_now`), with how long
//! ago each finding last grew.
pub mod client;
pub mod half_open;
pub mod promql;

use std::{cmp::Ordering, collections::BTreeMap, fmt::Write as _};

use serde::Serialize;

pub use self::half_open::HalfOpenFinding;
use self::{
    client::{Prometheus, Sample},
    promql::{
        CONNECTS, CONNECTS_BY, DNS_BY, DNS_LOST, DNS_STUCK, REPLIES, REPLIES_BY, grown_by,
        since_growth,
    },
};
use crate::{
    args::{SweepArgs, SweepFormat},
    verdict::{ClusterVerdictKind, VerdictKind},
};

/// What the sweep found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sweep {
    pub prometheus: String,
    pub window_s: u64,
    /// Nodes whose tracer reported in the window (the "of N nodes").
    pub nodes: Vec<String>,
    /// Clients failing on some nodes while the backend's node loses its replies towards another
    /// node: both halves joined (and left out of `connects` and `replies_lost`).
    pub half_open: Vec<HalfOpenFinding>,
    /// Worst first: most nodes, then most connects.
    pub connects: Vec<ConnectFinding>,
    pub dns: Vec<DnsFinding>,
    /// Service rules no EndpointSlice backs, by the nodes that hold them now.
    pub stale_datapath: Vec<StaleFinding>,
    /// Servers whose replies were never acknowledged, by node.
    pub replies_lost: Vec<ReplyFinding>,
    pub tracers: Vec<TracerProblem>,
}

/// One Service-to-backend entry of the nodes' Service rules that no EndpointSlice backs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StaleFinding {
    pub service: String,
    pub backend: String,
    /// Why it is stale (`no EndpointSlice lists it`, `its pod is gone`).
    pub reason: String,
    /// Where it lives: `iptables`, `nftables`, `ipvs`.
    pub sources: Vec<String>,
    pub nodes: Vec<String>,
}

/// A server whose replies (or SYN-ACKs) were not acknowledged, by node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplyFinding {
    pub local: String,
    /// `namespace/name` of the Service the server is an endpoint of (cluster state).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_service: Option<String>,
    /// The node whose address the replies went to (its SNAT), from cluster state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_node: Option<String>,
    /// From cluster state: `peer node is gone`, `peer node is NotReady`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_verdict: Option<ClusterVerdictKind>,
    pub nodes: Vec<NodeCount>,
    pub lost: u64,
    /// Seconds since it last grew (the Cluster view; absent in `tracer sweep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_grew_s: Option<u64>,
}

/// The kind of failure a finding groups connects by. Declared in the order of their names, so
/// maps keyed by it list them as they listed the names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Failure {
    /// Unanswered, abandoned, timed out: the SYN went nowhere.
    #[serde(rename = "black holes")]
    BlackHoles,
    #[serde(rename = "failed")]
    Failed,
    #[serde(rename = "refused")]
    Refused,
    #[serde(rename = "unreachable")]
    Unreachable,
}

impl Failure {
    pub fn of(verdict: VerdictKind) -> Failure {
        match verdict {
            v if v.is_black_hole() => Failure::BlackHoles,
            VerdictKind::Unreachable => Failure::Unreachable,
            VerdictKind::Refused => Failure::Refused,
            _ => Failure::Failed,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Failure::BlackHoles => "black holes",
            Failure::Failed => "failed",
            Failure::Refused => "refused",
            Failure::Unreachable => "unreachable",
        }
    }

    /// Its verdicts, as a regex over the `verdict` label.
    pub fn verdicts(self) -> &'static str {
        match self {
            Failure::BlackHoles => "unanswered|abandoned|timed_out",
            Failure::Unreachable => "unreachable",
            Failure::Refused => "refused",
            Failure::Failed => "failed",
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Failing connects to one destination (a Service's backend, or an address), by node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConnectFinding {
    pub failure: Failure,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// The socket's destination, when no Service was seen.
    pub dst: String,
    /// From cluster state: the destination's Service (`namespace/name`; a `NodePort`'s too) and
    /// the node it is, or is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_service: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_node: Option<String>,
    /// From cluster state: `backend is no live pod`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_verdict: Option<ClusterVerdictKind>,
    pub nodes: Vec<NodeCount>,
    pub connects: u64,
    /// Failing share of the connects to this backend of the Service (all nodes, the window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_failing_share: Option<f64>,
    /// Failing share of the connects to the Service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_failing_share: Option<f64>,
    /// Seconds since it last grew (the Cluster view; absent in `tracer sweep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_grew_s: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeCount {
    pub node: String,
    pub count: u64,
}

/// DNS queries to one server lost (unanswered or refused), and sockets stuck on it, by node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DnsFinding {
    pub server: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    pub nodes: Vec<NodeCount>,
    pub lost: u64,
    pub stuck_sockets: u64,
    /// Seconds since it last grew (the Cluster view; absent in `tracer sweep`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_grew_s: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TracerProblem {
    pub node: String,
    /// `missing` (a node with no tracer series now), `down` (its scrape fails) or `degraded`.
    pub state: String,
    pub detail: String,
}

pub async fn run(args: &SweepArgs) -> anyhow::Result<String> {
    let prometheus = Prometheus::new(&args.prometheus)?;
    let sweep = query(&prometheus, args.window.as_secs().max(1)).await?;
    Ok(match args.format {
        SweepFormat::Text => format_text(&sweep),
        SweepFormat::Json => {
            let mut text = serde_json::to_string_pretty(&sweep)?;
            text.push('\n');
            text
        }
    })
}

/// Asks Prometheus over the last `window_s` seconds.
pub async fn query(prometheus: &Prometheus, window_s: u64) -> anyhow::Result<Sweep> {
    query_with(prometheus, window_s, None).await
}

/// Like `query`, and when each finding last grew, at `step_s` resolution: the Cluster view.
pub async fn query_now(
    prometheus: &Prometheus,
    window_s: u64,
    step_s: u64,
) -> anyhow::Result<Sweep> {
    query_with(prometheus, window_s, Some(step_s)).await
}

/// The ages of one family's series, when asked.
async fn ages(
    prometheus: &Prometheus,
    step_s: Option<u64>,
    by: &str,
    selector: &str,
    window: &str,
) -> anyhow::Result<Vec<Sample>> {
    match step_s {
        Some(step) => {
            prometheus
                .query(&since_growth(by, selector, window, &format!("{step}s")))
                .await
        }
        None => Ok(Vec::new()),
    }
}

async fn query_with(
    prometheus: &Prometheus,
    window_s: u64,
    step_s: Option<u64>,
) -> anyhow::Result<Sweep> {
    let w = window_text(window_s);
    let seen = prometheus
        .query(&format!(
            "max by (node, instance) (max_over_time(tracer_build_info[{w}]))"
        ))
        .await?;
    if seen.is_empty() {
        anyhow::bail!(
            "no tracer metrics in the Prometheus at {} over the last {w}: run the DaemonSet with \
             --metrics and have Prometheus scrape it (docs/metrics.md)",
            prometheus.url()
        );
    }
    let now = prometheus.query(promql::TRACERS_NOW).await?;
    let down = prometheus.query(promql::TARGETS_DOWN).await?;
    let kube_nodes = prometheus.query("max by (node) (kube_node_info)").await?;
    let degraded = prometheus.query(promql::DEGRADED).await?;
    let fails = prometheus
        .query(&grown_by(CONNECTS_BY, CONNECTS, &w))
        .await?;
    let shares = prometheus
        .query(&format!(
            "sum by (service, backend, verdict) (sum_over_time(tracer_service_connects[{w}]))"
        ))
        .await?;
    let dns_lost = prometheus.query(&grown_by(DNS_BY, DNS_LOST, &w)).await?;
    let stuck = prometheus.query(&grown_by(DNS_BY, DNS_STUCK, &w)).await?;
    let stale = prometheus.query(promql::STALE).await?;
    let replies = prometheus.query(&grown_by(REPLIES_BY, REPLIES, &w)).await?;
    let mut connects = connect_findings(&fails, &shares);
    let mut dns = dns_findings(&dns_lost, &stuck);
    let mut replies_lost = reply_findings(&replies);
    if step_s.is_some() {
        let connect_ages = ages(prometheus, step_s, CONNECTS_BY, CONNECTS, &w).await?;
        for f in &mut connects {
            f.last_grew_s = youngest(connect_ages.iter().filter(|s| connect_key(s) == f.key()));
        }
        let mut dns_ages = ages(prometheus, step_s, DNS_BY, DNS_LOST, &w).await?;
        dns_ages.extend(ages(prometheus, step_s, DNS_BY, DNS_STUCK, &w).await?);
        for f in &mut dns {
            f.last_grew_s = youngest(dns_ages.iter().filter(|s| {
                s.label("server") == f.server
                    && s.label("service") == f.service.as_deref().unwrap_or("")
            }));
        }
        let reply_ages = ages(prometheus, step_s, REPLIES_BY, REPLIES, &w).await?;
        for f in &mut replies_lost {
            f.last_grew_s = youngest(reply_ages.iter().filter(|s| reply_key(s) == f.key()));
        }
    }
    let half_open = half_open::join(&mut connects, &mut replies_lost);
    Ok(Sweep {
        prometheus: prometheus.url().to_string(),
        window_s,
        nodes: sorted_nodes(seen.iter().map(|s| s.label("node").to_string())),
        half_open,
        connects,
        dns,
        stale_datapath: stale_findings(&stale),
        replies_lost,
        tracers: tracer_problems(&seen, &now, &down, &kube_nodes, &degraded),
    })
}

/// The smallest age among samples (seconds since a series last grew).
fn youngest<'a>(samples: impl Iterator<Item = &'a Sample>) -> Option<u64> {
    samples.map(|s| count(s.value)).min()
}

/// What kind of failure a connect's `verdict` label is; a name this sweep does not know is
/// `failed`.
fn failure_of(label: &str) -> Failure {
    label
        .parse::<VerdictKind>()
        .map_or(Failure::Failed, Failure::of)
}

/// A `cluster_verdict` label; empty, or a name this sweep does not know, is none.
fn cluster_verdict_of(label: &str) -> Option<ClusterVerdictKind> {
    label.parse().ok()
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "counts of connects, far below 2^52, never negative after `> 0`"
)]
fn count(value: f64) -> u64 {
    value.round().max(0.0) as u64
}

/// What a failing connect is grouped by: the kind of failure, then the labels.
type ConnectKey = (
    Failure,
    String,
    String,
    String,
    Option<ClusterVerdictKind>,
    String,
    String,
);

fn connect_key(s: &Sample) -> ConnectKey {
    (
        failure_of(s.label("verdict")),
        s.label("service").to_string(),
        s.label("backend").to_string(),
        s.label("dst").to_string(),
        cluster_verdict_of(s.label("cluster_verdict")),
        s.label("dst_service").to_string(),
        s.label("dst_node").to_string(),
    )
}

impl ConnectFinding {
    fn key(&self) -> ConnectKey {
        let text = |o: &Option<String>| o.clone().unwrap_or_default();
        (
            self.failure,
            text(&self.service),
            text(&self.backend),
            self.dst.clone(),
            self.cluster_verdict,
            text(&self.dst_service),
            text(&self.dst_node),
        )
    }
}

/// `tracer_connects_total` growth by node into one finding per destination and kind of failure;
/// `shares` (`tracer_service_connects` summed over the window) gives the failing shares.
pub fn connect_findings(fails: &[Sample], shares: &[Sample]) -> Vec<ConnectFinding> {
    let mut by_dst: BTreeMap<ConnectKey, BTreeMap<String, u64>> = BTreeMap::new();
    for s in fails {
        *by_dst
            .entry(connect_key(s))
            .or_default()
            .entry(s.label("node").to_string())
            .or_default() += count(s.value);
    }
    let share = |service: &str, backend: Option<&str>| -> Option<f64> {
        let (mut failing, mut total) = (0.0, 0.0);
        for s in shares.iter().filter(|s| {
            s.label("service") == service && backend.is_none_or(|b| s.label("backend") == b)
        }) {
            total += s.value;
            if s.label("verdict")
                .parse::<VerdictKind>()
                .map_or(true, VerdictKind::is_failing)
            {
                failing += s.value;
            }
        }
        (total > 0.0).then(|| failing / total)
    };
    let mut findings: Vec<ConnectFinding> = by_dst
        .into_iter()
        .map(
            |((failure, service, backend, dst, cluster_verdict, dst_service, dst_node), nodes)| {
                let nodes = node_counts(nodes);
                ConnectFinding {
                    failure,
                    backend_failing_share: (!service.is_empty() && !backend.is_empty())
                        .then(|| share(&service, Some(&backend)))
                        .flatten(),
                    service_failing_share: (!service.is_empty())
                        .then(|| share(&service, None))
                        .flatten(),
                    connects: nodes.iter().map(|n| n.count).sum(),
                    nodes,
                    service: non_empty(&service),
                    backend: non_empty(&backend),
                    dst,
                    dst_service: non_empty(&dst_service),
                    dst_node: non_empty(&dst_node),
                    cluster_verdict,
                    last_grew_s: None,
                }
            },
        )
        .collect();
    findings.sort_by(|a, b| {
        (a.failure != Failure::BlackHoles)
            .cmp(&(b.failure != Failure::BlackHoles))
            .then(b.nodes.len().cmp(&a.nodes.len()))
            .then(b.connects.cmp(&a.connects))
    });
    findings
}

fn node_counts(nodes: BTreeMap<String, u64>) -> Vec<NodeCount> {
    let mut nodes: Vec<NodeCount> = nodes
        .into_iter()
        .map(|(node, count)| NodeCount { node, count })
        .collect();
    nodes.sort_by(|a, b| natural(&a.node, &b.node));
    nodes
}

pub fn dns_findings(lost: &[Sample], stuck: &[Sample]) -> Vec<DnsFinding> {
    let mut by_server: BTreeMap<(String, String), (BTreeMap<String, u64>, u64)> = BTreeMap::new();
    for s in lost {
        let entry = by_server
            .entry((
                s.label("server").to_string(),
                s.label("service").to_string(),
            ))
            .or_default();
        *entry.0.entry(s.label("node").to_string()).or_default() += count(s.value);
    }
    for s in stuck {
        let entry = by_server
            .entry((
                s.label("server").to_string(),
                s.label("service").to_string(),
            ))
            .or_default();
        entry.0.entry(s.label("node").to_string()).or_default();
        entry.1 += count(s.value);
    }
    let mut findings: Vec<DnsFinding> = by_server
        .into_iter()
        .map(|((server, service), (nodes, stuck_sockets))| {
            let nodes = node_counts(nodes);
            DnsFinding {
                server,
                service: non_empty(&service),
                lost: nodes.iter().map(|n| n.count).sum(),
                nodes,
                stuck_sockets,
                last_grew_s: None,
            }
        })
        .collect();
    findings.sort_by(|a, b| b.nodes.len().cmp(&a.nodes.len()).then(b.lost.cmp(&a.lost)));
    findings
}

/// Stale Service rules held now, grouped by Service and backend; most nodes first.
pub fn stale_findings(held: &[Sample]) -> Vec<StaleFinding> {
    // (Service, backend, reason) -> (sources, nodes).
    type Entry = (String, String, String);
    let mut by_entry: BTreeMap<Entry, [Vec<String>; 2]> = BTreeMap::new();
    for s in held {
        let [sources, nodes] = by_entry
            .entry((
                s.label("service").to_string(),
                s.label("backend").to_string(),
                s.label("reason").to_string(),
            ))
            .or_default();
        sources.push(s.label("source").to_string());
        nodes.push(s.label("node").to_string());
    }
    let mut findings: Vec<StaleFinding> = by_entry
        .into_iter()
        .map(|((service, backend, reason), [mut sources, nodes])| {
            sources.sort();
            sources.dedup();
            StaleFinding {
                service,
                backend,
                reason,
                sources,
                nodes: sorted_nodes(nodes.into_iter()),
            }
        })
        .collect();
    findings.sort_by_key(|f| std::cmp::Reverse(f.nodes.len()));
    findings
}

/// What a server losing replies is grouped by.
type ReplyKey = (String, String, String, Option<ClusterVerdictKind>);

fn reply_key(s: &Sample) -> ReplyKey {
    (
        s.label("local").to_string(),
        s.label("local_service").to_string(),
        s.label("peer_node").to_string(),
        cluster_verdict_of(s.label("cluster_verdict")),
    )
}

impl ReplyFinding {
    fn key(&self) -> ReplyKey {
        let text = |o: &Option<String>| o.clone().unwrap_or_default();
        (
            self.local.clone(),
            text(&self.local_service),
            text(&self.peer_node),
            self.cluster_verdict,
        )
    }
}

/// Servers whose replies were lost in the window, by node; most nodes, then most lost, first.
pub fn reply_findings(lost: &[Sample]) -> Vec<ReplyFinding> {
    let mut by_server: BTreeMap<ReplyKey, BTreeMap<String, u64>> = BTreeMap::new();
    for s in lost {
        *by_server
            .entry(reply_key(s))
            .or_default()
            .entry(s.label("node").to_string())
            .or_default() += count(s.value);
    }
    let mut findings: Vec<ReplyFinding> = by_server
        .into_iter()
        .map(|((local, local_service, peer_node, verdict), nodes)| {
            let nodes = node_counts(nodes);
            ReplyFinding {
                local,
                local_service: non_empty(&local_service),
                peer_node: non_empty(&peer_node),
                cluster_verdict: verdict,
                lost: nodes.iter().map(|n| n.count).sum(),
                nodes,
                last_grew_s: None,
            }
        })
        .collect();
    findings.sort_by(|a, b| b.nodes.len().cmp(&a.nodes.len()).then(b.lost.cmp(&a.lost)));
    findings
}

/// Tracers seen in the window but not now (down when their target's `up` is 0, else missing);
/// nodes kube-state-metrics lists that have no tracer; degraded kernel capabilities.
pub fn tracer_problems(
    seen: &[Sample],
    now: &[Sample],
    down: &[Sample],
    kube_nodes: &[Sample],
    degraded: &[Sample],
) -> Vec<TracerProblem> {
    let mut problems = Vec::new();
    let up_now: Vec<&str> = now.iter().map(|s| s.label("node")).collect();
    for s in seen {
        let node = s.label("node");
        if up_now.contains(&node) {
            continue;
        }
        let instance = s.label("instance");
        let (state, detail) = if down.iter().any(|d| d.label("instance") == instance) {
            (
                "down",
                format!("its endpoint {instance} does not answer scrapes"),
            )
        } else {
            (
                "missing",
                "reported in the window, no longer scraped".to_string(),
            )
        };
        problems.push(TracerProblem {
            node: node.to_string(),
            state: state.into(),
            detail,
        });
    }
    for s in kube_nodes {
        let node = s.label("node");
        if !node.is_empty() && !up_now.contains(&node) && !problems.iter().any(|p| p.node == node) {
            problems.push(TracerProblem {
                node: node.to_string(),
                state: "missing".into(),
                detail: "a node of the cluster with no tracer metrics".into(),
            });
        }
    }
    let mut by_node: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for s in degraded.iter().filter(|s| s.value > 0.0) {
        by_node.entry(s.label("node")).or_default().push(format!(
            "{} {}",
            s.label("capability"),
            s.label("state")
        ));
    }
    for (node, capabilities) in by_node {
        problems.push(TracerProblem {
            node: node.to_string(),
            state: "degraded".into(),
            detail: capabilities.join(", "),
        });
    }
    problems.sort_by(|a, b| natural(&a.node, &b.node).then(a.state.cmp(&b.state)));
    problems
}

/// `node-2` before `node-10`.
fn natural(a: &str, b: &str) -> Ordering {
    let split = |s: &str| {
        let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (head, tail) = s.split_at(s.len() - digits);
        (head.to_string(), tail.parse::<u64>().ok())
    };
    split(a).cmp(&split(b)).then_with(|| a.cmp(b))
}

fn sorted_nodes(nodes: impl Iterator<Item = String>) -> Vec<String> {
    let mut nodes: Vec<String> = nodes.collect();
    nodes.sort_by(|a, b| natural(a, b));
    nodes.dedup();
    nodes
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// `600` -> `10m`, as the window is given.
pub fn window_text(secs: u64) -> String {
    if secs.is_multiple_of(3600) {
        format!("{}h", secs / 3600)
    } else if secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}

fn names(nodes: &[NodeCount]) -> String {
    nodes
        .iter()
        .map(|n| n.node.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn with_counts(nodes: &[NodeCount]) -> String {
    nodes
        .iter()
        .map(|n| format!("{} ({})", n.node, n.count))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a failing connect went to: `Service -> backend`, the Service, or the destination (with its
/// Service's name when cluster state gave one: a `NodePort`).
pub fn connect_what(f: &ConnectFinding) -> String {
    match (&f.service, &f.backend, &f.dst_service) {
        (Some(service), Some(backend), _) => format!("{service} -> {backend}"),
        (Some(service), None, _) => service.clone(),
        (None, _, Some(name)) => format!("{} ({name})", f.dst),
        (None, _, None) => f.dst.clone(),
    }
}

/// A failing connect finding: its line and the line of counts and shares.
pub fn connect_text(f: &ConnectFinding, total: usize) -> String {
    let why = f
        .cluster_verdict
        .map_or_else(String::new, |v| format!(" ({})", v.after_backend()));
    let mut out = format!(
        "{}{why}: {} from {} of {total} nodes: {}\n  {} connects",
        connect_what(f),
        f.failure,
        f.nodes.len(),
        names(&f.nodes),
        f.connects
    );
    if let Some(share) = f.backend_failing_share {
        let _ = write!(out, "; failing: {} of this backend's", percent(share));
        if let Some(share) = f.service_failing_share {
            let _ = write!(out, ", {} of the Service's", percent(share));
        }
    } else if let Some(share) = f.service_failing_share {
        let _ = write!(out, "; failing: {} of the Service's", percent(share));
    }
    out
}

pub fn dns_text(d: &DnsFinding, total: usize) -> String {
    let what = d
        .service
        .as_ref()
        .map_or_else(|| d.server.clone(), |s| format!("{s} -> {}", d.server));
    let mut out = format!(
        "{what}: {} queries lost from {} of {total} nodes: {}",
        d.lost,
        d.nodes.len(),
        with_counts(&d.nodes)
    );
    if d.stuck_sockets > 0 {
        let s = if d.stuck_sockets == 1 { "" } else { "s" };
        let _ = write!(out, "; {} socket{s} stuck on it", d.stuck_sockets);
    }
    out
}

pub fn stale_text(s: &StaleFinding, total: usize) -> String {
    format!(
        "{} -> {} ({}): held by {} of {total} nodes: {} ({})",
        s.service,
        s.backend,
        s.reason,
        s.nodes.len(),
        s.nodes.join(", "),
        s.sources.join(", ")
    )
}

pub fn reply_text(r: &ReplyFinding, total: usize) -> String {
    let service = r
        .local_service
        .as_deref()
        .map_or_else(String::new, |s| format!(" ({s})"));
    let towards = r
        .peer_node
        .as_deref()
        .map_or_else(String::new, |p| format!(" towards node {p}"));
    let why = r
        .cluster_verdict
        .map_or_else(String::new, |v| format!(" ({v})"));
    format!(
        "{}{service}{towards}{why}: {} connections from {} of {total} nodes: {}",
        r.local,
        r.lost,
        r.nodes.len(),
        with_counts(&r.nodes)
    )
}

/// A half-open flow: the clients' side, then the server's.
pub fn half_open_text(h: &HalfOpenFinding, total: usize) -> String {
    let service = h
        .service
        .as_deref()
        .map_or_else(String::new, |s| format!("{s} "));
    let state = h
        .peer_node_state
        .as_deref()
        .map_or_else(String::new, |s| format!(" ({s})"));
    format!(
        "{service}{} -> {} on {}: black holes from {} of {total} nodes: {}; its replies are lost \
         towards node {}{state}\n  {} connects failing: {}; {} connections' replies never \
         acknowledged: {}",
        h.dialed.join(", "),
        h.backend,
        names(&h.backend_nodes),
        h.client_nodes.len(),
        names(&h.client_nodes),
        h.peer_node,
        h.connects,
        with_counts(&h.client_nodes),
        h.replies_lost,
        with_counts(&h.backend_nodes),
    )
}

/// The `PromQL` behind a half-open flow: both halves, by node.
pub fn half_open_queries(h: &HalfOpenFinding, window: &str) -> Vec<(String, String)> {
    let mut clients =
        String::from("tracer_connects_total{verdict=~\"unanswered|abandoned|timed_out\"");
    match &h.service {
        Some(service) => {
            let _ = write!(clients, ",dst_service={}", promql::quote(service));
        }
        None => {
            let _ = write!(clients, ",backend={}", promql::quote(&h.backend));
        }
    }
    clients.push('}');
    let replies = format!(
        "tracer_replies_lost_total{{local={},peer_node={}}}",
        promql::quote(&h.backend),
        promql::quote(&h.peer_node)
    );
    vec![
        (
            "the clients' failing connects, by node".into(),
            grown_by("node, dst, dst_node", &clients, window),
        ),
        (
            "the backend's replies lost, by node and the node they went to".into(),
            grown_by("node, peer_node", &replies, window),
        ),
    ]
}

fn section<T>(out: &mut String, title: &str, items: &[T], line: impl Fn(&T) -> String) {
    let _ = writeln!(out, "\n{title}");
    if items.is_empty() {
        out.push_str("  none\n");
    }
    for item in items {
        out.push_str(&line(item));
        out.push('\n');
    }
}

/// The sweep as text, one line per finding, like `tracer summary`.
pub fn format_text(sweep: &Sweep) -> String {
    let total = sweep.nodes.len();
    let mut out = format!(
        "Sweep of {}: {} node{} with a tracer over the last {}\n",
        sweep.prometheus,
        total,
        if total == 1 { "" } else { "s" },
        window_text(sweep.window_s)
    );
    section(
        &mut out,
        "Half-open: clients fail, the backend's replies are lost on the way back",
        &sweep.half_open,
        |h| half_open_text(h, total),
    );
    section(&mut out, "Connects failing", &sweep.connects, |f| {
        connect_text(f, total)
    });
    section(&mut out, "DNS servers losing queries", &sweep.dns, |d| {
        dns_text(d, total)
    });
    section(
        &mut out,
        "Service rules no EndpointSlice backs",
        &sweep.stale_datapath,
        |s| stale_text(s, total),
    );
    section(
        &mut out,
        "Replies never acknowledged (server side)",
        &sweep.replies_lost,
        |r| reply_text(r, total),
    );
    section(
        &mut out,
        "Tracers missing, down or degraded",
        &sweep.tracers,
        |t| format!("{}: {}: {}", t.node, t.state, t.detail),
    );
    out
}

#[cfg(test)]
mod tests;
