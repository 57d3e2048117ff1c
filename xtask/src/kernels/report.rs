//! Reading a kernel's run (the lines `vm.rs`'s script prints) and the tables: kernel × scenario
//! (default tiers), kernel × hook tier (each side's scenarios with the tier forced), kernel ×
//! capability.
use std::{fmt::Write as _, path::PathBuf};

use super::{SCENARIOS, Side};

/// Every tier of each side, in the tracer's order of preference.
const TIERS: [(Side, &str); 7] = [
    (Side::Tcp, "fentry"),
    (Side::Tcp, "kprobe"),
    (Side::Tcp, "tracepoint"),
    (Side::Dns, "fentry"),
    (Side::Dns, "tracepoint"),
    (Side::Dns, "kprobe"),
    (Side::Dns, "cgroup-skb"),
];

/// What one kernel did.
pub struct Outcome {
    /// `uname -r` in the guest (or the host).
    pub release: String,
    /// Per `SCENARIOS` entry, with the tiers the tracer chose: passed?
    pub passed: Vec<bool>,
    /// The tier the tracer chose per side (`tcp`, `dns`), as its stats said.
    pub default_tiers: Vec<(Side, String)>,
    /// The other tiers forced, each with its side's scenarios.
    pub forced: Vec<TierRun>,
    /// Other tiers not forced here: the host's, which its integration tests ran in the same run.
    pub on_host: Vec<(Side, String)>,
    /// Capability name -> `full`, `degraded` or `off`, with the reason, as the tracer reported them.
    pub capabilities: Vec<(String, String)>,
    /// What went wrong outside the scenarios (a VM that hung, a script that failed), or what the
    /// kernel's choice should be known for (a newer patch release that could not be had).
    pub note: Option<String>,
    /// False for a kernel that could not be booted at all (not downloaded, not cached).
    pub tested: bool,
    /// The scenario script ran to its end, neither stopped by a fatal error nor by the timeout.
    pub finished: bool,
    /// The failed tests' own output (libtest's `---- name stdout ----` sections), so a CI log that
    /// shows only the tables still says why.
    pub failures: String,
    pub log: PathBuf,
}

/// One side's scenarios run again with a tier forced.
pub struct TierRun {
    pub side: Side,
    pub tier: String,
    /// Scenario labels of that side, and whether each passed.
    pub passed: Vec<(&'static str, bool)>,
}

impl Outcome {
    /// Scenarios passed, default and forced runs together, and how many ran.
    pub fn tally(&self) -> (usize, usize) {
        let forced = self
            .forced
            .iter()
            .flat_map(|r| r.passed.iter().map(|p| p.1));
        let all: Vec<bool> = self.passed.iter().copied().chain(forced).collect();
        (all.iter().filter(|p| **p).count(), all.len())
    }

    pub fn all_passed(&self) -> bool {
        let (passed, ran) = self.tally();
        passed == ran && self.finished
    }

