//! `cargo xtask bench`: what the tracer costs, measured side by side in one run on its own test bed.
//!
//! Beds and loads:
//! - `testbed`: client, node (nftables DNAT of a Service VIP) and backend namespaces, one backend
//!   dropping SYNs; and a pair of namespaces for bulk traffic.
//! - `load`: connect load generator (the storm), SYN flood workers, timed black-holed connects.
//! - `loopback`: a pinned single-thread loopback connect/accept/close loop.
//! - `traffic`: a bulk TCP transfer and a small-datagram UDP flood between the pair.
//!
//! What runs beside them and how it is read:
//! - `peers`: the tracer, `conntrack -E` and a bpftrace printer as child processes.
//! - `tiers`: which hooks a tracer round uses (the tracer's own choice or a forced tier).
//! - `kstats`: BPF run-time stats, map memory, RSS of the tracer; `cpu_time`: CPU-time clocks.
//! - `stats_round`: one tracer round with the run counts on.
//! - `schedule`: the order of alternated rounds and their paired figures.
//! - `report`: the tracer's JSON output, medians, the final table.
//! - `recordings`: peak RSS of `tracer summary` and `tracer replay` of a recording larger than the
//!   memory they may use (no root, no test bed: `--only recordings` runs it alone).
//!
//! The sections, each a module that adds its rows to the table:
//! - `storm_runs`: program runs per connect of the storm per tier, and the programs' body time;
//! - `storm`: the storm's connect-rate loss per peer, completeness, the machine's CPU when paced;
//! - `paired_cpu`: the tracer's added CPU per connect with the stats off, against today's design;
//! - `throughput`: the per-packet tax on bulk TCP and a UDP flood;
//! - `vm_runs` (with `guest` inside the VM): run counts on a kernel with fentry;
//! - `userspace`: the pipeline, the cluster model, `--metrics`; `latency`: detection latency;
//!   `flood`: memory under a SYN flood.
//!
//! The API section (requests to the API server, the cluster model's memory) is `bench_api.rs`
//! beside this directory; `--api-only` runs it alone, without root.
//!
//! Rounds are interleaved and each is compared with the no-tracer round of its own cycle, so slow
//! drifts of a shared machine cancel out. Every storm round starts with an empty conntrack table.
//! Every loop is bounded in count and time; Ctrl-C ends the current step and everything is cleaned up.
// Counts here stay far below 2^52; they become rates and ratios.
#![allow(
    clippy::cast_precision_loss,
    reason = "counts far below 2^52 turned into rates"
)]

mod cpu_time;
mod flood;
mod guest;
mod kstats;
mod latency;
pub(crate) mod load;
mod loopback;
mod paired_cpu;
mod peers;
mod recordings;
pub(crate) mod report;
mod schedule;
mod sections;
mod stats_round;
mod storm;
mod storm_runs;
pub(crate) mod testbed;
mod throughput;
mod tiers;
mod tracefs;
mod traffic;
mod userspace;
mod vm_runs;

