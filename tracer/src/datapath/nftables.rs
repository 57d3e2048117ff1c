//! kube-proxy's nftables mode, read from `nft -j list table ip kube-proxy` in the node's namespace.
//!
//! The layout (kube-proxy `pkg/proxy/nftables/proxier.go`, as its `proxier_test.go` expects it in
//! Kubernetes 1.31 to 1.33):
//! ```text
//! add element ip kube-proxy service-ips { 172.30.0.41 . tcp . 80 : goto service-ULMVA6XW-ns1/svc1/tcp/p80 }
//! add rule ip kube-proxy service-ULMVA6XW-ns1/svc1/tcp/p80 numgen random mod 1 vmap { 0 : goto endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 }
//! add rule ip kube-proxy endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 meta l4proto tcp dnat to 10.180.0.1:80
//! ```
//! A Service address is an element of the `service-ips` map; its backends are the `dnat` targets
//! reachable from the chain the element jumps to (`service-*`, or `external-*` then `service-*`),
//! each found in the chain that holds the `dnat` (`endpoint-*`). The JSON document is read into
//! the types below; the rule expressions, a tree of many shapes, are searched for the two
//! statements that matter (`goto`/`jump` and `dnat`). IPv4 only (`table ip6 kube-proxy` is not read).
use std::{
    collections::{HashMap, HashSet},
    net::{IpAddr, SocketAddr},
};

use serde::Deserialize;
use serde_json::Value;

use super::{Entry, Reader, Source, Unread, parse_proto, run_tool};

const TABLE: &str = "kube-proxy";
const SERVICE_IPS: &str = "service-ips";

pub struct Nftables;

impl Reader for Nftables {
    fn source(&self) -> Source {
        Source::Nftables
    }

    fn read(&self) -> Result<Vec<Entry>, Unread> {
        let json = match run_tool("nft", &["-j", "list", "table", "ip", TABLE]) {
            Err(Unread::Failed(why)) if why.contains("No such file or directory") => {
                return Err(Unread::Absent(
                    "no `table ip kube-proxy`: kube-proxy's nftables mode is not in use".into(),
                ));
            }
            other => other?,
        };
        entries(&json).map_err(|e| Unread::Failed(format!("`nft -j` output not understood: {e}")))
    }
}

/// `{"nftables": [ {"metainfo": ...}, {"table": ...}, {"map": ...}, {"chain": ...}, {"rule": ...} ]}`.
#[derive(Debug, Deserialize)]
struct Ruleset {
    nftables: Vec<Object>,
}

/// One object of the list; only maps and rules matter.
#[derive(Debug, Deserialize)]
struct Object {
    map: Option<Map>,
    rule: Option<Rule>,
}

#[derive(Debug, Deserialize)]
struct Map {
    name: String,
    /// `[key, value]` pairs; a `service-ips` key is `{"concat": [addr, proto, port]}`.
    #[serde(default)]
    elem: Vec<Value>,
}

#[derive(Debug, Deserialize)]
struct Rule {
    chain: String,
    #[serde(default)]
    expr: Vec<Value>,
}

/// `{"goto": {"target": ...}}` or `{"jump": {"target": ...}}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Verdict {
    Goto { target: String },
    Jump { target: String },
}

impl Verdict {
    fn target(self) -> String {
        match self {
            Verdict::Goto { target } | Verdict::Jump { target } => target,
        }
    }
}

/// `{"dnat": {"addr": "10.180.0.1", "port": 80}}`.
#[derive(Debug, Deserialize)]
struct Dnat {
    addr: IpAddr,
    port: Option<u16>,
}

/// What one chain does: where it goes next, and where it DNATs.
#[derive(Debug, Default)]
struct Chain {
    next: Vec<String>,
    dnat: Vec<Dnat>,
}

