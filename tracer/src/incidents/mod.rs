//! The incident model: what the records say, ranked. Built from `Record`s only, so live tracing,
//! `replay` and `summary` share it and tests drive it without a kernel or a terminal; the TUI's
//! `tui/state.rs` adds how a person looks at it.
//!
//! One row per (source workload, destination, verdict) (`row.rs`). A connect attempt (one `flow`
//! id) sits in exactly one row at a time, the row of its latest verdict: its live `unanswered`
//! updates count it as live there, and its final record moves it to the row of its end.
//!
//! Time is the records' own `time`, not the wall clock, so a replay shows the ages it had when it
//! was recorded and snapshots do not depend on when the tests run. Live, the app moves the clock
//! forward on every tick (`Model::tick`).
pub mod dns;
pub mod row;
pub mod tally;

use std::{
    collections::{BTreeMap, HashMap},
    net::SocketAddr,
    time::{Duration, SystemTime},
};

use self::{
    dns::DnsModel,
    row::{Row, RowKey},
    tally::{ServiceSummary, Tally},
};
use crate::{
    record::{
        ConnectRecord, HealthyRecord, Record, ReplyLostRecord, ServiceRecord, StaleDatapathRecord,
        StaleNatRecord, StatsRecord,
    },
    verdict::{ReplyOutcome, VerdictKind},
};

/// A live flow whose end never arrives is forgotten after this long, as the pipeline does.
pub const LIVE_FLOW_TTL: Duration = Duration::from_mins(5);
/// Records kept per flow timeline: a flow sends one record per SYN retransmit and one at its end.
const TIMELINE_MAX: usize = 16;

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
    services_of: HashMap<SocketAddr, SocketAddr>,
    stats: Option<StatsRecord>,
    events_per_sec: Option<f64>,
    stats_time: Option<SystemTime>,
    started: Option<SystemTime>,
    now: SystemTime,
    records: u64,
    dns: DnsModel,
    /// Where names come from (`file`, `api`) and how fresh they are, from the latest record.
    identity: Option<(String, u64, bool)>,
    /// The kernel and its capabilities, from the first stats record that carried them.
    kernel: Option<crate::record::KernelInfo>,
    /// The latest conntrack view of each Service (`service` records).
    conntrack_services: BTreeMap<SocketAddr, ServiceRecord>,
    /// Conntrack entries seen stuck in `SYN_SENT [UNREPLIED]` (`stale_nat`), by their tuple.
    stale_nat: BTreeMap<(SocketAddr, SocketAddr), StaleNatRecord>,
    /// Server sockets whose replies were lost (`reply_lost`), the latest record of each, by flow.
    replies_lost: BTreeMap<String, ReplyLostRecord>,
    /// The node's Service rules that no EndpointSlice backs (`stale_datapath`), until reported gone.
    stale_datapath: BTreeMap<DatapathKey, StaleDatapathRecord>,
}

/// One datapath entry: where it lives, what it translates.
type DatapathKey = (String, String, SocketAddr, SocketAddr);

