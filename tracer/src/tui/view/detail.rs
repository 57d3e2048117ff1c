//! The detail pane under the Flows table: the selected row's records, names and next check.
use std::time::SystemTime;

use ratatui::{
    buffer::Buffer,
    layout::Rect,
    style::{Style, Stylize as _},
    text::{Line, Span},
    widgets::{Block, Borders, Paragraph, Widget, Wrap},
};

use super::{clock_of, clock_of_system, short_duration, verdict_style};
use crate::{
    incidents::row::Row,
    record::ConnectRecord,
    tui::{advice::next_check, state::State},
    verdict::VerdictKind,
};

pub(super) struct Detail<'a>(pub(super) &'a State);

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
