//! DNS queries, on the `tracepoint` tier (Linux 6.3+, where fentry is refused: this is what a
//! kernel with tracepoints alone offers that runs per call rather than per packet):
//! `sock:sock_send_length` fires once per `sendmsg` call of any socket, in the sender's context,
//! after the data was sent: `TP_PROTO(struct sock *sk, int ret, int flags)`. A TCP connect runs it
//! 0 times (no data), and a TCP socket returns after one field read. For a UDP socket the query's
//! bytes are read back from the caller's own buffer (`syscall_buffers.rs`); its destination from
//! the socket (connected) or the call's address (unconnected, before any rewrite by a cgroup
//! `sendmsg` hook); its source is the socket's bound address (`0.0.0.0` for an unbound one).
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_get_socket_cookie},
    macros::btf_tracepoint,
    programs::BtfTracePointContext,
};
use tracer_common::{AF_INET, AF_INET6, DNS_QUESTION_BYTES, SockError, counter};

use crate::{
    dns::{self, DNS_HEADER_LEN, DNS_PORT, Datagram, DnsSocket, IPPROTO_UDP},
    maps::{caller, count, hooks_only, now_ns},
    maps_dns::DNS_SOCK_ERRORS,
    sock_fields::{self, as_number},
    syscall_buffers::{self, Buffer, user},
};

const ECONNREFUSED: i32 = 111;

#[btf_tracepoint(function = "sock_send_length")]
pub fn sock_send_length(ctx: BtfTracePointContext) -> i32 {
    if hooks_only() {
        return 0;
    }
    let sk: *mut core::ffi::c_void = ctx.arg(0);
    let sent: i32 = ctx.arg(1);
    let sock = as_number(sk as u64);
    if usize::try_from(sent).map_or(true, |n| n < DNS_HEADER_LEN)
        || sock_fields::protocol(sock) != IPPROTO_UDP
    {
        return 0;
    }
    let Some(buffers) = syscall_buffers::current() else {
        return 0;
    };
    let own = sock_fields::addrs(sock);
    let mut socket = None;
    for i in 0..syscall_buffers::MAX_MMSG {
        if i >= buffers.count {
            break;
        }
        let buffer = &buffers.items[i];
        let Some(dgram) = datagram(&own, buffer.name) else {
            continue;
        };
        if dgram.dport != DNS_PORT || buffer.len < DNS_HEADER_LEN as u64 {
            continue;
        }
        if socket.is_none() {
            // Asked only now: the cookie helper gives the socket a cookie for good.
            // SAFETY: `sk` is the tracepoint's socket argument, a kernel-checked BTF pointer.
            let cookie = unsafe { bpf_get_socket_cookie(sk) };
            socket = DnsSocket::of(sock, Some(cookie));
        }
        let Some(socket) = &socket else {
            return 0;
        };
        let _ = query(sock, socket, &dgram, buffer);
    }
    if let Some(socket) = &socket {
        refused_during_send(sock, socket);
    }
    0
}

/// An ICMP port-unreachable can come back while the send is still in the kernel (a REJECT rule
/// one veth away answers in the same softirq), before this tracepoint, so its error report was
/// older than the query's send time here. The error is still on the socket: kept now.
fn refused_during_send(sock: u64, socket: &DnsSocket) {
    if sock_fields::error(sock) == ECONNREFUSED {
        let value = SockError {
            at_ns: now_ns(),
            errno: ECONNREFUSED,
            _pad: 0,
        };
        let _ = DNS_SOCK_ERRORS.insert(&socket.id, &value, 0);
    }
}

fn query(sock: u64, socket: &DnsSocket, dgram: &Datagram, buffer: &Buffer) -> Option<()> {
    let Some(header) = user::<[u8; DNS_HEADER_LEN]>(buffer.data) else {
        count(counter::DNS_UNREADABLE);
        return None;
    };
    let connected_v4 = if dgram.family == AF_INET {
        sock_fields::daddr_v4(sock)
    } else {
        [0; 4]
    };
    dns::store_query(
        socket,
        dgram,
        &header,
        connected_v4,
        |question| user_question(buffer, question),
        |pending| {
            let who = caller(bpf_get_current_pid_tgid());
            pending.cgroup_id = who.cgroup_id;
            pending.pid = who.pid;
            pending.tid = who.tid;
            pending.comm = who.comm;
        },
    )
}

/// Where the datagram went: the address the call named, else the socket's peer (`own`).
fn datagram(own: &sock_fields::Addrs, name: u64) -> Option<Datagram> {
    let mut dgram = Datagram {
        family: own.family,
        src: own.saddr,
        dst: own.daddr,
        sport: own.sport,
        dport: own.dport,
    };
    if name != 0 {
        // sockaddr_in: family, port (network order), address at 4; sockaddr_in6: address at 8.
        let head: [u8; 4] = user(name)?;
        let family = u16::from_ne_bytes([head[0], head[1]]);
        dgram.dport = u16::from_be_bytes([head[2], head[3]]);
        dgram.dst = [0; 16];
        if family == AF_INET {
            dgram.dst[..4].copy_from_slice(&user::<[u8; 4]>(name + 4)?);
        } else if family == AF_INET6 {
            dgram.dst = user(name + 8)?;
        } else {
            return None;
        }
        dgram.family = family;
    }
    Some(dgram)
}

/// Copies the question's first bytes from the caller's buffer.
fn user_question(buffer: &Buffer, question: &mut [u8; DNS_QUESTION_BYTES]) -> u16 {
    let available = buffer.len.saturating_sub(DNS_HEADER_LEN as u64) as usize;
    if available == 0 {
        return 0;
    }
    let len = dns::question_len(available);
    // SAFETY: bpf_probe_read_user tolerates any address and fails cleanly; `len` is within
    // 1..=DNS_QUESTION_BYTES, the size of the destination.
    let read = unsafe {
        aya_ebpf::helpers::bpf_probe_read_user_buf(
            (buffer.data + DNS_HEADER_LEN as u64) as *const u8,
            &mut question[..len],
        )
    };
    if read.is_ok() { len as u16 } else { 0 }
}
