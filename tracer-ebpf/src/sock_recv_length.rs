//! DNS replies, on the `tracepoint` tier: `sock:sock_recv_length` fires once per `recvmsg` call of
//! any socket, in the reader's context, after the data was copied out: `TP_PROTO(struct sock *sk,
//! int ret, int flags)`. The reply's header is read back from the caller's buffer
//! (`syscall_buffers.rs`). So a reply counts when the application reads it: one it never reads
//! (it closed the socket first) stays unanswered, a degraded capability on this tier. The reply's
//! source is the socket's peer when connected; for an unconnected socket the address is written
//! to the caller only after this point, so the query's server stands for it.
use aya_ebpf::{
    helpers::bpf_get_socket_cookie, macros::btf_tracepoint, programs::BtfTracePointContext,
};
use tracer_common::counter;

use crate::{
    dns::{self, DNS_HEADER_LEN, DnsSocket, IPPROTO_UDP},
    maps::{count, hooks_only},
    sock_fields::{self, as_number},
    syscall_buffers::{self, user},
};

#[btf_tracepoint(function = "sock_recv_length")]
pub fn sock_recv_length(ctx: BtfTracePointContext) -> i32 {
    if hooks_only() {
        return 0;
    }
    let sk: *mut core::ffi::c_void = ctx.arg(0);
    let received: i32 = ctx.arg(1);
    let sock = as_number(sk as u64);
    if usize::try_from(received).map_or(true, |n| n < DNS_HEADER_LEN)
        || sock_fields::protocol(sock) != IPPROTO_UDP
    {
        return 0;
    }
    let Some(buffers) = syscall_buffers::current() else {
        return 0;
    };
    let mut socket = None;
    for i in 0..syscall_buffers::MAX_MMSG {
        if i >= buffers.count {
            break;
        }
        let buffer = &buffers.items[i];
        if buffer.len < DNS_HEADER_LEN as u64 {
            continue;
        }
        let Some(header) = user::<[u8; DNS_HEADER_LEN]>(buffer.data) else {
            count(counter::DNS_UNREADABLE);
            continue;
        };
        // A response with one question: the shape of every DNS reply, rarely of anything else
        // a UDP socket reads, so other traffic stops before the table.
        if !dns::is_response(&header) || header[4..6] != [0, 1] {
            continue;
        }
        if socket.is_none() {
            // SAFETY: `sk` is the tracepoint's socket argument, a kernel-checked BTF pointer.
            let cookie = unsafe { bpf_get_socket_cookie(sk) };
            socket = DnsSocket::of(sock, Some(cookie));
        }
        let Some(socket) = &socket else {
            return 0;
        };
        let own = sock_fields::addrs(sock);
        let from = (own.dport != 0).then_some((own.family, own.daddr, own.dport));
        let _ = dns::pair_reply(socket, &header, from);
    }
    0
}
