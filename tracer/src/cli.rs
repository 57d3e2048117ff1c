//! Command line.
use std::{path::PathBuf, time::Duration};

use clap::{Parser, Subcommand, ValueEnum};

use crate::filter::Cidr;

#[derive(Debug, Parser)]
#[command(
    name = "tracer",
    version,
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
    /// Userspace pipeline throughput on synthetic records (for `cargo xtask bench`).
    #[command(hide = true)]
    BenchPipeline(crate::bench_pipeline::BenchPipelineArgs),
}

#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// Only this network namespace: a name from `ip netns list`, a path, `pid:N` or `host`.
    /// Filtered in the kernel.
    #[arg(long, value_name = "NS")]
    pub netns: Option<String>,
    /// Only destinations in this CIDR (socket destination or the dialled address). Repeatable.
    #[arg(long = "dst", value_name = "CIDR")]
    pub dst: Vec<Cidr>,
    /// Only this destination port. Repeatable.
    #[arg(long = "port", value_name = "PORT")]
    pub port: Vec<u16>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write records to this file instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// How often to report healthy-connect counts and tracer stats.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    pub stats_interval: Duration,
    /// Stop after this long (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Like `conntrack -E`, verdict first.
    Text,
    /// JSON lines (schema in the README).
    Json,
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(format!("'{s}' must be a positive number of seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}
