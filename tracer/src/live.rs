//! `tracer trace`: wires the stages for live tracing. ring buffer -> decode -> flows -> enrich ->
//! filter -> sink, one event loop, events taken in batches.
use std::{
    io::{self, BufWriter, Write},
    time::{Duration, Instant},
};

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};
use tracer_common::KernelFilter;

use crate::{
    args::{Format, PipelineArgs, TraceArgs},
    clock::{KernelClock, monotonic_now_ns},
    conntrack::{
        dumper::{DumpResult, Dumper},
        netlink::Conntrack,
        subscription::DestroySubscription,
    },
    datapath::reader::DatapathReader,
    identity::{Identities, source::ClusterSource},
    kernel::{KernelSide, LoadOptions, tiers::HookRequest},
    metrics::{Metrics, MetricsSink, server::Endpoint},
    netns::{self, Netns},
    record::{Dropped, Record},
    sink::{Sink, json::JsonSink, output_file::OutputFile, tee::Tee, text::TextSink},
    stages::{
        filter::DestinationFilter,
        {ConntrackDump, StageOptions, Stages},
    },
};

/// `host` means the tracer's own namespace (the node's); anything else is resolved like `--netns`.
fn conntrack_netns_path(spec: &str) -> anyhow::Result<Option<std::path::PathBuf>> {
    if spec == "host" {
        return Ok(None);
    }
    netns::resolve(spec)?;
    Ok(Some(netns::spec_path(spec)))
}

/// Why the loop ended without an error.
enum Stop {
    Signal,
    Duration,
    /// The reader of our output went away (`| head`): a normal end.
    BrokenPipe,
}

pub async fn run(args: TraceArgs) -> anyhow::Result<()> {
    let netns = netns_filter(&args.pipeline)?;
    // Checked now, created at the first record: a failure anywhere in start-up leaves an older
    // recording at that path untouched.
    let out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(OutputFile::check(path)?),
        None => Box::new(io::stdout().lock()),
    };
    let metrics = metrics_endpoint(&args.pipeline)?;
    let out = BufWriter::with_capacity(1 << 16, out);
    let sink: Box<dyn Sink> = match args.format {
        Format::Json => Box::new(JsonSink::new(out)),
        Format::Text => Box::new(TextSink::new(out)),
    };
    trace(args, netns, sink, metrics).await
}

/// `--metrics`: the listener, bound now so a bad or taken address stops the tracer before anything
/// is attached.
pub fn metrics_endpoint(args: &PipelineArgs) -> anyhow::Result<Option<Endpoint>> {
    args.metrics.map(Endpoint::bind).transpose()
}

/// The records also into the metrics, served from `endpoint`'s own thread (bound earlier, served
/// once the programs are loaded).
fn with_metrics(
    sink: Box<dyn Sink>,
    endpoint: Option<Endpoint>,
    args: &PipelineArgs,
    kernel: &KernelSide,
) -> anyhow::Result<Box<dyn Sink>> {
    let Some(endpoint) = endpoint else {
        return Ok(sink);
    };
    let node = crate::metrics::node_label(args.node_name.as_deref());
    let (mut metrics, registry) = Metrics::new(
        &node,
        usize::try_from(args.metrics_label_sets).unwrap_or(usize::MAX),
    );
    // The kernel and its capabilities from the first scrape on, not only from the first stats
    // record an interval later.
    metrics.set_kernel(&kernel.capabilities.info());
    endpoint.serve(registry)?;
    Ok(Box::new(Tee {
        first: sink,
        second: Box::new(MetricsSink { metrics }),
    }))
}

