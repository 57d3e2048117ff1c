//! The TUI's model, built from `Record`s only, so live tracing, `replay` and `summary` share it and
//! tests drive it without a kernel or a terminal. Never imports widgets: `view.rs` renders `&State`.
//!
//! One row per (source workload, destination, verdict). A connect attempt (one `flow` id) sits in
//! exactly one row at a time, the row of its latest verdict: its live `unanswered` updates count it
//! as live there, and its final record moves it to the row of its end.
//!
//! Time is the records' own `time`, not the wall clock, so a replay shows the ages it had when it
//! was recorded and snapshots do not depend on when the tests run. Live, the app moves the clock
//! forward on every tick (`State::tick`).
use std::{
    cmp::Reverse,
    collections::HashMap,
    time::{Duration, SystemTime},
};

use serde::Serialize;

use super::dns::DnsModel;
use crate::{
    record::{ConnectRecord, HealthyRecord, Record, StatsRecord},
    verdict::{RefusedBy, Unreachable, Verdict},
};

/// Rows that changed less than this long ago are marked (`+` new, `*` changed).
pub const MARK_FOR: Duration = Duration::from_secs(5);
/// Rows not seen for this long fade and sink below the active ones (they do not vanish).
pub const FADE_AFTER: Duration = Duration::from_secs(30);
/// A live flow whose end never arrives is forgotten after this long, as the pipeline does.
const LIVE_FLOW_TTL: Duration = Duration::from_mins(5);
/// Records kept per flow timeline: a flow sends one record per SYN retransmit and one at its end.
const TIMELINE_MAX: usize = 16;

/// Verdicts in the order `v` cycles through them, worst first.
pub const VERDICTS: [&str; 8] = [
    "unanswered",
    "abandoned",
    "timed_out",
    "unreachable",
    "refused",
    "failed",
    "slow",
    "established",
];

/// How bad a verdict is, for ranking: black holes, then unreachable, refused, failed, slow.
/// Records carry the verdict's name; its rank is `Verdict::severity`'s, so both never disagree.
pub fn severity(verdict: &str) -> u8 {
    let v = match verdict {
        "unanswered" => Verdict::Unanswered,
        "timed_out" => Verdict::TimedOut,
        "abandoned" => Verdict::Abandoned,
        "unreachable" => Verdict::Unreachable {
            kind: Unreachable::Host,
        },
        "refused" => Verdict::Refused { by: RefusedBy::Rst },
        "failed" => Verdict::Failed { errno: 0 },
        "slow" => Verdict::Slow,
        _ => Verdict::Established,
    };
    v.severity()
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct RowKey {
    /// The source workload: its name and Kubernetes namespace when cluster state names the pod
    /// (`workload`), else the process name and its network namespace.
    pub comm: String,
    pub netns: String,
    pub workload: bool,
    /// What the application dialled, when a load balancer rewrote it (the Service).
    pub service: Option<String>,
    /// The socket destination (the backend behind a Service).
    pub backend: String,
    pub verdict: String,
    pub cause: Option<String>,
}

impl RowKey {
    fn of_connect(c: &ConnectRecord) -> RowKey {
        let (comm, netns, workload) = source_of(&c.comm, &c.netns, &c.identity);
        RowKey {
            comm,
            netns,
            workload,
            // kube-proxy flows name both from conntrack; socket-LB flows carry the dialled address.
            service: c
                .service
                .clone()
                .or_else(|| c.dialed.clone().filter(|d| *d != c.dst)),
            backend: c.backend.clone().unwrap_or_else(|| c.dst.clone()),
            verdict: c.verdict.clone(),
            cause: c.cause.clone(),
        }
    }

    fn of_healthy(h: &HealthyRecord) -> RowKey {
        let (comm, netns, workload) = source_of(&h.comm, &h.netns, &h.identity);
        RowKey {
            comm,
            netns,
            workload,
            service: None,
            backend: h.dst.clone(),
            verdict: h.verdict.clone(),
            cause: None,
        }
    }

    /// `refused rst`, `abandoned`.
    pub fn verdict_label(&self) -> String {
        match &self.cause {
            Some(cause) => format!("{} {cause}", self.verdict),
            None => self.verdict.clone(),
        }
    }

    /// `app/frontend` (namespace/workload, as kubectl says it) or `curl/cni-3f2a` (process/netns).
    pub fn source_label(&self) -> String {
        if self.workload {
            format!("{}/{}", self.netns, self.comm)
        } else {
            format!("{}/{}", self.comm, self.netns)
        }
    }
}

/// The source workload of a record: the pod's owner (a Deployment's pods share one row) or the pod,
/// in its namespace, when cluster state names it; else the process and its network namespace.
fn source_of(comm: &str, netns: &str, id: &crate::identity::Identity) -> (String, String, bool) {
    let owner = id
        .src_owner
        .as_deref()
        .map(|o| o.rsplit('/').next().unwrap_or(o));
    match (id.src_namespace.as_deref(), owner.or(id.src_pod.as_deref())) {
        (Some(namespace), Some(name)) => (name.to_string(), namespace.to_string(), true),
        _ => (comm.to_string(), netns.to_string(), false),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub key: RowKey,
    /// Flows that reached this verdict (for `established`: connects counted by the kernel).
    pub count: u64,
    /// Flows in this row still open (only `unanswered` rows have any).
    pub live: u64,
    /// SYNs of the latest flow.
    pub syns: u16,
    /// Time in `SYN_SENT` of the latest flow, or the mean for healthy connects.
    pub syn_sent_ms: f64,
    #[serde(serialize_with = "serialize_time")]
    pub first_seen: SystemTime,
    #[serde(serialize_with = "serialize_time")]
    pub last_seen: SystemTime,
    /// The sentence for the latest flow.
    pub explanation: String,
    /// The records of the latest flow, live updates then its end.
    pub timeline: Vec<ConnectRecord>,
    #[serde(skip)]
    changed_at: SystemTime,
}

/// Serde writes `SystemTime` as seconds and nanos; a person copying a row wants RFC 3339.
fn serialize_time<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::clock::rfc3339(*t))
}

