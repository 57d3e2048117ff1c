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
    /// Watch the flows that need attention live, in a terminal UI (needs root).
    Tui(TuiArgs),
    /// The terminal UI fed from a recorded JSON-lines file (`trace --format json`); no root.
    Replay(ReplayArgs),
    /// Print the ranked table of a recorded JSON-lines file as plain text, for a ticket.
    Summary(SummaryArgs),
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

/// `tracer tui`: the filters of `trace`; records go to the screen, not to a file.
#[derive(Debug, clap::Args)]
pub struct TuiArgs {
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
    /// How often healthy counts and the header's stats refresh (shorter than `trace`'s default:
    /// a person is watching).
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = parse_seconds)]
    pub stats_interval: Duration,
    /// Stop tracing after this long; the screen stays until you quit.
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,
}

impl TuiArgs {
    /// The same pipeline as `trace`; `format` and `output` are unused, the TUI brings its own sink.
    pub fn trace_args(&self) -> TraceArgs {
        TraceArgs {
            netns: self.netns.clone(),
            dst: self.dst.clone(),
            port: self.port.clone(),
            format: Format::Json,
            output: None,
            stats_interval: self.stats_interval,
            duration: self.duration,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// A file written by `tracer trace --format json` (JSON lines, schema 1).
    #[arg(value_name = "FILE.jsonl")]
    pub file: PathBuf,
    /// Replay this many times faster than recorded; 0 shows everything at once.
    #[arg(long, value_name = "X", default_value = "1", value_parser = parse_speed)]
    pub speed: f64,
}

#[derive(Debug, clap::Args)]
pub struct SummaryArgs {
    /// A file written by `tracer trace --format json` (JSON lines, schema 1).
    #[arg(value_name = "FILE.jsonl")]
    pub file: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Like `conntrack -E`, verdict first.
    Text,
    /// JSON lines (schema in the README).
    Json,
}

fn parse_speed(s: &str) -> Result<f64, String> {
    let speed: f64 = s.parse().map_err(|_| format!("'{s}' is not a number (like 1, 10 or 0.5)"))?;
    if !(speed >= 0.0 && speed.is_finite()) {
        return Err(format!("'{s}' must be 0 (as fast as possible) or a positive number"));
    }
    Ok(speed)
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.parse().map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(format!("'{s}' must be a positive number of seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}
