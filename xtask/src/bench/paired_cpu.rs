//! What the tracer adds to the CPU cost of a connect, with the stats off: a pinned single-thread
//! loopback connect/accept/close loop (`loopback`), rounds alternated between no tracer, the
//! tracer as it chooses its hooks, and today's design (DNS `cgroup-skb` forced) as the reference,
//! plus one arm with `kernel.bpf_stats_enabled` (what counting runs costs) and, where TCP is on the
//! tracepoint tier, one with `inet_sock_set_state` left out (what it costs). A round's cost is the
//! loop thread's CPU (softirq work in its context included), the loop CPU's `ksoftirqd` and the
//! tracer process's CPU, per connect; each tracer arm's figure is the median of its differences
//! with the no-tracer round of the same cycle.
use std::{path::Path, time::Duration};

use super::{
    check_interrupted, cpu_time,
    kstats::BpfStats,
    loopback::LoopbackLoop,
    peers,
    report::Table,
    schedule::{self, Measured, Spread},
    testbed::Testbed,
    tiers::{Offer, Setup, TcpTier},
};

/// The tracer's added CPU per connect, at most this share of today's design's.
pub const TARGET_SHARE: f64 = 0.5;
/// Time between a round's start (the tracer attached, or none) and its measurement.
const SETTLE: Duration = Duration::from_millis(300);

#[derive(Debug, Clone, Copy)]
pub struct PairedConfig {
    pub cycles: usize,
    pub connects: u64,
}

/// One arm of the schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arm {
    NoTracer,
    Tracer { setup: Setup, stats: bool },
}

/// CPU per connect of one round, in ns: the loop's (its thread and its CPU's softirq thread, the
/// cheapest tenth of the round's batches) and the tracer process's (over the round).
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    looping: f64,
    tracer: f64,
}

impl Cost {
    fn total(self) -> f64 {
        self.looping + self.tracer
    }
}

pub fn run(
    tracer: &Path,
    bed: &Testbed,
    dir: &Path,
    offer: &Offer,
    cfg: PairedConfig,
    table: &mut Table,
) -> anyhow::Result<()> {
    let cpu = cpu_time::cpus() - 1;
    let _favoured = cpu_time::FavouredSession::raise();
    let lo = LoopbackLoop::start(&bed.client.path(), cpu)?;
    let arms = arms(offer);
    // Warm the listener's and the stack's caches before the first measured round.
    lo.run(cfg.connects / 4 + 1)?;
    let mut costs: Vec<(usize, usize, Cost)> = Vec::new();
    let mut wall_rate = Vec::new();
    for (cycle, arm_index) in schedule::interleaved(arms.len(), cfg.cycles) {
        check_interrupted()?;
        let arm = arms[arm_index];
        let (stats, mut running) = match arm {
            Arm::NoTracer => (None, None),
            Arm::Tracer { setup, stats } => {
                let guard = if stats {
                    Some(BpfStats::enable()?)
                } else {
                    None
                };
                let output = dir.join(format!("paired-{cycle}-{arm_index}.jsonl"));
                let running = peers::start_tracer_setup(tracer, setup, output)?;
                (guard, Some(running))
            }
        };
        // Every arm waits alike: a tracer's start-up, or the last one's teardown (programs and
        // maps freed after an RCU grace period), ends before the round.
        std::thread::sleep(SETTLE);
        let pid = running.as_ref().map(peers::Running::pid);
        let before = pid.map(cpu_time::process).transpose()?;
        let round = lo.run(cfg.connects)?;
        let tracer_cpu = match (pid, before) {
            (Some(pid), Some(before)) => cpu_time::process(pid)?.saturating_sub(before),
            _ => Duration::ZERO,
        };
        if let Some(r) = running.as_mut() {
            r.stop()?;
            let _ = std::fs::remove_file(&r.output);
        }
        drop(stats);
        let n = round.connects.max(1) as f64;
        let cost = Cost {
            looping: round.cheapest_ns_per_connect(),
            tracer: tracer_cpu.as_nanos() as f64 / n,
        };
        if arm == Arm::NoTracer {
            wall_rate.push(n / round.wall.as_secs_f64().max(1e-9));
        }
        eprintln!(
            "bench: loopback cycle {}/{} {:<52} {:>6.0} ns per connect (loop {:.0}, tracer {:.0}; batches: median {:.0}, mean {:.0})",
            cycle + 1,
            cfg.cycles,
            arm_label(arm, offer),
            cost.total(),
            cost.looping,
            cost.tracer,
            round.median_ns_per_connect(),
            round.batches.iter().map(Duration::as_nanos).sum::<u128>() as f64 / n,
        );
        costs.push((cycle, arm_index, cost));
    }
    let clock_read = lo.clock_read;
    drop(lo);
    rows(&arms, &costs, offer, cfg, cpu, &wall_rate, table);
    table.info(
        "  what measuring the loop costs: its CPU clocks read twice per batch",
        format!(
            "{:.0} ns per connect ({:.0} ns per reading, {} connects per batch), every arm alike",
            2.0 * clock_read.as_nanos() as f64 / super::loopback::BATCH as f64,
            clock_read.as_nanos() as f64,
            super::loopback::BATCH
        ),
    );
    match cpu_time::irq_time_accounted() {
        Some(false) => {}
        Some(true) => table.notes.push(
            "this kernel accounts softirq time apart (CONFIG_IRQ_TIME_ACCOUNTING): the loop \
             thread's CPU leaves out the receive path run in its context, so the loopback rows \
             undercount every arm"
                .into(),
        ),
        None => table.notes.push(
            "the kernel's configuration could not be read: if it accounts softirq time apart \
             (CONFIG_IRQ_TIME_ACCOUNTING), the loopback rows undercount every arm"
                .into(),
        ),
    }
    Ok(())
}

