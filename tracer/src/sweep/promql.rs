//! The `PromQL` the sweep and the Cluster view ask, in one place, so each finding can give the query
//! that produced it (to paste into Grafana).
//!
//! Counters are read as their growth over the window, counting a series born in the window from
//! zero (`increase()` would miss the events before its first sample: a black hole's series appears
//! at its first connect). "How long ago" is the last evaluation, at `step` resolution over the
//! window, where a series grew or was born.
use std::fmt::Write as _;

use super::{ConnectFinding, DnsFinding, ReplyFinding, StaleFinding};
use crate::verdict::ClusterVerdictKind;

macro_rules! failing {
    () => {
        "unanswered|abandoned|timed_out|unreachable|refused|failed"
    };
}

/// Verdicts of `tracer_connects_total` that are failures, black holes first.
pub const FAILING: &str = failing!();

/// The failing connects, and what each finding groups by.
pub const CONNECTS: &str = concat!("tracer_connects_total{verdict=~\"", failing!(), "\"}");
pub const CONNECTS_BY: &str =
    "node, verdict, dst, service, backend, dst_service, dst_node, cluster_verdict";
pub const DNS_LOST: &str = "tracer_dns_queries_total{verdict=~\"unanswered|refused\"}";
pub const DNS_STUCK: &str = "tracer_dns_stuck_sockets_total";
pub const DNS_BY: &str = "node, server, service";
pub const REPLIES: &str = "tracer_replies_lost_total";
pub const REPLIES_BY: &str = "node, local, local_service, peer_node, cluster_verdict";
pub const STALE: &str =
    "max by (node, source, service, backend, reason) (tracer_stale_datapath_entries == 1)";

/// A counter's growth over `window`.
pub fn growth(selector: &str, window: &str) -> String {
    format!(
        "(max_over_time({selector}[{window}]) - (({selector} offset {window}) or \
         (max_over_time({selector}[{window}]) * 0)))"
    )
}

/// The growth summed by `by`, only where it grew.
pub fn grown_by(by: &str, selector: &str, window: &str) -> String {
    format!("sum by ({by}) ({}) > 0", growth(selector, window))
}

/// Seconds since each series (summed by `by`) last grew or was born, within `window`.
pub fn since_growth(by: &str, selector: &str, window: &str, step: &str) -> String {
    let grew = format!(
        "(({selector} > ({selector} offset {step})) or ({selector} unless ({selector} offset {step})))"
    );
    format!("time() - max by ({by}) (max_over_time(timestamp({grew})[{window}:{step}]))")
}

/// A label value as a `PromQL` string.
pub fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `metric{a="x",b=""}`: exact matchers (an empty value matches a series without the label).
fn selector(metric: &str, matchers: &[(&str, &str)]) -> String {
    let mut s = format!("{metric}{{");
    for (i, (label, value)) in matchers.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{label}={}", quote(value));
    }
    s.push('}');
    s
}

/// The failing connects of one finding, by node.
pub fn connect_row(f: &ConnectFinding, window: &str) -> String {
    let mut s = format!(
        "tracer_connects_total{{verdict=~{},dst={}",
        quote(f.failure.verdicts()),
        quote(&f.dst)
    );
    for (label, value) in [
        ("service", f.service.as_deref()),
        ("backend", f.backend.as_deref()),
        (
            "cluster_verdict",
            f.cluster_verdict.map(ClusterVerdictKind::name),
        ),
    ] {
        let _ = write!(s, ",{label}={}", quote(value.unwrap_or("")));
    }
    s.push('}');
    grown_by("node", &s, window)
}

/// The lost DNS queries to one server, by node.
pub fn dns_row(f: &DnsFinding, window: &str) -> String {
    let sel = format!(
        "tracer_dns_queries_total{{verdict=~\"unanswered|refused\",server={},service={}}}",
        quote(&f.server),
        quote(f.service.as_deref().unwrap_or(""))
    );
    grown_by("node", &sel, window)
}

/// The sockets stuck on one DNS server, by node.
pub fn stuck_row(f: &DnsFinding, window: &str) -> String {
    let sel = selector(
        "tracer_dns_stuck_sockets_total",
        &[
            ("server", &f.server),
            ("service", f.service.as_deref().unwrap_or("")),
        ],
    );
    grown_by("node", &sel, window)
}

/// One server's lost replies, by node and the node they went to.
pub fn reply_row(f: &ReplyFinding, window: &str) -> String {
    let sel = selector(
        "tracer_replies_lost_total",
        &[
            ("local", &f.local),
            ("peer_node", f.peer_node.as_deref().unwrap_or("")),
        ],
    );
    grown_by("node, peer_node", &sel, window)
}

/// One stale Service rule, by the nodes holding it now.
pub fn stale_row(f: &StaleFinding) -> String {
    let sel = selector(
        "tracer_stale_datapath_entries",
        &[("service", &f.service), ("backend", &f.backend)],
    );
    format!("max by (node, source) ({sel} == 1)")
}

/// Nodes whose tracer is scraped now, and targets that do not answer.
pub const TRACERS_NOW: &str = "max by (node, instance) (tracer_build_info)";
pub const TARGETS_DOWN: &str = "max by (instance) (up == 0)";
pub const DEGRADED: &str =
    "max by (node, capability, state) (tracer_kernel_capability{state=~\"degraded|off\"})";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_quoted_for_promql() {
        assert_eq!(quote("app/web"), "\"app/web\"");
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(selector("m", &[("a", "x"), ("b", "")]), "m{a=\"x\",b=\"\"}");
    }

    #[test]
    fn growth_counts_a_series_born_in_the_window_from_zero() {
        assert_eq!(
            growth("m", "5m"),
            "(max_over_time(m[5m]) - ((m offset 5m) or (max_over_time(m[5m]) * 0)))"
        );
        let since = since_growth("node", "m", "5m", "15s");
        assert!(since.starts_with("time() - max by (node) (max_over_time(timestamp("));
        assert!(since.ends_with(")[5m:15s]))"), "{since}");
    }
}
