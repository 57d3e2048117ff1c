//! The userspace figures: the pipeline's events/s, the cluster model's memory for 70k pods, and
//! serving a scrape of `--metrics`, each from a hidden `tracer bench-*` subcommand.
use std::{
    path::Path,
    process::{Command, Stdio},
};

use anyhow::{Context as _, bail};

use super::{BenchArgs, check_interrupted, report::Table};

/// The userspace figures: the pipeline, the cluster model, serving `--metrics`.
pub fn run(tracer: &Path, args: &BenchArgs, table: &mut Table) -> anyhow::Result<()> {
    eprintln!(
        "bench: userspace pipeline, {} synthetic records on one core",
        args.pipeline_events
    );
    pipeline(tracer, args.pipeline_events, table)?;
    check_interrupted()?;
    eprintln!("bench: the cluster model of a generated 70k-pod snapshot");
    cluster_model(tracer, table)?;
    check_interrupted()?;
    eprintln!("bench: serving a scrape of a 2000-series --metrics endpoint");
    metrics_scrape(tracer, table)?;
    check_interrupted()
}

/// Load time and memory of the cluster model for 70k pods: from a snapshot file (`--cluster-state`)
/// and object by object (as the live watch builds it), each in a process of its own.
fn cluster_model(tracer: &Path, table: &mut Table) -> anyhow::Result<()> {
    const TARGET_MIB: f64 = 200.0;
    let file = std::env::temp_dir().join(format!("bhb-bench-snapshot-{}.json", std::process::id()));
    let run = |args: &[&str]| -> anyhow::Result<serde_json::Value> {
        let out = Command::new(tracer)
            .arg("bench-cluster-model")
            .args(args)
            .stderr(Stdio::inherit())
            .output()
            .context("running tracer bench-cluster-model")?;
        if !out.status.success() {
            bail!("tracer bench-cluster-model failed: {}", out.status);
        }
        Ok(serde_json::from_slice(&out.stdout)?)
    };
    let path = file.to_string_lossy().into_owned();
    let written = run(&["--write", &path, "--pods", "70000"])?;
    let mib = |v: &serde_json::Value, key: &str| v[key].as_f64().unwrap_or(0.0) / 1024.0;
    let file_mib = written["file_bytes"].as_f64().unwrap_or(0.0) / (1024.0 * 1024.0);
    for (how, flag) in [
        ("snapshot file", "--load"),
        ("object by object (watch)", "--load-items"),
    ] {
        let v = run(&[flag, &path])?;
        let rss = mib(&v, "rss_kib");
        table.check(
            format!("cluster model, 70k pods, {how}: resident after loading, MiB"),
            format!("{rss:.0}"),
            "< 200",
            rss < TARGET_MIB,
        );
        table.info(
            format!("cluster model, 70k pods, {how}: load s, peak MiB (file {file_mib:.0} MiB)"),
            format!(
                "{:.2} s, {:.0}",
                v["load_s"].as_f64().unwrap_or(0.0),
                mib(&v, "peak_rss_kib")
            ),
        );
    }
    let _ = std::fs::remove_file(&file);
    Ok(())
}

/// The time to serve one scrape of a `--metrics` endpoint at the label-set cap (2000 series in
/// `tracer_connects_total`), over loopback HTTP; not a target, a figure beside the others.
fn metrics_scrape(tracer: &Path, table: &mut Table) -> anyhow::Result<()> {
    let out = Command::new(tracer)
        .args(["bench-metrics", "--series", "2000", "--scrapes", "50"])
        .stderr(Stdio::inherit())
        .output()
        .context("running tracer bench-metrics")?;
    if !out.status.success() {
        bail!("tracer bench-metrics failed: {}", out.status);
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("parsing tracer bench-metrics output")?;
    let number = |key: &str| v[key].as_f64().unwrap_or(f64::NAN);
    table.info(
        "--metrics: serving a scrape of 2000 series, ms (median, slowest of 50)",
        format!(
            "{:.1}, {:.1} ({:.0} KiB)",
            number("median_ms"),
            number("max_ms"),
            number("body_bytes") / 1024.0
        ),
    );
    Ok(())
}

fn pipeline(tracer: &Path, events: u64, table: &mut Table) -> anyhow::Result<()> {
    let out = Command::new(tracer)
        .args(["bench-pipeline", "--events", &events.max(1000).to_string()])
        .stderr(Stdio::inherit())
        .output()
        .context("running tracer bench-pipeline")?;
    if !out.status.success() {
        bail!("tracer bench-pipeline failed: {}", out.status);
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("parsing tracer bench-pipeline output")?;
    let rate = |key: &str| {
        v.get(key)
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0)
    };
    let (classify, json) = (rate("classify_events_per_sec"), rate("json_events_per_sec"));
    table.check(
        "userspace decode -> flows -> verdict, events/s on one core",
        format!("{:.2}M", classify / 1e6),
        ">= 1M",
        classify >= 1e6,
    );
    table.check(
        "userspace full path to JSON lines (enrich + serialize), events/s on one core",
        format!("{:.2}M", json / 1e6),
        ">= 1M",
        json >= 1e6,
    );
    if classify < 1e6 {
        table.notes.push(format!(
            "pipeline: decode -> flows -> verdict at {classify:.0} events/s"
        ));
    }
    if json < 1e6 {
        table.notes.push(format!(
            "full path {json:.0} events/s: each event becomes a ~600-byte JSON line; on a shared \
             machine rerun `tracer bench-pipeline` a few times (it varies by a third), and see \
             docs/performance.md for where a profile puts the time"
        ));
    }
    Ok(())
}
