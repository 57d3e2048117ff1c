//! The verdicts: of a connect attempt (given in stage 3, `stages/flows.rs`), of a DNS query, of a
//! server's lost replies, and of cluster state; and the sentence a person reads for each (written
//! in stage 5, `stages/enrich/`).
//!
//! Each variant documents what the kernel saw and why that is the verdict; `explain` is the one plain
//! sentence shown in text mode, JSON and the TUI (the sentence that ended the incidents we build for).
use std::{fmt, net::SocketAddr, str::FromStr, time::Duration};

use serde::{Deserialize, Serialize};

/// Why a refused connect was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusedBy {
    /// A RST came back: the host is up, nothing listens on the port.
    Rst,
    /// ECONNREFUSED with no RST: an ICMP port-unreachable, typically a REJECT rule on the path.
    Icmp,
}

/// What kind of unreachable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unreachable {
    Host,
    Network,
}

/// A connect's verdict with its cause. In records it is two fields: `verdict` (its kind) and
/// `cause`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "VerdictFields", try_from = "VerdictFields")]
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

    /// The verdict without its cause, as in JSON `verdict`.
    pub fn kind(self) -> VerdictKind {
        match self {
            Verdict::Established => VerdictKind::Established,
            Verdict::Slow => VerdictKind::Slow,
            Verdict::Unanswered => VerdictKind::Unanswered,
            Verdict::Refused { .. } => VerdictKind::Refused,
            Verdict::Unreachable { .. } => VerdictKind::Unreachable,
            Verdict::TimedOut => VerdictKind::TimedOut,
            Verdict::Abandoned => VerdictKind::Abandoned,
            Verdict::Failed { .. } => VerdictKind::Failed,
        }
    }

    /// Short name, as in JSON `verdict`.
    pub fn name(self) -> &'static str {
        self.kind().name()
    }

    /// The cause qualifier, as in JSON `cause`.
    pub fn cause(self) -> Option<Cause> {
        match self {
            Verdict::Refused { by: RefusedBy::Rst } => Some(Cause::Rst),
            Verdict::Refused {
                by: RefusedBy::Icmp,
            } => Some(Cause::Icmp),
            Verdict::Unreachable {
                kind: Unreachable::Host,
            } => Some(Cause::Host),
            Verdict::Unreachable {
                kind: Unreachable::Network,
            } => Some(Cause::Network),
            Verdict::Failed { errno: 0 } => Some(Cause::NoSyn),
            Verdict::Failed { errno } => Some(Cause::Errno(Errno(errno))),
            _ => None,
        }
    }

    /// How bad it is, for ranking: black holes first, then refusals, then slowness.
    pub fn severity(self) -> u8 {
        self.kind().severity()
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
                format!("The connect to {dst} failed with {}.", Errno(errno))
            }
        }
    }
}

