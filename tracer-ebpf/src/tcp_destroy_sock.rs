//! `tcp:tcp_destroy_sock`: the socket is freed. An attempt still here left `SYN_SENT` without an error
//! report: the application closed it while waiting (`abandoned`, the common end of a black-holed
//! connect, since clients give up long before the kernel does). Also guarantees no entry outlives its
//! socket.
//!
//! A raw tracepoint (see `sock_fields.rs` for why): argument 0 is `struct sock *sk`.
//!
//! An attempt the `connect()` hook opened that never reached `SYN_SENT` failed before any SYN left
//! (no route, a local policy, an invalid address): reported now, with no errno (that stayed in the
//! syscall's return value; userspace checks the route).
use aya_ebpf::{macros::raw_tracepoint, programs::RawTracePointContext};
use tracer_common::{EVENT_CONNECT_END, FLAG_ANSWERED, FLAG_NO_SYN};

use crate::maps::{ATTEMPTS, emit, now_ns};

#[raw_tracepoint(tracepoint = "tcp_destroy_sock")]
pub fn tcp_destroy_sock(ctx: RawTracePointContext) -> i32 {
    let sock: u64 = ctx.arg(0);
    let Some(attempt) = ATTEMPTS.get_ptr_mut(&sock) else {
        return 0;
    };
    // SAFETY: map value pointer from a successful lookup, used before the remove below.
    let attempt = unsafe { &mut *attempt };
    if attempt.flags & FLAG_ANSWERED == 0 {
        let now = now_ns();
        if attempt.syn_count == 0 {
            // Never reached SYN_SENT: the clock starts and stops here.
            attempt.flags |= FLAG_NO_SYN;
            attempt.start_ns = now;
        }
        if attempt.closed_ns == 0 {
            attempt.closed_ns = now;
        }
        emit(EVENT_CONNECT_END, 0, attempt);
    }
    let _ = ATTEMPTS.remove(&sock);
    0
}
