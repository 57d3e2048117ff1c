//! `tcp:tcp_destroy_sock`: the socket is freed. An attempt still open left `SYN_SENT` without an
//! error report: the application closed it while waiting (`abandoned`, the common end of a
//! black-holed connect, since clients give up long before the kernel does). Also guarantees no
//! entry outlives its socket.
//!
//! A `tp_btf` program: argument 0 is `struct sock *sk`.
//!
//! An attempt the `connect()` hook opened that never reached `SYN_SENT` failed before any SYN left
//! (no route, a local policy, an invalid address): reported now, with no errno (that stayed in the
//! syscall's return value; userspace checks the route).
//!
//! An attempt whose leaving `SYN_SENT` was not seen (the kernel skipped that run, see
//! `inet_sock_set_state.rs`) is settled here from the socket itself: answered if it took in a
//! SYN-ACK, else lost.
use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};
use tracer_common::{EVENT_CONNECT_END, FLAG_NO_SYN, counter};

use crate::{
    attempts::{self, Sock},
    inet_sock_set_state::{Seen, answered},
    maps::{count, emit, hooks_only, now_ns},
    replies, sock_fields,
};

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
        attempt.flags |= FLAG_NO_SYN;
        attempt.start_ns = now;
        attempt.closed_ns = now;
    } else if attempt.closed_ns == 0 {
        // Left SYN_SENT unseen.
        if sock_fields::rcv_nxt(sk.0) != 0 {
            answered(sk, attempt, Seen::AtDestroy);
        } else {
            // Closed by the peer or the timer with neither the close nor the error report seen:
            // how it failed is unknown, so it is counted lost rather than guessed.
            count(counter::END_UNSEEN);
            attempts::end(sk);
        }
        return 0;
    }
    emit(EVENT_CONNECT_END, 0, attempt);
    attempts::end(sk);
    0
}
