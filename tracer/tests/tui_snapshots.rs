//! Whole screens, as a person sees them, for each incident shape (fixtures in `fixtures/tui/`, made
//! by `fixtures/tui/make_fixtures.py`), at 80x24 and 120x40. And the loop itself: keys act while records
//! pour in.
use std::{
    path::Path,
    sync::atomic::AtomicU64,
    time::{Duration, Instant},
};

use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::{Terminal, backend::TestBackend, style::Color};
use tokio::sync::mpsc;

use tracer::{
    record::Record,
    replay,
    tui::{
        app::{self, Clock, Options},
        state::{Action, State, View},
    },
    verdict::ClusterVerdictKind,
};

const DEAD_BACKEND: &str = include_str!("fixtures/tui/a_dead_backend.jsonl");
const REFUSED_TWO_OF_SIX: &str = include_str!("fixtures/tui/b_refused_two_of_six.jsonl");
const NO_ENDPOINTS: &str = include_str!("fixtures/tui/c_no_endpoints_icmp.jsonl");
const MIXED_WITH_DROPS: &str = include_str!("fixtures/tui/d_mixed_with_drops.jsonl");
const REPLY_LOST: &str = include_str!("fixtures/tui/e_reply_lost.jsonl");
const DEMO_RECORDING: &str = include_str!("golden/demo_recording.jsonl");

fn records(fixture: &str) -> Vec<Record> {
    replay::parse(fixture, Path::new("fixture"))
        .expect("fixture parses")
        .into_iter()
        .map(|t| t.record)
        .collect()
}

fn state_of(fixture: &str) -> State {
    let mut state = State::new("replay fixture.jsonl", None);
    for r in records(fixture) {
        state.apply(r);
    }
    state
}

fn terminal(width: u16, height: u16) -> Terminal<TestBackend> {
    Terminal::new(TestBackend::new(width, height)).expect("test terminal")
}

fn render(state: &mut State, width: u16, height: u16) -> Terminal<TestBackend> {
    let mut t = terminal(width, height);
    app::draw(&mut t, state).expect("draw");
    t
}

/// Every cell of the screen, row after row, for `contains` checks.
fn screen_text(t: &Terminal<TestBackend>) -> String {
    t.backend()
        .buffer()
        .content()
        .iter()
        .map(ratatui::buffer::Cell::symbol)
        .collect()
}

/// Clock times and pids would change with any re-recording of a fixture; the screen's shape is
/// what is checked. Ports are the fixtures' own and stay, so a wrong port shows.
macro_rules! assert_screen {
    ($name:expr, $terminal:expr) => {
        insta::with_settings!({
            filters => vec![
                (r"\d\d:\d\d:\d\d\.\d\d\d", "[time]"),
                (r"pid=\d+", "pid=[pid]"),
            ],
            omit_expression => true,
        }, {
            insta::assert_snapshot!($name, $terminal.backend().to_string());
        });
    };
}

fn key(code: KeyCode) -> Event {
    Event::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

#[test]
fn dead_backend_flows() {
    let mut s = state_of(DEAD_BACKEND);
    assert_screen!("dead_backend_flows_80x24", render(&mut s, 80, 24));
    assert_screen!("dead_backend_flows_120x40", render(&mut s, 120, 40));
}

#[test]
fn dead_backend_services_shows_the_one_dead_backend() {
    let mut s = state_of(DEAD_BACKEND);
    s.act(Action::NextView);
    assert_eq!(s.view, View::Services);
    let t = render(&mut s, 80, 24);
    let screen = t.backend().to_string();
    assert!(screen.contains("10.244.1.30:8080"), "{screen}");
    assert_screen!("dead_backend_services_80x24", t);
}

/// Healthy connects to a kube-proxy Service are counted per socket destination, the Service's own
/// address: they belong in the Service's answered total, not under a "backend" that is the Service
/// (the demo showed `10.96.0.10:80 └ 10.96.0.10:80  11 OK`).
#[test]
fn the_services_view_shows_no_backend_row_for_the_service_itself() {
    let mut s = state_of(DEMO_RECORDING);
    s.act(Action::NextView);
    assert_eq!(s.view, View::Services);
    let screen = render(&mut s, 80, 24).backend().to_string();
    let service = screen
        .lines()
        .find(|l| l.contains("10.96.0.10:80"))
        .unwrap_or_else(|| panic!("the web Service's line:\n{screen}"));
    // SERVICE / BACKEND, then OK.
    let ok: u64 = service
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("an OK count on {service:?}"));
    assert!(
        ok > 0,
        "the answered connects count in the total: {service:?}"
    );
    assert!(
        !screen.contains("└ 10.96.0.10:80") && !screen.contains("├ 10.96.0.10:80"),
        "no backend row named after the Service:\n{screen}"
    );
    assert!(
        screen.contains("└ 10.250.0.11:8080"),
        "the dead backend keeps its row:\n{screen}"
    );
}

