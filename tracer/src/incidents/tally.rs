//! Flows by verdict class per Service and backend: the Services view and `summary`'s table.
use std::net::SocketAddr;

use crate::verdict::VerdictKind;

/// Flows by verdict class, for the Services view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub ok: u64,
    pub slow: u64,
    /// unanswered (live), abandoned, timed out: the SYN went nowhere.
    pub black_hole: u64,
    pub refused: u64,
    pub unreachable: u64,
    pub failed: u64,
}

impl Tally {
    pub fn add(&mut self, verdict: VerdictKind, n: u64) {
        let slot = match verdict {
            VerdictKind::Established => &mut self.ok,
            VerdictKind::Slow => &mut self.slow,
            VerdictKind::Unanswered | VerdictKind::Abandoned | VerdictKind::TimedOut => {
                &mut self.black_hole
            }
            VerdictKind::Refused => &mut self.refused,
            VerdictKind::Unreachable => &mut self.unreachable,
            VerdictKind::Failed => &mut self.failed,
        };
        *slot += n;
    }

    #[must_use]
    pub fn plus(self, o: &Tally) -> Tally {
        Tally {
            ok: self.ok + o.ok,
            slow: self.slow + o.slow,
            black_hole: self.black_hole + o.black_hole,
            refused: self.refused + o.refused,
            unreachable: self.unreachable + o.unreachable,
            failed: self.failed + o.failed,
        }
    }

    pub fn failing(&self) -> u64 {
        self.black_hole + self.refused + self.unreachable + self.failed
    }

    pub fn all(&self) -> u64 {
        self.ok + self.slow + self.failing()
    }

    /// 0.0..=1.0; 0 when nothing was seen.
    pub fn failing_share(&self) -> f64 {
        match self.all() {
            0 => 0.0,
            #[expect(clippy::cast_precision_loss, reason = "a share, shown as a percentage")]
            all => self.failing() as f64 / all as f64,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServiceSummary {
    pub service: SocketAddr,
    /// Every flow to the Service, those with no known backend included.
    pub total: Tally,
    /// The backends flows were seen to reach (never the Service's own address).
    pub backends: Vec<(SocketAddr, Tally)>,
}
