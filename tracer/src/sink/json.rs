//! JSON lines: one object per line, each with `"schema": 1` and a `"kind"`. The schema is
//! documented in `docs/schema.md` (one example line per kind, checked against these types by
//! `tracer/tests/schema_doc.rs`); the fields are the types of `record.rs`.
use std::io::{self, Write};

use super::Sink;
use crate::record::{Line, Record, SCHEMA_VERSION};

pub struct JsonSink<W: Write> {
    out: W,
}

impl<W: Write> JsonSink<W> {
    pub fn new(out: W) -> JsonSink<W> {
        JsonSink { out }
    }
}

impl<W: Write> Sink for JsonSink<W> {
    fn write(&mut self, record: &Record) -> io::Result<()> {
        let line = Line {
            schema: SCHEMA_VERSION,
            record: record.clone(),
        };
        serde_json::to_writer(&mut self.out, &line)?;
        self.out.write_all(b"\n")
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ConnectRecord;

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