/// How a row reads at a glance right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    New,
    Changed,
    Steady,
    /// Resolved: no live flow left and nothing new for `FADE_AFTER`, or an `unanswered` row whose
    /// flows all ended.
    Faded,
}

impl Row {
    pub fn mark(&self, now: SystemTime) -> Mark {
        let since = |t: SystemTime| now.duration_since(t).unwrap_or_default();
        let resolved_live = self.key.verdict == "unanswered" && self.live == 0;
        if resolved_live || since(self.last_seen) >= FADE_AFTER {
            Mark::Faded
        } else if since(self.first_seen) < MARK_FOR {
            Mark::New
        } else if since(self.changed_at) < MARK_FOR {
            Mark::Changed
        } else {
            Mark::Steady
        }
    }

    /// Age of the problem: since this row was first seen.
    pub fn age(&self, now: SystemTime) -> Duration {
        now.duration_since(self.first_seen).unwrap_or_default()
    }

    /// The count a person compares: live flows for `unanswered`, all flows otherwise.
    pub fn shown_count(&self) -> u64 {
        if self.key.verdict == "unanswered" {
            self.live
        } else {
            self.count
        }
    }
}

/// An attempt not ended yet.
#[derive(Debug, Clone)]
struct LiveFlow {
    row: RowKey,
    records: Vec<ConnectRecord>,
    last_seen: SystemTime,
}

/// Everything learned from the records. Cloned once when the user pauses, so the screen can hold
/// still while records keep arriving (nothing is lost during a pause).
#[derive(Debug, Clone)]
pub struct Model {
    rows: HashMap<RowKey, Row>,
    live: HashMap<String, LiveFlow>,
    /// Backend -> Service, learned from connect records with a `dialed` address: healthy counts
    /// carry only the socket destination, this puts them under their Service.
    services_of: HashMap<String, String>,
    stats: Option<StatsRecord>,
    events_per_sec: Option<f64>,
    stats_time: Option<SystemTime>,
    started: Option<SystemTime>,
    now: SystemTime,
    records: u64,
    bad_times: u64,
    dns: DnsModel,
    /// Where names come from (`file`, `api`) and how fresh they are, from the latest record.
    identity: Option<(String, u64, bool)>,
    /// The kernel and its capabilities, from the first stats record that carried them.
    kernel: Option<crate::record::KernelInfo>,
    /// The latest conntrack view of each Service (`service` records).
    conntrack_services: std::collections::BTreeMap<String, crate::record::ServiceRecord>,
    /// Conntrack entries seen stuck in `SYN_SENT [UNREPLIED]` (`stale_nat`), by their tuple.
    stale_nat: std::collections::BTreeMap<String, crate::record::StaleNatRecord>,
}

impl Model {
    fn new(started: Option<SystemTime>) -> Model {
        Model {
            rows: HashMap::new(),
            live: HashMap::new(),
            services_of: HashMap::new(),
            stats: None,
            events_per_sec: None,
            stats_time: None,
            started,
            now: started.unwrap_or(SystemTime::UNIX_EPOCH),
            records: 0,
            bad_times: 0,
            dns: DnsModel::default(),
            identity: None,
            kernel: None,
            conntrack_services: std::collections::BTreeMap::new(),
            stale_nat: std::collections::BTreeMap::new(),
        }
    }

