//! The header (what is traced, the verdict counts, what was dropped or skipped, the Cluster
//! view's Prometheus) and the tabs line under it.
use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    style::{Color, Modifier, Style},
    text::{Line, Span, Text},
    widgets::{Tabs, Widget},
};

use super::{count_label, short_duration, verdict_style};
use crate::{
    incidents::Model,
    tui::state::{State, View},
};

pub(super) struct Header<'a>(pub(super) &'a State);

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
            super::cluster::StatusLine(pane).render(last_line, buf);
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
            super::cluster::StatusLine(pane).render(last_line, buf);
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

pub(super) struct TabsLine<'a>(pub(super) &'a State);

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
