//! The footer (the filter being typed, what the last action did, or the keys) and the help
//! overlay.
use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Rect},
    style::{Style, Stylize as _},
    text::{Line, Span},
    widgets::{Block, Clear, Paragraph, Widget, Wrap},
};

use super::col;
use crate::tui::{keys::HELP, state::State};

pub(super) struct Footer<'a>(pub(super) &'a State);

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

pub(super) struct HelpOverlay;

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
