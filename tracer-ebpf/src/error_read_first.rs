//! The errno a connect ended with when the application read it first. The kernel sets `sk_err` and
//! closes a connecting socket (a RST, an ICMP error, the retransmit timer giving up); the
//! application, woken by that close on another CPU, can read the error (`SO_ERROR`, or `connect()`
//! returning it: both clear `sk_err`) before a hook looks. The state tracepoint can see the close
//! after that read, and since 6.10 so can the error report: `tcp_done_with_error()` closes the
//! socket first and reports after.
use tracer_common::{Attempt, FLAG_RST_RECEIVED};

use crate::{attempts::Sock, sock_fields};

const ECONNREFUSED: i32 = 111;
const ETIMEDOUT: i32 = 110;

/// Keeps on the attempt an ICMP error the socket still holds (in `sk_err_soft`, or queued until the
/// socket is freed), which explains the close and is reported when the socket ends: then `None`.
/// Otherwise the error that was read: a RST received says refused; else the retransmit timer gave
/// up.
pub fn error_read_first(sk: Sock, attempt: &mut Attempt) -> Option<i32> {
    if attempt.soft_error == 0 {
        attempt.soft_error = match sock_fields::soft_error(sk.0) {
            0 => sock_fields::queued_icmp_error(sk.0),
            soft => soft,
        };
    }
    if attempt.soft_error != 0 {
        return None;
    }
    Some(if attempt.flags & FLAG_RST_RECEIVED != 0 {
        ECONNREFUSED
    } else {
        ETIMEDOUT
    })
}
