//! `sock:inet_sk_error_report`: an error was reported on a socket. Two cases matter
//! for an attempt:
//! - `sk_err` set after the socket closed: the errno the attempt ends with (`ECONNREFUSED`,
//!   `EHOSTUNREACH`, `ENETUNREACH`, `ETIMEDOUT`). Since 6.10 `tcp_done_with_error()` closes first
//!   and reports after.
//! - `sk_err` 0 in `CLOSE`: the application read the error before this report
//!   (`error_read_first.rs`).
//! - `sk_err` still 0 while in `SYN_SENT`: `ip_icmp_error()` just queued an ICMP error on the socket's
//!   error queue. If the application holds the socket lock (an ICMP from a REJECT rule one veth away
//!   arrives inside its own `connect()`), that queued error is all there is: the kernel keeps it in
//!   `sk_err_soft` (written after this report), the application reads it through `SO_ERROR` (which
//!   clears it) and closes. So the errno is read from the newest queued skb and kept on the attempt.
//!
//! A socket that is not a connect attempt with `sk_err == ECONNREFUSED` is remembered by the ids the
//! DNS hooks may know it by in `DNS_SOCK_ERRORS`: a connected UDP DNS socket whose query came back as ICMP
//! port-unreachable (userspace reports the query `refused`). A socket whose replies were being
//! retransmitted keeps its error (`ETIMEDOUT`: the kernel gave up) for its end (`replies.rs`):
//! the application reading it clears `sk_err` before the socket is freed.
//!
//! A `tp_btf` program, not the formatted tracepoint: the formatted one carries neither the socket
//! pointer nor the queue. Argument 0 is `const struct sock *sk`; struct offsets come from the
//! running kernel's BTF (`SOCK_OFFSETS`, written by userspace before load).
use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};
use tracer_common::{EVENT_CONNECT_END, SockError};

use crate::{
    attempts::{self, Sock},
    dns,
    error_read_first::error_read_first,
    maps::{emit, hooks_only, now_ns},
    maps_dns::DNS_SOCK_ERRORS,
    replies, sock_fields, syn_count,
};

const ECONNREFUSED: i32 = 111;
const TCP_CLOSE: u8 = 7;
const ECONNRESET: i32 = 104;
const EPIPE: i32 = 32;

#[btf_tracepoint(function = "inet_sk_error_report")]
pub fn inet_sk_error_report(ctx: BtfTracePointContext) -> i32 {
    if hooks_only() {
        return 0;
    }
    let sk = Sock(ctx.arg(0));
    let sock = sk.0;
    // A reset of an established connection (every connection a client closes with RST): not a
    // connect attempt (in SYN_SENT a RST is ECONNREFUSED) and not DNS. Return before the table.
    let error = sock_fields::error(sock);
    if error == ECONNRESET || error == EPIPE {
        return 0;
    }
    let Some(attempt) = attempts::attempt_of(sk) else {
        remember_refused_socket(sock, error);
        replies::error_reported(sock, error);
        return 0;
    };
    if error != 0 {
        // A hard error on a connecting socket ends it (tcp_done_with_error). Do not require having
        // seen its CLOSE: the kernel skips a program run that would nest inside the same program on
        // that CPU, and the timer softirq that times a connect out can land in syn_sent_leave.
        if attempt.closed_ns == 0 {
            attempt.closed_ns = now_ns();
        }
        syn_count::catch_up(sk, attempt);
        emit(EVENT_CONNECT_END, error, attempt);
        attempts::end(sk);
    } else if sock_fields::state(sock) == TCP_CLOSE {
        // Closed already with no error left: since 6.10 the close comes before this report, and
        // the application, woken by it, read the error first (`error_read_first.rs`).
        if let Some(error) = error_read_first(sk, attempt) {
            if attempt.closed_ns == 0 {
                attempt.closed_ns = now_ns();
            }
            syn_count::catch_up(sk, attempt);
            emit(EVENT_CONNECT_END, error, attempt);
            attempts::end(sk);
        }
    } else {
        let queued = sock_fields::queued_icmp_error(sock);
        if queued != 0 {
            attempt.soft_error = queued;
        }
    }
    0
}

/// `ECONNREFUSED` on a socket that is not a connect attempt: kept by socket cookie for the DNS side.
fn remember_refused_socket(sock: u64, error: i32) {
    if error != ECONNREFUSED {
        return;
    }
    let value = SockError {
        at_ns: now_ns(),
        errno: error,
        _pad: 0,
    };
    // Under both ids the DNS hooks may know the socket by, whichever tier runs: its cookie (0
    // until someone asked for it; the DNS hooks that key by cookie do, for every query) and its
    // address.
    let cookie = sock_fields::cookie(sock);
    if cookie != 0 {
        let _ = DNS_SOCK_ERRORS.insert(&cookie, &value, 0);
    }
    let _ = DNS_SOCK_ERRORS.insert(&dns::socket_id(sock), &value, 0);
}