/// Every (Service address -> backend) the table DNATs, once per chain that holds it.
pub fn entries(json: &str) -> Result<Vec<Entry>, serde_json::Error> {
    let ruleset: Ruleset = serde_json::from_str(json)?;
    let mut chains: HashMap<String, Chain> = HashMap::new();
    let mut service_ips = Vec::new();
    for object in ruleset.nftables {
        if let Some(rule) = object.rule {
            let chain = chains.entry(rule.chain).or_default();
            for statement in &rule.expr {
                collect(statement, chain);
            }
        } else if let Some(map) = object.map
            && map.name == SERVICE_IPS
        {
            service_ips = map.elem;
        }
    }
    let mut out = Vec::new();
    for element in service_ips {
        let Some([key, value]) = element.as_array().map(Vec::as_slice) else {
            continue;
        };
        let Some((ip, proto, port)) = service_key(key) else {
            continue;
        };
        let Ok(start) = serde_json::from_value::<Verdict>(value.clone()) else {
            continue;
        };
        let start = start.target();
        let service = SocketAddr::new(ip, port);
        let hint = name_of_chain(&start);
        let mut visited = HashSet::new();
        let mut todo = vec![start];
        while let Some(name) = todo.pop() {
            if !visited.insert(name.clone()) {
                continue;
            }
            let Some(chain) = chains.get(&name) else {
                continue;
            };
            for dnat in &chain.dnat {
                out.push(Entry {
                    service,
                    proto,
                    backend: SocketAddr::new(dnat.addr, dnat.port.unwrap_or(port)),
                    location: name.clone(),
                    name_hint: hint.clone(),
                });
            }
            todo.extend(chain.next.iter().cloned());
        }
    }
    Ok(out)
}

/// Every `goto`/`jump` target and `dnat` anywhere in one statement (a `vmap`'s verdicts included).
fn collect(value: &Value, chain: &mut Chain) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match key.as_str() {
                    "goto" | "jump" => {
                        if let Some(target) = inner.get("target").and_then(Value::as_str) {
                            chain.next.push(target.to_string());
                        }
                    }
                    "dnat" => {
                        if let Ok(dnat) = serde_json::from_value::<Dnat>(inner.clone()) {
                            chain.dnat.push(dnat);
                        }
                    }
                    _ => collect(inner, chain),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect(v, chain)),
        _ => {}
    }
}

/// `{"concat": ["172.30.0.41", "tcp", 80]}`.
fn service_key(key: &Value) -> Option<(IpAddr, crate::identity::cluster::Proto, u16)> {
    let parts = key.get("concat")?.as_array()?;
    let [ip, proto, port] = parts.as_slice() else {
        return None;
    };
    let ip = ip.as_str()?.parse().ok()?;
    let proto = parse_proto(proto.as_str()?)?;
    let port = match port {
        Value::Number(n) => u16::try_from(n.as_u64()?).ok()?,
        Value::String(s) => s.parse().ok()?,
        _ => return None,
    };
    Some((ip, proto, port))
}

/// `service-ULMVA6XW-ns1/svc1/tcp/p80` -> `ns1/svc1` (kube-proxy's chain names carry the Service).
fn name_of_chain(chain: &str) -> Option<String> {
    let (_, rest) = chain.split_once('-')?;
    let (_hash, rest) = rest.split_once('-')?;
    let mut parts = rest.split('/');
    let (namespace, name) = (parts.next()?, parts.next()?);
    (!namespace.is_empty() && !name.is_empty()).then(|| format!("{namespace}/{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `nft -j list table ip kube-proxy` printed here (nftables v1.0.6) after `nft -f` of
    /// kube-proxy's rules for one Service with two endpoints.
    const LISTING: &str = include_str!("../../tests/fixtures/datapath/kube-proxy.nft.json");

    #[test]
    fn each_service_ips_element_maps_to_the_dnat_of_its_endpoint_chains() {
        let mut found = entries(LISTING).expect("parses");
        found.sort_by_key(|e| e.backend);
        let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "TCP 172.30.0.41:80 -> 10.180.0.1:80 endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80 Some(\"ns1/svc1\")",
                "TCP 172.30.0.41:80 -> 10.180.0.2:80 endpoint-AAAAAAAA-ns1/svc1/tcp/p80__10.180.0.2/80 Some(\"ns1/svc1\")",
            ]
        );
    }

    #[test]
    fn a_document_of_another_shape_is_an_error_not_a_panic() {
        assert!(entries("{}").is_err());
        assert!(entries(r#"{"nftables": []}"#).expect("empty").is_empty());
        // Unknown objects and statements are skipped.
        let odd = r#"{"nftables": [{"set": {"name": "x"}}, {"map": {"name": "service-ips", "elem": [[{"concat": ["bad", "tcp", 80]}, {"goto": {"target": "s"}}], [1, 2]]}}]}"#;
        assert!(entries(odd).expect("odd elements skipped").is_empty());
    }

    #[test]
    fn chain_names_give_the_service() {
        assert_eq!(
            name_of_chain("service-ULMVA6XW-ns1/svc1/tcp/p80").as_deref(),
            Some("ns1/svc1")
        );
        assert_eq!(
            name_of_chain("external-42NFTM6N-ns2/svc2/tcp/p80").as_deref(),
            Some("ns2/svc2")
        );
        assert_eq!(name_of_chain("services"), None);
    }
}
