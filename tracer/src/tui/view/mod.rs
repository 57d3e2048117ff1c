//! Widgets: render `&State`, decide nothing. Laid out for 80x24 first; wider terminals get wider
//! columns and a longer detail pane, never a different screen.
//!
//! ```text
//!  header: origin, uptime, events/s, dropped (always there, red when non-zero), records of a
//!          replayed file skipped (when any), live/paused
//!  verdict counts
//!  cluster: the Prometheus behind the Cluster view: fresh, slow or unreachable (`--prometheus`)
//!  tabs: Flows | Services | DNS | Cluster  filter, verdict filter, sort
//!  body: the flow table (with the detail pane below it), the Services, DNS or Cluster view
//!  footer: the text filter being typed, what the last action did, or the keys
//! ```
use std::time::{Duration, SystemTime};

use ratatui::{
    Frame,
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style, Stylize as _},
    text::{Line, Span, Text},
    widgets::{
        Block, Borders, Clear, HighlightSpacing, Paragraph, Row as TableRow, StatefulWidget, Table,
        TableState, Tabs, Widget, Wrap,
    },
};

use super::{
    advice::next_check,
    cluster_view,
    keys::HELP,
    state::{State, View},
};
use crate::{
    clock::Timestamp,
    incidents::{
        Model,
        row::{Mark, Row},
        tally::Tally,
    },
    record::ConnectRecord,
    verdict::VerdictKind,
};

/// Lines above and below the body: tabs (1), footer (1); the header's are `header_lines`.
const CHROME_LINES: u16 = 2;

/// The header: what is traced and the verdict counts, and the Cluster view's Prometheus line.
fn header_lines(state: &State) -> u16 {
    if state.local && state.cluster.is_some() {
        3
    } else {
        2
    }
}

pub fn draw(frame: &mut Frame, state: &State) {
    let [header, tabs, body, footer] = Layout::vertical([
        Constraint::Length(header_lines(state)),
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    frame.render_widget(Header(state), header);
    frame.render_widget(TabsLine(state), tabs);
    match state.view {
        View::Flows if state.detail => {
            // The table keeps just the rows it has (up to 40%): the detail needs the room.
            let rows = u16::try_from(state.visible_rows().len())
                .unwrap_or(u16::MAX)
                .saturating_add(1);
            let table_height = rows.clamp(3, (body.height * 2 / 5).max(3));
            let [table, detail] =
                Layout::vertical([Constraint::Length(table_height), Constraint::Min(0)])
                    .areas(body);
            frame.render_widget(FlowTable(state), table);
            frame.render_widget(Detail(state), detail);
        }
        View::Flows => frame.render_widget(FlowTable(state), body),
        View::Services => frame.render_widget(ServicesView(state.shown()), body),
        View::Dns => frame.render_widget(DnsView(state.shown()), body),
        View::Cluster => frame.render_widget(ClusterBody(state), body),
    }
    frame.render_widget(Footer(state), footer);
    if state.help {
        frame.render_widget(HelpOverlay, frame.area());
    }
}

/// Rows of a table that fit a terminal of this height, for PageUp/PageDown.
pub fn page_rows(height: u16, state: &State) -> usize {
    usize::from(height.saturating_sub(CHROME_LINES + header_lines(state) + 1))
}

struct ClusterBody<'a>(&'a State);

impl Widget for ClusterBody<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if let Some(pane) = &self.0.cluster {
            cluster_view::render(self.0, pane, area, buf);
        }
    }
}

/// The colour of a verdict, the same everywhere.
fn verdict_style(verdict: VerdictKind) -> Style {
    match verdict.severity() {
        5 => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        4 => Style::new().fg(Color::Magenta),
        3 => Style::new().fg(Color::Yellow),
        2 => Style::new().fg(Color::LightRed),
        1 => Style::new().fg(Color::Cyan),
        _ => Style::new().fg(Color::Green),
    }
}

/// `5s`, `4m05s`, `2h03m`: an age at a glance.
pub fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// `16:40:02.118` from a record's RFC 3339 time.
/// `16:40:02.118`: the time of day of a record, in UTC as records are written.
fn clock_of(time: Timestamp) -> String {
    let text = time.to_string();
    text.get(11..23).unwrap_or(&text).to_string()
}

fn clock_of_system(t: SystemTime) -> String {
    clock_of(Timestamp(t))
}

