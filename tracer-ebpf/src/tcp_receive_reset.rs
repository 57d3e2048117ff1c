//! `tcp:tcp_receive_reset`: fires in `tcp_reset()` before the socket closes with `ECONNREFUSED`. The
//! errno alone cannot tell a RST from an ICMP port-unreachable (kube-proxy's REJECT for a Service
//! without endpoints), so the RST is remembered on the attempt.
//!
//! A raw tracepoint (see `sock_fields.rs` for why): argument 0 is `struct sock *sk`.
use aya_ebpf::{macros::raw_tracepoint, programs::RawTracePointContext};
use tracer_common::FLAG_RST_RECEIVED;

use crate::maps::ATTEMPTS;

#[raw_tracepoint(tracepoint = "tcp_receive_reset")]
pub fn tcp_receive_reset(ctx: RawTracePointContext) -> i32 {
    let sock: u64 = ctx.arg(0);
    if let Some(attempt) = ATTEMPTS.get_ptr_mut(&sock) {
        // SAFETY: map value pointer from a successful lookup; softirq holds the socket lock.
        unsafe { (*attempt).flags |= FLAG_RST_RECEIVED };
    }
    0
}
