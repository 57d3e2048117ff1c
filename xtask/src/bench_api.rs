//! What one tracer asks of the Kubernetes API server, and what its cluster model weighs, on a
//! large cluster (issue 29): the workspace's fake API server (`tests/src/api_fixture/`) serves a
//! generated cluster of 150,000 pods over 5,000 nodes (30 on this node), honours field selectors
//! and counts every request; `tracer bench-cluster-api` follows it as one node's tracer does and
//! names a busy node's records (healthy connects elsewhere, failing ones to pods elsewhere). Three
//! phases: the start, a steady state with the cluster changing (EndpointSlices every 200 ms, a pod
//! of this node every 10 s), and a relist (every watch expired, as after an etcd compaction).
//! Needs no root. Part of `cargo xtask bench`, or alone: `cargo xtask bench --api-only`.
#![expect(
    clippy::cast_precision_loss,
    reason = "request counts and KiB far below 2^52 turned into rates and MiB"
)]
use std::{
    io::{BufRead as _, BufReader},
    path::Path,
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::{
    api_fixture::{ApiFixture, Kind, Logged, Synthetic, Verb},
    bench::report::Table,
    run::workspace_root,
    shell::{cargo, run as run_cmd},
};

const NODES: u32 = 5_000;
const PODS_PER_NODE: u32 = 30;
/// This tracer's node.
const NODE: u32 = 1_234;
const MODEL_TARGET_MIB: f64 = 64.0;
const CLUSTER_WIDE_POD_REQUESTS_TARGET: f64 = 1.0;

/// How long each phase runs.
#[derive(Debug, Clone, Copy)]
struct Phases {
    start: Duration,
    steady: Duration,
    relist: Duration,
}

impl Phases {
    fn new(quick: bool) -> Phases {
        if quick {
            Phases {
                start: Duration::from_secs(30),
                steady: Duration::from_mins(1),
                relist: Duration::from_secs(30),
            }
        } else {
            // Steady for longer than a watch lasts (290 s), so each is renewed once in it.
            Phases {
                start: Duration::from_mins(1),
                steady: Duration::from_mins(5),
                relist: Duration::from_mins(1),
            }
        }
    }

    fn total(self) -> Duration {
        self.start + self.steady + self.relist
    }
}

/// Requests of one phase, by kind (in `Kind::ALL` order) and verb.
#[derive(Default)]
struct Counts {
    lists: [u64; 4],
    watches: [u64; 4],
    /// Pod requests other than this node's list and watch: the on-demand lookups.
    lookups: u64,
    cluster_wide_pods: u64,
}

fn count(log: &[Logged], from: Instant, to: Instant) -> Counts {
    let mut c = Counts::default();
    for l in log.iter().filter(|l| l.at >= from && l.at < to) {
        let Some(kind) = l.kind else { continue };
        let k = Kind::ALL.iter().position(|&x| x == kind).unwrap_or(0);
        let node_scoped = l.field_selector.starts_with("spec.nodeName=");
        if kind == Kind::Pod && !node_scoped {
            c.lookups += 1;
        } else {
            match l.verb {
                Verb::List => c.lists[k] += 1,
                Verb::Watch => c.watches[k] += 1,
                Verb::Get => {}
            }
        }
        c.cluster_wide_pods += u64::from(l.is_cluster_wide_pod_request());
    }
    c
}

/// `pods 1+1, services 30+1, ...` (lists + watches) per minute.
fn per_minute(c: &Counts, window: Duration) -> String {
    let minutes = window.as_secs_f64() / 60.0;
    Kind::ALL
        .iter()
        .enumerate()
        .map(|(k, kind)| {
            format!(
                "{} {:.1}+{:.1}",
                kind.resource(),
                c.lists[k] as f64 / minutes,
                c.watches[k] as f64 / minutes
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Changes the cluster while `running`: an EndpointSlice every 200 ms (an endpoint turns not
/// ready, or ready again), this node's oldest pod replaced every 10 s.
fn churn(fx: &ApiFixture, cluster: Synthetic, running: &AtomicBool) {
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut ticks = 0_u64;
    let mut replaced = 0_u32;
    while running.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        ticks += 1;
        let j = (next() % cluster.count(Kind::EndpointSlice) as u64) as usize;
        let mut slice = cluster.object(Kind::EndpointSlice, j);
        if let Some(e) = slice["endpoints"].get_mut(0) {
            e["conditions"]["ready"] = Value::Bool(ticks.is_multiple_of(2));
        }
        fx.change(Kind::EndpointSlice, slice, false);
        if ticks.is_multiple_of(50) {
            let pods = cluster.pods_on(NODE);
            let old = pods[(replaced as usize) % pods.len()];
            let gone = cluster.object(Kind::Pod, old as usize);
            let mut new = gone.clone();
            new["metadata"]["name"] = format!("replacement-{replaced}").into();
            fx.change(Kind::Pod, gone, true);
            fx.change(Kind::Pod, new, false);
            replaced += 1;
        }
    }
}

/// `cargo xtask bench --api-only`: this section alone, its table on stdout.
pub fn run_alone(quick: bool) -> anyhow::Result<()> {
    run_cmd(cargo().args(["build", "--release", "--package", "tracer"]))?;
    let tracer = workspace_root()?.join("target/release/tracer");
    let mut table = Table::default();
    section(&tracer, quick, &mut table)?;
    println!();
    print!("{}", table.render());
    Ok(())
}

/// The section in a bench run: adds its figures to `table`.
pub fn section(tracer: &Path, quick: bool, table: &mut Table) -> anyhow::Result<()> {
    let phases = Phases::new(quick);
    eprintln!(
        "bench: one node's tracer against a fake API server of {} pods over {NODES} nodes, {:.0} s",
        NODES * PODS_PER_NODE,
        phases.total().as_secs_f64()
    );
    run(tracer, phases, table)
}

/// Runs the three phases against a fresh fake API server and adds the figures to `table`.
#[expect(
    clippy::too_many_lines,
    reason = "the three phases and their rows in order; to be split"
)]
fn run(tracer: &Path, phases: Phases, table: &mut Table) -> anyhow::Result<()> {
    let cluster = Synthetic::new(NODES, PODS_PER_NODE);
    let fx = Arc::new(ApiFixture::synthetic(cluster));
    let kubeconfig = fx.kubeconfig(
        &std::env::temp_dir(),
        &format!("bhb-bench-kubeconfig-{}", std::process::id()),
    );
    let node = Synthetic::node_name(NODE);
    let mut child = Command::new(tracer)
        .arg("bench-cluster-api")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--node-name", &node])
        .args(["--seconds", &phases.total().as_secs().to_string()])
        .args(["--report-every", "5"])
        .args(["--healthy-per-second", "100"])
        .args(["--failing-per-second", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("running tracer bench-cluster-api")?;
    let started = Instant::now();
    let stdout = child.stdout.take().context("the tracer's stdout")?;
    let reports = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
            .collect::<Vec<Value>>()
    });

    std::thread::sleep(phases.start);
    let steady_from = Instant::now();
    let running = Arc::new(AtomicBool::new(true));
    let churner = {
        let (fx, running) = (Arc::clone(&fx), Arc::clone(&running));
        std::thread::spawn(move || churn(&fx, cluster, &running))
    };
    std::thread::sleep(phases.steady);
    let relist_from = Instant::now();
    fx.expire_watches();
    let status = child
        .wait()
        .context("waiting for tracer bench-cluster-api")?;
    let end = Instant::now();
    running.store(false, Ordering::Relaxed);
    let _ = churner.join();
    let _ = std::fs::remove_file(&kubeconfig);
    let reports = reports
        .join()
        .map_err(|_| anyhow::anyhow!("the report reader panicked"))?;
    if !status.success() {
        bail!("tracer bench-cluster-api failed: {status}");
    }
    let Some(last) = reports.last() else {
        bail!("tracer bench-cluster-api reported nothing");
    };
    let log = fx.log();
    let start = count(&log, started, steady_from);
    let steady = count(&log, steady_from, relist_from);
    let relist = count(&log, relist_from, end);

    let what = format!(
        "API, one node of {}k pods / {}k nodes",
        cluster.pods() / 1000,
        NODES / 1000
    );
    let mib = |key: &str| last[key].as_f64().unwrap_or(f64::NAN) / 1024.0;
    let model = mib("rss_kib");
    table.check(
        format!("{what}: resident MiB of the cluster model and API client, after a relist"),
        format!("{model:.1}"),
        format!("<= {MODEL_TARGET_MIB:.0}"),
        model <= MODEL_TARGET_MIB,
    );
    let before_relist = (relist_from - started).as_secs_f64();
    let last_before_relist = reports
        .iter()
        .rfind(|r| r["t_s"].as_f64().is_some_and(|t| t < before_relist));
    let before = |key: &str| {
        last_before_relist.map_or(f64::NAN, |r| r[key].as_f64().unwrap_or(f64::NAN) / 1024.0)
    };
    let peak = mib("peak_rss_kib");
    table.check(
        format!("{what}: peak resident MiB of the cluster model and API client, relist included"),
        format!("{peak:.1}"),
        format!("<= {MODEL_TARGET_MIB:.0}"),
        peak <= MODEL_TARGET_MIB,
    );
    table.info(
        format!(
            "{what}: MiB before the relist, peak before it, peak with it, before the client started"
        ),
        format!(
            "{:.1}, {:.1}, {peak:.1}, {:.1}",
            before("rss_kib"),
            before("peak_rss_kib"),
            mib("baseline_rss_kib")
        ),
    );
    let steady_minutes = (relist_from - steady_from).as_secs_f64() / 60.0;
    let cluster_wide = steady.cluster_wide_pods as f64 / steady_minutes;
    table.check(
        format!("{what}: cluster-wide pod requests per minute, steady state (lookups aside)"),
        format!("{cluster_wide:.2}"),
        format!("<= {CLUSTER_WIDE_POD_REQUESTS_TARGET:.0}"),
        cluster_wide <= CLUSTER_WIDE_POD_REQUESTS_TARGET,
    );
    table.info(
        format!(
            "{what}: lists+watches per minute, first {:.0} s",
            phases.start.as_secs_f64()
        ),
        per_minute(&start, steady_from - started),
    );
    table.info(
        format!("{what}: lists+watches per minute, steady state (cluster changing)"),
        per_minute(&steady, relist_from - steady_from),
    );
    table.info(
        format!("{what}: lists+watches per minute after every watch expired"),
        per_minute(&relist, end - relist_from),
    );
    table.info(
        format!("{what}: cluster-wide pod requests at start, steady, relist"),
        format!(
            "{}, {}, {}",
            start.cluster_wide_pods, steady.cluster_wide_pods, relist.cluster_wide_pods
        ),
    );
    let lookups = &last["identity"]["api"]["lookups"];
    table.info(
        format!(
            "{what}: pod lookups per minute (1 failing connect/s to pods elsewhere, 100 healthy/s)"
        ),
        format!(
            "{:.1} (made {}, cache hits {}, rate-limited {}; healthy connects asked none)",
            (start.lookups + steady.lookups + relist.lookups) as f64
                / (end - started).as_secs_f64()
                * 60.0,
            lookups["requests"],
            lookups["cache_hits"],
            lookups["rate_limited"]
        ),
    );
    table.info(
        format!("{what}: names current after, s"),
        format!("{:.1}", last["in_sync_s"].as_f64().unwrap_or(f64::NAN)),
    );
    Ok(())
}
