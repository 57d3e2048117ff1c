//! Recorded input: JSON lines of schema 1 (as `trace --format json` writes them) read back into
//! `Record`s, for `replay` (paced by the records' `time`) and `summary`. No kernel, no root.
//!
//! A recording is read one line at a time and each record handed on at once (the incident model
//! aggregates them), so memory does not grow with the file; no line may be longer than
//! `MAX_LINE_BYTES`. `replay` reads the file twice: once to check every line before the TUI starts
//! (a bad line is reported with its number, and the TUI never starts on half a file), then to feed
//! the records.
//!
//! What a crash or a newer tracer leaves behind is read, not refused: a last line cut short (no
//! newline, not JSON: the tracer was killed, or the disk filled, while writing it) is skipped with a
//! warning, and records of a `kind` this tracer does not know are skipped and counted (`Skipped`).
//! Any other line that is not a schema-1 record is an error naming its line.
use std::{
    collections::BTreeMap,
    fmt::Display,
    fs::File,
    io::{self, BufRead, BufReader, Read as _},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use serde::{Deserialize, de::value::MapDeserializer};
use tokio::{sync::mpsc, time::Instant};

use crate::record::{Line, Record, SCHEMA_VERSION};

/// The longest line read. The tracer's own lines are a few KiB (a 70,000-character name still
/// fits); anything longer is not a recording, and is refused before it is held in memory.
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// Unknown kinds named in the warning; more are counted, not named (a hostile file could hold
/// millions of distinct ones).
const UNKNOWN_KINDS_NAMED: usize = 8;
/// Characters of an unknown kind's name kept for the warning.
const KIND_NAME_CHARS: usize = 40;

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}:{line}: not a tracer record: {message}")]
    Malformed {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error(
        "{path}:{line}: longer than {MAX_LINE_BYTES} bytes: not a tracer record (the tracer writes \
         lines of a few KiB)"
    )]
    LineTooLong { path: PathBuf, line: usize },
    #[error(
        "{path}:{line}: schema version {found}, but this tracer reads schema {SCHEMA_VERSION}: \
         replay it with the tracer version that wrote it"
    )]
    UnknownSchema {
        path: PathBuf,
        line: usize,
        found: String,
    },
}

/// A record and the time it carries.
#[derive(Debug, Clone)]
pub struct Timed {
    pub at: SystemTime,
    pub record: Record,
}

/// What was read but not handed on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Records of kinds this tracer does not know (a newer tracer's), all of them.
    pub unknown_kinds: u64,
    /// The first few of those kinds by name, with their counts.
    pub unknown_by_kind: BTreeMap<String, u64>,
    /// The number of the last line, when it was cut short.
    pub cut_line: Option<usize>,
}

impl Skipped {
    pub fn is_empty(&self) -> bool {
        self.unknown_kinds == 0 && self.cut_line.is_none()
    }

    /// Records read but not handed on: each of an unknown kind, and a cut last line.
    pub fn records(&self) -> u64 {
        self.unknown_kinds + u64::from(self.cut_line.is_some())
    }

    /// `unknown kind 2, cut last line 1`: where the skipped records were, for the TUI's header.
    pub fn in_short(&self) -> String {
        let mut parts = Vec::new();
        if self.unknown_kinds > 0 {
            parts.push(format!("unknown kind {}", self.unknown_kinds));
        }
        if self.cut_line.is_some() {
            parts.push("cut last line 1".to_string());
        }
        parts.join(", ")
    }

    fn unknown(&mut self, kind: &str) {
        self.unknown_kinds += 1;
        let name: String = kind.chars().take(KIND_NAME_CHARS).collect();
        if let Some(n) = self.unknown_by_kind.get_mut(&name) {
            *n += 1;
        } else if self.unknown_by_kind.len() < UNKNOWN_KINDS_NAMED {
            self.unknown_by_kind.insert(name, 1);
        }
    }