    /// A kernel that could not be tested, and why.
    pub fn untested(kernel: String, why: &str) -> Outcome {
        Outcome {
            release: kernel,
            passed: vec![false; SCENARIOS.len()],
            default_tiers: Vec::new(),
            forced: Vec::new(),
            on_host: Vec::new(),
            capabilities: Vec::new(),
            note: Some(format!("not tested: {why}")),
            tested: false,
            finished: false,
            failures: String::new(),
            log: PathBuf::new(),
        }
    }
}

pub fn parse(text: &str, log: PathBuf) -> Outcome {
    let release = text
        .lines()
        .find_map(|l| l.strip_prefix("KM-KERNEL "))
        .unwrap_or_default()
        .trim()
        .to_string();
    let segments = tier_segments(text);
    let ok = |segment: &str, test: &str| {
        let line = format!("test {test} ... ok");
        segment.lines().any(|l| l.trim_end() == line)
    };
    let default = segments
        .iter()
        .find(|(label, _)| label == "default")
        .map_or("", |(_, body)| body.as_str());
    let passed = SCENARIOS.iter().map(|s| ok(default, s.test)).collect();
    let forced = segments
        .iter()
        .filter_map(|(label, body)| {
            let (side, tier) = label.split_once(' ')?;
            let side = [Side::Tcp, Side::Dns]
                .into_iter()
                .find(|s| s.name() == side)?;
            let passed = SCENARIOS
                .iter()
                .filter(|s| s.side == Some(side))
                .map(|s| (s.label, ok(body, s.test)))
                .collect();
            Some(TierRun {
                side,
                tier: tier.to_string(),
                passed,
            })
        })
        .collect();
    let on_host = text
        .lines()
        .filter_map(|l| l.strip_prefix("KM-ON-HOST ")?.trim().split_once(' '))
        .filter_map(|(side, tier)| {
            let side = [Side::Tcp, Side::Dns]
                .into_iter()
                .find(|s| s.name() == side)?;
            Some((side, tier.to_string()))
        })
        .collect();
    let stats = text
        .lines()
        .filter_map(|l| l.strip_prefix("KM-CAPS "))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["kind"] == "stats" && v["kernel"].is_object());
    let capabilities = stats
        .as_ref()
        .map(|v| capabilities(&v["kernel"]))
        .unwrap_or_default();
    let default_tiers = [Side::Tcp, Side::Dns]
        .into_iter()
        .map(|side| {
            let tier = stats
                .as_ref()
                .and_then(|v| v["kernel"]["hooks"][side.name()]["tier"].as_str())
                .unwrap_or("?");
            (side, tier.to_string())
        })
        .collect();
    let fatal = text
        .lines()
        .find_map(|l| l.strip_prefix("KM-FATAL "))
        .map(str::to_string);
    let unfinished = (!text.contains("KM-DONE"))
        .then(|| "the scenarios did not run to their end (see the log)".to_string());
    Outcome {
        release,
        passed,
        default_tiers,
        forced,
        on_host,
        capabilities,
        finished: fatal.is_none() && unfinished.is_none(),
        tested: true,
        note: fatal.or(unfinished),
        failures: segments
            .iter()
            .fold(String::new(), |mut all, (label, body)| {
                let f = failure_sections(body);
                if !f.is_empty() {
                    let _ = write!(all, "[tiers: {label}]\n{f}");
                }
                all
            }),
        log,
    }
}

/// The log cut at each `KM-TIER LABEL` line: (label, what follows up to the next one).
fn tier_segments(text: &str) -> Vec<(String, String)> {
    let mut segments: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(label) = line.strip_prefix("KM-TIER ") {
            segments.push((label.trim().to_string(), String::new()));
        } else if let Some((_, body)) = segments.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    segments
}