    fn time_of(&mut self, time: &str) -> SystemTime {
        if let Ok(t) = humantime::parse_rfc3339_weak(time) {
            t
        } else {
            // Counted, not fatal: a record with an odd time is still worth showing, at "now".
            self.bad_times += 1;
            self.now
        }
    }

    fn advance(&mut self, t: SystemTime) {
        self.started.get_or_insert(t);
        if t > self.now {
            self.now = t;
        }
    }

    pub fn apply(&mut self, record: Record) {
        self.records += 1;
        match record {
            Record::Connect(c) => self.apply_connect(c),
            Record::Healthy(h) => self.apply_healthy(&h),
            Record::Stats(s) => self.apply_stats(s),
            Record::Dns(d) => {
                let t = self.time_of(&d.time);
                self.advance(t);
                self.dns.query(&d);
            }
            Record::DnsHealthy(h) => self.dns.healthy(&h),
            Record::DnsStuckSocket(s) => {
                let t = self.time_of(&s.time);
                self.advance(t);
                self.dns.stuck_socket(s);
            }
            // The Services view aggregates connect records itself, and shows beside them what the
            // node's conntrack says: per Service, and the entries stuck unreplied.
            Record::Service(s) => {
                self.conntrack_services.insert(s.service.clone(), s);
            }
            Record::StaleNat(n) => {
                let key = format!("{} -> {}", n.original.src, n.original.dst);
                self.stale_nat.insert(key, n);
            }
        }
    }

    pub fn dns(&self) -> &DnsModel {
        &self.dns
    }

    /// What the node's conntrack says per Service (its summary line), worst first.
    pub fn conntrack_services(&self) -> Vec<&crate::record::ServiceRecord> {
        let mut services: Vec<_> = self.conntrack_services.values().collect();
        services.sort_by(|a, b| b.failing_share.total_cmp(&a.failing_share));
        services
    }

