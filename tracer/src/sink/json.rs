//! JSON lines: one object per line, each with `"schema": 1` and a `"kind"`. The schema is
//! documented in `docs/schema.md` (one example line per kind, checked against these types by
//! `tracer/tests/schema_doc.rs`); the fields are the types of `record/`. `connect` lines, nearly
//! all of a busy node's, are written by hand (`json_connect.rs`); the others through serde.
use std::io::{self, Write};

use serde::Serialize;

use super::{Sink, json_connect, json_values::TimeText};
use crate::record::{Record, SCHEMA_VERSION};

pub struct JsonSink<W: Write> {
    out: W,
    /// The line being written, reused: one `write_all` per line.
    line: Vec<u8>,
    times: TimeText,
}

impl<W: Write> JsonSink<W> {
    pub fn new(out: W) -> JsonSink<W> {
        JsonSink {
            out,
            line: Vec::with_capacity(1024),
            times: TimeText::default(),
        }
    }
}

/// `record::Line` serialized from a borrowed record (no copy of it per line).
#[derive(Serialize)]
struct LineRef<'a> {
    schema: u32,
    #[serde(flatten)]
    record: &'a Record,
}

impl<W: Write> Sink for JsonSink<W> {
    fn write(&mut self, record: &Record) -> io::Result<()> {
        self.line.clear();
        match record {
            Record::Connect(c) => json_connect::write(&mut self.line, &mut self.times, c)?,
            other => serde_json::to_writer(
                &mut self.line,
                &LineRef {
                    schema: SCHEMA_VERSION,
                    record: other,
                },
            )?,
        }
        self.line.push(b'\n');
        self.out.write_all(&self.line)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ConnectRecord, Line};

    #[test]
    fn identity_fields_are_flat_optional_and_round_trip() {
        let text = r#"{"schema":1,"kind":"connect","time":"2026-11-30T16:40:02.118Z","verdict":"refused","cause":"rst","final":true,"src":"10.244.131.21:40522","dst":"10.244.154.32:8080","syns":1,"syn_sent_ms":0,"pid":1,"tid":1,"comm":"curl","cgroup_id":77,"netns":"n","netns_inode":2,"flow":"f","explanation":"e","src_pod":"web-1","src_namespace":"app","dst_pod":"worker-2","dst_ready":true,"dst_service":"app/webhooks","dst_endpoint_of":["app/webhooks"],"cluster_verdict":"endpoint does not listen","cluster_explanation":"Refused by pod app/worker-2.","identity_source":"api","identity_age_s":42,"identity_stale":true}"#;
        let line: Line = serde_json::from_str(text).expect("parse");
        let Record::Connect(c) = &line.record else {
            panic!("a connect record")
        };
        assert_eq!(c.identity.dst_pod.as_deref(), Some("worker-2"));
        assert!(c.identity.identity_stale);
        let mut sink = JsonSink::new(Vec::new());
        sink.write(&line.record).expect("write");
        assert_eq!(String::from_utf8(sink.out).expect("utf8").trim_end(), text);
    }

    #[test]
    fn records_without_names_carry_no_identity_keys() {
        let line = r#"{"schema":1,"kind":"connect","time":"2026-11-30T16:40:02.118Z","verdict":"abandoned","final":true,"src":"10.0.0.1:40000","dst":"10.0.0.2:80","syns":3,"syn_sent_ms":3002,"pid":1,"tid":1,"comm":"c","cgroup_id":1,"netns":"n","netns_inode":2,"flow":"f","explanation":"e"}"#;
        let c: Line = serde_json::from_str(line).expect("parse");
        let Record::Connect(ConnectRecord { identity, .. }) = &c.record else {
            panic!("connect")
        };
        assert_eq!(*identity, crate::identity::Identity::default());
        assert_eq!(serde_json::to_string(&c).expect("serialize"), line);
    }
}