impl Verdict {
    /// `[REFUSED rst]`, `[ABANDONED]`: how text output and timelines lead a line.
    pub fn tag(self) -> String {
        let name = self.name().to_uppercase();
        match self.cause() {
            Some(cause) => format!("[{name} {cause}]"),
            None => format!("[{name}]"),
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

/// The `verdict` and `cause` fields of a record, as they are written.
#[derive(Serialize, Deserialize)]
struct VerdictFields {
    verdict: VerdictKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cause: Option<Cause>,
}

impl From<Verdict> for VerdictFields {
    fn from(v: Verdict) -> VerdictFields {
        VerdictFields {
            verdict: v.kind(),
            cause: v.cause(),
        }
    }
}

impl TryFrom<VerdictFields> for Verdict {
    type Error = String;

    fn try_from(f: VerdictFields) -> Result<Verdict, String> {
        Ok(match (f.verdict, f.cause) {
            (VerdictKind::Established, None) => Verdict::Established,
            (VerdictKind::Slow, None) => Verdict::Slow,
            (VerdictKind::Unanswered, None) => Verdict::Unanswered,
            (VerdictKind::TimedOut, None) => Verdict::TimedOut,
            (VerdictKind::Abandoned, None) => Verdict::Abandoned,
            (VerdictKind::Refused, Some(Cause::Rst)) => Verdict::Refused { by: RefusedBy::Rst },
            (VerdictKind::Refused, Some(Cause::Icmp)) => Verdict::Refused {
                by: RefusedBy::Icmp,
            },
            (VerdictKind::Unreachable, Some(Cause::Host)) => Verdict::Unreachable {
                kind: Unreachable::Host,
            },
            (VerdictKind::Unreachable, Some(Cause::Network)) => Verdict::Unreachable {
                kind: Unreachable::Network,
            },
            (VerdictKind::Failed, Some(Cause::NoSyn)) => Verdict::Failed { errno: 0 },
            (VerdictKind::Failed, Some(Cause::Errno(Errno(errno)))) => Verdict::Failed { errno },
            (kind, None) => return Err(format!("verdict `{kind}` needs a cause")),
            (kind, Some(cause)) => {
                return Err(format!("`{cause}` is not a cause of verdict `{kind}`"));
            }
        })
    }
}

/// A verdict without its cause, as in JSON `verdict`. Declared in name order, so maps keyed by it
/// list the names sorted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    Abandoned,
    Established,
    Failed,
    Refused,
    Slow,
    TimedOut,
    Unanswered,
    Unreachable,
}

impl VerdictKind {
    /// Worst first: the order the TUI counts them in and cycles through them.
    pub const BY_SEVERITY: [VerdictKind; 8] = [
        VerdictKind::Unanswered,
        VerdictKind::Abandoned,
        VerdictKind::TimedOut,
        VerdictKind::Unreachable,
        VerdictKind::Refused,
        VerdictKind::Failed,
        VerdictKind::Slow,
        VerdictKind::Established,
    ];

    pub fn name(self) -> &'static str {
        match self {
            VerdictKind::Abandoned => "abandoned",
            VerdictKind::Established => "established",
            VerdictKind::Failed => "failed",
            VerdictKind::Refused => "refused",
            VerdictKind::Slow => "slow",
            VerdictKind::TimedOut => "timed_out",
            VerdictKind::Unanswered => "unanswered",
            VerdictKind::Unreachable => "unreachable",
        }
    }

    /// How bad it is, for ranking: black holes, then unreachable, refused, failed, slow.
    pub fn severity(self) -> u8 {
        match self {
            VerdictKind::Unanswered | VerdictKind::TimedOut | VerdictKind::Abandoned => 5,
            VerdictKind::Unreachable => 4,
            VerdictKind::Refused => 3,
            VerdictKind::Failed => 2,
            VerdictKind::Slow => 1,
            VerdictKind::Established => 0,
        }
    }

    /// The connect did not get through (answered late counts as through).
    pub fn is_failing(self) -> bool {
        !matches!(self, VerdictKind::Established | VerdictKind::Slow)
    }

    /// The SYN went nowhere: unanswered, abandoned, timed out.
    pub fn is_black_hole(self) -> bool {
        self.severity() == 5
    }
}

impl fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for VerdictKind {
    type Err = String;
    /// A name as JSON `verdict` and the metrics' `verdict` label write it.
    fn from_str(s: &str) -> Result<VerdictKind, String> {
        VerdictKind::BY_SEVERITY
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| format!("unknown verdict '{s}'"))
    }
}

/// A verdict from cluster state, as in JSON and the metrics' `cluster_verdict`: what the kernel
/// saw, read against what the cluster says the address is (`identity/verdicts.rs` gives them,
/// each with its sentence). Declared in the order of their names as strings, so maps keyed by it
/// list them as they listed the names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ClusterVerdictKind {
    /// DNS queries nobody answers, sent to an address no current pod has.
    #[serde(rename = "DNS server is no live pod")]
    DnsServerIsNoLivePod,
    /// Nothing answered at an address no current pod has, that an EndpointSlice lists or a
    /// Service's datapath sent the connect to.
    #[serde(rename = "backend is no live pod")]
    BackendIsNoLivePod,
    /// A RST from a Ready endpoint of a Service.
    #[serde(rename = "endpoint does not listen")]
    EndpointDoesNotListen,
    /// A server's replies go to the address of a node that is not Ready ...
    #[serde(rename = "peer node is NotReady")]
    PeerNodeIsNotReady,
    /// ... or was deleted.
    #[serde(rename = "peer node is gone")]
    PeerNodeIsGone,
}

