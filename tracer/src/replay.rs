//! Recorded input: JSON lines of schema 1 (as `trace --format json` writes them) read back into
//! `Record`s, for `replay` (paced by the records' `time`) and `summary`. No kernel, no root.
//!
//! The whole file is checked before anything is shown, so a bad line is reported with its number
//! and the TUI never starts on half a file.
use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use tokio::{sync::mpsc, time::Instant};

use crate::record::{Line, Record, SCHEMA_VERSION};

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: not a tracer record: {message}")]
    Malformed {
        path: PathBuf,
        line: usize,
        message: String,
    },
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

pub fn read(path: &Path) -> Result<Vec<Timed>, ReplayError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReplayError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, path)
}

/// Parses every line; blank lines are allowed (a file cut and pasted often ends with some).
pub fn parse(text: &str, path: &Path) -> Result<Vec<Timed>, ReplayError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let malformed = |message: String| ReplayError::Malformed {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| malformed(format!("invalid JSON ({e})")))?;
        match value.get("schema") {
            None => return Err(malformed("no \"schema\" field".into())),
            Some(v) if v.as_u64() == Some(u64::from(SCHEMA_VERSION)) => {}
            Some(v) => {
                return Err(ReplayError::UnknownSchema {
                    path: path.to_path_buf(),
                    line: i + 1,
                    found: v.to_string(),
                });
            }
        }
        let Line { record, .. } =
            serde_json::from_value(value).map_err(|e| malformed(e.to_string()))?;
        let time = match &record {
            Record::Connect(c) => &c.time,
            Record::Healthy(h) => &h.time,
            Record::Service(s) => &s.time,
            Record::StaleNat(n) => &n.time,
            Record::StaleDatapath(d) => &d.time,
            Record::Stats(s) => &s.time,
            Record::Dns(d) => &d.time,
            Record::DnsHealthy(d) => &d.time,
            Record::DnsStuckSocket(d) => &d.time,
            Record::ReplyLost(r) => &r.time,
        };
        out.push(Timed { at: time.0, record });
    }
    Ok(out)
}

/// Sends the records at the pace they were recorded, `speed` times faster (`0`: no pause at all).
/// Waits for room in the channel rather than dropping: a replay has all the time it needs.
pub async fn feed(records: Vec<Timed>, speed: f64, tx: mpsc::Sender<Record>) {
    let Some(first) = records.first().map(|t| t.at) else {
        return;
    };
    let start = Instant::now();
    for Timed { at, record } in records {
        if speed > 0.0 {
            let offset = at.duration_since(first).unwrap_or_default().as_secs_f64() / speed;
            // Clamped: a file spanning years at a tiny speed must not overflow the timer.
            tokio::time::sleep_until(start + Duration::from_secs_f64(offset.min(1e9))).await;
        }
        if tx.send(record).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = r#"{"schema":1,"kind":"stats","time":"2026-11-30T16:40:00.000Z","attempts":1,"established_first_syn":0,"events":1,"open_flows":0,"dropped":{"ring_buffer_full":0,"attempts_map_full":0,"healthy_map_full":0,"decode_errors":0,"expired_flows":0},"final":false}"#;

    fn err(text: &str) -> String {
        parse(text, Path::new("f.jsonl"))
            .expect_err("should fail")
            .to_string()
    }

    #[test]
    fn reads_records_and_skips_blank_lines() {
        let records = parse(&format!("{STATS}\n\n{STATS}\n"), Path::new("f.jsonl")).expect("valid");
        assert_eq!(records.len(), 2);
    }

    #[test]
    fn a_malformed_line_is_named_by_its_number() {
        let e = err(&format!("{STATS}\n{{\"schema\":1,\"kind\":\n"));
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
        let records = parse(&format!("{STATS}\n{late}\n"), Path::new("f")).expect("valid");
        let (tx, mut rx) = mpsc::channel(4);
        let start = Instant::now();
        tokio::spawn(feed(records, 2.0, tx));
        rx.recv().await.expect("first");
        rx.recv().await.expect("second");
        assert_eq!(start.elapsed().as_secs(), 5, "10 s of records at speed 2");
    }
}