#[test]
fn dead_backend_detail_shows_the_timeline_and_what_to_check() {
    let mut s = state_of(DEAD_BACKEND);
    s.act(Action::ToggleDetail);
    assert!(s.detail);
    assert_screen!("dead_backend_detail_120x40", render(&mut s, 120, 40));
    assert_screen!("dead_backend_detail_80x24", render(&mut s, 80, 24));
}

#[test]
fn refused_two_of_six() {
    let mut s = state_of(REFUSED_TWO_OF_SIX);
    assert_screen!("refused_two_of_six_flows_80x24", render(&mut s, 80, 24));
    assert_screen!("refused_two_of_six_flows_120x40", render(&mut s, 120, 40));
    s.act(Action::NextView);
    assert_screen!(
        "refused_two_of_six_services_120x40",
        render(&mut s, 120, 40)
    );
}

/// Issue 27, item 6: a row showed its latest flow (`SYNS 1 ... gave up after 50ms`) although most
/// of its flows had 2 SYNs over 1.5 s. The dead backend's abandoned flows, the latest one cut short.
#[test]
fn a_row_shows_what_is_typical_of_its_flows_and_their_range() {
    let mut s = State::new("replay fixture.jsonl", None);
    let mut all = records(DEAD_BACKEND);
    let mut last = all
        .iter()
        .rev()
        .find(|r| matches!(r, Record::Connect(c) if c.is_final))
        .expect("an ended flow")
        .clone();
    if let Record::Connect(c) = &mut last {
        c.flow = "cut-short".into();
        c.syns = 1;
        c.syn_sent_ms = 50;
        c.explanation = "The application gave up after 50ms and 1 SYN.".into();
    }
    all.push(last);
    for r in all {
        s.apply(r);
    }
    s.act(Action::ToggleDetail);
    let t = render(&mut s, 120, 40);
    let screen = screen_text(&t);
    let row = t.backend().to_string();
    let row = row
        .lines()
        .find(|l| l.contains("abandoned") && l.contains("10.244.1.30:8080"))
        .expect("the abandoned row");
    let cells: Vec<&str> = row.trim_matches('"').split_whitespace().collect();
    // SYNS, AGE, LAST, COUNT: the typical 3 SYNs, not the latest flow's 1.
    assert_eq!(
        (cells[cells.len() - 4], cells[cells.len() - 1]),
        ("3", "11"),
        "{row}"
    );
    assert!(
        screen.contains("Typical: 3 SYNs in 10 of 11 flows (from 1 to 3), ended after 5.0s"),
        "{screen}"
    );
    assert!(
        screen.contains("Why: The application gave up after 5.0s and 3 SYNs"),
        "{screen}"
    );
}

