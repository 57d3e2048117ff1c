//! `cargo xtask soak --minutes N` (root; not in CI): the tracer for N minutes under mixed load while
//! the Kubernetes API server and Prometheus misbehave on a schedule; prints the RSS slope, the
//! records lost and the requests made.
//!
//! Everything lives in the bench's test bed (`bench/testbed.rs`): the load runs in its client
//! namespace; the tracer, the fake API server (`api_fixture`, a generated cluster of 15,000 pods on
//! 500 nodes) and a real Prometheus scraping the tracer's `--metrics` every second share its node
//! namespace's loopback. The tracer is one node's: `--kubeconfig` and `--node-name`.
//!
//! The load, in turns, all the time: connects to the Service (a tenth black-holed), connects
//! refused by a backend, connects to pods on other nodes that no EndpointSlice lists (dropped in the
//! node: each failing record needs an on-demand lookup). The cluster changes (an EndpointSlice a
//! second, a pod of this node every 20 s). Every [`CYCLE`] the API server goes through each fault
//! the fixture knows for 30 s ([`API_SCHEDULE`]) and compacts (every watch expires); Prometheus is
//! stopped (SIGSTOP) for a minute and later killed and restarted; `tracer sweep` asks it every
//! 30 s, bounded to a minute.
//!
//! The records are accounted per flow (`flows.rs`): each connect the load counted as failed is
//! matched with the tracer's records of its source port, and the summary says what became of each.
#![expect(
    clippy::cast_precision_loss,
    reason = "counts and KiB far below 2^52 turned into rates and MiB"
)]
use std::{
    fmt::Write as _,
    fs::File,
    io::{BufRead as _, BufReader},
    net::{Ipv4Addr, SocketAddrV4},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};
use serde_json::Value;

mod flows;

use crate::{
    api_fixture::{ApiFixture, Fault, Kind, Synthetic, Verb},
    bench::{
        load::{self, FailedConnect, LoadConfig, LoadResult},
        report::Table,
        testbed::{self, Testbed},
    },
    run::workspace_root,
    shell::{cargo, run as run_cmd},
};

#[derive(Debug, clap::Args)]
pub struct SoakArgs {
    /// How long the tracer runs under load.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(2..=1440))]
    pub minutes: u64,
    /// Keep the work directory (the tracer's output and stderr, Prometheus's data, and
    /// `flows.txt`: each failed connect of the load that got no plain failure record).
    #[arg(long)]
    pub keep: bool,
}

const NODES: u32 = 500;
const PODS_PER_NODE: u32 = 30;
/// This tracer's node in the generated cluster.
const NODE: u32 = 7;
/// The schedule repeats every cycle.
const CYCLE: Duration = Duration::from_mins(5);
/// (from, fault) within a cycle, each until the next; `Fault::None` from 4:00 to the end.
const API_SCHEDULE: [(u64, Fault); 9] = [
    (0, Fault::None),
    (60, Fault::Refuse),
    (90, Fault::WatchNotJson),
    (120, Fault::WatchError500),
    (150, Fault::WatchGone),
    (180, Fault::WatchGoneEvent),
    (210, Fault::Status(500)),
    (225, Fault::Hang),
    (240, Fault::None),
];
/// Within a cycle: every watch expires (a compaction), as the API comes back.
const COMPACT_AT: u64 = 270;
/// Within a cycle: Prometheus stopped from 0:30 to 1:30, killed and restarted at 3:00.
const PROMETHEUS_STOP: (u64, u64) = (30, 90);
const PROMETHEUS_KILL: u64 = 180;
/// A port refused by the live backend (nothing listens there).
const REFUSED: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 232, 1, 1), 81);
/// Where the generated cluster's pods are (`synthetic.rs`: `10.(64 + n / 256).(n % 256).0/24`).
const POD_RANGE: &str = "10.64.0.0/10";
const METRICS_PORT: u16 = 9476;
const PROMETHEUS_PORT: u16 = 9090;

