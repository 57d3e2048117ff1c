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
//!
//! One file per pane: `header.rs` (with the tabs line), `flows.rs`, `detail.rs`, `services.rs`,
//! `dns.rs`, `cluster.rs` (the Cluster view), `footer.rs` (with the help overlay).
mod cluster;
mod detail;
mod dns;
mod flows;
mod footer;
mod header;
mod services;

use std::time::{Duration, SystemTime};

use ratatui::{
    Frame,
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style},
    widgets::{HighlightSpacing, StatefulWidget, Table, TableState, Widget},
};

use self::{
    detail::Detail,
    dns::DnsView,
    flows::FlowTable,
    footer::{Footer, HelpOverlay},
    header::{Header, TabsLine},
    services::ServicesView,
};
use super::state::{State, View};
use crate::{clock::Timestamp, verdict::VerdictKind};

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
            cluster::render(self.0, pane, area, buf);
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

/// A table whose selected row is reversed and marked `>`: the Flows and Cluster panes.
fn render_selectable(table: Table<'_>, selected: usize, area: Rect, buf: &mut Buffer) {
    let table = table
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

fn col(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}
