//! Stage 3: kernel events -> flows. One flow per connect attempt that needed attention, keyed by
//! `(socket address, start time)` since the kernel reuses socket addresses.
//!
//! A flow is open from its first SYN retransmit (live `unanswered`) until its end event, which gives
//! it its final verdict. Flows whose end never arrives (tracer started late, events lost) are expired
//! after `OPEN_FLOW_TTL` and counted, so nothing disappears silently.
use std::time::Duration;

use crate::{
    stages::decode::{Attempt, TcpEvent},
    verdict::Verdict,
};
use hashbrown::HashMap;

/// Longer than the kernel's own SYN give-up time (about 2 minutes with `tcp_syn_retries=6`).
pub const OPEN_FLOW_TTL: Duration = Duration::from_mins(5);

/// One connect attempt, as of its latest event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    pub attempt: Attempt,
    pub verdict: Verdict,
    /// True once the attempt ended; false for live `unanswered` updates.
    pub is_final: bool,
    /// errno reported on close, 0 if none.
    pub error: i32,
    /// Kernel time of this update.
    pub at_ns: u64,
}

impl Flow {
    /// Time spent in `SYN_SENT` up to this update.
    pub fn syn_sent_for(&self) -> Duration {
        let end = if self.attempt.closed_ns != 0 {
            self.attempt.closed_ns
        } else {
            self.at_ns
        };
        Duration::from_nanos(end.saturating_sub(self.attempt.start_ns))
    }
}

#[derive(Default)]
pub struct FlowTable {
    open: HashMap<(u64, u64), u64>,
    /// Open flows dropped by `expire` without an end event.
    pub expired: u64,
}

impl FlowTable {
    /// Applies one kernel event and returns the flow update to report.
    pub fn apply(&mut self, event: TcpEvent) -> Flow {
        match event {
            TcpEvent::SynRetransmit { at_ns, attempt } => {
                self.open.insert((attempt.sock, attempt.start_ns), at_ns);
                Flow {
                    attempt,
                    verdict: Verdict::Unanswered,
                    is_final: false,
                    error: 0,
                    at_ns,
                }
            }
            TcpEvent::ConnectEnd {
                at_ns,
                error,
                attempt,
            } => {
                self.open.remove(&(attempt.sock, attempt.start_ns));
                // An ICMP error held in sk_err_soft is what the application was told (SO_ERROR)
                // when it closed the socket: that, not "abandoned", is the end of the attempt.
                let error = if error == 0 {
                    attempt.soft_error
                } else {
                    error
                };
                let verdict = Verdict::of_end(
                    attempt.flags.answered(),
                    error,
                    attempt.flags.rst_received(),
                    attempt.syn_count,
                );
                Flow {
                    attempt,
                    verdict,
                    is_final: true,
                    error,
                    at_ns,
                }
            }
        }
    }

    /// Number of attempts currently open (unanswered, no end seen yet).
    pub fn open_count(&self) -> usize {
        self.open.len()
    }

    /// Forgets open flows not updated since `now_ns - OPEN_FLOW_TTL`; counts them in `expired`.
    pub fn expire(&mut self, now_ns: u64) {
        let ttl = OPEN_FLOW_TTL.as_nanos() as u64;
        let before = self.open.len();
        self.open
            .retain(|_, last| now_ns.saturating_sub(*last) < ttl);
        self.expired += (before - self.open.len()) as u64;
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::FLAG_RST_RECEIVED;

    use super::*;
    use crate::{stages::decode::AttemptFlags, verdict::RefusedBy};

    fn attempt(sock: u64, syns: u16) -> Attempt {
        let addr = |s: &str| s.parse().expect("test address");
        Attempt {
            sock,
            start_ns: 1_000,
            closed_ns: 0,
            netns_inode: 0,
            cgroup_id: 0,
            cookie: 0,
            pid: 0,
            tid: 0,
            comm: String::new(),
            src: addr("10.0.0.1:40000"),
            dst: addr("10.0.0.2:80"),
            dialed: None,
            syn_count: syns,
            soft_error: 0,
            flags: AttemptFlags::default(),
        }
    }

    #[test]
    fn retransmit_opens_a_live_unanswered_flow_and_the_end_closes_it() {
        let mut table = FlowTable::default();
        let live = table.apply(TcpEvent::SynRetransmit {
            at_ns: 2_000,
            attempt: attempt(7, 2),
        });
        assert_eq!((live.verdict, live.is_final), (Verdict::Unanswered, false));
        assert_eq!(table.open_count(), 1);
        let mut a = attempt(7, 3);
        a.closed_ns = 3_000_001_000;
        let end = table.apply(TcpEvent::ConnectEnd {
            at_ns: 3_000_001_000,
            error: 0,
            attempt: a,
        });
        assert_eq!((end.verdict, end.is_final), (Verdict::Abandoned, true));
        assert_eq!(end.syn_sent_for(), Duration::from_secs(3));
        assert_eq!(table.open_count(), 0);
    }

    #[test]
    fn rst_flag_makes_refused_by_rst() {
        let mut table = FlowTable::default();
        let mut a = attempt(1, 1);
        a.flags = AttemptFlags::new(FLAG_RST_RECEIVED);
        let end = table.apply(TcpEvent::ConnectEnd {
            at_ns: 5,
            error: libc::ECONNREFUSED,
            attempt: a,
        });
        assert_eq!(end.verdict, Verdict::Refused { by: RefusedBy::Rst });
    }

    #[test]
    fn a_soft_icmp_error_then_close_is_refused_by_icmp_not_abandoned() {
        let mut table = FlowTable::default();
        let mut a = attempt(1, 1);
        a.soft_error = libc::ECONNREFUSED;
        let end = table.apply(TcpEvent::ConnectEnd {
            at_ns: 5,
            error: 0,
            attempt: a,
        });
        assert_eq!(
            end.verdict,
            Verdict::Refused {
                by: RefusedBy::Icmp
            }
        );
        assert_eq!(end.error, libc::ECONNREFUSED);
    }

    #[test]
    fn open_flows_without_an_end_expire_and_are_counted() {
        let mut table = FlowTable::default();
        table.apply(TcpEvent::SynRetransmit {
            at_ns: 0,
            attempt: attempt(1, 2),
        });
        table.expire(OPEN_FLOW_TTL.as_nanos() as u64 - 1);
        assert_eq!(table.open_count(), 1);
        table.expire(OPEN_FLOW_TTL.as_nanos() as u64);
        assert_eq!((table.open_count(), table.expired), (0, 1));
    }
}
