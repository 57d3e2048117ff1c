//! The Flows view's table: one row per incident, worst first.
use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Rect},
    style::Style,
    text::Line,
    widgets::{Paragraph, Row as TableRow, Table, Widget, Wrap},
};

use super::{col, render_selectable, short_duration, verdict_style};
use crate::{
    incidents::{
        Model,
        row::{Mark, Row},
    },
    tui::state::State,
};

pub(super) struct FlowTable<'a>(pub(super) &'a State);

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
        render_selectable(Table::new(body, widths).header(header), selected, area, buf);
    }
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
