//! Program runs per connect of the storm, for every hook tier this kernel allows, and the time of
//! the programs' bodies: each tier's setup runs one stats round with every program returning at
//! once (`--hooks-only`) and one working, at the start of the run. The empty round's time per run
//! is the floor (the stats' own clock read and the dispatch), subtracted program by program from
//! the working round's; what is left is the work the programs do.
use std::path::Path;

use super::{
    load::{self, LoadConfig},
    report::{Table, median},
    stats_round::{LoadWindow, ProgRuns, ProgramSides, StatsRound, stats_round},
    storm::KernelCost,
    testbed::{self, Testbed},
    tiers::{DnsTier, Offer, Setup},
};

/// Program runs per connect of the storm on this host (the development VM: `tp_btf` only).
pub const HOST_RUNS_TARGET: f64 = 14.0;
/// Program runs per connect of the storm on a kernel with fentry (counted in a VM).
pub const FENTRY_RUNS_TARGET: f64 = 6.0;
/// DNS runs per TCP connect counted as zero: what is left of the rest of the machine's share
/// after it is taken out is noise of that size.
pub const DNS_RUNS_ZERO: f64 = 0.01;

/// One setup's two stats rounds.
pub struct SetupRuns {
    pub empty: Option<StatsRound>,
    pub working: StatsRound,
}

/// The storm as a stats round's load: its connects (answered, failed and cut) and duration.
pub fn storm(bed: &Testbed, cfg: LoadConfig) -> anyhow::Result<LoadWindow> {
    let r = load::connect_load(&bed.client.path(), testbed::VIP, cfg)?;
    Ok(LoadWindow {
        units: r.ok + r.failed() + r.cut,
        elapsed: r.elapsed,
        failed: r.failed(),
    })
}

/// Runs every setup's rounds; the first (the tracer's own choice, empty) also says what the tracer
/// offers on this kernel.
pub fn measure(
    tracer: &Path,
    bed: &Testbed,
    dir: &Path,
    flags: bool,
    cfg: LoadConfig,
) -> anyhow::Result<(Offer, Vec<SetupRuns>)> {
    let mut sides = ProgramSides::default();
    let mut round = |tag: &str, setup: Setup| {
        super::check_interrupted()?;
        bed.flush_conntrack()?;
        let mut r = stats_round(tracer, dir, tag, setup, || storm(bed, cfg))?;
        sides.mark(tracer, dir, &mut r)?;
        eprintln!(
            "bench: stats round {:<44} {:>7} connects, {:.1} program runs per connect",
            setup.label(r.tiers()),
            r.units,
            r.runs_per_unit(|_| true)
        );
        Ok::<_, anyhow::Error>(r)
    };
    let first = round("auto-empty", Setup::AUTO.empty())?;
    let offer = Offer {
        flags,
        report: first.report.clone(),
    };
    let mut first = Some(first);
    let mut runs = Vec::new();
    for (i, setup) in offer.setups().into_iter().enumerate() {
        let empty = match first.take() {
            Some(r) if setup == Setup::AUTO => r,
            _ => round(&format!("{i}-empty"), setup.empty())?,
        };
        let working = round(&format!("{i}-working"), setup)?;
        runs.push(SetupRuns {
            empty: Some(empty),
            working,
        });
    }
    if super::paired_cpu::without_set_state(&offer) {
        let setup = Setup::AUTO_WITHOUT_SET_STATE;
        runs.push(SetupRuns {
            empty: Some(round("unattached-empty", setup.empty())?),
            working: round("unattached-working", setup)?,
        });
    }
    Ok((offer, runs))
}

