//! `replay` and `summary` as a user runs them: clear errors with line numbers and a non-zero exit,
//! and the ranked table on stdout. No root, no terminal.
use std::process::Command;

const TRACER: &str = env!("CARGO_BIN_EXE_tracer");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tui");

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(TRACER)
        .args(args)
        .output()
        .expect("tracer runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[path = "../../tests/src/temp_file.rs"]
mod temp_file;
use temp_file::temp_file;

#[test]
fn summary_ranks_the_dead_backend_first() {
    let (code, out, err) = run(&["summary", &format!("{FIXTURES}/a_dead_backend.jsonl")]);
    assert_eq!(code, 0, "{err}");
    let first = out
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .expect("a ranked row");
    assert!(
        first.contains("abandoned") && first.contains("10.244.1.30:8080"),
        "{out}"
    );
    assert!(out.contains("10.96.0.10:80  52% failing"), "{out}");
}

#[test]
fn a_malformed_line_is_an_error_with_its_number() {
    let good =
        std::fs::read_to_string(format!("{FIXTURES}/c_no_endpoints_icmp.jsonl")).expect("fixture");
    let path = temp_file(
        "bad.jsonl",
        format!("{good}{{\"schema\":1,\"kind\":\"connect\",\n"),
    );
    for command in ["replay", "summary"] {
        let (code, out, err) = run(&[command, &path]);
        assert_eq!(code, 1, "{command}: {err}");
        assert!(out.is_empty(), "{command} printed: {out}");
        assert!(
            err.contains(":16: not a tracer record: invalid JSON"),
            "{command}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn an_unknown_schema_is_an_error_that_says_what_to_do() {
    let path = temp_file("v9.jsonl", "{\"schema\":9,\"kind\":\"stats\"}\n");
    let (code, _, err) = run(&["replay", &path, "--speed", "0"]);
    assert_eq!(code, 1);
    assert!(
        err.contains(":1: schema version 9, but this tracer reads schema 1"),
        "{err}"
    );
}

#[test]
fn a_negative_speed_is_refused_by_the_cli() {
    let (code, _, err) = run(&["replay", "x.jsonl", "--speed=-1"]);
    assert_eq!(code, 2, "a usage error: {err}");
    assert!(
        err.contains("'-1' is out of range: give 0 (everything at once) or a speed from 0.001"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{name}.jsonl")).expect("fixture")
}

/// Item 4 of issue 27: a recording whose last line a crash cut short was refused whole.
#[test]
fn a_recording_cut_mid_line_by_a_crash_is_read_with_a_warning() {
    let good = fixture("a_dead_backend");
    let last = good.lines().last().expect("a last line");
    let cut = &good[..good.len() - last.len() / 2 - 1];
    let path = temp_file("cut.jsonl", cut);
    let (code, out, err) = run(&["summary", &path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(":46: the last line is cut short") && err.contains("skipped"),
        "{err}"
    );
    assert!(out.contains("45 records"), "{out}");
    assert!(out.contains("the last line (46) was cut short"), "{out}");
    // Replay gets past reading the file: what stops it here is that there is no terminal.
    let (code, _, err) = run(&["replay", &path, "--speed", "0"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot start the terminal UI"), "{err}");
    assert!(err.contains(":46: the last line is cut short"), "{err}");
}

/// Item 4 of issue 27: a record of a kind a newer tracer writes made the whole file unreadable.
#[test]
fn records_of_an_unknown_kind_are_skipped_and_counted() {
    let good = fixture("c_no_endpoints_icmp");
    let newer = r#"{"schema":1,"kind":"quic_handshake","time":"2026-11-30T16:40:01.000Z","whatever":[1,2]}"#;
    let path = temp_file("newer.jsonl", format!("{newer}\n{good}{newer}\n"));
    let (code, out, err) = run(&["summary", &path]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("2 records of a kind this tracer does not know (quic_handshake 2)"),
        "{err}"
    );
    assert!(
        out.contains("skipped 2 records of a kind this tracer does not know (quic_handshake 2)"),
        "{out}"
    );
    let without = temp_file("newer-none.jsonl", &good);
    let file_name = |path: &str| {
        std::path::Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .expect("a file name")
    };
    assert_eq!(
        out,
        run(&["summary", &without])
            .1
            .replace(&file_name(&without), &file_name(&path))
            .replacen(
                '\n',
                "\nskipped 2 records of a kind this tracer does not know (quic_handshake 2): \
                 written by a newer tracer\n",
                1
            ),
        "the same summary otherwise"
    );
}

/// Item 3 of issue 27: one 200 MB line took 6.5 GiB before it was rejected.
#[test]
fn a_line_longer_than_the_limit_is_an_error_that_names_it() {
    let good = fixture("c_no_endpoints_icmp");
    let long = format!(
        "{{\"schema\":1,\"kind\":\"stats\",\"x\":\"{}\"}}\n",
        "a".repeat(3 << 20)
    );
    let path = temp_file("long.jsonl", format!("{good}{long}{good}"));
    for command in ["replay", "summary"] {
        let (code, out, err) = run(&[command, &path]);
        assert_eq!(code, 1, "{command}: {err}");
        assert!(out.is_empty(), "{command} printed: {out}");
        assert!(
            err.contains(":16: longer than 1048576 bytes"),
            "{command}: {err}"
        );
    }
}

/// Item 2 of issue 27: `summary` panicked ("Formatting argument out of range") on a 70,000
/// character `comm`.
#[test]
fn a_record_with_a_70000_character_name_is_summarized() {
    let good = fixture("a_dead_backend");
    let long = "c".repeat(70_000);
    let path = temp_file(
        "long-comm.jsonl",
        good.replace("\"comm\":\"checkout\"", &format!("\"comm\":\"{long}\"")),
    );
    let (code, out, err) = run(&["summary", &path]);
    assert_eq!(code, 0, "{err}");
    let row = out
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .expect("a ranked row");
    assert!(row.chars().count() < 200, "a capped row: {row}");
    assert!(row.contains("ccc…"), "{row}");
}

/// Item 6 of issue 27: read errors said their cause twice (`...: stream did not contain valid
/// UTF-8: stream did not contain valid UTF-8`).
#[test]
fn a_read_error_says_its_cause_once() {
    let dir = std::env::temp_dir();
    let (code, _, err) = run(&["summary", &dir.display().to_string()]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("Is a directory").count(), 1, "{err}");
    let good = fixture("c_no_endpoints_icmp");
    let mut bytes = good.into_bytes();
    bytes.extend_from_slice(b"{\"schema\":1,\"kind\":\"stats\",\"node\":\"caf\xe9\"}\n");
    let path = temp_file("latin1.jsonl", bytes);
    let (code, _, err) = run(&["summary", &path]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(":16: not a tracer record: not UTF-8"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(!err.contains("UTF-8: stream"), "{err}");
}