/// With cluster state the detail says who the ends are and the cluster verdict (`identity/`); the
/// fixtures have no names, so this adds them the way `--cluster-state` does.
#[test]
fn the_detail_names_the_pods_and_says_the_cluster_verdict() {
    let mut s = State::new("replay fixture.jsonl", None);
    for mut r in records(REFUSED_TWO_OF_SIX) {
        if let Record::Connect(c) = &mut r {
            c.identity.dst_pod = Some("webhooks-worker-9d9667f58-hqrqt".into());
            c.identity.dst_namespace = Some("app".into());
            c.identity.dst_service = Some("app/webhooks".into());
            c.identity.cluster_verdict = Some(ClusterVerdictKind::EndpointDoesNotListen);
            c.identity.cluster_explanation =
                Some("Refused by pod app/webhooks-worker-9d9667f58-hqrqt.".into());
        }
        s.apply(r);
    }
    s.act(Action::ToggleDetail);
    let t = render(&mut s, 200, 40);
    let screen = screen_text(&t);
    assert!(
        screen.contains("Who: to pod app/webhooks-worker-9d9667f58-hqrqt of Service app/webhooks"),
        "{screen}"
    );
    assert!(
        screen.contains(
            "Cluster: endpoint does not listen. Refused by pod app/webhooks-worker-9d9667f58-hqrqt."
        ),
        "{screen}"
    );
}

#[test]
fn no_endpoints_icmp() {
    let mut s = state_of(NO_ENDPOINTS);
    assert_screen!("no_endpoints_icmp_flows_80x24", render(&mut s, 80, 24));
    assert_screen!("no_endpoints_icmp_flows_120x40", render(&mut s, 120, 40));
    s.act(Action::ToggleDetail);
    assert_screen!("no_endpoints_icmp_detail_80x24", render(&mut s, 80, 24));
}

#[test]
fn mixed_with_drops() {
    let mut s = state_of(MIXED_WITH_DROPS);
    assert_screen!("mixed_with_drops_flows_80x24", render(&mut s, 80, 24));
    assert_screen!("mixed_with_drops_flows_120x40", render(&mut s, 120, 40));
}

#[test]
fn dropped_is_red_when_non_zero_and_plain_when_zero() {
    let style_of_dropped = |fixture: &str| {
        let mut s = state_of(fixture);
        let t = render(&mut s, 120, 40);
        let buffer = t.backend().buffer().clone();
        let line: String = (0..120)
            .map(|x| buffer[(x, 0)].symbol().to_string())
            .collect();
        let x = line
            .find("dropped")
            .expect("dropped is always in the header");
        buffer[(u16::try_from(x).expect("fits"), 0)].style().bg
    };
    assert_eq!(style_of_dropped(MIXED_WITH_DROPS), Some(Color::Red));
    assert_ne!(style_of_dropped(DEAD_BACKEND), Some(Color::Red));
}

#[test]
fn help_dns_and_filter_screens() {
    let mut s = state_of(DEAD_BACKEND);
    s.act(Action::ToggleHelp);
    assert_screen!("help_80x24", render(&mut s, 80, 24));
    s.act(Action::Close);
    s.act(Action::NextView);
    s.act(Action::NextView);
    assert_screen!("dns_80x24", render(&mut s, 80, 24));
    s.act(Action::NextView);
    s.act(Action::StartFilter);
    for c in "nothing-matches".chars() {
        s.act(Action::FilterChar(c));
    }
    assert_screen!("filter_typing_no_match_80x24", render(&mut s, 80, 24));
}

#[test]
fn summary_ranks_worst_first() {
    let mut s = state_of(MIXED_WITH_DROPS);
    s.origin = "d_mixed_with_drops.jsonl".into();
    insta::assert_snapshot!("summary_mixed_with_drops", tracer::tui::summary::render(&s));
    let mut s = state_of(DEAD_BACKEND);
    s.origin = "a_dead_backend.jsonl".into();
    insta::assert_snapshot!("summary_dead_backend", tracer::tui::summary::render(&s));
}

