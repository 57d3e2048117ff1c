//! What each command takes, as clap parses it: the edge where command-line text becomes typed
//! options (`cli.rs` in the binary only assembles the commands).
use std::{path::PathBuf, time::Duration};

use clap::ValueEnum;

use crate::{
    conntrack::subscription::DestroyEventsMode, metrics::server::MetricsAddr, record::HookTier,
    stages::filter::Cidr,
};

/// `--dns-hooks` / `--tcp-hooks`: a tier, or `None` for the best the kernel allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookChoice(pub Option<HookTier>);

fn parse_hook_tier(s: &str) -> Result<HookChoice, String> {
    if s == "auto" {
        return Ok(HookChoice(None));
    }
    HookTier::from_str(s, false)
        .map(|t| HookChoice(Some(t)))
        .map_err(|_| format!("{s:?}: auto, fentry, tracepoint, kprobe or cgroup-skb"))
}

/// What to follow and how: shared by `trace` and `tui`.
#[derive(Debug, Clone, clap::Args)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each bool is one independent command-line switch, as clap parses it"
)]
pub struct PipelineArgs {
    /// Only this network namespace: a name from `ip netns list`, a path, `pid:N` or `host`.
    /// Filtered in the kernel.
    #[arg(long, value_name = "NS")]
    pub netns: Option<String>,
    /// Only destinations in this CIDR (socket destination or the dialled address). Repeatable.
    #[arg(long = "dst", value_name = "CIDR")]
    pub dst: Vec<Cidr>,
    /// Only this destination port. Repeatable.
    #[arg(long = "port", value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Vec<u16>,
    /// Network namespace whose conntrack table holds the Service NAT (kube-proxy's): `host` (the
    /// node), an `ip netns` name, a path or `pid:N`.
    #[arg(long, value_name = "NS", default_value = "host")]
    pub conntrack_netns: String,
    /// When to follow conntrack destroy events, the only place the backend of a refused Service
    /// connect (a backend answering with a RST) still appears: `auto` from the first such refusal
    /// until 5 minutes without one (that first refusal has no backend), `always` from the start (a
    /// kernel cost per destroyed conntrack entry on the node), `never`.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = DestroyEventsMode::Auto)]
    pub conntrack_destroy_events: DestroyEventsMode,
    /// Window of the per-Service view (`service` records).
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = parse_seconds)]
    pub service_window: Duration,
    /// Report conntrack entries still `SYN_SENT` `[UNREPLIED]` after this long (`stale_nat` records).
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = parse_seconds)]
    pub stale_after: Duration,
    /// Most connect attempts followed at once in the kernel (its memory bound). Attempts beyond it
    /// are counted as dropped.
    #[arg(long, value_name = "N", default_value_t = tracer_common::MAX_ATTEMPTS,
          value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub max_attempts: u32,
    /// Attach every program but make each return at once (for `cargo xtask bench`: what the hooks
    /// cost before they do any work). Nothing is traced.
    #[arg(long, hide = true)]
    pub hooks_only: bool,
    /// Do not follow DNS: only TCP connects are followed (no DNS hook is attached).
    #[arg(long)]
    pub no_dns: bool,
    /// Where the DNS hooks attach: `auto` (the cheapest this kernel allows), or one of `fentry`,
    /// `tracepoint`, `kprobe`, `cgroup-skb` (a tier the kernel cannot give is an error).
    #[arg(long, value_name = "TIER", env = "TRACER_DNS_HOOKS", default_value = "auto",
          value_parser = parse_hook_tier)]
    pub dns_hooks: HookChoice,
    /// Where the TCP hooks attach: `auto`, or one of `fentry`, `kprobe`, `tracepoint`.
    #[arg(long, value_name = "TIER", env = "TRACER_TCP_HOOKS", default_value = "auto",
          value_parser = parse_hook_tier)]
    pub tcp_hooks: HookChoice,
    /// A DNS query with no reply after this long is reported `unanswered` (`dns` records).
    #[arg(long, value_name = "SECONDS", default_value = "2", value_parser = parse_seconds)]
    pub dns_timeout: Duration,
    /// DNS replies slower than this are reported one by one (`dns` record, verdict `slow`); faster
    /// NOERROR replies are only counted (`dns_healthy`).
    #[arg(long, value_name = "SECONDS", default_value = "0.5", value_parser = parse_seconds)]
    pub dns_slow: Duration,
    /// A socket whose last N queries to one server went unanswered, while other sockets' queries to
    /// that server or Service were answered, is reported stuck (`dns_stuck_socket`).
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub dns_stuck_after: u32,
    /// Stop tracing after this long (default: until Ctrl-C or SIGTERM).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,
    /// Name pods, Services and nodes from this file, written by
    /// `kubectl get pods,services,endpointslices,nodes -A -o json` (for nodes without API access).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kubeconfig", "in_cluster"])]
    pub cluster_state: Option<PathBuf>,
    /// Name pods, Services and nodes live: list and watch them through the Kubernetes API with this
    /// kubeconfig's current context.
    #[arg(long, value_name = "FILE", conflicts_with = "in_cluster")]
    pub kubeconfig: Option<PathBuf>,
    /// Like --kubeconfig, with the service account of the pod the tracer runs in.
    #[arg(long)]
    pub in_cluster: bool,
    /// The cgroup v2 root the `connect()` and DNS hooks attach to (default: the cgroup2 mount in
    /// /proc/mounts). In a container give the node's, mounted from the host: the container's own
    /// /sys/fs/cgroup shows only its own cgroup.
    #[arg(long, value_name = "DIR")]
    pub cgroup_root: Option<PathBuf>,
    /// Where Cilium pins its load-balancing maps (default /sys/fs/bpf/tc/globals): with Cilium's
    /// socket LB and a kernel older than 6.15, its reverse socket NAT map names the Service a
    /// connect or DNS query was sent to. Must be a directory on a bpffs when given; by default,
    /// absent means Cilium is not here (said in `stats.socket_lb`).
    #[arg(long, value_name = "DIR")]
    pub cilium_bpffs: Option<PathBuf>,
    /// Attach the `connect()` hooks without `BPF_F_PREORDER`, as on kernels before 6.15 (a socket
    /// LB then rewrites before the tracer sees the dialled address). For tests that emulate those
    /// kernels.
    #[arg(long, hide = true)]
    pub no_preorder: bool,
    /// This node's name, in every stats record (a `DaemonSet` sets `NODE_NAME` from the downward
    /// API).
    #[arg(long, value_name = "NAME", env = "NODE_NAME")]
    pub node_name: Option<String>,
    /// Serve Prometheus metrics (`OpenMetrics` text) on this address: `IP:PORT`, or `:PORT` for every
    /// address. Every series carries `node` (`--node-name`, else the hostname). See docs/metrics.md.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<MetricsAddr>,
    /// Most distinct label sets per metric family; past it, new ones are folded into one `other`
    /// series and counted in `tracer_metrics_overflow_total`.
    #[arg(long, value_name = "N", default_value_t = crate::metrics::DEFAULT_LABEL_SET_CAP as u64,
          value_parser = clap::value_parser!(u64).range(10..=1_000_000))]
    pub metrics_label_sets: u64,
}

