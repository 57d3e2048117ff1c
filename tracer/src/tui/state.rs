//! The TUI's state: the incident model (`incidents/`) and how the user looks at it (view, filters,
//! sort, selection, pause), and the Cluster view's own state when there is one
//! (`cluster_state.rs`). Never imports widgets: `view/` renders `&State`.
use std::{cmp::Reverse, time::SystemTime};

use super::cluster_state::{ClusterPane, ClusterRow, ClusterUpdate};
use crate::{
    incidents::{
        Model,
        row::{Mark, Row, RowKey},
    },
    record::Record,
    replay::Skipped,
    verdict::VerdictKind,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum View {
    #[default]
    Flows,
    Services,
    Dns,
    /// Every node, from Prometheus (`--prometheus`).
    Cluster,
}

impl View {
    pub fn title(self) -> &'static str {
        match self {
            View::Flows => "Flows",
            View::Services => "Services",
            View::Dns => "DNS",
            View::Cluster => "Cluster",
        }
    }
}

/// Which verdicts the flow table shows (`v` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VerdictFilter {
    /// Everything but `established`: the flows that need attention.
    #[default]
    Attention,
    Only(VerdictKind),
    All,
}

impl VerdictFilter {
    fn next(self) -> VerdictFilter {
        match self {
            VerdictFilter::Attention => VerdictFilter::Only(VerdictKind::BY_SEVERITY[0]),
            VerdictFilter::Only(v) => match VerdictKind::BY_SEVERITY.iter().position(|&x| x == v) {
                Some(i) if i + 1 < VerdictKind::BY_SEVERITY.len() => {
                    VerdictFilter::Only(VerdictKind::BY_SEVERITY[i + 1])
                }
                _ => VerdictFilter::All,
            },
            VerdictFilter::All => VerdictFilter::Attention,
        }
    }

    fn matches(self, verdict: VerdictKind) -> bool {
        match self {
            VerdictFilter::Attention => verdict != VerdictKind::Established,
            VerdictFilter::Only(v) => verdict == v,
            VerdictFilter::All => true,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            VerdictFilter::Attention => "needs attention",
            VerdictFilter::Only(v) => v.name(),
            VerdictFilter::All => "all",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    /// Worst verdict first, then most flows.
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
    /// Copy this `PromQL` (the Cluster view's selected row) to the clipboard and a file.
    CopyPromql(String),
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
    /// Records of the file that were not handed on (unknown kinds, a cut last line): said in the
    /// header for as long as the screen is up, not only in a status a key clears.
    pub skipped: Skipped,
    /// Rows per page, learned from the last draw, for PageUp/PageDown.
    pub page: usize,
    /// This node is traced (not with `--cluster-only`): the Flows, Services and DNS views.
    pub local: bool,
    /// The Cluster view (`--prometheus`).
    pub cluster: Option<ClusterPane>,
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
            skipped: Skipped::default(),
            page: 10,
            local: true,
            cluster: None,
        }
    }

    /// With the Cluster view as well.
    #[must_use]
    pub fn with_cluster(mut self, pane: ClusterPane) -> State {
        self.cluster = Some(pane);
        self
    }

    /// Only the Cluster view: this node is not traced (`--cluster-only`).
    pub fn cluster_only(origin: impl Into<String>, pane: ClusterPane) -> State {
        let mut state = State::new(origin, Some(SystemTime::now())).with_cluster(pane);
        state.local = false;
        state.view = View::Cluster;
        state
    }

    /// The views there are, in Tab order.
    pub fn views(&self) -> Vec<View> {
        let mut views = if self.local {
            vec![View::Flows, View::Services, View::Dns]
        } else {
            Vec::new()
        };
        if self.cluster.is_some() {
            views.push(View::Cluster);
        }
        views
    }

    pub fn apply(&mut self, record: Record) {
        self.model.apply(record);
    }

    /// What the Cluster view's poller says.
    pub fn apply_cluster(&mut self, update: ClusterUpdate) {
        if let Some(pane) = &mut self.cluster {
            pane.apply(update);
        }
    }

