//! Every text field of every record kind, long (up to 100,000 characters) and strange (control
//! characters, combining and wide ones), through everything that lays text out: `tracer summary`,
//! the TUI's screens as `replay` draws them, and the text sink. None may panic; the summary's table
//! stays within its cell widths and no control character reaches the TUI's screen.
//!
//! Regression test for item 2 of issue 27: `tracer summary` panicked ("Formatting argument out of
//! range") on a valid record whose `comm` was 70,000 characters.
use std::path::Path;

use proptest::prelude::*;
use ratatui::{Terminal, backend::TestBackend};
use serde_json::Value;
use tracer::{
    record::{Line, Record},
    replay,
    sink::{Sink, text::TextSink},
    tui::{
        app,
        state::{State, View},
        summary,
    },
};

/// The example line of each record kind in `docs/schema.md` (checked against the code by
/// `schema_doc.rs`), and the connect example again without its cluster names (the row is then
/// named by `comm` and `netns`).
fn examples() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/schema.md");
    let page = std::fs::read_to_string(path).expect("docs/schema.md");
    let mut lines: Vec<Value> = page
        .lines()
        .filter(|l| l.starts_with("{\"schema\""))
        .map(|l| serde_json::from_str(l).expect("an example line is JSON"))
        .collect();
    let mut unnamed = lines
        .iter()
        .find(|v| v["kind"] == "connect")
        .expect("a connect example")
        .clone();
    if let Value::Object(map) = &mut unnamed {
        map.retain(|k, _| {
            !(k.starts_with("src_") || k.starts_with("dst_") || k.starts_with("cluster_"))
        });
    }
    lines.push(unnamed);
    lines
}

/// Paths (object keys and array indexes) of every string in `v`.
fn string_paths(v: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        Value::String(_) => out.push(at.clone()),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                at.push(i.to_string());
                string_paths(item, at, out);
                at.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                at.push(k.clone());
                string_paths(item, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn slot<'a>(v: &'a mut Value, path: &[String]) -> &'a mut Value {
    path.iter().fold(v, |v, key| match v {
        Value::Array(items) => &mut items[key.parse::<usize>().expect("an index")],
        other => &mut other[key.as_str()],
    })
}

fn parses(v: &Value) -> bool {
    serde_json::from_value::<Line>(v.clone()).is_ok()
}

/// The strings of `example` that are free text: any text in their place still makes a record
/// (addresses, times and verdicts do not).
fn text_fields(example: &Value) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    string_paths(example, &mut Vec::new(), &mut all);
    all.into_iter()
        .filter(|path| !matches!(path[0].as_str(), "kind"))
        .filter(|path| {
            let mut v = example.clone();
            *slot(&mut v, path) = Value::String("\u{1b}x y\n".into());
            parses(&v)
        })
        .collect()
}

/// Each example with every text field replaced by one of `texts`, in turn.
fn records_with(texts: &[String]) -> Vec<Record> {
    let mut n = 0;
    examples()
        .into_iter()
        .map(|example| {
            let mut v = example.clone();
            for path in text_fields(&example) {
                *slot(&mut v, &path) = Value::String(texts[n % texts.len()].clone());
                n += 1;
            }
            serde_json::from_value::<Line>(v)
                .expect("still a record")
                .record
        })
        .collect()
}

fn state_of(records: &[Record]) -> State {
    let mut state = State::new("replay long.jsonl", None);
    for r in records {
        state.apply(r.clone());
    }
    state
}

/// Every screen the TUI can show of `state`, at two sizes; no cell may hold a control character
/// (it would reach the user's terminal).
fn draw_every_screen(state: &mut State) {
    let screens = [
        (View::Flows, false, false),
        (View::Flows, true, false),
        (View::Services, false, false),
        (View::Dns, false, false),
        (View::Flows, false, true),
    ];
    for (width, height) in [(80, 24), (200, 60)] {
        for (view, detail, help) in screens {
            state.view = view;
            state.detail = detail;
            state.help = help;
            let mut terminal =
                Terminal::new(TestBackend::new(width, height)).expect("test terminal");
            app::draw(&mut terminal, state).expect("draw");
            for c in terminal.backend().buffer().content() {
                assert!(
                    !c.symbol().contains(char::is_control),
                    "a control character on screen: {:?}",
                    c.symbol()
                );
            }
        }
    }
}

fn check(texts: &[String]) {
    let records = records_with(texts);
    let mut state = state_of(&records);

    let text = summary::render(&state);
    let header = text
        .lines()
        .find(|l| l.starts_with("RANK"))
        .expect("a ranked table");
    // Seven cells of at most 48 characters and their gaps.
    let widest = 7 * 48 + 6 * 2;
    // A ranked row starts with its rank, right-aligned under `RANK`; the lines under it are
    // indented further.
    let rows = text.lines().filter(|l| {
        l.len() > 4 && l.as_bytes()[3].is_ascii_digit() && l[..4].trim().parse::<u32>().is_ok()
    });
    for row in rows {
        assert!(
            row.chars().count() <= widest,
            "a row wider than its cells: {} characters",
            row.chars().count()
        );
    }
    assert!(header.len() <= widest);

    draw_every_screen(&mut state);

    let mut sink = TextSink::new(Vec::new());
    for r in &records {
        sink.write(r).expect("write");
    }
    sink.flush().expect("flush");
}

/// Text of up to 100,000 characters cycled from a few random ones (any `char`: control, combining,
/// wide, right-to-left).
fn long_text() -> impl Strategy<Value = String> {
    (prop::collection::vec(any::<char>(), 1..6), 0usize..100_000)
        .prop_map(|(chars, len)| chars.iter().cycle().take(len).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn long_and_strange_text_in_every_field_is_laid_out_without_panicking(
        texts in prop::collection::vec(long_text(), 1..4),
    ) {
        check(&texts);
    }
}

#[test]
fn every_kind_has_text_fields_to_fill() {
    for example in examples() {
        assert!(
            !text_fields(&example).is_empty(),
            "no text field found in {example}"
        );
    }
    let fields = text_fields(&examples()[0]);
    for name in ["comm", "netns", "explanation"] {
        assert!(fields.iter().any(|p| p[0] == name), "{name} in {fields:?}");
    }
}

/// The case of the issue: a 70,000-character `comm` and `netns`, and the same through a recording
/// read back.
#[test]
fn a_70000_character_comm_or_netns() {
    check(&["c".repeat(70_000), "n".repeat(70_000)]);
    let mut line = examples().pop().expect("the unnamed connect");
    line["comm"] = Value::String("c".repeat(70_000));
    let records = replay::parse(&line.to_string(), Path::new("long.jsonl")).expect("a record");
    let state = state_of(&records.into_iter().map(|t| t.record).collect::<Vec<_>>());
    assert!(summary::render(&state).contains("ccc…"));
}