/// `0.5`, `42`, `51.2k`: a rate that stays short.
fn count_label(n: f64) -> String {
    if n >= 10_000.0 {
        format!("{:.1}k", n / 1000.0)
    } else if n >= 10.0 {
        format!("{n:.0}")
    } else {
        format!("{n:.1}")
    }
}

struct Header<'a>(&'a State);

impl Widget for Header<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let state = self.0;
        let last_line = Rect {
            y: area.y + area.height.saturating_sub(1),
            height: area.height.min(1),
            ..area
        };
        if let Some(pane) = &state.cluster
            && !state.local
        {
            cluster_view::StatusLine(pane).render(last_line, buf);
            // Only the cluster: the first line says so; nothing of this node is traced.
            let first = Rect {
                height: area.height.min(1),
                ..area
            };
            Line::from(vec![
                Span::styled(" tracer ", Style::new().bold()),
                Span::styled(" CLUSTER ", Style::new().black().on_magenta()),
                Span::raw(format!(
                    "  every node's tracer, from Prometheus  {}",
                    state.origin
                )),
            ])
            .render(first, buf);
            return;
        }
        let model = state.shown();
        let mode = if state.paused() {
            Span::styled(
                format!(" PAUSED +{} ", state.behind()),
                Style::new().black().on_yellow(),
            )
        } else if state.source_ended {
            Span::styled(" ENDED ", Style::new().black().on_gray())
        } else if state.replay {
            Span::styled(" REPLAY ", Style::new().black().on_cyan())
        } else {
            Span::styled(" LIVE ", Style::new().black().on_green())
        };
        let rate = model
            .events_per_sec()
            .map_or_else(|| "-".to_string(), count_label);
        let dropped = state.dropped_total();
        let dropped_style = if dropped > 0 {
            Style::new()
                .fg(Color::White)
                .bg(Color::Red)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        };
        let mut dropped_text = format!("dropped {dropped}");
        if dropped > 0 {
            dropped_text.push_str(&dropped_breakdown(state));
        }
        let first = Line::from(vec![
            Span::styled(" tracer ", Style::new().bold()),
            mode,
            Span::raw(format!(
                "  up {}  {rate} events/s  ",
                short_duration(model.uptime())
            )),
            Span::styled(dropped_text, dropped_style),
            hooks_span(model),
            skipped_span(state),
            degraded_span(model),
            names_span(model),
            Span::raw(format!("  {}", state.origin)),
        ]);
        let mut counts = vec![Span::raw(" ")];
        if let Some(stats) = model.stats() {
            counts.push(Span::raw(format!("attempts {}  ", stats.attempts)));
        }
        let nonzero: Vec<_> = model
            .verdict_counts()
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .collect();
        if nonzero.is_empty() {
            counts.push(Span::raw("no connect needing attention yet"));
        }
        for (verdict, n) in nonzero {
            counts.push(Span::styled(
                format!("{verdict} {n}"),
                verdict_style(verdict),
            ));
            counts.push(Span::raw("  "));
        }
        Text::from(vec![first, Line::from(counts)]).render(area, buf);
        if let Some(pane) = &state.cluster {
            cluster_view::StatusLine(pane).render(last_line, buf);
        }
    }
}

/// `  hooks tcp=fentry dns=fentry`: where the kernel programs run (`tracer trace --tcp-hooks`,
/// `--dns-hooks`; docs/performance.md says what each costs).
fn hooks_span(model: &Model) -> Span<'static> {
    let Some(hooks) = model.hook_tiers() else {
        return Span::raw("");
    };
    let tier = |s: &crate::record::SideTier| s.tier.map_or("off", |t| t.name());
    Span::raw(format!(
        "  hooks tcp={} dns={}",
        tier(&hooks.tcp),
        tier(&hooks.dns)
    ))
}

/// `  skipped 3 (unknown kind 2, cut last line 1)`: records of the replayed file the model never
/// saw; nothing when none were skipped.
fn skipped_span(state: &State) -> Span<'static> {
    let skipped = &state.skipped;
    if skipped.is_empty() {
        return Span::raw("");
    }
    Span::styled(
        format!("  skipped {} ({})", skipped.records(), skipped.in_short()),
        Style::new().fg(Color::Black).bg(Color::Yellow),
    )
}