pub fn run(args: &SoakArgs) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("cargo xtask soak needs root (network namespaces, eBPF)");
    }
    let prometheus_ok = Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !prometheus_ok {
        bail!("prometheus is not installed: `cargo xtask setup` installs it (Debian `prometheus`)");
    }
    run_cmd(cargo().args(["build", "--release", "--package", "tracer"]))?;
    let tracer = workspace_root()?.join("target/release/tracer");
    let minutes = Duration::from_mins(args.minutes);
    // In memory where there is a tmpfs: a disk another job fills must not end the soak.
    let base = ["/dev/shm", "/tmp"]
        .into_iter()
        .find(|d| Path::new(d).is_dir())
        .unwrap_or("/tmp");
    let work = PathBuf::from(format!("{base}/bhb-soak-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let result = soak(&tracer, &work, minutes);
    if args.keep {
        eprintln!("soak: kept {}", work.display());
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }
    let table = result?;
    println!();
    print!("{}", table.render());
    Ok(())
}

#[expect(
    clippy::too_many_lines,
    reason = "the soak's steps in order; to be split"
)]
fn soak(tracer: &Path, work: &Path, length: Duration) -> anyhow::Result<Table> {
    testbed::remove_stale();
    let bed = Testbed::new(10)?;
    let node_ns = bed.node.path();
    // Pods of other nodes are reached through the node, which drops them silently (a blackhole
    // route: no ICMP back).
    run_cmd(Command::new("ip").args([
        "-n",
        &bed.client.name,
        "route",
        "add",
        POD_RANGE,
        "via",
        "10.232.0.254",
    ]))?;
    run_cmd(Command::new("ip").args([
        "-n",
        &bed.node.name,
        "route",
        "add",
        "blackhole",
        POD_RANGE,
    ]))?;

    let cluster = Synthetic::new(NODES, PODS_PER_NODE);
    // Made in the node namespace, so that its socket listens on that loopback.
    let fx = Arc::new(in_netns(&node_ns, move || ApiFixture::synthetic(cluster))?);
    let kubeconfig = fx.kubeconfig(work, "kubeconfig");
    let output = work.join("tracer.jsonl");
    let stderr_path = work.join("tracer.stderr");
    let mut child = bed
        .node
        .command(&tracer.to_string_lossy())
        .args(["trace", "--format", "json", "--output"])
        .arg(&output)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--node-name", &Synthetic::node_name(NODE)])
        .arg(format!("--metrics=127.0.0.1:{METRICS_PORT}"))
        .stdout(Stdio::null())
        .stderr(File::create(&stderr_path)?)
        .spawn()
        .context("starting the tracer")?;
    let pid = child.id();
    wait_attached(&mut child, &stderr_path)?;
    eprintln!(
        "soak: tracer {pid} attached; {} min under load, schedule every {} s",
        length.as_secs() / 60,
        CYCLE.as_secs()
    );

    let mut prometheus = Prometheus::start(&bed, work)?;
    let started = Instant::now();
    let running = Arc::new(AtomicBool::new(true));
    let loads = {
        let (client, running) = (bed.client.path(), Arc::clone(&running));
        std::thread::spawn(move || mixed_load(&client, cluster, &running))
    };
    let churner = {
        let (fx, running) = (Arc::clone(&fx), Arc::clone(&running));
        std::thread::spawn(move || churn(&fx, cluster, &running))
    };
    let sweeps = Arc::new(SweepCounts::default());
    let sweeper = {
        let (running, sweeps) = (Arc::clone(&running), Arc::clone(&sweeps));
        let (node_ns, tracer) = (node_ns.clone(), tracer.to_path_buf());
        let cmd = move || {
            let mut c = bed_command(&node_ns, &tracer);
            c.args([
                "sweep",
                "--prometheus",
                &format!("http://127.0.0.1:{PROMETHEUS_PORT}"),
                "--window",
                "2m",
            ]);
            c
        };
        std::thread::spawn(move || sweep_loop(&cmd, &running, &sweeps))
    };

    let mut rss: Vec<(f64, f64)> = Vec::new();
    let mut fault = Fault::None;
    let mut last_second = u64::MAX;
    while started.elapsed() < length {
        std::thread::sleep(Duration::from_millis(200));
        if crate::bench::interrupted() {
            break;
        }
        let t = started.elapsed();
        let second = t.as_secs();
        if second == last_second {
            continue;
        }
        last_second = second;
        let in_cycle = second % CYCLE.as_secs();
        let due = API_SCHEDULE
            .iter()
            .rev()
            .find(|(from, _)| in_cycle >= *from)
            .map_or(Fault::None, |(_, f)| *f);
        if due != fault {
            eprintln!("soak: {second:>5} s API {due:?}");
            fx.set_fault(due);
            fx.cut_connections();
            fault = due;
        }
        if in_cycle == COMPACT_AT {
            fx.expire_watches();
        }
        if in_cycle == PROMETHEUS_STOP.0 {
            prometheus.signal(libc::SIGSTOP);
        } else if in_cycle == PROMETHEUS_STOP.1 {
            prometheus.signal(libc::SIGCONT);
        } else if in_cycle == PROMETHEUS_KILL {
            prometheus.restart(&bed, work)?;
        }
        if second.is_multiple_of(5) {
            let Some(kib) = vm_rss_kib(pid) else {
                bail!(
                    "the tracer exited during the soak: see {}",
                    stderr_path.display()
                );
            };
            rss.push((t.as_secs_f64(), kib as f64 / 1024.0));
        }
    }
    running.store(false, Ordering::Relaxed);
    fx.set_fault(Fault::None);
    prometheus.signal(libc::SIGCONT);
    let load = loads
        .join()
        .map_err(|_| anyhow::anyhow!("the load thread panicked"))??;
    let _ = churner.join();
    let _ = sweeper.join();
    let elapsed = started.elapsed();
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(i32::try_from(pid)?, libc::SIGTERM) };
    let status = child.wait().context("waiting for the tracer")?;
    drop(prometheus);
    if !status.success() {
        bail!(
            "the tracer exited with {status}: see {}",
            stderr_path.display()
        );
    }
    let log = fx.log();

    let client_ns = bed.client.name.clone();
    drop(bed);
    let mut table = Table::default();
    report_memory(&rss, &mut table);
    report_records(&output, &client_ns, &load, work, &mut table)?;
    report_requests(&log, &output, elapsed, &mut table)?;
    let stderr_lines = std::fs::read_to_string(&stderr_path)
        .unwrap_or_default()
        .lines()
        .count();
    table.info(
        "lines on the tracer's stderr",
        format!("{stderr_lines} in {:.0} min", elapsed.as_secs_f64() / 60.0),
    );
    table.info(
        "tracer sweep against the misbehaving Prometheus: ok, failed, killed after 60 s",
        format!(
            "{}, {}, {}",
            sweeps.ok.load(Ordering::Relaxed),
            sweeps.failed.load(Ordering::Relaxed),
            sweeps.hung.load(Ordering::Relaxed)
        ),
    );
    Ok(table)
}

