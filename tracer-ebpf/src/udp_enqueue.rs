//! DNS replies, on the `fentry` and `kprobe` tiers: `__udp_enqueue_schedule_skb(sk, skb)` queues a
//! datagram that arrived for a UDP socket (IPv4 and IPv6 both come here), so a reply counts when it
//! reaches the socket, whether or not the application ever reads it. Only UDP deliveries run this
//! program, once per datagram. The reply's source is read from its IP header (a Service address
//! after the un-DNAT in the receiver's namespace). Checked against Linux 5.10, 6.1, 6.12 and 6.18.
use aya_ebpf::{
    macros::{fentry, kprobe},
    programs::{FEntryContext, ProbeContext},
};

use crate::{
    dns::{self, DNS_PORT, DnsSocket},
    kernel_skb::{KernelSkb, Ports},
    maps::hooks_only,
    sock_fields::as_number,
};

#[fentry(function = "__udp_enqueue_schedule_skb")]
pub fn fentry_udp_enqueue(ctx: FEntryContext) -> i32 {
    arrived(ctx.arg(0), ctx.arg(1))
}

#[kprobe]
pub fn kprobe_udp_enqueue(ctx: ProbeContext) -> u32 {
    match (ctx.arg::<u64>(0), ctx.arg::<u64>(1)) {
        (Some(sk), Some(skb)) => arrived(sk, skb).cast_unsigned(),
        _ => 0,
    }
}

fn arrived(sk: u64, skb: u64) -> i32 {
    if !hooks_only() {
        let _ = reply(as_number(sk), &KernelSkb(as_number(skb)));
    }
    0
}

fn reply(sock: u64, skb: &KernelSkb) -> Option<()> {
    let (dgram, payload) = skb.udp(Ports::InHeader, |sport, _| sport == DNS_PORT)?;
    let socket = DnsSocket::of(sock, None)?;
    let header = payload.dns_header()?;
    dns::pair_reply(
        &socket,
        &header,
        Some((dgram.family, dgram.src, dgram.sport)),
    )
}
