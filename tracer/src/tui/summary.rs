//! `tracer summary FILE.jsonl`: the ranked table as plain text, to paste in a ticket. Worst first by
//! severity (black holes, unreachable, refused, failed, slow), then by count; then the Services with
//! their failing share. Built on the same `State` as the TUI, so both rank alike.
use std::{cmp::Reverse, fmt::Write as _};

use super::{advice::next_check, state::State, view::short_duration};
use crate::{
    incidents::{row::Row, tally::Tally},
    record::SourceState,
    verdict::VerdictKind,
};

pub fn render(state: &State) -> String {
    render_with_notes(state, &[])
}

/// `notes`: lines said under the first one (what reading the recording skipped).
pub fn render_with_notes(state: &State, notes: &[String]) -> String {
    let model = state.shown();
    let mut out = String::new();
    // Writing to a String cannot fail; `let _` keeps that out of every line.
    let _ = writeln!(
        out,
        "tracer summary of {}: {} records over {}",
        state.origin,
        model.records(),
        short_duration(model.uptime())
    );
    for note in notes {
        let _ = writeln!(out, "{note}");
    }
    match model.stats() {
        Some(s) => {
            let _ = writeln!(
                out,
                "attempts {}, answered on the first SYN {}, dropped {}{}",
                s.attempts,
                s.established_first_syn,
                s.dropped.total(),
                dropped_text(&s.dropped)
            );
            if s.conntrack.refused_before_subscription > 0 {
                let _ = writeln!(
                    out,
                    "refused with no backend named: {} (their conntrack entry was gone before \
                     destroy events were followed: --conntrack-destroy-events)",
                    s.conntrack.refused_before_subscription
                );
            }
        }
        None => out.push_str("no stats record: drops unknown\n"),
    }
    if let Some(d) = model.stats().and_then(|s| s.datapath.as_ref()) {
        let _ = writeln!(out, "{}", datapath_text(d));
    }
    out.push('\n');

    push_ranked(&mut out, model);
    push_replies_lost(&mut out, model);
    push_stale_datapath(&mut out, state);

    out.push_str("\nServices (flows by verdict; failing = not answered):\n");
    for s in model.services() {
        let _ = writeln!(out, "{}  {}", s.service, tally_text(&s.total));
        for (backend, tally) in &s.backends {
            let _ = writeln!(out, "  {backend}  {}", tally_text(tally));
        }
    }
    out
}

/// The rows that need attention, worst first, each with its sentence and what to check next.
fn push_ranked(out: &mut String, model: &crate::incidents::Model) {
    // Resolved `unanswered` rows are left out: their flows are counted again in the rows of their ends.
    let mut rows: Vec<&Row> = model
        .rows()
        .filter(|r| r.key.verdict != VerdictKind::Established && r.shown_count() > 0)
        .collect();
    rows.sort_by_key(|r| {
        (
            Reverse(r.key.verdict.severity()),
            Reverse(r.shown_count()),
            &r.key,
        )
    });
    if rows.is_empty() {
        out.push_str("No connect needed attention.\n");
        return;
    }
    let table: Vec<[String; 7]> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let service = model.service_of(&r.key);
            [
                (i + 1).to_string(),
                r.key.verdict_label(),
                r.shown_count().to_string(),
                r.syns.to_string(),
                r.key.source_label(),
                if service == r.key.backend {
                    "-".into()
                } else {
                    service.to_string()
                },
                r.key.backend.to_string(),
            ]
            .map(|text| cell(&text))
        })
        .collect();
    let head = [
        "RANK", "VERDICT", "COUNT", "SYNS", "SOURCE", "SERVICE", "BACKEND",
    ];
    let mut widths = head.map(str::len);
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    push_row(out, &head.map(String::from), &widths);
    for (cells, row) in table.iter().zip(&rows) {
        push_row(out, cells, &widths);
        if let Some(typical) = row.spread.typical_if_varied() {
            let _ = writeln!(out, "      Typical: {}.", typical.text());
        }
        let _ = writeln!(out, "      {}", row.explanation);
        let _ = writeln!(
            out,
            "      Check next: {}",
            next_check(row.key.verdict, row.key.cause, row.key.backend)
        );
    }
}

/// Server sockets whose replies were lost, each with its sentence; nothing when there are none.
fn push_replies_lost(out: &mut String, model: &crate::incidents::Model) {
    let replies = model.replies_lost();
    if replies.is_empty() {
        return;
    }
    out.push_str("\nReplies lost (the server answered; the peer never acknowledged):\n");
    if model.replies_lost_unlisted() > 0 {
        let _ = writeln!(
            out,
            "(the worst {} server sockets; {} more are left out)",
            replies.len(),
            model.replies_lost_unlisted()
        );
    }
    for r in replies {
        let _ = writeln!(
            out,
            "{} -> {}  {} after {} retransmits, {} bytes unacknowledged\n      {}",
            r.local,
            r.peer,
            r.outcome.name(),
            r.retransmits,
            r.unacked_bytes,
            r.explanation
        );
    }
}

/// The node's Service rules that no EndpointSlice backs, each with its sentence.
fn push_stale_datapath(out: &mut String, state: &State) {
    let entries = state.shown().stale_datapath();
    if entries.is_empty() {
        return;
    }
    out.push_str("\nStale datapath (the node's Service rules that no EndpointSlice backs):\n");
    for d in entries {
        let _ = writeln!(
            out,
            "  {} {} -> {}  {} {}: {}\n      {}",
            d.protocol,
            d.service,
            d.backend,
            d.source.name(),
            d.location,
            d.reason.text(),
            d.explanation
        );
    }
}