/// Runs `f` on a thread that entered the network namespace at `ns`.
fn in_netns<T: Send + 'static>(
    ns: &Path,
    f: impl FnOnce() -> T + Send + 'static,
) -> anyhow::Result<T> {
    let path = ns.to_path_buf();
    std::thread::spawn(move || -> anyhow::Result<T> {
        testbed::enter(&path)?;
        Ok(f())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("a thread in {} panicked", ns.display()))?
}

/// `program` inside the namespace at `ns` (`nsenter` execs it).
fn bed_command(ns: &Path, program: &Path) -> Command {
    let mut cmd = Command::new("nsenter");
    cmd.arg(format!("--net={}", ns.display())).arg(program);
    cmd
}

fn wait_attached(child: &mut Child, stderr: &Path) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_mins(2);
    while Instant::now() < deadline {
        if std::fs::read_to_string(stderr)
            .unwrap_or_default()
            .contains("attached")
        {
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            bail!(
                "the tracer exited at start ({status}): {}",
                std::fs::read_to_string(stderr).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    bail!(
        "the tracer did not attach within 2 min: see {}",
        stderr.display()
    )
}

/// The three loads, in turns until stopped: 8 s through the Service at 100 connects/s (a tenth
/// black-holed), 1 s refused at 20/s, 1 s to a pod elsewhere at 5/s (the next pod each turn).
#[derive(Default, Debug)]
struct MixedLoad {
    service: OneLoad,
    refused: OneLoad,
    remote: OneLoad,
}

/// One of the loads: its totals and each failed connect.
#[derive(Default, Debug)]
struct OneLoad {
    total: LoadResult,
    failures: Vec<FailedConnect>,
}

impl OneLoad {
    fn add(&mut self, (one, failures): (LoadResult, Vec<FailedConnect>)) {
        let total = &mut self.total;
        total.ok += one.ok;
        total.timed_out += one.timed_out;
        total.errors += one.errors;
        total.cut += one.cut;
        total.elapsed += one.elapsed;
        self.failures.extend(failures);
    }
}

fn mixed_load(
    client: &Path,
    cluster: Synthetic,
    running: &AtomicBool,
) -> anyhow::Result<MixedLoad> {
    let cfg = |secs: u64, rate: f64| LoadConfig {
        threads: 1,
        inflight: 256,
        duration: Duration::from_secs(secs),
        timeout: Duration::from_secs(1),
        rate: Some(rate),
    };
    let remote_pods = remote_pods_in_no_slice(cluster);
    let mut turn = 0_usize;
    let mut total = MixedLoad::default();
    while running.load(Ordering::Relaxed) {
        total.service.add(load::connect_load_flows(
            client,
            testbed::VIP,
            cfg(8, 100.0),
        )?);
        total
            .refused
            .add(load::connect_load_flows(client, REFUSED, cfg(1, 20.0))?);
        let pod = remote_pods[turn % remote_pods.len()];
        total
            .remote
            .add(load::connect_load_flows(client, pod, cfg(1, 5.0))?);
        turn += 1;
    }
    Ok(total)
}

/// Pods on other nodes whose app has no Service (`synthetic.rs`: each tenth app), so no
/// EndpointSlice names them: a failing connect to one needs a lookup.
fn remote_pods_in_no_slice(cluster: Synthetic) -> Vec<SocketAddrV4> {
    (0..cluster.pods())
        .filter(|i| (i / 10) % 10 == 9 && i % NODES != NODE)
        .step_by(37)
        .take(200)
        .filter_map(|i| {
            let pod = cluster.object(Kind::Pod, i as usize);
            let ip: Ipv4Addr = pod["status"]["podIP"].as_str()?.parse().ok()?;
            Some(SocketAddrV4::new(ip, 8080))
        })
        .collect()
}

/// An EndpointSlice changes every second (an endpoint turns not ready, or ready again); this
/// node's oldest pod is replaced every 20 s.
fn churn(fx: &ApiFixture, cluster: Synthetic, running: &AtomicBool) {
    let mut ticks = 0_u64;
    let pods = cluster.pods_on(NODE);
    while running.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_secs(1));
        ticks += 1;
        let j = (ticks.wrapping_mul(7919) % cluster.count(Kind::EndpointSlice) as u64) as usize;
        let mut slice = cluster.object(Kind::EndpointSlice, j);
        if let Some(e) = slice["endpoints"].get_mut(0) {
            e["conditions"]["ready"] = Value::Bool(ticks.is_multiple_of(2));
        }
        fx.change(Kind::EndpointSlice, slice, false);
        if ticks.is_multiple_of(20) {
            let turn = ticks / 20;
            let old = pods[(turn as usize) % pods.len()];
            let gone = cluster.object(Kind::Pod, old as usize);
            let mut new = gone.clone();
            new["metadata"]["name"] = format!("replacement-{turn}").into();
            fx.change(Kind::Pod, gone, true);
            fx.change(Kind::Pod, new, false);
        }
    }
}

#[derive(Default)]
struct SweepCounts {
    ok: AtomicU64,
    failed: AtomicU64,
    hung: AtomicU64,
}

fn sweep_loop(cmd: &dyn Fn() -> Command, running: &AtomicBool, counts: &SweepCounts) {
    while running.load(Ordering::Relaxed) {
        for _ in 0..150 {
            if !running.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let Ok(mut child) = cmd().stdout(Stdio::null()).stderr(Stdio::null()).spawn() else {
            counts.failed.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let deadline = Instant::now() + Duration::from_mins(1);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    let which = if status.success() {
                        &counts.ok
                    } else {
                        &counts.failed
                    };
                    which.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    counts.hung.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
    }
}

/// A real Prometheus scraping the tracer every second, in the node namespace; killed on Drop.
struct Prometheus {
    child: Child,
}

impl Prometheus {
    fn start(bed: &Testbed, work: &Path) -> anyhow::Result<Prometheus> {
        let config = work.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: tracer\n    static_configs:\n      \
                 - targets: ['127.0.0.1:{METRICS_PORT}']\n"
            ),
        )?;
        let child = bed
            .node
            .command("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                work.join("prometheus").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{PROMETHEUS_PORT}"))
            .stdout(Stdio::null())
            .stderr(File::create(work.join("prometheus.stderr"))?)
            .spawn()
            .context("starting prometheus")?;
        Ok(Prometheus { child })
    }

    fn signal(&self, signal: i32) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill(2) on our own child, not yet reaped.
            unsafe { libc::kill(pid, signal) };
        }
    }

    /// Killed as an OOM kill would, and started again on the same data.
    fn restart(&mut self, bed: &Testbed, work: &Path) -> anyhow::Result<()> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        *self = Prometheus::start(bed, work)?;
        Ok(())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn vm_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Least-squares slope of `points` (x, y), in y per x.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let (num, den) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    num / den
}