#[test]
fn summary_says_when_refusals_came_before_destroy_events_were_followed() {
    let mut s = state_of(REFUSED_TWO_OF_SIX);
    let before = tracer::tui::summary::render(&s);
    assert!(!before.contains("no backend named"), "{before}");
    s.apply(Record::Stats(tracer::record::StatsRecord {
        is_final: true,
        conntrack: tracer::record::ConntrackStats {
            destroy_events: "auto".into(),
            destroy_events_subscribed: true,
            refused_before_subscription: 1,
        },
        ..tracer::record::StatsRecord::default()
    }));
    let after = tracer::tui::summary::render(&s);
    assert!(
        after.contains("refused with no backend named: 1 ("),
        "{after}"
    );
}

/// The node's conntrack view: each Service's line and the NAT entries stuck unreplied, under the
/// Services table.
const CONNTRACK_VIEW: &str = r#"{"schema":1,"kind":"service","time":"2026-11-30T16:40:10.000Z","service":"10.96.0.10:80","window_s":60,"backends":[{"backend":"10.244.1.30:8080","verdicts":{"unanswered":4},"total":4,"failing":4},{"backend":"10.244.2.7:8080","verdicts":{"established":6},"total":6,"failing":0}],"total":10,"failing":4,"failing_share":0.4,"summary":"10.96.0.10:80 -> 10.244.1.30:8080 unanswered 4 of 10"}
{"schema":1,"kind":"stale_nat","time":"2026-11-30T16:40:11.000Z","original":{"src":"10.244.0.5:40100","dst":"10.96.0.10:80"},"reply":{"src":"10.244.1.30:8080","dst":"10.244.0.5:40100"},"backend":"10.244.1.30:8080","state":"SYN_SENT","age_s":7,"explanation":"x"}"#;

#[test]
fn the_services_view_lists_the_replies_a_server_lost() {
    let mut s = state_of(DEAD_BACKEND);
    for r in records(REPLY_LOST) {
        s.apply(r);
    }
    s.act(Action::NextView);
    let screen = screen_text(&render(&mut s, 120, 40));
    assert!(screen.contains("REPLIES LOST"), "{screen}");
    assert!(
        screen.contains(
            "10.244.2.7:8080 -> 10.0.1.5:37980 (client 203.0.113.9:51022) timed_out after 6 \
             retransmits, 15928 bytes unacknowledged"
        ),
        "{screen}"
    );
}

#[test]
fn the_services_view_shows_what_the_nodes_conntrack_says() {
    let mut s = state_of(DEAD_BACKEND);
    for r in records(CONNTRACK_VIEW) {
        s.apply(r);
    }
    s.act(Action::NextView);
    assert_eq!(s.view, View::Services);
    let t = render(&mut s, 120, 40);
    let screen = screen_text(&t);
    assert!(
        screen.contains("10.96.0.10:80 -> 10.244.1.30:8080 unanswered 4 of 10"),
        "{screen}"
    );
    assert!(
        screen.contains(
            "10.244.0.5:40100 -> 10.96.0.10:80 (DNAT to 10.244.1.30:8080) unreplied for 7s"
        ),
        "{screen}"
    );
}

/// Two stale datapath entries found, then one reported gone: the view and the summary keep the
/// other, and the summary says what the audit read.
const STALE_DATAPATH: &str = r#"{"schema":1,"kind":"stale_datapath","time":"2026-11-30T16:40:10.000Z","service":"10.96.0.10:80","protocol":"tcp","service_name":"app/web","backend":"10.244.1.30:8080","source":"iptables","location":"KUBE-SEP-DEADBEEF00000000","reason":"no EndpointSlice lists it and its pod is gone","explanation":"kube-proxy's iptables rules on this node still send tcp 10.96.0.10:80 to 10.244.1.30:8080 (KUBE-SEP-DEADBEEF00000000), which no EndpointSlice of Service app/web lists and no pod has: connects sent there go nowhere."}
{"schema":1,"kind":"stale_datapath","time":"2026-11-30T16:40:10.000Z","service":"10.96.0.11:53","protocol":"udp","backend":"10.244.3.9:53","source":"iptables","location":"KUBE-SEP-OLDDNS0000000000","reason":"its pod is gone","explanation":"x"}
{"schema":1,"kind":"stale_datapath","time":"2026-11-30T16:40:12.000Z","service":"10.96.0.11:53","protocol":"udp","backend":"10.244.3.9:53","source":"iptables","location":"KUBE-SEP-OLDDNS0000000000","reason":"its pod is gone","gone":true,"explanation":"y"}
{"schema":1,"kind":"stats","time":"2026-11-30T16:40:12.000Z","attempts":0,"established_first_syn":0,"events":0,"open_flows":0,"dropped":{"ring_buffer_full":0,"attempts_map_full":0,"healthy_map_full":0,"decode_errors":0,"expired_flows":0},"datapath":{"cluster_state":"api","stale_entries":1,"sources":{"iptables":{"state":"read","entries":12,"stale":1},"ipvs":{"state":"absent","reason":"no /proc/net/ip_vs: the ip_vs module is not loaded"}}},"final":false}"#;