/// `  DEGRADED dns_refused`: capabilities this kernel does not give in full (the reasons are in the
/// stats record and on the tracer's stderr).
fn degraded_span(model: &Model) -> Span<'static> {
    let degraded = model.degraded_capabilities();
    if degraded.is_empty() {
        return Span::raw("");
    }
    Span::styled(
        format!("  DEGRADED {}", degraded.join(", ")),
        Style::new().fg(Color::Black).bg(Color::Yellow),
    )
}

/// `  names file 12s`: where pod and Service names come from and how old they are; red when stale.
fn names_span(model: &Model) -> Span<'static> {
    match model.identity() {
        Some((source, age, stale)) if *stale => Span::styled(
            format!("  names {source} STALE {age}s"),
            Style::new().fg(Color::White).bg(Color::Red),
        ),
        Some((source, age, _)) => Span::raw(format!("  names {source} {age}s")),
        None => Span::raw(""),
    }
}

/// ` (ring 120, expired 3, tui 5)`: where the losses were.
fn dropped_breakdown(state: &State) -> String {
    let mut parts = Vec::new();
    if let Some(d) = state.shown().stats().map(|s| &s.dropped) {
        for c in d.by_cause() {
            if c.count > 0 {
                parts.push(format!("{} {}", c.short, c.count));
            }
        }
    }
    if state.channel_dropped > 0 {
        parts.push(format!("tui {}", state.channel_dropped));
    }
    format!(" ({})", parts.join(", "))
}

struct TabsLine<'a>(&'a State);

impl Widget for TabsLine<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let state = self.0;
        let views = state.views();
        let selected = views.iter().position(|&v| v == state.view).unwrap_or(0);
        let tabs = Tabs::new(views.into_iter().map(View::title))
            .select(selected)
            .highlight_style(Style::new().reversed().bold())
            .padding(" ", " ");
        // The verdict filter and the sort are the flow table's; the Cluster view ranks by itself.
        let mut settings = if state.view == View::Cluster {
            Vec::new()
        } else {
            vec![Span::raw(format!(
                "verdict: {}  sort: {}",
                state.verdicts.label(),
                state.sort.label()
            ))]
        };
        if !state.filter.is_empty() {
            settings.insert(
                0,
                Span::styled(format!("filter: {}  ", state.filter), Style::new().bold()),
            );
        }
        let settings = Line::from(settings);
        let width = u16::try_from(settings.width())
            .unwrap_or(u16::MAX)
            .min(area.width.saturating_sub(26));
        let [left, right] =
            Layout::horizontal([Constraint::Min(0), Constraint::Length(width)]).areas(area);
        tabs.render(left, buf);
        settings.right_aligned().render(right, buf);
    }
}

struct FlowTable<'a>(&'a State);

impl Widget for FlowTable<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let state = self.0;
        let model = state.shown();
        let now = model.now();
        let rows = state.visible_rows();
        if rows.is_empty() {
            let why = if model.rows().next().is_none() {
                "No connect needing attention yet. Healthy connects are counted in the header."
            } else {
                "No flow matches the filters (Esc clears the text filter, v cycles the verdicts)."
            };
            Paragraph::new(why)
                .wrap(Wrap { trim: true })
                .render(area, buf);
            return;
        }
        // Addresses are never cut: their columns are as wide as the widest shown; the source
        // (a name) takes what is left and is the one truncated.
        let widest =
            |f: &dyn Fn(&Row) -> usize| rows.iter().map(|r| f(r)).max().unwrap_or(0).clamp(7, 41);
        let service_w = widest(&|r| service_label(model, r).len());
        let backend_w = widest(&|r| r.key.backend.to_string().len());
        let verdict_w = widest(&|r| r.key.verdict_label().len()).min(20);
        // Wide terminals also get LAST (since last seen); 80 columns keep the essentials.
        let wide = area.width >= 100;
        let mut widths = vec![
            Constraint::Length(1),
            Constraint::Length(col(verdict_w)),
            Constraint::Min(8),
            Constraint::Length(col(service_w)),
            Constraint::Length(col(backend_w)),
            Constraint::Length(4),
            Constraint::Length(6),
        ];
        let mut titles = vec!["", "VERDICT", "SOURCE", "SERVICE", "BACKEND", "SYNS", "AGE"];
        if wide {
            widths.push(Constraint::Length(6));
            titles.push("LAST");
        }
        widths.push(Constraint::Length(6));
        titles.push("COUNT");
        let header = TableRow::new(titles).style(Style::new().bold().underlined());
        let body = rows.iter().map(|r| {
            let mark = r.mark(now);
            let style = if mark == Mark::Faded {
                Style::new().dark_gray()
            } else {
                Style::new()
            };
            let verdict_style = if mark == Mark::Faded {
                style
            } else {
                verdict_style(r.key.verdict)
            };
            let mut cells = vec![
                Line::from(mark_char(mark)),
                Line::styled(r.key.verdict_label(), verdict_style),
                Line::from(r.key.source_label()),
                Line::from(service_label(model, r)),
                Line::from(r.key.backend.to_string()),
                Line::from(r.syns.to_string()).right_aligned(),
                Line::from(short_duration(r.age(now))).right_aligned(),
            ];
            if wide {
                let last = now.duration_since(r.last_seen).unwrap_or_default();
                cells.push(Line::from(short_duration(last)).right_aligned());
            }
            cells.push(Line::from(r.shown_count().to_string()).right_aligned());
            TableRow::new(cells).style(style)
        });
        let selected = state.selected_index(&rows);
        let table = Table::new(body, widths)
            .header(header)
            .column_spacing(1)
            .row_highlight_style(Style::new().reversed())
            .highlight_symbol(">")
            .highlight_spacing(HighlightSpacing::Always);
        StatefulWidget::render(
            table,
            area,
            buf,
            &mut TableState::default().with_selected(Some(selected)),
        );
    }
}

