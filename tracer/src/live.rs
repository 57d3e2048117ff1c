//! `tracer trace`: wires the stages for live tracing. ring buffer -> decode -> flows -> enrich ->
//! filter -> sink, one event loop, events taken in batches.
use std::{
    fs::File,
    io::{self, BufWriter, Write},
    time::Duration,
};

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};
use tracer_common::{KernelFilter, counter};

use crate::{
    cli::{Format, TraceArgs},
    clock::{KernelClock, monotonic_now_ns, rfc3339},
    decode::{comm_to_string, decode, ip_from_kernel},
    enrich::{Enricher, destinations},
    filter::DestinationFilter,
    flows::FlowTable,
    kernel::KernelSide,
    netns::{self, Netns, NetnsNames},
    record::{Dropped, HealthyRecord, Record, StatsRecord},
    sink::{Sink, json::JsonSink, text::TextSink},
};

/// Why the loop ended without an error.
enum Stop {
    Signal,
    Duration,
    /// The reader of our output went away (`| head`): a normal end.
    BrokenPipe,
}

pub async fn run(args: TraceArgs) -> anyhow::Result<()> {
    let netns = args.netns.as_deref().map(netns::resolve).transpose()?;
    let out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(
            File::create(path).with_context(|| format!("creating output file {}", path.display()))?,
        ),
        None => Box::new(io::stdout().lock()),
    };
    let out = BufWriter::with_capacity(1 << 16, out);
    let sink: Box<dyn Sink> = match args.format {
        Format::Json => Box::new(JsonSink::new(out)),
        Format::Text => Box::new(TextSink::new(out)),
    };
    trace(args, netns, sink).await
}

/// `tracer tui`: the same pipeline into the TUI's sink (a channel).
pub async fn run_with_sink(args: TraceArgs, sink: Box<dyn Sink>) -> anyhow::Result<()> {
    let netns = args.netns.as_deref().map(netns::resolve).transpose()?;
    trace(args, netns, sink).await
}

async fn trace(args: TraceArgs, netns: Option<Netns>, mut sink: Box<dyn Sink>) -> anyhow::Result<()> {
    let filter = KernelFilter { netns_cookie: netns.as_ref().map_or(0, |n| n.cookie) };

    let mut kernel = KernelSide::load(filter)?;
    let mut pipeline = Pipeline {
        flows: FlowTable::default(),
        enricher: Enricher { clock: KernelClock::new(), netns: NetnsNames::new() },
        filter: DestinationFilter { cidrs: args.dst.clone(), ports: args.port.clone() },
        events: 0,
        decode_errors: 0,
        reported_drops: 0,
    };
    eprintln!(
        "tracer: attached; following TCP connects in {} (Ctrl-C to stop)",
        netns.as_ref().map_or_else(|| "every network namespace".to_string(), |n| format!("netns {}", n.name))
    );

    let stop = event_loop(&mut kernel, &mut pipeline, sink.as_mut(), &args).await;
    let stop = match stop {
        Err(e) if is_broken_pipe(&e) => Stop::BrokenPipe,
        other => other?,
    };
    if !matches!(stop, Stop::BrokenPipe) {
        // Whatever arrived before we stopped is still reported, then the final totals.
        let _ = drain(&mut kernel, &mut pipeline, sink.as_mut());
        let stats = pipeline.stats(&kernel, true);
        let lost = stats.dropped.total();
        ignore_broken_pipe(sink.write(&Record::Stats(stats)))?;
        ignore_broken_pipe(sink.flush())?;
        if lost > 0 {
            eprintln!("tracer: {lost} events were dropped; see the final stats record");
        }
    }
    let why = match stop {
        Stop::Signal => "signal",
        Stop::Duration => "duration reached",
        Stop::BrokenPipe => "output closed",
    };
    eprintln!("tracer: stopped ({why}); programs detached");
    Ok(())
}

