//! `cgroup_skb` egress and ingress on the cgroup v2 root: every UDP DNS query (destination port 53)
//! leaving a socket and every reply (source port 53) delivered to one, in every network namespace.
//!
//! - Egress runs in the sender's context (pid, comm, cgroup are the application's) and after its own
//!   netfilter `OUTPUT`/`POSTROUTING`: the destination is the server after any DNAT in the sender's
//!   namespace. The query is remembered in `PENDING_DNS` by (namespace, socket cookie, query id)
//!   with the first bytes of its question.
//! - Ingress runs when the reply is delivered to the socket (never for a socket already closed). The
//!   query is looked up and removed: a fast NOERROR reply is only counted per server
//!   (`DNS_HEALTHY`); a slow one or an error rcode is sent to userspace (`EVENT_DNS_REPLY`).
//! - Queries nobody answers stay in `PENDING_DNS` until userspace expires them.
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
use tracer_common::{
    AF_INET, AF_INET6, DNS_QUESTION_BYTES, DnsEvent, DnsHealthyStats, DnsKey, EVENT_DNS_REPLY,
    Endpoint, PendingDns,
    cilium::{REVERSE_SK4_BOUND, RevSk4Key},
    counter,
};

use crate::{
    maps::{
        CILIUM_REVERSE_SK4, EVENTS, cilium_reverse_sk, count, filter, hooks_only, now_ns,
        sock_offsets,
    },
    maps_dns::{DNS_HEALTHY, DNS_SOCK_ANSWERED, PENDING_DNS, QUERY_SCRATCH, dns_config},
    sock_fields::{self, read},
};

/// A `cgroup_skb` program's verdict that lets the packet through.
const PASS: i32 = 1;
const IPPROTO_UDP: u8 = 17;
const DNS_PORT: u16 = 53;
const DNS_HEADER_LEN: usize = 12;
/// `BPF_NOEXIST`: a retransmitted query (same socket, same id) keeps its first send time.
const BPF_NOEXIST: u64 = 1;
const E2BIG: i32 = 7;

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

/// The IP and UDP headers of a packet: family, local and remote addresses, ports, and where the
/// UDP payload starts.
struct Udp {
    family: u16,
    src: [u8; 16],
    dst: [u8; 16],
    sport: u16,
    dport: u16,
    payload: usize,
}

