//! Reading a kernel's run (the lines `vm.rs`'s script prints) and the two tables.
use std::{fmt::Write as _, path::PathBuf};

use super::SCENARIOS;

/// What one kernel did.
pub struct Outcome {
    /// `uname -r` in the guest (or the host).
    pub release: String,
    /// Per `SCENARIOS` entry: passed?
    pub passed: Vec<bool>,
    /// Capability name -> `full`, `degraded` or `off`, with the reason, as the tracer reported them.
    pub capabilities: Vec<(String, String)>,
    /// What went wrong outside the scenarios (a VM that hung, a script that failed).
    pub note: Option<String>,
    /// False for a kernel that could not be booted at all (not downloaded, not cached).
    pub tested: bool,
    /// The failed tests' own output (libtest's `---- name stdout ----` sections), so a CI log that
    /// shows only the tables still says why.
    pub failures: String,
    pub log: PathBuf,
}

impl Outcome {
    pub fn passed(&self) -> usize {
        self.passed.iter().filter(|p| **p).count()
    }

    /// A kernel that could not be tested, and why.
    pub fn untested(kernel: String, why: &str) -> Outcome {
        Outcome {
            release: kernel,
            passed: vec![false; SCENARIOS.len()],
            capabilities: Vec::new(),
            note: Some(format!("not tested: {why}")),
            tested: false,
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
    let passed = SCENARIOS
        .iter()
        .map(|s| {
            let ok = format!("test {} ... ok", s.test);
            text.lines().any(|l| l.trim_end() == ok)
        })
        .collect();
    let capabilities = text
        .lines()
        .filter_map(|l| l.strip_prefix("KM-CAPS "))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["kind"] == "stats" && v["kernel"].is_object())
        .map(|v| capabilities(&v["kernel"]))
        .unwrap_or_default();
    let fatal = text
        .lines()
        .find_map(|l| l.strip_prefix("KM-FATAL "))
        .map(str::to_string);
    let unfinished = (!text.contains("KM-DONE"))
        .then(|| "the scenarios did not run to their end (see the log)".to_string());
    Outcome {
        release,
        passed,
        capabilities,
        note: fatal.or(unfinished),
        tested: true,
        failures: failure_sections(text),
        log,
    }
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

/// kernel × scenario and kernel × capability, one column per kernel.
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
    header(&mut out, "scenario");
    for (i, scenario) in SCENARIOS.iter().enumerate() {
        let _ = write!(out, "{:width$}", scenario.label);
        for o in outcomes {
            let cell = if !o.tested {
                "untested"
            } else if o.passed.get(i).copied().unwrap_or(false) {
                "pass"
            } else {
                "FAIL"
            };
            let _ = write!(out, "{cell:column$}");
        }
        out.push('\n');
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
        let _ = write!(out, "{name:width$}");
        for o in outcomes {
            let state = o
                .capabilities
                .iter()
                .find(|(n, _)| n == name)
                .map_or("(not reported)", |(_, s)| s.as_str());
            let _ = write!(out, "{state:column$}");
        }
        out.push('\n');
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

#[cfg(test)]
mod tests {
    use super::failure_sections;

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
}
