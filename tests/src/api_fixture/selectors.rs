//! Field and label selectors as the API server reads them (`fieldSelector`, `labelSelector`
//! query parameters; k8s.io/apimachinery `pkg/fields` and `pkg/labels`), matched against the
//! JSON of an object. Pods take the field labels of kubernetes `pkg/registry/core/pod/strategy.go`
//! (`PodToSelectableFields`); other kinds `metadata.name` and `metadata.namespace`, as the generic
//! registry gives every kind. Anything else is the API's `400`: "field label not supported".
use serde_json::Value;

use super::objects::Kind;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Equals,
    NotEquals,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    op: Op,
    pub value: String,
}

/// A parsed `fieldSelector`: every term must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldTerm>);

const POD_FIELDS: [&str; 11] = [
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
];

impl FieldSelector {
    /// `Err` is the API's message for a `400 Bad Request`.
    pub fn parse(text: &str, kind: Kind) -> Result<FieldSelector, String> {
        let mut terms = Vec::new();
        for term in text.split(',').filter(|t| !t.is_empty()) {
            let (field, op, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, Op::NotEquals, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, Op::Equals, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, Op::Equals, v)
            } else {
                return Err(format!(
                    "invalid selector: '{text}'; can't understand '{term}'"
                ));
            };
            let supported = match kind {
                Kind::Pod => POD_FIELDS.contains(&field),
                _ => field == "metadata.name" || field == "metadata.namespace",
            };
            if !supported {
                return Err(format!(
                    "field label not supported: {field} (for {})",
                    kind.resource()
                ));
            }
            terms.push(FieldTerm {
                field: field.to_string(),
                op,
                value: value.to_string(),
            });
        }
        Ok(FieldSelector(terms))
    }

    /// The value an equality term gives `field`, for the indexes of a large fake cluster.
    pub fn equals(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|t| t.field == field && t.op == Op::Equals)
            .map(|t| t.value.as_str())
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|t| {
            let values = field_values(object, &t.field);
            let hit = values.contains(&t.value);
            match t.op {
                Op::Equals => hit,
                Op::NotEquals => !hit,
            }
        })
    }
}

/// What a field label reads in an object (a missing field is `""`, as the API server reads it).
fn field_values(object: &Value, field: &str) -> Vec<String> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        _ => String::new(),
    };
    match field {
        "status.podIP" | "status.podIPs" => {
            let mut ips: Vec<String> = object["status"]["podIPs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| text(&p["ip"]))
                .collect();
            if ips.is_empty() {
                ips.push(text(&object["status"]["podIP"]));
            }
            if field == "status.podIP" {
                ips.truncate(1);
            }
            ips
        }
        "spec.hostNetwork" => vec![
            object["spec"]["hostNetwork"]
                .as_bool()
                .unwrap_or(false)
                .to_string(),
        ],
        _ => {
            let mut v = object;
            for part in field.split('.') {
                v = &v[part];
            }
            vec![text(v)]
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelTerm {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

/// A parsed `labelSelector`: every term must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<LabelTerm>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut terms = Vec::new();
        for term in split_terms(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let bad = || format!("unable to parse requirement: {term}");
            let parsed = if let Some(key) = term.strip_prefix('!') {
                LabelTerm::Absent(key.trim().to_string())
            } else if let Some((k, v)) = term.split_once("!=") {
                LabelTerm::NotEquals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = term.split_once("==") {
                LabelTerm::Equals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = term.split_once('=') {
                LabelTerm::Equals(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, set)) = term.split_once(" notin ") {
                LabelTerm::NotIn(k.trim().to_string(), set_values(set).ok_or_else(bad)?)
            } else if let Some((k, set)) = term.split_once(" in ") {
                LabelTerm::In(k.trim().to_string(), set_values(set).ok_or_else(bad)?)
            } else if term.contains(' ') {
                return Err(bad());
            } else {
                LabelTerm::Exists(term.to_string())
            };
            terms.push(parsed);
        }
        Ok(LabelSelector(terms))
    }

    /// `app=X` of the selector, for the indexes of a large fake cluster.
    pub fn equals(&self, key: &str) -> Option<&str> {
        self.0.iter().find_map(|t| match t {
            LabelTerm::Equals(k, v) if k == key => Some(v.as_str()),
            _ => None,
        })
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|t| match t {
            LabelTerm::Equals(k, v) => get(k) == Some(v.as_str()),
            LabelTerm::NotEquals(k, v) => get(k) != Some(v.as_str()),
            LabelTerm::In(k, set) => get(k).is_some_and(|v| set.iter().any(|s| s == v)),
            LabelTerm::NotIn(k, set) => get(k).is_none_or(|v| set.iter().all(|s| s != v)),
            LabelTerm::Exists(k) => get(k).is_some(),
            LabelTerm::Absent(k) => get(k).is_none(),
        })
    }
}

/// Splits at commas outside parentheses (`a in (x,y),b=c`).
fn split_terms(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0_i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn set_values(set: &str) -> Option<Vec<String>> {
    let inner = set.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').map(|v| v.trim().to_string()).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pod_field_selectors_as_the_api_reads_them() {
        let pod = json!({"metadata": {"name": "a", "namespace": "app"},
                         "spec": {"nodeName": "node-1"},
                         "status": {"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}});
        let sel = |s: &str| FieldSelector::parse(s, Kind::Pod).expect("valid");
        assert!(sel("spec.nodeName=node-1").matches(&pod));
        assert!(!sel("spec.nodeName=node-2").matches(&pod));
        assert!(sel("status.podIP=10.0.0.1").matches(&pod));
        assert!(!sel("status.podIP=fd00::1").matches(&pod));
        assert!(sel("status.podIPs=fd00::1").matches(&pod));
        assert!(sel("metadata.namespace!=kube-system,metadata.name==a").matches(&pod));
        assert!(FieldSelector::parse("spec.containers=x", Kind::Pod).is_err());
        assert!(FieldSelector::parse("spec.nodeName=x", Kind::Service).is_err());
    }

    #[test]
    fn label_selectors_every_operator() {
        let pod = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let sel = |s: &str| LabelSelector::parse(s).expect("valid");
        assert!(sel("app=web,tier").matches(&pod));
        assert!(sel("app in (web,api),!canary").matches(&pod));
        assert!(!sel("app notin (web)").matches(&pod));
        assert!(!sel("tier!=front").matches(&pod));
        assert!(LabelSelector::parse("app in web").is_err());
    }
}
