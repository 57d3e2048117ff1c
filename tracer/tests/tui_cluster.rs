//! The Cluster view (`tracer tui --prometheus URL`): whole screens from a sweep answer (the six-node
//! half-open flow of issue #28, a stale rule, a DNS server losing queries, a tracer down), the
//! detail with the `PromQL`, the keys, and the header's line when Prometheus is slow or
//! unreachable. The poller's answers are fed to the state as the app loop does.
use std::time::{Duration, SystemTime};

use ratatui::{Terminal, backend::TestBackend};
use tracer::{
    sweep::{
        ConnectFinding, DnsFinding, Failure, HalfOpenFinding, NodeCount, StaleFinding, Sweep,
        TracerProblem,
    },
    tui::{
        app,
        cluster_state::{ClusterPane, ClusterUpdate},
        state::{Action, Effect, State, View},
    },
    verdict::ClusterVerdictKind,
};

/// Any fixed instant: the screens say how long ago, from it.
fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
}

fn counts(pairs: &[(&str, u64)]) -> Vec<NodeCount> {
    pairs
        .iter()
        .map(|(node, count)| NodeCount {
            node: (*node).into(),
            count: *count,
        })
        .collect()
}

/// What the sweep of the six-node bed finds while node-4 drops the pod's replies.
fn six_nodes() -> Sweep {
    Sweep {
        prometheus: "http://127.0.0.1:9090".into(),
        window_s: 300,
        nodes: (1..=6).map(|n| format!("node-{n}")).collect(),
        half_open: vec![HalfOpenFinding {
            service: Some("app/web".into()),
            dialed: vec!["10.235.0.4:30080".into()],
            backend: "10.235.5.10:8080".into(),
            backend_nodes: counts(&[("node-5", 7)]),
            peer_node: "node-4".into(),
            peer_node_state: None,
            client_nodes: counts(&[("node-1", 5), ("node-2", 4)]),
            connects: 9,
            replies_lost: 7,
            last_grew_s: Some(3),
        }],
        connects: vec![ConnectFinding {
            failure: Failure::BlackHoles,
            service: Some("10.96.0.10:80".into()),
            backend: Some("10.244.1.30:8080".into()),
            dst: "10.96.0.10:80".into(),
            dst_service: Some("app/orders".into()),
            dst_node: None,
            cluster_verdict: Some(ClusterVerdictKind::BackendIsNoLivePod),
            nodes: counts(&[("node-3", 2)]),
            connects: 2,
            backend_failing_share: Some(1.0),
            service_failing_share: Some(0.5),
            last_grew_s: Some(240),
        }],
        dns: vec![DnsFinding {
            server: "10.235.6.53:53".into(),
            service: Some("10.96.235.53:53".into()),
            nodes: counts(&[("node-6", 12)]),
            lost: 12,
            stuck_sockets: 1,
            last_grew_s: Some(1),
        }],
        stale_datapath: vec![StaleFinding {
            service: "10.96.235.20:5432".into(),
            backend: "10.235.3.99:5432".into(),
            reason: "no EndpointSlice lists it, and no pod has it".into(),
            sources: vec!["iptables".into()],
            nodes: vec!["node-3".into()],
        }],
        replies_lost: Vec::new(),
        tracers: vec![TracerProblem {
            node: "node-6".into(),
            state: "down".into(),
            detail: "its endpoint 127.0.0.1:9306 does not answer scrapes".into(),
        }],
    }
}

fn pane() -> ClusterPane {
    ClusterPane::new(
        "http://127.0.0.1:9090",
        Duration::from_mins(5),
        Duration::from_secs(5),
    )
}

/// `--cluster-only`, after one answer that came at `at(100)`, seen at `now`.
fn cluster_only(now: SystemTime) -> State {
    let mut state = State::cluster_only("http://127.0.0.1:9090", pane());
    state.apply_cluster(ClusterUpdate::Answer {
        sweep: Box::new(six_nodes()),
        at: at(100),
    });
    state.tick(now);
    state
}

fn render(state: &mut State, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
    app::draw(&mut t, state).expect("draw");
    t
}

fn screen(t: &Terminal<TestBackend>) -> String {
    t.backend().to_string()
}

#[test]
fn the_cluster_view_ranks_the_half_open_flow_first() {
    let mut state = cluster_only(at(102));
    insta::assert_snapshot!("cluster_only_100x20", screen(&render(&mut state, 100, 20)));
    insta::assert_snapshot!("cluster_only_80x24", screen(&render(&mut state, 80, 24)));
}

