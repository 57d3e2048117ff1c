//! The Services view: each Service's backends and their verdicts, the node's conntrack and
//! stale Service rules.
use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    style::{Color, Style, Stylize as _},
    text::Line,
    widgets::{Paragraph, Row as TableRow, Table, Widget},
};

use super::verdict_style;
use crate::{
    incidents::{Model, tally::Tally},
    verdict::VerdictKind,
};

pub(super) struct ServicesView<'a>(pub(super) &'a Model);

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
