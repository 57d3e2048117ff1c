//! Stage 5: the verdict of a connect attempt, and the sentence a person reads for it.
//!
//! Each variant documents what the kernel saw and why that is the verdict; `explain` is the one plain
//! sentence shown in text mode, JSON and the TUI (the sentence that ended the incidents we build for).
use std::{fmt, time::Duration};

use serde::Serialize;

/// Why a refused connect was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusedBy {
    /// A RST came back: the host is up, nothing listens on the port.
    Rst,
    /// ECONNREFUSED with no RST: an ICMP port-unreachable, typically a REJECT rule on the path.
    Icmp,
}

/// What kind of unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unreachable {
    Host,
    Network,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// Answered on the first SYN. Counted in the kernel, reported per destination.
    Established,
    /// Answered, but only after at least one SYN retransmit.
    Slow,
    /// Still open: at least one SYN retransmit and no answer yet (live).
    Unanswered,
    Refused {
        by: RefusedBy,
    },
    Unreachable {
        kind: Unreachable,
    },
    /// The kernel gave up retransmitting the SYN (`ETIMEDOUT`).
    TimedOut,
    /// The application closed the socket while it was still in `SYN_SENT`.
    Abandoned,
    /// Closed with another errno (e.g. `EACCES` from a local policy).
    Failed {
        errno: i32,
    },
}

impl Verdict {
    /// The verdict of an attempt that ended: from the errno reported on close, whether a RST was seen,
    /// and whether it was answered at all.
    pub fn of_end(answered: bool, error: i32, rst_received: bool, syn_count: u16) -> Verdict {
        if answered {
            return if syn_count > 1 {
                Verdict::Slow
            } else {
                Verdict::Established
            };
        }
        match error {
            0 if rst_received => Verdict::Refused { by: RefusedBy::Rst },
            // No SYN ever left and nothing explains why (a route exists): errno 0 says "unknown".
            0 if syn_count == 0 => Verdict::Failed { errno: 0 },
            0 => Verdict::Abandoned,
            libc::ECONNREFUSED | libc::ECONNRESET if rst_received => {
                Verdict::Refused { by: RefusedBy::Rst }
            }
            libc::ECONNREFUSED => Verdict::Refused {
                by: RefusedBy::Icmp,
            },
            libc::EHOSTUNREACH | libc::EHOSTDOWN => Verdict::Unreachable {
                kind: Unreachable::Host,
            },
            libc::ENETUNREACH | libc::ENETDOWN => Verdict::Unreachable {
                kind: Unreachable::Network,
            },
            libc::ETIMEDOUT => Verdict::TimedOut,
            errno => Verdict::Failed { errno },
        }
    }

    /// Short name, as in JSON `verdict`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Established => "established",
            Verdict::Slow => "slow",
            Verdict::Unanswered => "unanswered",
            Verdict::Refused { .. } => "refused",
            Verdict::Unreachable { .. } => "unreachable",
            Verdict::TimedOut => "timed_out",
            Verdict::Abandoned => "abandoned",
            Verdict::Failed { .. } => "failed",
        }
    }

    /// The cause qualifier, as in JSON `cause` (`rst`, `icmp`, `host`, `network`, an errno name).
    pub fn cause(self) -> Option<String> {
        match self {
            Verdict::Refused { by: RefusedBy::Rst } => Some("rst".into()),
            Verdict::Refused {
                by: RefusedBy::Icmp,
            } => Some("icmp".into()),
            Verdict::Unreachable {
                kind: Unreachable::Host,
            } => Some("host".into()),
            Verdict::Unreachable {
                kind: Unreachable::Network,
            } => Some("network".into()),
            Verdict::Failed { errno: 0 } => Some("no_syn".into()),
            Verdict::Failed { errno } => Some(errno_name(errno)),
            _ => None,
        }
    }

    /// How bad it is, for ranking: black holes first, then refusals, then slowness.
    pub fn severity(self) -> u8 {
        match self {
            Verdict::Unanswered | Verdict::TimedOut | Verdict::Abandoned => 5,
            Verdict::Unreachable { .. } => 4,
            Verdict::Refused { .. } => 3,
            Verdict::Failed { .. } => 2,
            Verdict::Slow => 1,
            Verdict::Established => 0,
        }
    }

    /// One plain sentence: what happened and what it usually means.
    pub fn explain(self, dst: &str, syns: u16, waited: Duration) -> String {
        let t = format_duration(waited);
        match self {
            Verdict::Established => format!("{dst} answered the first SYN in {t}."),
            Verdict::Slow => format!(
                "{dst} answered only after {syns} SYNs ({t}): the first SYN was lost on the way \
                 (a drop on the path, or a listener whose accept queue was full)."
            ),
            Verdict::Unanswered => format!(
                "{syns} SYNs to {dst} and no answer for {t}: nothing at that address answers and \
                 nothing refuses. A deleted pod still in the datapath, or a silent drop."
            ),
            Verdict::Abandoned => format!(
                "The application gave up after {t} and {syns} SYNs with no answer from {dst}: the SYN \
                 left and nothing came back (a black hole, not a refusal)."
            ),
            Verdict::TimedOut => {
                format!("The kernel gave up after {syns} SYNs over {t}: {dst} never answered.")
            }
            Verdict::Refused { by: RefusedBy::Rst } => format!(
                "{dst} answered with a RST: the host is up but nothing listens on that port."
            ),
            Verdict::Refused {
                by: RefusedBy::Icmp,
            } => format!(
                "Refused by an ICMP port-unreachable, no RST: a REJECT rule on the path turned the \
                 SYN to {dst} away (kube-proxy rejects a Service with no endpoints this way)."
            ),
            Verdict::Unreachable {
                kind: Unreachable::Host,
            } => format!(
                "No host at {dst}: nothing answered ARP/neighbour discovery or an ICMP \
                 host-unreachable came back. The address is gone."
            ),
            Verdict::Unreachable {
                kind: Unreachable::Network,
            } => {
                format!("No route to the network of {dst}.")
            }
            Verdict::Failed {
                errno: libc::EADDRNOTAVAIL,
            } => format!(
                "No free local port to connect to {dst} (EADDRNOTAVAIL): ephemeral ports are exhausted, \
                 usually by many short connections to one backend (TIME_WAIT)."
            ),
            Verdict::Failed { errno: 0 } => format!(
                "connect() to {dst} failed before any SYN left, though a route to it exists: a \
                 local policy (a cgroup connect hook, an LSM) or the address itself was refused; the \
                 application got the errno."
            ),
            Verdict::Failed { errno } => {
                format!("The connect to {dst} failed with {}.", errno_name(errno))
            }
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cause() {
            Some(cause) => write!(f, "{} ({cause})", self.name()),
            None => f.write_str(self.name()),
        }
    }
}