fn col(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

fn mark_char(mark: Mark) -> &'static str {
    match mark {
        Mark::New => "+",
        Mark::Changed => "*",
        Mark::Steady => " ",
        Mark::Faded => "~",
    }
}

/// The Service column: what was dialled, or `-` when the socket went where the app dialled.
fn service_label(model: &Model, r: &Row) -> String {
    match model.service_of(&r.key) {
        s if s == r.key.backend => "-".into(),
        s => s.to_string(),
    }
}

struct Detail<'a>(&'a State);

impl Widget for Detail<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let state = self.0;
        let block = Block::new()
            .borders(Borders::TOP)
            .title(" Detail (Enter/Esc closes) ")
            .bold();
        let Some(row) = state.selected_row() else {
            Paragraph::new("No flow selected.")
                .block(block)
                .render(area, buf);
            return;
        };
        let model = state.shown();
        let now = model.now();
        let key = &row.key;
        let ago = |t: SystemTime| short_duration(now.duration_since(t).unwrap_or_default());
        let mut lines = vec![
            Line::from(vec![
                Span::styled(key.verdict_label(), verdict_style(key.verdict)),
                Span::raw(format!(
                    "  {} -> {}{}",
                    key.source_label(),
                    model.service_of(key),
                    if model.service_of(key) == key.backend {
                        String::new()
                    } else {
                        format!(" (backend {})", key.backend)
                    }
                )),
            ]),
            Line::from(format!(
                "flows {}{}  syns {}{}  first {} ({} ago)  last {} ({} ago)",
                row.count,
                if key.verdict == VerdictKind::Unanswered {
                    format!(" (live {})", row.live)
                } else {
                    String::new()
                },
                row.syns,
                row.timeline
                    .last()
                    .map_or_else(String::new, |c| format!("  pid={}", c.pid)),
                clock_of_system(row.first_seen),
                ago(row.first_seen),
                clock_of_system(row.last_seen),
                ago(row.last_seen),
            )),
            Line::from(vec![
                Span::styled("Why: ", Style::new().bold()),
                Span::raw(row.explanation.clone()),
            ]),
            Line::from(vec![
                Span::styled("Check next: ", Style::new().bold()),
                Span::raw(next_check(key.verdict, key.cause, key.backend)),
            ]),
            Line::raw(""),
        ];
        // Names and the cluster-state verdict, when the tracer had cluster state (`identity/`).
        if let Some(latest) = row.timeline.last() {
            let id = &latest.identity;
            let mut named = Vec::new();
            if let Some(names) = id.summary() {
                named.push(Line::from(vec![
                    Span::styled("Who: ", Style::new().bold()),
                    Span::raw(names),
                ]));
            }
            if let (Some(verdict), Some(why)) = (&id.cluster_verdict, &id.cluster_explanation) {
                named.push(Line::from(vec![
                    Span::styled(format!("Cluster: {verdict}. "), Style::new().bold()),
                    Span::raw(why.clone()),
                ]));
            }
            lines.splice(3..3, named);
        }
        if let Some(typical) = typical_line(row) {
            lines.insert(3, typical);
        }
        if row.timeline.is_empty() {
            lines.push(Line::raw(
                "Healthy connects are counted per destination in the kernel, not followed one by one.",
            ));
        } else {
            lines.push(Line::styled(
                "Timeline of the latest flow:",
                Style::new().bold(),
            ));
            lines.extend(row.timeline.iter().map(timeline_line));
        }
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false })
            .render(area, buf);
    }
}

