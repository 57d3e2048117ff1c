//! `syscalls:sys_exit_connect`: the return value of `connect()`. Two endings happen only here:
//! - the socket entered `SYN_SENT` and left it inside the same syscall with no error report: the
//!   answer was processed synchronously (an ICMP port-unreachable from a REJECT rule one veth away
//!   arrives while the connecting task still holds the socket) and `tcp_v4_connect` took its failure
//!   path. The errno is the syscall's return value.
//! - the socket never reached `SYN_SENT`: no route (`ENETUNREACH`), no free local port
//!   (`EADDRNOTAVAIL`), a policy refusal (`EPERM`/`EACCES`). The `connect()` hook knows the address.
//!
//! Fields (format file of 6.18): ret@16.
use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::tracepoint, programs::TracePointContext,
};
use tracer_common::{
    Attempt, EVENT_CONNECT_END, FLAG_DIALED_KNOWN, tracepoint::sys_exit_connect::RET,
};

use crate::{
    maps::{ATTEMPTS, DIALED, caller, emit, filter, now_ns},
    tracepoint_fields::load,
};

const EINPROGRESS: i64 = 115;
const EALREADY: i64 = 114;
const EISCONN: i64 = 106;

#[tracepoint]
pub fn sys_exit_connect(ctx: TracePointContext) -> u32 {
    let ret: i64 = load(&ctx, RET);
    let pid_tgid = bpf_get_current_pid_tgid();
    let failed = ret < 0 && !matches!(-ret, EINPROGRESS | EALREADY | EISCONN);
    // SAFETY: copied out at once.
    let Some(dialing) = (unsafe { DIALED.get(&pid_tgid) }).copied() else {
        return 0;
    };
    let _ = DIALED.remove(&pid_tgid);
    if !failed {
        return 0;
    }
    if dialing.sock != 0 {
        end_in_syscall(dialing.sock, -ret as i32);
        return 0;
    }
    let dialed = dialing.dst;
    let wanted = filter().netns_cookie;
    if wanted == 0 || dialed.netns_cookie == wanted {
        let now = now_ns();
        let who = caller(pid_tgid);
        let attempt = Attempt {
            start_ns: now,
            closed_ns: now,
            netns_cookie: dialed.netns_cookie,
            cgroup_id: who.cgroup_id,
            pid: who.pid,
            tid: who.tid,
            comm: who.comm,
            daddr: dialed.addr,
            dialed_addr: dialed.addr,
            family: dialed.family,
            dport: dialed.port,
            dialed_port: dialed.port,
            syn_count: 0,
            flags: FLAG_DIALED_KNOWN,
            ..Attempt::default()
        };
        emit(EVENT_CONNECT_END, -ret as i32, &attempt);
    }
    0
}

/// The attempt closed during this very syscall without an error report: end it with the errno.
fn end_in_syscall(sock: u64, error: i32) {
    let Some(attempt) = ATTEMPTS.get_ptr_mut(&sock) else {
        return;
    };
    // SAFETY: map value pointer used before the remove below.
    let attempt = unsafe { &mut *attempt };
    // connect() failed after SYN_SENT: the attempt is over, whether or not its CLOSE was seen (a
    // tracepoint program can be skipped when it would nest inside another BPF program).
    if attempt.closed_ns == 0 {
        attempt.closed_ns = now_ns();
    }
    emit(EVENT_CONNECT_END, error, attempt);
    let _ = ATTEMPTS.remove(&sock);
}
