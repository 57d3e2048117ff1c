//! The end of a handshake, on the `fentry` and `kprobe` TCP tiers: `tcp_init_transfer(sk, bpf_op,
//! skb)` runs once per connection on each side as it becomes `ESTABLISHED`: from
//! `tcp_finish_connect()` on the client (`bpf_op` is `BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB`: the
//! connect was answered, `answered.rs`) and on the server when the final ACK arrives
//! (`..._PASSIVE_ESTABLISHED_CB`: a handshake whose SYN-ACKs were retransmitted completed after
//! all, `replies.rs`). One hook for both ends instead of `tcp_finish_connect()` plus a server-side
//! one. Checked against Linux 5.10, 6.1, 6.12 and 6.18: `void tcp_init_transfer(struct sock *sk,
//! int bpf_op, struct sk_buff *skb)`.
//!
//! Like the state tracepoint, a run nested in the same program on that CPU is skipped by the
//! kernel; an answer missed that way is recovered when the socket ends (`tcp_destroy_sock.rs`).
use aya_ebpf::{
    macros::{fentry, kprobe},
    programs::{FEntryContext, ProbeContext},
};

use crate::{
    answered::{Seen, answered},
    attempts::{self, Sock},
    maps::hooks_only,
    replies,
};

/// `enum bpf_sock_ops_cb`, stable UAPI.
const ACTIVE_ESTABLISHED: i32 = 4;
const PASSIVE_ESTABLISHED: i32 = 5;

#[fentry(function = "tcp_init_transfer")]
pub fn fentry_tcp_init_transfer(ctx: FEntryContext) -> i32 {
    established(ctx.arg(0), ctx.arg(1));
    0
}

#[kprobe]
pub fn kprobe_tcp_init_transfer(ctx: ProbeContext) -> u32 {
    if let (Some(sk), Some(op)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1)) {
        established(sk, op as i32);
    }
    0
}

fn established(sk: u64, op: i32) {
    if hooks_only() {
        return;
    }
    let sk = Sock(sk);
    if op == ACTIVE_ESTABLISHED {
        if let Some(attempt) = attempts::attempt_of(sk) {
            answered(sk, attempt, Seen::OnTime);
        }
    } else if op == PASSIVE_ESTABLISHED {
        replies::handshake_completed(sk.0);
    }
}
