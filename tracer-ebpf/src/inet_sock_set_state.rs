//! `sock:inet_sock_set_state`: the backbone. Every TCP state change on the node passes here, which is
//! exactly what a connect attempt is: `CLOSE -> SYN_SENT` when `connect()` starts, then `SYN_SENT ->
//! ESTABLISHED` (answered) or `SYN_SENT -> CLOSE` (refused, unreachable, timed out or abandoned).
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
use tracer_common::{
    Attempt, EVENT_CONNECT_END, Endpoint, FLAG_ANSWERED, FLAG_DIALED_BY_SOCKET_LB,
    FLAG_DIALED_KNOWN, FLAG_RST_RECEIVED, HealthyKey, HealthyStats, counter,
};

use crate::{
    attempts::{self, Sock},
    maps::{ATTEMPT_SCRATCH, HEALTHY, caller, count, emit, filter, hooks_only, now_ns},
    replies, sock_fields,
};

const IPPROTO_TCP: u16 = 6;
const TCP_ESTABLISHED: i32 = 1;
const TCP_SYN_SENT: i32 = 2;
const TCP_SYN_RECV: i32 = 3;
const TCP_CLOSE: i32 = 7;
const TCP_CLOSE_WAIT: i32 = 8;
const EADDRNOTAVAIL: i32 = 99;
const ECONNREFUSED: i32 = 111;
const ETIMEDOUT: i32 = 110;

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

fn on_syn_sent(sk: Sock) {
    let addrs = sock_fields::addrs(sk.0);
    let now = now_ns();
    // Opened by the connect() hook in this very call: complete it with what the socket knows now.
    if let Some(attempt) = attempts::attempt_of(sk) {
        at_first_syn(attempt, sk, &addrs, now);
        attempt.closed_ns = 0;
        attempt.flags &= FLAG_DIALED_KNOWN | FLAG_DIALED_BY_SOCKET_LB;
        attempt.soft_error = 0;
        return;
    }
    // A socket the hook did not see (a kernel socket): its namespace is unknown, so it is followed
    // only without a namespace filter, attributed to whoever runs.
    if filter().netns_inode != 0 {
        return;
    }
    // Or one the hook saw but found the table full for: not followed, and counted already.
    if attempts::was_unstored(sk) {
        return;
    }
    let Some(slot) = ATTEMPT_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    let who = caller(bpf_get_current_pid_tgid());
    // SAFETY: this CPU's scratch slot, this program's alone while it runs; zeroed, then filled
    // field by field so no `Attempt` is built on the stack.
    let attempt = unsafe {
        core::ptr::write_bytes(slot, 0, 1);
        &mut *slot
    };
    attempt.sock = sk.0;
    attempt.cgroup_id = who.cgroup_id;
    attempt.pid = who.pid;
    attempt.tid = who.tid;
    attempt.comm = who.comm;
    at_first_syn(attempt, sk, &addrs, now);
    if attempts::open(sk, attempt) {
        count(counter::ATTEMPTS_STARTED);
    }
}

/// What the socket knows as its first SYN leaves, for either kind of attempt: when, its addresses
/// and ports (the source port is bound by now), and its cookie.
#[expect(
    clippy::inline_always,
    reason = "one body in each path of `on_syn_sent`, as before: no call frame on a stack 5.10 and \
              6.1 hold to 512 bytes across calls"
)]
#[inline(always)]
fn at_first_syn(attempt: &mut Attempt, sk: Sock, addrs: &sock_fields::Addrs, now: u64) {
    attempt.start_ns = now;
    attempt.saddr = addrs.saddr;
    attempt.daddr = addrs.daddr;
    attempt.family = addrs.family;
    attempt.sport = addrs.sport;
    attempt.dport = addrs.dport;
    attempt.syn_count = 1;
    attempt.cookie = sock_fields::cookie(sk.0);
}

/// When the answer was seen: as the socket left `SYN_SENT`, or only when it was destroyed (that
/// run was skipped, see the module comment).
#[derive(PartialEq, Eq)]
pub enum Seen {
    OnTime,
    AtDestroy,
}

/// Ends `attempt` of `sk` as answered: a record if it took retransmits, else a healthy count.
pub fn answered(sk: Sock, attempt: &mut Attempt, seen: Seen) {
    attempt.flags |= FLAG_ANSWERED;
    if seen == Seen::AtDestroy {
        count(counter::ANSWERED_SEEN_LATE);
    }
    if attempt.syn_count > 1 {
        emit(EVENT_CONNECT_END, 0, attempt);
    } else if seen == Seen::OnTime {
        // Healthy: answered on the first SYN. Count it per destination, send nothing.
        count_healthy(attempt);
    } else {
        // Answered on the first SYN, but when is unknown: counted, kept out of the mean wait.
        count(counter::ESTABLISHED_FIRST_SYN);
    }
    attempts::end(sk);
}

fn count_healthy(attempt: &Attempt) {
    count(counter::ESTABLISHED_FIRST_SYN);
    let key = HealthyKey {
        dst: Endpoint {
            netns_inode: attempt.netns_inode,
            addr: attempt.daddr,
            port: attempt.dport,
            family: attempt.family,
            _pad: [0; 4],
        },
        pid: attempt.pid,
        _pad: 0,
    };
    let waited = now_ns().saturating_sub(attempt.start_ns);
    if let Some(stats) = HEALTHY.get_ptr_mut(&key) {
        // SAFETY: valid per-CPU map value pointer: no other writer while this program runs here.
        unsafe {
            (*stats).established += 1;
            (*stats).syn_sent_ns_total += waited;
            (*stats).cgroup_id = attempt.cgroup_id;
            (*stats).comm = attempt.comm;
        }
    } else if HEALTHY
        .insert(
            &key,
            &HealthyStats {
                established: 1,
                syn_sent_ns_total: waited,
                cgroup_id: attempt.cgroup_id,
                comm: attempt.comm,
            },
            0,
        )
        .is_err()
    {
        count(counter::HEALTHY_MAP_FULL);
    }
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
    if attempt.soft_error == 0 {
        attempt.soft_error = match sock_fields::soft_error(sk.0) {
            0 => sock_fields::queued_icmp_error(sk.0),
            soft => soft,
        };
    }
    // Closed by the kernel (a timer or a packet in softirq), not by the application's close(): an
    // error ended it, and the application, woken by its report on another CPU, read it already
    // (`SO_ERROR` clears `sk_err`) before this close. Seen on 5.10 (no error-report tracepoint).
    // A RST says refused; otherwise the retransmit timer gave up.
    let current_tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if attempt.soft_error == 0 && current_tgid != attempt.pid {
        let error = if attempt.flags & FLAG_RST_RECEIVED != 0 {
            ECONNREFUSED
        } else {
            ETIMEDOUT
        };
        emit(EVENT_CONNECT_END, error, attempt);
        attempts::end(sk);
    }
    // Otherwise the application closed the socket (or an ICMP error was handled inside its
    // connect() and kept in `soft_error`): tcp_destroy_sock ends it.
}
