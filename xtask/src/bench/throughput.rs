//! The per-packet tax: throughput of a bulk TCP transfer and of a small-datagram UDP flood between
//! two namespaces, per CPU-second (`traffic`), without and with the tracer on each DNS hook tier,
//! in alternated rounds (each tracer round against the no-tracer round of its cycle), and, in a
//! stats round per tier, how many program runs each packet cost.
use std::{cell::Cell, path::Path, time::Duration};

use super::{
    check_interrupted, cpu_time, peers,
    report::Table,
    schedule::{self, Measured, Spread},
    stats_round::{LoadWindow, StatsRound, stats_round},
    testbed::Pair,
    tiers::{Offer, Setup},
    traffic::{self, DATAGRAM_BYTES, Moved, Traffic},
};

/// Throughput loss of a bulk transfer on a tier with no per-packet hook.
pub const BULK_LOSS_TARGET: f64 = 0.01;
/// Program runs per packet of a bulk transfer that still count as "not per packet": a hook per
/// send or receive call runs about once per 45 to 135 packets here, one per packet at least once.
pub const BULK_RUNS_PER_PACKET: f64 = 0.1;
const SETTLE: Duration = Duration::from_millis(300);

#[derive(Debug, Clone, Copy)]
pub struct ThroughputConfig {
    pub cycles: usize,
    pub round: Duration,
}

pub fn run(
    tracer: &Path,
    dir: &Path,
    offer: &Offer,
    cfg: ThroughputConfig,
    table: &mut Table,
) -> anyhow::Result<()> {
    let pair = Pair::new()?;
    let _favoured = cpu_time::FavouredSession::raise();
    let clock_read = cpu_time::clock_read_cost(cpu_time::ksoftirqd(cpu_time::cpus() - 1)?)?;
    let setups = offer.dns_setups();
    for kind in [Traffic::BulkTcp, Traffic::UdpFlood] {
        eprintln!("bench: {}, program runs per packet", kind.name());
        let mut counted = Vec::new();
        for (i, setup) in setups.iter().enumerate() {
            check_interrupted()?;
            let calls = Cell::new(0u64);
            let r = stats_round(tracer, dir, &format!("traffic-{i}"), *setup, || {
                let m = traffic::run(&pair, kind, cfg.round)?;
                calls.set(m.calls);
                Ok(LoadWindow {
                    units: m.packets,
                    elapsed: Duration::from_secs_f64(m.secs),
                    failed: 0,
                })
            })?;
            counted.push((r, calls.get()));
        }
        eprintln!(
            "bench: {}, {} cycles without and with the tracer",
            kind.name(),
            cfg.cycles
        );
        let arms = setups.len() + 1;
        let mut rates = Vec::new();
        let mut none_moved = Vec::new();
        for (cycle, arm) in schedule::interleaved(arms, cfg.cycles) {
            check_interrupted()?;
            let mut running = if arm == 0 {
                None
            } else {
                let output = dir.join(format!("traffic-{cycle}-{arm}.jsonl"));
                let r = peers::start_tracer_setup(tracer, setups[arm - 1], output)?;
                std::thread::sleep(SETTLE);
                Some(r)
            };
            let moved = traffic::run(&pair, kind, cfg.round)?;
            if let Some(r) = running.as_mut() {
                r.stop()?;
                let _ = std::fs::remove_file(&r.output);
            }
            eprintln!(
                "bench: {} cycle {}/{} {:<44} {} per CPU-second (the cheapest batch: {}; {} units, {} packets, {:.2} s of CPU in {:.2} s)",
                kind.name(),
                cycle + 1,
                cfg.cycles,
                if arm == 0 {
                    "no tracer".to_string()
                } else {
                    setups[arm - 1].label(offer.report.chosen)
                },
                rate_text(kind, moved.per_cpu_second()),
                rate_text(kind, 1e9 / moved.least_ns_per_unit),
                moved.units,
                moved.packets,
                moved.cpu.as_secs_f64(),
                moved.secs,
            );
            if arm == 0 {
                none_moved.push(moved);
            }
            rates.push(Measured {
                cycle,
                arm,
                value: moved.per_cpu_second(),
            });
        }
        rows(kind, offer, &setups, &rates, &none_moved, &counted, table);
    }
    table.info(
        "  what measuring the traffic costs: its CPU clocks read twice per batch",
        format!(
            "{:.1} ns per datagram, {:.3} per MSS packet of TCP ({:.0} ns per reading), every arm alike",
            2.0 * clock_read.as_nanos() as f64 / traffic::UDP_BATCH as f64,
            2.0 * clock_read.as_nanos() as f64 * 1448.0 / traffic::TCP_BATCH as f64,
            clock_read.as_nanos() as f64
        ),
    );
    Ok(())
}

