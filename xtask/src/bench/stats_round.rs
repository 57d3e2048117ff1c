//! One tracer round with `kernel.bpf_stats_enabled`: how many times each of its programs ran
//! (`run_cnt`, exact, no clock) and for how long by the stats' own clock (`run_time_ns`), over
//! the window of a load, with what the rest of the machine made them run in the same time
//! (measured over an idle window just before the load, scaled to its length) taken out.
//!
//! The stats cost every program run of the whole machine two clock reads while they are on, so
//! only these rounds turn them on, and no timing figure of the benchmark comes from them.
use std::{
    collections::BTreeSet,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::Context as _;

use super::{
    kstats::{BpfStats, ProgReader, ProgStat},
    peers,
    tiers::{HookReport, Setup, Tiers},
};

/// How long the programs are watched with no load, for what the rest of the machine makes them
/// run.
pub const IDLE_WINDOW: Duration = Duration::from_secs(1);

/// One program over the load's window.
#[derive(Debug, Clone)]
pub struct ProgRuns {
    pub name: String,
    pub runs: u64,
    pub run_time_ns: u64,
    /// Runs the kernel skipped (the program would have nested in itself on that CPU).
    pub misses: u64,
    /// Runs the rest of the machine would have caused in a window as long (from the idle window).
    pub background: f64,
    /// Whether it belongs to the DNS side: a program the tracer does not attach with `--no-dns`.
    pub dns: bool,
}

impl ProgRuns {
    pub fn ns_per_run(&self) -> f64 {
        if self.runs == 0 {
            f64::NAN
        } else {
            self.run_time_ns as f64 / self.runs as f64
        }
    }

    pub fn is_dns(&self) -> bool {
        self.dns
    }
}

/// What a stats round's load did.
#[derive(Debug, Clone, Copy)]
pub struct LoadWindow {
    /// Connects, or packets.
    pub units: u64,
    pub elapsed: Duration,
    /// Units that failed (connects that timed out or were refused).
    pub failed: u64,
}

/// What one stats round measured.
#[derive(Debug, Clone)]
pub struct StatsRound {
    pub setup: Setup,
    /// What the tracer reported about its hooks in this round.
    pub report: HookReport,
    /// Units of the load: connects, or packets.
    pub units: u64,
    /// Units that failed.
    pub failed: u64,
    pub load_secs: f64,
    pub programs: Vec<ProgRuns>,
}

impl StatsRound {
    pub fn tiers(&self) -> Tiers {
        self.report.chosen
    }

    /// Runs per unit of the programs `pick` selects, the rest of the machine's share taken out
    /// (never below zero).
    pub fn runs_per_unit(&self, pick: impl Fn(&ProgRuns) -> bool) -> f64 {
        let runs: f64 = self
            .programs
            .iter()
            .filter(|p| pick(p))
            .map(|p| (p.runs as f64 - p.background).max(0.0))
            .sum();
        runs / self.units.max(1) as f64
    }

    /// The rest of the machine's runs per second, all programs (what was taken out).
    pub fn background_per_sec(&self) -> f64 {
        self.programs.iter().map(|p| p.background).sum::<f64>() / self.load_secs.max(1e-9)
    }

    pub fn program(&self, name: &str) -> Option<&ProgRuns> {
        self.programs.iter().find(|p| p.name == name)
    }

    /// Marks the DNS side's programs: those not among `tcp_side` (what the tracer attaches with
    /// `--no-dns` and the same TCP setup).
    pub fn mark_dns(&mut self, tcp_side: &BTreeSet<String>) {
        for p in &mut self.programs {
            p.dns = !tcp_side.contains(&p.name);
        }
    }
}

/// The names of the programs the tracer attaches with `--no-dns` and the TCP side of `setup`: the
/// TCP side's, whatever the tracer names them.
pub fn tcp_side_programs(
    tracer: &Path,
    dir: &Path,
    setup: Setup,
) -> anyhow::Result<BTreeSet<String>> {
    let tcp_only = Setup {
        dns: None,
        hooks_only: false,
        ..setup
    };
    let mut args = tcp_only.args();
    args.push("--no-dns".into());
    let output = dir.join("tcp-side.jsonl");
    let mut running = peers::start_tracer_with(tracer, &args, output.clone())?;
    let names = ProgReader::new(running.pid())
        .read()
        .into_iter()
        .map(|p| p.name)
        .collect();
    running.stop()?;
    let _ = std::fs::remove_file(&output);
    Ok(names)
}

/// The TCP side's programs per TCP setup, each looked up once.
#[derive(Default)]
pub struct ProgramSides {
    tcp_side: Vec<(Option<super::tiers::TcpTier>, BTreeSet<String>)>,
}

impl ProgramSides {
    /// Marks the DNS side's programs of `round`, starting the tracer with `--no-dns` the first
    /// time its TCP setup is seen.
    pub fn mark(
        &mut self,
        tracer: &Path,
        dir: &Path,
        round: &mut StatsRound,
    ) -> anyhow::Result<()> {
        let key = round.setup.tcp;
        if !self.tcp_side.iter().any(|(k, _)| *k == key) {
            let names = tcp_side_programs(tracer, dir, round.setup)?;
            self.tcp_side.push((key, names));
        }
        if let Some((_, names)) = self.tcp_side.iter().find(|(k, _)| *k == key) {
            round.mark_dns(names);
        }
        Ok(())
    }
}

/// Starts the tracer with `setup` and the stats on, watches its programs over an idle window and
/// then over `load` (which returns its units and how long it ran), and stops it.
pub fn stats_round(
    tracer: &Path,
    dir: &Path,
    tag: &str,
    setup: Setup,
    load: impl FnOnce() -> anyhow::Result<LoadWindow>,
) -> anyhow::Result<StatsRound> {
    let stats = BpfStats::enable()?;
    let output = dir.join(format!("stats-{tag}.jsonl"));
    let mut running = peers::start_tracer_setup(tracer, setup, output.clone())?;
    let reader = ProgReader::new(running.pid());
    let idle_start = reader.read();
    let idle_started = Instant::now();
    std::thread::sleep(IDLE_WINDOW);
    let load_start = reader.read();
    let idle_secs = idle_started.elapsed().as_secs_f64();
    let LoadWindow {
        units,
        elapsed,
        failed,
    } = load()?;
    let load_end = reader.read();
    running.stop()?;
    drop(stats);
    let text = std::fs::read_to_string(&output)
        .with_context(|| format!("reading {}", output.display()))?;
    let report = HookReport::from_output(&text)
        .with_context(|| format!("the tracer's hooks in {}", output.display()))?;
    let _ = std::fs::remove_file(&output);
    let load_secs = elapsed.as_secs_f64();
    let scale = load_secs / idle_secs.max(1e-9);
    let delta = |from: &[ProgStat], to: &ProgStat| {
        let from = from
            .iter()
            .find(|p| p.id == to.id)
            .cloned()
            .unwrap_or_default();
        (
            to.run_cnt.saturating_sub(from.run_cnt),
            to.run_time_ns.saturating_sub(from.run_time_ns),
            to.recursion_misses.saturating_sub(from.recursion_misses),
        )
    };
    let programs = load_end
        .iter()
        .map(|end| {
            let (runs, run_time_ns, misses) = delta(&load_start, end);
            let idle_runs = load_start
                .iter()
                .find(|p| p.id == end.id)
                .map_or(0, |p| delta(&idle_start, p).0);
            ProgRuns {
                name: end.name.clone(),
                runs,
                run_time_ns,
                misses,
                background: idle_runs as f64 * scale,
                dns: false,
            }
        })
        .collect();
    Ok(StatsRound {
        setup,
        report,
        units,
        failed,
        load_secs,
        programs,
    })
}