/// `datapath audit (against file): 1 stale entry; iptables read 42 (1 stale), ipvs absent (...)`.
fn datapath_text(d: &crate::record::DatapathStats) -> String {
    if d.cluster_state == "none" {
        return "datapath audit: not judged (no cluster state)".into();
    }
    let sources: Vec<String> = d
        .sources
        .iter()
        .map(|(name, state)| match state {
            SourceState::Read { entries, stale } => {
                format!("{name} read {entries} ({stale} stale)")
            }
            SourceState::Absent { reason } => format!("{name} absent ({reason})"),
            SourceState::Failed { reason } => format!("{name} failed ({reason})"),
        })
        .collect();
    format!(
        "datapath audit (against {}): {} stale {}; {}",
        d.cluster_state,
        d.stale_entries,
        if d.stale_entries == 1 {
            "entry"
        } else {
            "entries"
        },
        sources.join(", ")
    )
}

/// ` (ring buffer full 1200, expired flows 2): some flows are missing`, or nothing.
fn dropped_text(d: &crate::record::Dropped) -> String {
    match d.in_words() {
        words if words.is_empty() => String::new(),
        words => format!(" ({words}): some flows are missing"),
    }
}

/// The widest a cell of the table gets, in characters: an IPv6 address and port fit
/// (`[ffff:...:ffff]:65535` is 47); a longer name is cut, so one record cannot widen the table
/// past a screen (or past what `format!` can pad).
const CELL_CHARS: usize = 48;

/// `text` fit for one cell: control characters escaped (a newline would break the row), at most
/// `CELL_CHARS` characters, a cut one ending in `…`.
fn cell(text: &str) -> String {
    let escaped = text.chars().flat_map(|c| {
        let escape = c.is_control().then(|| c.escape_default());
        escape
            .into_iter()
            .flatten()
            .chain((!c.is_control()).then_some(c))
    });
    let mut out: String = escaped.clone().take(CELL_CHARS).collect();
    if escaped.clone().nth(CELL_CHARS).is_some() {
        out.pop();
        out.push('…');
    }
    out
}

fn push_row(out: &mut String, cells: &[String; 7], widths: &[usize; 7]) {
    let mut line = String::new();
    for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
        // Numbers right-aligned, names left-aligned.
        if matches!(i, 0 | 2 | 3) {
            let _ = write!(line, "{cell:>w$}  ");
        } else {
            let _ = write!(line, "{cell:<w$}  ");
        }
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

fn tally_text(t: &Tally) -> String {
    let mut parts = vec![format!(
        "{:.0}% failing of {}",
        t.failing_share() * 100.0,
        t.all()
    )];
    for (name, n) in [
        ("ok", t.ok),
        ("slow", t.slow),
        ("black hole", t.black_hole),
        ("refused", t.refused),
        ("unreachable", t.unreachable),
        ("failed", t.failed),
    ] {
        if n > 0 {
            parts.push(format!("{name} {n}"));
        }
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Line, Record};

    fn abandoned(flow: usize, syns: u16, ms: u64) -> Record {
        let line = format!(
            r#"{{"schema":1,"kind":"connect","time":"2026-11-30T16:40:{:02}.000Z","verdict":"abandoned","final":true,"src":"10.0.0.1:40000","dst":"10.0.0.2:80","syns":{syns},"syn_sent_ms":{ms},"pid":1,"tid":1,"comm":"curl","cgroup_id":1,"netns":"n","netns_inode":1,"flow":"f{flow}","explanation":"gave up after {ms}ms and {syns} SYNs"}}"#,
            flow / 1000
        );
        serde_json::from_str::<Line>(&line)
            .expect("a record")
            .record
    }

    /// Issue 27, item 6: a row of 9,560 abandoned flows showed its latest flow's `SYNS 1 ... gave
    /// up after 50ms` although 9,508 of them had 2 SYNs over 1.5 s.
    #[test]
    fn a_row_shows_what_is_typical_of_its_flows_and_their_range() {
        let mut state = State::new("t.jsonl", None);
        for flow in 0..9_560 {
            let (syns, ms) = if flow % 184 == 183 {
                (1, 50)
            } else {
                (2, 1_500)
            };
            state.apply(abandoned(flow, syns, ms));
        }
        state.apply(abandoned(9_560, 1, 50));
        let text = render(&state);
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("1 "))
            .expect("a row");
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[..4], ["1", "abandoned", "9561", "2"], "{text}");
        assert!(
            text.contains(
                "      Typical: 2 SYNs in 9509 of 9561 flows (from 1 to 2), ended after 1.5s \
                 (median; from 50ms to 1.5s).\n      gave up after 1500ms and 2 SYNs\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_cell_is_cut_at_its_width_and_shows_no_control_character() {
        assert_eq!(cell("curl/cni-1"), "curl/cni-1");
        let exact = "x".repeat(CELL_CHARS);
        assert_eq!(cell(&exact), exact);
        let long = cell(&"é".repeat(70_000));
        assert_eq!(long.chars().count(), CELL_CHARS);
        assert!(long.ends_with("é…"), "{long}");
        assert_eq!(cell("a\nb\u{1b}[2J"), "a\\nb\\u{1b}[2J");
    }
}
