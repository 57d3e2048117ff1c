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
        v["kind"] == "connect"
            && v["final"] == true
            && v["backend"] == "10.250.0.11:8080"
            && (v["verdict"] == "abandoned" || v["verdict"] == "timed_out")
    });
    assert_eq!(dead["service"], "10.96.0.10:80", "{dead}");
    find("the port that refuses", &|v| {
        v["kind"] == "connect"
            && v["verdict"] == "refused"
            && v["cause"] == "rst"
            && v["dst"] == "10.250.0.12:8080"
    });
    find("the Service without endpoints", &|v| {
        v["kind"] == "connect"
            && v["verdict"] == "refused"
            && v["cause"] == "icmp"
            && v["dst"] == "10.96.0.20:80"
    });
    find("the dead DNS server", &|v| {
        v["kind"] == "dns" && v["verdict"] == "unanswered" && v["server"] == "10.250.0.54:53"
    });
    find("the resolver socket glued to it", &|v| {
        v["kind"] == "dns_stuck_socket" && v["server"] == "10.250.0.54:53"
    });
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
    let third = demo(&["--format", "json", "--duration", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("third demo");
    std::thread::sleep(Duration::from_secs(4));
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(third.id() as libc::pid_t, libc::SIGTERM) };
    let out = third.wait_with_output().expect("third demo ends");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!std::path::Path::new("/run/tracer-demo.pid").exists());
    assert!(demo_namespaces().is_empty(), "{:?}", demo_namespaces());
}
