//! Runs the real tracer binary and collects its JSON lines, so tests assert on what a user sees.
use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        mpsc::{Receiver, RecvTimeoutError, channel},
    },
    time::{Duration, Instant},
};

use serde_json::Value;

/// Path of the tracer binary under test.
pub fn tracer_bin() -> String {
    std::env::var("TRACER_BIN")
        .expect("TRACER_BIN is not set: run the integration tests with `cargo xtask test`")
}

/// A running tracer in JSON mode.
pub struct Tracer {
    child: Child,
    lines: Receiver<Value>,
    stderr: Arc<Mutex<String>>,
    /// Every record received so far, in order.
    pub seen: Vec<Value>,
}

impl Tracer {
    /// Starts `tracer trace --format json ARGS` and waits until it says its programs are attached.
    pub fn start(args: &[&str]) -> Tracer {
        Tracer::start_wrapped(&[], args)
    }

    /// Like `start`, run by `wrapper` (`nsenter --net=...`: the tracer's own sockets, its
    /// `--metrics` endpoint, in another network namespace).
    pub fn start_wrapped(wrapper: &[&str], args: &[&str]) -> Tracer {
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(tracer_bin());
                c
            }
            None => Command::new(tracer_bin()),
        };
        let mut child = cmd
            .args(["trace", "--format", "json", "--stats-interval", "1"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the tracer binary");
        let stdout = child.stdout.take().expect("tracer stdout");
        let stderr_pipe = child.stderr.take().expect("tracer stderr");
        let (line_tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("tracer printed a line that is not JSON ({e}): {line}")
                });
                if line_tx.send(value).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (ready_tx, ready) = channel();
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
                if line.contains("attached") {
                    let _ = ready_tx.send(());
                }
                sink.lock().expect("stderr lock").push_str(&(line + "\n"));
            }
        });
        let mut tracer = Tracer {
            child,
            lines,
            stderr,
            seen: Vec::new(),
        };
        if ready.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = tracer.child.kill();
            panic!(
                "tracer did not attach within 30 s; stderr:\n{}",
                tracer.stderr()
            );
        }
        tracer.assert_forced_tiers();
        tracer
    }

    /// The kernel matrix forces hook tiers through the environment (`TRACER_TCP_HOOKS`,
    /// `TRACER_DNS_HOOKS`): a test run that way must be traced on that tier, never on another the
    /// tracer fell back to, or the scenario would pass for the wrong tier.
    fn assert_forced_tiers(&self) {
        let stderr = self.stderr();
        for (var, side) in [("TRACER_TCP_HOOKS", "tcp"), ("TRACER_DNS_HOOKS", "dns")] {
            let Ok(tier) = std::env::var(var) else {
                continue;
            };
            if tier == "auto" {
                continue;
            }
            let hooks = stderr
                .lines()
                .find(|l| l.starts_with("tracer: hooks: tcp="))
                .unwrap_or_else(|| panic!("no hooks line on stderr:\n{stderr}"));
            let on_tier = hooks
                .split_whitespace()
                .any(|word| word == format!("{side}={tier}"));
            assert!(on_tier, "{var}={tier} but the tracer says: {hooks}");
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr lock").clone()
    }

    /// The first record (already seen or arriving within `timeout`) that matches; panics naming
    /// `what` and listing what did arrive otherwise.
    pub fn expect(
        &mut self,
        what: &str,
        timeout: Duration,
        matches: impl Fn(&Value) -> bool,
    ) -> Value {
        if let Some(found) = self.seen.iter().find(|v| matches(v)) {
            return found.clone();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(value) => {
                    self.seen.push(value.clone());
                    if matches(&value) {
                        return value;
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => panic!(
                    "expected {what} within {timeout:?}; got:\n{}\nstderr:\n{}",
                    self.seen
                        .iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    self.stderr()
                ),
            }
        }
    }

    /// Collects whatever arrives in the next `period`.
    pub fn collect_for(&mut self, period: Duration) {
        let deadline = Instant::now() + period;
        while let Ok(v) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.seen.push(v);
        }
    }

    pub fn connect_records(&self) -> Vec<&Value> {
        self.seen
            .iter()
            .filter(|v| v["kind"] == "connect")
            .collect()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the tracer's userspace (SIGSTOP): its kernel programs go on and the ring buffer holds
    /// their records until `resume`. For what the kernel side alone must catch.
    pub fn pause(&self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGSTOP) };
    }

    pub fn resume(&self) {
        // SAFETY: as above.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGCONT) };
    }

    /// SIGTERM, then everything it printed until it exited; returns its exit status success.
    pub fn stop(self) -> (bool, Vec<Value>, String) {
        self.stop_with(libc::SIGTERM)
    }

    /// Like `stop`, with another signal (SIGINT is Ctrl-C).
    pub fn stop_with(mut self, signal: libc::c_int) -> (bool, Vec<Value>, String) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        let status = self.child.wait().expect("wait for tracer");
        while let Ok(v) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.seen.push(v);
        }
        let stderr = self.stderr();
        (status.success(), std::mem::take(&mut self.seen), stderr)
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the tracer to completion with `args` and an environment, returning (exit code, stderr).
pub fn run_to_exit(args: &[&str], env: &[(&str, &str)], wrapper: &[&str]) -> (Option<i32>, String) {
    let bin = tracer_bin();
    let mut cmd = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(&bin);
            c
        }
        None => Command::new(&bin),
    };
    let out = cmd
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run the tracer");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The records a tracer run printed (JSON lines on stdout) after it exited successfully, and its
/// stderr; panics with that stderr if it failed or printed a line that is not JSON.
pub fn records_of_run(out: &std::process::Output) -> (Vec<Value>, String) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{}: {stderr}", out.status);
    let records = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("a line that is not JSON ({e}): {l}\n{stderr}"))
        })
        .collect();
    (records, stderr)
}
