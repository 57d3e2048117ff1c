//! Reading kubectl's JSON (`kubectl get ... -o json`: a `List` or a single object) into the model,
//! item by item, with errors that name the JSON path and the item.

use std::collections::BTreeMap;

use k8s_openapi::api::{core::v1 as k8s_core, discovery::v1 as k8s_discovery};
use serde::de::DeserializeOwned;
use serde_json::{Value, value::RawValue};

use super::model::Item;
use super::state::ClusterState;

/// Failure to load cluster state.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The text is not JSON at all (or is truncated).
    #[error("malformed JSON: {0}")]
    Syntax(#[source] serde_json::Error),
    /// The JSON is well formed but a value does not have the expected shape.
    #[error("unexpected JSON shape at `{path}`{context}: {source}")]
    Shape {
        /// JSON path of the offending value, e.g. `items[3].spec.ports[0].port`.
        path: String,
        /// ` (Service app/webhooks)` when the item is known, else empty.
        context: String,
        /// What serde expected.
        #[source]
        source: serde_json::Error,
    },
    /// The document is neither a `List` with `items` nor a single
    /// Pod/Service/EndpointSlice/Node object.
    #[error("not a kubectl List or supported object: {0}")]
    NotAList(String),
}

impl ClusterState {
    /// Load from `kubectl get pods,services,endpointslices,nodes -A -o json`.
    ///
    /// Also accepts a single Pod/Service/EndpointSlice/Node object and any
    /// `*List` with `items`. Items of other kinds are ignored.
    pub fn from_kubectl_json(text: &str) -> Result<ClusterState, ClusterError> {
        // The document is read as raw slices first and each item is turned into a JSON value only
        // while it is converted: a 52 MB snapshot never lives in memory as one `Value` tree
        // (about 16 times the file), only the model it leaves.
        let doc: &RawValue = serde_json::from_str(text).map_err(ClusterError::Syntax)?;
        let Ok(top) = serde_json::from_str::<BTreeMap<String, &RawValue>>(doc.get()) else {
            let value: Value = serde_json::from_str(doc.get()).map_err(ClusterError::Syntax)?;
            return Err(ClusterError::NotAList(format!(
                "top-level value is {}, expected an object",
                json_type(&value)
            )));
        };
        let mut st = ClusterState::default();
        if let Some(items) = top.get("items") {
            let items: Vec<&RawValue> = match items.get() {
                "null" => Vec::new(),
                raw if raw.starts_with('[') => {
                    serde_json::from_str(raw).map_err(ClusterError::Syntax)?
                }
                raw => {
                    let value: Value = serde_json::from_str(raw).map_err(ClusterError::Syntax)?;
                    return Err(ClusterError::NotAList(format!(
                        "`items` is {}, expected an array",
                        json_type(&value)
                    )));
                }
            };
            for (i, raw) in items.iter().enumerate() {
                let item: Value = serde_json::from_str(raw.get()).map_err(ClusterError::Syntax)?;
                if let Some(item) = parse_item(&item, &format!("items[{i}]"))? {
                    st.push(item);
                }
            }
        } else {
            let kind = top
                .get("kind")
                .and_then(|k| serde_json::from_str::<String>(k.get()).ok());
            match kind.as_deref() {
                Some("Pod" | "Service" | "EndpointSlice" | "Node") => {
                    let item: Value =
                        serde_json::from_str(doc.get()).map_err(ClusterError::Syntax)?;
                    if let Some(item) = parse_item(&item, "")? {
                        st.push(item);
                    }
                }
                Some(kind) => {
                    return Err(ClusterError::NotAList(format!(
                        "top-level kind `{kind}` has no `items`"
                    )));
                }
                None => {
                    return Err(ClusterError::NotAList(
                        "top-level object has neither `items` nor `kind`".to_owned(),
                    ));
                }
            }
        }
        st.build_indexes();
        Ok(st)
    }
}

/// Parses one API object (as `kubectl -o json` or the API server writes it) by its `kind` into the
/// Kubernetes API type, then into the model; `Ok(None)` for kinds the model does not keep. `path`
/// names it in errors (`items[3]`).
pub fn parse_item(item: &Value, path: &str) -> Result<Option<Item>, ClusterError> {
    let kind = match item {
        Value::Object(m) => m.get("kind").and_then(Value::as_str).unwrap_or(""),
        other => {
            return Err(ClusterError::Shape {
                path: path.to_owned(),
                context: String::new(),
                source: serde::de::Error::custom(format!(
                    "invalid type: {}, expected a Kubernetes object",
                    json_type(other)
                )),
            });
        }
    };
    let converted = match kind {
        "Pod" => Item::try_from(from_item::<k8s_core::Pod>(item, path, kind)?),
        "Service" => Item::try_from(from_item::<k8s_core::Service>(item, path, kind)?),
        "EndpointSlice" => {
            Item::try_from(from_item::<k8s_discovery::EndpointSlice>(item, path, kind)?)
        }
        "Node" => Item::try_from(from_item::<k8s_core::Node>(item, path, kind)?),
        _ => return Ok(None),
    };
    converted.map(Some).map_err(|e| ClusterError::Shape {
        path: join_path(path, &e.path),
        context: context(item, kind),
        source: serde::de::Error::custom(e.message),
    })
}

/// Deserialize one item into its API type with path tracking; errors name the item.
fn from_item<T: DeserializeOwned>(item: &Value, path: &str, kind: &str) -> Result<T, ClusterError> {
    serde_path_to_error::deserialize(item).map_err(|e| {
        let inner = e.path().to_string();
        ClusterError::Shape {
            path: join_path(path, if inner == "." { "" } else { &inner }),
            context: context(item, kind),
            source: e.into_inner(),
        }
    })
}

fn join_path(outer: &str, inner: &str) -> String {
    match (outer.is_empty(), inner.is_empty()) {
        (true, _) => inner.to_owned(),
        (false, true) => outer.to_owned(),
        (false, false) => format!("{outer}.{inner}"),
    }
}

/// ` (Service app/webhooks)`: the item's kind and `namespace/name`, as far as it has them.
fn context(item: &Value, kind: &str) -> String {
    let meta = item.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str);
    let ns = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str);
    match (ns, name) {
        (Some(ns), Some(n)) => format!(" ({kind} {ns}/{n})"),
        (None, Some(n)) => format!(" ({kind} {n})"),
        _ => format!(" ({kind})"),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