impl ClusterVerdictKind {
    pub const ALL: [ClusterVerdictKind; 5] = [
        ClusterVerdictKind::DnsServerIsNoLivePod,
        ClusterVerdictKind::BackendIsNoLivePod,
        ClusterVerdictKind::EndpointDoesNotListen,
        ClusterVerdictKind::PeerNodeIsNotReady,
        ClusterVerdictKind::PeerNodeIsGone,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ClusterVerdictKind::BackendIsNoLivePod => "backend is no live pod",
            ClusterVerdictKind::EndpointDoesNotListen => "endpoint does not listen",
            ClusterVerdictKind::DnsServerIsNoLivePod => "DNS server is no live pod",
            ClusterVerdictKind::PeerNodeIsGone => "peer node is gone",
            ClusterVerdictKind::PeerNodeIsNotReady => "peer node is NotReady",
        }
    }

    /// As said after the backend it is about: `10.244.1.30:8080 (no live pod)`.
    pub fn after_backend(self) -> &'static str {
        match self {
            ClusterVerdictKind::BackendIsNoLivePod => "no live pod",
            other => other.name(),
        }
    }

    /// The state of the peer node a `peer node is ...` verdict names: `gone`, `NotReady`.
    pub fn peer_node_state(self) -> Option<&'static str> {
        match self {
            ClusterVerdictKind::PeerNodeIsGone => Some("gone"),
            ClusterVerdictKind::PeerNodeIsNotReady => Some("NotReady"),
            _ => None,
        }
    }
}

impl FromStr for ClusterVerdictKind {
    type Err = String;
    fn from_str(s: &str) -> Result<ClusterVerdictKind, String> {
        ClusterVerdictKind::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| format!("unknown cluster verdict '{s}'"))
    }
}

impl fmt::Display for ClusterVerdictKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What qualifies a verdict, as in JSON `cause`: `rst`, `icmp`, `host`, `network`, `no_syn`, or
/// the errno of a failed connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cause {
    Rst,
    Icmp,
    Host,
    Network,
    NoSyn,
    Errno(Errno),
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Rst => f.write_str("rst"),
            Cause::Icmp => f.write_str("icmp"),
            Cause::Host => f.write_str("host"),
            Cause::Network => f.write_str("network"),
            Cause::NoSyn => f.write_str("no_syn"),
            Cause::Errno(e) => e.fmt(f),
        }
    }
}

impl FromStr for Cause {
    type Err = String;

    fn from_str(s: &str) -> Result<Cause, String> {
        Ok(match s {
            "rst" => Cause::Rst,
            "icmp" => Cause::Icmp,
            "host" => Cause::Host,
            "network" => Cause::Network,
            "no_syn" => Cause::NoSyn,
            other => Cause::Errno(other.parse()?),
        })
    }
}

/// An errno as records name it: `ECONNREFUSED`, or `errno 113` for one without a name here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Errno(pub i32);

const ERRNO_NAMES: [(i32, &str); 8] = [
    (libc::ECONNREFUSED, "ECONNREFUSED"),
    (libc::ECONNRESET, "ECONNRESET"),
    (libc::EHOSTUNREACH, "EHOSTUNREACH"),
    (libc::ENETUNREACH, "ENETUNREACH"),
    (libc::ETIMEDOUT, "ETIMEDOUT"),
    (libc::EACCES, "EACCES"),
    (libc::EPERM, "EPERM"),
    (libc::EADDRNOTAVAIL, "EADDRNOTAVAIL"),
];

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match ERRNO_NAMES.iter().find(|(n, _)| *n == self.0) {
            Some((_, name)) => f.write_str(name),
            None => write!(f, "errno {}", self.0),
        }
    }
}

impl FromStr for Errno {
    type Err = String;

    fn from_str(s: &str) -> Result<Errno, String> {
        if let Some((n, _)) = ERRNO_NAMES.iter().find(|(_, name)| *name == s) {
            return Ok(Errno(*n));
        }
        s.strip_prefix("errno ")
            .and_then(|n| n.parse().ok())
            .map(Errno)
            .ok_or_else(|| format!("`{s}` is not a cause or an errno name"))
    }
}

crate::serde_text::serde_as_text!(Cause, Errno);

/// The verdict of a DNS query that needs attention, as in JSON `verdict`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum DnsVerdict {
    /// Answered with NOERROR, but slower than `--dns-slow`.
    Slow,
    /// Answered with another RCODE.
    Error,
    /// No reply within `--dns-timeout`.
    Unanswered,
    /// The socket was told `ECONNREFUSED` (an ICMP port-unreachable).
    Refused,
}

impl DnsVerdict {
    pub fn name(self) -> &'static str {
        match self {
            DnsVerdict::Slow => "slow",
            DnsVerdict::Error => "error",
            DnsVerdict::Unanswered => "unanswered",
            DnsVerdict::Refused => "refused",
        }
    }
}

/// What became of a socket whose data was retransmitted, as in JSON `reply_lost.outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyOutcome {
    /// Still retransmitting, nothing acknowledged yet (live).
    Unacknowledged,
    /// The kernel gave up retransmitting (`ETIMEDOUT`).
    TimedOut,
    /// Freed with data unacknowledged, without a time-out (the application closed, or a RST).
    Closed,
    /// Acknowledged in the end: the replies got through late.
    Recovered,
    /// A handshake whose SYN-ACKs never got the final ACK; the server's kernel gave up.
    NoFinalAck,
}

