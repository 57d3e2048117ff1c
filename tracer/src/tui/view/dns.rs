//! The DNS view: each server's queries and their verdicts, and the stuck sockets.
use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    style::{Color, Style},
    text::Line,
    widgets::{Paragraph, Row as TableRow, Table, Widget, Wrap},
};

use super::clock_of;
use crate::incidents::Model;

pub(super) struct DnsView<'a>(pub(super) &'a Model);

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
