use super::*;

fn sample(labels: &[(&str, &str)], value: f64) -> Sample {
    Sample {
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
        value,
    }
}

fn black_hole(node: &str, n: f64) -> Sample {
    sample(
        &[
            ("node", node),
            ("verdict", "abandoned"),
            ("dst", "10.96.0.10:80"),
            ("service", "10.96.0.10:80"),
            ("backend", "10.244.1.30:8080"),
            ("cluster_verdict", "backend is no live pod"),
        ],
        n,
    )
}

fn share(backend: &str, verdict: &str, n: f64) -> Sample {
    sample(
        &[
            ("service", "10.96.0.10:80"),
            ("backend", backend),
            ("verdict", verdict),
        ],
        n,
    )
}

fn stale(node: &str, source: &str) -> Sample {
    sample(
        &[
            ("node", node),
            ("source", source),
            ("service", "10.96.0.10:80"),
            ("backend", "10.244.1.30:8080"),
            ("reason", "its pod is gone"),
        ],
        1.0,
    )
}

fn ten_nodes() -> Vec<String> {
    (1..=10).map(|i| format!("node-{i}")).collect()
}

#[test]
fn three_of_ten_nodes_in_one_line_with_the_shares() {
    let fails = [
        black_hole("node-9", 4.0),
        black_hole("node-3", 5.0),
        black_hole("node-7", 6.0),
    ];
    let shares = [
        share("10.244.1.30:8080", "abandoned", 15.0),
        share("10.244.1.11:8080", "established", 45.0),
    ];
    let sweep = Sweep {
        prometheus: "http://127.0.0.1:9090".into(),
        window_s: 600,
        nodes: ten_nodes(),
        connects: connect_findings(&fails, &shares),
        dns: dns_findings(
            &[sample(
                &[
                    ("node", "node-10"),
                    ("server", "10.244.2.5:53"),
                    ("service", "10.96.0.53:53"),
                ],
                3.0,
            )],
            &[],
        ),
        stale_datapath: stale_findings(&[
            stale("node-7", "iptables"),
            stale("node-3", "iptables"),
            stale("node-9", "nftables"),
        ]),
        replies_lost: reply_findings(&[sample(
            &[
                ("node", "node-2"),
                ("local", "10.244.2.7:8080"),
                ("cluster_verdict", "peer node is gone"),
            ],
            2.0,
        )]),
        tracers: tracer_problems(
            &[
                sample(&[("node", "node-1"), ("instance", "a:9090")], 1.0),
                sample(&[("node", "node-2"), ("instance", "b:9090")], 1.0),
            ],
            &[sample(&[("node", "node-1"), ("instance", "a:9090")], 1.0)],
            &[sample(&[("instance", "b:9090")], 0.0)],
            &[],
            &[sample(
                &[("node", "node-4"), ("capability", "dns"), ("state", "off")],
                1.0,
            )],
        ),
    };
    let text = format_text(&sweep);
    assert_eq!(
        text,
        "Sweep of http://127.0.0.1:9090: 10 nodes with a tracer over the last 10m\n\
         \n\
         Connects failing\n\
         10.96.0.10:80 -> 10.244.1.30:8080 (no live pod): black holes from 3 of 10 nodes: node-3, node-7, node-9\n\
         \x20 15 connects; failing: 100% of this backend's, 25% of the Service's\n\
         \n\
         DNS servers losing queries\n\
         10.96.0.53:53 -> 10.244.2.5:53: 3 queries lost from 1 of 10 nodes: node-10 (3)\n\
         \n\
         Service rules no EndpointSlice backs\n\
         10.96.0.10:80 -> 10.244.1.30:8080 (its pod is gone): held by 3 of 10 nodes: node-3, node-7, node-9 (iptables, nftables)\n\
         \n\
         Replies never acknowledged (server side)\n\
         10.244.2.7:8080 (peer node is gone): 2 connections from 1 of 10 nodes: node-2 (2)\n\
         \n\
         Tracers missing, down or degraded\n\
         node-2: down: its endpoint b:9090 does not answer scrapes\n\
         node-4: degraded: dns off\n"
    );
    let json = serde_json::to_value(&sweep).expect("json");
    assert_eq!(json["connects"][0]["nodes"][0]["node"], "node-3");
    assert_eq!(json["connects"][0]["backend_failing_share"], 1.0);
}

#[test]
fn nodes_sort_naturally_and_nothing_found_says_none() {
    let sweep = Sweep {
        prometheus: "http://p:9090".into(),
        window_s: 60,
        nodes: sorted_nodes(
            ["node-10", "node-2", "node-1"]
                .into_iter()
                .map(String::from),
        ),
        ..Sweep::default()
    };
    assert_eq!(sweep.nodes, ["node-1", "node-2", "node-10"]);
    let text = format_text(&sweep);
    assert_eq!(text.matches("  none\n").count(), 5, "{text}");
}
