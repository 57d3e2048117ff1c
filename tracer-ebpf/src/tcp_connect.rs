//! The first SYN, on the `fentry` and `kprobe` TCP tiers: `tcp_connect(sk)` builds and sends it,
//! after `tcp_v4_connect()`/`tcp_v6_connect()` picked the route and the local port, in the
//! caller's context (`syn_sent.rs`). One run per connect, none for any other socket or state
//! change (the `tracepoint` tier's `inet_sock_set_state` runs about 8 times per connection).
//! Checked against Linux 5.10, 6.1, 6.12 and 6.18: `int tcp_connect(struct sock *sk)`.
use aya_ebpf::{
    macros::{fentry, kprobe},
    programs::{FEntryContext, ProbeContext},
};

use crate::{attempts::Sock, maps::hooks_only, syn_sent::on_syn_sent};

#[fentry(function = "tcp_connect")]
pub fn fentry_tcp_connect(ctx: FEntryContext) -> i32 {
    connecting(ctx.arg(0));
    0
}

#[kprobe]
pub fn kprobe_tcp_connect(ctx: ProbeContext) -> u32 {
    if let Some(sk) = ctx.arg::<u64>(0) {
        connecting(sk);
    }
    0
}

fn connecting(sk: u64) {
    if !hooks_only() {
        on_syn_sent(Sock(sk));
    }
}