    pub fn tick(&mut self, now: SystemTime) {
        self.model.tick(now);
        if let Some(pane) = &mut self.cluster {
            pane.now = now;
        }
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
            .map_or(0, |f| self.model.records() - f.records())
    }

    /// Dropped anywhere: by the kernel side and pipeline (from stats) and by the TUI's channel.
    pub fn dropped_total(&self) -> u64 {
        self.shown().stats().map_or(0, |s| s.dropped.total()) + self.channel_dropped
    }

    /// The flow table's rows: filtered, ranked, active rows above faded ones.
    pub fn visible_rows(&self) -> Vec<&Row> {
        let model = self.shown();
        let now = model.now();
        let needle = self.filter.to_lowercase();
        let mut rows: Vec<&Row> = model
            .rows()
            .filter(|r| self.verdicts.matches(r.key.verdict))
            .filter(|r| needle.is_empty() || row_text(model, r).contains(&needle))
            .collect();
        let faded = |r: &Row| r.mark(now) == Mark::Faded;
        match self.sort {
            Sort::Severity => rows.sort_by_key(|r| {
                (
                    faded(r),
                    Reverse(r.key.verdict.severity()),
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
                    r.key.backend,
                    Reverse(r.key.verdict.severity()),
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
        if self.view == View::Cluster
            && let Some(effect) = self.act_on_cluster(action)
        {
            return effect;
        }
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
                let paused = self.frozen.is_some();
                if let Some(pane) = &mut self.cluster {
                    pane.set_paused(paused);
                }
            }
            Action::NextView => {
                let views = self.views();
                let at = views.iter().position(|&v| v == self.view).unwrap_or(0);
                self.view = views
                    .get((at + 1) % views.len().max(1))
                    .copied()
                    .unwrap_or_default();
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

impl State {
    /// The keys that mean something else in the Cluster view: moving, the detail, copying, Esc.
    /// `None`: the action is the same as elsewhere.
    fn act_on_cluster(&mut self, action: Action) -> Option<Effect> {
        let screen = isize::try_from(self.page.max(1)).unwrap_or(10);
        let filter = self.filter.clone();
        let pane = self.cluster.as_mut()?;
        let delta = match action {
            Action::Up => -1,
            Action::Down => 1,
            Action::PageUp => -screen,
            Action::PageDown => screen,
            Action::Top => isize::MIN,
            Action::Bottom => isize::MAX,
            Action::ToggleDetail => {
                pane.detail = !pane.detail && !pane.visible_rows(&filter).is_empty();
                return Some(Effect::None);
            }
            Action::Copy => {
                let rows = pane.visible_rows(&filter);
                let promql = pane.selected_row(&rows).map(ClusterRow::promql_text);
                if let Some(text) = promql {
                    return Some(Effect::CopyPromql(text));
                }
                self.status = Some("no row to copy".into());
                return Some(Effect::None);
            }
            Action::Close if !self.help && pane.detail => {
                pane.detail = false;
                return Some(Effect::None);
            }
            _ => return None,
        };
        pane.move_selection(&filter, delta);
        Some(Effect::None)
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
    use std::time::Duration;

    use super::*;
    use crate::{
        clock::Timestamp,
        incidents::LIVE_FLOW_TTL,
        record::ConnectRecord,
        verdict::{RefusedBy, Verdict},
    };

    const REFUSED: Verdict = Verdict::Refused { by: RefusedBy::Rst };

    /// Any fixed instant: the tests only compare times with each other.
    const T0: u64 = 1_800_000_123;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + secs)
    }

    fn connect(flow: &str, secs: u64, verdict: Verdict, is_final: bool, dst: &str) -> Record {
        Record::Connect(ConnectRecord {
            time: Timestamp(at(secs)),
            verdict,
            is_final,
            src: "10.0.0.1:40000".parse().expect("address"),
            dst: dst.parse().expect("address"),
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
            explanation: format!("{} to {dst}", verdict.name()),
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
    fn ranks_black_holes_above_refusals_even_when_refusals_are_more() {
        let mut s = State::new("test", None);
        for i in 0..5 {
            s.apply(connect(&format!("r{i}"), i, REFUSED, true, "10.0.0.9:80"));
        }
        s.apply(connect("s1", 1, Verdict::Slow, true, "10.0.0.8:80"));
        s.apply(connect("a1", 2, Verdict::Abandoned, true, "10.0.0.7:80"));
        s.apply(connect("a2", 3, Verdict::Abandoned, true, "10.0.0.7:80"));
        assert_eq!(
            verdicts(&s),
            [
                ("abandoned".into(), 2),
                ("refused rst".into(), 5),
                ("slow".into(), 1)
            ]
        );
        s.act(Action::CycleSort);
        assert_eq!(verdicts(&s)[0], ("refused rst".into(), 5), "sort by count");
    }

    #[test]
    fn a_flow_moves_from_unanswered_to_its_end_and_its_live_row_fades() {
        let mut s = State::new("test", None);
        s.apply(connect("f", 0, Verdict::Unanswered, false, "10.0.0.7:80"));
        s.apply(connect("f", 1, Verdict::Unanswered, false, "10.0.0.7:80"));
        assert_eq!(
            verdicts(&s),
            [("unanswered".into(), 1)],
            "one flow, two updates"
        );
        s.apply(connect("f", 3, Verdict::Abandoned, true, "10.0.0.7:80"));
        let rows = s.visible_rows();
        assert_eq!(rows[0].key.verdict, VerdictKind::Abandoned);
        assert_eq!(rows[0].timeline.len(), 3, "live updates then the end");
        let now = s.shown().now();
        assert_eq!(rows[0].mark(now), Mark::New);
        assert_eq!(rows[1].key.verdict, VerdictKind::Unanswered);
        assert_eq!(rows[1].mark(now), Mark::Faded, "resolved, still shown");
    }

    #[test]
    fn rows_fade_when_not_seen_for_a_while_and_sink_below_active_ones() {
        let mut s = State::new("test", None);
        s.apply(connect("a", 0, Verdict::Abandoned, true, "10.0.0.7:80"));
        s.apply(connect("r", 100, REFUSED, true, "10.0.0.9:80"));
        let rows = s.visible_rows();
        assert_eq!(rows[0].key.verdict, VerdictKind::Refused);
        assert_eq!(rows[1].mark(s.shown().now()), Mark::Faded);
        assert_eq!(rows[0].mark(s.shown().now()), Mark::New);
    }

    #[test]
    fn text_and_verdict_filters() {
        let mut s = State::new("test", None);
        s.apply(connect("a", 0, Verdict::Abandoned, true, "10.0.0.7:80"));
        s.apply(connect("r", 1, REFUSED, true, "10.0.0.9:443"));
        s.act(Action::StartFilter);
        for c in ":443".chars() {
            s.act(Action::FilterChar(c));
        }
        s.act(Action::FilterDone);
        assert_eq!(verdicts(&s), [("refused rst".into(), 1)]);
        s.act(Action::Close);
        s.act(Action::CycleVerdict);
        assert_eq!(s.verdicts, VerdictFilter::Only(VerdictKind::Unanswered));
        assert!(verdicts(&s).is_empty());
        s.act(Action::CycleVerdict);
        assert_eq!(verdicts(&s), [("abandoned".into(), 1)]);
    }

    #[test]
    fn pause_freezes_the_screen_without_losing_records() {
        let mut s = State::new("test", None);
        s.apply(connect("a", 0, Verdict::Abandoned, true, "10.0.0.7:80"));
        s.act(Action::TogglePause);
        s.apply(connect("b", 1, Verdict::Abandoned, true, "10.0.0.7:80"));
        assert_eq!(verdicts(&s), [("abandoned".into(), 1)]);
        assert_eq!(s.behind(), 1);
        s.act(Action::TogglePause);
        assert_eq!(verdicts(&s), [("abandoned".into(), 2)]);
    }

    #[test]
    fn live_flows_without_an_end_are_forgotten() {
        let mut s = State::new("test", None);
        s.apply(connect("f", 0, Verdict::Unanswered, false, "10.0.0.7:80"));
        s.tick(at(0) + LIVE_FLOW_TTL * 2);
        assert_eq!(s.shown().live_flows(), 0);
        assert_eq!(verdicts(&s), [("unanswered".into(), 0)]);
    }
}
