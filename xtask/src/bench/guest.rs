//! `xtask bench-guest` (hidden): the part of the benchmark that runs inside a VM booting another
//! kernel (`vm_runs` boots it). It builds the same test bed, runs one stats round of the connect
//! storm per hook setup that kernel allows, and prints each round as one JSON line on the console
//! (`BENCH-GUEST {...}`), then `BENCH-GUEST-DONE`. Under TCG timing means nothing; run counts are
//! exact.
use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context as _;
use serde_json::{Value, json};

use super::{
    load::LoadConfig,
    stats_round::{ProgRuns, ProgramSides, StatsRound, stats_round},
    storm_runs,
    testbed::{self, Testbed},
    tiers::{DnsTier, HookReport, Offer, Setup, TcpTier, takes_tier_flags},
};

pub const ROUND_PREFIX: &str = "BENCH-GUEST ";
pub const ERROR_PREFIX: &str = "BENCH-GUEST-ERROR ";
/// A setup whose round failed: `BENCH-GUEST-ROUND-ERROR <setup JSON> <error>` (the others still run).
pub const ROUND_ERROR_PREFIX: &str = "BENCH-GUEST-ROUND-ERROR ";
pub const DONE: &str = "BENCH-GUEST-DONE";

#[derive(Debug, clap::Args)]
pub struct GuestArgs {
    /// The tracer binary (a path the guest sees on the shared root).
    #[arg(long)]
    pub tracer: PathBuf,
    /// Seconds of storm per round.
    #[arg(long, default_value_t = 3.0)]
    pub round_secs: f64,
}

pub fn run(args: &GuestArgs) -> anyhow::Result<()> {
    let result = rounds(args);
    if let Err(e) = &result {
        println!("{ERROR_PREFIX}{e:#}");
    }
    println!("{DONE}");
    result
}

fn rounds(args: &GuestArgs) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join("bhb-bench-guest");
    std::fs::create_dir_all(&dir)?;
    let bed = Testbed::new(5)?;
    // Fewer connects in flight and a longer time-out than on the host: TCG is slow, and a connect
    // cut before its answer would count other runs than an answered one.
    let cfg = LoadConfig {
        threads: 2,
        inflight: 64,
        duration: Duration::from_secs_f64(args.round_secs.clamp(0.5, 60.0)),
        timeout: Duration::from_millis(900),
        rate: None,
    };
    let flags = takes_tier_flags(&args.tracer)?;
    super::peers::ATTACH_LIMIT_SECS.store(300, std::sync::atomic::Ordering::Relaxed);
    let mut sides = ProgramSides::default();
    let mut round = |tag: &str, setup: Setup| -> anyhow::Result<StatsRound> {
        bed.flush_conntrack()?;
        let mut r = stats_round(&args.tracer, &dir, tag, setup, || {
            storm_runs::storm(&bed, cfg)
        })?;
        sides.mark(&args.tracer, &dir, &mut r)?;
        println!("{ROUND_PREFIX}{}", to_json(&r));
        Ok(r)
    };
    let first = round("auto", Setup::AUTO)?;
    let offer = Offer {
        flags,
        report: first.report,
    };
    for (i, setup) in offer.setups().into_iter().enumerate().skip(1) {
        if let Err(e) = round(&i.to_string(), setup) {
            println!("{ROUND_ERROR_PREFIX}{} {e:#}", setup_json(setup));
        }
    }
    drop(bed);
    testbed::remove_stale();
    Ok(())
}

fn report_json(r: &HookReport) -> Value {
    json!({
        "chosen": {"dns": r.chosen.dns.name(), "tcp": r.chosen.tcp.name()},
        "dns_available": r.dns_available.iter().map(|t| t.name()).collect::<Vec<_>>(),
        "tcp_available": r.tcp_available.iter().map(|t| t.name()).collect::<Vec<_>>(),
        "reported": r.reported,
        "not_used": r.not_used,
    })
}

fn setup_json(s: Setup) -> Value {
    json!({
        "dns": s.dns.map(DnsTier::name),
        "tcp": s.tcp.map(TcpTier::name),
        "hooks_only": s.hooks_only,
    })
}

fn setup_from_json(setup: &Value) -> anyhow::Result<Setup> {
    Ok(Setup {
        dns: tier(&setup["dns"])?,
        tcp: tier(&setup["tcp"])?,
        hooks_only: setup["hooks_only"].as_bool().unwrap_or(false),
        unattached_set_state: false,
    })
}

pub fn to_json(r: &StatsRound) -> Value {
    json!({
        "setup": setup_json(r.setup),
        "report": report_json(&r.report),
        "units": r.units,
        "failed": r.failed,
        "load_secs": r.load_secs,
        "programs": r.programs.iter().map(|p| json!({
            "name": p.name,
            "runs": p.runs,
            "run_time_ns": p.run_time_ns,
            "misses": p.misses,
            "background": p.background,
            "dns": p.dns,
        })).collect::<Vec<_>>(),
    })
}

fn tier<T: std::str::FromStr<Err = String>>(v: &Value) -> anyhow::Result<Option<T>> {
    v.as_str()
        .map(|s| s.parse().map_err(anyhow::Error::msg))
        .transpose()
}