#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write records to this file instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// How often to report healthy-connect counts, Service views and tracer stats.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_seconds)]
    pub stats_interval: Duration,
}

/// `tracer tui`: the options of `trace`; records go to the screen, not to a file.
#[derive(Debug, clap::Args)]
pub struct TuiArgs {
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// How often healthy counts and the header's stats refresh (shorter than `trace`'s default:
    /// a person is watching).
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = parse_seconds)]
    pub stats_interval: Duration,
    /// Add a Cluster view: every node's tracer, from the Prometheus that scrapes the `DaemonSet`
    /// (plain HTTP, like `http://prometheus.monitoring:9090`; a `kubectl port-forward` gives one).
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// Only the Cluster view: do not trace this node (no root needed).
    #[arg(long, requires = "prometheus")]
    pub cluster_only: bool,
    /// What the Cluster view calls now: the last this long, like `5m` or `90s`.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = parse_window)]
    pub cluster_window: Duration,
    /// How often the Cluster view asks Prometheus.
    #[arg(long, value_name = "SECONDS", default_value = "5", value_parser = parse_refresh)]
    pub cluster_refresh: Duration,
}

impl TuiArgs {
    /// The same pipeline as `trace`; `format` and `output` are unused, the TUI brings its own sink.
    pub fn trace_args(&self) -> TraceArgs {
        TraceArgs {
            pipeline: self.pipeline.clone(),
            format: Format::Json,
            output: None,
            stats_interval: self.stats_interval,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// How to show it.
    #[arg(long, value_enum, default_value_t = DemoFormat::Tui)]
    pub format: DemoFormat,
    /// Stop after this long (default: until Ctrl-C, SIGTERM or `q`).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    pub duration: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DemoFormat {
    /// The live terminal UI.
    Tui,
    /// Like `tracer trace`.
    Text,
    /// JSON lines.
    Json,
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

/// `tracer sweep`: the cluster from the Prometheus that scrapes every node's tracer.
#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    /// The Prometheus HTTP API, like `http://prometheus.monitoring:9090` (plain HTTP; a
    /// `kubectl port-forward` gives one).
    #[arg(long, value_name = "URL")]
    pub prometheus: String,
    /// How far back to look, like `10m`, `1h` or `90s`.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_window)]
    pub window: Duration,
    /// Output format.
    #[arg(long, value_enum, default_value_t = SweepFormat::Text)]
    pub format: SweepFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SweepFormat {
    /// One line per finding, like `tracer summary`.
    Text,
    /// The same as one JSON document.
    Json,
}

/// An interval of whole seconds from 1 s to 10 min: Prometheus is asked no faster.
fn parse_refresh(s: &str) -> Result<Duration, String> {
    let d = parse_seconds(s)?;
    if d < Duration::from_secs(1) || d > Duration::from_mins(10) {
        return Err(format!("'{s}' is out of range: give 1 to 600 seconds"));
    }
    Ok(d)
}

fn parse_window(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|_| format!("'{s}' is not a duration (like 10m, 1h or 90s)"))?;
    if d < Duration::from_secs(1) || d > Duration::from_hours(366 * 24) {
        return Err(format!("'{s}' is out of range: give 1s to a year"));
    }
    Ok(d)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Like `conntrack -E`, verdict first.
    Text,
    /// JSON lines (schema in docs/schema.md).
    Json,
}

fn parse_speed(s: &str) -> Result<f64, String> {
    const MAX_SPEED: f64 = 1_000_000.0;
    let speed: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number (like 1, 10 or 0.5)"))?;
    // Below 0.001 a recorded second would last hours, past what the replay's timer takes.
    if speed == 0.0 || (0.001..=MAX_SPEED).contains(&speed) {
        Ok(speed)
    } else {
        Err(format!(
            "'{s}' is out of range: give 0 (everything at once) or a speed from 0.001 to {MAX_SPEED}"
        ))
    }
}

/// The longest duration or interval any option takes: a year.
const MAX_SECONDS: f64 = 366.0 * 24.0 * 3600.0;
/// The shortest: a microsecond (a zero interval panics the timer; `--dns-slow` is finer than a
/// millisecond in tests that want every reply slow).
const MIN_SECONDS: f64 = 0.000_001;

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&secs) {
        return Err(format!(
            "'{s}' is out of range: give seconds from {MIN_SECONDS} to {MAX_SECONDS} (a year)"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}
