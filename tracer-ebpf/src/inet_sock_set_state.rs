//! `sock:inet_sock_set_state`: the backbone. Every TCP state change on the node passes here, which is
//! exactly what a connect attempt is: `CLOSE -> SYN_SENT` when `connect()` starts, then `SYN_SENT ->
//! ESTABLISHED` (answered) or `SYN_SENT -> CLOSE` (refused, unreachable, timed out or abandoned).
//!
//! The attempt was opened by the `connect()` hook (`cgroup_connect.rs`: caller, namespace, dialled
//! address), keyed by the socket's address, which every later hook gets as its `sk` argument. At
//! `CLOSE -> SYN_SENT` the socket knows its route: addresses are added and the clock starts. The
//! source port is still 0 at that moment.
//!
//! A raw tracepoint: `TP_PROTO(const struct sock *sk, const int oldstate, const int newstate)`. The
//! states are arguments, so the ~6 other transitions of a short connection (the server side, the
//! close) return after two comparisons; the protocol and addresses are read from the socket only for
//! the transitions of a connect (`sock_fields.rs`).
//!
//! Two programs on the one tracepoint, because the kernel does not run a raw tracepoint program
//! inside itself: when a softirq interrupts a run on the same CPU, the nested run is skipped (counted
//! in `recursion_misses`). `syn_sent_enter` does the long work (maps, helpers) in process context,
//! inside `connect()`; a softirq landing then may carry the SYN-ACK of another connect. That
//! transition goes to `syn_sent_leave`, which is not running, so it is not lost. What
//! `syn_sent_enter` itself skips is harmless: a nested run is a softirq's transition, and
//! `CLOSE -> SYN_SENT` never happens in a softirq (userspace leaves those misses out of `dropped`).
use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::raw_tracepoint, programs::RawTracePointContext,
};
use tracer_common::{
    Attempt, EVENT_CONNECT_END, Endpoint, FLAG_ANSWERED, FLAG_DIALED_KNOWN, HealthyKey,
    HealthyStats, counter,
};

use crate::{
    maps::{ATTEMPTS, HEALTHY, caller, count, emit, filter, now_ns},
    sock_fields,
};

const IPPROTO_TCP: u16 = 6;
const TCP_ESTABLISHED: i32 = 1;
const TCP_SYN_SENT: i32 = 2;
const TCP_SYN_RECV: i32 = 3;
const TCP_CLOSE: i32 = 7;
const EADDRNOTAVAIL: i32 = 99;

/// `CLOSE -> SYN_SENT`: a connect starts (process context).
#[raw_tracepoint(tracepoint = "inet_sock_set_state")]
pub fn syn_sent_enter(ctx: RawTracePointContext) -> i32 {
    let old: i32 = ctx.arg(1);
    let new: i32 = ctx.arg(2);
    if (old, new) != (TCP_CLOSE, TCP_SYN_SENT) {
        return 0;
    }
    let sock: u64 = ctx.arg(0);
    // MPTCP sockets pass here too.
    if sock_fields::protocol(sock) == IPPROTO_TCP {
        on_syn_sent(sock);
    }
    0
}

/// `SYN_SENT -> ESTABLISHED | SYN_RECV | CLOSE`: a connect is answered or ends (mostly softirq).
#[raw_tracepoint(tracepoint = "inet_sock_set_state")]
pub fn syn_sent_leave(ctx: RawTracePointContext) -> i32 {
    let old: i32 = ctx.arg(1);
    if old != TCP_SYN_SENT {
        return 0;
    }
    let new: i32 = ctx.arg(2);
    let sock: u64 = ctx.arg(0);
    match new {
        TCP_CLOSE => on_closed(sock),
        TCP_ESTABLISHED | TCP_SYN_RECV => on_answered(sock),
        _ => {}
    }
    0
}

fn on_syn_sent(sock: u64) {
    let addrs = sock_fields::addrs(sock);
    let now = now_ns();
    // Opened by the connect() hook in this very call: complete it with what the socket knows now.
    if let Some(attempt) = ATTEMPTS.get_ptr_mut(&sock) {
        // SAFETY: map value pointer from a successful lookup; this socket's connect() holds its lock.
        let attempt = unsafe { &mut *attempt };
        attempt.start_ns = now;
        attempt.closed_ns = 0;
        attempt.saddr = addrs.saddr;
        attempt.daddr = addrs.daddr;
        attempt.family = addrs.family;
        attempt.sport = addrs.sport;
        attempt.dport = addrs.dport;
        attempt.syn_count = 1;
        attempt.flags &= FLAG_DIALED_KNOWN;
        attempt.soft_error = 0;
        return;
    }
    // A socket the hook did not see (a kernel socket): its namespace is unknown, so it is followed
    // only without a namespace filter, attributed to whoever runs.
    if filter().netns_cookie != 0 {
        return;
    }
    let who = caller(bpf_get_current_pid_tgid());
    let attempt = Attempt {
        sock,
        start_ns: now,
        cgroup_id: who.cgroup_id,
        pid: who.pid,
        tid: who.tid,
        comm: who.comm,
        saddr: addrs.saddr,
        daddr: addrs.daddr,
        family: addrs.family,
        sport: addrs.sport,
        dport: addrs.dport,
        syn_count: 1,
        ..Attempt::default()
    };
    // Not counted when the table is full: an application's attempt that did not fit was counted by
    // the connect() hook and comes here too; kernel sockets rarely connect.
    if ATTEMPTS.insert(&sock, &attempt, 0).is_ok() {
        count(counter::ATTEMPTS_STARTED);
    }
}

fn on_answered(sock: u64) {
    let Some(attempt) = ATTEMPTS.get_ptr_mut(&sock) else {
        return;
    };
    // SAFETY: map value pointer from a successful lookup; entries of this socket are only touched by
    // hooks that run under the socket's lock.
    let attempt = unsafe { &mut *attempt };
    attempt.flags |= FLAG_ANSWERED;
    if attempt.syn_count <= 1 {
        // Healthy: answered on the first SYN. Count it per destination, send nothing.
        count_healthy(attempt);
    } else {
        emit(EVENT_CONNECT_END, 0, attempt);
    }
    let _ = ATTEMPTS.remove(&sock);
}

fn count_healthy(attempt: &Attempt) {
    count(counter::ESTABLISHED_FIRST_SYN);
    let key = HealthyKey {
        dst: Endpoint {
            netns_cookie: attempt.netns_cookie,
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

fn on_closed(sock: u64) {
    let Some(attempt) = ATTEMPTS.get_ptr_mut(&sock) else {
        return;
    };
    // SAFETY: as in on_answered.
    let attempt = unsafe { &mut *attempt };
    let addrs = sock_fields::addrs(sock);
    attempt.closed_ns = now_ns();
    attempt.saddr = addrs.saddr;
    attempt.sport = addrs.sport;
    if addrs.sport == 0 {
        // Closed before a local port was bound: tcp_v4_connect found no free port for this
        // destination (inet_hash_connect), the one failure between SYN_SENT and the SYN. No SYN
        // left and no error report follows.
        attempt.syn_count = 0;
        emit(EVENT_CONNECT_END, EADDRNOTAVAIL, attempt);
        let _ = ATTEMPTS.remove(&sock);
    }
    // Otherwise the errno comes next, from inet_sk_error_report. If no report follows (the
    // application closed the socket, or an ICMP error was handled inside its connect() and kept in
    // `soft_error`), tcp_destroy_sock ends it.
}
