//! `tcp:tcp_retransmit_skb`: a retransmit in `SYN_SENT` is a SYN that got no answer. This is the live
//! signal of a black hole, so each one is sent to userspace at once (`unanswered`, updated per SYN).
//! Retransmits in other states return after one field read.
//!
//! A raw tracepoint (see `sock_fields.rs` for why): argument 0 is `const struct sock *sk`.
use aya_ebpf::{macros::raw_tracepoint, programs::RawTracePointContext};
use tracer_common::EVENT_SYN_RETRANSMIT;

use crate::{
    maps::{ATTEMPTS, emit},
    sock_fields,
};

const TCP_SYN_SENT: u8 = 2;

#[raw_tracepoint(tracepoint = "tcp_retransmit_skb")]
pub fn tcp_retransmit_skb(ctx: RawTracePointContext) -> i32 {
    let sock: u64 = ctx.arg(0);
    if sock_fields::state(sock) != TCP_SYN_SENT {
        return 0;
    }
    let Some(attempt) = ATTEMPTS.get_ptr_mut(&sock) else {
        return 0;
    };
    // SAFETY: map value pointer from a successful lookup; the retransmit timer holds the socket lock.
    let attempt = unsafe { &mut *attempt };
    let addrs = sock_fields::addrs(sock);
    attempt.syn_count = attempt.syn_count.saturating_add(1);
    attempt.saddr = addrs.saddr;
    attempt.sport = addrs.sport;
    emit(EVENT_SYN_RETRANSMIT, 0, attempt);
    0
}
