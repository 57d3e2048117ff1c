//! `tcp:tcp_retransmit_skb`: a retransmit in `SYN_SENT` is a SYN that got no answer. This is the live
//! signal of a black hole, so each one is sent to userspace at once (`unanswered`, updated per SYN).
//! Retransmits in other states return after one field read.
//!
//! Fields (format file of 6.18, offsets in `tracer_common::tracepoint`): `skaddr`, `state` and the
//! address block.
use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use tracer_common::EVENT_SYN_RETRANSMIT;

use tracer_common::tracepoint::tcp_retransmit_skb::{ADDRS, SKADDR, STATE};

use crate::{
    maps::{ATTEMPTS, emit},
    tracepoint_fields::{load, read_addrs},
};

const TCP_SYN_SENT: i32 = 2;

#[tracepoint]
pub fn tcp_retransmit_skb(ctx: TracePointContext) -> u32 {
    let state: i32 = load(&ctx, STATE);
    if state != TCP_SYN_SENT {
        return 0;
    }
    let sock: u64 = load(&ctx, SKADDR);
    let Some(attempt) = ATTEMPTS.get_ptr_mut(&sock) else {
        return 0;
    };
    // SAFETY: map value pointer from a successful lookup; the retransmit timer holds the socket lock.
    let attempt = unsafe { &mut *attempt };
    let addrs = read_addrs(&ctx, &ADDRS);
    attempt.syn_count = attempt.syn_count.saturating_add(1);
    attempt.saddr = addrs.saddr;
    attempt.sport = addrs.sport;
    emit(EVENT_SYN_RETRANSMIT, 0, attempt);
    0
}
