//! `tcp:tcp_retransmit_skb`: a retransmit in `SYN_SENT` is a SYN that got no answer. This is the live
//! signal of a black hole, so each one is sent to userspace at once (`unanswered`, updated per SYN).
//! A retransmit of data is followed in `replies.rs` (replies that may not reach the peer).
//!
//! A `tp_btf` program: argument 0 is `const struct sock *sk`.
use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};
use tracer_common::EVENT_SYN_RETRANSMIT;

use crate::{
    attempts::{self, Sock},
    maps::{emit, hooks_only},
    replies, sock_fields, syn_count,
};

const TCP_SYN_SENT: u8 = 2;

#[btf_tracepoint(function = "tcp_retransmit_skb")]
pub fn tcp_retransmit_skb(ctx: BtfTracePointContext) -> i32 {
    if hooks_only() {
        return 0;
    }
    let sk = Sock(ctx.arg(0));
    let state = sock_fields::state(sk.0);
    if state != TCP_SYN_SENT {
        replies::retransmitted(sk.0, state);
        return 0;
    }
    let Some(attempt) = attempts::attempt_of(sk) else {
        return 0;
    };
    let addrs = sock_fields::addrs(sk.0);
    attempt.syn_count = attempt.syn_count.saturating_add(1);
    syn_count::catch_up(sk, attempt);
    attempt.saddr = addrs.saddr;
    attempt.sport = addrs.sport;
    emit(EVENT_SYN_RETRANSMIT, 0, attempt);
    0
}
