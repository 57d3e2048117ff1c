//! `cgroup/connect4` and `cgroup/connect6` on the cgroup v2 root: run inside every `connect()` on the
//! node, before the kernel picks a route. Two things only this hook knows:
//! - the network namespace (read from the socket, `sock_fields::netns_inode`), used to filter in the
//!   kernel and to name the namespace in userspace;
//! - the address the application passed, before a socket-level load balancer (Cilium's socket LB)
//!   rewrites it: the Service address the app meant. Where the kernel runs Cilium's hook first (no
//!   `BPF_F_PREORDER`), the address is already the backend, and Cilium's reverse socket NAT map,
//!   read here while the socket lives, says what was dialled (Cilium deletes the entry when the
//!   socket is released, often before userspace could ask).
//!
//! It also records the caller (this is its own context), and opens the attempt (`attempts.rs`),
//! keyed by the socket's kernel address (the `sk` every later hook gets). `inet_sock_set_state.rs`
//! completes it at `SYN_SENT`; one destroyed without ever getting there failed before any SYN left
//! (`tcp_destroy_sock.rs`). Always allows the call.
//!
//! The hook runs once per attempt: the kernel calls it only for a socket that is not connecting or
//! connected yet, not for the repeated `connect()` calls that poll a non-blocking one.
use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_get_socket_cookie},
    macros::cgroup_sock_addr,
    programs::SockAddrContext,
};
use tracer_common::{
    AF_INET, AF_INET6, Attempt, FLAG_DIALED_BY_SOCKET_LB, FLAG_DIALED_KNOWN,
    cilium::{REVERSE_SK4_BOUND, REVERSE_SK6_BOUND, RevSk4Key, RevSk6Key},
    counter,
};

use crate::{
    attempts::{self, Sock},
    maps::{
        CILIUM_REVERSE_SK4, CILIUM_REVERSE_SK6, caller, cilium_reverse_sk, count, filter,
        hooks_only,
    },
    sock_fields,
};

const IPPROTO_TCP: u32 = 6;
/// Return value that lets the `connect()` go ahead unchanged.
const ALLOW: i32 = 1;

#[cgroup_sock_addr(connect4)]
pub fn connect4(ctx: SockAddrContext) -> i32 {
    if hooks_only() {
        return ALLOW;
    }
    remember(&ctx, AF_INET);
    ALLOW
}

#[cgroup_sock_addr(connect6)]
pub fn connect6(ctx: SockAddrContext) -> i32 {
    if hooks_only() {
        return ALLOW;
    }
    remember(&ctx, AF_INET6);
    ALLOW
}

#[expect(
    clippy::inline_always,
    reason = "inlined into each hook, `family` is a constant and only that family's address fields are \
              loaded, each at a constant context offset; otherwise LLVM computes a field pointer on \
              one branch and loads through it after the merge, which the verifier rejects (modified \
              ctx ptr)"
)]
#[inline(always)]
fn remember(ctx: &SockAddrContext, family: u16) {
    // SAFETY: ctx.sock_addr is the kernel-provided context; these fields are readable in connect hooks.
    let sa = unsafe { &*ctx.sock_addr };
    if sa.protocol != IPPROTO_TCP {
        return;
    }
    let mut addr = [0u8; 16];
    if family == AF_INET {
        addr[..4].copy_from_slice(&sa.user_ip4.to_ne_bytes());
    } else {
        for (i, word) in sa.user_ip6.iter().enumerate() {
            addr[i * 4..i * 4 + 4].copy_from_slice(&word.to_ne_bytes());
        }
    }
    // SAFETY: `sk` is the socket being connected, always set in connect hooks. Its address as a
    // number is the attempt's key (a privileged loader may store a pointer's value).
    let sock = unsafe { sa.__bindgen_anon_1.sk } as u64;
    let netns_inode = sock_fields::netns_inode(sock_fields::as_number(sock));
    let wanted = filter().netns_inode;
    if wanted != 0 && netns_inode != wanted {
        return;
    }
    // user_port holds the port in network order in its low 16 bits.
    let port = u16::from_be(sa.user_port as u16);
    let who = caller(bpf_get_current_pid_tgid());
    let mut attempt = Attempt {
        sock,
        netns_inode,
        cgroup_id: who.cgroup_id,
        pid: who.pid,
        tid: who.tid,
        comm: who.comm,
        daddr: addr,
        dialed_addr: addr,
        family,
        dport: port,
        dialed_port: port,
        flags: FLAG_DIALED_KNOWN,
        ..Attempt::default()
    };
    if let Some((dialed, dialed_port)) = dialled_via_cilium(ctx, family, &addr, sa.user_port) {
        attempt.dialed_addr = dialed;
        attempt.dialed_port = dialed_port;
        attempt.flags |= FLAG_DIALED_BY_SOCKET_LB;
    }
    count(counter::ATTEMPTS_STARTED);
    attempts::open(Sock(sock), &attempt);
}

/// The Service address and port (host order) Cilium rewrote this `connect()` from, when its map
/// is bound and has the socket: keyed by the socket's cookie and the backend it now connects to
/// (`addr`, and `user_port` in network order in its low 16 bits).
#[expect(
    clippy::inline_always,
    reason = "inlined into `remember` so `family` stays a constant and one family's lookup is kept"
)]
#[inline(always)]
fn dialled_via_cilium(
    ctx: &SockAddrContext,
    family: u16,
    addr: &[u8; 16],
    user_port: u32,
) -> Option<([u8; 16], u16)> {
    let bound = cilium_reverse_sk();
    let port = (user_port as u16).to_ne_bytes();
    let mut dialed = [0u8; 16];
    if family == AF_INET {
        if bound & REVERSE_SK4_BOUND == 0 {
            return None;
        }
        let mut address = [0u8; 4];
        address.copy_from_slice(&addr[..4]);
        let key = RevSk4Key {
            cookie: cookie(ctx),
            address,
            port,
            pad: [0; 2],
        };
        // SAFETY: the value is copied out at once, before any other map call.
        let value = *unsafe { CILIUM_REVERSE_SK4.get(&key) }?;
        dialed[..4].copy_from_slice(&value.address);
        Some((dialed, u16::from_be_bytes(value.port)))
    } else {
        if bound & REVERSE_SK6_BOUND == 0 {
            return None;
        }
        let key = RevSk6Key {
            cookie: cookie(ctx),
            address: *addr,
            port,
            pad: [0; 2],
            tail: [0; 4],
        };
        // SAFETY: as above.
        let value = *unsafe { CILIUM_REVERSE_SK6.get(&key) }?;
        Some((value.address, u16::from_be_bytes(value.port)))
    }
}

fn cookie(ctx: &SockAddrContext) -> u64 {
    // SAFETY: the helper reads the context's socket, always set in connect hooks.
    unsafe { bpf_get_socket_cookie(ctx.as_ptr()) }
}