    /// `2 records of a kind this tracer does not know (quic 2)`, or nothing.
    fn unknown_text(&self) -> Option<String> {
        if self.unknown_kinds == 0 {
            return None;
        }
        let mut named: Vec<String> = self
            .unknown_by_kind
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect();
        let unnamed = self.unknown_kinds - self.unknown_by_kind.values().sum::<u64>();
        if unnamed > 0 {
            named.push(format!("other kinds {unnamed}"));
        }
        Some(format!(
            "{} record{} of a kind this tracer does not know ({})",
            self.unknown_kinds,
            if self.unknown_kinds == 1 { "" } else { "s" },
            named.join(", ")
        ))
    }

    /// One sentence per thing skipped, for stderr (each prefixed with the file by the caller).
    pub fn warnings(&self, path: &Path) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(line) = self.cut_line {
            out.push(format!(
                "{}:{line}: the last line is cut short (the tracer was stopped, or its disk filled, \
                 while writing it): skipped",
                path.display()
            ));
        }
        if let Some(text) = self.unknown_text() {
            out.push(format!(
                "{}: skipped {text}: written by a newer tracer",
                path.display()
            ));
        }
        out
    }

    /// The same, as lines of `tracer summary` (the file is named in its first line).
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(line) = self.cut_line {
            out.push(format!(
                "the last line ({line}) was cut short (the tracer was stopped while writing it): \
                 skipped"
            ));
        }
        if let Some(text) = self.unknown_text() {
            out.push(format!("skipped {text}: written by a newer tracer"));
        }
        out
    }
}

/// Reads records one line at a time; see the module's doc for what is skipped and what is an
/// error. After an error it reads nothing more.
pub struct Reader<R> {
    path: PathBuf,
    input: R,
    /// The current line's number (1-based) and bytes, reused from line to line.
    line: usize,
    buf: Vec<u8>,
    /// Bytes of whole lines read so far.
    consumed: u64,
    skipped: Skipped,
    failed: bool,
}

impl Reader<BufReader<io::Take<File>>> {
    /// The file at `path`, as long as it is now.
    pub fn open(path: &Path) -> Result<Self, ReplayError> {
        Self::open_first(path, u64::MAX)
    }

    /// Only the first `len` bytes of the file at `path` (a file still being written is read as far
    /// as it was checked).
    pub fn open_first(path: &Path, len: u64) -> Result<Self, ReplayError> {
        let file = File::open(path).map_err(|source| ReplayError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Reader::new(
            BufReader::with_capacity(1 << 16, file.take(len)),
            path,
        ))
    }
}

impl<R: BufRead> Reader<R> {
    pub fn new(input: R, path: &Path) -> Reader<R> {
        Reader {
            path: path.to_path_buf(),
            input,
            line: 0,
            buf: Vec::new(),
            consumed: 0,
            skipped: Skipped::default(),
            failed: false,
        }
    }

    pub fn skipped(&self) -> &Skipped {
        &self.skipped
    }

    /// Bytes read so far, up to the end of the last line handed on or skipped.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// The next record, `None` at the end of the file.
    pub fn next_record(&mut self) -> Result<Option<Timed>, ReplayError> {
        if self.failed {
            return Ok(None);
        }
        let next = self.read_record();
        self.failed = next.is_err();
        next
    }

    fn read_record(&mut self) -> Result<Option<Timed>, ReplayError> {
        loop {
            let Some(terminated) = self.read_line()? else {
                return Ok(None);
            };
            // Only the file's last line can lack its newline: cut short, it is not valid JSON.
            let cut = |reader: &mut Self| {
                reader.skipped.cut_line = Some(reader.line);
                Ok(None)
            };
            let text = match std::str::from_utf8(&self.buf) {
                Ok(text) => text,
                Err(_) if !terminated => return cut(self),
                Err(e) => {
                    return Err(
                        self.malformed(format!("not UTF-8 text (at byte {})", e.valid_up_to() + 1))
                    );
                }
            };
            if text.trim().is_empty() {
                continue;
            }
            match parse_line(text) {
                Ok(timed) => return Ok(Some(timed)),
                Err(LineError::UnknownKind(kind)) => self.skipped.unknown(&kind),
                Err(LineError::NotJson(_)) if !terminated => return cut(self),
                Err(LineError::NotJson(e)) => {
                    return Err(self.malformed(format!("invalid JSON ({})", without_position(&e))));
                }
                Err(LineError::NoSchema) => {
                    return Err(self.malformed("no \"schema\" field".into()));
                }
                Err(LineError::Schema(found)) => {
                    return Err(ReplayError::UnknownSchema {
                        path: self.path.clone(),
                        line: self.line,
                        found,
                    });
                }
                Err(LineError::NotARecord(e)) => {
                    return Err(self.malformed(without_position(&e)));
                }
            }
        }
    }

