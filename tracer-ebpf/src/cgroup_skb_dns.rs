//! The last DNS tier (`cgroup-skb`), for kernels with none of the others: `cgroup_skb` egress and
//! ingress on the cgroup v2 root see every packet of every socket, and keep UDP DNS queries
//! (destination port 53) leaving a socket and replies (source port 53) delivered to one, in every
//! network namespace. What they do with them is in `dns.rs`.
//!
//! - Egress runs in the sender's context (pid, comm, cgroup are the application's) and after its own
//!   netfilter `OUTPUT`/`POSTROUTING`: the destination is the server after any DNAT in the sender's
//!   namespace. Sockets are known by their cookie.
//! - Ingress runs when the reply is delivered to the socket (never for a socket already closed).
//!
//! Both programs always return 1: they observe, they never drop.
use aya_ebpf::{
    EbpfContext,
    helpers::{
        bpf_get_current_task, bpf_get_socket_cookie, bpf_sk_fullsock, bpf_skb_cgroup_id,
        bpf_skb_load_bytes,
    },
    macros::cgroup_skb,
    programs::SkBuffContext,
};
use tracer_common::{AF_INET, AF_INET6, PendingDns};

use crate::{
    dns::{self, DNS_HEADER_LEN, DNS_PORT, Datagram, DnsSocket, IPPROTO_UDP},
    maps::{hooks_only, sock_offsets},
    sock_fields::{self, read},
};

/// A `cgroup_skb` program's verdict that lets the packet through.
const PASS: i32 = 1;

#[cgroup_skb(egress)]
pub fn dns_egress(ctx: SkBuffContext) -> i32 {
    if !hooks_only() && maybe_udp(&ctx) {
        let _ = query(&ctx);
    }
    PASS
}

#[cgroup_skb(ingress)]
pub fn dns_ingress(ctx: SkBuffContext) -> i32 {
    if !hooks_only() && maybe_udp(&ctx) {
        let _ = reply(&ctx);
    }
    PASS
}

/// These programs see every packet of every socket on the node, nearly all TCP. The socket's
/// protocol is one load from the context (no helper call, no packet bytes), so TCP costs next to
/// nothing; only packets of UDP sockets (or with no socket) are parsed.
fn maybe_udp(ctx: &SkBuffContext) -> bool {
    // SAFETY: `skb` is the context the kernel passed; `sk` is a verifier-checked socket pointer,
    // and `protocol` is read from the full socket only after both null checks.
    unsafe {
        let sk = (*ctx.skb.skb).__bindgen_anon_2.sk;
        if sk.is_null() {
            return true;
        }
        let full = bpf_sk_fullsock(sk);
        // Request and time-wait sockets (TCP only) are not full sockets.
        !full.is_null() && (*full).protocol == u32::from(IPPROTO_UDP)
    }
}

/// The IP and UDP headers of a packet, and where the UDP payload starts.
fn parse_udp(ctx: &SkBuffContext) -> Option<(Datagram, usize)> {
    let first: u8 = ctx.load(0).ok()?;
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    let (family, l4) = match first >> 4 {
        4 => {
            if u16::from(ctx.load::<u8>(9).ok()?) != IPPROTO_UDP {
                return None;
            }
            // A non-first fragment has no UDP header.
            let frag: [u8; 2] = ctx.load(6).ok()?;
            if u16::from_be_bytes(frag) & 0x1fff != 0 {
                return None;
            }
            src[..4].copy_from_slice(&ctx.load::<[u8; 4]>(12).ok()?);
            dst[..4].copy_from_slice(&ctx.load::<[u8; 4]>(16).ok()?);
            (AF_INET, usize::from(first & 0x0f) * 4)
        }
        6 => {
            // UDP right after the fixed header only: extension headers are not followed.
            if u16::from(ctx.load::<u8>(6).ok()?) != IPPROTO_UDP {
                return None;
            }
            src = ctx.load(8).ok()?;
            dst = ctx.load(24).ok()?;
            (AF_INET6, 40)
        }
        _ => return None,
    };
    let ports: [u8; 4] = ctx.load(l4).ok()?;
    let dgram = Datagram {
        family,
        src,
        dst,
        sport: u16::from_be_bytes([ports[0], ports[1]]),
        dport: u16::from_be_bytes([ports[2], ports[3]]),
    };
    Some((dgram, l4 + 8))
}