/// No tracer, the tracer's own choice, today's design, the own choice with the stats on, and
/// where TCP is on the tracepoint tier the own choice without `inet_sock_set_state`.
fn arms(offer: &Offer) -> Vec<Arm> {
    let reference = offer.reference();
    let mut arms = vec![
        Arm::NoTracer,
        Arm::Tracer {
            setup: Setup::AUTO,
            stats: false,
        },
        Arm::Tracer {
            setup: reference,
            stats: false,
        },
        Arm::Tracer {
            setup: Setup::AUTO,
            stats: true,
        },
    ];
    if without_set_state(offer) {
        arms.push(Arm::Tracer {
            setup: Setup::AUTO_WITHOUT_SET_STATE,
            stats: false,
        });
    }
    arms
}

fn arm_label(arm: Arm, offer: &Offer) -> String {
    match arm {
        Arm::NoTracer => "no tracer".into(),
        Arm::Tracer { setup, stats } => {
            let mut label = setup.label(offer.report.chosen);
            if setup == offer.reference() && offer.reference() != Setup::AUTO {
                label = format!("today's design: {label}");
            }
            if stats {
                label.push_str(", bpf_stats on");
            }
            label
        }
    }
}

fn measured(costs: &[(usize, usize, Cost)], part: impl Fn(Cost) -> f64) -> Vec<Measured> {
    costs
        .iter()
        .map(|&(cycle, arm, cost)| Measured {
            cycle,
            arm,
            value: part(cost),
        })
        .collect()
}

