//! `tcp:tcp_destroy_sock`: the socket is freed. An attempt still open left `SYN_SENT` without an
//! error report: the application closed it while waiting (`abandoned`, the common end of a
//! black-holed connect, since clients give up long before the kernel does). Also guarantees no
//! entry outlives its socket.
//!
//! A `tp_btf` program: argument 0 is `struct sock *sk`.
//!
//! An attempt the `connect()` hook opened that never reached `SYN_SENT` failed before any SYN left
//! (no route, a local policy, an invalid address): reported now, with no errno (that stayed in the
//! syscall's return value; userspace checks the route). On the `fentry` and `kprobe` TCP tiers,
//! which see no state change, an IPv4 one that got its destination set but no local port found
//! none free (`tcp_v4_connect()` sets the destination only once it has a route): `EADDRNOTAVAIL`,
//! as the state tracepoint tells it at `SYN_SENT -> CLOSE`.
//!
//! An application's close of a socket in `SYN_SENT` (abandoned) keeps what an ICMP error that came
//! while it held the socket said, for userspace to tell a refusal from a black hole.
//!
//! An attempt whose leaving `SYN_SENT` was not seen (the kernel skipped that run, see
//! `inet_sock_set_state.rs`) is settled here from the socket itself: answered if it took in a
//! SYN-ACK, else lost.
use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};
use tracer_common::{AF_INET, EVENT_CONNECT_END, FLAG_NO_SYN, counter};

use crate::{
    answered::{Seen, answered},
    attempts::{self, Sock},
    maps::{count, emit, hooks_only, now_ns, state_changes_seen},
    replies, sock_fields, syn_count,
};

const EADDRNOTAVAIL: i32 = 99;

#[btf_tracepoint(function = "tcp_destroy_sock")]
pub fn tcp_destroy_sock(ctx: BtfTracePointContext) -> i32 {
    if hooks_only() {
        return 0;
    }
    let sk = Sock(ctx.arg(0));
    replies::destroyed(sk.0);
    let Some(attempt) = attempts::attempt_of(sk) else {
        return 0;
    };
    let now = now_ns();
    if attempt.syn_count == 0 {
        // Never reached SYN_SENT: the clock starts and stops here.
        attempt.start_ns = now;
        attempt.closed_ns = now;
        let addrs = sock_fields::addrs(sk.0);
        if addrs.family == AF_INET && addrs.daddr != [0; 16] && addrs.sport == 0 {
            attempt.daddr = addrs.daddr;
            emit(EVENT_CONNECT_END, EADDRNOTAVAIL, attempt);
            attempts::end(sk);
            return 0;
        }
        attempt.flags |= FLAG_NO_SYN;
    } else if attempt.closed_ns == 0 {
        // Left SYN_SENT unseen: an answer whose run was skipped, or (without the state
        // tracepoint, which sees every close) the application's close.
        if sock_fields::rcv_nxt(sk.0) != 0 {
            answered(sk, attempt, Seen::AtDestroy);
            return 0;
        }
        if state_changes_seen() {
            // Closed by the peer or the timer with neither the close nor the error report seen:
            // how it failed is unknown, so it is counted lost rather than guessed.
            count(counter::END_UNSEEN);
            attempts::end(sk);
            return 0;
        }
        attempt.closed_ns = now;
        syn_count::catch_up(sk, attempt);
        // An error whose report run was skipped, still on the socket.
        let error = sock_fields::error(sk.0);
        if error != 0 {
            emit(EVENT_CONNECT_END, error, attempt);
            attempts::end(sk);
            return 0;
        }
    }
    if attempt.soft_error == 0 {
        attempt.soft_error = match sock_fields::soft_error(sk.0) {
            0 => sock_fields::queued_icmp_error(sk.0),
            soft => soft,
        };
    }
    syn_count::catch_up(sk, attempt);
    emit(EVENT_CONNECT_END, 0, attempt);
    attempts::end(sk);
    0
}
