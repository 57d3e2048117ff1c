//! Program runs per connect of the storm on a kernel that has fentry and kprobes, which this host
//! refuses: a qemu VM boots Debian's kernel (the kernel matrix's VM: the host's root shared
//! read-only, no network device) and runs `xtask bench-guest` in it, which prints one stats round
//! per hook setup that kernel allows. Timing under TCG means nothing; the counts are exact.
use std::{path::Path, time::Duration};

use anyhow::Context as _;

use super::{
    guest,
    report::Table,
    storm_runs::{self, FENTRY_RUNS_TARGET, SetupRuns},
    tiers::{HookReport, Offer},
};
use crate::kernels;

/// A VM still running by then is stopped and its figures count as missing.
const VM_TIMEOUT: Duration = Duration::from_mins(15);

#[derive(Debug, Clone, Copy)]
pub struct VmConfig {
    pub series: &'static str,
    pub round_secs: f64,
}

/// Boots the VM and adds its rows; a VM that could not run is a MISS with its reason, not an
/// error that loses the rest of the run.
pub fn run(tracer: &Path, dir: &Path, cfg: VmConfig, table: &mut Table) {
    match boot_and_count(tracer, dir, cfg, table) {
        Ok((release, offer, runs)) => {
            storm_runs::rows(
                &format!("Linux {release} (VM)"),
                &offer,
                &runs,
                Some(FENTRY_RUNS_TARGET),
                table,
            );
        }
        Err(e) => {
            not_run(cfg, "see the note", table);
            table
                .notes
                .push(format!("the {} VM's run counts: {e:#}", cfg.series));
        }
    }
}

/// The target's row when the VM is not booted, with the reason.
pub fn not_run(cfg: VmConfig, why: &str, table: &mut Table) {
    table.check(
        figure(cfg),
        format!("not measured ({why})"),
        format!("<= {FENTRY_RUNS_TARGET:.0}"),
        false,
    );
}

fn figure(cfg: VmConfig) -> String {
    format!(
        "program runs per connect of the storm, Linux {} (VM), the tracer's own choice",
        cfg.series
    )
}

fn boot_and_count(
    tracer: &Path,
    dir: &Path,
    cfg: VmConfig,
    table: &mut Table,
) -> anyhow::Result<(String, Offer, Vec<SetupRuns>)> {
    let kernel = kernels::debian_kernel(cfg.series)?;
    // The guest reads the host's files through 9p: copies, so a rebuild meanwhile changes nothing.
    let xtask = dir.join("xtask");
    std::fs::copy(std::env::current_exe()?, &xtask).context("copying the xtask binary")?;
    let tracer_copy = dir.join("tracer");
    std::fs::copy(tracer, &tracer_copy).context("copying the tracer")?;
    eprintln!(
        "bench: booting Debian's {} in qemu for the run counts where fentry exists",
        kernel.release
    );
    let log = dir.join(format!("vm-{}.log", kernel.release));
    let booted = kernels::boot(
        &kernel,
        &guest::command_line(&xtask, &tracer_copy, cfg.round_secs),
        dir,
        &log,
        VM_TIMEOUT,
    )?;
    let guest::Console {
        rounds,
        failed,
        error,
        done,
    } = guest::parse_console(&booted.text);
    if let Some(e) = error {
        anyhow::bail!("the guest failed: {e} (console in {})", log.display());
    }
    if booted.timed_out.is_some() {
        anyhow::bail!(
            "the VM did not finish within {} s (console in {})",
            VM_TIMEOUT.as_secs(),
            log.display()
        );
    }
    if !done {
        anyhow::bail!(
            "the VM stopped before the guest finished (console in {})",
            log.display()
        );
    }
    let first = rounds
        .first()
        .with_context(|| format!("the guest printed no round (console in {})", log.display()))?;
    let offer = Offer {
        flags: first.report.reported,
        report: if first.report.reported {
            first.report.clone()
        } else {
            HookReport::todays_design()
        },
    };
    eprintln!(
        "bench: VM {}: {} stats rounds, the tracer chose {}",
        kernel.release,
        rounds.len(),
        offer.report.chosen
    );
    for (setup, e) in &failed {
        // The round that would have checked this tier's DNS runs did not run: no PASS for it.
        table.check(
            format!(
                "DNS program runs per TCP connect, Linux {} (VM), {}",
                kernel.release,
                setup.label(offer.report.chosen)
            ),
            "not measured (see the note)",
            "0",
            false,
        );
        table.notes.push(format!(
            "the {} VM's round with {}: {e} (console in {})",
            cfg.series,
            setup.label(offer.report.chosen),
            log.display()
        ));
    }
    Ok((
        kernel.release,
        offer,
        rounds
            .into_iter()
            .map(|working| SetupRuns {
                empty: None,
                working,
            })
            .collect(),
    ))
}