    /// The next line into `buf`, without its line ending; whether it had one. `None` at the end.
    fn read_line(&mut self) -> Result<Option<bool>, ReplayError> {
        self.buf.clear();
        // One byte past the limit tells a line of exactly the limit from a longer one.
        let limit = u64::try_from(MAX_LINE_BYTES).unwrap_or(u64::MAX) + 1;
        let n = (&mut self.input)
            .take(limit)
            .read_until(b'\n', &mut self.buf)
            .map_err(|source| ReplayError::Read {
                path: self.path.clone(),
                source,
            })?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        let terminated = self.buf.last() == Some(&b'\n');
        if terminated {
            self.buf.pop();
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
        }
        if self.buf.len() > MAX_LINE_BYTES {
            return Err(ReplayError::LineTooLong {
                path: self.path.clone(),
                line: self.line,
            });
        }
        self.consumed += u64::try_from(n).unwrap_or(u64::MAX);
        Ok(Some(terminated))
    }

    fn malformed(&self, message: String) -> ReplayError {
        ReplayError::Malformed {
            path: self.path.clone(),
            line: self.line,
            message,
        }
    }
}

impl<R: BufRead> Iterator for Reader<R> {
    type Item = Result<Timed, ReplayError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

/// Every record of `text` (for tests and small inputs; files go through `Reader::open`).
pub fn parse(text: &str, path: &Path) -> Result<Vec<Timed>, ReplayError> {
    Reader::new(text.as_bytes(), path).collect()
}

/// What `replay` learned in its first pass: how far the file was checked.
#[derive(Debug, Clone)]
pub struct Checked {
    pub bytes: u64,
    pub records: u64,
    pub skipped: Skipped,
}

/// Reads every line of the file at `path` and keeps none: the check before the TUI starts.
pub fn check(path: &Path) -> Result<Checked, ReplayError> {
    let mut reader = Reader::open(path)?;
    let mut records = 0;
    while reader.next_record()?.is_some() {
        records += 1;
    }
    Ok(Checked {
        bytes: reader.consumed(),
        records,
        skipped: reader.skipped,
    })
}

enum LineError {
    /// A record of a kind this tracer does not know: skipped, not an error.
    UnknownKind(String),
    NotJson(serde_json::Error),
    NoSchema,
    Schema(String),
    NotARecord(serde_json::Error),
}

/// What a line that is not a `Line` does have: enough to say why.
#[derive(Deserialize)]
struct Head {
    schema: Option<serde_json::Value>,
    kind: Option<serde_json::Value>,
}

fn parse_line(text: &str) -> Result<Timed, LineError> {
    let error = match serde_json::from_str::<Line>(text) {
        Ok(Line { schema, record }) if schema == SCHEMA_VERSION => {
            return Ok(Timed {
                at: time_of(&record),
                record,
            });
        }
        Ok(Line { schema, .. }) => return Err(LineError::Schema(schema.to_string())),
        Err(e) => e,
    };
    if error.is_syntax() || error.is_eof() {
        return Err(LineError::NotJson(error));
    }
    let Ok(head) = serde_json::from_str::<Head>(text) else {
        return Err(LineError::NotARecord(error));
    };
    match head.schema {
        None => return Err(LineError::NoSchema),
        Some(v) if v.as_u64() != Some(u64::from(SCHEMA_VERSION)) => {
            return Err(LineError::Schema(v.to_string()));
        }
        Some(_) => {}
    }
    match head.kind {
        Some(serde_json::Value::String(kind)) if !is_known_kind(&kind) => {
            Err(LineError::UnknownKind(kind))
        }
        _ => Err(LineError::NotARecord(error)),
    }
}

fn time_of(record: &Record) -> SystemTime {
    match record {
        Record::Connect(c) => c.time.0,
        Record::Healthy(h) => h.time.0,
        Record::Service(s) => s.time.0,
        Record::StaleNat(n) => n.time.0,
        Record::StaleDatapath(d) => d.time.0,
        Record::Stats(s) => s.time.0,
        Record::Dns(d) => d.time.0,
        Record::DnsHealthy(d) => d.time.0,
        Record::DnsStuckSocket(d) => d.time.0,
        Record::ReplyLost(r) => r.time.0,
    }
}

/// `serde_json`'s message without ` at line 1 column N` (every record is one line; the file's line
/// number is given already), with the column kept.
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(message) => format!("{message} (column {})", e.column()),
        None => text,
    }
}

