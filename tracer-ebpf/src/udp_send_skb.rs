//! DNS queries, on the `fentry` and `kprobe` tiers: `udp_send_skb(skb, fl4, cork)` and
//! `udp_v6_send_skb(skb, fl6, cork)` hand every UDP datagram a socket sends to the IP layer, in
//! the sender's context: its IP header built, its payload in the linear area, its ports in the flow
//! (the UDP header is written after this hook: `kernel_skb.rs`). Only UDP sends pass here, once
//! per datagram (each message of a `sendmmsg`, the glibc A+AAAA pair included): no TCP connect or
//! packet runs these programs.
//!
//! The destination is the one the socket sends to before netfilter's `OUTPUT` (a Service address,
//! not the backend a DNAT in the sender's own namespace picks); userspace names the backend from
//! conntrack, as for TCP. Sockets are known by their address (`dns::socket_id`): the cookie helper
//! takes no socket read out of an skb. Checked against Linux 5.10, 6.1, 6.12 and 6.18.
use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid,
    macros::{fentry, kprobe},
    programs::{FEntryContext, ProbeContext},
};
use tracer_common::AF_INET;

use crate::{
    dns::{self, DNS_PORT, DnsSocket},
    kernel_skb::{KernelSkb, Ports},
    maps::{caller, hooks_only},
    maps_dns::hook_offsets,
    sock_fields::{self, as_number},
};

#[fentry(function = "udp_send_skb")]
pub fn fentry_udp_send_skb(ctx: FEntryContext) -> i32 {
    sent(ctx.arg(0), ctx.arg(1), Family::V4)
}

#[fentry(function = "udp_v6_send_skb")]
pub fn fentry_udp_v6_send_skb(ctx: FEntryContext) -> i32 {
    sent(ctx.arg(0), ctx.arg(1), Family::V6)
}

#[kprobe]
pub fn kprobe_udp_send_skb(ctx: ProbeContext) -> u32 {
    match (ctx.arg::<u64>(0), ctx.arg::<u64>(1)) {
        (Some(skb), Some(flow)) => sent(skb, flow, Family::V4).cast_unsigned(),
        _ => 0,
    }
}

#[kprobe]
pub fn kprobe_udp_v6_send_skb(ctx: ProbeContext) -> u32 {
    match (ctx.arg::<u64>(0), ctx.arg::<u64>(1)) {
        (Some(skb), Some(flow)) => sent(skb, flow, Family::V6).cast_unsigned(),
        _ => 0,
    }
}

/// Which function: `udp_send_skb(skb, struct flowi4 *, cork)` or `udp_v6_send_skb(skb, struct
/// flowi6 *, cork)`.
enum Family {
    V4,
    V6,
}

fn sent(skb: u64, flow: u64, family: Family) -> i32 {
    if !hooks_only() {
        let off = hook_offsets();
        let uli = match family {
            Family::V4 => off.flowi4_uli,
            Family::V6 => off.flowi6_uli,
        };
        let ports = Ports::InFlow(as_number(flow) + u64::from(uli));
        let _ = query(&KernelSkb(as_number(skb)), ports);
    }
    0
}

fn query(skb: &KernelSkb, ports: Ports) -> Option<()> {
    let (dgram, payload) = skb.udp(ports, |_, dport| dport == DNS_PORT)?;
    let sock = skb.sock();
    let socket = DnsSocket::of(sock, None)?;
    let header = payload.dns_header()?;
    // The remote address of a connected socket (zero if unconnected).
    let connected_v4 = if dgram.family == AF_INET {
        sock_fields::daddr_v4(sock)
    } else {
        [0; 4]
    };
    dns::store_query(
        &socket,
        &dgram,
        &header,
        connected_v4,
        |question| payload.question(question),
        |pending| {
            let who = caller(bpf_get_current_pid_tgid());
            pending.cgroup_id = who.cgroup_id;
            pending.pid = who.pid;
            pending.tid = who.tid;
            pending.comm = who.comm;
        },
    )
}