pub fn errno_name(errno: i32) -> String {
    match errno {
        libc::ECONNREFUSED => "ECONNREFUSED".into(),
        libc::ECONNRESET => "ECONNRESET".into(),
        libc::EHOSTUNREACH => "EHOSTUNREACH".into(),
        libc::ENETUNREACH => "ENETUNREACH".into(),
        libc::ETIMEDOUT => "ETIMEDOUT".into(),
        libc::EACCES => "EACCES".into(),
        libc::EPERM => "EPERM".into(),
        libc::EADDRNOTAVAIL => "EADDRNOTAVAIL".into(),
        n => format!("errno {n}"),
    }
}

/// `1.2s`, `350ms`: readable at a glance.
pub fn format_duration(d: Duration) -> String {
    // Integer arithmetic: `{:.1}` on an f64 takes the exact (slow) float formatter, once per record.
    let ms = d.as_millis();
    if ms >= 1000 {
        format!("{}.{}s", ms / 1000, (ms % 1000) / 100)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rst_then_econnrefused_is_refused_by_rst() {
        assert_eq!(
            Verdict::of_end(false, libc::ECONNREFUSED, true, 1),
            Verdict::Refused { by: RefusedBy::Rst }
        );
    }

    #[test]
    fn econnrefused_without_rst_is_refused_by_icmp() {
        assert_eq!(
            Verdict::of_end(false, libc::ECONNREFUSED, false, 1),
            Verdict::Refused {
                by: RefusedBy::Icmp
            }
        );
    }

    #[test]
    fn close_without_error_is_abandoned() {
        assert_eq!(Verdict::of_end(false, 0, false, 3), Verdict::Abandoned);
        assert_eq!(
            Verdict::of_end(false, 0, false, 0),
            Verdict::Failed { errno: 0 },
            "no SYN left and no cause known"
        );
        assert_eq!(
            Verdict::of_end(false, libc::ENETUNREACH, false, 0),
            Verdict::Unreachable {
                kind: Unreachable::Network
            }
        );
    }

    #[test]
    fn answered_after_retransmit_is_slow() {
        assert_eq!(Verdict::of_end(true, 0, false, 2), Verdict::Slow);
        assert_eq!(Verdict::of_end(true, 0, false, 1), Verdict::Established);
    }

    #[test]
    fn errnos_map_to_verdicts() {
        assert_eq!(
            Verdict::of_end(false, libc::EHOSTUNREACH, false, 3),
            Verdict::Unreachable {
                kind: Unreachable::Host
            }
        );
        assert_eq!(
            Verdict::of_end(false, libc::ENETUNREACH, false, 1),
            Verdict::Unreachable {
                kind: Unreachable::Network
            }
        );
        assert_eq!(
            Verdict::of_end(false, libc::ETIMEDOUT, false, 7),
            Verdict::TimedOut
        );
        assert_eq!(
            Verdict::of_end(false, libc::EACCES, false, 1),
            Verdict::Failed { errno: 13 }
        );
    }

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(format_duration(Duration::from_millis(3001)), "3.0s");
        assert_eq!(format_duration(Duration::from_millis(1999)), "1.9s");
        assert_eq!(format_duration(Duration::from_millis(999)), "999ms");
    }

    #[test]
    fn black_holes_rank_above_refusals() {
        assert!(Verdict::Abandoned.severity() > Verdict::Refused { by: RefusedBy::Rst }.severity());
        assert!(
            Verdict::Refused {
                by: RefusedBy::Icmp
            }
            .severity()
                > Verdict::Slow.severity()
        );
    }
}
