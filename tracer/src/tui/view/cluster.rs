//! The Cluster view: every node's tracer as the Prometheus that scrapes them sees it now (the last
//! `--cluster-window`), one row per finding, worst first; Enter shows the finding and the `PromQL`
//! that produced it. Also the header's one line about that Prometheus: when it answered, or that it
//! is slow or unreachable.
use std::time::Duration;

use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style, Stylize as _},
    text::{Line, Span},
    widgets::{Block, Borders, Paragraph, Row as TableRow, Table, Widget, Wrap},
};

use super::{render_selectable, short_duration};
use crate::tui::{
    cluster_state::{ClusterPane, ClusterRow},
    state::State,
};

/// A row that has not grown for this long is shown faded: it is in the window, no longer now.
const QUIET: Duration = Duration::from_mins(1);

/// `5m`, `90s`: a window as the options take it.
fn window_label(d: Duration) -> String {
    crate::sweep::window_text(d.as_secs().max(1))
}

/// The header's line about Prometheus: fresh, slow, or unreachable; never more than one line.
pub(super) struct StatusLine<'a>(pub(super) &'a ClusterPane);

impl Widget for StatusLine<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let pane = self.0;
        let last = pane.shown().map(|a| {
            format!(
                "{} nodes, answered {} ago",
                a.nodes,
                short_duration(pane.ago(a.at))
            )
        });
        let waiting = pane
            .asking_since
            .map(|t| pane.ago(t))
            .filter(|&d| d > pane.refresh);
        let mut spans = vec![Span::styled(" cluster ", Style::new().bold())];
        let bad = Style::new()
            .fg(Color::White)
            .bg(Color::Red)
            .add_modifier(Modifier::BOLD);
        if let Some((error, _)) = &pane.error {
            spans.push(Span::styled(format!(" {error} "), bad));
            spans.push(Span::raw(format!(
                "  {}",
                last.unwrap_or_else(|| "no answer yet".into())
            )));
        } else if let Some(waited) = waiting {
            spans.push(Span::styled(
                format!(
                    " Prometheus slow: no answer for {} ",
                    short_duration(waited)
                ),
                Style::new().fg(Color::Black).bg(Color::Yellow),
            ));
            spans.push(Span::raw(format!(
                "  {}",
                last.unwrap_or_else(|| "no answer yet".into())
            )));
        } else {
            spans.push(Span::raw(format!(
                " {}  window {}  {}",
                last.unwrap_or_else(|| "asking...".into()),
                window_label(pane.window),
                pane.url
            )));
        }
        Line::from(spans).render(area, buf);
    }
}

/// The body of the Cluster view: the table, with the detail below it when open.
pub(super) fn render(state: &State, pane: &ClusterPane, area: Rect, buf: &mut Buffer) {
    let rows = pane.visible_rows(&state.filter);
    if pane.detail && !rows.is_empty() {
        let height = u16::try_from(rows.len())
            .unwrap_or(u16::MAX)
            .saturating_add(1)
            .clamp(3, (area.height * 2 / 5).max(3));
        let [table, detail] =
            Layout::vertical([Constraint::Length(height), Constraint::Min(0)]).areas(area);
        render_table(pane, &rows, table, buf);
        render_detail(pane, &rows, detail, buf);
    } else {
        render_table(pane, &rows, area, buf);
    }
}

fn kind_style(kind: &str) -> Style {
    match kind {
        "half-open" | "black holes" => Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        "replies lost" | "dns lost" | "dns stuck" => Style::new().fg(Color::Magenta),
        "unreachable" | "refused" | "failed" => Style::new().fg(Color::Yellow),
        "stale rule" => Style::new().fg(Color::LightRed),
        _ => Style::new().fg(Color::Cyan),
    }
}

fn col(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

fn render_table(pane: &ClusterPane, rows: &[&ClusterRow], area: Rect, buf: &mut Buffer) {
    if rows.is_empty() {
        let text = match pane.shown() {
            None => "Asking Prometheus...".to_string(),
            Some(a) => format!(
                "Nothing failing in the last {} on {} nodes: no black hole, lost DNS query or lost \
                 reply, no stale Service rule, every tracer scraped.",
                window_label(pane.window),
                a.nodes
            ),
        };
        Paragraph::new(text)
            .wrap(Wrap { trim: true })
            .render(area, buf);
        return;
    }
    let widest = |f: &dyn Fn(&ClusterRow) -> usize, lo: usize, hi: usize| {
        rows.iter().map(|r| f(r)).max().unwrap_or(0).clamp(lo, hi)
    };
    // Addresses are not cut where the screen allows: NODES keeps up to 24 columns (a few nodes
    // and the one the replies went to), WHAT takes up to its widest of the rest, NODES the remainder.
    let kind_w = widest(&|r| r.kind.len(), 4, 16);
    let nodes_w = widest(&|r| r.nodes.len(), 5, 24);
    let fixed = kind_w + 6 + 6 + 4 + 1;
    let room = usize::from(area.width).saturating_sub(fixed + nodes_w);
    let what_w = widest(&|r| r.what.len(), 4, 60).min(room).max(12);
    let widths = [
        Constraint::Length(col(kind_w)),
        Constraint::Length(col(what_w)),
        Constraint::Min(col(nodes_w)),
        Constraint::Length(6),
        Constraint::Length(6),
    ];
    let header = TableRow::new(["KIND", "WHAT", "NODES", "COUNT", "AGO"])
        .style(Style::new().bold().underlined());
    let body = rows.iter().map(|r| {
        let quiet = r.ago_s.is_some_and(|s| Duration::from_secs(s) > QUIET);
        let style = if quiet {
            Style::new().dark_gray()
        } else {
            Style::new()
        };
        TableRow::new(vec![
            Line::styled(
                r.kind.clone(),
                if quiet { style } else { kind_style(&r.kind) },
            ),
            Line::from(r.what.clone()),
            Line::from(r.nodes.clone()),
            Line::from(r.count.map_or_else(|| "-".into(), |n| n.to_string())).right_aligned(),
            Line::from(
                r.ago_s
                    .map_or_else(|| "-".into(), |s| short_duration(Duration::from_secs(s))),
            )
            .right_aligned(),
        ])
        .style(style)
    });
    render_selectable(
        Table::new(body, widths).header(header),
        pane.selected_index(rows),
        area,
        buf,
    );
}

fn render_detail(pane: &ClusterPane, rows: &[&ClusterRow], area: Rect, buf: &mut Buffer) {
    let block = Block::new()
        .borders(Borders::TOP)
        .title(" Detail (Enter/Esc closes) ")
        .bold();
    let Some(row) = pane.selected_row(rows) else {
        return;
    };
    let mut lines = vec![Line::from(vec![
        Span::styled(row.kind.clone(), kind_style(&row.kind)),
        Span::raw(format!("  {}", row.what)),
    ])];
    lines.extend(row.sentence.lines().map(|l| Line::raw(l.to_string())));
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        format!(
            "PromQL (over the last {}; y copies it to paste into Grafana):",
            window_label(pane.window)
        ),
        Style::new().bold(),
    ));
    for (what, query) in &row.queries {
        lines.push(Line::styled(format!("# {what}"), Style::new().dark_gray()));
        lines.push(Line::raw(query.clone()));
    }
    Paragraph::new(lines)
        .block(block)
        .wrap(Wrap { trim: false })
        .render(area, buf);
}
