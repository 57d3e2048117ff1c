//! `tracer bench-cluster-api` (hidden, used by `cargo xtask bench`): the live cluster source of one
//! node (`--kubeconfig`, `--node-name`) against the API server the benchmark serves, naming what a
//! busy node's records would need: healthy connects to endpoints on other nodes
//! (`--healthy-per-second`, never a lookup) and failing connects to pods on other nodes
//! (`--failing-per-second`, looked up on demand). No eBPF, no root: the process holds the cluster
//! model and the API client and nothing else, so its resident memory is theirs. A JSON line every
//! `--report-every` seconds: memory (before the client started, now, peak), whether names are
//! current, the model's sizes, the requests made and the lookups.
use std::{
    net::{IpAddr, SocketAddr},
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::rss_kib;
use crate::{
    identity::{Identities, source::ClusterSource},
    verdict::Verdict,
};

#[derive(Debug, clap::Args)]
pub struct BenchClusterApiArgs {
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: PathBuf,
    #[arg(long, value_name = "NAME")]
    pub node_name: String,
    /// How long to run.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub seconds: u64,
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub report_every: u64,
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub healthy_per_second: u32,
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub failing_per_second: u32,
}

const TICK: Duration = Duration::from_millis(10);

pub fn run(args: &BenchClusterApiArgs) -> anyhow::Result<()> {
    let baseline = rss_kib().1;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime")?;
    let source = runtime.block_on(ClusterSource::from_kubeconfig(
        &args.kubeconfig,
        &args.node_name,
    ))?;
    let mut ids = Identities::new(None, Some(source));
    let started = Instant::now();
    let mut next_report = started + Duration::from_secs(args.report_every);
    let mut in_sync_s: Option<f64> = None;
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    let mut due = (0.0_f64, 0.0_f64);
    let mut named = (0_u64, 0_u64);
    while started.elapsed() < Duration::from_secs(args.seconds) {
        std::thread::sleep(TICK);
        let Some(view) = ids.cluster_view() else {
            break;
        };
        if in_sync_s.is_none() && !view.stale {
            in_sync_s = Some(started.elapsed().as_secs_f64());
        }
        due.0 += f64::from(args.healthy_per_second) * TICK.as_secs_f64();
        due.1 += f64::from(args.failing_per_second) * TICK.as_secs_f64();
        while due.0 >= 1.0 {
            due.0 -= 1.0;
            if let Some(to) = remote_endpoint(&view.state, &args.node_name, &mut rng) {
                named.0 += u64::from(ids.healthy(0, to).dst_pod.is_some());
            }
        }
        while due.1 >= 1.0 {
            due.1 -= 1.0;
            if let Some(to) = remote_pod_address(&view.state, &args.node_name, &mut rng) {
                let from = SocketAddr::from(([10, 255, 0, 1], 40_000));
                let id = ids.connect(0, from, to, None, Verdict::TimedOut);
                named.1 += u64::from(id.dst_pod.is_some());
                // Not held here: the next failing record to it finds the answer cached.
                let _ = ids.take_waiting();
            }
        }
        if Instant::now() >= next_report {
            next_report += Duration::from_secs(args.report_every);
            report(&ids, started, baseline, in_sync_s, named);
        }
    }
    report(&ids, started, baseline, in_sync_s, named);
    Ok(())
}

fn report(
    ids: &Identities,
    started: Instant,
    baseline: u64,
    in_sync_s: Option<f64>,
    named: (u64, u64),
) {
    let (peak, now) = rss_kib();
    let view = ids.cluster_view();
    let sizes = view.as_ref().map(|v| {
        serde_json::json!({"pods": v.state.pods().len(), "services": v.state.services().len(),
                           "endpointslices": v.state.endpoint_slices().len(),
                           "nodes": v.state.nodes().len()})
    });
    let stats = ids.stats(0);
    println!(
        "{}",
        serde_json::json!({
            "t_s": started.elapsed().as_secs_f64(),
            "in_sync_s": in_sync_s,
            "stale": view.as_ref().is_none_or(|v| v.stale),
            "baseline_rss_kib": baseline,
            "rss_kib": now,
            "peak_rss_kib": peak,
            "model": sizes,
            "named_healthy": named.0,
            "named_failing": named.1,
            "identity": stats,
        })
    );
}

fn next(rng: &mut u64) -> u64 {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    *rng
}

/// An endpoint of some EndpointSlice on another node.
fn remote_endpoint(
    state: &crate::identity::cluster::ClusterState,
    node: &str,
    rng: &mut u64,
) -> Option<SocketAddr> {
    let slices = state.endpoint_slices();
    if slices.is_empty() {
        return None;
    }
    let slice = &slices[(next(rng) % slices.len() as u64) as usize];
    let endpoint = slice
        .endpoints
        .iter()
        .find(|e| e.node_name.as_deref() != Some(node))?;
    let port = slice.ports.first().and_then(|p| p.port).unwrap_or(80);
    Some(SocketAddr::new(*endpoint.addresses.first()?, port))
}

/// An address in another node's pod range (`.2` to `.31`: where its pods are).
fn remote_pod_address(
    state: &crate::identity::cluster::ClusterState,
    node: &str,
    rng: &mut u64,
) -> Option<SocketAddr> {
    let nodes = state.nodes();
    if nodes.is_empty() {
        return None;
    }
    let n = &nodes[(next(rng) % nodes.len() as u64) as usize];
    if n.name == node {
        return None;
    }
    let (net, _) = n.pod_cidrs.first()?.split_once('/')?;
    let IpAddr::V4(net) = net.parse().ok()? else {
        return None;
    };
    let host = 2 + (next(rng) % 30) as u8;
    let [a, b, c, _] = net.octets();
    Some(SocketAddr::from(([a, b, c, host], 8080)))
}
