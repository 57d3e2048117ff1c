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
        half_open: Vec::new(),
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
         Half-open: clients fail, the backend's replies are lost on the way back\n\
         \x20 none\n\
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
    assert_eq!(text.matches("  none\n").count(), 6, "{text}");
}

/// The clients' half (node-1 and node-2 dial node-4's `NodePort` of app/web and see black holes) and
/// the server's half (node-5's pod of app/web loses its replies towards node-4).
fn half_open_samples() -> (Vec<Sample>, Vec<Sample>) {
    let client = |node: &str, verdict: &str, n: f64| {
        sample(
            &[
                ("node", node),
                ("verdict", verdict),
                ("dst", "10.0.0.4:30080"),
                ("dst_service", "app/web"),
                ("dst_node", "node-4"),
            ],
            n,
        )
    };
    let fails = vec![
        client("node-1", "abandoned", 5.0),
        client("node-2", "timed_out", 4.0),
        black_hole("node-3", 2.0),
    ];
    let replies = vec![sample(
        &[
            ("node", "node-5"),
            ("local", "10.244.5.2:8080"),
            ("local_service", "app/web"),
            ("peer_node", "node-4"),
            ("cluster_verdict", "peer node is NotReady"),
        ],
        7.0,
    )];
    (fails, replies)
}

#[test]
fn both_halves_of_a_half_open_flow_are_one_finding() {
    let (fails, replies) = half_open_samples();
    let mut connects = connect_findings(&fails, &[]);
    let mut replies_lost = reply_findings(&replies);
    let half_open = half_open::join(&mut connects, &mut replies_lost);
    assert_eq!(half_open.len(), 1, "{half_open:?}");
    let h = &half_open[0];
    assert_eq!(h.service.as_deref(), Some("app/web"));
    assert_eq!(h.dialed, ["10.0.0.4:30080"]);
    assert_eq!(h.backend, "10.244.5.2:8080");
    assert_eq!(h.peer_node, "node-4");
    assert_eq!(h.peer_node_state.as_deref(), Some("NotReady"));
    assert_eq!(
        h.client_nodes,
        [
            NodeCount {
                node: "node-1".into(),
                count: 5
            },
            NodeCount {
                node: "node-2".into(),
                count: 4
            }
        ]
    );
    assert_eq!((h.connects, h.replies_lost), (9, 7));
    assert_eq!(
        connects.len(),
        1,
        "the unrelated black hole stays: {connects:?}"
    );
    assert_eq!(connects[0].nodes[0].node, "node-3");
    assert!(replies_lost.is_empty(), "shown once, joined");
    let sweep = Sweep {
        prometheus: "http://p:9090".into(),
        window_s: 600,
        nodes: (1..=6).map(|i| format!("node-{i}")).collect(),
        half_open,
        connects,
        replies_lost,
        ..Sweep::default()
    };
    let text = format_text(&sweep);
    assert!(
        text.contains(
            "\nHalf-open: clients fail, the backend's replies are lost on the way back\n\
             app/web 10.0.0.4:30080 -> 10.244.5.2:8080 on node-5: black holes from 2 of 6 nodes: \
             node-1, node-2; its replies are lost towards node node-4 (NotReady)\n\
             \x20 9 connects failing: node-1 (5), node-2 (4); 7 connections' replies never \
             acknowledged: node-5 (7)\n"
        ),
        "{text}"
    );
    let json = serde_json::to_value(&sweep).expect("json");
    assert_eq!(json["half_open"][0]["peer_node"], "node-4");
    assert_eq!(json["half_open"][0]["backend_nodes"][0]["node"], "node-5");
    assert!(json["half_open"][0].get("last_grew_s").is_none());
}

#[test]
fn halves_without_names_or_of_other_services_stay_apart() {
    let (fails, mut replies) = half_open_samples();
    // Another Service's pod losing replies towards node-4: not what the clients dialled.
    replies[0]
        .labels
        .insert("local_service".into(), "app/other".into());
    let mut connects = connect_findings(&fails, &[]);
    let mut lost = reply_findings(&replies);
    assert!(half_open::join(&mut connects, &mut lost).is_empty());
    // No cluster state on the server's tracer: no peer node to join on.
    replies[0].labels.remove("peer_node");
    replies[0]
        .labels
        .insert("local_service".into(), "app/web".into());
    let mut lost = reply_findings(&replies);
    assert!(half_open::join(&mut connects, &mut lost).is_empty());
    assert_eq!((connects.len(), lost.len()), (2, 1));
}

#[test]
fn a_connect_translated_and_snatted_on_the_clients_node_joins_its_backend() {
    // kube-proxy on node-1 DNATs the Service to node-5's pod and masquerades: the replies go back
    // to node-1's address.
    let fails = [sample(
        &[
            ("node", "node-1"),
            ("verdict", "timed_out"),
            ("dst", "10.96.0.20:80"),
            ("service", "10.96.0.20:80"),
            ("backend", "10.244.5.2:8080"),
        ],
        3.0,
    )];
    let replies = [sample(
        &[
            ("node", "node-5"),
            ("local", "10.244.5.2:8080"),
            ("peer_node", "node-1"),
        ],
        3.0,
    )];
    let mut connects = connect_findings(&fails, &[]);
    let mut lost = reply_findings(&replies);
    let half_open = half_open::join(&mut connects, &mut lost);
    assert_eq!(half_open.len(), 1);
    assert_eq!(half_open[0].dialed, ["10.96.0.20:80"]);
    assert_eq!(half_open[0].peer_node, "node-1");
}
