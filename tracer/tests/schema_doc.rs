//! `docs/schema.md` is the one description of the JSON lines; this test keeps it true to the code.
//!
//! For each record kind the page has a section headed with the kind in backticks, a field table and
//! one example line. The example must parse into `tracer::record::Line` and serialize back byte for
//! byte (so it has no key the code lacks, and its keys are in the code's order), and the table must
//! list exactly the example's keys: top-level names as they are, nested ones as `object.key`,
//! `array[].key` or `map.*.key`. The README's JSON lines must be lines the code writes, too.
use std::collections::BTreeSet;

use serde_json::Value;
use tracer::record::{Line, Record};

/// Every record kind the code writes, as its `"kind"`.
const KINDS: [&str; 10] = [
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
];

/// One section of the page: a level-2 heading naming a kind in backticks.
struct Section {
    kind: String,
    /// First column of every table row, without the backticks.
    fields: Vec<String>,
    /// The lines of every fenced `json` block.
    examples: Vec<String>,
}

fn page() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/schema.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn sections(page: &str) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    let mut in_json = false;
    for line in page.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            in_json = false;
            let kind = heading.trim().trim_matches('`');
            sections.push(Section {
                kind: kind.to_string(),
                fields: Vec::new(),
                examples: Vec::new(),
            });
            continue;
        }
        let Some(section) = sections.last_mut() else {
            continue;
        };
        if in_json {
            if line.starts_with("```") {
                in_json = false;
            } else if !line.trim().is_empty() {
                section.examples.push(line.to_string());
            }
        } else if line.starts_with("```json") {
            in_json = true;
        } else if let Some(row) = line.strip_prefix('|') {
            let first = row.split('|').next().unwrap_or_default().trim();
            // The header row (`field`) and the `|---|` separator name no field.
            if let Some(name) = first.strip_prefix('`').and_then(|f| f.strip_suffix('`')) {
                section.fields.push(name.to_string());
            }
        }
    }
    sections
}

/// Every path the table would have to list for `value`: top-level keys, and below a key only where
/// the table documents its inside (`key.`, `key[].` or `key.*.` rows).
fn paths(prefix: &str, value: &Value, documented: &BTreeSet<String>, out: &mut BTreeSet<String>) {
    let described = |p: &str| documented.iter().any(|d| d.starts_with(p));
    match value {
        Value::Object(map) => {
            let any = format!("{prefix}*");
            let each_value = described(&format!("{any}."));
            for (key, inner) in map {
                let path = if each_value {
                    any.clone()
                } else {
                    format!("{prefix}{key}")
                };
                out.insert(path.clone());
                if inner.is_object() && described(&format!("{path}.")) {
                    paths(&format!("{path}."), inner, documented, out);
                } else if let Value::Array(items) = inner
                    && described(&format!("{path}[]."))
                {
                    for item in items {
                        paths(&format!("{path}[]."), item, documented, out);
                    }
                }
            }
        }
        _ => panic!("{prefix}: not an object"),
    }
}

#[test]
fn every_kind_has_a_section_and_each_section_is_a_kind() {
    let sections = sections(&page());
    let kinds: Vec<&str> = sections.iter().map(|s| s.kind.as_str()).collect();
    for kind in KINDS {
        let n = kinds.iter().filter(|k| **k == kind).count();
        assert_eq!(
            n, 1,
            "docs/schema.md: kind `{kind}` has {n} sections, not 1"
        );
    }
    for kind in &kinds {
        assert!(
            KINDS.contains(kind),
            "docs/schema.md: section `{kind}` is no record kind (kinds: {KINDS:?})"
        );
    }
}