pub fn from_json(v: &Value) -> anyhow::Result<StatsRound> {
    let setup = &v["setup"];
    let report = &v["report"];
    let names = |key: &str| -> anyhow::Result<Vec<String>> {
        report[key]
            .as_array()
            .with_context(|| format!("no {key}"))?
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_string)
                    .context("a tier that is not a string")
            })
            .collect()
    };
    let kernel_object = json!({"hooks": {
        "dns": {"tier": report["chosen"]["dns"], "available": names("dns_available")?},
        "tcp": {"tier": report["chosen"]["tcp"], "available": names("tcp_available")?},
    }});
    let mut hook_report = HookReport::from_kernel_object(&kernel_object)?;
    hook_report.reported = report["reported"].as_bool().unwrap_or(false);
    hook_report.not_used = report["not_used"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    let number = |v: &Value, key: &str| v[key].as_u64().with_context(|| format!("no {key}"));
    Ok(StatsRound {
        setup: setup_from_json(setup)?,
        report: hook_report,
        units: number(v, "units")?,
        failed: v["failed"].as_u64().unwrap_or(0),
        load_secs: v["load_secs"].as_f64().context("no load_secs")?,
        programs: v["programs"]
            .as_array()
            .context("no programs")?
            .iter()
            .map(|p| {
                Ok(ProgRuns {
                    name: p["name"].as_str().context("no name")?.to_string(),
                    runs: number(p, "runs")?,
                    run_time_ns: number(p, "run_time_ns")?,
                    misses: number(p, "misses")?,
                    background: p["background"].as_f64().unwrap_or(0.0),
                    dns: p["dns"].as_bool().unwrap_or(false),
                })
            })
            .collect::<anyhow::Result<_>>()?,
    })
}

/// What a guest printed on its console.
#[derive(Debug, Default)]
pub struct Console {
    pub rounds: Vec<StatsRound>,
    /// Setups whose round failed, with the error.
    pub failed: Vec<(Setup, String)>,
    /// What stopped the guest, if something did.
    pub error: Option<String>,
    pub done: bool,
}

pub fn parse_console(text: &str) -> Console {
    let mut console = Console::default();
    let Console {
        rounds,
        failed,
        error,
        done,
    } = &mut console;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(ROUND_ERROR_PREFIX) {
            let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
            match stream.next() {
                Some(Ok(v)) => match setup_from_json(&v) {
                    Ok(setup) => {
                        failed.push((setup, rest[stream.byte_offset()..].trim().to_string()));
                    }
                    Err(e) => {
                        *error = Some(format!("a failed round's setup does not parse: {e:#}"));
                    }
                },
                _ => *error = Some(format!("a failed round's line does not parse: {rest}")),
            }
        } else if let Some(j) = line.strip_prefix(ROUND_PREFIX) {
            match serde_json::from_str::<Value>(j)
                .map_err(anyhow::Error::from)
                .and_then(|v| from_json(&v))
            {
                Ok(r) => rounds.push(r),
                Err(e) => *error = Some(format!("a round line that does not parse: {e:#}")),
            }
        } else if let Some(e) = line.strip_prefix(ERROR_PREFIX) {
            *error = Some(e.to_string());
        } else if line.trim() == DONE {
            *done = true;
        }
    }
    console
}

/// The shell line the VM runs: this very xtask binary, `bench-guest`.
pub fn command_line(xtask: &Path, tracer: &Path, round_secs: f64) -> String {
    format!(
        "'{}' bench-guest --tracer '{}' --round-secs {round_secs} 2>&1",
        xtask.display(),
        tracer.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::tiers::Tiers;

    #[test]
    fn a_round_crosses_the_console_and_back_unchanged() {
        let round = StatsRound {
            setup: Setup {
                dns: Some(DnsTier::Kprobe),
                tcp: None,
                hooks_only: false,
                unattached_set_state: false,
            },
            report: HookReport {
                chosen: Tiers {
                    dns: DnsTier::Kprobe,
                    tcp: TcpTier::Fentry,
                },
                dns_available: vec![DnsTier::Fentry, DnsTier::Kprobe, DnsTier::CgroupSkb],
                tcp_available: vec![TcpTier::Fentry, TcpTier::Tracepoint],
                reported: true,
                not_used: vec!["DNS fentry: refused".into()],
            },
            units: 1234,
            failed: 62,
            load_secs: 3.0,
            programs: vec![ProgRuns {
                name: "dns_send".into(),
                runs: 7,
                run_time_ns: 700,
                misses: 0,
                background: 1.5,
                dns: true,
            }],
        };
        let failed = Setup {
            tcp: Some(TcpTier::Kprobe),
            ..Setup::AUTO
        };
        let console = format!(
            "noise\n{ROUND_PREFIX}{}\r\n{ROUND_ERROR_PREFIX}{} did not attach\n{DONE}\n",
            to_json(&round),
            setup_json(failed)
        );
        let c = parse_console(&console.replace('\r', ""));
        assert!(c.error.is_none() && c.done, "{:?}", c.error);
        assert_eq!(c.failed, [(failed, "did not attach".to_string())]);
        let back = &c.rounds[0];
        assert_eq!(back.setup, round.setup);
        assert_eq!(back.report, round.report);
        assert_eq!((back.units, back.programs[0].runs), (1234, 7));
        assert!((back.programs[0].background - 1.5).abs() < 1e-9);
        assert!(back.programs[0].dns);
    }

    #[test]
    fn a_guest_error_is_reported_not_lost() {
        let c = parse_console(&format!("{ERROR_PREFIX}no tracefs\n{DONE}\n"));
        assert!(c.rounds.is_empty() && c.done);
        assert_eq!(c.error.as_deref(), Some("no tracefs"));
    }
}