/// The rows: runs per connect per setup (total, DNS, each program), the DNS-zero and total
/// targets, and, where an empty round was run, the body time and what the stats themselves cost.
/// `kernel` names where it ran; `total_target` applies to the tracer's own choice.
pub fn rows(
    kernel: &str,
    offer: &Offer,
    runs: &[SetupRuns],
    total_target: Option<f64>,
    table: &mut Table,
) {
    let auto = offer.report.chosen;
    let names = |tiers: &[&str]| tiers.join(", ");
    table.info(
        format!("hook tiers, {kernel}"),
        format!(
            "the tracer's own choice {auto}; the kernel allows DNS {}, TCP {}{}{}",
            names(
                &offer
                    .report
                    .dns_available
                    .iter()
                    .map(|t| t.name())
                    .collect::<Vec<_>>()
            ),
            names(
                &offer
                    .report
                    .tcp_available
                    .iter()
                    .map(|t| t.name())
                    .collect::<Vec<_>>()
            ),
            if offer.report.not_used.is_empty() {
                String::new()
            } else {
                format!("; not used: {}", offer.report.not_used.join("; "))
            },
            if offer.report.reported {
                ""
            } else {
                " (a tracer before hook tiers: today's design)"
            }
        ),
    );
    for r in runs {
        let w = &r.working;
        let label = w.setup.label(auto);
        let total = w.runs_per_unit(|_| true);
        let dns = w.runs_per_unit(ProgRuns::is_dns);
        let value = format!(
            "{total:.1} (DNS {dns:.2}, TCP {:.1}; {} connects, the rest of the machine's {:.0} runs/s taken out)",
            total - dns,
            w.units,
            w.background_per_sec()
        );
        let figure = format!("program runs per connect of the storm, {kernel}, {label}");
        match total_target {
            Some(target) if w.setup == Setup::AUTO => {
                table.check(figure, value, format!("<= {target:.0}"), total <= target);
            }
            _ => table.info(figure, value),
        }
        for p in w.programs.iter().filter(|p| p.runs > 0) {
            let per = p.runs as f64 - p.background;
            let empty_ns = r
                .empty
                .as_ref()
                .and_then(|e| e.program(&p.name))
                .map(ProgRuns::ns_per_run);
            let ns = match empty_ns {
                Some(e) if e.is_finite() => {
                    format!(", {:.0} ns/run working, {e:.0} empty", p.ns_per_run())
                }
                Some(_) => format!(", {:.0} ns/run working, no empty run", p.ns_per_run()),
                None => String::new(),
            };
            table.info(
                format!("  {}", p.name),
                format!(
                    "{:.2} runs/connect{ns}{}",
                    per.max(0.0) / w.units.max(1) as f64,
                    if p.misses > 0 {
                        format!(", {} skipped", p.misses)
                    } else {
                        String::new()
                    }
                ),
            );
        }
        let figure = format!("DNS program runs per TCP connect, {kernel}, {label}");
        if w.setup.unattached_set_state {
            // Its DNS side is the tracer's own choice's, checked in that setup's row.
        } else if w.tiers().dns == DnsTier::CgroupSkb {
            table.info(
                figure,
                format!("{dns:.2} (per packet: every packet of the connect)"),
            );
        } else {
            table.check(figure, format!("{dns:.3}"), "0", dns < DNS_RUNS_ZERO);
            if dns >= DNS_RUNS_ZERO {
                table.notes.push(dns_runs_note(kernel, &label, w, dns));
            }
        }
        if let Some(empty) = &r.empty {
            body_rows(&label, empty, w, table);
        }
    }
    set_state_rows(runs, table);
}

/// What `inet_sock_set_state` adds, from the tracer's own choice and the same without it: runs
/// and body time per connect.
fn set_state_rows(runs: &[SetupRuns], table: &mut Table) {
    let find = |without: bool| {
        runs.iter().find(|r| {
            r.working.setup
                == Setup {
                    unattached_set_state: without,
                    ..Setup::AUTO
                }
        })
    };
    let (Some(with), Some(without)) = (find(false), find(true)) else {
        return;
    };
    let body = |r: &SetupRuns| {
        r.empty.as_ref().map_or(f64::NAN, |e| {
            let c = program_time(e, &r.working);
            (c.total - c.floor) / r.working.units.max(1) as f64
        })
    };
    let all = |_: &ProgRuns| true;
    table.info(
        "inet_sock_set_state's own share: runs and body ns per connect, with it minus without",
        format!(
            "{:+.1} runs ({:.1} with, {:.1} without), {:+.0} body ns ({:.0} with, {:.0} without)",
            with.working.runs_per_unit(all) - without.working.runs_per_unit(all),
            with.working.runs_per_unit(all),
            without.working.runs_per_unit(all),
            body(with) - body(without),
            body(with),
            body(without)
        ),
    );
}