/// The checks that need no kernel object: namespaces, privileges, BTF and tracepoints, the cgroup
/// root. `tracer tui` runs them before it takes over the terminal.
pub fn check_before_start(args: &PipelineArgs) -> anyhow::Result<()> {
    hook_request(args).check().map_err(anyhow::Error::msg)?;
    netns_filter(args)?;
    conntrack_netns_path(&args.conntrack_netns)?;
    crate::kernel::preflight::check(&crate::kernel::preflight::Paths::from_env())?;
    if let Some(root) = &args.cgroup_root {
        crate::kernel::preflight::check_cgroup_root(root)?;
    }
    if let Some(dir) = &args.cilium_bpffs {
        crate::cilium::check_bpffs(dir)?;
    }
    Ok(())
}

/// The hook tiers asked for on the command line.
fn hook_request(args: &PipelineArgs) -> HookRequest {
    HookRequest {
        dns: args.dns_hooks.0,
        tcp: args.tcp_hooks.0,
        no_dns: args.no_dns,
    }
}

/// The namespace `--netns` names, resolved before anything else is opened.
fn netns_filter(args: &PipelineArgs) -> anyhow::Result<Option<Netns>> {
    Ok(args.netns.as_deref().map(netns::resolve).transpose()?)
}

/// `tracer tui`: the same pipeline into the TUI's sink (a channel); `metrics` bound by the caller
/// (`metrics_endpoint`) before it took over the terminal.
pub async fn run_with_sink(
    args: TraceArgs,
    sink: Box<dyn Sink>,
    metrics: Option<Endpoint>,
) -> anyhow::Result<()> {
    let netns = netns_filter(&args.pipeline)?;
    trace(args, netns, sink, metrics).await
}

/// Once on stderr: the hook tiers chosen (and why not the others), then what is degraded.
fn say_hooks_and_warnings(kernel: &KernelSide) {
    for line in kernel.capabilities.hooks_lines() {
        eprintln!("{line}");
    }
    for warning in kernel.capabilities.warnings() {
        eprintln!("{warning}");
    }
}

async fn trace(
    args: TraceArgs,
    netns: Option<Netns>,
    sink: Box<dyn Sink>,
    metrics: Option<Endpoint>,
) -> anyhow::Result<()> {
    hook_request(&args.pipeline)
        .check()
        .map_err(anyhow::Error::msg)?;
    // Before anything is attached, so a signal at any point after "attached" detaches cleanly.
    let signals = Signals::install()?;
    // A bad cluster-state file or kubeconfig stops here, before anything is attached.
    let identities = identities(&args.pipeline).await?;
    let filter = KernelFilter {
        netns_inode: netns.as_ref().map_or(0, |n| n.inode),
        hooks_only: u32::from(args.pipeline.hooks_only),
        // Set by the loader from the TCP tier.
        state_changes_seen: 0,
    };

    let conntrack_netns = conntrack_netns_path(&args.pipeline.conntrack_netns)?;
    let conntrack = Conntrack::open(conntrack_netns.as_deref())
        .map_err(|e| eprintln!("tracer: warning: no Service backends: {e}"))
        .ok();
    let destroyed = DestroySubscription::start(
        conntrack_netns.clone(),
        args.pipeline.conntrack_destroy_events,
    );
    let dumper = Dumper::start(
        conntrack_netns.clone(),
        args.stats_interval,
        args.pipeline.stale_after,
    );
    // The node's Service rules are worth reading only with an EndpointSlice to judge them by.
    let judged = identities.cluster_view().is_some();
    // A bad --cilium-bpffs stops here, before anything is attached.
    let cilium = crate::cilium::open_given(args.pipeline.cilium_bpffs.as_deref())?;
    let datapath = if judged {
        DatapathReader::start(
            conntrack_netns,
            cilium.dir().to_path_buf(),
            args.stats_interval,
        )
    } else {
        DatapathReader::idle()
    };
    let cilium_pins = cilium.reverse_sk_pins();
    let mut kernel = KernelSide::load(&LoadOptions {
        filter,
        max_attempts: args.pipeline.max_attempts,
        dns_slow_reply: args.pipeline.dns_slow,
        hooks: hook_request(&args.pipeline),
        cgroup_root: args.pipeline.cgroup_root.as_deref(),
        preorder: !args.pipeline.no_preorder,
        cilium: &cilium_pins,
    })?;
    say_hooks_and_warnings(&kernel);
    let mut sink = with_metrics(sink, metrics, &args.pipeline, &kernel)?;
    let mut pipeline = Pipeline {
        stages: Stages::new(StageOptions {
            clock: KernelClock::new(),
            identities,
            conntrack,
            destroyed,
            filter: DestinationFilter {
                cidrs: args.pipeline.dst.clone(),
                ports: args.pipeline.port.clone(),
            },
            service_window: args.pipeline.service_window,
            dns_timeout: args.pipeline.dns_timeout,
            dns_stuck_after: args.pipeline.dns_stuck_after,
        }),
        dumper,
        datapath,
        reported_drops: 0,
        conntrack_failed: false,
        stats_written: 0,
        node: args.pipeline.node_name.clone(),
    };
    if !judged {
        pipeline.stages.datapath.cannot_judge();
    }
    pipeline.stages.enricher.cilium = Some(cilium);
    announce(&args.pipeline, netns.as_ref());

    let stop = event_loop(&mut kernel, &mut pipeline, sink.as_mut(), &args, signals).await;
    let stop = match stop {
        Ok(stop) => stop,
        Err(e) if is_broken_pipe(&e) => Stop::BrokenPipe,
        Err(e) => {
            // The output failed (a full disk): the totals are not lost with it.
            eprintln!("{}", final_stats_text(&pipeline.stats(&kernel, true)));
            return Err(e);
        }
    };
    if !matches!(stop, Stop::BrokenPipe) {
        write_final(&mut kernel, &mut pipeline, sink.as_mut())?;
    }
    let why = match stop {
        Stop::Signal => "signal",
        Stop::Duration => "duration reached",
        Stop::BrokenPipe => "output closed",
    };
    eprintln!("tracer: stopped ({why}); programs detached");
    Ok(())
}