#[test]
fn stale_datapath_entries_show_in_the_services_view_and_the_summary_until_gone() {
    let mut s = State::new("replay fixture.jsonl", None);
    for r in records(STALE_DATAPATH) {
        s.apply(r);
    }
    s.act(Action::NextView);
    assert_eq!(s.view, View::Services);
    let t = render(&mut s, 120, 40);
    let screen = screen_text(&t);
    assert!(screen.contains("STALE DATAPATH"), "{screen}");
    assert!(
        screen.contains(
            "10.96.0.10:80 -> 10.244.1.30:8080 (app/web) iptables KUBE-SEP-DEADBEEF00000000: no \
             EndpointSlice lists it"
        ),
        "{screen}"
    );
    assert!(!screen.contains("10.244.3.9:53"), "gone: {screen}");
    let summary = tracer::tui::summary::render(&s);
    assert!(
        summary.contains(
            "datapath audit (against api): 1 stale entry; iptables read 12 (1 stale), ipvs absent \
             (no /proc/net/ip_vs: the ip_vs module is not loaded)"
        ),
        "{summary}"
    );
    assert!(
        summary.contains("Stale datapath (the node's Service rules that no EndpointSlice backs):\n  tcp 10.96.0.10:80 -> 10.244.1.30:8080  iptables KUBE-SEP-DEADBEEF00000000: no EndpointSlice lists it and its pod is gone\n      kube-proxy's iptables rules"),
        "{summary}"
    );
    assert!(!summary.contains("10.244.3.9:53"), "gone: {summary}");
}

#[test]
fn the_copy_key_writes_the_selected_row_as_json_to_the_copy_file() {
    let mut s = state_of(DEAD_BACKEND);
    let key = KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE);
    let action = tracer::tui::keys::action(key, false).expect("y is a key");
    let tracer::tui::state::Effect::Copy(json) = s.act(action) else {
        panic!("y copies the selected row");
    };
    let path = std::env::temp_dir().join(format!("tracer-copy-{}.json", std::process::id()));
    let options = Options {
        copy_file: Some(path.clone()),
        osc52: false,
        ..options()
    };
    let said = app::copy(&json, &options);
    assert!(
        said.contains(&format!("wrote {}", path.display())),
        "{said}"
    );
    let written = std::fs::read_to_string(&path).expect("the copy file");
    let _ = std::fs::remove_file(&path);
    let row: serde_json::Value = serde_json::from_str(&written).expect("JSON");
    let selected = serde_json::to_value(s.selected_row().expect("a selected row")).expect("row");
    assert_eq!(row, selected, "the selected row, whole");
    assert!(
        written.contains("10.244.1.30:8080"),
        "the dead backend's row: {written}"
    );
}