/// Why DNS programs ran during a storm that makes no DNS query: which ran, and the storm's share of
/// failed connects (the tracer looks the backend of each failure up in conntrack over netlink, one
/// request and one reply, and the socket-call hooks see every socket's calls, netlink included).
fn dns_runs_note(kernel: &str, label: &str, w: &StatsRound, dns: f64) -> String {
    let per = |p: &ProgRuns| (p.runs as f64 - p.background).max(0.0) / w.units.max(1) as f64;
    let which: Vec<String> = w
        .programs
        .iter()
        .filter(|p| p.dns && p.runs > 0)
        .map(|p| format!("{} {:.3}", p.name, per(p)))
        .collect();
    format!(
        "{kernel}, {label}: the DNS programs ran {dns:.3} times per connect ({}) though the storm \
         sends no DNS query. {:.1}% of its connects failed, and for each failure the tracer asks \
         conntrack for the backend over netlink (a request and a reply): hooks on socket calls \
         see those of every socket on the node, the tracer's own included",
        which.join(", "),
        w.failed as f64 * 100.0 / w.units.max(1) as f64
    )
}

/// Program time of a working round by the stats' clock, and the part of it that is the floor (each
/// program's runs times its empty counterpart's time per run), both in ns over the whole round.
struct ProgramTime {
    total: f64,
    floor: f64,
    /// The median empty program's time per run, and the range over programs.
    typical_floor: f64,
    floor_range: (f64, f64),
}

fn program_time(empty: &StatsRound, working: &StatsRound) -> ProgramTime {
    let floors: Vec<f64> = empty
        .programs
        .iter()
        .filter(|p| p.runs > 0)
        .map(ProgRuns::ns_per_run)
        .collect();
    let typical_floor = median(&floors);
    let mut c = ProgramTime {
        total: 0.0,
        floor: 0.0,
        typical_floor,
        floor_range: floors.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), f| {
            (lo.min(*f), hi.max(*f))
        }),
    };
    for p in working.programs.iter().filter(|p| p.runs > 0) {
        let e = empty
            .program(&p.name)
            .filter(|e| e.runs > 0)
            .map_or(typical_floor, ProgRuns::ns_per_run);
        c.total += p.run_time_ns as f64;
        c.floor += e * p.runs as f64;
    }
    c
}

impl SetupRuns {
    /// Runs and program time per connect, for the storm's notes.
    pub fn cost(&self) -> KernelCost {
        let units = self.working.units.max(1) as f64;
        let c = self.empty.as_ref().map(|e| program_time(e, &self.working));
        KernelCost {
            runs_per_connect: self.working.runs_per_unit(|_| true),
            clocked_ns: c.as_ref().map_or(f64::NAN, |c| c.total / units),
            floor_ns: c.as_ref().map_or(f64::NAN, |c| c.floor / units),
        }
    }
}

/// Body time per connect, and what the stats' clock adds to every run (the floor).
fn body_rows(label: &str, empty: &StatsRound, working: &StatsRound, table: &mut Table) {
    let c = program_time(empty, working);
    let per_connect = |ns: f64| ns / working.units.max(1) as f64;
    table.info(
        format!("program body ns per connect, {label} (the empty programs' time subtracted)"),
        format!(
            "{:.0} ns ({:.0} by the stats' clock, {:.0} of it the floor)",
            per_connect(c.total - c.floor),
            per_connect(c.total),
            per_connect(c.floor)
        ),
    );
    table.info(
        format!("  floor per run: the empty programs, {label}"),
        format!(
            "{:.0} ns (programs {:.0}..{:.0}): the stats' own clock read and the call",
            c.typical_floor, c.floor_range.0, c.floor_range.1
        ),
    );
}
