//! `tcp:tcp_receive_reset`: fires in `tcp_reset()` before the socket closes with `ECONNREFUSED`. The
//! errno alone cannot tell a RST from an ICMP port-unreachable (kube-proxy's REJECT for a Service
//! without endpoints), so the RST is remembered on the attempt.
//!
//! A `tp_btf` program: argument 0 is `struct sock *sk`.
use aya_ebpf::{macros::btf_tracepoint, programs::BtfTracePointContext};
use tracer_common::FLAG_RST_RECEIVED;

use crate::{
    attempts::{self, Sock},
    maps::hooks_only,
};

#[btf_tracepoint(function = "tcp_receive_reset")]
pub fn tcp_receive_reset(ctx: BtfTracePointContext) -> i32 {
    if hooks_only() {
        return 0;
    }
    if let Some(attempt) = attempts::attempt_of(Sock(ctx.arg(0))) {
        attempt.flags |= FLAG_RST_RECEIVED;
    }
    0
}
