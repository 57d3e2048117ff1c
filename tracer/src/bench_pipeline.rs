//! `tracer bench-pipeline --events N` (hidden, used by `cargo xtask bench`): how many kernel records
//! per second the userspace pipeline takes on one core, with no kernel involved.
//!
//! Builds N synthetic ring-buffer records (`ConnectEvent` bytes, as the kernel writes them): for each
//! attempt a SYN retransmit (live `unanswered`) and later its end (`abandoned`), in blocks so the flow
//! table holds a few thousand open flows. Then runs them through the same stages as `live.rs`'s drain:
//! decode -> flows -> destination filter -> enrich -> JSON sink, into `io::sink()`. Prints one JSON line.
use std::{
    io::{self, BufWriter},
    time::Instant,
};

use tracer_common::{AF_INET, Attempt, ConnectEvent, EVENT_CONNECT_END, EVENT_SYN_RETRANSMIT, FLAG_DIALED_KNOWN};

use crate::{
    clock::KernelClock,
    decode::decode,
    enrich::{Enricher, destinations},
    filter::DestinationFilter,
    flows::FlowTable,
    netns::{self, NetnsNames},
    record::Record,
    sink::{Sink, json::JsonSink},
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
    // A real namespace cookie, so the enricher's name lookup takes the path it takes live.
    let cookie = netns::resolve("host").map_or(0, |n| n.cookie);
    let records = synthetic(args.events, cookie);
    let record_len = size_of::<ConnectEvent>();

    let mut flows = FlowTable::default();
    let mut enricher = Enricher { clock: KernelClock::new(), netns: NetnsNames::new() };
    let filter = DestinationFilter { cidrs: Vec::new(), ports: Vec::new() };
    let mut sink = JsonSink::new(BufWriter::with_capacity(1 << 16, io::sink()));
    let (mut written, mut decode_errors) = (0u64, 0u64);

    let start = Instant::now();
    for bytes in records.chunks_exact(record_len) {
        match decode(bytes) {
            Ok(event) => {
                let flow = flows.apply(event);
                let (dst, dialed) = destinations(&flow);
                let mut dests = vec![(dst.ip(), dst.port())];
                dests.extend(dialed.map(|d| (d.ip(), d.port())));
                if filter.matches(&dests) {
                    sink.write(&Record::Connect(enricher.connect_record(&flow)))?;
                    written += 1;
                }
            }
            Err(_) => decode_errors += 1,
        }
    }
    sink.flush()?;
    let seconds = start.elapsed().as_secs_f64();
    let events = records.len() / record_len;
    println!(
        "{}",
        serde_json::json!({
            "events": events,
            "records_written": written,
            "decode_errors": decode_errors,
            "seconds": seconds,
            "events_per_sec": f64::from(u32::try_from(events).unwrap_or(u32::MAX)) / seconds,
            "pinned_to_one_cpu": pinned,
        })
    );
    Ok(())
}

/// `n` records: per block of attempts, every retransmit, then every end.
fn synthetic(n: u64, netns_cookie: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(n as usize * size_of::<ConnectEvent>());
    let mut made = 0u64;
    let mut block_start = 0u64;
    while made < n {
        for kind in [EVENT_SYN_RETRANSMIT, EVENT_CONNECT_END] {
            for i in block_start..block_start + BLOCK {
                if made == n {
                    break;
                }
                push_record(&mut out, &event(kind, i, netns_cookie));
                made += 1;
            }
        }
        block_start += BLOCK;
    }
    out
}

fn event(kind: u32, i: u64, netns_cookie: u64) -> ConnectEvent {
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
        event_ns: if kind == EVENT_CONNECT_END { retransmitted + 2_000_000_000 } else { retransmitted },
        attempt: Attempt {
            sock: 0xffff_8881_0000_0000 + i * 0x800,
            start_ns,
            netns_cookie,
            cgroup_id: 1,
            closed_ns: if kind == EVENT_CONNECT_END { retransmitted + 2_000_000_000 } else { 0 },
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
        std::slice::from_raw_parts(std::ptr::from_ref(ev).cast::<u8>(), size_of::<ConnectEvent>())
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