fn rows(
    arms: &[Arm],
    costs: &[(usize, usize, Cost)],
    offer: &Offer,
    cfg: PairedConfig,
    cpu: usize,
    wall_rate: &[f64],
    table: &mut Table,
) {
    let total = measured(costs, Cost::total);
    let none = Spread::robust(&schedule::values(&total, 0));
    table.info(
        format!(
            "loopback connect/accept/close on CPU {cpu}, no tracer: CPU per connect (median of {})",
            cfg.cycles
        ),
        format!(
            "{:.0} ns {} (the cheapest tenth of batches of {} in rounds of {}; {:.0} connects/s)",
            none.median,
            none.error_text(1.0, 0),
            super::loopback::BATCH,
            cfg.connects,
            super::report::median(wall_rate),
        ),
    );
    let added = |arm: usize, base: usize| Spread::robust(&schedule::differences(&total, arm, base));
    let part = |arm: usize, f: fn(Cost) -> f64| {
        Spread::robust(&schedule::differences(&measured(costs, f), arm, 0)).median
    };
    for (i, arm) in arms.iter().enumerate().skip(1) {
        if matches!(arm, Arm::Tracer { stats: true, .. }) {
            continue;
        }
        let s = added(i, 0);
        table.info(
            format!(
                "added CPU per connect, stats off: {}",
                arm_label(*arm, offer)
            ),
            format!(
                "{:+.0} ns {} (paired, {:+.1}%): the loop {:+.0}, the tracer process {:.0}",
                s.median,
                s.error_text(1.0, 0),
                s.median * 100.0 / none.median,
                part(i, |c| c.looping),
                part(i, |c| c.tracer),
            ),
        );
    }
    // Arms 1 and 2: the tracer's own choice and today's design.
    let own = added(1, 0);
    let todays = added(2, 0);
    let share = own.median / todays.median;
    // The share's error from both medians' errors (first order).
    let share_error = share.abs()
        * ((own.error_or_zero() / own.median).powi(2)
            + (todays.error_or_zero() / todays.median).powi(2))
        .sqrt();
    let same = offer.reference() == Setup::AUTO;
    table.check(
        "added CPU per connect: the tracer's own choice / today's design (stats off)",
        format!(
            "{share:.2} ± {share_error:.2} ({:.0} / {:.0} ns){}",
            own.median,
            todays.median,
            if same { "; the same hooks here" } else { "" }
        ),
        format!("<= {TARGET_SHARE}"),
        share <= TARGET_SHARE && todays.median > 0.0,
    );
    if share > TARGET_SHARE {
        table.notes.push(if same {
            format!(
                "added CPU per connect: the tracer chose today's design here ({}), so both arms \
                 ran the same hooks and the share is 1 within the noise ({share:.2} ± {share_error:.2}): \
                 what the measurement can tell apart",
                offer.report.chosen
            )
        } else {
            format!(
                "added CPU per connect: the tracer's own choice ({}) adds {:.0} ns per connect \
                 against {:.0} for today's design: more than {TARGET_SHARE} of it",
                offer.report.chosen, own.median, todays.median
            )
        });
    }
    let stats_arm = arms
        .iter()
        .position(|a| matches!(a, Arm::Tracer { stats: true, .. }));
    if let Some(i) = stats_arm {
        let s = added(i, 1);
        table.info(
            "what counting runs costs: bpf_stats on, added CPU per connect over the same tracer",
            format!(
                "{:+.0} ns {} (paired): why no timing figure here is taken with the stats on",
                s.median,
                s.error_text(1.0, 0)
            ),
        );
    }
    set_state_row(arms, costs, table);
}

/// What `inet_sock_set_state` costs: the tracer with it minus the tracer without it, per cycle.
fn set_state_row(arms: &[Arm], costs: &[(usize, usize, Cost)], table: &mut Table) {
    let Some(without) = arms
        .iter()
        .position(|a| matches!(a, Arm::Tracer { setup, .. } if setup.unattached_set_state))
    else {
        return;
    };
    // The connect's own CPU only: without the program no attempt is ever completed, so the
    // tracer process ends every one of them itself, work the tracer with it never does.
    let looping = measured(costs, |c| c.looping);
    let s = Spread::robust(&schedule::differences(&looping, 1, without));
    let own = Spread::robust(&schedule::differences(&looping, 1, 0)).median;
    let process = |arm| {
        Spread::robust(&schedule::differences(
            &measured(costs, |c| c.tracer),
            arm,
            0,
        ))
        .median
    };
    table.info(
        "inet_sock_set_state's own cost: the loop's added CPU per connect, the tracer with it minus without",
        format!(
            "{:+.0} ns {} (paired; {:.0}% of the loop's {:+.0} with the tracer): the most deciding \
             \"answered\" lazily could save on a kernel without fentry and kprobes (the tracer \
             process: {:.0} ns with it, {:.0} without, ending the attempts no program completed)",
            s.median,
            s.error_text(1.0, 0),
            s.median * 100.0 / own,
            own,
            process(1),
            process(without),
        ),
    );
}

/// Whether the run measures the tracer without `inet_sock_set_state`: where it is the TCP tier.
pub fn without_set_state(offer: &Offer) -> bool {
    offer.flags && offer.report.chosen.tcp == TcpTier::Tracepoint
}