/// The packet's socket, known by its cookie. Its namespace is read from the socket
/// (`sock_fields::netns_inode`): `bpf_get_netns_cookie` is refused to `cgroup_skb` programs before
/// 6.x.
fn socket(ctx: &SkBuffContext) -> Option<DnsSocket> {
    // SAFETY: `skb` is the context the kernel passed; `sk` is the packet's socket or null.
    let sk = unsafe { (*ctx.skb.skb).__bindgen_anon_2.sk } as u64;
    let sock = if sk == 0 {
        0
    } else {
        sock_fields::as_number(sk)
    };
    // SAFETY: helper valid for cgroup_skb programs (the skb's socket).
    let cookie = unsafe { bpf_get_socket_cookie(ctx.as_ptr()) };
    DnsSocket::of(sock, Some(cookie))
}

fn query(ctx: &SkBuffContext) -> Option<()> {
    let (dgram, payload) = parse_udp(ctx)?;
    if dgram.dport != DNS_PORT {
        return None;
    }
    let socket = socket(ctx)?;
    let header: [u8; DNS_HEADER_LEN] = ctx.load(payload).ok()?;
    // Remote address of a connected socket, network order (0 if unconnected).
    let connected_v4 = if dgram.family == AF_INET {
        ctx.skb.remote_ipv4().to_ne_bytes()
    } else {
        [0; 4]
    };
    let start = payload + DNS_HEADER_LEN;
    let available = (ctx.len() as usize).saturating_sub(start);
    dns::store_query(
        &socket,
        &dgram,
        &header,
        connected_v4,
        |question| {
            if available == 0 {
                return 0;
            }
            let len = dns::question_len(available);
            // SAFETY: `len` is within 1..=DNS_QUESTION_BYTES, the size of the destination.
            let ret = unsafe {
                bpf_skb_load_bytes(
                    ctx.as_ptr(),
                    start as u32,
                    question.as_mut_ptr().cast(),
                    len as u32,
                )
            };
            if ret == 0 { len as u16 } else { 0 }
        },
        |pending| set_caller(ctx, pending),
    )
}

/// The sender (egress runs in its context), from the current task and the socket's cgroup:
/// `cgroup_skb` programs may not call `bpf_get_current_pid_tgid`, `bpf_get_current_comm` or
/// `bpf_get_current_cgroup_id` before 6.x. Offsets from the kernel's BTF.
fn set_caller(ctx: &SkBuffContext, pending: &mut PendingDns) {
    let off = sock_offsets();
    // SAFETY: helpers valid for cgroup_skb programs; `skb` is the context the kernel passed.
    let (task, cgroup_id) = unsafe { (bpf_get_current_task(), bpf_skb_cgroup_id(ctx.skb.skb)) };
    pending.cgroup_id = cgroup_id;
    pending.pid = read(task + u64::from(off.task_tgid));
    pending.tid = read(task + u64::from(off.task_pid));
    pending.comm = read(task + u64::from(off.task_comm));
}

fn reply(ctx: &SkBuffContext) -> Option<()> {
    let (dgram, payload) = parse_udp(ctx)?;
    if dgram.sport != DNS_PORT {
        return None;
    }
    let socket = socket(ctx)?;
    let header: [u8; DNS_HEADER_LEN] = ctx.load(payload).ok()?;
    dns::pair_reply(
        &socket,
        &header,
        Some((dgram.family, dgram.src, dgram.sport)),
    )
}