use std::{
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

pub use guest::{GuestArgs, run as guest_run};
use load::LoadConfig;
pub use load::flood_worker;
use peers::Peer;
use report::Table;
pub use sections::Section;
use sections::Sections;

use crate::{
    run::workspace_root,
    setup,
    shell::{cargo, run as run_cmd},
};

#[derive(Debug, clap::Args)]
#[expect(clippy::struct_excessive_bools, reason = "command-line switches")]
pub struct BenchArgs {
    /// About 2 minutes: 3 cycles of 3 s rounds (default: 8 cycles of 5 s, about 5 minutes).
    #[arg(long)]
    pub quick: bool,
    /// Cycles of interleaved rounds (one round per peer each).
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Seconds of load per round.
    #[arg(long)]
    pub round_secs: Option<f64>,
    /// Percent of connects the Service sends to the dropping backend.
    #[arg(long, default_value_t = 5)]
    pub drop_percent: u32,
    /// Load generator threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Connects in flight per load thread.
    #[arg(long, default_value_t = 512)]
    pub inflight: usize,
    /// Connect timeout of the load generator, ms (connects to the dropping backend end here).
    #[arg(long, default_value_t = 300)]
    pub timeout_ms: u64,
    /// Distinct unanswered SYNs of the memory flood.
    #[arg(long, default_value_t = 100_000)]
    pub flood: u64,
    /// Black-holed connects timed for detection latency.
    #[arg(long, default_value_t = 10)]
    pub latency_connects: usize,
    /// Synthetic records for the userspace pipeline measurement.
    #[arg(long, default_value_t = 2_000_000)]
    pub pipeline_events: u64,
    /// Keep the peers' output files (in /tmp/bhb-bench-PID).
    #[arg(long)]
    pub keep: bool,
    /// Peers to run beside "none" in the connect rounds (all by default): tracer, hooks (the
    /// tracer's programs attached but returning at once), conntrack, bpftrace, metrics (the tracer
    /// with `--metrics`, scraped every second).
    #[arg(long, value_delimiter = ',', value_parser = parse_peer)]
    pub peers: Vec<Peer>,
    /// Extra argument for the tracer in the connect rounds (repeatable), to measure what a part costs,
    /// e.g. `--tracer-arg=--no-dns`.
    #[arg(long = "tracer-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub tracer_args: Vec<String>,
    /// Connects/s of the paced round that checks completeness (every failure reported, none dropped).
    #[arg(long, default_value_t = 10_000.0)]
    pub completeness_rate: f64,
    /// Only these sections (repeatable or comma-separated; all by default).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub only: Vec<Section>,
    /// Not these sections (e.g. `--skip vm` on a machine without qemu: its target is then a MISS).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub skip: Vec<Section>,
    /// Only the run counts and the storm (`--only runs,storm`).
    #[arg(long)]
    pub connect_only: bool,
    /// Size of the large recording `summary` and `replay` read, MiB.
    #[arg(long, default_value_t = recordings::LARGE_MIB)]
    pub recording_mib: u64,
    /// Measure this tracer binary (e.g. target/dist/tracer-VERSION-ARCH) instead of building
    /// target/release/tracer.
    #[arg(long, value_name = "FILE")]
    pub tracer_bin: Option<PathBuf>,
    /// Cycles of the paired loopback rounds (each: no tracer, the tracer, today's design, the tracer
    /// with the stats on); at least 10 (default 20; 10 with --quick).
    #[arg(long)]
    pub loopback_cycles: Option<usize>,
    /// Connects per loopback round (default 20000; 10000 with --quick).
    #[arg(long)]
    pub loopback_connects: Option<u64>,
    /// Cycles of the alternated traffic rounds (default 8; 3 with --quick).
    #[arg(long)]
    pub traffic_cycles: Option<usize>,
    /// Seconds of traffic per round (default 2; 1 with --quick).
    #[arg(long)]
    pub traffic_secs: Option<f64>,
    /// Only the API section (requests to the API server and the cluster model's memory on a
    /// 150,000-pod cluster); needs no root.
    #[arg(long, conflicts_with = "connect_only")]
    pub api_only: bool,
}

fn parse_peer(s: &str) -> Result<Peer, String> {
    Peer::ALL
        .into_iter()
        .find(|p| p.short() == s)
        .ok_or_else(|| format!("unknown peer {s:?}: tracer, hooks, conntrack, bpftrace or metrics"))
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// True once Ctrl-C or SIGTERM arrived: loops stop, guards clean up.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

fn check_interrupted() -> anyhow::Result<()> {
    if interrupted() {
        bail!("interrupted");
    }
    Ok(())
}

/// The directory of the run's output files; removed on Drop unless kept.
struct WorkDir {
    path: PathBuf,
    keep: bool,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("bench: outputs kept in {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    if args.only == [Section::Recordings] {
        return recordings_alone(args);
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("cargo xtask bench needs root (network namespaces, eBPF)");
    }
    setup::all()?;
    let tracer = tracer_binary(args)?;
    // SAFETY: installing an async-signal-safe handler (one atomic store).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let sections = if args.connect_only {
        Sections::chosen(&[Section::Runs, Section::Storm], &args.skip)
    } else {
        Sections::chosen(&args.only, &args.skip)
    };
    let (rounds, round_secs) = if args.quick { (3, 3.0) } else { (8, 5.0) };
    let rounds = args.rounds.unwrap_or(rounds).max(1);
    let round = Duration::from_secs_f64(args.round_secs.unwrap_or(round_secs).clamp(0.5, 120.0));
    let load_cfg = LoadConfig {
        threads: args.threads.clamp(1, 16),
        inflight: args.inflight.clamp(1, 4096),
        duration: round,
        timeout: Duration::from_millis(args.timeout_ms.clamp(50, 5000)),
        rate: None,
    };
    let started = Instant::now();

    let work = WorkDir {
        path: PathBuf::from(format!("/tmp/bhb-bench-{}", std::process::id())),
        keep: args.keep,
    };
    std::fs::create_dir_all(&work.path)?;
    testbed::remove_stale();
    let mut table = Table::default();

    if sections.has(Section::Userspace) {
        userspace_and_api(&tracer, args, &mut table)?;
    }
    if sections.has(Section::Recordings) {
        eprintln!("bench: summary and replay of a large recording");
        recordings::run(&tracer, args.recording_mib.max(1), args.keep, &mut table)?;
        check_interrupted()?;
    }
    let bed = if sections.need_bed() {
        Some(warmed_bed(args.drop_percent, load_cfg)?)
    } else {
        None
    };
    let (offer, kernel_cost) = hooks(
        &tracer,
        bed.as_ref(),
        &work.path,
        &sections,
        load_cfg,
        &mut table,
    )?;
    if let Some(bed) = &bed {
        let run = BedRun {
            tracer: &tracer,
            bed,
            dir: &work.path,
            args,
            sections: &sections,
            offer: &offer,
            kernel_cost,
            rounds,
            load_cfg,
        };
        run.sections(&mut table)?;
    }
    drop(bed);
    if sections.has(Section::Traffic) {
        traffic_section(&tracer, &work.path, &offer, args, &mut table)?;
    }
    let vm = vm_runs::VmConfig {
        series: "6.12",
        round_secs: if args.quick { 2.0 } else { 3.0 },
    };
    if sections.has(Section::Vm) {
        vm_runs::run(&tracer, &work.path, vm, &mut table);
    } else if sections.has(Section::Runs) {
        vm_runs::not_run(vm, "--skip vm", &mut table);
    }
    print_report(args, rounds, round, load_cfg, started, &table);
    Ok(())
}

/// `--tracer-bin`, or target/release/tracer built now.
/// The per-packet tax (`throughput.rs`) with the run's cycle and round lengths.
fn traffic_section(
    tracer: &Path,
    dir: &Path,
    offer: &tiers::Offer,
    args: &BenchArgs,
    table: &mut Table,
) -> anyhow::Result<()> {
    throughput::run(
        tracer,
        dir,
        offer,
        throughput::ThroughputConfig {
            cycles: args
                .traffic_cycles
                .unwrap_or(if args.quick { 3 } else { 8 })
                .clamp(1, 100),
            round: Duration::from_secs_f64(
                args.traffic_secs
                    .unwrap_or(if args.quick { 1.0 } else { 2.0 })
                    .clamp(0.2, 60.0),
            ),
        },
        table,
    )?;
    check_interrupted()
}

/// The userspace section and the API server's (`bench_api.rs`).
fn userspace_and_api(tracer: &Path, args: &BenchArgs, table: &mut Table) -> anyhow::Result<()> {
    userspace::run(tracer, args, table)?;
    crate::bench_api::section(tracer, args.quick, table)?;
    check_interrupted()
}

/// `--only recordings`: `summary` and `replay` of a large recording, no root, no test bed.
fn recordings_alone(args: &BenchArgs) -> anyhow::Result<()> {
    let tracer = tracer_binary(args)?;
    let mut table = Table::default();
    recordings::run(&tracer, args.recording_mib.max(1), args.keep, &mut table)?;
    println!();
    print!("{}", table.render());
    Ok(())
}

fn tracer_binary(args: &BenchArgs) -> anyhow::Result<PathBuf> {
    let tracer = if let Some(bin) = &args.tracer_bin {
        std::path::absolute(bin).with_context(|| format!("--tracer-bin {}", bin.display()))?
    } else {
        run_cmd(cargo().args(["build", "--release", "--package", "tracer"]))?;
        workspace_root()?.join("target/release/tracer")
    };
    if !tracer.is_file() {
        bail!("no tracer binary at {}", tracer.display());
    }
    Ok(tracer)
}

/// The connect test bed, with one second of load through it to check it works.
fn warmed_bed(drop_percent: u32, load_cfg: LoadConfig) -> anyhow::Result<testbed::Testbed> {
    let bed = testbed::Testbed::new(drop_percent)?;
    let warm = load::connect_load(
        &bed.client.path(),
        testbed::VIP,
        LoadConfig {
            duration: Duration::from_secs(1),
            ..load_cfg
        },
    )?;
    eprintln!(
        "bench: warm-up {:.0} connects/s, {} answered, {} timed out, {} errors, {} accepted by the backends",
        warm.rate(),
        warm.ok,
        warm.timed_out,
        warm.errors,
        bed.accepted()
    );
    if warm.ok == 0 {
        bail!("no connect through the test bed succeeded; the bed is broken");
    }
    Ok(bed)
}

/// What the tracer offers on this kernel. With the run counts chosen, their rounds come first (the
/// empty programs' floor calibrated at the start of the run) and say it; otherwise one short
/// tracer start does.
fn hooks(
    tracer: &Path,
    bed: Option<&testbed::Testbed>,
    dir: &Path,
    sections: &Sections,
    load_cfg: LoadConfig,
    table: &mut Table,
) -> anyhow::Result<(tiers::Offer, Option<storm::KernelCost>)> {
    let flags = tiers::takes_tier_flags(tracer)?;
    let offer = match bed {
        Some(bed) if sections.has(Section::Runs) => {
            let (offer, tier_runs) = storm_runs::measure(tracer, bed, dir, flags, load_cfg)?;
            storm_runs::rows(
                "this host",
                &offer,
                &tier_runs,
                Some(storm_runs::HOST_RUNS_TARGET),
                table,
            );
            check_interrupted()?;
            (offer, tier_runs.first().map(storm_runs::SetupRuns::cost))
        }
        _ => (tiers::probe(tracer, dir, flags)?, None),
    };
    if !flags {
        table.notes.push(format!(
            "this tracer takes no --dns-hooks/--tcp-hooks: its one design is today's ({}), so \
             today's design and the tracer's own choice are the same hooks in every comparison",
            tiers::Tiers::TODAYS_DESIGN
        ));
    }
    Ok(offer)
}

/// What the sections on the connect test bed share.
struct BedRun<'a> {
    tracer: &'a Path,
    bed: &'a testbed::Testbed,
    dir: &'a Path,
    args: &'a BenchArgs,
    sections: &'a Sections,
    offer: &'a tiers::Offer,
    kernel_cost: Option<storm::KernelCost>,
    /// Cycles of the storm's rounds.
    rounds: usize,
    load_cfg: LoadConfig,
}