async fn event_loop(
    kernel: &mut KernelSide,
    pipeline: &mut Pipeline,
    sink: &mut dyn Sink,
    args: &TraceArgs,
) -> anyhow::Result<Stop> {
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let deadline = tokio::time::sleep(args.duration.unwrap_or(Duration::from_secs(u64::MAX / 4)));
    tokio::pin!(deadline);
    let mut stats_tick = tokio::time::interval(args.stats_interval);
    stats_tick.tick().await;
    loop {
        tokio::select! {
            biased;
            _ = sigint.recv() => return Ok(Stop::Signal),
            _ = sigterm.recv() => return Ok(Stop::Signal),
            () = &mut deadline => return Ok(Stop::Duration),
            guard = kernel.ring.readable_mut() => {
                let mut guard = guard.context("waiting on the ring buffer")?;
                guard.clear_ready();
                drop(guard);
                drain(kernel, pipeline, sink)?;
                sink.flush()?;
            }
            _ = stats_tick.tick() => {
                pipeline.flows.expire(monotonic_now_ns());
                for record in pipeline.healthy_records(kernel) {
                    sink.write(&record)?;
                }
                let stats = pipeline.stats(kernel, false);
                pipeline.warn_on_new_drops(&stats.dropped);
                sink.write(&Record::Stats(stats))?;
                sink.flush()?;
            }
        }
    }
}

/// Everything between the ring buffer and the sink.
struct Pipeline {
    flows: FlowTable,
    enricher: Enricher,
    filter: DestinationFilter,
    events: u64,
    decode_errors: u64,
    reported_drops: u64,
}

/// Takes every record currently in the ring buffer through the pipeline.
fn drain(kernel: &mut KernelSide, pipeline: &mut Pipeline, sink: &mut dyn Sink) -> io::Result<()> {
    let ring = kernel.ring.get_mut();
    while let Some(item) = ring.next() {
        pipeline.events += 1;
        let event = decode(&item);
        drop(item);
        match event {
            Ok(event) => {
                let flow = pipeline.flows.apply(event);
                let (dst, dialed) = destinations(&flow);
                let mut dests = vec![(dst.ip(), dst.port())];
                dests.extend(dialed.map(|d| (d.ip(), d.port())));
                if pipeline.filter.matches(&dests) {
                    sink.write(&Record::Connect(pipeline.enricher.connect_record(&flow)))?;
                }
            }
            Err(_) => pipeline.decode_errors += 1,
        }
    }
    Ok(())
}

impl Pipeline {
    fn healthy_records(&mut self, kernel: &mut KernelSide) -> Vec<Record> {
        let time = rfc3339(std::time::SystemTime::now());
        let mut records = Vec::new();
        for (key, stats) in kernel.healthy.deltas() {
            let endpoint = key.dst;
            let Some(ip) = ip_from_kernel(endpoint.family, endpoint.addr) else { continue };
            if !self.filter.matches(&[(ip, endpoint.port)]) {
                continue;
            }
            records.push(Record::Healthy(HealthyRecord {
                time: time.clone(),
                verdict: "established".into(),
                dst: std::net::SocketAddr::new(ip, endpoint.port).to_string(),
                pid: key.pid,
                comm: comm_to_string(&stats.comm),
                cgroup_id: stats.cgroup_id,
                netns: self.enricher.netns.name(endpoint.netns_cookie),
                netns_cookie: endpoint.netns_cookie,
                established: stats.established,
                mean_syn_sent_ms: stats.syn_sent_ns_total as f64 / stats.established as f64 / 1e6,
            }));
        }
        records
    }

    fn stats(&self, kernel: &KernelSide, is_final: bool) -> StatsRecord {
        let c = kernel.counters.read();
        StatsRecord {
            time: rfc3339(std::time::SystemTime::now()),
            attempts: c.get(counter::ATTEMPTS_STARTED),
            established_first_syn: c.get(counter::ESTABLISHED_FIRST_SYN),
            events: self.events,
            open_flows: self.flows.open_count() as u64,
            dropped: Dropped {
                ring_buffer_full: c.get(counter::RINGBUF_FULL),
                attempts_map_full: c.get(counter::ATTEMPTS_MAP_FULL),
                healthy_map_full: c.get(counter::HEALTHY_MAP_FULL),
                decode_errors: self.decode_errors,
                expired_flows: self.flows.expired,
            },
            is_final,
        }
    }

    /// Drops are never silent: a line on stderr each time the total grows.
    fn warn_on_new_drops(&mut self, dropped: &Dropped) {
        let total = dropped.total();
        if total > self.reported_drops {
            eprintln!("tracer: warning: {} events dropped so far: {dropped:?}", total);
            self.reported_drops = total;
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>().is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
}

fn ignore_broken_pipe(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
