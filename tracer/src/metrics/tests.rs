use std::net::SocketAddr;

use prometheus_client::encoding::text::encode;

use super::*;
use crate::{
    clock::Timestamp,
    identity::Identity,
    record::{BackendShare, Dropped, HookTier, HookTiers, SideTier},
    verdict::{Verdict, VerdictKind},
};

fn connect(dst: &str, verdict: Verdict) -> Record {
    Record::Connect(ConnectRecord {
        time: Timestamp(std::time::SystemTime::UNIX_EPOCH),
        verdict,
        is_final: true,
        src: "10.0.0.1:40000".parse().expect("addr"),
        dst: dst.parse().expect("addr"),
        dialed: None,
        service: Some("10.96.0.10:80".parse().expect("addr")),
        backend: Some(dst.parse().expect("addr")),
        syns: 3,
        syn_sent_ms: 2100,
        errno: None,
        pid: 1234,
        tid: 1234,
        comm: "curl".into(),
        cgroup_id: 1,
        netns: "net:[1]".into(),
        netns_inode: 1,
        flow: "f1".into(),
        explanation: String::new(),
        identity: Identity::default(),
        dns: false,
    })
}

fn text(registry: &Registry) -> String {
    let mut out = String::new();
    encode(&mut out, registry).expect("encode");
    out
}

/// The series of `name` in the text (its lines that start with it), without the sample value.
fn series<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .collect()
}

