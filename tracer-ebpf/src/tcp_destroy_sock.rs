//! `tcp:tcp_destroy_sock`: the socket is freed. An attempt still here left `SYN_SENT` without an error
//! report: the application closed it while waiting (`abandoned`, the common end of a black-holed
//! connect, since clients give up long before the kernel does). Also guarantees no entry outlives its
//! socket.
//!
//! A raw tracepoint (see `sock_fields.rs` for why): argument 0 is `struct sock *sk`.
//!
//! A socket whose `connect()` the hook saw but that never reached `SYN_SENT` failed before any SYN
//! left (no route, a local policy, an invalid address): its `DIALED` record is still here, and it is
//! reported now, with no errno (that stayed in the syscall's return value; userspace checks the route).
use aya_ebpf::{macros::raw_tracepoint, programs::RawTracePointContext};
use tracer_common::{Attempt, EVENT_CONNECT_END, FLAG_ANSWERED, FLAG_DIALED_KNOWN, FLAG_NO_SYN};

use crate::{
    maps::{ATTEMPTS, DIALED, emit, filter, now_ns},
    sock_fields,
};

#[raw_tracepoint(tracepoint = "tcp_destroy_sock")]
pub fn tcp_destroy_sock(ctx: RawTracePointContext) -> i32 {
    let sock: u64 = ctx.arg(0);
    let Some(attempt) = ATTEMPTS.get_ptr_mut(&sock) else {
        failed_before_syn(sock);
        return 0;
    };
    // SAFETY: map value pointer from a successful lookup, used before the remove below.
    let attempt = unsafe { &mut *attempt };
    if attempt.flags & FLAG_ANSWERED == 0 {
        if attempt.closed_ns == 0 {
            attempt.closed_ns = now_ns();
        }
        emit(EVENT_CONNECT_END, 0, attempt);
    }
    let _ = ATTEMPTS.remove(&sock);
    0
}

/// The `connect()` hook saw this socket and it never sent a SYN: report that attempt.
fn failed_before_syn(sock: u64) {
    let cookie = sock_fields::cookie(sock);
    if cookie == 0 {
        return; // nobody asked for a cookie: the connect() hook never saw this socket
    }
    // SAFETY: copied out at once.
    let Some(dialing) = (unsafe { DIALED.get(&cookie) }).copied() else {
        return;
    };
    let _ = DIALED.remove(&cookie);
    let dialed = dialing.dst;
    let wanted = filter().netns_cookie;
    if wanted != 0 && dialed.netns_cookie != wanted {
        return;
    }
    let now = now_ns();
    let attempt = Attempt {
        sock,
        start_ns: now,
        closed_ns: now,
        netns_cookie: dialed.netns_cookie,
        cgroup_id: dialing.cgroup_id,
        pid: dialing.pid,
        tid: dialing.tid,
        comm: dialing.comm,
        daddr: dialed.addr,
        dialed_addr: dialed.addr,
        family: dialed.family,
        dport: dialed.port,
        dialed_port: dialed.port,
        syn_count: 0,
        flags: FLAG_DIALED_KNOWN | FLAG_NO_SYN,
        ..Attempt::default()
    };
    emit(EVENT_CONNECT_END, 0, &attempt);
}
