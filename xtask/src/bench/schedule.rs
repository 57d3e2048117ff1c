//! The order of alternated rounds and the paired figures they give.
//!
//! Arm 0 is the reference (no tracer). Each cycle runs every arm once; each cycle starts with the
//! next arm, so each runs first once in n cycles, and every other cycle goes backwards: a plain
//! rotation keeps the order around the circle, so each arm would nearly always run right after the
//! same one, and whatever a round leaves behind (a tracer's teardown) would always land on the
//! same arm. A figure of an arm is compared with arm 0 of its own cycle, so slow drifts of a
//! shared machine cancel out.
use super::report::{median, median_uncertainty};

/// `(cycle, arm)` in the order they run.
pub fn interleaved(arms: usize, cycles: usize) -> Vec<(usize, usize)> {
    (0..cycles)
        .flat_map(|c| {
            (0..arms).map(move |i| {
                let at = if c % 2 == 0 {
                    c + i
                } else {
                    c + arms * arms - i
                };
                (c, at % arms.max(1))
            })
        })
        .collect()
}

/// One measured value of one round.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub cycle: usize,
    pub arm: usize,
    pub value: f64,
}

fn value_of(rounds: &[Measured], arm: usize, cycle: usize) -> Option<f64> {
    rounds
        .iter()
        .find(|m| m.arm == arm && m.cycle == cycle)
        .map(|m| m.value)
}

fn cycles(rounds: &[Measured]) -> impl Iterator<Item = usize> {
    0..rounds.iter().map(|m| m.cycle + 1).max().unwrap_or(0)
}

/// The values of `arm`, one per cycle.
pub fn values(rounds: &[Measured], arm: usize) -> Vec<f64> {
    cycles(rounds)
        .filter_map(|c| value_of(rounds, arm, c))
        .collect()
}

/// `arm` minus `base` in each cycle.
pub fn differences(rounds: &[Measured], arm: usize, base: usize) -> Vec<f64> {
    cycles(rounds)
        .filter_map(|c| Some(value_of(rounds, arm, c)? - value_of(rounds, base, c)?))
        .collect()
}

/// `arm` over `base` in each cycle.
pub fn ratios(rounds: &[Measured], arm: usize, base: usize) -> Vec<f64> {
    cycles(rounds)
        .filter_map(|c| Some(value_of(rounds, arm, c)? / value_of(rounds, base, c)?))
        .collect()
}

/// A median with its standard error (NaN with fewer than 3 values) and its range.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub median: f64,
    pub error: f64,
    pub least: f64,
    pub most: f64,
}

impl Spread {
    /// The median's error from the standard deviation (the storm's figures, as they always were).
    pub fn of(values: &[f64]) -> Spread {
        Spread {
            error: median_uncertainty(values),
            ..Spread::robust(values)
        }
    }

    /// The median's error from the median absolute deviation (1.4826 MAD estimates the standard
    /// deviation of normally spread values): one round disturbed by the rest of a shared machine
    /// does not inflate it.
    pub fn robust(values: &[f64]) -> Spread {
        let (least, most) = values
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                (lo.min(*v), hi.max(*v))
            });
        let m = median(values);
        let deviations: Vec<f64> = values.iter().map(|v| (v - m).abs()).collect();
        let error = if values.len() < 3 {
            f64::NAN
        } else {
            1.2533 * 1.4826 * median(&deviations) / (values.len() as f64).sqrt()
        };
        Spread {
            median: m,
            error,
            least,
            most,
        }
    }

    /// The error for a bound: zero when too few values to say (the median alone decides).
    pub fn error_or_zero(&self) -> f64 {
        if self.error.is_nan() { 0.0 } else { self.error }
    }

    /// "± e" with `digits` decimals, "± ?" when there are too few values.
    pub fn error_text(&self, scale: f64, digits: usize) -> String {
        if self.error.is_nan() {
            "± ?".into()
        } else {
            format!("± {:.digits$}", self.error * scale)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_arm_runs_once_per_cycle_and_each_starts_a_cycle() {
        let order = interleaved(3, 6);
        assert_eq!(order.len(), 18);
        for c in 0..6 {
            let mut arms: Vec<usize> = order
                .iter()
                .filter(|(cycle, _)| *cycle == c)
                .map(|(_, a)| *a)
                .collect();
            arms.sort_unstable();
            assert_eq!(arms, [0, 1, 2]);
        }
        let firsts: Vec<usize> = (0..3).map(|c| order[c * 3].1).collect();
        assert_eq!(firsts.len(), 3);
        assert!(
            firsts.contains(&0) && firsts.contains(&1) && firsts.contains(&2),
            "{firsts:?}"
        );
    }

    #[test]
    fn one_wild_round_inflates_the_sd_error_but_not_the_robust_one() {
        let calm = [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0, 1.02];
        let mut wild = calm;
        wild[0] = 9.0;
        let (sd, robust) = (Spread::of(&wild), Spread::robust(&wild));
        assert!(sd.error > 1.0, "{sd:?}");
        assert!(robust.error < 0.1, "{robust:?}");
        assert!((Spread::robust(&calm).error - Spread::of(&calm).error).abs() < 0.05);
    }

    #[test]
    fn differences_pair_rounds_of_the_same_cycle_only() {
        let rounds = [
            Measured {
                cycle: 0,
                arm: 0,
                value: 10.0,
            },
            Measured {
                cycle: 0,
                arm: 1,
                value: 13.0,
            },
            Measured {
                cycle: 1,
                arm: 1,
                value: 30.0,
            },
            Measured {
                cycle: 2,
                arm: 0,
                value: 20.0,
            },
            Measured {
                cycle: 2,
                arm: 1,
                value: 21.0,
            },
        ];
        assert_eq!(differences(&rounds, 1, 0), [3.0, 1.0]);
        assert_eq!(ratios(&rounds, 1, 0), [1.3, 1.05]);
        assert_eq!(values(&rounds, 1), [13.0, 30.0, 21.0]);
    }
}