/// `Typical: 2 SYNs in 9508 of 9560 flows (...)`, when the row's flows differ.
fn typical_line(row: &Row) -> Option<Line<'static>> {
    let typical = row.spread.typical_if_varied()?;
    Some(Line::from(vec![
        Span::styled("Typical: ", Style::new().bold()),
        Span::raw(format!("{}.", typical.text())),
    ]))
}

/// One record as `conntrack -E` would print it, time first.
fn timeline_line(c: &ConnectRecord) -> Line<'static> {
    let tag = c.verdict.tag();
    let nat = match c.dialed {
        Some(dialed) if dialed != c.dst => format!("{dialed} [dnat {}]", c.dst),
        _ => c.dst.to_string(),
    };
    let errno = c
        .errno
        .as_ref()
        .map_or_else(String::new, |e| format!(" {e}"));
    Line::from(vec![
        Span::raw(format!("{} ", clock_of(c.time))),
        Span::styled(tag, verdict_style(c.verdict.kind())),
        Span::raw(format!(
            " tcp {} -> {nat} syns={} {}ms{errno}",
            c.src, c.syns, c.syn_sent_ms
        )),
    ])
}

struct ServicesView<'a>(&'a Model);

impl Widget for ServicesView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let services = self.0.services();
        if services.is_empty() {
            // The node's own view (conntrack, stale rules) can come before any connect does.
            let mut lines = vec![Line::raw("No destination seen yet."), Line::raw("")];
            lines.extend(conntrack_lines(self.0));
            Paragraph::new(lines).render(area, buf);
            return;
        }
        let header = TableRow::new([
            "SERVICE / BACKEND",
            "OK",
            "SLOW",
            "HOLE",
            "REFUSED",
            "UNREACH",
            "FAILED",
            "FAILING",
        ])
        .style(Style::new().bold().underlined());
        let mut rows = Vec::new();
        for s in &services {
            rows.push(tally_row(s.service.to_string(), &s.total).style(Style::new().bold()));
            let last = s.backends.len().saturating_sub(1);
            for (i, (backend, tally)) in s.backends.iter().enumerate() {
                let branch = if i == last { "└" } else { "├" };
                rows.push(tally_row(format!(" {branch} {backend}"), tally));
            }
        }
        let widths = [
            Constraint::Min(20),
            Constraint::Length(6),
            Constraint::Length(5),
            Constraint::Length(5),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(6),
            Constraint::Length(7),
        ];
        let conntrack = conntrack_lines(self.0);
        let below = u16::try_from(conntrack.len()).unwrap_or(u16::MAX);
        let [table, legend, conntrack_area] = Layout::vertical([
            Constraint::Min(0),
            Constraint::Length(1),
            Constraint::Length(below.min(area.height / 2)),
        ])
        .areas(area);
        Widget::render(
            Table::new(rows, widths).header(header).column_spacing(1),
            table,
            buf,
        );
        Line::from(
            " HOLE: unanswered now + abandoned + timed out. FAILING: not answered, of all flows.",
        )
        .dark_gray()
        .render(legend, buf);
        Paragraph::new(conntrack).render(conntrack_area, buf);
    }
}

