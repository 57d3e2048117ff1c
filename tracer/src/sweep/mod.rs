//! `tracer sweep`: the cluster-wide picture from the Prometheus that scrapes the tracers
//! (`--metrics` on every node): per Service and backend, which nodes see black holes and what share
//! of the connects fail; DNS servers losing queries, by node; tracers missing, down or degraded.
//! "3 of 10 nodes" is the answer a single node cannot give.
//!
//! `client.rs` asks the HTTP API and parses its answers into `Sample`s; `query` turns samples into
//! the typed `Sweep`; `format_text` prints it like `tracer summary` (`--format json`: the same as
//! JSON).
pub mod client;

use std::{cmp::Ordering, collections::BTreeMap, fmt::Write as _};

use serde::Serialize;

use self::client::{Prometheus, Sample};
use crate::args::{SweepArgs, SweepFormat};

/// Verdicts of `tracer_connects_total` that are failures, black holes first.
const FAILING: &str = "unanswered|abandoned|timed_out|unreachable|refused|failed";

/// What the sweep found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sweep {
    pub prometheus: String,
    pub window_s: u64,
    /// Nodes whose tracer reported in the window (the "of N nodes").
    pub nodes: Vec<String>,
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
    /// From cluster state: `peer node is gone`, `peer node is NotReady`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_verdict: Option<String>,
    pub nodes: Vec<NodeCount>,
    pub lost: u64,
}

/// Failing connects to one destination (a Service's backend, or an address), by node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConnectFinding {
    /// `black holes` (unanswered, abandoned, timed out), `unreachable`, `refused` or `failed`.
    pub failure: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// The socket's destination, when no Service was seen.
    pub dst: String,
    /// From cluster state: `backend is no live pod`, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_verdict: Option<String>,
    pub nodes: Vec<NodeCount>,
    pub connects: u64,
    /// Failing share of the connects to this backend of the Service (all nodes, the window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend_failing_share: Option<f64>,
    /// Failing share of the connects to the Service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_failing_share: Option<f64>,
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
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TracerProblem {
    pub node: String,
    /// `missing` (a node with no tracer series now), `down` (its scrape fails) or `degraded`.
    pub state: String,
    pub detail: String,
}

/// A counter's growth over the window, counting a series born in the window from zero
/// (`increase()` would miss the events before its first sample: a black hole's series appears at
/// its first connect).
fn growth(selector: &str, window: &str) -> String {
    format!(
        "(max_over_time({selector}[{window}]) - (({selector} offset {window}) or \
         (max_over_time({selector}[{window}]) * 0)))"
    )
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
    let w = format!("{window_s}s");
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
    let now = prometheus
        .query("max by (node, instance) (tracer_build_info)")
        .await?;
    let down = prometheus.query("max by (instance) (up == 0)").await?;
    let kube_nodes = prometheus.query("max by (node) (kube_node_info)").await?;
    let degraded = prometheus
        .query(
            "max by (node, capability, state) (tracer_kernel_capability{state=~\"degraded|off\"})",
        )
        .await?;
    let fails = prometheus
        .query(&format!(
            "sum by (node, verdict, dst, service, backend, cluster_verdict) ({}) > 0",
            growth(
                &format!("tracer_connects_total{{verdict=~\"{FAILING}\"}}"),
                &w
            )
        ))
        .await?;
    let shares = prometheus
        .query(&format!(
            "sum by (service, backend, verdict) (sum_over_time(tracer_service_connects[{w}]))"
        ))
        .await?;
    let dns_lost = prometheus
        .query(&format!(
            "sum by (node, server, service) ({}) > 0",
            growth(
                "tracer_dns_queries_total{verdict=~\"unanswered|refused\"}",
                &w
            )
        ))
        .await?;
    let stuck = prometheus
        .query(&format!(
            "sum by (node, server, service) ({}) > 0",
            growth("tracer_dns_stuck_sockets_total", &w)
        ))
        .await?;
    let stale = prometheus
        .query(
            "max by (node, source, service, backend, reason) (tracer_stale_datapath_entries == 1)",
        )
        .await?;
    let replies = prometheus
        .query(&format!(
            "sum by (node, local, cluster_verdict) ({}) > 0",
            growth("tracer_replies_lost_total", &w)
        ))
        .await?;
    Ok(Sweep {
        prometheus: prometheus.url().to_string(),
        window_s,
        nodes: sorted_nodes(seen.iter().map(|s| s.label("node").to_string())),
        connects: connect_findings(&fails, &shares),
        dns: dns_findings(&dns_lost, &stuck),
        stale_datapath: stale_findings(&stale),
        replies_lost: reply_findings(&replies),
        tracers: tracer_problems(&seen, &now, &down, &kube_nodes, &degraded),
    })
}