impl ReplyOutcome {
    pub fn name(self) -> &'static str {
        match self {
            ReplyOutcome::Unacknowledged => "unacknowledged",
            ReplyOutcome::TimedOut => "timed_out",
            ReplyOutcome::Closed => "closed",
            ReplyOutcome::Recovered => "recovered",
            ReplyOutcome::NoFinalAck => "no_final_ack",
        }
    }

    /// The outcome of a socket's end: from the bytes still unacknowledged and its error.
    pub fn of_end(unacked: u32, error: i32) -> ReplyOutcome {
        if unacked == 0 {
            ReplyOutcome::Recovered
        } else if error == libc::ETIMEDOUT {
            ReplyOutcome::TimedOut
        } else {
            ReplyOutcome::Closed
        }
    }

    /// One sentence: what happened to the replies, and where to look. `peer` is the address the
    /// replies went to; `translated`, the real client when this node's conntrack translated it.
    #[expect(
        clippy::too_many_arguments,
        reason = "the facts of one sentence, each a plain value"
    )]
    pub fn explain(
        self,
        local: SocketAddr,
        peer: SocketAddr,
        handshake: bool,
        retransmits: u32,
        unacked: u32,
        lost_for: Duration,
        translated: Option<SocketAddr>,
    ) -> String {
        let t = format_duration(lost_for);
        let path = match translated {
            Some(client) => format!(
                " {peer} is the address that translated client {client}'s connection (SNAT on the \
                 way in), so the replies go back through it: if that node is gone or its NAT state \
                 was lost, they go nowhere."
            ),
            None => format!(
                " The request arrived and the server answered: the return path to {peer} is broken \
                 (a node or NAT state on the way back that is gone, or a drop)."
            ),
        };
        if handshake {
            let end = if self == ReplyOutcome::NoFinalAck {
                "; the server's kernel gave up on the handshake"
            } else {
                ""
            };
            return format!(
                "{local} sent its SYN-ACK to {peer} {} times over {t} and the final ACK never came{end}: \
                 the client's SYN arrived, the answer did not get back.{path}",
                retransmits + 1
            );
        }
        match self {
            ReplyOutcome::Unacknowledged => format!(
                "{local} has retransmitted its replies to {peer} {retransmits} times over {t} and \
                 none was acknowledged ({unacked} bytes).{path}"
            ),
            ReplyOutcome::TimedOut => format!(
                "The replies from {local} to {peer} were never acknowledged: {retransmits} \
                 retransmits over {t}, then the kernel gave up with {unacked} bytes unacknowledged \
                 (the client saw a time-out, the server logged a success).{path}"
            ),
            ReplyOutcome::Closed => format!(
                "{local} closed its connection to {peer} with {unacked} bytes of replies never \
                 acknowledged after {retransmits} retransmits over {t}.{path}"
            ),
            ReplyOutcome::Recovered => format!(
                "The replies from {local} to {peer} were acknowledged in the end, after \
                 {retransmits} retransmits over {t}: a lossy return path, not a broken one."
            ),
            ReplyOutcome::NoFinalAck => format!(
                "The handshake from {peer} to {local} never completed after {retransmits} \
                 SYN-ACK retransmits over {t}.{path}"
            ),
        }
    }
}

/// `1.2s`, `350ms`: readable at a glance.
pub fn format_duration(d: Duration) -> String {
    // Integer arithmetic: `{:.1}` on an f64 takes the exact (slow) float formatter, once per record.
    // u64, not the u128 of `as_millis`: its formatting is several times slower.
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
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
    fn cluster_verdicts_read_back_from_the_names_json_and_metrics_write() {
        for v in ClusterVerdictKind::ALL {
            assert_eq!(v.name().parse(), Ok(v));
            let json = serde_json::to_string(&v).expect("serialize");
            assert_eq!(json, format!("\"{}\"", v.name()));
        }
        assert!("backend is".parse::<ClusterVerdictKind>().is_err());
        let mut sorted = ClusterVerdictKind::ALL;
        sorted.sort_by_key(|v| v.name());
        assert_eq!(sorted, ClusterVerdictKind::ALL, "declared in name order");
    }

    #[test]
    fn verdict_kinds_read_back_from_their_names() {
        for v in VerdictKind::BY_SEVERITY {
            assert_eq!(v.name().parse(), Ok(v));
        }
        assert!("black holes".parse::<VerdictKind>().is_err());
    }

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
