//! DNS queries, on the `fentry` and `kprobe` tiers: `udp_send_skb(skb, fl4, cork)` and
//! `udp_v6_send_skb(skb, fl6, cork)` hand every UDP datagram a socket sends to the IP layer, built
//! whole (IP header, UDP header, payload in the linear area: `kernel_skb.rs`), in the sender's
//! context. Only UDP sends pass here, once per datagram (each message of a `sendmmsg`, the glibc
//! A+AAAA pair included): no TCP connect or packet runs these programs.
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
    kernel_skb::KernelSkb,
    maps::{caller, hooks_only},
    sock_fields::{self, as_number},
};

#[fentry(function = "udp_send_skb")]
pub fn fentry_udp_send_skb(ctx: FEntryContext) -> i32 {
    sent(ctx.arg(0))
}

#[fentry(function = "udp_v6_send_skb")]
pub fn fentry_udp_v6_send_skb(ctx: FEntryContext) -> i32 {
    sent(ctx.arg(0))
}

#[kprobe]
pub fn kprobe_udp_send_skb(ctx: ProbeContext) -> u32 {
    ctx.arg(0).map_or(0, |skb: u64| sent(skb) as u32)
}

#[kprobe]
pub fn kprobe_udp_v6_send_skb(ctx: ProbeContext) -> u32 {
    ctx.arg(0).map_or(0, |skb: u64| sent(skb) as u32)
}

fn sent(skb: u64) -> i32 {
    if !hooks_only() {
        let _ = query(&KernelSkb(as_number(skb)));
    }
    0
}

fn query(skb: &KernelSkb) -> Option<()> {
    let (dgram, payload) = skb.udp(|_, dport| dport == DNS_PORT)?;
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