fn report_memory(rss: &[(f64, f64)], table: &mut Table) {
    let Some(&(end, last)) = rss.last() else {
        table.info("tracer RSS", "no sample");
        return;
    };
    // After the first fifth (the first lists, the first cycle's faults).
    let warm: Vec<(f64, f64)> = rss
        .iter()
        .copied()
        .filter(|(t, _)| *t >= end / 5.0)
        .collect();
    let per_hour = slope(&warm) * 3600.0;
    let peak = rss.iter().map(|(_, m)| *m).fold(0.0, f64::max);
    let first = warm.first().map_or(f64::NAN, |(_, m)| *m);
    table.info(
        "tracer RSS MiB: after the first fifth, at the end, peak",
        format!("{first:.1}, {last:.1}, {peak:.1}"),
    );
    table.check(
        "tracer RSS slope after the first fifth, MiB per hour (least squares)",
        format!("{per_hour:.2}"),
        "< 1",
        per_hour < 1.0,
    );
}

/// Failing connects the load saw against the tracer's records, flow by flow (`flows.rs`), by
/// destination. Only the bed's client namespace: the tracer sees the whole machine. Every failure
/// that is not a plain failure record goes to `flows.txt` in the work directory (`--keep`).
fn report_records(
    output: &Path,
    client_ns: &str,
    load: &MixedLoad,
    work: &Path,
    table: &mut Table,
) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(output).with_context(|| format!("reading {}", output.display()))?;
    let mut records = Vec::new();
    let (mut remote, mut remote_named) = (0_u64, 0_u64);
    let mut dropped = None;
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let is_final = v["final"].as_bool().unwrap_or(false);
        match v["kind"].as_str() {
            Some("connect") if v["netns"] == client_ns => {
                if let Some(r) = flows::ConnectRecord::from_json(&v) {
                    if is_final && is_remote_pod(r.dst) && v["verdict"] != "slow" {
                        remote += 1;
                        remote_named += u64::from(v["dst_pod"].is_string());
                    }
                    records.push(r);
                }
            }
            Some("stats") if is_final => dropped = Some(v["dropped"].clone()),
            _ => {}
        }
    }
    let Some(dropped) = dropped else {
        bail!("{} has no final stats record", output.display());
    };
    let nonzero: Vec<String> = dropped
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k, v.as_u64()?)))
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let dropped_total: u64 = dropped
        .as_object()
        .map_or(0, |o| o.values().filter_map(Value::as_u64).sum());
    let mut details = String::new();
    let loads: [(&str, &OneLoad, DstFilter); 3] = [
        ("through the Service (black-holed)", &load.service, &|d| {
            d == testbed::VIP
        }),
        ("refused", &load.refused, &|d| d == REFUSED),
        (
            "to pods elsewhere (black-holed)",
            &load.remote,
            &is_remote_pod,
        ),
    ];
    for (what, one, dsts) in loads {
        let acc = flows::account(&one.failures, testbed::CLIENT_IP, dsts, &records);
        let (failed, reported, lost) = (one.total.failed(), acc.reported(), acc.lost());
        table.check(
            format!("failing connects {what}: seen, final failure records, unreported (per flow)"),
            format!("{failed}, {reported}, {lost}"),
            "0 unreported",
            lost == 0 && acc.matched.len() as u64 == failed,
        );
        for (figure, value) in acc.rows() {
            table.info(format!("  {figure}"), value);
        }
        let _ = write!(details, "# {what}\n{}", acc.details());
    }
    std::fs::write(work.join("flows.txt"), details)?;
    table.info(
        "failure records to pods elsewhere that name the pod (on-demand lookup)",
        format!("{remote_named} of {remote}"),
    );
    table.check(
        "dropped (final stats, every counter; the whole machine's, not only the soak's)",
        if nonzero.is_empty() {
            "0".to_owned()
        } else {
            format!("{dropped_total} ({})", nonzero.join(", "))
        },
        "0",
        dropped_total == 0,
    );
    table.info(
        "  of syn_retransmits_unseen, in the soak's flows (final syns beyond live updates)",
        flows::retransmits_without_live_update(&records).to_string(),
    );
    table.info(
        "connects made: Service, refused, pods elsewhere",
        format!(
            "{}, {}, {}",
            load.service.total.ok + load.service.total.failed(),
            load.refused.total.failed(),
            load.remote.total.failed()
        ),
    );
    Ok(())
}

