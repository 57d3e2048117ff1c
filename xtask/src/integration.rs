//! The integration tests (`tests/`), one process per test, each with a time limit: a test that
//! hangs is killed with everything it started (its process group: the tracer, dnsmasq, nginx) and
//! named, and the tests after it still run. libtest has no time limit of its own, and one hung test
//! would otherwise hold CI until its own timeout, saying nothing.
use std::{
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use crate::shell::cargo;

/// Far above the slowest test (the demo's, 18 s here; all 74 take 204 s), so only a hang or a
/// machine many times slower reaches it.
pub const TIME_LIMIT: Duration = Duration::from_mins(5);

/// One test: the binary that holds it and its name as libtest lists it.
pub struct Test {
    /// The test binary's target name (`dns`, `image`, ...).
    pub binary: String,
    exe: PathBuf,
    name: String,
}

/// What became of one test.
enum Outcome {
    Passed,
    Failed(String),
    TimedOut,
}

/// Builds the tests and lists each whose name contains `filter` (all without one).
pub fn build(filter: Option<&str>) -> anyhow::Result<Vec<Test>> {
    let mut tests = Vec::new();
    for (binary, exe) in binaries()? {
        for name in list(&exe)? {
            if filter.is_none_or(|f| name.contains(f)) {
                tests.push(Test {
                    binary: binary.clone(),
                    exe: exe.clone(),
                    name,
                });
            }
        }
    }
    if tests.is_empty() {
        bail!("no integration test matches {filter:?}");
    }
    Ok(tests)
}

/// Runs `tests` one at a time with `env` set and `limit` on each. Fails naming every test that
/// failed or ran out of time.
pub fn run(
    root: &Path,
    tests: &[Test],
    limit: Duration,
    env: &[(&str, &Path)],
) -> anyhow::Result<()> {
    if tests.is_empty() {
        return Ok(());
    }
    eprintln!(
        "xtask: {} integration tests, one at a time, {} s each at most",
        tests.len(),
        limit.as_secs()
    );
    let started = Instant::now();
    let mut failed = Vec::new();
    for test in tests {
        let (outcome, took) = run_one(root, test, limit, env)?;
        let label = format!("{}::{}", test.binary, test.name);
        match outcome {
            Outcome::Passed => eprintln!("test {label} ... ok ({:.1} s)", took.as_secs_f64()),
            Outcome::Failed(output) => {
                eprintln!("{output}");
                eprintln!("test {label} ... FAILED ({:.1} s)", took.as_secs_f64());
                failed.push(label);
            }
            Outcome::TimedOut => {
                eprintln!(
                    "test {label} ... TIMED OUT: still running after its limit of {} s; killed \
                     with everything it started",
                    limit.as_secs()
                );
                failed.push(format!("{label} (timed out)"));
            }
        }
    }
    eprintln!(
        "xtask: {} of {} integration tests passed in {:.0} s",
        tests.len() - failed.len(),
        tests.len(),
        started.elapsed().as_secs_f64()
    );
    if !failed.is_empty() {
        bail!("integration tests failed:\n  {}", failed.join("\n  "));
    }
    Ok(())
}

/// Runs one test in a process group of its own; its output is kept and shown when it fails.
fn run_one(
    root: &Path,
    test: &Test,
    limit: Duration,
    env: &[(&str, &Path)],
) -> anyhow::Result<(Outcome, Duration)> {
    let log_path = std::env::temp_dir().join(format!(
        "xtask-integration-{}-{}.log",
        std::process::id(),
        test.binary
    ));
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    let mut cmd = Command::new(&test.exe);
    cmd.args([
        "--exact",
        &test.name,
        "--include-ignored",
        "--test-threads=1",
    ])
    // cargo runs a package's tests from its folder.
    .current_dir(root.join("tests"))
    .stdin(Stdio::null())
    .stdout(log.try_clone()?)
    .stderr(log)
    .process_group(0);
    for (key, value) in env {
        cmd.env(key, value);
    }
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", test.exe.display()))?;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() > limit {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = started.elapsed();
    if status.is_none() {
        // The group's id is the test's pid, alive until the wait below: everything the test
        // started goes with it.
        let group = libc::pid_t::try_from(child.id()).context("pid out of range")?;
        // SAFETY: kill(2) on the process group this function created; no memory is involved.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        child.wait()?;
    }
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    let _ = std::fs::remove_file(&log_path);
    let outcome = match status {
        None => Outcome::TimedOut,
        Some(s) if s.success() => Outcome::Passed,
        Some(s) => Outcome::Failed(format!("{output}\n(exit: {s})")),
    };
    Ok((outcome, took))
}

/// The tests of one binary, as `--list` names them (ignored ones too: they run, nothing is
/// skipped in silence).
fn list(exe: &Path) -> anyhow::Result<Vec<String>> {
    let out = Command::new(exe)
        .args(["--list", "--format", "terse"])
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("listing the tests of {}", exe.display()))?;
    if !out.status.success() {
        bail!("listing the tests of {} failed", exe.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect())
}

/// Every test binary of the `tests` package (its library's unit tests and each integration test
/// file), by target name, built now.
fn binaries() -> anyhow::Result<Vec<(String, PathBuf)>> {
    let out = cargo()
        .args([
            "test",
            "--package",
            "tests",
            "--no-run",
            "--message-format=json",
        ])
        .stderr(Stdio::inherit())
        .output()
        .context("building the integration tests")?;
    if !out.status.success() {
        bail!("building the integration tests failed");
    }
    let mut binaries: Vec<(String, PathBuf)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|m| {
            let name = m["target"]["name"].as_str()?;
            let exe = m["executable"].as_str()?;
            Some((name.to_string(), PathBuf::from(exe)))
        })
        .collect();
    binaries.sort();
    Ok(binaries)
}