/// At a normal end: whatever arrived before we stopped, the last counts, then the final totals,
/// which go to stderr when the output cannot take them.
fn write_final(
    kernel: &mut KernelSide,
    pipeline: &mut Pipeline,
    sink: &mut dyn Sink,
) -> io::Result<()> {
    let _ = drain(kernel, pipeline, sink);
    // Records held for an on-demand name go out now, with what is known.
    let counted = ignore_broken_pipe(pipeline.stages.release_held(sink, true))
        .and_then(|()| ignore_broken_pipe(pipeline.write_last_counts(kernel, sink)));
    let stats = pipeline.stats(kernel, true);
    let lost = stats.dropped.total();
    let written = counted
        .and_then(|()| ignore_broken_pipe(sink.write(&Record::Stats(stats.clone()))))
        .and_then(|()| ignore_broken_pipe(sink.flush()));
    if let Err(e) = written {
        eprintln!("{}", final_stats_text(&stats));
        return Err(e);
    }
    if lost > 0 {
        eprintln!("tracer: {lost} events were dropped; see the final stats record");
    }
    Ok(())
}

async fn event_loop(
    kernel: &mut KernelSide,
    pipeline: &mut Pipeline,
    sink: &mut dyn Sink,
    args: &TraceArgs,
    mut signals: Signals,
) -> anyhow::Result<Stop> {
    let deadline = tokio::time::sleep(
        args.pipeline
            .duration
            .unwrap_or(Duration::from_secs(u64::MAX / 4)),
    );
    tokio::pin!(deadline);
    let mut stats_tick = tokio::time::interval(args.stats_interval);
    stats_tick.tick().await;
    let mut dns_tick = tokio::time::interval(crate::stages::dns::TICK);
    dns_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut drain_tick = tokio::time::interval(DRAIN_EVERY);
    drain_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            _ = signals.interrupt.recv() => return Ok(Stop::Signal),
            _ = signals.terminate.recv() => return Ok(Stop::Signal),
            () = &mut deadline => return Ok(Stop::Duration),
            guard = kernel.ring.readable_mut() => {
                let mut guard = guard.context("waiting on the ring buffer")?;
                guard.clear_ready();
                drop(guard);
                drain(kernel, pipeline, sink)?;
                sink.flush()?;
            }
            _ = drain_tick.tick() => {
                if drain(kernel, pipeline, sink)? {
                    sink.flush()?;
                }
            }
            Some(snapshot) = pipeline.datapath.snapshots.recv() => {
                pipeline.stages.write_datapath(snapshot, sink)?;
                sink.flush()?;
            }
            _ = dns_tick.tick() => {
                pipeline.dns_tick(kernel, sink)?;
                let now_ns = monotonic_now_ns();
                let given_up = kernel.handshakes.take_given_up(now_ns);
                pipeline.stages.handshakes_given_up(given_up, now_ns, sink)?;
                sink.flush()?;
            }
            _ = stats_tick.tick() => {
                pipeline.stages.expire(monotonic_now_ns());
                pipeline.stages.enricher.destroyed.tick(Instant::now());
                pipeline.write_counts(kernel, sink)?;
                let stats = pipeline.stats(kernel, false);
                pipeline.warn_on_new_drops(&stats.dropped);
                sink.write(&Record::Stats(stats))?;
                sink.flush()?;
            }
        }
    }
}

