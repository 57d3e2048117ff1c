//! An attempt's first SYN: the socket has its route, its local port and its cookie, and the clock
//! starts. Reached from `CLOSE -> SYN_SENT` (`inet_sock_set_state.rs`) or from `tcp_connect()`
//! (`tcp_connect.rs`), whichever the TCP hook tier attaches; both run in the caller's context,
//! inside its `connect()`, before the SYN leaves.
use aya_ebpf::helpers::bpf_get_current_pid_tgid;
use tracer_common::{Attempt, FLAG_DIALED_BY_SOCKET_LB, FLAG_DIALED_KNOWN, counter};

use crate::{
    attempts::{self, Sock},
    maps::{ATTEMPT_SCRATCH, caller, count, filter, now_ns},
    sock_fields,
};

/// Completes the attempt the `connect()` hook opened on `sk`, or opens one for a socket it did not
/// see (a kernel socket).
pub fn on_syn_sent(sk: Sock) {
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