/// The fixtures' sentences are written by `make_fixtures.py`, by hand: each must be the sentence
/// `verdict.rs` gives for that record's verdict, destination, SYNs and wait.
#[test]
fn the_fixtures_sentences_are_the_ones_verdict_rs_writes() {
    use tracer::verdict::{RefusedBy, Unreachable, Verdict};
    let candidates = [
        Verdict::Slow,
        Verdict::Unanswered,
        Verdict::Refused { by: RefusedBy::Rst },
        Verdict::Refused {
            by: RefusedBy::Icmp,
        },
        Verdict::Unreachable {
            kind: Unreachable::Host,
        },
        Verdict::Unreachable {
            kind: Unreachable::Network,
        },
        Verdict::TimedOut,
        Verdict::Abandoned,
        Verdict::Failed { errno: 0 },
        Verdict::Failed { errno: 99 },
        Verdict::Failed { errno: 13 },
        Verdict::Failed { errno: 1 },
    ];
    let mut checked = 0;
    for fixture in [
        DEAD_BACKEND,
        REFUSED_TWO_OF_SIX,
        NO_ENDPOINTS,
        MIXED_WITH_DROPS,
    ] {
        for line in fixture.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
            if v["kind"] != "connect" {
                continue;
            }
            let name = v["verdict"].as_str().expect("verdict");
            let cause = v["cause"].as_str().map(str::to_string);
            let verdict = candidates
                .iter()
                .find(|c| c.name() == name && c.cause().map(|c| c.to_string()) == cause)
                .unwrap_or_else(|| panic!("a verdict {name} {cause:?}"));
            let dst = v["dst"].as_str().expect("dst");
            let shown = v["dialed"]
                .as_str()
                .map_or_else(|| dst.to_string(), |d| format!("{d} (backend {dst})"));
            let syns = u16::try_from(v["syns"].as_u64().expect("syns")).expect("u16");
            let waited = Duration::from_millis(v["syn_sent_ms"].as_u64().expect("ms"));
            assert_eq!(
                v["explanation"].as_str().expect("explanation"),
                verdict.explain(&shown, syns, waited),
                "{line}"
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "{checked} sentences checked");
}

#[test]
fn the_header_names_the_capabilities_this_kernel_degrades() {
    let mut s = state_of(DEAD_BACKEND);
    let text = |s: &mut State| screen_text(&render(s, 160, 24));
    assert!(!text(&mut s).contains("DEGRADED"));
    let mut kernel = tracer::record::KernelInfo {
        release: "5.10.0-32-amd64".into(),
        ..tracer::record::KernelInfo::default()
    };
    kernel
        .capabilities
        .insert("dns".into(), tracer::record::Capability::Full);
    kernel.capabilities.insert(
        "dns_refused".into(),
        tracer::record::Capability::Degraded {
            reason: "no tracepoint inet_sk_error_report".into(),
        },
    );
    s.apply(Record::Stats(tracer::record::StatsRecord {
        kernel: Some(kernel),
        ..tracer::record::StatsRecord::default()
    }));
    // A later record without the kernel object keeps what the first one said.
    s.apply(Record::Stats(tracer::record::StatsRecord::default()));
    let screen = text(&mut s);
    assert!(screen.contains("DEGRADED dns_refused"), "{screen}");
}

fn options() -> Options {
    Options {
        clock: Clock::Records,
        copy_file: None,
        osc52: false,
    }
}

/// The loop with keys a person would type: filter, view switch, help, quit.
#[tokio::test]
async fn the_loop_applies_records_and_keys() {
    let (rtx, mut rrx) = mpsc::channel(1024);
    let (ktx, mut krx) = mpsc::channel(16);
    for r in records(DEAD_BACKEND) {
        rtx.send(r).await.expect("room");
    }
    drop(rtx);
    let mut state = State::new("replay a_dead_backend.jsonl", None);
    let mut t = terminal(80, 24);
    let dropped = AtomicU64::new(0);
    let keys = tokio::spawn(async move {
        // Let the records in first, as a person would look before typing.
        tokio::time::sleep(Duration::from_millis(300)).await;
        for code in [
            KeyCode::Char('/'),
            KeyCode::Char('1'),
            KeyCode::Char('.'),
            KeyCode::Char('3'),
            KeyCode::Enter,
        ] {
            ktx.send(key(code)).await.expect("loop runs");
        }
        ktx.send(key(KeyCode::Tab)).await.expect("loop runs");
        ktx.send(key(KeyCode::Char('?'))).await.expect("loop runs");
        tokio::time::sleep(Duration::from_millis(200)).await;
        ktx.send(key(KeyCode::Char('q'))).await.expect("loop runs");
    });
    app::run(&mut t, &mut state, &mut krx, &mut rrx, &dropped, &options())
        .await
        .expect("runs");
    keys.await.expect("keys sent");
    assert!(state.source_ended);
    assert_eq!(state.filter, "1.3");
    assert_eq!(state.view, View::Services);
    assert!(state.help);
    let screen = t.backend().to_string();
    assert!(screen.contains("Keys (? or Esc closes)"), "{screen}");
    assert!(screen.contains("ENDED"), "{screen}");
}

/// Input stays responsive under load: with far more records queued than a frame can take, a `q`
/// still ends the loop within a few frames, not after the backlog.
#[tokio::test]
async fn a_key_is_answered_while_records_pour_in() {
    let (rtx, mut rrx) = mpsc::channel(65_536);
    let (ktx, mut krx) = mpsc::channel(16);
    let template = records(DEAD_BACKEND);
    // A producer that keeps the channel full for as long as the loop runs.
    let flood = tokio::spawn(async move {
        let mut i = 0usize;
        loop {
            let mut r = template[i % template.len()].clone();
            if let Record::Connect(c) = &mut r {
                c.flow = format!("flow-{i}");
            }
            if rtx.send(r).await.is_err() {
                return i;
            }
            i += 1;
        }
    });
    let mut state = State::new("load", None);
    let mut t = terminal(80, 24);
    let dropped = AtomicU64::new(0);
    let quit = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let sent = Instant::now();
        ktx.send(key(KeyCode::Char('q'))).await.expect("loop runs");
        sent
    });
    app::run(&mut t, &mut state, &mut krx, &mut rrx, &dropped, &options())
        .await
        .expect("runs");
    let answered = Instant::now();
    let sent = quit.await.expect("quit sent");
    drop(rrx);
    let taken = flood.await.expect("flood");
    assert!(
        taken > 10_000,
        "the loop took only {taken} records: not under load"
    );
    let latency = answered.duration_since(sent);
    assert!(
        latency < Duration::from_millis(500),
        "q answered after {latency:?}"
    );
}