/// The one line that says tracing has started, and what it follows.
fn announce(args: &PipelineArgs, netns: Option<&Netns>) {
    eprintln!(
        "tracer: attached; following TCP connects{} in {} (Ctrl-C to stop)",
        if args.no_dns {
            " (not DNS: --no-dns)"
        } else {
            " and UDP DNS"
        },
        netns.map_or_else(
            || "every network namespace".to_string(),
            |n| format!("netns {}", n.name)
        )
    );
}

/// Ctrl-C and SIGTERM end the loop; the programs detach when `KernelSide` drops.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> anyhow::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            terminate: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
        })
    }
}

/// Everything between the ring buffer and the sink.
struct Pipeline {
    stages: Stages,
    dumper: Dumper,
    /// The node's Service rules, read on their own thread.
    datapath: DatapathReader,
    reported_drops: u64,
    /// A conntrack dump failure is said once, not every interval.
    conntrack_failed: bool,
    /// The first and the final stats records carry the kernel's capabilities.
    stats_written: u64,
    /// `--node-name`, in every stats record.
    node: Option<String>,
}

/// How often the ring buffer is read without being woken: the kernel side wakes the reader only
/// for live records and a filling ring (`tracer-ebpf/src/maps.rs`), so an attempt's end waits at
/// most this long (a wakeup per record is a context switch of the tracer and work in the kernel).
const DRAIN_EVERY: Duration = Duration::from_millis(50);

/// Takes every record currently in the ring buffer through the pipeline. Whether anything was read.
fn drain(
    kernel: &mut KernelSide,
    pipeline: &mut Pipeline,
    sink: &mut dyn Sink,
) -> io::Result<bool> {
    let ring = kernel.ring.get_mut();
    let mut any = false;
    while let Some(item) = ring.next() {
        pipeline.stages.process(&item, sink)?;
        any = true;
    }
    if !pipeline.stages.held.is_empty() {
        pipeline.stages.release_held(sink, false)?;
        any = true;
    }
    Ok(any)
}

impl Pipeline {
    /// Expired DNS queries and the servers' healthy counts, from the kernel's maps.
    fn dns_tick(&mut self, kernel: &mut KernelSide, sink: &mut dyn Sink) -> io::Result<()> {
        let now_ns = monotonic_now_ns();
        let expired = kernel.dns.take_expired(now_ns, self.stages.dns.timeout_ns);
        let healthy = kernel.dns.healthy_totals();
        self.stages.dns_tick(&healthy, expired, now_ns, sink)
    }

