//! `tracer demo`: a black hole to look at within a minute, on any machine with root, from the
//! static binary alone. It builds a small cluster in network namespaces of its own (`bed.rs`: a
//! Service with a live and a dead backend, a pod that refuses, a Service without endpoints, a dead
//! DNS pod and a resolver socket glued to it; through netlink, `named_netns.rs` and `rtnl.rs`, and
//! nft for the Services' rules), writes what the cluster says about it (`cluster.rs`), drives light
//! traffic through it (`traffic.rs`), and traces it like `tracer tui` or `tracer trace
//! --cluster-state` would on a node. Everything it made is removed when it ends.
mod addresses;
mod bed;
mod cluster;
mod named_netns;
mod rtnl;
mod traffic;

use anyhow::bail;
use clap::Parser as _;

use crate::args::{DemoArgs, DemoFormat, TraceArgs, TuiArgs};

/// The tracer's own command line for the demo, parsed as `tracer trace` would parse it.
#[derive(clap::Parser)]
struct DemoTrace {
    #[command(flatten)]
    trace: TraceArgs,
}

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the demo builds network namespaces and loads eBPF programs: run it as root");
    }
    let format = match args.format {
        // The TUI takes the records from the pipeline, not from a format.
        DemoFormat::Tui | DemoFormat::Json => "json",
        DemoFormat::Text => "text",
    };
    let mut command_line = vec![
        "tracer".to_string(),
        format!("--netns={}", bed::CLIENT_NS),
        format!("--conntrack-netns={}", bed::CLIENT_NS),
        format!("--cluster-state={}", bed::CLUSTER_STATE),
        format!("--format={format}"),
        "--stats-interval=2".into(),
        "--dns-timeout=1".into(),
    ];
    if let Some(duration) = args.duration {
        command_line.push(format!("--duration={}", duration.as_secs_f64()));
    }
    let trace = DemoTrace::try_parse_from(&command_line)?.trace;
    let bed = bed::Bed::create()?;
    let traffic = traffic::Traffic::start(&bed.services)?;
    match &bed.services {
        bed::Services::Built => eprintln!(
            "tracer: demo: Services 10.96.0.10 (one dead backend), 10.96.0.20 (no endpoints), DNS \
             10.96.0.53 (a resolver socket glued to a dead pod), pod 10.250.0.12 (does not listen) \
             in namespaces {} and {}; removed at exit",
            bed::CLIENT_NS,
            bed::PODS_NS
        ),
        bed::Services::Skipped(why) => {
            eprintln!(
                "tracer: demo: pods 10.250.0.10 (web), 10.250.0.11 (deleted: a black hole), \
                 10.250.0.12 (does not listen), DNS 10.250.0.53 and 10.250.0.54 (deleted) in \
                 namespaces {} and {}; removed at exit",
                bed::CLIENT_NS,
                bed::PODS_NS
            );
            eprintln!(
                "tracer: demo: skipped the Services (10.96.0.10 to a live and a dead pod, \
                 10.96.0.20 without endpoints, DNS 10.96.0.53 and the resolver socket glued to its \
                 dead pod): {why}; the client dials the pods directly"
            );
        }
    }
    let result = match args.format {
        DemoFormat::Tui => {
            crate::tui::live(TuiArgs {
                pipeline: trace.pipeline,
                stats_interval: std::time::Duration::from_secs(1),
                prometheus: None,
                cluster_only: false,
                cluster_window: std::time::Duration::from_mins(5),
                cluster_refresh: std::time::Duration::from_secs(5),
            })
            .await
        }
        DemoFormat::Text | DemoFormat::Json => crate::live::run(trace).await,
    };
    drop(traffic);
    drop(bed);
    result
}
