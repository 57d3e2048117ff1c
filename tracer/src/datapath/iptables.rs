//! kube-proxy's iptables mode, read from `iptables-save -t nat` in the node's namespace.
//!
//! The layout (kube-proxy `pkg/proxy/iptables/proxier.go`, as its `proxier_test.go` expects it in
//! Kubernetes 1.29 to 1.33; `iptables-save` prints the matches in its own order):
//! ```text
//! -A KUBE-SERVICES -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
//! -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-SXIVWICOYRO3J4NJ
//! -A KUBE-SEP-SXIVWICOYRO3J4NJ -p tcp -m comment --comment ns1/svc1:p80 -m tcp -j DNAT --to-destination 10.180.0.1:80
//! ```
//! A Service address is a `KUBE-SERVICES` rule matching a destination address and port; its
//! backends are the DNAT targets reachable from the chain it jumps to (`KUBE-SVC-*`, `KUBE-SVL-*`,
//! `KUBE-EXT-*`, through session-affinity rules too), each found in the chain that holds the DNAT
//! (`KUBE-SEP-*`). IPv4 only (`ip6tables-save` is not read).
use std::{
    collections::{HashMap, HashSet},
    net::{IpAddr, SocketAddr},
};

use super::{Entry, Reader, Source, Unread, parse_proto, run_tool, service_of_port_name};
use crate::identity::cluster::Proto;

/// The chain kube-proxy hangs every Service address on.
const SERVICES_CHAIN: &str = "KUBE-SERVICES";

pub struct Iptables;

impl Reader for Iptables {
    fn source(&self) -> Source {
        Source::Iptables
    }

    fn read(&self) -> Result<Vec<Entry>, Unread> {
        let text = run_tool("iptables-save", &["-t", "nat"])?;
        if !text.lines().any(|l| l.starts_with(":KUBE-SERVICES ")) {
            return Err(Unread::Absent(
                "no KUBE-SERVICES chain in the nat table: kube-proxy's iptables mode is not in use"
                    .into(),
            ));
        }
        Ok(entries(&text))
    }
}

/// One `-A` line, the parts that matter here.
#[derive(Debug, Default, PartialEq)]
struct Rule {
    chain: String,
    dst: Option<IpAddr>,
    proto: Option<Proto>,
    dport: Option<u16>,
    jump: Option<String>,
    to_destination: Option<String>,
    comment: Option<String>,
}

/// Every (Service address -> backend) the rules DNAT, once per chain that holds it.
pub fn entries(save: &str) -> Vec<Entry> {
    let mut chains: HashMap<String, Vec<Rule>> = HashMap::new();
    for rule in save.lines().filter_map(parse_rule) {
        chains.entry(rule.chain.clone()).or_default().push(rule);
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for rule in chains.get(SERVICES_CHAIN).map_or(&[][..], Vec::as_slice) {
        let (Some(ip), Some(port), Some(target)) = (rule.dst, rule.dport, &rule.jump) else {
            continue;
        };
        let service = SocketAddr::new(ip, port);
        let proto = rule.proto.unwrap_or(Proto::Tcp);
        let hint = rule.comment.as_deref().and_then(service_of_port_name);
        let mut visited = HashSet::new();
        walk(&chains, target, &mut visited, &mut |chain, rule| {
            let Some(backend) = rule
                .to_destination
                .as_deref()
                .and_then(|d| destination(d, port))
            else {
                return;
            };
            let entry = Entry {
                service,
                proto: rule.proto.unwrap_or(proto),
                backend,
                location: chain.to_string(),
                name_hint: hint
                    .clone()
                    .or_else(|| rule.comment.as_deref().and_then(service_of_port_name)),
            };
            if seen.insert((entry.service, entry.backend, entry.location.clone())) {
                out.push(entry);
            }
        });
    }
    out
}

/// Visits every DNAT rule reachable from `chain`, each chain once.
fn walk(
    chains: &HashMap<String, Vec<Rule>>,
    chain: &str,
    visited: &mut HashSet<String>,
    found: &mut impl FnMut(&str, &Rule),
) {
    if !visited.insert(chain.to_string()) {
        return;
    }
    let Some(rules) = chains.get(chain) else {
        return;
    };
    for rule in rules {
        match rule.jump.as_deref() {
            Some("DNAT") => found(chain, rule),
            Some(next) => walk(chains, next, visited, found),
            None => {}
        }
    }
}

/// `10.180.0.1:80`, `[fd00::1]:80`, or an address alone (the port unchanged).
fn destination(text: &str, service_port: u16) -> Option<SocketAddr> {
    // A range (`a-b`) is not what kube-proxy writes; its first address is as good a guess as any.
    let text = text.split('-').next()?;
    text.parse().ok().or_else(|| {
        text.parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, service_port))
    })
}

