//! A UDP datagram in a `struct sk_buff` the kernel handed a function hook (`udp_send_skb.rs`,
//! `udp_enqueue.rs`): its IP and UDP headers and the DNS header after them, read from kernel memory
//! at offsets from the running kernel's BTF (`HookOffsets`). On the way in the headers were pulled
//! into the linear area by the IP and UDP receive paths. On the way out the IP header is built and
//! the payload copied into the linear area, but the UDP header is written by `udp_send_skb()`
//! itself, after the hook: its ports are read from the flow the caller passed (`Ports::InFlow`).
use aya_ebpf::helpers::bpf_probe_read_kernel_buf;
use tracer_common::{AF_INET, AF_INET6, DNS_QUESTION_BYTES, counter};

use crate::{
    dns::{self, DNS_HEADER_LEN, Datagram},
    maps::count,
    maps_dns::hook_offsets,
    sock_fields::read,
};

/// The `struct sk_buff *` as a number.
pub struct KernelSkb(pub u64);

/// Where a datagram's ports are.
pub enum Ports {
    /// In its UDP header.
    InHeader,
    /// In a `union flowi_uli` at this kernel address: destination then source, network order.
    InFlow(u64),
}

/// Where a datagram's UDP payload is in kernel memory, and how long it is.
pub struct Payload {
    pub at: u64,
    pub len: u64,
}

impl KernelSkb {
    /// `skb->sk`: the socket it was sent from (on the way out).
    pub fn sock(&self) -> u64 {
        read(self.0 + u64::from(hook_offsets().skb_sk))
    }

    /// The datagram's addresses and ports, and its payload, when its ports are `wanted` (source,
    /// destination); `None` when they are not, or it is not IPv4 or IPv6 UDP, or its headers
    /// cannot be read. The UDP header is read first: most datagrams stop there.
    pub fn udp(
        &self,
        ports: Ports,
        wanted: impl FnOnce(u16, u16) -> bool,
    ) -> Option<(Datagram, Payload)> {
        let off = hook_offsets();
        let head: u64 = read(self.0 + u64::from(off.skb_head));
        if head == 0 {
            return None;
        }
        let transport = head + u64::from(read::<u16>(self.0 + u64::from(off.skb_transport_header)));
        let (sport, dport, udp_len) = match ports {
            Ports::InHeader => {
                let udp: [u8; 8] = read(transport);
                (
                    u16::from_be_bytes([udp[0], udp[1]]),
                    u16::from_be_bytes([udp[2], udp[3]]),
                    Some(u64::from(u16::from_be_bytes([udp[4], udp[5]]))),
                )
            }
            Ports::InFlow(uli) => {
                let ports: [u8; 4] = read(uli);
                (
                    u16::from_be_bytes([ports[2], ports[3]]),
                    u16::from_be_bytes([ports[0], ports[1]]),
                    None,
                )
            }
        };
        if !wanted(sport, dport) {
            return None;
        }
        let network = head + u64::from(read::<u16>(self.0 + u64::from(off.skb_network_header)));
        let linear_end = head + u64::from(read::<u32>(self.0 + u64::from(off.skb_tail)));
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        let family = match read::<u8>(network) >> 4 {
            4 => {
                src[..4].copy_from_slice(&read::<[u8; 4]>(network + 12));
                dst[..4].copy_from_slice(&read::<[u8; 4]>(network + 16));
                AF_INET
            }
            6 => {
                src = read(network + 8);
                dst = read(network + 24);
                AF_INET6
            }
            _ => return None,
        };
        let at = transport + 8;
        // The payload within the linear area, and as the UDP header counts it where it is written.
        let linear = linear_end.saturating_sub(at);
        let len = udp_len.map_or(linear, |l| l.saturating_sub(8).min(linear));
        let dgram = Datagram {
            family,
            src,
            dst,
            sport,
            dport,
        };
        Some((dgram, Payload { at, len }))
    }
}

impl Payload {
    /// The DNS header, or `None` (counted) when the payload is too short for one.
    pub fn dns_header(&self) -> Option<[u8; DNS_HEADER_LEN]> {
        if self.len < DNS_HEADER_LEN as u64 {
            count(counter::DNS_UNREADABLE);
            return None;
        }
        Some(read(self.at))
    }

    /// Copies the question's first bytes into `question`; returns how many.
    pub fn question(&self, question: &mut [u8; DNS_QUESTION_BYTES]) -> u16 {
        let available = self.len.saturating_sub(DNS_HEADER_LEN as u64) as usize;
        if available == 0 {
            return 0;
        }
        let len = dns::question_len(available);
        // SAFETY: bpf_probe_read_kernel tolerates any address and fails cleanly; `len` is within
        // 1..=DNS_QUESTION_BYTES, the size of the destination.
        let read = unsafe {
            bpf_probe_read_kernel_buf(
                (self.at + DNS_HEADER_LEN as u64) as *const u8,
                &mut question[..len],
            )
        };
        if read.is_ok() { len as u16 } else { 0 }
    }
}