    /// What is counted rather than sent one by one (healthy connects and DNS replies, the Services
    /// view), since the last call: every interval, and once more at exit so the last counts are not
    /// lost.
    fn write_counts(&mut self, kernel: &mut KernelSide, sink: &mut dyn Sink) -> io::Result<()> {
        let dump = self.conntrack_dump();
        self.stages
            .write_counts(kernel.healthy.deltas(), dump, sink)
    }

    /// At exit: a last DNS tick (it reads the DNS counts from the kernel, or the replies since the
    /// previous tick would be missing), then the counts.
    fn write_last_counts(
        &mut self,
        kernel: &mut KernelSide,
        sink: &mut dyn Sink,
    ) -> io::Result<()> {
        self.dns_tick(kernel, sink)?;
        self.write_counts(kernel, sink)
    }

    /// What the conntrack thread found since the last call; a failed dump is said once.
    fn conntrack_dump(&mut self) -> ConntrackDump {
        let mut dump = ConntrackDump::default();
        while let Ok(result) = self.dumper.results.try_recv() {
            match result {
                DumpResult::Summary {
                    at,
                    answered,
                    stale,
                } => {
                    dump.answered.push((at, answered));
                    dump.stale.extend(stale);
                }
                DumpResult::Failed(e) if !self.conntrack_failed => {
                    eprintln!("tracer: warning: conntrack dump failed: {e}");
                    self.conntrack_failed = true;
                }
                DumpResult::Failed(_) => {}
            }
        }
        dump
    }

    fn stats(&mut self, kernel: &KernelSide, is_final: bool) -> crate::record::StatsRecord {
        let with_kernel = is_final || self.stats_written == 0;
        self.stats_written += 1;
        crate::stats::record(
            kernel,
            &self.stages,
            self.node.clone(),
            with_kernel,
            is_final,
        )
    }

    /// Drops are never silent: a line on stderr each time the total grows.
    fn warn_on_new_drops(&mut self, dropped: &Dropped) {
        let total = dropped.total();
        if total > self.reported_drops {
            eprintln!(
                "tracer: warning: {total} events dropped so far: {}",
                dropped.in_words()
            );
            self.reported_drops = total;
        }
    }
}

/// The final `stats` record in one line for stderr, when the output could not take it.
fn final_stats_text(s: &crate::record::StatsRecord) -> String {
    let causes = match s.dropped.in_words() {
        words if words.is_empty() => String::new(),
        words => format!(" ({words})"),
    };
    format!(
        "tracer: final stats, not in the output: attempts {}, answered on the first SYN {}, \
         events {}, open {}, dropped {}{causes}",
        s.attempts,
        s.established_first_syn,
        s.events,
        s.open_flows,
        s.dropped.total()
    )
}

/// Cluster state from the file or the API the options name (errors here stop the tracer before it
/// attaches; an unreachable API does not: names are marked stale), and cgroup paths.
async fn identities(args: &PipelineArgs) -> anyhow::Result<Identities> {
    let live_node =
        || {
            args.node_name.as_deref().filter(|n| !n.is_empty()).ok_or_else(|| {
            anyhow::anyhow!(
                "--kubeconfig and --in-cluster need this node's name, to follow only its pods: \
                 pass --node-name NAME (the name `kubectl get nodes` shows for this machine), or \
                 set NODE_NAME (a DaemonSet sets it from the downward API, fieldRef spec.nodeName)"
            )
        })
        };
    let cluster = if let Some(path) = &args.cluster_state {
        Some(ClusterSource::from_file(path)?)
    } else if let Some(path) = &args.kubeconfig {
        Some(ClusterSource::from_kubeconfig(path, live_node()?).await?)
    } else if args.in_cluster {
        Some(ClusterSource::in_cluster(live_node()?)?)
    } else {
        None
    };
    let cgroup_root = match &args.cgroup_root {
        Some(root) => Some(crate::kernel::preflight::check_cgroup_root(root)?),
        None => crate::kernel::preflight::cgroup2_root().ok(),
    };
    Ok(Identities::new(cgroup_root, cluster))
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

fn ignore_broken_pipe(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