impl BedRun<'_> {
    fn sections(&self, table: &mut Table) -> anyhow::Result<()> {
        let (tracer, bed, dir, args, load_cfg) =
            (self.tracer, self.bed, self.dir, self.args, self.load_cfg);
        if self.sections.has(Section::Storm) {
            let mut plan = storm::RoundPlan::from_args(args, self.rounds);
            let _tracefs = storm::tracefs_for_bpftrace(&mut plan, table);
            storm::connect_rounds(tracer, bed, dir, load_cfg, &plan, self.kernel_cost, table)?;
            check_interrupted()?;
            storm::completeness(tracer, bed, dir, load_cfg, args.completeness_rate, table)?;
            check_interrupted()?;
            storm::paced_cpu(tracer, bed, dir, load_cfg, table)?;
            check_interrupted()?;
        }
        if self.sections.has(Section::Loopback) {
            eprintln!("bench: paired loopback rounds, stats off");
            paired_cpu::run(
                tracer,
                bed,
                dir,
                self.offer,
                paired_cpu::PairedConfig {
                    cycles: args
                        .loopback_cycles
                        .unwrap_or(if args.quick { 10 } else { 20 })
                        .max(10),
                    connects: args
                        .loopback_connects
                        .unwrap_or(if args.quick { 10_000 } else { 20_000 })
                        .clamp(100, 1_000_000),
                },
                table,
            )?;
            check_interrupted()?;
        }
        if self.sections.has(Section::Latency) {
            latency::run(tracer, bed, args.latency_connects.clamp(1, 50), table)?;
            check_interrupted()?;
        }
        if self.sections.has(Section::Flood) {
            flood::run(
                tracer,
                bed,
                dir,
                args.flood.min(load::PER_WORKER * 90),
                table,
            )?;
            check_interrupted()?;
        }
        Ok(())
    }
}

/// The run's settings, then the table and how many targets were missed.
fn print_report(
    args: &BenchArgs,
    rounds: usize,
    round: Duration,
    load_cfg: LoadConfig,
    started: Instant,
    table: &Table,
) {
    println!();
    println!(
        "cargo xtask bench{}: {rounds} cycles of {:.0} s rounds, {}% of connects black-holed, {} load threads x {} in flight, timeout {} ms; took {:.0} s",
        if args.quick { " --quick" } else { "" },
        round.as_secs_f64(),
        args.drop_percent,
        load_cfg.threads,
        load_cfg.inflight,
        load_cfg.timeout.as_millis(),
        started.elapsed().as_secs_f64()
    );
    print!("{}", table.render());
    let misses = table.misses();
    if misses > 0 {
        println!("{misses} target(s) missed: see the notes above.");
    }
}
