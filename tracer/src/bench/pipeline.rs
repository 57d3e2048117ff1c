//! `tracer bench-pipeline --events N` (hidden, used by `cargo xtask bench`): how many kernel records
//! per second the userspace pipeline takes on one core, with no kernel involved.
//!
//! Builds N synthetic ring-buffer records (`ConnectEvent` bytes, as the kernel writes them): for each
//! attempt a SYN retransmit (live `unanswered`) and later its end (`abandoned`), in blocks so the flow
//! table holds a few thousand open flows. Measures two stages on them: decode -> flow table -> verdict
//! , then the whole path live tracing runs:
//! decode -> flows -> destination filter -> enrich -> JSON sink (`stages/mod.rs`, the code live
//! tracing runs), into `io::sink()`. Prints one JSON line.
use std::{
    io::{self, BufWriter},
    time::Instant,
};

use tracer_common::{
    AF_INET, Attempt, ConnectEvent, EVENT_CONNECT_END, EVENT_SYN_RETRANSMIT, FLAG_DIALED_KNOWN,
};

use crate::{
    clock::KernelClock,
    conntrack::subscription::{DestroyEventsMode, DestroySubscription},
    netns,
    record::Record,
    sink::{Sink, json::JsonSink},
    stages::{
        decode::{KernelEvent, decode},
        filter::DestinationFilter,
        flows::FlowTable,
        {StageOptions, Stages},
    },
};

#[derive(Debug, clap::Args)]
pub struct BenchPipelineArgs {
    /// Number of synthetic kernel records to push through the pipeline.
    #[arg(long, default_value_t = 2_000_000)]
    pub events: u64,
}

/// Attempts whose retransmits come before their ends: the number of flows open at once.
const BLOCK: u64 = 4096;

pub fn run(args: &BenchPipelineArgs) -> anyhow::Result<()> {
    let pinned = pin_to_current_cpu();
    // A real namespace, so the enricher's name lookup takes the path it takes live.
    let inode = netns::resolve("host").map_or(0, |n| n.inode);
    let records = synthetic(args.events, inode);
    let record_len = size_of::<ConnectEvent>();

    // As live without cluster state or conntrack: cgroup id -> path -> container on every record.
    let mut stages = Stages::new(StageOptions {
        clock: KernelClock::new(),
        identities: crate::identity::Identities::new(
            crate::kernel::preflight::cgroup2_root().ok(),
            None,
        ),
        conntrack: None,
        destroyed: DestroySubscription::start(None, DestroyEventsMode::Never),
        filter: DestinationFilter::default(),
        service_window: std::time::Duration::from_mins(1),
        dns_timeout: std::time::Duration::from_secs(2),
        dns_stuck_after: 3,
    });
    let mut sink = CountingSink(
        JsonSink::new(BufWriter::with_capacity(1 << 16, io::sink())),
        0,
    );

    // The first stage alone: decode -> flow table -> verdict.
    let mut classify = FlowTable::default();
    let start = Instant::now();
    for bytes in records.chunks_exact(record_len) {
        if let Ok(KernelEvent::Tcp(event)) = decode(bytes) {
            std::hint::black_box(classify.apply(event).verdict);
        }
    }
    let classify_seconds = start.elapsed().as_secs_f64();

    // The whole path live tracing runs, down to JSON lines.
    let start = Instant::now();
    for bytes in records.chunks_exact(record_len) {
        stages.process(bytes, &mut sink)?;
    }
    sink.flush()?;
    let seconds = start.elapsed().as_secs_f64();
    let events = records.len() / record_len;
    println!(
        "{}",
        serde_json::json!({
            "events": events,
            "records_written": sink.1,
            "decode_errors": stages.decode_errors,
            "seconds": seconds,
            "classify_events_per_sec": f64::from(u32::try_from(events).unwrap_or(u32::MAX)) / classify_seconds,
            "json_events_per_sec": f64::from(u32::try_from(events).unwrap_or(u32::MAX)) / seconds,
            "pinned_to_one_cpu": pinned,
        })
    );
    Ok(())
}

/// Counts what reaches the sink.
struct CountingSink<S>(S, u64);

impl<S: Sink> Sink for CountingSink<S> {
    fn write(&mut self, record: &Record) -> io::Result<()> {
        self.1 += 1;
        self.0.write(record)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// `n` records: per block of attempts, every retransmit, then every end.
fn synthetic(n: u64, netns_inode: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(n as usize * size_of::<ConnectEvent>());
    let mut made = 0u64;
    let mut block_start = 0u64;
    while made < n {
        for kind in [EVENT_SYN_RETRANSMIT, EVENT_CONNECT_END] {
            for i in block_start..block_start + BLOCK {
                if made == n {
                    break;
                }
                push_record(&mut out, &event(kind, i, netns_inode));
                made += 1;
            }
        }
        block_start += BLOCK;
    }
    out
}

fn event(kind: u32, i: u64, netns_inode: u64) -> ConnectEvent {
    let start_ns = 1_000_000_000 + i * 1_000;
    let mut comm = [0u8; 16];
    comm[..4].copy_from_slice(b"java");
    let ip = |last: u8| {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&[10, 232, 1, last]);
        a
    };
    let retransmitted = start_ns + 1_000_000_000;
    ConnectEvent {
        kind,
        error: 0,
        event_ns: if kind == EVENT_CONNECT_END {
            retransmitted + 2_000_000_000
        } else {
            retransmitted
        },
        attempt: Attempt {
            sock: 0xffff_8881_0000_0000 + i * 0x800,
            start_ns,
            netns_inode,
            cgroup_id: 1,
            closed_ns: if kind == EVENT_CONNECT_END {
                retransmitted + 2_000_000_000
            } else {
                0
            },
            cookie: 0,
            pid: 4242,
            tid: 4250,
            comm,
            saddr: ip(200),
            daddr: ip(3),
            dialed_addr: ip(100),
            family: AF_INET,
            sport: 1024 + (i % 60_000) as u16,
            dport: 80,
            dialed_port: 80,
            syn_count: if kind == EVENT_CONNECT_END { 3 } else { 2 },
            flags: FLAG_DIALED_KNOWN,
            soft_error: 0,
        },
    }
}

fn push_record(out: &mut Vec<u8>, ev: &ConnectEvent) {
    // SAFETY: ConnectEvent is repr(C), Copy and has no padding (asserted in tracer-common), so all
    // of its bytes are initialised; the slice lives only for this copy.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            std::ptr::from_ref(ev).cast::<u8>(),
            size_of::<ConnectEvent>(),
        )
    };
    out.extend_from_slice(bytes);
}

/// Keeps the measurement on one core (the one we run on now). False if the kernel refused.
fn pin_to_current_cpu() -> bool {
    // SAFETY: sched_getcpu has no preconditions; the cpu_set_t is ours and zeroed before use.
    unsafe {
        let Ok(cpu) = usize::try_from(libc::sched_getcpu()) else {
            return false;
        };
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set) == 0
    }
}
