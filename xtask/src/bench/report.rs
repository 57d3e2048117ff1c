//! Reading what the tracer wrote (JSON lines), medians, and the final table.
use std::{fmt::Write as _, path::Path};

use anyhow::Context as _;
use serde_json::Value;

/// What a tracer run's JSON-lines output says about one round.
#[derive(Debug, Default, Clone)]
pub struct TracerOutput {
    /// From the final `stats` record.
    pub attempts: u64,
    pub events: u64,
    pub dropped_total: u64,
    pub dropped: String,
    pub attempts_map_full: u64,
    pub ring_buffer_full: u64,
    /// Answers whose state change the kernel skipped, recovered when the socket was destroyed.
    pub answered_seen_late: u64,
    /// Final `connect` records with a failure verdict from the client namespace to `dst`.
    pub failures_reported: u64,
}

/// Parses the tracer's output file. `netns`/`dst` pick the bed's connects out of the node-wide output.
pub fn read_tracer_output(path: &Path, netns: &str, dst: &str) -> anyhow::Result<TracerOutput> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = TracerOutput::default();
    let mut saw_final = false;
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let is_final = v.get("final").and_then(Value::as_bool).unwrap_or(false);
        match v.get("kind").and_then(Value::as_str) {
            Some("connect")
                if is_final
                    && s("netns") == netns
                    && s("dst") == dst
                    && !matches!(s("verdict").as_str(), "slow" | "established") =>
            {
                out.failures_reported += 1;
            }
            Some("stats") if is_final => {
                saw_final = true;
                let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
                out.attempts = n(&v, "attempts");
                out.events = n(&v, "events");
                out.answered_seen_late = n(&v, "answered_seen_late");
                let d = v.get("dropped").cloned().unwrap_or_default();
                out.attempts_map_full = n(&d, "attempts_map_full");
                out.ring_buffer_full = n(&d, "ring_buffer_full");
                out.dropped_total = d
                    .as_object()
                    .map_or(0, |o| o.values().filter_map(Value::as_u64).sum());
                // Only the causes that happened: "skipped_program_runs=12, ring_buffer_full=3".
                out.dropped = d
                    .as_object()
                    .map(|o| {
                        o.iter()
                            .filter(|(_, v)| v.as_u64().unwrap_or(0) > 0)
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default();
            }
            _ => {}
        }
    }
    anyhow::ensure!(
        saw_final,
        "{} has no final stats record (did the tracer stop cleanly?)",
        path.display()
    );
    Ok(out)
}

/// The standard error of the median of `values`: 1.25 standard deviations over the square root of
/// their number (its large-sample value for normally spread data). NaN for fewer than 3 values.
pub fn median_uncertainty(values: &[f64]) -> f64 {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < 3 {
        return f64::NAN;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let variance = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    1.2533 * variance.sqrt() / n.sqrt()
}

pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        f64::midpoint(v[mid - 1], v[mid])
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Miss,
    /// A figure without a target (context for the others).
    Info,
}

pub struct Row {
    pub figure: String,
    pub value: String,
    pub target: String,
    pub verdict: Verdict,
}

#[derive(Default)]
pub struct Table {
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
}

impl Table {
    pub fn info(&mut self, figure: impl Into<String>, value: impl Into<String>) {
        self.rows.push(Row {
            figure: figure.into(),
            value: value.into(),
            target: "-".into(),
            verdict: Verdict::Info,
        });
    }

    pub fn check(
        &mut self,
        figure: impl Into<String>,
        value: impl Into<String>,
        target: impl Into<String>,
        pass: bool,
    ) {
        let verdict = if pass { Verdict::Pass } else { Verdict::Miss };
        self.rows.push(Row {
            figure: figure.into(),
            value: value.into(),
            target: target.into(),
            verdict,
        });
    }

    pub fn render(&self) -> String {
        let w0 = self
            .rows
            .iter()
            .map(|r| r.figure.len())
            .max()
            .unwrap_or(0)
            .max(6);
        let w1 = self
            .rows
            .iter()
            .map(|r| r.value.len())
            .max()
            .unwrap_or(0)
            .max(5);
        let w2 = self
            .rows
            .iter()
            .map(|r| r.target.len())
            .max()
            .unwrap_or(0)
            .max(6);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<w0$}  {:>w1$}  {:<w2$}  result",
            "figure", "value", "target"
        );
        let _ = writeln!(s, "{}", "-".repeat(w0 + w1 + w2 + 12));
        for r in &self.rows {
            let verdict = match r.verdict {
                Verdict::Pass => "PASS",
                Verdict::Miss => "MISS",
                Verdict::Info => "",
            };
            let _ = writeln!(
                s,
                "{:<w0$}  {:>w1$}  {:<w2$}  {verdict}",
                r.figure, r.value, r.target
            );
        }
        for n in &self.notes {
            let _ = writeln!(s, "note: {n}");
        }
        s
    }

    pub fn misses(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.verdict == Verdict::Miss)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_uncertainty_shrinks_with_more_values_and_needs_three() {
        let few = median_uncertainty(&[1.0, 2.0, 3.0]);
        assert!((few - 1.2533 / 3f64.sqrt()).abs() < 1e-9, "{few}");
        let many = median_uncertainty(&[1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        assert!(many < few, "{many} vs {few}");
        assert!(median_uncertainty(&[1.0, 2.0]).is_nan());
    }

    #[test]
    fn median_of_odd_and_even() {
        assert!((median(&[3.0, 1.0, 2.0]) - 2.0).abs() < 1e-12);
        assert!((median(&[4.0, 1.0, 2.0, 3.0]) - 2.5).abs() < 1e-12);
        assert!(median(&[]).is_nan());
    }
}
