//! The Cluster view's state, kept apart from this node's: the latest answer of the Prometheus that
//! scrapes every node's tracer (`--prometheus`), as rows ranked like `tracer sweep` ranks its
//! findings, how fresh that answer is, and the selection. Never imports widgets:
//! `view/cluster.rs` renders it.
use std::{
    fmt::Write as _,
    time::{Duration, SystemTime},
};

use serde::Serialize;

use crate::sweep::{self, Sweep, promql};

/// What the poller (`cluster_poll.rs`) says.
#[derive(Debug)]
pub enum ClusterUpdate {
    /// A round of queries started.
    Asking(SystemTime),
    /// Its answer.
    Answer { sweep: Box<Sweep>, at: SystemTime },
    /// It failed or took too long: one sentence.
    Failed { error: String, at: SystemTime },
}

/// One row of the Cluster view: a finding of the sweep over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterRow {
    /// `half-open`, `black holes`, `refused`, `dns lost`, `replies lost`, `stale rule`, `tracer`...
    pub kind: String,
    /// What fails: the Service and backend, the DNS server, the server losing replies.
    pub what: String,
    /// Where: the nodes that see it, with counts.
    pub nodes: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Seconds since it last grew.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ago_s: Option<u64>,
    /// The finding as `tracer sweep` says it.
    pub sentence: String,
    /// The `PromQL` that produced the row: (what it counts, the query).
    pub queries: Vec<(String, String)>,
}

impl ClusterRow {
    /// What the text filter searches, lowercased.
    pub fn text(&self) -> String {
        format!("{} {} {}", self.kind, self.what, self.nodes).to_lowercase()
    }

    /// The queries as text to paste: each after a `# what it counts` line (`PromQL` comments).
    pub fn promql_text(&self) -> String {
        self.queries
            .iter()
            .map(|(what, query)| format!("# {what}\n{query}\n"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A row is the same row from one answer to the next when these are.
    fn id(&self) -> (&str, &str) {
        (&self.kind, &self.what)
    }
}

/// The latest answer, as rows.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterAnswer {
    pub rows: Vec<ClusterRow>,
    pub nodes: usize,
    pub at: SystemTime,
}

#[derive(Debug)]
pub struct ClusterPane {
    pub url: String,
    pub window: Duration,
    pub refresh: Duration,
    answer: Option<ClusterAnswer>,
    /// While paused, the answer on screen is the one there was at the pause (`frozen`).
    paused: bool,
    frozen: Option<ClusterAnswer>,
    /// The latest failure, until an answer comes.
    pub error: Option<(String, SystemTime)>,
    /// When the round in flight started.
    pub asking_since: Option<SystemTime>,
    selected: Option<(String, String)>,
    pub detail: bool,
    /// The clock ages are read against (the app's frame tick).
    pub now: SystemTime,
}

impl ClusterPane {
    pub fn new(url: impl Into<String>, window: Duration, refresh: Duration) -> ClusterPane {
        ClusterPane {
            url: url.into(),
            window,
            refresh,
            answer: None,
            paused: false,
            frozen: None,
            error: None,
            asking_since: None,
            selected: None,
            detail: false,
            now: SystemTime::UNIX_EPOCH,
        }
    }

    pub fn apply(&mut self, update: ClusterUpdate) {
        match update {
            ClusterUpdate::Asking(at) => self.asking_since = Some(at),
            ClusterUpdate::Answer { sweep, at } => {
                self.asking_since = None;
                self.error = None;
                self.answer = Some(ClusterAnswer {
                    rows: rows(&sweep),
                    nodes: sweep.nodes.len(),
                    at,
                });
            }
            ClusterUpdate::Failed { error, at } => {
                self.asking_since = None;
                self.error = Some((error, at));
            }
        }
    }

    /// The answer on screen (frozen while paused).
    pub fn shown(&self) -> Option<&ClusterAnswer> {
        if self.paused {
            self.frozen.as_ref()
        } else {
            self.answer.as_ref()
        }
    }

    pub fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
        self.frozen = if paused { self.answer.clone() } else { None };
    }

    /// Rows the text filter keeps.
    pub fn visible_rows(&self, filter: &str) -> Vec<&ClusterRow> {
        let needle = filter.to_lowercase();
        self.shown().map_or_else(Vec::new, |a| {
            a.rows
                .iter()
                .filter(|r| needle.is_empty() || r.text().contains(&needle))
                .collect()
        })
    }

    pub fn selected_index(&self, rows: &[&ClusterRow]) -> usize {
        self.selected
            .as_ref()
            .and_then(|(kind, what)| rows.iter().position(|r| r.id() == (kind, what)))
            .unwrap_or(0)
    }

    pub fn selected_row<'a>(&self, rows: &[&'a ClusterRow]) -> Option<&'a ClusterRow> {
        rows.get(self.selected_index(rows)).copied()
    }

    /// Moves the selection among the rows the text filter keeps.
    pub fn move_selection(&mut self, filter: &str, delta: isize) {
        let target = {
            let rows = self.visible_rows(filter);
            if rows.is_empty() {
                return;
            }
            let to = self
                .selected_index(&rows)
                .saturating_add_signed(delta)
                .min(rows.len() - 1);
            let (kind, what) = rows[to].id();
            (kind.to_string(), what.to_string())
        };
        self.selected = Some(target);
    }

    /// How long ago, on the pane's clock.
    pub fn ago(&self, t: SystemTime) -> Duration {
        self.now.duration_since(t).unwrap_or_default()
    }
}

