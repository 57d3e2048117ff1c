//! `tcp:tcp_receive_reset`: fires in `tcp_reset()` before the socket closes with `ECONNREFUSED`. The
//! errno alone cannot tell a RST from an ICMP port-unreachable (kube-proxy's REJECT for a Service
//! without endpoints), so the RST is remembered on the attempt.
//!
//! Fields (format file of 6.18): skaddr@8.
use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use tracer_common::FLAG_RST_RECEIVED;

use crate::{maps::ATTEMPTS, tracepoint_fields::load};

use tracer_common::tracepoint::skaddr_only::SKADDR;

#[tracepoint]
pub fn tcp_receive_reset(ctx: TracePointContext) -> u32 {
    let sock: u64 = load(&ctx, SKADDR);
    if let Some(attempt) = ATTEMPTS.get_ptr_mut(&sock) {
        // SAFETY: map value pointer from a successful lookup; softirq holds the socket lock.
        unsafe { (*attempt).flags |= FLAG_RST_RECEIVED };
    }
    0
}