/// The lines from each `---- name stdout ----` header up to libtest's closing `failures:` list.
fn failure_sections(text: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("---- ") && line.ends_with(" stdout ----") {
            inside = true;
        } else if line.trim_end() == "failures:" {
            inside = false;
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn capabilities(kernel: &serde_json::Value) -> Vec<(String, String)> {
    let Some(map) = kernel["capabilities"].as_object() else {
        return Vec::new();
    };
    map.iter()
        .map(|(name, c)| {
            let state = c["state"].as_str().unwrap_or("?").to_string();
            (name.clone(), state)
        })
        .collect()
}

/// kernel × scenario (default tiers), kernel × hook tier, kernel × capability; one column per
/// kernel.
pub fn tables(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    let names: Vec<String> = outcomes
        .iter()
        .map(|o| {
            if o.release.is_empty() {
                o.log.display().to_string()
            } else {
                o.release.clone()
            }
        })
        .collect();
    let width = SCENARIOS.iter().map(|s| s.label.len()).max().unwrap_or(8) + 2;
    let column = names.iter().map(String::len).max().unwrap_or(8).max(8) + 2;
    let header = |out: &mut String, title: &str| {
        let _ = write!(out, "{title:width$}");
        for name in &names {
            let _ = write!(out, "{name:column$}");
        }
        out.push('\n');
    };
    let row = |out: &mut String, label: &str, cells: &mut dyn Iterator<Item = String>| {
        let _ = write!(out, "{label:width$}");
        for cell in cells {
            let _ = write!(out, "{cell:column$}");
        }
        out.push('\n');
    };
    header(&mut out, "scenario (default tiers)");
    for side in [Side::Tcp, Side::Dns] {
        row(
            &mut out,
            &format!("  {} hooks", side.name()),
            &mut outcomes.iter().map(|o| {
                o.default_tiers
                    .iter()
                    .find(|(s, _)| *s == side)
                    .map_or("?".to_string(), |(_, t)| t.clone())
            }),
        );
    }
    for (i, scenario) in SCENARIOS.iter().enumerate() {
        row(
            &mut out,
            scenario.label,
            &mut outcomes.iter().map(|o| {
                if !o.tested {
                    "untested".to_string()
                } else if o.passed.get(i).copied().unwrap_or(false) {
                    "pass".to_string()
                } else {
                    "FAIL".to_string()
                }
            }),
        );
    }
    out.push('\n');
    header(&mut out, "hook tier (its scenarios)");
    for (side, tier) in TIERS {
        row(
            &mut out,
            &format!("{} {tier}", side.name()),
            &mut outcomes.iter().map(|o| tier_cell(o, side, tier)),
        );
    }
    out.push('\n');
    header(&mut out, "capability");
    let mut capability_names: Vec<&str> = Vec::new();
    for o in outcomes {
        for (name, _) in &o.capabilities {
            if !capability_names.contains(&name.as_str()) {
                capability_names.push(name);
            }
        }
    }
    for name in capability_names {
        row(
            &mut out,
            name,
            &mut outcomes.iter().map(|o| {
                o.capabilities
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or("(not reported)".to_string(), |(_, s)| s.clone())
            }),
        );
    }
    for o in outcomes {
        if let Some(note) = &o.note {
            let _ = writeln!(out, "{}: {note}", o.release);
        }
    }
    for o in outcomes.iter().filter(|o| !o.failures.is_empty()) {
        let _ = write!(out, "\nfailed on {}:\n{}", o.release, o.failures);
    }
    out
}

/// One tier on one kernel: `default` (its scenarios are the first table's), `N/N` passed when
/// forced, `FAIL ...` naming what failed, `on host` when left to the host's integration tests, or
/// `-` when the kernel does not offer it.
fn tier_cell(o: &Outcome, side: Side, tier: &str) -> String {
    if o.default_tiers.iter().any(|(s, t)| *s == side && t == tier) {
        return "default".into();
    }
    if o.on_host.iter().any(|(s, t)| *s == side && t == tier) {
        return "on host".into();
    }
    let Some(run) = o.forced.iter().find(|r| r.side == side && r.tier == tier) else {
        return "-".into();
    };
    let passed = run.passed.iter().filter(|p| p.1).count();
    if passed == run.passed.len() {
        format!("{passed}/{}", run.passed.len())
    } else {
        format!("FAIL {passed}/{}", run.passed.len())
    }
}

#[cfg(test)]
mod tests {
    use super::{Side, failure_sections, parse, tier_cell};

    #[test]
    fn a_tier_left_to_the_host_says_so_and_a_forced_one_counts() {
        let log = "KM-KERNEL 6.12\nKM-ON-HOST tcp tracepoint\nKM-TIER tcp kprobe\n\
                   test refused_by_rst_when_nothing_listens ... ok\nKM-DONE\n";
        let o = parse(log, "x.log".into());
        assert_eq!(tier_cell(&o, Side::Tcp, "tracepoint"), "on host");
        assert!(tier_cell(&o, Side::Tcp, "kprobe").starts_with("FAIL 1/"));
        assert_eq!(tier_cell(&o, Side::Dns, "kprobe"), "-");
    }

    #[test]
    fn failure_sections_keep_each_failed_tests_output_and_nothing_else() {
        let log = "KM-KERNEL 6.1\nrunning 2 tests\ntest a ... ok\ntest b ... FAILED\n\nfailures:\n\n\
                   ---- b stdout ----\nthread 'b' panicked at x.rs:1:1:\nlate\n\nfailures:\n    b\n\n\
                   test result: FAILED. 1 passed; 1 failed\n";
        assert_eq!(
            failure_sections(log),
            "---- b stdout ----\nthread 'b' panicked at x.rs:1:1:\nlate\n\n"
        );
    }

    #[test]
    fn each_forced_tier_keeps_its_own_results_and_a_failure_names_its_tier() {
        let log = "KM-KERNEL 6.12\n\
                   KM-TIER default\ntest refused_by_rst_when_nothing_listens ... ok\n\
                   KM-TIER tcp kprobe\ntest refused_by_rst_when_nothing_listens ... FAILED\n\
                   ---- refused_by_rst_when_nothing_listens stdout ----\nboom\n\nfailures:\n\
                   KM-DONE\n";
        let o = parse(log, "x.log".into());
        assert!(o.passed[0], "the default run passed");
        assert_eq!(o.forced.len(), 1);
        assert_eq!(o.forced[0].tier, "kprobe");
        assert!(
            !o.forced[0].passed.iter().any(|p| p.1),
            "nothing passed with kprobe forced"
        );
        assert!(!o.all_passed());
        assert!(
            o.failures.starts_with("[tiers: tcp kprobe]"),
            "{}",
            o.failures
        );
    }
}