/// What the node's conntrack says, under the table: each Service's line, then the NAT entries
/// stuck in `SYN_SENT [UNREPLIED]` (the SYN was forwarded, nothing came back), then the node's
/// Service rules no EndpointSlice backs (`stale_datapath`).
fn conntrack_lines(model: &Model) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let services = model.conntrack_services();
    if !services.is_empty() {
        lines.push(Line::from(" CONNTRACK, per Service").bold().underlined());
        for s in services {
            let style = if s.failing > 0 {
                Style::new().fg(Color::Red)
            } else {
                Style::new()
            };
            lines.push(Line::styled(format!(" {}", s.summary), style));
        }
    }
    let stale = model.stale_nat();
    if !stale.is_empty() {
        lines.push(
            Line::from(" STALE NAT: SYN_SENT [UNREPLIED], the SYN forwarded and nothing back")
                .bold()
                .underlined(),
        );
        for n in stale {
            let backend = n.backend.unwrap_or(n.reply.src);
            lines.push(Line::styled(
                format!(
                    " {} -> {} (DNAT to {backend}) unreplied for {}s",
                    n.original.src, n.original.dst, n.age_s
                ),
                verdict_style(VerdictKind::Unanswered),
            ));
        }
    }
    let replies = model.replies_lost();
    if !replies.is_empty() {
        lines.push(
            Line::from(" REPLIES LOST: the server answered, the peer never acknowledged")
                .bold()
                .underlined(),
        );
        if model.replies_lost_unlisted() > 0 {
            lines.push(Line::raw(format!(
                " (the worst {}; {} more left out)",
                replies.len(),
                model.replies_lost_unlisted()
            )));
        }
        for r in replies {
            let via = r
                .client
                .map_or_else(String::new, |c| format!(" (client {c})"));
            let look = if r.outcome == crate::verdict::ReplyOutcome::Recovered {
                Style::new().dark_gray()
            } else {
                verdict_style(VerdictKind::Unanswered)
            };
            lines.push(Line::styled(
                format!(
                    " {} -> {}{via} {} after {} retransmits, {} bytes unacknowledged",
                    r.local,
                    r.peer,
                    r.outcome.name(),
                    r.retransmits,
                    r.unacked_bytes
                ),
                look,
            ));
        }
    }
    let stale = model.stale_datapath();
    if !stale.is_empty() {
        lines.push(
            Line::from(" STALE DATAPATH: the node's Service rules, not backed by EndpointSlices")
                .bold()
                .underlined(),
        );
        for d in stale {
            let name = d
                .service_name
                .as_ref()
                .map_or_else(String::new, |n| format!(" ({n})"));
            lines.push(Line::styled(
                format!(
                    " {} -> {}{name} {} {}: {}",
                    d.service,
                    d.backend,
                    d.source.name(),
                    d.location,
                    d.reason.text()
                ),
                verdict_style(VerdictKind::Unanswered),
            ));
        }
    }
    lines
}

fn tally_row(name: String, t: &Tally) -> TableRow<'static> {
    let num = |n: u64, verdict: VerdictKind| {
        let style = if n > 0 {
            verdict_style(verdict)
        } else {
            Style::new().dark_gray()
        };
        Line::styled(n.to_string(), style).right_aligned()
    };
    let share = t.failing_share();
    let share_style = if share > 0.0 {
        Style::new().fg(Color::Red).bold()
    } else {
        Style::new().fg(Color::Green)
    };
    TableRow::new(vec![
        Line::from(name),
        num(t.ok, VerdictKind::Established),
        num(t.slow, VerdictKind::Slow),
        num(t.black_hole, VerdictKind::Abandoned),
        num(t.refused, VerdictKind::Refused),
        num(t.unreachable, VerdictKind::Unreachable),
        num(t.failed, VerdictKind::Failed),
        Line::styled(format!("{:.0}%", share * 100.0), share_style).right_aligned(),
    ])
}

/// DNS servers and sockets with unanswered queries, stuck sockets first.
struct DnsView<'a>(&'a Model);