fn failure_class(verdict: &str) -> &'static str {
    match verdict {
        "unanswered" | "abandoned" | "timed_out" => "black holes",
        "unreachable" => "unreachable",
        "refused" => "refused",
        _ => "failed",
    }
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

/// `tracer_connects_total` growth by node into one finding per destination and kind of failure;
/// `shares` (`tracer_service_connects` summed over the window) gives the failing shares.
pub fn connect_findings(fails: &[Sample], shares: &[Sample]) -> Vec<ConnectFinding> {
    type Key = (&'static str, String, String, String, String);
    let mut by_dst: BTreeMap<Key, BTreeMap<String, u64>> = BTreeMap::new();
    for s in fails {
        let key = (
            failure_class(s.label("verdict")),
            s.label("service").to_string(),
            s.label("backend").to_string(),
            s.label("dst").to_string(),
            s.label("cluster_verdict").to_string(),
        );
        *by_dst
            .entry(key)
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
            if !matches!(s.label("verdict"), "established" | "slow") {
                failing += s.value;
            }
        }
        (total > 0.0).then(|| failing / total)
    };
    let mut findings: Vec<ConnectFinding> = by_dst
        .into_iter()
        .map(
            |((failure, service, backend, dst, cluster_verdict), nodes)| {
                let mut nodes: Vec<NodeCount> = nodes
                    .into_iter()
                    .map(|(node, count)| NodeCount { node, count })
                    .collect();
                nodes.sort_by(|a, b| natural(&a.node, &b.node));
                ConnectFinding {
                    failure: failure.to_string(),
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
                    cluster_verdict: non_empty(&cluster_verdict),
                }
            },
        )
        .collect();
    findings.sort_by(|a, b| {
        (a.failure != "black holes")
            .cmp(&(b.failure != "black holes"))
            .then(b.nodes.len().cmp(&a.nodes.len()))
            .then(b.connects.cmp(&a.connects))
    });
    findings
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
            let mut nodes: Vec<NodeCount> = nodes
                .into_iter()
                .map(|(node, count)| NodeCount { node, count })
                .collect();
            nodes.sort_by(|a, b| natural(&a.node, &b.node));
            DnsFinding {
                server,
                service: non_empty(&service),
                lost: nodes.iter().map(|n| n.count).sum(),
                nodes,
                stuck_sockets,
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

/// Servers whose replies were lost in the window, by node; most nodes, then most lost, first.
pub fn reply_findings(lost: &[Sample]) -> Vec<ReplyFinding> {
    let mut by_server: BTreeMap<(String, String), BTreeMap<String, u64>> = BTreeMap::new();
    for s in lost {
        *by_server
            .entry((
                s.label("local").to_string(),
                s.label("cluster_verdict").to_string(),
            ))
            .or_default()
            .entry(s.label("node").to_string())
            .or_default() += count(s.value);
    }
    let mut findings: Vec<ReplyFinding> = by_server
        .into_iter()
        .map(|((local, verdict), nodes)| {
            let mut nodes: Vec<NodeCount> = nodes
                .into_iter()
                .map(|(node, count)| NodeCount { node, count })
                .collect();
            nodes.sort_by(|a, b| natural(&a.node, &b.node));
            ReplyFinding {
                local,
                cluster_verdict: non_empty(&verdict),
                lost: nodes.iter().map(|n| n.count).sum(),
                nodes,
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

/// `backend is no live pod` -> `no live pod`: the parenthesis after a backend.
fn short_cluster_verdict(v: &str) -> &str {
    v.strip_prefix("backend is ").unwrap_or(v)
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// `600` -> `10m`, as the window is given.
fn window_text(secs: u64) -> String {
    if secs.is_multiple_of(3600) {
        format!("{}h", secs / 3600)
    } else if secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}

/// The stale Service rules by the nodes that hold them, and the servers losing replies.
fn push_datapath_and_replies(out: &mut String, sweep: &Sweep, total: usize) {
    out.push_str("\nService rules no EndpointSlice backs\n");
    if sweep.stale_datapath.is_empty() {
        out.push_str("  none\n");
    }
    for s in &sweep.stale_datapath {
        let _ = writeln!(
            out,
            "{} -> {} ({}): held by {} of {total} nodes: {} ({})",
            s.service,
            s.backend,
            s.reason,
            s.nodes.len(),
            s.nodes.join(", "),
            s.sources.join(", ")
        );
    }
    out.push_str("\nReplies never acknowledged (server side)\n");
    if sweep.replies_lost.is_empty() {
        out.push_str("  none\n");
    }
    for r in &sweep.replies_lost {
        let why = r
            .cluster_verdict
            .as_deref()
            .map_or_else(String::new, |v| format!(" ({v})"));
        let by_node: Vec<String> = r
            .nodes
            .iter()
            .map(|n| format!("{} ({})", n.node, n.count))
            .collect();
        let _ = writeln!(
            out,
            "{}{why}: {} connections from {} of {total} nodes: {}",
            r.local,
            r.lost,
            r.nodes.len(),
            by_node.join(", ")
        );
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
    let names = |nodes: &[NodeCount]| {
        nodes
            .iter()
            .map(|n| n.node.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str("\nConnects failing\n");
    if sweep.connects.is_empty() {
        out.push_str("  none\n");
    }
    for f in &sweep.connects {
        let what = match (&f.service, &f.backend) {
            (Some(service), Some(backend)) => format!("{service} -> {backend}"),
            (Some(service), None) => service.clone(),
            _ => f.dst.clone(),
        };
        let why = f
            .cluster_verdict
            .as_deref()
            .map_or_else(String::new, |v| format!(" ({})", short_cluster_verdict(v)));
        let _ = writeln!(
            out,
            "{what}{why}: {} from {} of {total} nodes: {}",
            f.failure,
            f.nodes.len(),
            names(&f.nodes)
        );
        let mut detail = format!("  {} connects", f.connects);
        if let Some(share) = f.backend_failing_share {
            let _ = write!(detail, "; failing: {} of this backend's", percent(share));
            if let Some(share) = f.service_failing_share {
                let _ = write!(detail, ", {} of the Service's", percent(share));
            }
        } else if let Some(share) = f.service_failing_share {
            let _ = write!(detail, "; failing: {} of the Service's", percent(share));
        }
        out.push_str(&detail);
        out.push('\n');
    }
    out.push_str("\nDNS servers losing queries\n");
    if sweep.dns.is_empty() {
        out.push_str("  none\n");
    }
    for d in &sweep.dns {
        let what = d
            .service
            .as_ref()
            .map_or_else(|| d.server.clone(), |s| format!("{s} -> {}", d.server));
        let by_node: Vec<String> = d
            .nodes
            .iter()
            .map(|n| format!("{} ({})", n.node, n.count))
            .collect();
        let _ = write!(
            out,
            "{what}: {} queries lost from {} of {total} nodes: {}",
            d.lost,
            d.nodes.len(),
            by_node.join(", ")
        );
        if d.stuck_sockets > 0 {
            let _ = write!(out, "; {} sockets stuck on it", d.stuck_sockets);
        }
        out.push('\n');
    }
    push_datapath_and_replies(&mut out, sweep, total);
    out.push_str("\nTracers missing, down or degraded\n");
    if sweep.tracers.is_empty() {
        out.push_str("  none\n");
    }
    for t in &sweep.tracers {
        let _ = writeln!(out, "{}: {}: {}", t.node, t.state, t.detail);
    }
    out
}

#[cfg(test)]
mod tests;
