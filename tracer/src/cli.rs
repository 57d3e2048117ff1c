//! Command line.
use clap::{Parser, Subcommand};

use tracer::{
    args::{DemoArgs, ReplayArgs, SummaryArgs, SweepArgs, TraceArgs, TuiArgs},
    bench::cluster_api::BenchClusterApiArgs,
    bench::cluster_model::BenchClusterModelArgs,
    bench::metrics::BenchMetricsArgs,
    bench::pipeline::BenchPipelineArgs,
};

#[derive(Debug, Parser)]
#[command(
    name = "tracer",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("TRACER_GIT_COMMIT"), ")"),
    about = "Names the black holes on this node: TCP connects that nobody answers, refused, unreachable.",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Trace connect attempts live on this node (needs root).
    Trace(TraceArgs),
    /// Watch the flows that need attention live, in a terminal UI (needs root).
    Tui(TuiArgs),
    /// The terminal UI fed from a recorded JSON-lines file (`trace --format json`); no root.
    Replay(ReplayArgs),
    /// Print the ranked table of a recorded JSON-lines file as plain text, for a ticket.
    Summary(SummaryArgs),
    /// The whole cluster from Prometheus: per Service and backend, the nodes that see black holes
    /// and the failing share; DNS servers losing queries by node; tracers missing, down or
    /// degraded. Needs the tracer on every node run with `--metrics` and scraped (docs/metrics.md).
    Sweep(SweepArgs),
    /// A black hole to look at: builds a small cluster in network namespaces of its own (a dead
    /// backend, a refusing port, a Service without endpoints, a dead DNS pod), drives traffic
    /// through it and traces it; removes it all at exit (needs root).
    Demo(DemoArgs),
    /// Userspace pipeline throughput on synthetic records (for `cargo xtask bench`).
    #[command(hide = true)]
    BenchPipeline(BenchPipelineArgs),
    /// Load time and memory of the cluster model for a large snapshot (for `cargo xtask bench`).
    #[command(hide = true)]
    BenchClusterModel(BenchClusterModelArgs),
    /// The live cluster source of one node against an API server: memory and requests (for
    /// `cargo xtask bench`).
    #[command(hide = true)]
    BenchClusterApi(BenchClusterApiArgs),
    /// Time to serve a scrape of the `--metrics` endpoint (for `cargo xtask bench`).
    #[command(hide = true)]
    BenchMetrics(BenchMetricsArgs),
}