/// `10.96.0.10/32` or `10.96.0.10`: one address; a wider prefix is no Service address.
fn single_address(text: &str) -> Option<IpAddr> {
    let (ip, len) = match text.split_once('/') {
        Some((ip, len)) => (ip, Some(len)),
        None => (text, None),
    };
    let ip: IpAddr = ip.parse().ok()?;
    match (ip, len) {
        (_, None) | (IpAddr::V4(_), Some("32")) | (IpAddr::V6(_), Some("128")) => Some(ip),
        _ => None,
    }
}

fn parse_rule(line: &str) -> Option<Rule> {
    let words = split_words(line.strip_prefix("-A ")?)?;
    let mut words = words.into_iter();
    let mut rule = Rule {
        chain: words.next()?,
        ..Rule::default()
    };
    let mut negated = false;
    while let Some(word) = words.next() {
        if word == "!" {
            negated = true;
            continue;
        }
        let mut value = || words.next();
        match word.as_str() {
            "-d" | "--destination" => {
                let v = value()?;
                if !negated {
                    rule.dst = single_address(&v);
                }
            }
            "-p" | "--protocol" => {
                let v = value()?;
                if !negated {
                    rule.proto = parse_proto(&v);
                }
            }
            "--dport" | "--destination-port" => {
                let v = value()?;
                if !negated {
                    rule.dport = v.parse().ok();
                }
            }
            "-j" | "--jump" | "-g" | "--goto" => rule.jump = Some(value()?),
            "--to-destination" => rule.to_destination = Some(value()?),
            "--comment" => rule.comment = Some(value()?),
            _ => {}
        }
        negated = false;
    }
    Some(rule)
}

/// Words as `iptables-save` quotes them: `"..."` with `\"` and `\\` inside.
fn split_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else {
            return Some(words);
        };
        let mut word = String::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => word.push(chars.next()?),
                    c => word.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
        }
        words.push(word);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `iptables-save -t nat` printed here (iptables v1.8.9, `nf_tables`) after
    /// `iptables-restore` of kube-proxy's rules for one Service with a live and a stale backend, a
    /// session-affinity rule included.
    const SAVE: &str = include_str!("../../tests/fixtures/datapath/kube-proxy.iptables-save.txt");

    #[test]
    fn a_service_address_maps_to_each_dnat_target_in_its_sep_chain() {
        let mut found = entries(SAVE);
        found.sort_by(|a, b| a.location.cmp(&b.location));
        let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "TCP 10.96.0.10:80 -> 10.244.1.30:8080 KUBE-SEP-DEAD0000000000BB Some(\"app/web\")",
                "TCP 10.96.0.10:80 -> 10.244.1.11:8080 KUBE-SEP-LIVE0000000000AA Some(\"app/web\")",
            ],
            "one entry per SEP chain, the affinity rule's jump not counted twice"
        );
    }

    #[test]
    fn quoted_words_and_negations_are_read_as_iptables_save_writes_them() {
        let rule = parse_rule(
            r#"-A KUBE-SERVICES ! -d 10.0.0.0/8 -p udp -m comment --comment "kube-system/kube-dns:dns \"x\"" -m udp --dport 53 -j KUBE-SVC-TCOU7JCQXEZGVUNU"#,
        )
        .expect("a rule");
        assert_eq!(
            rule.dst, None,
            "a negated destination is no Service address"
        );
        assert_eq!(rule.proto, Some(Proto::Udp));
        assert_eq!(rule.dport, Some(53));
        assert_eq!(
            rule.comment.as_deref(),
            Some("kube-system/kube-dns:dns \"x\"")
        );
        assert_eq!(single_address("10.96.0.0/12"), None);
        assert_eq!(single_address("10.96.0.10/32"), "10.96.0.10".parse().ok());
        assert_eq!(single_address("10.96.0.10"), "10.96.0.10".parse().ok());
    }

    #[test]
    fn rules_without_kube_proxy_chains_give_nothing_and_garbage_does_not_panic() {
        assert!(entries("*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n").is_empty());
        assert!(
            entries("-A KUBE-SERVICES -d \"unterminated\n-A\n-A KUBE-SERVICES -j\n").is_empty()
        );
        // A chain that jumps to itself is walked once.
        let cycle = "-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp --dport 443 -j KUBE-SVC-A\n\
                     -A KUBE-SVC-A -j KUBE-SVC-A\n";
        assert!(entries(cycle).is_empty());
    }
}