/// Which destinations a load's connects go to.
type DstFilter<'a> = &'a dyn Fn(SocketAddrV4) -> bool;

/// A pod of the generated cluster (`POD_RANGE`), not the bed's own `10.232.0.0/16`.
fn is_remote_pod(dst: SocketAddrV4) -> bool {
    let [a, b, ..] = dst.ip().octets();
    a == 10 && (64..128).contains(&b)
}

/// What the fake API server saw, and what the tracer says it asked.
fn report_requests(
    log: &[crate::api_fixture::Logged],
    output: &Path,
    elapsed: Duration,
    table: &mut Table,
) -> anyhow::Result<()> {
    let minutes = elapsed.as_secs_f64() / 60.0;
    let mut by_kind = Vec::new();
    let mut busiest_lists = 0;
    for kind in Kind::ALL {
        let of = |verb: Verb| {
            log.iter()
                .filter(|l| l.kind == Some(kind) && l.verb == verb)
                .filter(|l| !l.field_selector.contains("status.podIP="))
                .count()
        };
        by_kind.push(format!(
            "{} {}/{}",
            kind.resource(),
            of(Verb::List),
            of(Verb::Watch)
        ));
        // The most lists of the kind in any 60 s.
        let lists: Vec<Instant> = log
            .iter()
            .filter(|l| l.kind == Some(kind) && l.verb == Verb::List)
            .filter(|l| !l.field_selector.contains("status.podIP="))
            .map(|l| l.at)
            .collect();
        for (i, at) in lists.iter().enumerate() {
            let within = lists[i..]
                .iter()
                .take_while(|b| b.duration_since(*at) < Duration::from_mins(1))
                .count();
            busiest_lists = busiest_lists.max(within);
        }
    }
    let lookups = log
        .iter()
        .filter(|l| {
            l.kind == Some(Kind::Pod)
                && (l.verb == Verb::Get || l.field_selector.contains("status.podIP="))
        })
        .count();
    table.info(
        "API requests in all: lists/watches by kind",
        by_kind.join(", "),
    );
    table.info(
        "API requests per minute (lists, watches, lookups)",
        format!("{:.1}", log.len() as f64 / minutes),
    );
    table.check(
        "API lists of one kind in its busiest minute (faults included)",
        busiest_lists.to_string(),
        "<= 10",
        busiest_lists <= 10,
    );
    table.info("API pod lookups (GET, status.podIP)", lookups.to_string());
    let cluster_wide = log
        .iter()
        .filter(|l| l.is_cluster_wide_pod_request())
        .count();
    table.check(
        "API cluster-wide pod lists and watches",
        cluster_wide.to_string(),
        "0",
        cluster_wide == 0,
    );
    let last_stats = BufReader::new(File::open(output)?)
        .lines()
        .map_while(Result::ok)
        .filter(|l| l.contains("\"kind\":\"stats\""))
        .last()
        .and_then(|l| serde_json::from_str::<Value>(&l).ok());
    if let Some(stats) = last_stats {
        let api = &stats["identity"]["api"];
        let kinds: Vec<String> = ["pods", "services", "endpointslices", "nodes"]
            .iter()
            .map(|k| {
                let r = &api["requests"][k];
                format!("{k} {}/{}/{}", r["lists"], r["watches"], r["failures"])
            })
            .collect();
        table.info(
            "the tracer's own count: lists/watches/failures by kind",
            kinds.join(", "),
        );
        let l = &api["lookups"];
        table.info(
            "the tracer's own count: lookups made, answered, failed, cache hits, late",
            format!(
                "{}, {}, {}, {}, {}",
                l["requests"], l["answered"], l["failed"], l["cache_hits"], l["late"]
            ),
        );
    }
    Ok(())
}
