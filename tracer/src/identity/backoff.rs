//! How long the API client waits before asking again after a failure: client-go's reflector
//! backoff (`wait.NewExponentialBackoffManager(800ms, 30s, 2m, 2.0, 1.0)` in
//! k8s.io/client-go `tools/cache/reflector.go`): 0.8 s doubling to 30 s, each wait stretched by a
//! random factor in [1, 2) so that the nodes of a cluster do not come back in step. It goes back
//! to the first step only after a watch delivered events for a while (`reflector.rs`), never on a
//! request that merely succeeded: an API that answers 200 and then breaks the stream is backed off
//! like one that refuses.
use std::time::Duration;

pub const FIRST: Duration = Duration::from_millis(800);
pub const CAP: Duration = Duration::from_secs(30);

pub struct Backoff {
    /// Failures since the last reset.
    step: u32,
    rng: u64,
}

impl Backoff {
    /// `seed` spreads the jitter of different kinds and processes apart.
    pub fn new(seed: u64) -> Backoff {
        Backoff {
            step: 0,
            // Scrambled so that near seeds start far apart; xorshift64 has no zero state.
            rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        }
    }

    /// Seeded from the clock and the process id.
    pub fn from_entropy(salt: u64) -> Backoff {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Backoff::new(nanos ^ (u64::from(std::process::id()) << 32) ^ salt)
    }

    /// The step before jitter: `FIRST * 2^step`, at most `CAP`.
    pub fn base(&self) -> Duration {
        FIRST
            .checked_mul(1_u32 << self.step.min(16))
            .map_or(CAP, |d| d.min(CAP))
    }

    /// The next wait, and one step further.
    pub fn next_wait(&mut self) -> Duration {
        let base = self.base();
        self.step = self.step.saturating_add(1);
        base.mul_f64(1.0 + self.unit())
    }

    pub fn reset(&mut self) {
        self.step = 0;
    }

    /// Failures since the last reset.
    pub fn failures(&self) -> u32 {
        self.step
    }

    /// Uniform in [0, 1).
    #[expect(
        clippy::cast_precision_loss,
        reason = "53 random bits make an exact f64 in [0, 1)"
    )]
    fn unit(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1_u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_800ms_to_30s_with_jitter_and_resets() {
        let mut b = Backoff::new(42);
        let mut bases = Vec::new();
        for _ in 0..10 {
            let base = b.base();
            let wait = b.next_wait();
            assert!(wait >= base && wait < base * 2, "{wait:?} from {base:?}");
            bases.push(base.as_millis());
        }
        assert_eq!(
            bases,
            [
                800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000, 30_000, 30_000
            ]
        );
        assert_eq!(b.failures(), 10);
        b.reset();
        assert_eq!(b.base(), FIRST);
    }

    #[test]
    fn jitter_spreads_waits() {
        let waits: Vec<Duration> = (1..=20)
            .map(|seed| Backoff::new(seed).next_wait())
            .collect();
        let distinct: std::collections::BTreeSet<_> = waits.iter().collect();
        assert!(distinct.len() > 15, "{waits:?}");
    }
}