    /// Conntrack entries stuck unreplied, oldest first.
    pub fn stale_nat(&self) -> Vec<&crate::record::StaleNatRecord> {
        let mut entries: Vec<_> = self.stale_nat.values().collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.age_s));
        entries
    }

    /// Capabilities the running kernel does not give in full (empty when all are full or unknown).
    pub fn degraded_capabilities(&self) -> Vec<&str> {
        self.kernel
            .as_ref()
            .map(crate::record::KernelInfo::degraded)
            .unwrap_or_default()
    }

    /// Source of names, their age in seconds, and whether they are stale.
    pub fn identity(&self) -> Option<&(String, u64, bool)> {
        self.identity.as_ref()
    }

    fn apply_connect(&mut self, c: ConnectRecord) {
        let t = self.time_of(&c.time);
        self.advance(t);
        if let (Some(source), Some(age)) = (&c.identity.identity_source, c.identity.identity_age_s)
        {
            self.identity = Some((source.clone(), age, c.identity.identity_stale));
        }
        let key = RowKey::of_connect(&c);
        if let Some(service) = &key.service {
            self.services_of
                .insert(key.backend.clone(), service.clone());
        }
        // Take the flow out of the row it was in, if its verdict moved.
        let mut flow = self.live.remove(&c.flow);
        let new_in_row = match &flow {
            Some(f) if f.row == key => false,
            Some(f) => {
                if let Some(old) = self.rows.get_mut(&f.row) {
                    old.live = old.live.saturating_sub(1);
                    old.changed_at = t;
                }
                true
            }
            None => true,
        };
        let mut records = flow.take().map(|f| f.records).unwrap_or_default();
        if records.len() >= TIMELINE_MAX {
            // Keep the first SYN's record: the timeline should still show where it started.
            records.remove(1);
        }
        records.push(c.clone());
        let row = self.rows.entry(key.clone()).or_insert_with(|| Row {
            key: key.clone(),
            count: 0,
            live: 0,
            syns: 0,
            syn_sent_ms: 0.0,
            first_seen: t,
            last_seen: t,
            explanation: String::new(),
            timeline: Vec::new(),
            changed_at: t,
        });
        if new_in_row {
            row.count += 1;
            if !c.is_final {
                row.live += 1;
            }
        }
        row.syns = c.syns;
        #[expect(clippy::cast_precision_loss, reason = "milliseconds, shown rounded")]
        let ms = c.syn_sent_ms as f64;
        row.syn_sent_ms = ms;
        row.last_seen = row.last_seen.max(t);
        row.first_seen = row.first_seen.min(t);
        row.changed_at = t;
        row.explanation.clone_from(&c.explanation);
        row.timeline.clone_from(&records);
        if !c.is_final {
            self.live.insert(
                c.flow,
                LiveFlow {
                    row: key,
                    records,
                    last_seen: t,
                },
            );
        }
    }

    fn apply_healthy(&mut self, h: &HealthyRecord) {
        let t = self.time_of(&h.time);
        self.advance(t);
        let key = RowKey::of_healthy(h);
        let row = self.rows.entry(key.clone()).or_insert_with(|| Row {
            key,
            count: 0,
            live: 0,
            syns: 1,
            syn_sent_ms: 0.0,
            first_seen: t,
            last_seen: t,
            explanation: String::new(),
            timeline: Vec::new(),
            changed_at: t,
        });
        #[expect(
            clippy::cast_precision_loss,
            reason = "a mean of counts, shown rounded"
        )]
        let (old, new) = (row.count as f64, h.established as f64);
        if old + new > 0.0 {
            row.syn_sent_ms = (row.syn_sent_ms * old + h.mean_syn_sent_ms * new) / (old + new);
        }
        row.count += h.established;
        row.last_seen = row.last_seen.max(t);
        row.changed_at = t;
        row.explanation = format!(
            "{} connects to {} answered on the first SYN (mean {:.1}ms): healthy.",
            row.count, h.dst, row.syn_sent_ms
        );
    }

    fn apply_stats(&mut self, s: StatsRecord) {
        let t = self.time_of(&s.time);
        self.advance(t);
        if let (Some(prev), Some(prev_t)) = (&self.stats, self.stats_time) {
            let secs = t.duration_since(prev_t).unwrap_or_default().as_secs_f64();
            if secs > 0.0 {
                #[expect(clippy::cast_precision_loss, reason = "a rate, shown rounded")]
                let delta = s.events.saturating_sub(prev.events) as f64;
                self.events_per_sec = Some(delta / secs);
            }
        }
        self.stats_time = Some(t);
        if s.kernel.is_some() {
            self.kernel.clone_from(&s.kernel);
        }
        self.stats = Some(s);
    }

    /// Moves the clock (live: wall time) and forgets live flows whose end never came.
    fn tick(&mut self, now: SystemTime) {
        self.advance(now);
        let horizon = self
            .now
            .checked_sub(LIVE_FLOW_TTL)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let rows = &mut self.rows;
        self.live.retain(|_, flow| {
            let keep = flow.last_seen >= horizon;
            if !keep && let Some(row) = rows.get_mut(&flow.row) {
                row.live = row.live.saturating_sub(1);
            }
            keep
        });
    }

    pub fn now(&self) -> SystemTime {
        self.now
    }

    pub fn uptime(&self) -> Duration {
        self.started.map_or(Duration::ZERO, |s| {
            self.now.duration_since(s).unwrap_or_default()
        })
    }

    pub fn stats(&self) -> Option<&StatsRecord> {
        self.stats.as_ref()
    }

    pub fn events_per_sec(&self) -> Option<f64> {
        self.events_per_sec
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.rows.values()
    }

    /// Flows per verdict, as the header shows them (`unanswered`: live now).
    pub fn verdict_counts(&self) -> Vec<(&'static str, u64)> {
        VERDICTS
            .iter()
            .map(|&v| {
                let n = self
                    .rows
                    .values()
                    .filter(|r| r.key.verdict == v)
                    .map(Row::shown_count)
                    .sum();
                (v, n)
            })
            .collect()
    }

    /// The Service a row belongs to: what was dialled, or what its backend was seen dialled as.
    pub fn service_of<'a>(&'a self, key: &'a RowKey) -> &'a str {
        key.service
            .as_deref()
            .or_else(|| self.services_of.get(&key.backend).map(String::as_str))
            .unwrap_or(&key.backend)
    }

    /// Per Service, per backend: flows by verdict and the failing share, worst Service first.
    pub fn services(&self) -> Vec<ServiceSummary> {
        let mut by_service: HashMap<&str, HashMap<&str, Tally>> = HashMap::new();
        for row in self.rows.values() {
            let tally = by_service
                .entry(self.service_of(&row.key))
                .or_default()
                .entry(&row.key.backend)
                .or_default();
            tally.add(&row.key.verdict, row.shown_count());
        }
        let mut services: Vec<ServiceSummary> = by_service
            .into_iter()
            .map(|(service, backends)| {
                let mut backends: Vec<(String, Tally)> = backends
                    .into_iter()
                    .map(|(b, t)| (b.to_string(), t))
                    .collect();
                backends.sort_by(|a, b| {
                    b.1.failing_share()
                        .total_cmp(&a.1.failing_share())
                        .then_with(|| a.0.cmp(&b.0))
                });
                let total = backends
                    .iter()
                    .fold(Tally::default(), |acc, (_, t)| acc.plus(t));
                ServiceSummary {
                    service: service.to_string(),
                    total,
                    backends,
                }
            })
            .collect();
        services.sort_by(|a, b| {
            b.total
                .failing_share()
                .total_cmp(&a.total.failing_share())
                .then_with(|| b.total.all().cmp(&a.total.all()))
                .then_with(|| a.service.cmp(&b.service))
        });
        services
    }
}

