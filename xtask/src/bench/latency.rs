//! Detection latency: the time from a black-holed `connect()` to the tracer's first `unanswered`
//! record for it, read from the tracer's stdout.
use std::{
    collections::BTreeMap,
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{
    interrupted, load, peers,
    report::{Table, median},
    testbed,
};

/// Time from a black-holed `connect()` to the tracer's first `unanswered` record for it.
pub fn run(
    tracer: &Path,
    bed: &testbed::Testbed,
    count: usize,
    table: &mut Table,
) -> anyhow::Result<()> {
    eprintln!("bench: detection latency, {count} black-holed connects");
    let mut cmd = Command::new(tracer);
    cmd.args(["trace", "--format", "json"])
        .stdout(Stdio::piped());
    let mut running = peers::start_tracer(cmd, PathBuf::from("(stdout)"))?;
    let stdout = running.take_stdout().context("tracer stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    let client = testbed::CLIENT_IP.to_string();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let at = Instant::now();
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            let s = |k: &str| {
                v.get(k)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let port = s("src")
                .strip_prefix(&format!("{client}:"))
                .and_then(|p| p.parse::<u16>().ok());
            if let Some(port) = port
                && s("kind") == "connect"
                && s("verdict") == "unanswered"
            {
                let syn_ms = v
                    .get("syn_sent_ms")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0);
                if tx.send((port, at, syn_ms)).is_err() {
                    break;
                }
            }
        }
    });

    let ns = bed.client.path();
    let target = std::net::SocketAddrV4::new(testbed::DROPPING_BACKEND, 8080);
    let pending = std::thread::spawn(move || -> anyhow::Result<Vec<load::PendingConnect>> {
        testbed::enter(&ns)?;
        let mut v = Vec::new();
        for _ in 0..count {
            v.push(load::black_holed_connect(target)?);
            std::thread::sleep(Duration::from_millis(97));
        }
        Ok(v)
    })
    .join()
    .map_err(|_| anyhow::anyhow!("latency connect thread panicked"))??;

    let mut first: BTreeMap<u16, (Instant, u64)> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(4);
    while first.len() < pending.len() && Instant::now() < deadline && !interrupted() {
        if let Ok((port, at, syn_ms)) = rx.recv_timeout(Duration::from_millis(100)) {
            first.entry(port).or_insert((at, syn_ms));
        }
    }
    pending_close(pending, &first, table);
    running.stop()?;
    Ok(())
}

fn pending_close(
    pending: Vec<load::PendingConnect>,
    first: &BTreeMap<u16, (Instant, u64)>,
    table: &mut Table,
) {
    let mut beyond_floor = Vec::new();
    let mut beyond_retransmit = Vec::new();
    for p in &pending {
        if let Some((at, syn_ms)) = first.get(&p.local_port) {
            let ms = at.duration_since(p.started).as_secs_f64() * 1000.0;
            beyond_floor.push(ms - 1000.0);
            beyond_retransmit.push(ms - *syn_ms as f64);
        }
    }
    let missing = pending.len() - beyond_floor.len();
    drop(pending);
    let m = median(&beyond_floor);
    table.check(
        format!(
            "first `unanswered` after connect(), minus 1 s (median of {})",
            beyond_floor.len()
        ),
        format!("{m:.1} ms"),
        "<= 100 ms",
        m <= 100.0 && missing == 0,
    );
    table.info(
        "  of which after the actual first retransmit (median)",
        format!("{:.1} ms", median(&beyond_retransmit)),
    );
    if missing > 0 {
        table.notes.push(format!(
            "latency: {missing} black-holed connects got no `unanswered` record within 4 s"
        ));
    }
}