/// Incident 004's shape: nginx's resolver socket glued to a deleted CoreDNS pod. Its queries are lost
/// while other sockets get answers from the live CoreDNS pod.
const GLUED_RESOLVER: &str = r#"{"schema":1,"kind":"dns_healthy","time":"2026-11-30T16:00:01.000Z","server":"10.96.0.10:53","netns":"cni-ng1","netns_inode":5,"answered":40,"mean_latency_ms":0.4}
{"schema":1,"kind":"dns","time":"2026-11-30T16:00:02.000Z","verdict":"unanswered","name":"auth.app.svc.cluster.local","qtype":"A","id":11,"server":"10.96.0.10:53","service":"10.96.0.10:53","backend":"10.244.1.66:53","client":"10.244.0.5:41000","pid":3131,"tid":3131,"comm":"nginx","cgroup_id":9,"netns":"cni-ng1","netns_inode":5,"socket_cookie":77,"waited_ms":2000,"explanation":"x"}
{"schema":1,"kind":"dns","time":"2026-11-30T16:00:03.000Z","verdict":"unanswered","name":"auth.app.svc.cluster.local","qtype":"A","id":12,"server":"10.96.0.10:53","service":"10.96.0.10:53","backend":"10.244.1.66:53","client":"10.244.0.5:41000","pid":3131,"tid":3131,"comm":"nginx","cgroup_id":9,"netns":"cni-ng1","netns_inode":5,"socket_cookie":77,"waited_ms":2000,"explanation":"x"}
{"schema":1,"kind":"dns","time":"2026-11-30T16:00:04.000Z","verdict":"unanswered","name":"auth.app.svc.cluster.local","qtype":"A","id":13,"server":"10.96.0.10:53","service":"10.96.0.10:53","backend":"10.244.1.66:53","client":"10.244.0.5:41000","pid":3131,"tid":3131,"comm":"nginx","cgroup_id":9,"netns":"cni-ng1","netns_inode":5,"socket_cookie":77,"waited_ms":2000,"explanation":"x"}
{"schema":1,"kind":"dns_stuck_socket","time":"2026-11-30T16:00:04.000Z","pid":3131,"comm":"nginx","netns":"cni-ng1","netns_inode":5,"socket_cookie":77,"client":"10.244.0.5:41000","server":"10.244.1.66:53","service":"10.96.0.10:53","since":"2026-11-30T16:00:02.000Z","lost":3,"others_answered":40,"explanation":"x"}
{"schema":1,"kind":"dns","time":"2026-11-30T16:00:05.000Z","verdict":"slow","name":"web.app.svc.cluster.local","qtype":"A","id":14,"server":"10.96.0.10:53","client":"10.244.0.9:42000","pid":4000,"tid":4000,"comm":"curl","cgroup_id":10,"netns":"cni-c2","netns_inode":6,"socket_cookie":78,"rcode":"NOERROR","latency_ms":700,"explanation":"x"}
"#;