/// Whether `kind` names a record kind this tracer knows. Asks `Record`'s own deserializer, so a
/// kind added to `Record` is known here with no list to keep in step: deserializing the tag alone
/// fails with `unknown_variant` for an unknown kind, and with a missing field for a known one.
fn is_known_kind(kind: &str) -> bool {
    let tag = MapDeserializer::<_, KindProbe>::new(std::iter::once(("kind", kind)));
    !matches!(Record::deserialize(tag), Err(KindProbe::UnknownVariant))
}

/// The error of `is_known_kind`'s deserializer: which of the two failures it was.
#[derive(Debug)]
enum KindProbe {
    UnknownVariant,
    Other,
}

impl Display for KindProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for KindProbe {}

impl serde::de::Error for KindProbe {
    fn custom<T: Display>(_: T) -> Self {
        KindProbe::Other
    }

    fn unknown_variant(_: &str, _: &'static [&'static str]) -> Self {
        KindProbe::UnknownVariant
    }
}

/// Sends the records of `reader` at the pace they were recorded, `speed` times faster (`0`: no
/// pause at all). Waits for room in the channel rather than dropping: a replay has all the time it
/// needs.
pub async fn feed<R: BufRead>(
    mut reader: Reader<R>,
    speed: f64,
    tx: mpsc::Sender<Record>,
) -> Result<(), ReplayError> {
    let mut first = None;
    let start = Instant::now();
    while let Some(Timed { at, record }) = reader.next_record()? {
        let first = *first.get_or_insert(at);
        if speed > 0.0 {
            let offset = at.duration_since(first).unwrap_or_default().as_secs_f64() / speed;
            // Clamped: a file spanning years at a tiny speed must not overflow the timer.
            tokio::time::sleep_until(start + Duration::from_secs_f64(offset.min(1e9))).await;
        }
        if tx.send(record).await.is_err() {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;

    const STATS: &str = r#"{"schema":1,"kind":"stats","time":"2026-11-30T16:40:00.000Z","attempts":1,"established_first_syn":0,"events":1,"open_flows":0,"dropped":{"ring_buffer_full":0,"attempts_map_full":0,"healthy_map_full":0,"decode_errors":0,"expired_flows":0},"final":false}"#;

    fn err(text: &str) -> String {
        parse(text, Path::new("f.jsonl"))
            .expect_err("should fail")
            .to_string()
    }

    /// The records of `text` and what was skipped.
    fn read_all(text: &str) -> (usize, Skipped) {
        let mut reader = Reader::new(text.as_bytes(), Path::new("f.jsonl"));
        let records: Vec<Timed> = reader.by_ref().collect::<Result<_, _>>().expect("valid");
        (records.len(), reader.skipped)
    }

    #[test]
    fn reads_records_and_skips_blank_lines() {
        let records = parse(&format!("{STATS}\n\n{STATS}\n"), Path::new("f.jsonl")).expect("valid");
        assert_eq!(records.len(), 2);
        let crlf = parse(&format!("{STATS}\r\n{STATS}"), Path::new("f.jsonl")).expect("valid");
        assert_eq!(crlf.len(), 2, "CRLF line ends and a last line without one");
    }

    #[test]
    fn a_malformed_line_is_named_by_its_number() {
        let e = err(&format!("{STATS}\n{{\"schema\":1,\"kind\":\n{STATS}\n"));
        assert!(
            e.starts_with("f.jsonl:2: not a tracer record: invalid JSON"),
            "{e}"
        );
    }

    #[test]
    fn a_record_missing_fields_is_named_by_its_number() {
        let e = err(&format!(
            "{STATS}\n{STATS}\n{{\"schema\":1,\"kind\":\"connect\"}}"
        ));
        assert!(
            e.starts_with("f.jsonl:3: not a tracer record: missing field"),
            "{e}"
        );
        assert!(!e.contains("line 1"), "the file's line only: {e}");
    }

    #[test]
    fn an_unknown_schema_says_which_version() {
        let e = err(&STATS.replace("\"schema\":1", "\"schema\":2"));
        assert!(
            e.contains("f.jsonl:1: schema version 2, but this tracer reads schema 1"),
            "{e}"
        );
        let e = err(r#"{"kind":"stats"}"#);
        assert!(e.contains("no \"schema\" field"), "{e}");
        let e = err(r#"{"schema":3,"kind":"quic"}"#);
        assert!(
            e.contains("schema version 3"),
            "a newer schema is refused: {e}"
        );
    }

    #[test]
    fn a_cut_last_line_is_skipped_and_said() {
        for cut in [1, 10, STATS.len() / 2, STATS.len() - 1] {
            let (records, skipped) = read_all(&format!("{STATS}\n{STATS}\n{}", &STATS[..cut]));
            assert_eq!(records, 2, "cut at {cut}");
            assert_eq!(skipped.cut_line, Some(3));
        }
        // Cut inside a multi-byte character.
        let text = format!("{STATS}\n{{\"schema\":1,\"node\":\"caf\u{e9}\"}}");
        let bytes = &text.as_bytes()[..text.len() - 3];
        let mut reader = Reader::new(bytes, Path::new("f.jsonl"));
        assert_eq!(reader.by_ref().count(), 1);
        assert_eq!(reader.skipped.cut_line, Some(2));
        // Whole, with no newline at the end: not cut.
        let (records, skipped) = read_all(&format!("{STATS}\n{STATS}"));
        assert_eq!((records, skipped.cut_line), (2, None));
    }

    #[test]
    fn only_the_last_line_may_be_cut() {
        let e = err(&format!("{STATS}\n{}\n{STATS}\n", &STATS[..40]));
        assert!(
            e.starts_with("f.jsonl:2: not a tracer record: invalid JSON"),
            "{e}"
        );
        // A whole JSON object with no newline is not a cut: its fields are checked.
        let e = err(&format!("{STATS}\n{{\"schema\":1,\"kind\":\"stats\"}}"));
        assert!(
            e.starts_with("f.jsonl:2: not a tracer record: missing field"),
            "{e}"
        );
    }

    #[test]
    fn records_of_unknown_kinds_are_counted_and_the_first_kinds_named() {
        let mut text = String::new();
        for i in 0..20 {
            writeln!(text, "{{\"schema\":1,\"kind\":\"new_{i}\"}}\n{STATS}").expect("a String");
        }
        text.push_str("{\"schema\":1,\"kind\":\"new_0\",\"time\":5}\n");
        let (records, skipped) = read_all(&text);
        assert_eq!(records, 20);
        assert_eq!(skipped.unknown_kinds, 21);
        assert_eq!(skipped.unknown_by_kind.len(), UNKNOWN_KINDS_NAMED);
        assert_eq!(skipped.unknown_by_kind["new_0"], 2);
        assert_eq!(
            skipped.notes(),
            [
                "skipped 21 records of a kind this tracer does not know (new_0 2, new_1 1, \
              new_2 1, new_3 1, new_4 1, new_5 1, new_6 1, new_7 1, other kinds 12): \
              written by a newer tracer"
            ]
        );
    }

    #[test]
    fn every_kind_of_record_is_known() {
        for kind in [
            "connect",
            "healthy",
            "service",
            "stale_nat",
            "stale_datapath",
            "stats",
            "dns",
            "dns_healthy",
            "dns_stuck_socket",
            "reply_lost",
        ] {
            assert!(is_known_kind(kind), "{kind}");
        }
        assert!(!is_known_kind("Connect"));
        assert!(!is_known_kind(""));
    }

    #[test]
    fn a_line_past_the_limit_is_refused_by_number_without_reading_it_whole() {
        let long = format!("{STATS}\n{}\n{STATS}\n", "x".repeat(MAX_LINE_BYTES * 3));
        let mut reader = Reader::new(long.as_bytes(), Path::new("f.jsonl"));
        let e = reader
            .by_ref()
            .nth(1)
            .expect("an item")
            .expect_err("too long");
        assert!(
            e.to_string()
                .starts_with("f.jsonl:2: longer than 1048576 bytes"),
            "{e}"
        );
        assert!(
            reader.buf.capacity() <= 2 * (MAX_LINE_BYTES + 1),
            "held at most the limit"
        );
        assert!(reader.next().is_none(), "nothing read after an error");
        // A line of exactly the limit is read (and judged on what it holds).
        let exact = format!(
            "{{\"schema\":1,\"kind\":\"stats\",\"x\":\"{}\"}}",
            "x".repeat(MAX_LINE_BYTES - 34)
        );
        assert_eq!(exact.len(), MAX_LINE_BYTES);
        assert!(err(&exact).contains("missing field"), "read and judged");
    }

    #[test]
    fn recordings_from_before_the_netns_inode_still_replay() {
        let line = r#"{"schema":1,"kind":"dns_healthy","time":"2026-11-30T16:00:01.000Z","server":"10.96.0.10:53","netns":"n","netns_cookie":5,"answered":40,"mean_latency_ms":0.4}"#;
        let records = parse(line, Path::new("f")).expect("an old line parses");
        let Record::DnsHealthy(h) = &records[0].record else {
            panic!("a dns_healthy record: {:?}", records[0].record);
        };
        assert_eq!(h.netns_inode, 5);
    }

    #[test]
    fn a_bad_time_is_an_error_not_a_guess() {
        let e = err(&STATS.replace("2026-11-30T16:40:00.000Z", "yesterday"));
        assert!(
            e.contains("f.jsonl:1:") && e.contains("`yesterday` is not an RFC 3339 time"),
            "{e}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn paces_by_the_records_time_scaled_by_speed() {
        let late = STATS.replace("16:40:00.000", "16:40:10.000");
        let text = format!("{STATS}\n{late}\n");
        let (tx, mut rx) = mpsc::channel(4);
        let start = Instant::now();
        tokio::spawn(async move {
            feed(Reader::new(text.as_bytes(), Path::new("f")), 2.0, tx)
                .await
                .expect("valid");
        });
        rx.recv().await.expect("first");
        rx.recv().await.expect("second");
        assert_eq!(start.elapsed().as_secs(), 5, "10 s of records at speed 2");
    }

    #[test]
    fn the_second_pass_reads_only_what_the_first_checked() {
        let path = std::env::temp_dir().join(format!("tracer-replay-{}.jsonl", std::process::id()));
        std::fs::write(&path, format!("{STATS}\n{STATS}\n{}", &STATS[..20])).expect("write");
        let checked = check(&path).expect("valid");
        assert_eq!((checked.records, checked.skipped.cut_line), (2, Some(3)));
        // The tracer writing it finished the line and wrote more meanwhile.
        std::fs::write(&path, format!("{STATS}\n{STATS}\n{STATS}\n{STATS}\n")).expect("write");
        let reader = Reader::open_first(&path, checked.bytes).expect("open");
        assert_eq!(reader.count(), 2);
        std::fs::remove_file(&path).expect("clean up");
    }
}
