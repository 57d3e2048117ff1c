//! `tcp:tcp_destroy_sock`: the socket is freed. An attempt still here left `SYN_SENT` without an error
//! report: the application closed it while waiting (`abandoned`, the common end of a black-holed
//! connect, since clients give up long before the kernel does). Also guarantees no entry outlives its
//! socket.
//!
//! Fields (format file of 6.18): skaddr@8.
use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use tracer_common::{EVENT_CONNECT_END, FLAG_ANSWERED};

use crate::{
    maps::{ATTEMPTS, emit, now_ns},
    tracepoint_fields::load,
};

use tracer_common::tracepoint::skaddr_only::SKADDR;

#[tracepoint]
pub fn tcp_destroy_sock(ctx: TracePointContext) -> u32 {
    let sock: u64 = load(&ctx, SKADDR);
    let Some(attempt) = ATTEMPTS.get_ptr_mut(&sock) else {
        return 0;
    };
    // SAFETY: map value pointer from a successful lookup, used before the remove below.
    let attempt = unsafe { &mut *attempt };
    if attempt.flags & FLAG_ANSWERED == 0 {
        if attempt.closed_ns == 0 {
            attempt.closed_ns = now_ns();
        }
        emit(EVENT_CONNECT_END, 0, attempt);
    }
    let _ = ATTEMPTS.remove(&sock);
    0
}