impl Model {
    pub fn new(started: Option<SystemTime>) -> Model {
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
            dns: DnsModel::default(),
            identity: None,
            kernel: None,
            conntrack_services: BTreeMap::new(),
            stale_nat: BTreeMap::new(),
            replies_lost: BTreeMap::new(),
            stale_datapath: BTreeMap::new(),
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
                self.advance(d.time.0);
                self.dns.query(&d);
            }
            Record::DnsHealthy(h) => self.dns.healthy(&h),
            Record::DnsStuckSocket(s) => {
                self.advance(s.time.0);
                self.dns.stuck_socket(s);
            }
            // The Services view aggregates connect records itself, and shows beside them what the
            // node's conntrack says: per Service, and the entries stuck unreplied.
            Record::Service(s) => {
                self.conntrack_services.insert(s.service, s);
            }
            Record::StaleNat(n) => {
                self.stale_nat.insert((n.original.src, n.original.dst), n);
            }
            Record::ReplyLost(r) => {
                self.advance(r.time.0);
                self.replies_lost.insert(r.flow.clone(), r);
            }
            Record::StaleDatapath(d) => {
                self.advance(d.time.0);
                let key = (
                    d.source.name().to_string(),
                    d.location.clone(),
                    d.service,
                    d.backend,
                );
                if d.gone {
                    self.stale_datapath.remove(&key);
                } else {
                    self.stale_datapath.insert(key, d);
                }
            }
        }
    }

    pub fn dns(&self) -> &DnsModel {
        &self.dns
    }

    /// What the node's conntrack says per Service (its summary line), worst first.
    pub fn conntrack_services(&self) -> Vec<&ServiceRecord> {
        let mut services: Vec<_> = self.conntrack_services.values().collect();
        services.sort_by(|a, b| b.failing_share.total_cmp(&a.failing_share));
        services
    }

    /// Conntrack entries stuck unreplied, oldest first.
    pub fn stale_nat(&self) -> Vec<&StaleNatRecord> {
        let mut entries: Vec<_> = self.stale_nat.values().collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.age_s));
        entries
    }

    /// Server sockets whose replies were lost, those not recovered first, then the most retransmits.
    pub fn replies_lost(&self) -> Vec<&ReplyLostRecord> {
        let mut lost: Vec<_> = self.replies_lost.values().collect();
        lost.sort_by_key(|r| {
            (
                r.outcome == ReplyOutcome::Recovered,
                std::cmp::Reverse(r.retransmits),
                r.local,
                r.peer,
            )
        });
        lost
    }

    /// The node's Service rules no EndpointSlice backs, by Service then backend.
    pub fn stale_datapath(&self) -> Vec<&StaleDatapathRecord> {
        let mut entries: Vec<_> = self.stale_datapath.values().collect();
        entries.sort_by_key(|d| (d.service, d.backend, d.source, d.location.as_str()));
        entries
    }

    /// Capabilities the running kernel does not give in full (empty when all are full or unknown).
    pub fn degraded_capabilities(&self) -> Vec<&str> {
        self.kernel
            .as_ref()
            .map(crate::record::KernelInfo::degraded)
            .unwrap_or_default()
    }

    /// The hook tier of each side, when the stats said (recordings of older tracers do not).
    pub fn hook_tiers(&self) -> Option<&crate::record::HookTiers> {
        self.kernel
            .as_ref()
            .map(|k| &k.hooks)
            .filter(|h| h.tcp.tier.is_some())
    }

    /// Source of names, their age in seconds, and whether they are stale.
    pub fn identity(&self) -> Option<&(String, u64, bool)> {
        self.identity.as_ref()
    }

    fn apply_connect(&mut self, c: ConnectRecord) {
        let t = c.time.0;
        self.advance(t);
        if let (Some(source), Some(age)) = (&c.identity.identity_source, c.identity.identity_age_s)
        {
            self.identity = Some((source.clone(), age, c.identity.identity_stale));
        }
        let key = RowKey::of_connect(&c);
        if let Some(service) = key.service {
            self.services_of.insert(key.backend, service);
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
        let row = self
            .rows
            .entry(key.clone())
            .or_insert_with(|| Row::new(key.clone(), t));
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
        let t = h.time.0;
        self.advance(t);
        let key = RowKey::of_healthy(h);
        let row = self.rows.entry(key.clone()).or_insert_with(|| Row {
            syns: 1,
            ..Row::new(key, t)
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
        let t = s.time.0;
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
    pub fn tick(&mut self, now: SystemTime) {
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

    /// Attempts open now (no end seen yet).
    pub fn live_flows(&self) -> usize {
        self.live.len()
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.rows.values()
    }

    /// Flows per verdict, as the header shows them (`unanswered`: live now).
    pub fn verdict_counts(&self) -> Vec<(VerdictKind, u64)> {
        VerdictKind::BY_SEVERITY
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
    pub fn service_of(&self, key: &RowKey) -> SocketAddr {
        key.service
            .or_else(|| self.services_of.get(&key.backend).copied())
            .unwrap_or(key.backend)
    }

    /// Per Service, per backend: flows by verdict and the failing share, worst Service first.
    pub fn services(&self) -> Vec<ServiceSummary> {
        let mut by_service: HashMap<SocketAddr, HashMap<SocketAddr, Tally>> = HashMap::new();
        for row in self.rows.values() {
            let tally = by_service
                .entry(self.service_of(&row.key))
                .or_default()
                .entry(row.key.backend)
                .or_default();
            tally.add(row.key.verdict, row.shown_count());
        }
        let mut services: Vec<ServiceSummary> = by_service
            .into_iter()
            .map(|(service, backends)| {
                let mut backends: Vec<(SocketAddr, Tally)> = backends.into_iter().collect();
                backends.sort_by(|a, b| {
                    b.1.failing_share()
                        .total_cmp(&a.1.failing_share())
                        .then_with(|| a.0.cmp(&b.0))
                });
                let total = backends
                    .iter()
                    .fold(Tally::default(), |acc, (_, t)| acc.plus(t));
                ServiceSummary {
                    service,
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
