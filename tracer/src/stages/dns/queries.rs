//! One UDP DNS query as the kernel kept it: its addresses, its question, and what became of it.
//! Pure functions, so the expiry rules are unit-tested without a kernel.
use std::{borrow::Cow, net::SocketAddr};

use tracer_common::{PendingDns, SockError};

use super::question::{self, Question, QuestionError};
use crate::verdict::DnsVerdict;

/// What became of a query that needs attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered, but slower than the threshold or with an error rcode.
    Reply {
        rcode: u8,
        latency_ns: u64,
        from: SocketAddr,
    },
    /// No reply within the timeout.
    Unanswered { waited_ns: u64 },
    /// The socket was told `ECONNREFUSED` (an ICMP port-unreachable) after the query left.
    Refused { waited_ns: u64, errno: i32 },
}

impl Outcome {
    pub fn verdict(&self) -> DnsVerdict {
        match self {
            Outcome::Reply { rcode: 0, .. } => DnsVerdict::Slow,
            Outcome::Reply { .. } => DnsVerdict::Error,
            Outcome::Unanswered { .. } => DnsVerdict::Unanswered,
            Outcome::Refused { .. } => DnsVerdict::Refused,
        }
    }
}

pub use crate::stages::decode::Query;

impl Query {
    /// The first question, from the bytes the kernel copied after the header.
    pub fn question(&self) -> Result<Question, QuestionError> {
        question::read(&self.question)
    }
}

/// What to report about a pending query at `now_ns`, if anything yet: `refused` as soon as its
/// socket was refused after the query left, `unanswered` once it waited `timeout_ns`.
pub fn expiry(
    pending: &PendingDns,
    now_ns: u64,
    timeout_ns: u64,
    sock_error: Option<SockError>,
) -> Option<Outcome> {
    let waited_ns = now_ns.saturating_sub(pending.sent_ns);
    if let Some(e) = sock_error.filter(|e| e.at_ns >= pending.sent_ns) {
        return Some(Outcome::Refused {
            waited_ns,
            errno: e.errno,
        });
    }
    (waited_ns >= timeout_ns).then_some(Outcome::Unanswered { waited_ns })
}

/// Mnemonic of a reply's 4-bit RCODE (the kernel reads it from the header), `RCODE<n>` for the
/// others.
#[must_use]
pub fn rcode_name(rcode: u8) -> Cow<'static, str> {
    let s = match rcode {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        n => return Cow::Owned(format!("RCODE{n}")),
    };
    Cow::Borrowed(s)
}

/// One sentence for the record. `server` as it is shown (with its Service when one was seen);
/// `port` the port the query went to.
pub fn explanation(outcome: &Outcome, what: &str, server: &str, port: u16) -> String {
    match outcome {
        Outcome::Reply {
            rcode: 0,
            latency_ns,
            ..
        } => format!(
            "{server} answered {what} only after {} ms.",
            latency_ns / 1_000_000
        ),
        Outcome::Reply {
            rcode, latency_ns, ..
        } => format!(
            "{server} answered {what} with {} after {} ms.",
            rcode_name(*rcode),
            latency_ns / 1_000_000
        ),
        Outcome::Unanswered { waited_ns } => format!(
            "No reply from {server} to {what} after {} ms: the server is down, unreachable, or drops \
             the query.",
            waited_ns / 1_000_000
        ),
        Outcome::Refused { .. } => format!(
            "{server} refused {what}: ICMP port unreachable, nothing listens on port {port} there."
        ),
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::{AF_INET, DnsKey};

    use super::*;

    /// A query for `web.test A` sent at `sent_ns`, as the kernel copies it.
    fn pending(sent_ns: u64) -> PendingDns {
        let mut pending = PendingDns {
            sent_ns,
            family: AF_INET,
            client_addr: [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            server_addr: [10, 0, 0, 53, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            client_port: 40000,
            server_port: 53,
            flags: 0x0100,
            ..PendingDns::default()
        };
        let question = b"\x03web\x04test\x00\x00\x01\x00\x01\x00\x00\x29\x04\xd0";
        pending.question[..question.len()].copy_from_slice(question);
        pending.question_len = question.len() as u16;
        pending
    }

    fn query(sent_ns: u64) -> Query {
        let key = DnsKey {
            id: 7,
            ..DnsKey::default()
        };
        crate::stages::decode::query(key, &pending(sent_ns))
    }

    #[test]
    fn parses_the_question_from_the_copied_bytes() {
        let q = query(0).question().expect("question");
        assert_eq!((q.name.as_str(), q.qtype), ("web.test", 1));
    }

    #[test]
    fn malformed_or_cut_questions_are_errors_not_panics() {
        let mut p = pending(0);
        let query = |p: &PendingDns| crate::stages::decode::query(DnsKey::default(), p);
        for len in 0..14 {
            p.question_len = len;
            assert!(query(&p).question().is_err(), "{len} bytes must not parse");
        }
        p.question_len = 200; // more than the array: clamped
        assert!(query(&p).question().is_ok());
        p.question[0] = 0xc0; // a compression pointer: nothing before it to point to
        p.question[1] = 0x40;
        assert!(query(&p).question().is_err());
    }

    #[test]
    fn reply_codes_are_named_and_the_others_numbered() {
        let rcodes = [
            (0, "NOERROR"),
            (1, "FORMERR"),
            (2, "SERVFAIL"),
            (3, "NXDOMAIN"),
            (4, "NOTIMP"),
            (5, "REFUSED"),
            (9, "RCODE9"),
        ];
        for (r, n) in rcodes {
            assert_eq!(rcode_name(r), n);
        }
        assert!(matches!(rcode_name(3), Cow::Borrowed(_)));
    }

    #[test]
    fn a_pending_query_is_unanswered_only_after_the_timeout() {
        let q = pending(1_000);
        assert_eq!(expiry(&q, 1_000 + 1_999, 2_000, None), None);
        assert_eq!(
            expiry(&q, 1_000 + 2_000, 2_000, None),
            Some(Outcome::Unanswered { waited_ns: 2_000 })
        );
    }

    #[test]
    fn a_refused_socket_ends_its_queries_at_once_but_not_older_errors() {
        let q = pending(1_000);
        let refused = SockError {
            at_ns: 1_500,
            errno: 111,
            _pad: 0,
        };
        assert_eq!(
            expiry(&q, 1_600, 2_000, Some(refused)),
            Some(Outcome::Refused {
                waited_ns: 600,
                errno: 111
            })
        );
        let before = SockError {
            at_ns: 900,
            ..refused
        };
        assert_eq!(expiry(&q, 1_600, 2_000, Some(before)), None);
        assert_eq!(
            expiry(&q, 3_000, 2_000, Some(before)),
            Some(Outcome::Unanswered { waited_ns: 2_000 })
        );
    }
}
