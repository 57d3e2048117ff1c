//! `tcp:tcp_retransmit_synack`: a listening socket sent a SYN-ACK again, the final ACK of the
//! handshake having not come back. Followed in `replies.rs` (a reply that does not reach the peer,
//! before the connection even exists).
//!
//! A `tp_btf` program: argument 0 is the listener (`const struct sock *sk`), argument 1 the request
//! (`const struct request_sock *req`, which starts with a `sock_common`).
use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};

use crate::{maps::hooks_only, replies};

#[btf_tracepoint(function = "tcp_retransmit_synack")]
pub fn tcp_retransmit_synack(ctx: BtfTracePointContext) -> i32 {
    if hooks_only() {
        return 0;
    }
    let listener: u64 = ctx.arg(0);
    let request: u64 = ctx.arg(1);
    replies::synack_retransmitted(listener, request);
    0
}