#[test]
fn each_example_is_a_line_the_code_writes_back_byte_for_byte() {
    for section in sections(&page()) {
        let kind = &section.kind;
        let [example] = section.examples.as_slice() else {
            panic!(
                "docs/schema.md, kind `{kind}`: {} example lines, not 1",
                section.examples.len()
            );
        };
        let line: Line = serde_json::from_str(example)
            .unwrap_or_else(|e| panic!("kind `{kind}`: the example does not parse as a Line: {e}"));
        let written = serde_json::to_string(&line).expect("serialize");
        let value: Value = serde_json::from_str(example).expect("JSON");
        let back: Value = serde_json::from_str(&written).expect("JSON");
        if let (Some(doc), Some(code)) = (value.as_object(), back.as_object()) {
            for key in doc.keys() {
                assert!(
                    code.contains_key(key),
                    "kind `{kind}`: field `{key}` of the example is not in the code (serde ignored it)"
                );
            }
            for key in code.keys() {
                assert!(
                    doc.contains_key(key),
                    "kind `{kind}`: field `{key}` the code writes is missing from the example"
                );
            }
            let order = |o: &serde_json::Map<String, Value>| o.keys().cloned().collect::<Vec<_>>();
            let (doc_order, code_order) = (order(doc), order(code));
            if let Some((d, c)) = doc_order.iter().zip(&code_order).find(|(d, c)| d != c) {
                panic!("kind `{kind}`: the example has field `{d}` where the code writes `{c}`");
            }
        }
        assert_eq!(
            &written, example,
            "kind `{kind}`: the example is not what the code writes (a field out of the code's order, \
             a value written differently, or an optional field the code omits)"
        );
        assert_eq!(
            value["kind"], *kind,
            "kind `{kind}`: the example's \"kind\" is not its section's"
        );
        assert_eq!(
            record_kind(&line.record),
            kind,
            "kind `{kind}`: parsed as another kind"
        );
    }
}

#[test]
fn each_table_lists_exactly_the_fields_of_its_example() {
    for section in sections(&page()) {
        let kind = &section.kind;
        let Some(example) = section.examples.first() else {
            panic!("docs/schema.md, kind `{kind}`: no example line");
        };
        let mut value: Value = serde_json::from_str(example)
            .unwrap_or_else(|e| panic!("kind `{kind}`: the example is not JSON: {e}"));
        let object = value.as_object_mut().expect("an object");
        object.remove("schema");
        object.remove("kind");
        let documented: BTreeSet<String> = section.fields.iter().cloned().collect();
        assert_eq!(
            documented.len(),
            section.fields.len(),
            "kind `{kind}`: a field is listed twice in the table"
        );
        let mut in_example = BTreeSet::new();
        paths("", &value, &documented, &mut in_example);
        let only_table: Vec<&String> = documented.difference(&in_example).collect();
        assert!(
            only_table.is_empty(),
            "kind `{kind}`: fields in the table but not in the example: {only_table:?}"
        );
        let only_example: Vec<&String> = in_example.difference(&documented).collect();
        assert!(
            only_example.is_empty(),
            "kind `{kind}`: fields in the example but not in the table: {only_example:?}"
        );
        let top: BTreeSet<&str> = documented
            .iter()
            .map(String::as_str)
            .filter(|f| !f.contains(['.', '[']))
            .collect();
        let keys: BTreeSet<&str> = object_keys(&value);
        assert_eq!(
            top, keys,
            "kind `{kind}`: top-level fields of the table and the example differ"
        );
    }
}

#[test]
fn the_readme_json_lines_are_lines_the_code_writes() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    let readme = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let mut in_json = false;
    let mut checked = 0;
    for (number, line) in readme.lines().enumerate() {
        if in_json && line.starts_with("```") {
            in_json = false;
        } else if in_json {
            let parsed: Line = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("README.md:{}: not a Line: {e}", number + 1));
            let written = serde_json::to_string(&parsed).expect("serialize");
            assert_eq!(
                written,
                line,
                "README.md:{}: not what the code writes",
                number + 1
            );
            checked += 1;
        } else if line.starts_with("```json") {
            in_json = true;
        }
    }
    assert!(checked > 0, "README.md: no JSON lines found");
}

fn object_keys(value: &Value) -> BTreeSet<&str> {
    value
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

fn record_kind(record: &Record) -> &'static str {
    match record {
        Record::Connect(_) => "connect",
        Record::Healthy(_) => "healthy",
        Record::Service(_) => "service",
        Record::StaleNat(_) => "stale_nat",
        Record::StaleDatapath(_) => "stale_datapath",
        Record::Stats(_) => "stats",
        Record::Dns(_) => "dns",
        Record::DnsHealthy(_) => "dns_healthy",
        Record::DnsStuckSocket(_) => "dns_stuck_socket",
        Record::ReplyLost(_) => "reply_lost",
    }
}
