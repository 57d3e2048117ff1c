//! `sock:inet_sock_set_state`, the TCP `tracepoint` tier (kernels without fentry and kprobes, like
//! this development VM's): every TCP state change on the node passes here, which is exactly what a
//! connect attempt is: `CLOSE -> SYN_SENT` when `connect()` starts, then `SYN_SENT -> ESTABLISHED`
//! (answered) or `SYN_SENT -> CLOSE` (refused, unreachable, timed out or abandoned). The `fentry`
//! and `kprobe` tiers hook `tcp_connect()` and `tcp_init_transfer()` instead (`tcp_connect.rs`,
//! `tcp_init_transfer.rs`): they run for connects only, not for every change of every socket.
//!
//! The attempt was opened by the `connect()` hook (`cgroup_connect.rs`: caller, namespace, dialled
//! address). At `CLOSE -> SYN_SENT` the socket knows its route: addresses are added and the clock
//! starts. The source port is still 0 at that moment.
//!
//! A `tp_btf` program: `TP_PROTO(const struct sock *sk, const int oldstate, const int newstate)`.
//! The states are arguments, so most of the ~8 transitions of a short connection on a node (the
//! server side, the close) return after two comparisons; the socket is read (`sock_fields.rs`) and
//! its attempt looked up (`attempts.rs`) only for the transitions of a connect.
//!
//! The kernel does not run a program inside itself: when a softirq interrupts a run on the same
//! CPU (this program, in process context, for another socket), the nested run is skipped. Which
//! skips can matter, and what is done about them:
//! - `CLOSE -> SYN_SENT` and an application's own close happen in process context: never skipped.
//! - `SYN_SENT -> CLOSE` in a softirq (RST, ICMP, the retransmit timer giving up) is followed by the
//!   error report that ends the attempt (`inet_sk_error_report.rs`).
//! - `SYN_SENT -> ESTABLISHED` (a SYN-ACK, in a softirq) is the one that would turn an answered
//!   connect into a false `abandoned`. `tcp_destroy_sock.rs` catches it: an attempt still open when
//!   its socket is destroyed, with no close seen, whose socket took in a SYN-ACK (`rcv_nxt` is set)
//!   was answered unseen, and ends as answered then (`ANSWERED_SEEN_LATE`). One with no SYN-ACK
//!   whose close and error report were both skipped is counted lost (`END_UNSEEN`).
//!
//! So this program's skipped runs are accounted for, not counted as drops wholesale.
use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::btf_tracepoint, programs::BtfTracePointContext,
};
use tracer_common::EVENT_CONNECT_END;

use crate::{
    answered::{Seen, answered},
    attempts::{self, Sock},
    error_read_first::error_read_first,
    maps::{emit, hooks_only, now_ns},
    replies, sock_fields, syn_count,
    syn_sent::on_syn_sent,
};

const IPPROTO_TCP: u16 = 6;
const TCP_ESTABLISHED: i32 = 1;
const TCP_SYN_SENT: i32 = 2;
const TCP_SYN_RECV: i32 = 3;
const TCP_CLOSE: i32 = 7;
const TCP_CLOSE_WAIT: i32 = 8;
const EADDRNOTAVAIL: i32 = 99;

#[btf_tracepoint(function = "inet_sock_set_state")]
pub fn inet_sock_set_state(ctx: BtfTracePointContext) -> i32 {
    if hooks_only() {
        return 0;
    }
    let old: i32 = ctx.arg(1);
    let new: i32 = ctx.arg(2);
    let sk = Sock(ctx.arg(0));
    match (old, new) {
        (TCP_CLOSE, TCP_SYN_SENT) => {
            // MPTCP sockets pass here too.
            if sock_fields::protocol(sk.0) == IPPROTO_TCP {
                on_syn_sent(sk);
            }
        }
        (TCP_SYN_SENT, TCP_CLOSE) => on_closed(sk),
        (TCP_SYN_SENT, TCP_ESTABLISHED | TCP_SYN_RECV) => {
            if let Some(attempt) = attempts::attempt_of(sk) {
                answered(sk, attempt, Seen::OnTime);
            }
        }
        // A handshake's final ACK: a retransmitted SYN-ACK got through after all.
        (TCP_SYN_RECV, TCP_ESTABLISHED) => replies::handshake_completed(sk.0),
        // Closed while it still held a connection the application had not closed: the kernel
        // gave up or a RST came (a socket whose replies are lost keeps that error).
        (TCP_ESTABLISHED | TCP_CLOSE_WAIT, TCP_CLOSE) => replies::closing(sk.0),
        _ => {}
    }
    0
}

fn on_closed(sk: Sock) {
    let Some(attempt) = attempts::attempt_of(sk) else {
        return;
    };
    let addrs = sock_fields::addrs(sk.0);
    attempt.closed_ns = now_ns();
    attempt.saddr = addrs.saddr;
    attempt.sport = addrs.sport;
    if addrs.sport == 0 {
        // Closed before a local port was bound: tcp_v4_connect found no free port for this
        // destination (inet_hash_connect), the one failure between SYN_SENT and the SYN. No SYN
        // left and no error report follows.
        attempt.syn_count = 0;
        emit(EVENT_CONNECT_END, EADDRNOTAVAIL, attempt);
        attempts::end(sk);
        return;
    }
    syn_count::catch_up(sk, attempt);
    // The kernel sets `sk_err` before it closes a connecting socket (a RST, an ICMP error, the
    // retransmit timer giving up), so the errno is here already. This ends the attempt on kernels
    // without the error-report tracepoint (5.10), and on 6.10+ where the report comes after the
    // close; before 6.10 the report came first and ended it.
    let error = sock_fields::error(sk.0);
    if error != 0 {
        emit(EVENT_CONNECT_END, error, attempt);
        attempts::end(sk);
        return;
    }
    // An ICMP error that arrived while the application held the socket is kept in `sk_err_soft`
    // until the application reads it, and queued on the error queue until the socket is freed: if it
    // closes now, that is why. (Without the error-report tracepoint, 5.10, this is the only look.)
    let read_first = error_read_first(sk, attempt);
    // Closed by the kernel (a timer or a packet in softirq), not by the application's close(): an
    // error ended it, and the application read it already (seen on 5.10, which has no
    // error-report tracepoint).
    let current_tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if current_tgid != attempt.pid
        && let Some(error) = read_first
    {
        emit(EVENT_CONNECT_END, error, attempt);
        attempts::end(sk);
    }
    // Otherwise the application closed the socket (or an ICMP error was handled inside its
    // connect() and kept in `soft_error`): tcp_destroy_sock ends it.
}