/// Flows by verdict class, for the Services view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub ok: u64,
    pub slow: u64,
    /// unanswered (live), abandoned, timed out: the SYN went nowhere.
    pub black_hole: u64,
    pub refused: u64,
    pub unreachable: u64,
    pub failed: u64,
}

impl Tally {
    fn add(&mut self, verdict: &str, n: u64) {
        let slot = match verdict {
            "established" => &mut self.ok,
            "slow" => &mut self.slow,
            "unanswered" | "abandoned" | "timed_out" => &mut self.black_hole,
            "refused" => &mut self.refused,
            "unreachable" => &mut self.unreachable,
            _ => &mut self.failed,
        };
        *slot += n;
    }

    fn plus(self, o: &Tally) -> Tally {
        Tally {
            ok: self.ok + o.ok,
            slow: self.slow + o.slow,
            black_hole: self.black_hole + o.black_hole,
            refused: self.refused + o.refused,
            unreachable: self.unreachable + o.unreachable,
            failed: self.failed + o.failed,
        }
    }

    pub fn failing(&self) -> u64 {
        self.black_hole + self.refused + self.unreachable + self.failed
    }

    pub fn all(&self) -> u64 {
        self.ok + self.slow + self.failing()
    }

    /// 0.0..=1.0; 0 when nothing was seen.
    pub fn failing_share(&self) -> f64 {
        match self.all() {
            0 => 0.0,
            #[expect(clippy::cast_precision_loss, reason = "a share, shown as a percentage")]
            all => self.failing() as f64 / all as f64,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServiceSummary {
    pub service: String,
    pub total: Tally,
    pub backends: Vec<(String, Tally)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum View {
    #[default]
    Flows,
    Services,
    Dns,
}

impl View {
    pub const ALL: [View; 3] = [View::Flows, View::Services, View::Dns];

    pub fn title(self) -> &'static str {
        match self {
            View::Flows => "Flows",
            View::Services => "Services",
            View::Dns => "DNS",
        }
    }

    fn next(self) -> View {
        match self {
            View::Flows => View::Services,
            View::Services => View::Dns,
            View::Dns => View::Flows,
        }
    }
}

/// Which verdicts the flow table shows (`v` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VerdictFilter {
    /// Everything but `established`: the flows that need attention.
    #[default]
    Attention,
    Only(&'static str),
    All,
}

impl VerdictFilter {
    fn next(self) -> VerdictFilter {
        match self {
            VerdictFilter::Attention => VerdictFilter::Only(VERDICTS[0]),
            VerdictFilter::Only(v) => match VERDICTS.iter().position(|&x| x == v) {
                Some(i) if i + 1 < VERDICTS.len() => VerdictFilter::Only(VERDICTS[i + 1]),
                _ => VerdictFilter::All,
            },
            VerdictFilter::All => VerdictFilter::Attention,
        }
    }

    fn matches(self, verdict: &str) -> bool {
        match self {
            VerdictFilter::Attention => verdict != "established",
            VerdictFilter::Only(v) => verdict == v,
            VerdictFilter::All => true,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            VerdictFilter::Attention => "needs attention",
            VerdictFilter::Only(v) => v,
            VerdictFilter::All => "all",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// Worst verdict first, then most flows: the ranking of the issue.
    #[default]
    Severity,
    Count,
    Recent,
    Destination,
}

impl Sort {
    fn next(self) -> Sort {
        match self {
            Sort::Severity => Sort::Count,
            Sort::Count => Sort::Recent,
            Sort::Recent => Sort::Destination,
            Sort::Destination => Sort::Severity,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Sort::Severity => "severity",
            Sort::Count => "count",
            Sort::Recent => "recent",
            Sort::Destination => "destination",
        }
    }
}

/// What the user can ask for; `keys.rs` maps keys to these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    StartFilter,
    FilterChar(char),
    FilterBackspace,
    FilterDone,
    FilterCancel,
    CycleVerdict,
    CycleSort,
    TogglePause,
    NextView,
    ToggleDetail,
    Copy,
    ToggleHelp,
    /// Esc: close what is open (help, detail, a filter).
    Close,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
}

/// What an action asks the app to do outside the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    None,
    Quit,
    /// Copy this JSON (the selected row) to the clipboard and a file.
    Copy(String),
}

/// The whole TUI state: the model and how the user looks at it.
#[derive(Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent toggles of the screen, not a state machine"
)]
pub struct State {
    /// Where records come from: `node NAME` live, `replay FILE`.
    pub origin: String,
    model: Model,
    /// The model as it was when the user paused; rendered instead of `model` until resumed.
    frozen: Option<Box<Model>>,
    pub view: View,
    /// Text filter in force (case-insensitive substring of source, Service, backend, verdict).
    pub filter: String,
    /// The filter being typed after `/`, if any.
    pub editing: Option<String>,
    pub verdicts: VerdictFilter,
    pub sort: Sort,
    selected: Option<RowKey>,
    pub detail: bool,
    pub help: bool,
    /// One line for the footer: what the last action did.
    pub status: Option<String>,
    /// Records the TUI could not take because its channel was full (live only).
    pub channel_dropped: u64,
    /// The record source ended (replay finished, tracing stopped).
    pub source_ended: bool,
    /// Records come from a file, not from this node now.
    pub replay: bool,
    /// Rows per page, learned from the last draw, for PageUp/PageDown.
    pub page: usize,
}

impl State {
    /// `started`: when live tracing started; `None` for a replay, whose clock starts at its first
    /// record.
    pub fn new(origin: impl Into<String>, started: Option<SystemTime>) -> State {
        State {
            origin: origin.into(),
            model: Model::new(started),
            frozen: None,
            view: View::default(),
            filter: String::new(),
            editing: None,
            verdicts: VerdictFilter::default(),
            sort: Sort::default(),
            selected: None,
            detail: false,
            help: false,
            status: None,
            channel_dropped: 0,
            source_ended: false,
            replay: started.is_none(),
            page: 10,
        }
    }