#[test]
fn a_flood_of_destinations_stays_under_the_cap_and_the_overflow_is_counted() {
    let cap = 50;
    let (mut metrics, registry) = Metrics::new("node-1", cap);
    let n = 1000;
    for i in 0..n {
        let dst = format!("10.{}.{}.{}:8080", i / 65536, (i / 256) % 256, i % 256);
        metrics.update(&connect(&dst, Verdict::Abandoned));
    }
    let (held, folded) = metrics.connect_series();
    assert_eq!(held, cap + 1, "the cap, and the one `other` series");
    assert_eq!(folded, (n - cap) as u64);
    let out = text(&registry);
    let connects = series(&out, "tracer_connects_total");
    assert_eq!(connects.len(), cap + 1, "{out}");
    let other = connects
        .iter()
        .find(|l| l.contains(r#"dst="other""#))
        .expect("an other series");
    assert!(other.ends_with(&format!(" {}", n - cap)), "{other}");
    assert!(
        out.contains(&format!(
            r#"tracer_metrics_overflow_total{{node="node-1",family="tracer_connects_total"}} {}"#,
            n - cap
        )),
        "{out}"
    );
}

#[test]
fn every_series_carries_the_node_and_no_source_port_pid_or_flow() {
    let (mut metrics, registry) = Metrics::new("node-7", DEFAULT_LABEL_SET_CAP);
    metrics.update(&connect("10.244.1.30:8080", Verdict::Abandoned));
    metrics.update(&connect("10.244.1.30:8080", Verdict::Slow));
    metrics.update(&Record::Stats(StatsRecord {
        open_flows: 4,
        attempts: 10,
        dropped: Dropped {
            ring_buffer_full: 2,
            ..Dropped::default()
        },
        ..StatsRecord::default()
    }));
    let out = text(&registry);
    for line in out.lines().filter(|l| !l.starts_with('#')) {
        assert!(line.contains(r#"node="node-7""#), "{line}");
        for forbidden in ["40000", "1234", "flow=", "pid="] {
            assert!(!line.contains(forbidden), "{line}");
        }
    }
    assert!(out.contains(
        r#"tracer_connects_total{node="node-7",verdict="abandoned",cause="",dst="10.244.1.30:8080",service="10.96.0.10:80",backend="10.244.1.30:8080",src_namespace="",src_workload="",dst_service="",dst_node="",cluster_verdict=""} 1"#
    ), "{out}");
    assert!(
        out.contains(r#"tracer_open_attempts{node="node-7"} 4"#),
        "{out}"
    );
    assert!(
        out.contains(r#"tracer_dropped_events_total{node="node-7",cause="ring_buffer_full",stage="kernel"} 2"#),
        "{out}"
    );
    assert!(
        out.contains(r#"tracer_connect_answer_seconds_bucket{node="node-7",le="3.0"} 1"#),
        "{out}"
    );
    assert!(out.contains("# TYPE tracer_build info"), "{out}");
    assert!(out.ends_with("# EOF\n"), "{out}");
}

#[test]
fn totals_from_stats_records_become_increments() {
    let (mut metrics, registry) = Metrics::new("n", DEFAULT_LABEL_SET_CAP);
    for attempts in [10, 25, 25] {
        metrics.update(&Record::Stats(StatsRecord {
            attempts,
            ..StatsRecord::default()
        }));
    }
    assert!(text(&registry).contains(r#"tracer_attempts_total{node="n"} 25"#));
}

#[test]
fn a_service_that_leaves_the_window_goes_to_zero() {
    let (mut metrics, registry) = Metrics::new("n", DEFAULT_LABEL_SET_CAP);
    let service: SocketAddr = "10.96.0.10:80".parse().expect("addr");
    let backend: SocketAddr = "10.244.1.30:8080".parse().expect("addr");
    metrics.update(&Record::Service(ServiceRecord {
        time: Timestamp(std::time::SystemTime::UNIX_EPOCH),
        service,
        window_s: 60,
        backends: vec![BackendShare {
            backend,
            verdicts: [(VerdictKind::Abandoned, 5)].into_iter().collect(),
            total: 5,
            failing: 5,
        }],
        total: 5,
        failing: 5,
        failing_share: 1.0,
        summary: String::new(),
    }));
    let line = r#"tracer_service_connects{node="n",service="10.96.0.10:80",backend="10.244.1.30:8080",verdict="abandoned"}"#;
    let stats = Record::Stats(StatsRecord::default());
    metrics.update(&stats);
    assert!(text(&registry).contains(&format!("{line} 5")));
    metrics.update(&stats);
    assert!(text(&registry).contains(&format!("{line} 0")));
}

#[test]
fn metrics_addresses_parse_or_say_what_is_expected() {
    use server::MetricsAddr;
    assert_eq!(
        ":9090".parse::<MetricsAddr>().expect("port only").0,
        "0.0.0.0:9090".parse::<SocketAddr>().expect("addr")
    );
    assert!("127.0.0.1:9090".parse::<MetricsAddr>().is_ok());
    assert!("[::1]:9090".parse::<MetricsAddr>().is_ok());
    let e = "localhost".parse::<MetricsAddr>().expect_err("no port");
    assert!(e.contains("IP:PORT"), "{e}");
}

#[test]
fn capabilities_off_by_an_option_are_disabled_not_degraded() {
    let (mut metrics, registry) = Metrics::new("n", DEFAULT_LABEL_SET_CAP);
    let off = |reason: &str| Capability::Off {
        reason: reason.into(),
    };
    let kernel = KernelInfo {
        release: "6.18.0".into(),
        capabilities: [
            ("dns".to_string(), off("--no-dns")),
            ("dns_refused".to_string(), off("DNS is off")),
            (
                "connect_errors".to_string(),
                Capability::Degraded {
                    reason: "no tracepoint".into(),
                },
            ),
        ]
        .into_iter()
        .collect(),
        hooks: HookTiers {
            tcp: SideTier {
                tier: Some(HookTier::Fentry),
                ..SideTier::default()
            },
            dns: SideTier::default(),
        },
    };
    metrics.update(&Record::Stats(StatsRecord {
        kernel: Some(kernel),
        ..StatsRecord::default()
    }));
    let out = text(&registry);
    assert!(
        out.contains(r#"tracer_kernel_capability{node="n",capability="dns",state="disabled"} 1"#),
        "{out}"
    );
    assert!(
        out.contains(r#"tracer_kernel_hooks{node="n",side="tcp",tier="fentry"} 1"#),
        "{out}"
    );
    assert!(!out.contains(r#"side="dns""#), "DNS off has no tier: {out}");
    assert!(
        out.contains(
            r#"tracer_kernel_capability{node="n",capability="dns_refused",state="disabled"} 1"#
        ),
        "{out}"
    );
    assert!(
        out.contains(r#"tracer_kernel_capabilities_degraded{node="n"} 1"#),
        "{out}"
    );
    assert!(
        out.contains(r#"tracer_kernel_info{node="n",release="6.18.0"} 1"#),
        "{out}"
    );
}

#[test]
fn lost_replies_count_at_their_end_and_stale_datapath_entries_are_a_gauge_that_goes_to_zero() {
    let (mut metrics, registry) = Metrics::new("node-1", 10);
    let line = r#"{"schema":1,"kind":"reply_lost","time":"2026-11-30T16:41:13.500Z","outcome":"timed_out","final":true,"local":"10.244.2.7:8080","peer":"10.0.1.5:37980","retransmits":6,"unacked_bytes":15928,"lost_for_ms":12800,"netns":"n","netns_inode":1,"flow":"f","explanation":"e","peer_node":"node-3","local_service":"app/web","cluster_verdict":"peer node is gone"}"#;
    let lost: crate::record::Line = serde_json::from_str(line).expect("a reply_lost line");
    let mut still_open = lost.record.clone();
    if let Record::ReplyLost(r) = &mut still_open {
        r.is_final = false;
    }
    metrics.update(&still_open);
    metrics.update(&lost.record);
    let out = text(&registry);
    assert_eq!(
        series(&out, "tracer_replies_lost_total"),
        [
            r#"tracer_replies_lost_total{node="node-1",local="10.244.2.7:8080",local_service="app/web",outcome="timed_out",handshake="false",peer_node="node-3",cluster_verdict="peer node is gone"} 1"#
        ],
        "counted once, at the end: {out}"
    );

    // A stale_datapath record as the schema documents it (docs/schema.md's example).
    let doc = include_str!("../../../docs/schema.md");
    let example = doc
        .lines()
        .find(|l| l.starts_with(r#"{"schema":1,"kind":"stale_datapath""#))
        .expect("the documented example");
    let stale: crate::record::Line = serde_json::from_str(example).expect("the example");
    stale_gauge(&mut metrics, &registry, stale.record);
}

fn stale_gauge(metrics: &mut Metrics, registry: &Registry, record: Record) {
    let Record::StaleDatapath(mut d) = record else {
        panic!("a stale_datapath record")
    };
    d.gone = false;
    metrics.update(&Record::StaleDatapath(d.clone()));
    let out = text(registry);
    let present = series(&out, "tracer_stale_datapath_entries");
    assert_eq!(present.len(), 1, "{out}");
    assert!(present[0].ends_with(" 1"), "{out}");
    d.gone = true;
    metrics.update(&Record::StaleDatapath(d));
    let out = text(registry);
    let gone = series(&out, "tracer_stale_datapath_entries");
    assert_eq!(gone.len(), 1, "{out}");
    assert!(gone[0].ends_with(" 0"), "gone: {out}");
}