fn parse_udp(ctx: &SkBuffContext) -> Option<Udp> {
    let first: u8 = ctx.load(0).ok()?;
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    let (family, l4) = match first >> 4 {
        4 => {
            if ctx.load::<u8>(9).ok()? != IPPROTO_UDP {
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
            if ctx.load::<u8>(6).ok()? != IPPROTO_UDP {
                return None;
            }
            src = ctx.load(8).ok()?;
            dst = ctx.load(24).ok()?;
            (AF_INET6, 40)
        }
        _ => return None,
    };
    let ports: [u8; 4] = ctx.load(l4).ok()?;
    Some(Udp {
        family,
        src,
        dst,
        sport: u16::from_be_bytes([ports[0], ports[1]]),
        dport: u16::from_be_bytes([ports[2], ports[3]]),
        payload: l4 + 8,
    })
}

/// The namespace of the packet's socket, or `None` when the kernel filter excludes it. Read from the
/// socket (`sock_fields::netns_inode`): `bpf_get_netns_cookie` is refused to `cgroup_skb` programs
/// before 6.x.
fn netns_inode(ctx: &SkBuffContext) -> Option<u64> {
    // SAFETY: `skb` is the context the kernel passed; `sk` is the packet's socket or null.
    let sk = unsafe { (*ctx.skb.skb).__bindgen_anon_2.sk } as u64;
    let inode = if sk == 0 {
        0
    } else {
        sock_fields::netns_inode(sock_fields::as_number(sk))
    };
    let wanted = filter().netns_inode;
    (wanted == 0 || wanted == inode).then_some(inode)
}

fn socket_cookie(ctx: &SkBuffContext) -> u64 {
    // SAFETY: helper valid for cgroup_skb programs (the skb's socket).
    unsafe { bpf_get_socket_cookie(ctx.as_ptr()) }
}

fn query(ctx: &SkBuffContext) -> Option<()> {
    let udp = parse_udp(ctx)?;
    if udp.dport != DNS_PORT {
        return None;
    }
    let netns_inode = netns_inode(ctx)?;
    let header: [u8; DNS_HEADER_LEN] = ctx.load(udp.payload).ok()?;
    let flags = u16::from_be_bytes([header[2], header[3]]);
    if flags & 0x8000 != 0 {
        return None; // a response sent to port 53 is not a query
    }
    count(counter::DNS_QUERIES);
    let key = DnsKey {
        netns_inode,
        socket_cookie: socket_cookie(ctx),
        id: u16::from_be_bytes([header[0], header[1]]),
        _pad: [0; 6],
    };
    let pending = QUERY_SCRATCH.get_ptr_mut(0)?;
    // SAFETY: a per-CPU map value, this program's alone while it runs on this CPU.
    let pending = unsafe { &mut *pending };
    *pending = PendingDns {
        sent_ns: now_ns(),
        client_addr: udp.src,
        server_addr: udp.dst,
        client_port: udp.sport,
        server_port: udp.dport,
        family: udp.family,
        flags,
        ..PendingDns::default()
    };
    set_caller(ctx, pending);
    if udp.family == AF_INET {
        // Remote address of a connected socket, network order (0 if unconnected).
        let remote = ctx.skb.remote_ipv4().to_ne_bytes();
        pending.dialed_addr[..4].copy_from_slice(&remote);
        if remote != [0; 4] && cilium_reverse_sk() & REVERSE_SK4_BOUND != 0 {
            // Cilium's socket LB connected it to the backend; its map, read while the socket
            // lives, says which Service was dialled (it is gone once the socket is released).
            let socket = RevSk4Key {
                cookie: key.socket_cookie,
                address: remote,
                port: udp.dport.to_be_bytes(),
                pad: [0; 2],
            };
            // SAFETY: the value is copied out at once.
            if let Some(entry) = unsafe { CILIUM_REVERSE_SK4.get(&socket) } {
                pending.dialed_addr[..4].copy_from_slice(&entry.address);
                pending.dialed_by_socket_lb = 1;
            }
        }
    }
    let start = udp.payload + DNS_HEADER_LEN;
    let available = (ctx.len() as usize).saturating_sub(start);
    if available > 0 {
        // In 1..=DNS_QUESTION_BYTES by construction (the mask is what the verifier checks);
        // `available` itself when it is smaller.
        let len = (available.min(DNS_QUESTION_BYTES) - 1) & (DNS_QUESTION_BYTES - 1);
        let len = len + 1;
        // SAFETY: `len` is within 1..=DNS_QUESTION_BYTES, the size of the destination.
        let ret = unsafe {
            bpf_skb_load_bytes(
                ctx.as_ptr(),
                start as u32,
                pending.question.as_mut_ptr().cast(),
                len as u32,
            )
        };
        if ret == 0 {
            pending.question_len = len as u16;
        }
    }
    if let Err(e) = PENDING_DNS.insert(&key, pending, BPF_NOEXIST)
        && e == -E2BIG
    {
        count(counter::DNS_PENDING_FULL);
    }
    Some(())
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
    let udp = parse_udp(ctx)?;
    if udp.sport != DNS_PORT {
        return None;
    }
    let netns_inode = netns_inode(ctx)?;
    let header: [u8; 4] = ctx.load(udp.payload).ok()?;
    if header[2] & 0x80 == 0 {
        return None; // not a response
    }
    let key = DnsKey {
        netns_inode,
        socket_cookie: socket_cookie(ctx),
        id: u16::from_be_bytes([header[0], header[1]]),
        _pad: [0; 6],
    };
    let pending = PENDING_DNS.get_ptr(&key)?;
    let now = now_ns();
    // SAFETY: map value pointer from a successful lookup, read before the remove below.
    let sent_ns = unsafe { (*pending).sent_ns };
    let latency = now.saturating_sub(sent_ns);
    let rcode = header[3] & 0x0f;
    if rcode == 0 && latency < dns_config().slow_reply_ns {
        count(counter::DNS_HEALTHY_REPLIES);
        healthy(netns_inode, &udp, latency);
    } else {
        match EVENTS.reserve::<DnsEvent>(0) {
            Some(mut entry) => {
                let ev = entry.as_mut_ptr();
                // SAFETY: `ev` points at the reserved record, `pending` at a live map value.
                unsafe {
                    (*ev).kind = EVENT_DNS_REPLY;
                    (*ev).rcode = rcode;
                    (*ev)._pad = [0; 3];
                    (*ev).reply_ns = now;
                    (*ev).key = key;
                    (*ev).reply_addr = udp.src;
                    (*ev).reply_port = udp.sport;
                    (*ev)._pad2 = [0; 6];
                    (*ev).query = *pending;
                }
                entry.submit(0);
                count(counter::EVENTS_SENT);
            }
            None => count(counter::DNS_RINGBUF_FULL),
        }
    }
    let _ = PENDING_DNS.remove(&key);
    let _ = DNS_SOCK_ANSWERED.insert(&key.socket_cookie, &now, 0);
    Some(())
}

fn healthy(netns_inode: u64, udp: &Udp, latency: u64) {
    let server = Endpoint {
        netns_inode,
        addr: udp.src,
        port: udp.sport,
        family: udp.family,
        _pad: [0; 4],
    };
    if let Some(stats) = DNS_HEALTHY.get_ptr_mut(&server) {
        // SAFETY: per-CPU value, no concurrent writer on this CPU.
        unsafe {
            (*stats).answered += 1;
            (*stats).latency_ns_total += latency;
        }
        return;
    }
    let stats = DnsHealthyStats {
        answered: 1,
        latency_ns_total: latency,
    };
    if DNS_HEALTHY.insert(&server, &stats, 0).is_err() {
        count(counter::DNS_HEALTHY_MAP_FULL);
    }
}
