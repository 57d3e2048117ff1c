//! `sock:inet_sock_set_state`: the backbone. Every TCP state change on the node passes here, which is
//! exactly what a connect attempt is: `CLOSE -> SYN_SENT` when `connect()` starts, then `SYN_SENT ->
//! ESTABLISHED` (answered) or `SYN_SENT -> CLOSE` (refused, unreachable, timed out or abandoned).
//!
//! At `CLOSE -> SYN_SENT` we run in the connecting task (inside `tcp_v4_connect`), so pid, comm and cgroup
//! are recorded here; later hooks run in softirq or timer context where "current" is whoever ran.
//! The source port is still 0 at that moment; the socket address is the join key instead.
//!
//! A raw tracepoint: `TP_PROTO(const struct sock *sk, const int oldstate, const int newstate)`. The
//! states are arguments, so the ~6 other transitions of a short connection (the server side, the
//! close) return after two comparisons; the protocol and addresses are read from the socket only for
//! the transitions of a connect (`sock_fields.rs`).
use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::raw_tracepoint, programs::RawTracePointContext,
};
use tracer_common::{
    Attempt, Dialing, EVENT_CONNECT_END, Endpoint, FLAG_ANSWERED, FLAG_DIALED_KNOWN, HealthyKey,
    HealthyStats, counter,
};

use crate::{
    maps::{ATTEMPTS, Caller, DIALED, HEALTHY, caller, count, emit, filter, now_ns},
    sock_fields,
};

const IPPROTO_TCP: u16 = 6;
const TCP_ESTABLISHED: i32 = 1;
const TCP_SYN_SENT: i32 = 2;
const TCP_SYN_RECV: i32 = 3;
const TCP_CLOSE: i32 = 7;
const EADDRNOTAVAIL: i32 = 99;

#[raw_tracepoint(tracepoint = "inet_sock_set_state")]
pub fn inet_sock_set_state(ctx: RawTracePointContext) -> i32 {
    let old: i32 = ctx.arg(1);
    let new: i32 = ctx.arg(2);
    let connecting = matches!(
        (old, new),
        (TCP_CLOSE, TCP_SYN_SENT) | (TCP_SYN_SENT, TCP_ESTABLISHED | TCP_SYN_RECV | TCP_CLOSE)
    );
    if !connecting {
        return 0;
    }
    let sock: u64 = ctx.arg(0);
    // MPTCP sockets pass here too.
    if sock_fields::protocol(sock) != IPPROTO_TCP {
        return 0;
    }
    match new {
        TCP_SYN_SENT => on_syn_sent(sock),
        TCP_CLOSE => on_closed(sock),
        _ => on_answered(sock),
    }
    0
}

fn on_syn_sent(sock: u64) {
    // The connect() hook's record of this very call (same syscall): taken out here.
    let cookie = sock_fields::cookie(sock);
    // SAFETY: copied out at once; only this socket's connect(), under its lock, touches the entry.
    // Not kept as an Option: a None's payload is undefined to LLVM, and the verifier rejects reading
    // the registers it left unset.
    let (known, dialing) = match unsafe { DIALED.get(&cookie) } {
        Some(d) => (true, *d),
        None => (false, Dialing::default()),
    };
    if known {
        let _ = DIALED.remove(&cookie);
    }
    let dialed = dialing.dst;
    let wanted = filter().netns_cookie;
    if wanted != 0 && dialed.netns_cookie != wanted {
        return;
    }
    let addrs = sock_fields::addrs(sock);
    // We run inside the connecting task's connect(); a socket the hook did not see (a kernel
    // socket) is attributed to whoever runs.
    let who = if known {
        Caller {
            cgroup_id: dialing.cgroup_id,
            pid: dialing.pid,
            tid: dialing.tid,
            comm: dialing.comm,
        }
    } else {
        caller(bpf_get_current_pid_tgid())
    };
    let attempt = Attempt {
        sock,
        start_ns: now_ns(),
        netns_cookie: dialed.netns_cookie,
        cgroup_id: who.cgroup_id,
        closed_ns: 0,
        pid: who.pid,
        tid: who.tid,
        comm: who.comm,
        saddr: addrs.saddr,
        daddr: addrs.daddr,
        dialed_addr: dialed.addr,
        family: addrs.family,
        sport: addrs.sport,
        dport: addrs.dport,
        dialed_port: dialed.port,
        syn_count: 1,
        flags: if dialed.family != 0 {
            FLAG_DIALED_KNOWN
        } else {
            0
        },
        soft_error: 0,
    };
    count(counter::ATTEMPTS_STARTED);
    if ATTEMPTS.insert(&sock, &attempt, 0).is_err() {
        count(counter::ATTEMPTS_MAP_FULL);
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