impl Widget for DnsView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let dns = self.0.dns();
        if dns.is_empty() {
            Paragraph::new(vec![
                Line::raw(""),
                Line::styled("no DNS query needing attention yet", Style::new().bold()),
                Line::raw(""),
                Line::raw("Unanswered, refused, slow and failed queries, per server, and sockets"),
                Line::raw("whose every query is lost while others are answered, show up here."),
            ])
            .centered()
            .wrap(Wrap { trim: true })
            .render(area, buf);
            return;
        }
        let stuck_height = if dns.stuck.is_empty() {
            0
        } else {
            u16::try_from(dns.stuck.len() + 2)
                .unwrap_or(u16::MAX)
                .min(area.height / 2)
        };
        let [stuck, servers] =
            Layout::vertical([Constraint::Length(stuck_height), Constraint::Min(0)]).areas(area);
        if !dns.stuck.is_empty() {
            let header = TableRow::new(["STUCK SOCKET", "PROCESS", "DEAD SERVER", "LOST", "SINCE"])
                .style(Style::new().bold().underlined());
            let rows = dns.stuck.iter().map(|s| {
                TableRow::new(vec![
                    Line::from(s.client.to_string()),
                    Line::from(format!("{} {}", s.comm, s.pid)),
                    Line::from(s.server.to_string()),
                    Line::from(s.lost.to_string()).right_aligned(),
                    Line::from(clock_of(s.since).get(..8).unwrap_or_default().to_string()),
                ])
                .style(Style::new().fg(Color::Red).bold())
            });
            let widths = [
                Constraint::Min(21),
                Constraint::Min(12),
                Constraint::Min(21),
                Constraint::Length(5),
                Constraint::Length(8),
            ];
            Widget::render(
                Table::new(rows, widths).header(header).column_spacing(1),
                stuck,
                buf,
            );
        }
        let header = TableRow::new([
            "DNS SERVER",
            "ANSWERED",
            "UNANSWERED",
            "REFUSED",
            "ERROR",
            "SLOW",
        ])
        .style(Style::new().bold().underlined());
        let num = |n: u64, bad: bool| {
            let style = if n > 0 && bad {
                Style::new().fg(Color::Red).bold()
            } else {
                Style::new()
            };
            Line::styled(n.to_string(), style).right_aligned()
        };
        let rows = dns.ranked_servers().into_iter().map(|(server, c)| {
            TableRow::new(vec![
                Line::from(server.to_string()),
                num(c.answered, false),
                num(c.unanswered, true),
                num(c.refused, true),
                num(c.errors, true),
                num(c.slow, false),
            ])
        });
        let widths = [
            Constraint::Min(21),
            Constraint::Length(8),
            Constraint::Length(10),
            Constraint::Length(7),
            Constraint::Length(5),
            Constraint::Length(5),
        ];
        Widget::render(
            Table::new(rows, widths).header(header).column_spacing(1),
            servers,
            buf,
        );
    }
}

struct Footer<'a>(&'a State);

impl Widget for Footer<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let state = self.0;
        let line = if let Some(text) = &state.editing {
            Line::from(vec![
                Span::styled("filter: /", Style::new().bold()),
                Span::raw(text.clone()),
                Span::styled(" ", Style::new().reversed()),
                Span::raw("   Enter keeps it, Esc clears it").dark_gray(),
            ])
        } else if let Some(status) = &state.status {
            Line::from(format!(" {status}"))
        } else {
            // Two spaces between bindings where they fit, one at 80 columns.
            let gap = if area.width >= 90 { "  " } else { " " };
            let mut spans = vec![Span::raw(" ")];
            for (i, (key, what)) in [
                ("?", "help"),
                ("q", "quit"),
                ("/", "filter"),
                ("v", "verdict"),
                ("s", "sort"),
                ("p", "pause"),
                ("Tab", "view"),
                ("Enter", "detail"),
                ("y", "copy"),
            ]
            .into_iter()
            .enumerate()
            {
                if i > 0 {
                    spans.push(Span::raw(gap));
                }
                spans.push(Span::styled(key, Style::new().bold()));
                spans.push(Span::raw(format!(" {what}")));
            }
            Line::from(spans)
        };
        line.render(area, buf);
    }
}

struct HelpOverlay;

impl Widget for HelpOverlay {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let width = area.width.min(78);
        let height = area.height.min(col(HELP.len()) + 4);
        let popup = area.centered(Constraint::Length(width), Constraint::Length(height));
        Clear.render(popup, buf);
        let mut lines: Vec<Line> = HELP
            .iter()
            .map(|(key, what)| {
                Line::from(vec![
                    Span::styled(format!("{key:>11}  "), Style::new().bold()),
                    Span::raw(*what),
                ])
            })
            .collect();
        lines.push(Line::raw(""));
        lines.push(Line::raw(
            "      marks  + new   * changed   ~ resolved (fades, stays listed)",
        ));
        Paragraph::new(lines)
            .block(Block::bordered().title(" Keys (? or Esc closes) "))
            .wrap(Wrap { trim: false })
            .render(popup, buf);
    }
}