    pub fn apply(&mut self, record: Record) {
        self.model.apply(record);
    }

    pub fn tick(&mut self, now: SystemTime) {
        self.model.tick(now);
    }

    /// The model on screen: frozen while paused.
    pub fn shown(&self) -> &Model {
        self.frozen.as_deref().unwrap_or(&self.model)
    }

    pub fn paused(&self) -> bool {
        self.frozen.is_some()
    }

    /// Records received since the pause (they are applied, only not shown yet).
    pub fn behind(&self) -> u64 {
        self.frozen
            .as_ref()
            .map_or(0, |f| self.model.records - f.records)
    }

    /// Dropped anywhere: by the kernel side and pipeline (from stats) and by the TUI's channel.
    pub fn dropped_total(&self) -> u64 {
        self.shown().stats.as_ref().map_or(0, |s| s.dropped.total()) + self.channel_dropped
    }

    /// The flow table's rows: filtered, ranked, active rows above faded ones.
    pub fn visible_rows(&self) -> Vec<&Row> {
        let model = self.shown();
        let now = model.now;
        let needle = self.filter.to_lowercase();
        let mut rows: Vec<&Row> = model
            .rows
            .values()
            .filter(|r| self.verdicts.matches(&r.key.verdict))
            .filter(|r| needle.is_empty() || row_text(model, r).contains(&needle))
            .collect();
        let faded = |r: &Row| r.mark(now) == Mark::Faded;
        match self.sort {
            Sort::Severity => rows.sort_by_key(|r| {
                (
                    faded(r),
                    Reverse(severity(&r.key.verdict)),
                    Reverse(r.shown_count()),
                    &r.key,
                )
            }),
            Sort::Count => rows.sort_by_key(|r| (faded(r), Reverse(r.shown_count()), &r.key)),
            Sort::Recent => rows.sort_by_key(|r| (faded(r), Reverse(r.last_seen), &r.key)),
            Sort::Destination => rows.sort_by_key(|r| {
                (
                    faded(r),
                    model.service_of(&r.key),
                    &r.key.backend,
                    Reverse(severity(&r.key.verdict)),
                    &r.key,
                )
            }),
        }
        rows
    }