fn counts(nodes: &[sweep::NodeCount]) -> String {
    nodes
        .iter()
        .map(|n| format!("{} ({})", n.node, n.count))
        .collect::<Vec<_>>()
        .join(", ")
}

fn window_of(sweep: &Sweep) -> String {
    sweep::window_text(sweep.window_s)
}

/// The sweep's findings as rows, in the sweep's order: half-open flows, failing connects, lost
/// replies, DNS, stale Service rules, tracers.
pub fn rows(sweep: &Sweep) -> Vec<ClusterRow> {
    let total = sweep.nodes.len();
    let w = window_of(sweep);
    let mut rows: Vec<ClusterRow> = sweep
        .half_open
        .iter()
        .map(|h| half_open_row(h, total, &w))
        .collect();
    rows.extend(sweep.connects.iter().map(|f| ClusterRow {
        kind: f.failure.name().to_owned(),
        what: sweep::connect_what(f),
        nodes: counts(&f.nodes),
        count: Some(f.connects),
        ago_s: f.last_grew_s,
        sentence: sweep::connect_text(f, total),
        queries: vec![(
            "failing connects, by node".into(),
            promql::connect_row(f, &w),
        )],
    }));
    rows.extend(sweep.replies_lost.iter().map(|r| ClusterRow {
        kind: "replies lost".into(),
        what: match &r.peer_node {
            Some(peer) => format!("{} -> {peer}", r.local),
            None => r.local.clone(),
        },
        nodes: counts(&r.nodes),
        count: Some(r.lost),
        ago_s: r.last_grew_s,
        sentence: sweep::reply_text(r, total),
        queries: vec![(
            "connections whose replies were lost, by node and peer node".into(),
            promql::reply_row(r, &w),
        )],
    }));
    rows.extend(sweep.dns.iter().map(|d| dns_row(d, total, &w)));
    rows.extend(sweep.stale_datapath.iter().map(|s| ClusterRow {
        kind: "stale rule".into(),
        what: format!("{} -> {}", s.service, s.backend),
        nodes: s.nodes.join(", "),
        count: None,
        ago_s: None,
        sentence: sweep::stale_text(s, total),
        queries: vec![("nodes holding it now".into(), promql::stale_row(s))],
    }));
    rows.extend(sweep.tracers.iter().map(tracer_row));
    rows
}

fn half_open_row(h: &sweep::HalfOpenFinding, total: usize, window: &str) -> ClusterRow {
    let service = h.service.as_deref().unwrap_or("-");
    let backend_nodes: Vec<&str> = h.backend_nodes.iter().map(|n| n.node.as_str()).collect();
    ClusterRow {
        kind: "half-open".into(),
        what: format!("{service} -> {} ({})", h.backend, backend_nodes.join(", ")),
        // The clients' nodes and the node the replies went to; their counts are in the detail.
        nodes: format!(
            "{} -> {}",
            h.client_nodes
                .iter()
                .map(|n| n.node.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            h.peer_node
        ),
        count: Some(h.connects),
        ago_s: h.last_grew_s,
        sentence: sweep::half_open_text(h, total),
        queries: sweep::half_open_queries(h, window),
    }
}

fn dns_row(d: &sweep::DnsFinding, total: usize, window: &str) -> ClusterRow {
    let mut what = d
        .service
        .as_ref()
        .map_or_else(|| d.server.clone(), |s| format!("{s} -> {}", d.server));
    if d.stuck_sockets > 0 {
        let s = if d.stuck_sockets == 1 { "" } else { "s" };
        let _ = write!(what, " ({} stuck socket{s})", d.stuck_sockets);
    }
    let mut queries = vec![(
        "DNS queries lost, by node".into(),
        promql::dns_row(d, window),
    )];
    if d.stuck_sockets > 0 {
        queries.push((
            "sockets stuck on it, by node".into(),
            promql::stuck_row(d, window),
        ));
    }
    ClusterRow {
        kind: if d.lost == 0 && d.stuck_sockets > 0 {
            "dns stuck".into()
        } else {
            "dns lost".into()
        },
        what,
        nodes: counts(&d.nodes),
        count: Some(d.lost),
        ago_s: d.last_grew_s,
        sentence: sweep::dns_text(d, total),
        queries,
    }
}

fn tracer_row(t: &sweep::TracerProblem) -> ClusterRow {
    ClusterRow {
        kind: format!("tracer {}", t.state),
        what: t.node.clone(),
        nodes: t.node.clone(),
        count: None,
        ago_s: None,
        sentence: format!("{}: {}: {}", t.node, t.state, t.detail),
        queries: vec![
            (
                "tracers scraped now".into(),
                promql::TRACERS_NOW.to_string(),
            ),
            ("targets down".into(), promql::TARGETS_DOWN.to_string()),
            (
                "capabilities degraded or off".into(),
                promql::DEGRADED.to_string(),
            ),
        ],
    }
}