#[test]
fn dns_view_lists_the_stuck_socket_first_then_servers_losing_queries() {
    let mut s = state_of(GLUED_RESOLVER);
    s.act(Action::NextView);
    s.act(Action::NextView);
    assert_eq!(s.view, View::Dns);
    let t = render(&mut s, 80, 24);
    let screen = t.backend().to_string();
    let stuck = screen.find("STUCK SOCKET").expect("stuck sockets section");
    let servers = screen.find("DNS SERVER").expect("servers section");
    assert!(stuck < servers, "stuck sockets first:\n{screen}");
    assert!(
        screen.contains("nginx 3131") && screen.contains("10.244.1.66:53"),
        "{screen}"
    );
    assert_screen!("glued_resolver_dns_80x24", t);
}

#[test]
fn the_header_says_where_names_come_from_and_when_they_are_stale() {
    let mut fresh = State::new("replay fixture.jsonl", None);
    let mut stale = State::new("replay fixture.jsonl", None);
    for r in records(REFUSED_TWO_OF_SIX) {
        if let Record::Connect(mut c) = r.clone() {
            c.identity.identity_source = Some("file".into());
            c.identity.identity_age_s = Some(12);
            fresh.apply(Record::Connect(c.clone()));
            c.identity.identity_source = Some("api".into());
            c.identity.identity_stale = true;
            stale.apply(Record::Connect(c));
        }
    }
    let screen = render(&mut fresh, 120, 40).backend().to_string();
    assert!(screen.contains("names file 12s"), "{screen}");
    let screen = render(&mut stale, 120, 40).backend().to_string();
    assert!(screen.contains("names api STALE 12s"), "{screen}");
}

/// With cluster state the row's source is the workload: two pods of one Deployment share a row.
#[test]
fn rows_name_the_source_workload_when_pods_are_known() {
    let mut s = State::new("replay fixture.jsonl", None);
    for (i, mut r) in records(REFUSED_TWO_OF_SIX).into_iter().enumerate() {
        if let Record::Connect(c) = &mut r {
            c.identity.src_namespace = Some("app".into());
            c.identity.src_pod = Some(format!("frontend-6b8f7c9d4-pod{}", i % 2));
            c.identity.src_owner = Some("Deployment/frontend".into());
        }
        s.apply(r);
    }
    let screen = render(&mut s, 120, 40).backend().to_string();
    assert!(screen.contains("app/frontend"), "{screen}");
    assert!(
        !screen.contains("pod0") && !screen.contains("pod1"),
        "one row per workload:\n{screen}"
    );
}
