//! `tracer demo`: the black holes it builds are named, and it leaves nothing behind (namespaces, nft
//! rules live in them, programs), refuses to start over a live demo and cleans a dead one's.
use std::{
    io::{BufRead as _, BufReader},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;
use tests::tracer::tracer_bin;

const NAMESPACES: [&str; 2] = ["tracer-demo-client", "tracer-demo-pods"];

fn demo_namespaces() -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| NAMESPACES.contains(n))
        .map(str::to_string)
        .collect()
}

/// Our programs loaded anywhere on the machine (by name, as bpftool shows them).
fn our_programs() -> usize {
    let out = Command::new("bpftool")
        .args(["prog", "show"])
        .output()
        .expect("bpftool prog show");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("name dns_egress") || l.contains("name connect4"))
        .count()
}

/// The demo's client, as its cluster state names it.
const CLIENT_POD: &str = "frontend-7c9f8d6b5-k2x7p";

fn is_final_connect(v: &Value, verdict: &str) -> bool {
    v["kind"] == "connect" && v["final"] == true && v["verdict"] == verdict
}

fn demo(args: &[&str]) -> Command {
    let mut cmd = Command::new(tracer_bin());
    cmd.arg("demo").args(args);
    cmd
}

#[test]
fn the_demo_names_its_black_holes_and_leaves_nothing_behind() {
    assert!(demo_namespaces().is_empty(), "no demo before the test");
    let before = our_programs();
    let started = Instant::now();
    let mut child = demo(&["--format", "json", "--duration", "16"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tracer demo");
    // Lines as they come, to time the first verdict from the command's start.
    let mut first_verdict = None;
    let mut lines = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
        let line = line.expect("a line");
        if first_verdict.is_none() && line.contains(r#""kind":"connect""#) {
            first_verdict = Some(started.elapsed());
        }
        lines.push(line);
    }
    let out = child.wait_with_output().expect("tracer demo ends");
    let stdout = lines.join("\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let records: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let find = |what: &str, f: &dyn Fn(&Value) -> bool| {
        records
            .iter()
            .find(|v| f(v))
            .unwrap_or_else(|| panic!("{what}:\n{stdout}\n{stderr}"))
            .clone()
    };
    let dead = find("the dead backend named", &|v| {
        is_final_connect(v, "abandoned") && v["backend"] == "10.250.0.11:8080"
    });
    assert_eq!(dead["service"], "10.96.0.10:80", "{dead}");
    assert_eq!(dead["dst_service"], "demo/web", "{dead}");
    assert_eq!(dead["cluster_verdict"], "backend is no live pod", "{dead}");
    assert_eq!(dead["src_pod"], CLIENT_POD, "{dead}");
    let refused = find("the port that refuses", &|v| {
        is_final_connect(v, "refused") && v["cause"] == "rst" && v["dst"] == "10.250.0.12:8080"
    });
    assert_eq!(
        refused["cluster_verdict"], "endpoint does not listen",
        "{refused}"
    );
    find("the Service without endpoints", &|v| {
        is_final_connect(v, "refused") && v["cause"] == "icmp" && v["dst"] == "10.96.0.20:80"
    });
    // The Service's DNAT is in the client's own OUTPUT chain: the query leaves already sent to
    // the pod.
    let dns = find("the dead DNS server", &|v| {
        v["kind"] == "dns" && v["verdict"] == "unanswered" && v["server"] == "10.250.0.54:53"
    });
    assert_eq!(dns["cluster_verdict"], "DNS server is no live pod", "{dns}");
    find("the resolver socket glued to it", &|v| {
        v["kind"] == "dns_stuck_socket" && v["server"] == "10.250.0.54:53"
    });
    assert!(
        !stderr.contains("skipped"),
        "nothing skipped with nft installed:\n{stderr}"
    );
    let first = first_verdict.expect("a verdict");
    eprintln!(
        "demo: first verdict {:.1} s after `tracer demo` started",
        first.as_secs_f64()
    );
    assert!(
        first < Duration::from_secs(10),
        "a black hole named within seconds: {first:?}"
    );

    assert!(
        demo_namespaces().is_empty(),
        "namespaces removed: {:?}",
        demo_namespaces()
    );
    assert!(!std::path::Path::new("/run/tracer-demo.pid").exists());
    assert_eq!(our_programs(), before, "programs detached");
}

#[test]
fn a_second_demo_is_refused_and_a_dead_ones_leftovers_are_removed() {
    let mut first = demo(&["--format", "json", "--duration", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("first demo");
    let deadline = Instant::now() + Duration::from_secs(10);
    while demo_namespaces().len() < 2 {
        assert!(
            Instant::now() < deadline,
            "the first demo built its namespaces"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = demo(&["--format", "json", "--duration", "1"])
        .output()
        .expect("second demo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("a demo is already running (pid "),
        "{stderr}"
    );
    assert_eq!(
        demo_namespaces().len(),
        2,
        "the live demo's namespaces are left alone"
    );

    // Killed with no chance to clean up: its namespaces stay, until the next demo removes them.
    first.kill().expect("kill");
    first.wait().expect("reap");
    assert_eq!(
        demo_namespaces().len(),
        2,
        "a killed demo leaves its namespaces"
    );
    // The next one starts over the leftovers, and SIGTERM ends it cleanly.
    let mut third = demo(&["--format", "json", "--duration", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("third demo");
    // Its stderr is read to the end (a closed pipe would fail its next warning); SIGTERM once it
    // says it traces.
    let mut said = Vec::new();
    for line in BufReader::new(third.stderr.take().expect("stderr")).lines() {
        let line = line.expect("a line");
        if line.contains("attached") {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(third.id() as libc::pid_t, libc::SIGTERM) };
        }
        said.push(line);
    }
    assert!(
        said.iter().any(|l| l.contains("attached")),
        "the third demo traces: {said:?}"
    );
    let status = third.wait().expect("third demo ends");
    assert!(status.success(), "{status}: {said:?}");
    assert!(!std::path::Path::new("/run/tracer-demo.pid").exists());
    assert!(demo_namespaces().is_empty(), "{:?}", demo_namespaces());
}

/// On a node the static binary may be all there is. Without `nft` the demo builds what netlink can
/// (a deleted pod is a neighbour entry to a MAC nobody has; a refusal needs no rule), says in one
/// line what it skipped and why, and still names a black hole and a refusal, with the cluster
/// verdicts.
#[test]
fn without_nft_the_demo_names_a_black_hole_and_a_refusal_and_says_what_it_skipped() {
    assert!(demo_namespaces().is_empty(), "no demo before the test");
    // A PATH with nothing in it: no nft, no ip, no other tool.
    let empty = std::env::temp_dir().join(format!("tracer-demo-empty-path-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("an empty folder");
    let out = demo(&["--format", "json", "--duration", "12"])
        .env("PATH", &empty)
        .stdin(Stdio::null())
        .output()
        .expect("tracer demo");
    std::fs::remove_dir(&empty).expect("remove the empty folder");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let skipped: Vec<&str> = stderr.lines().filter(|l| l.contains("skipped")).collect();
    assert_eq!(
        skipped.len(),
        1,
        "one line says what was skipped:\n{stderr}"
    );
    assert!(
        skipped[0].contains("the Services") && skipped[0].contains("no `nft` on this machine"),
        "what and why: {}",
        skipped[0]
    );
    let records: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let find = |what: &str, f: &dyn Fn(&Value) -> bool| {
        records
            .iter()
            .find(|v| f(v))
            .unwrap_or_else(|| panic!("{what}:\n{stdout}\n{stderr}"))
            .clone()
    };
    let hole = find("a black hole", &|v| {
        is_final_connect(v, "abandoned") && v["dst"] == "10.250.0.11:8080"
    });
    assert_eq!(hole["cluster_verdict"], "backend is no live pod", "{hole}");
    assert_eq!(hole["src_pod"], CLIENT_POD, "{hole}");
    find("a refusal", &|v| {
        is_final_connect(v, "refused") && v["cause"] == "rst" && v["dst"] == "10.250.0.12:8080"
    });
    let dns = find("the dead DNS server", &|v| {
        v["kind"] == "dns" && v["verdict"] == "unanswered" && v["server"] == "10.250.0.54:53"
    });
    assert_eq!(dns["cluster_verdict"], "DNS server is no live pod", "{dns}");
    assert!(
        demo_namespaces().is_empty(),
        "namespaces removed: {:?}",
        demo_namespaces()
    );
}