fn rate_text(kind: Traffic, per_second: f64) -> String {
    match kind {
        Traffic::BulkTcp => format!("{:.2} Gbit", per_second * 8.0 / 1e9),
        Traffic::UdpFlood => format!("{:.0}k datagrams", per_second / 1e3),
    }
}

fn rows(
    kind: Traffic,
    offer: &Offer,
    setups: &[Setup],
    rates: &[Measured],
    none_moved: &[Moved],
    counted: &[(StatsRound, u64)],
    table: &mut Table,
) {
    let auto = offer.report.chosen;
    let none = Spread::robust(&schedule::values(rates, 0));
    let of_none =
        |f: fn(&Moved) -> f64| super::report::median(&none_moved.iter().map(f).collect::<Vec<_>>());
    let packets_per_cpu_sec = of_none(|m| m.packets as f64 / m.cpu.as_secs_f64().max(1e-9));
    let wall = of_none(Moved::rate);
    let cpu_share = of_none(|m| m.cpu.as_secs_f64() / m.secs.max(1e-9));
    let what = match kind {
        Traffic::BulkTcp => "one connection, one MSS per packet".to_string(),
        Traffic::UdpFlood => format!("{DATAGRAM_BYTES}-byte datagrams, one send each"),
    };
    table.info(
        format!("{} between two namespaces ({what}), no tracer", kind.name()),
        format!(
            "{} per CPU-second {}% ({:.0}k packets; median of {}; wall {}/s at {:.0}% of the CPU)",
            rate_text(kind, none.median),
            none.error_text(100.0 / none.median, 1),
            packets_per_cpu_sec / 1e3,
            schedule::values(rates, 0).len(),
            rate_text(kind, wall),
            cpu_share * 100.0
        ),
    );
    for (i, setup) in setups.iter().enumerate() {
        let arm = i + 1;
        let label = setup.label(auto);
        let per_packet_tier = setup.tiers(auto).dns.per_packet();
        let ratios = schedule::ratios(rates, arm, 0);
        let losses: Vec<f64> = ratios.iter().map(|r| 1.0 - r).collect();
        let loss = Spread::robust(&losses);
        let value = format!(
            "{:.1}% {} (cycles {:.1}..{:.1}%)",
            loss.median * 100.0,
            loss.error_text(100.0, 1),
            loss.least * 100.0,
            loss.most * 100.0
        );
        let figure = format!(
            "{}, throughput per CPU-second lost with the tracer, {label}",
            kind.name()
        );
        if kind == Traffic::BulkTcp && !per_packet_tier {
            table.check(
                figure,
                value,
                format!("<= {:.0}%", BULK_LOSS_TARGET * 100.0),
                loss.median <= BULK_LOSS_TARGET,
            );
        } else {
            table.info(figure, value);
        }
        let Some((r, calls)) = counted.get(i) else {
            continue;
        };
        let per_packet = r.runs_per_unit(|_| true);
        let top = r
            .programs
            .iter()
            .filter(|p| p.runs > 0)
            .map(|p| {
                format!(
                    "{} {:.3}",
                    p.name,
                    (p.runs as f64 - p.background).max(0.0) / r.units.max(1) as f64
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let value = format!(
            "{per_packet:.3} ({:.3} send/recv calls per packet; {top})",
            *calls as f64 / r.units.max(1) as f64
        );
        let figure = format!("{}, program runs per packet, {label}", kind.name());
        if kind == Traffic::BulkTcp && !per_packet_tier {
            table.check(
                figure,
                value,
                format!("< {BULK_RUNS_PER_PACKET} (per call, not per packet)"),
                per_packet < BULK_RUNS_PER_PACKET,
            );
        } else {
            table.info(figure, value);
        }
    }
}