    /// Index of the selected row among `rows` (the first row if the selection is gone).
    pub fn selected_index(&self, rows: &[&Row]) -> usize {
        self.selected
            .as_ref()
            .and_then(|k| rows.iter().position(|r| r.key == *k))
            .unwrap_or(0)
    }

    pub fn selected_row(&self) -> Option<&Row> {
        let rows = self.visible_rows();
        rows.get(self.selected_index(&rows)).copied()
    }

    fn move_selection(&mut self, delta: isize) {
        let rows = self.visible_rows();
        if rows.is_empty() {
            return;
        }
        let last = rows.len() - 1;
        let at = self.selected_index(&rows);
        let to = at.saturating_add_signed(delta).min(last);
        self.selected = Some(rows[to].key.clone());
    }

    /// Applies one user action; returns what the app must do outside the model.
    pub fn act(&mut self, action: Action) -> Effect {
        self.status = None;
        let page = isize::try_from(self.page.max(1)).unwrap_or(10);
        match action {
            Action::Quit => return Effect::Quit,
            Action::StartFilter => self.editing = Some(self.filter.clone()),
            Action::FilterChar(c) => {
                if let Some(text) = &mut self.editing {
                    text.push(c);
                    // Filter as the user types: the table answers at once.
                    self.filter.clone_from(text);
                }
            }
            Action::FilterBackspace => {
                if let Some(text) = &mut self.editing {
                    text.pop();
                    self.filter.clone_from(text);
                }
            }
            Action::FilterDone => self.editing = None,
            Action::FilterCancel => {
                self.editing = None;
                self.filter.clear();
            }
            Action::CycleVerdict => self.verdicts = self.verdicts.next(),
            Action::CycleSort => self.sort = self.sort.next(),
            Action::TogglePause => {
                self.frozen = match self.frozen.take() {
                    Some(_) => None,
                    None => Some(Box::new(self.model.clone())),
                };
            }
            Action::NextView => {
                self.view = self.view.next();
                self.detail = false;
            }
            Action::ToggleDetail => {
                self.detail =
                    self.view == View::Flows && !self.detail && self.selected_row().is_some();
            }
            Action::Copy => {
                return match self.selected_row().map(serde_json::to_string) {
                    Some(Ok(json)) => Effect::Copy(json),
                    Some(Err(e)) => {
                        self.status = Some(format!("cannot copy the row: {e}"));
                        Effect::None
                    }
                    None => {
                        self.status = Some("no row to copy".into());
                        Effect::None
                    }
                };
            }
            Action::ToggleHelp => self.help = !self.help,
            Action::Close => {
                if self.help {
                    self.help = false;
                } else if self.detail {
                    self.detail = false;
                } else if !self.filter.is_empty() {
                    self.filter.clear();
                }
            }
            Action::Up => self.move_selection(-1),
            Action::Down => self.move_selection(1),
            Action::PageUp => self.move_selection(-page),
            Action::PageDown => self.move_selection(page),
            Action::Top => self.move_selection(isize::MIN),
            Action::Bottom => self.move_selection(isize::MAX),
        }
        Effect::None
    }
}

/// What the text filter searches, lowercased.
fn row_text(model: &Model, r: &Row) -> String {
    format!(
        "{} {} {} {} {}",
        r.key.source_label(),
        model.service_of(&r.key),
        r.key.backend,
        r.key.verdict_label(),
        r.explanation
    )
    .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any fixed instant: the tests only compare times with each other.
    const T0: u64 = 1_800_000_123;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + secs)
    }

    fn connect(flow: &str, secs: u64, verdict: &str, is_final: bool, dst: &str) -> Record {
        Record::Connect(ConnectRecord {
            time: crate::clock::rfc3339(at(secs)),
            verdict: verdict.into(),
            cause: None,
            is_final,
            src: "10.0.0.1:40000".into(),
            dst: dst.into(),
            dialed: None,
            service: None,
            backend: None,
            syns: 2,
            syn_sent_ms: 1000,
            errno: None,
            pid: 1,
            tid: 1,
            comm: "curl".into(),
            cgroup_id: 1,
            netns: "ns".into(),
            netns_inode: 1,
            flow: flow.into(),
            explanation: format!("{verdict} to {dst}"),
            identity: crate::identity::Identity::default(),
            dns: false,
        })
    }

    fn verdicts(state: &State) -> Vec<(String, u64)> {
        state
            .visible_rows()
            .iter()
            .map(|r| (r.key.verdict_label(), r.shown_count()))
            .collect()
    }

    #[test]
    fn severity_knows_every_verdict_name_the_pipeline_writes() {
        for v in [
            Verdict::Established,
            Verdict::Slow,
            Verdict::Unanswered,
            Verdict::Refused { by: RefusedBy::Rst },
            Verdict::Unreachable {
                kind: Unreachable::Host,
            },
            Verdict::TimedOut,
            Verdict::Abandoned,
            Verdict::Failed {
                errno: libc::EACCES,
            },
        ] {
            assert_eq!(severity(v.name()), v.severity(), "{v}");
        }
    }

    #[test]
    fn ranks_black_holes_above_refusals_even_when_refusals_are_more() {
        let mut s = State::new("test", None);
        for i in 0..5 {
            s.apply(connect(&format!("r{i}"), i, "refused", true, "10.0.0.9:80"));
        }
        s.apply(connect("s1", 1, "slow", true, "10.0.0.8:80"));
        s.apply(connect("a1", 2, "abandoned", true, "10.0.0.7:80"));
        s.apply(connect("a2", 3, "abandoned", true, "10.0.0.7:80"));
        assert_eq!(
            verdicts(&s),
            [
                ("abandoned".into(), 2),
                ("refused".into(), 5),
                ("slow".into(), 1)
            ]
        );
        s.act(Action::CycleSort);
        assert_eq!(verdicts(&s)[0], ("refused".into(), 5), "sort by count");
    }

    #[test]
    fn a_flow_moves_from_unanswered_to_its_end_and_its_live_row_fades() {
        let mut s = State::new("test", None);
        s.apply(connect("f", 0, "unanswered", false, "10.0.0.7:80"));
        s.apply(connect("f", 1, "unanswered", false, "10.0.0.7:80"));
        assert_eq!(
            verdicts(&s),
            [("unanswered".into(), 1)],
            "one flow, two updates"
        );
        s.apply(connect("f", 3, "abandoned", true, "10.0.0.7:80"));
        let rows = s.visible_rows();
        assert_eq!(rows[0].key.verdict, "abandoned");
        assert_eq!(rows[0].timeline.len(), 3, "live updates then the end");
        let now = s.shown().now();
        assert_eq!(rows[0].mark(now), Mark::New);
        assert_eq!(rows[1].key.verdict, "unanswered");
        assert_eq!(rows[1].mark(now), Mark::Faded, "resolved, still shown");
    }

    #[test]
    fn rows_fade_when_not_seen_for_a_while_and_sink_below_active_ones() {
        let mut s = State::new("test", None);
        s.apply(connect("a", 0, "abandoned", true, "10.0.0.7:80"));
        s.apply(connect("r", 100, "refused", true, "10.0.0.9:80"));
        let rows = s.visible_rows();
        assert_eq!(rows[0].key.verdict, "refused");
        assert_eq!(rows[1].mark(s.shown().now()), Mark::Faded);
        assert_eq!(rows[0].mark(s.shown().now()), Mark::New);
    }

    #[test]
    fn text_and_verdict_filters() {
        let mut s = State::new("test", None);
        s.apply(connect("a", 0, "abandoned", true, "10.0.0.7:80"));
        s.apply(connect("r", 1, "refused", true, "10.0.0.9:443"));
        s.act(Action::StartFilter);
        for c in ":443".chars() {
            s.act(Action::FilterChar(c));
        }
        s.act(Action::FilterDone);
        assert_eq!(verdicts(&s), [("refused".into(), 1)]);
        s.act(Action::Close);
        s.act(Action::CycleVerdict);
        assert_eq!(s.verdicts, VerdictFilter::Only("unanswered"));
        assert!(verdicts(&s).is_empty());
        s.act(Action::CycleVerdict);
        assert_eq!(verdicts(&s), [("abandoned".into(), 1)]);
    }

    #[test]
    fn pause_freezes_the_screen_without_losing_records() {
        let mut s = State::new("test", None);
        s.apply(connect("a", 0, "abandoned", true, "10.0.0.7:80"));
        s.act(Action::TogglePause);
        s.apply(connect("b", 1, "abandoned", true, "10.0.0.7:80"));
        assert_eq!(verdicts(&s), [("abandoned".into(), 1)]);
        assert_eq!(s.behind(), 1);
        s.act(Action::TogglePause);
        assert_eq!(verdicts(&s), [("abandoned".into(), 2)]);
    }

    #[test]
    fn live_flows_without_an_end_are_forgotten() {
        let mut s = State::new("test", None);
        s.apply(connect("f", 0, "unanswered", false, "10.0.0.7:80"));
        s.tick(at(0) + LIVE_FLOW_TTL * 2);
        assert_eq!(s.shown().live.len(), 0);
        assert_eq!(verdicts(&s), [("unanswered".into(), 0)]);
    }
}