#[test]
fn enter_shows_the_finding_and_the_promql_that_produced_it() {
    let mut state = cluster_only(at(102));
    state.act(Action::ToggleDetail);
    let t = render(&mut state, 100, 30);
    insta::assert_snapshot!("cluster_detail_100x30", screen(&t));
    let text = screen(&t);
    assert!(
        text.contains(r#"tracer_replies_lost_total{local="10.235.5.10:8080",peer_node="node-4"}"#),
        "{text}"
    );
    state.act(Action::Close);
    assert!(
        !state.cluster.as_ref().expect("pane").detail,
        "Esc closes it"
    );
    state.act(Action::Down);
    state.act(Action::ToggleDetail);
    let text = screen(&render(&mut state, 100, 30));
    assert!(
        text.contains("# failing connects, by node") && text.contains("cluster_verdict=\"backend"),
        "the second row's query:\n{text}"
    );
}

#[test]
fn copy_gives_the_rows_promql_as_text_to_paste() {
    let mut state = cluster_only(at(102));
    let Effect::CopyPromql(text) = state.act(Action::Copy) else {
        panic!("a row to copy")
    };
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "# the clients' failing connects, by node");
    assert!(
        lines[1].starts_with("sum by (node, dst, dst_node) ("),
        "{text}"
    );
    assert!(
        text.contains(
            "# the backend's replies lost, by node and the node they went to\nsum by (node, peer_node)"
        ),
        "{text}"
    );
    assert_eq!(lines.len(), 5, "two queries, each on one line: {text}");
}

#[test]
fn the_text_filter_keeps_matching_rows() {
    let mut state = cluster_only(at(102));
    state.act(Action::StartFilter);
    for c in "node-6".chars() {
        state.act(Action::FilterChar(c));
    }
    state.act(Action::FilterDone);
    let rows = state
        .cluster
        .as_ref()
        .expect("pane")
        .visible_rows(&state.filter)
        .iter()
        .map(|r| r.kind.clone())
        .collect::<Vec<_>>();
    assert_eq!(rows, ["dns lost", "tracer down"]);
}

#[test]
fn a_slow_or_unreachable_prometheus_is_one_line_and_the_last_answer_stays() {
    let mut state = cluster_only(at(102));
    state.apply_cluster(ClusterUpdate::Asking(at(103)));
    state.tick(at(111));
    let t = render(&mut state, 100, 20);
    let text = screen(&t);
    let header: Vec<&str> = text.lines().take(2).collect();
    assert!(
        header[1].contains("Prometheus slow: no answer for 8s")
            && header[1].contains("6 nodes, answered 11s ago"),
        "{header:?}"
    );
    assert!(text.contains("half-open"), "the last answer stays:\n{text}");
    state.apply_cluster(ClusterUpdate::Failed {
        error: "cannot reach Prometheus at http://127.0.0.1:9090".into(),
        at: at(115),
    });
    state.tick(at(116));
    let text = screen(&render(&mut state, 100, 20));
    let header: Vec<&str> = text.lines().take(2).collect();
    assert!(
        header[1].contains("cannot reach Prometheus at http://127.0.0.1:9090")
            && header[1].contains("answered 16s ago"),
        "{header:?}"
    );
    assert!(text.contains("half-open"), "{text}");
}

#[test]
fn with_local_tracing_the_cluster_is_one_more_tab_and_a_header_line() {
    let mut state = State::new("node n1", Some(at(0))).with_cluster(pane());
    state.tick(at(50));
    assert_eq!(
        state.views(),
        [View::Flows, View::Services, View::Dns, View::Cluster]
    );
    let text = screen(&render(&mut state, 100, 20));
    assert!(
        text.lines().nth(2).is_some_and(|l| l.contains(" cluster ")),
        "{text}"
    );
    assert!(text.contains("Cluster"), "{text}");
    for _ in 0..3 {
        state.act(Action::NextView);
    }
    assert_eq!(state.view, View::Cluster);
    let text = screen(&render(&mut state, 100, 20));
    assert!(text.contains("Asking Prometheus..."), "{text}");
    state.act(Action::NextView);
    assert_eq!(state.view, View::Flows, "Tab wraps around");
    let only = State::cluster_only("p", pane());
    assert_eq!(only.views(), [View::Cluster]);
}

#[test]
fn a_row_that_stopped_growing_fades_and_nothing_failing_says_so() {
    let mut state = cluster_only(at(102));
    let text = screen(&render(&mut state, 100, 20));
    assert!(
        text.contains("4m00s"),
        "the quiet black hole's age:\n{text}"
    );
    state.apply_cluster(ClusterUpdate::Answer {
        sweep: Box::new(Sweep {
            nodes: (1..=6).map(|n| format!("node-{n}")).collect(),
            window_s: 300,
            ..Sweep::default()
        }),
        at: at(104),
    });
    let text = screen(&render(&mut state, 100, 20));
    assert!(
        text.contains("Nothing failing in the last 5m on 6 nodes"),
        "{text}"
    );
}
