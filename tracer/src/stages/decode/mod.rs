//! Stage 2 of the pipeline: ring-buffer bytes -> one typed event.
//!
//! The only place that reads a record's kind (its first `u32`) and the only place that converts
//! what the kernel writes (an address family and 16 address bytes, a NUL-padded `comm`): the
//! events that flow on carry `SocketAddr`s and `String`s. What userspace reads from the kernel's
//! maps rather than its ring buffer (expired DNS queries, handshakes given up, healthy counts)
//! goes through the same conversions, here.
//!
//! - `connect.rs`: TCP connect attempts (SYN retransmits, ends) and the healthy connects counted.
//! - `dns.rs`: UDP DNS queries and their slow or error replies, the DNS servers counted.
//! - `reply.rs`: server sockets whose replies were lost.
//!
//! A record shorter than its kind requires, of an unknown kind, or with an address family other
//! than IPv4 or IPv6 is a `DecodeError` (counted by the caller, never a panic).
mod connect;
mod dns;
mod reply;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tracer_common::{
    AF_INET, AF_INET6, ConnectEvent, DnsEvent, EVENT_CONNECT_END, EVENT_DNS_REPLY, EVENT_REPLY_END,
    EVENT_REPLY_RETRANSMIT, EVENT_SYN_RETRANSMIT, ReplyEvent,
};

pub use self::{
    connect::{Attempt, AttemptFlags, HealthyConnects, TcpEvent, healthy_connects},
    dns::{DnsReply, DnsServer, Query, dns_server, query},
    reply::{ReplyLost, reply_lost},
};

/// A decoded ring-buffer record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelEvent {
    /// A TCP connect attempt that needs attention, live or ended.
    Tcp(TcpEvent),
    /// A slow or error reply to a UDP DNS query.
    DnsReply(DnsReply),
    /// A server socket whose replies are not acknowledged, live or at its end.
    ReplyLost(ReplyLost),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("record of {len} bytes is too short (needs {expected})")]
    Truncated { len: usize, expected: usize },
    #[error("unknown record kind {kind}")]
    UnknownKind { kind: u32 },
    #[error("unknown address family {family}")]
    UnknownFamily { family: u16 },
}

pub fn decode(bytes: &[u8]) -> Result<KernelEvent, DecodeError> {
    let kind_bytes: [u8; 4] =
        bytes
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .ok_or(DecodeError::Truncated {
                len: bytes.len(),
                expected: 4,
            })?;
    match u32::from_ne_bytes(kind_bytes) {
        kind @ (EVENT_SYN_RETRANSMIT | EVENT_CONNECT_END) => {
            connect::tcp_event(kind, &read_record::<ConnectEvent>(bytes)?).map(KernelEvent::Tcp)
        }
        EVENT_DNS_REPLY => Ok(KernelEvent::DnsReply(dns::reply(&read_record::<DnsEvent>(
            bytes,
        )?))),
        kind @ (EVENT_REPLY_RETRANSMIT | EVENT_REPLY_END) => {
            let ev = read_record::<ReplyEvent>(bytes)?;
            reply_lost(&ev.loss, ev.event_ns, kind == EVENT_REPLY_END).map(KernelEvent::ReplyLost)
        }
        kind => Err(DecodeError::UnknownKind { kind }),
    }
}

fn read_record<T: aya::Pod>(bytes: &[u8]) -> Result<T, DecodeError> {
    let expected = size_of::<T>();
    if bytes.len() < expected {
        return Err(DecodeError::Truncated {
            len: bytes.len(),
            expected,
        });
    }
    // SAFETY: length checked above; T is Pod (valid for any bit pattern); read_unaligned copes with
    // any alignment of the ring-buffer slice.
    Ok(unsafe { bytes.as_ptr().cast::<T>().read_unaligned() })
}

/// An address as the kernel stores it (IPv4 in the first 4 bytes) -> `IpAddr`.
fn ip_from_kernel(family: u16, bytes: [u8; 16]) -> Result<IpAddr, DecodeError> {
    match family {
        AF_INET => Ok(IpAddr::V4(Ipv4Addr::new(
            bytes[0], bytes[1], bytes[2], bytes[3],
        ))),
        AF_INET6 => {
            let v6 = Ipv6Addr::from(bytes);
            // A v4-mapped address is a v4 connect made through an AF_INET6 socket (Java does this).
            Ok(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4))
        }
        family => Err(DecodeError::UnknownFamily { family }),
    }
}

fn socket_addr(family: u16, bytes: [u8; 16], port: u16) -> Result<SocketAddr, DecodeError> {
    Ok(SocketAddr::new(ip_from_kernel(family, bytes)?, port))
}

/// `comm` as text: up to the first NUL.
fn comm_to_string(comm: &[u8]) -> String {
    let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..end]).into_owned()
}

#[cfg(test)]
pub(crate) fn bytes_of<T: aya::Pod>(value: &T) -> Vec<u8> {
    // SAFETY: T is Pod; viewing it as bytes is sound.
    unsafe { std::slice::from_raw_parts(std::ptr::from_ref(value).cast::<u8>(), size_of::<T>()) }
        .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kind_is_an_error() {
        assert_eq!(
            decode(&[9, 0, 0, 0, 1, 2]),
            Err(DecodeError::UnknownKind { kind: 9 })
        );
    }

    #[test]
    fn every_kind_is_read_from_its_first_u32() {
        let connect = ConnectEvent {
            kind: EVENT_SYN_RETRANSMIT,
            attempt: tracer_common::Attempt {
                family: AF_INET,
                ..tracer_common::Attempt::default()
            },
            ..ConnectEvent::default()
        };
        let dns = DnsEvent {
            kind: EVENT_DNS_REPLY,
            ..DnsEvent::default()
        };
        let reply = ReplyEvent {
            kind: EVENT_REPLY_END,
            loss: tracer_common::ReplyLoss {
                family: AF_INET6,
                ..tracer_common::ReplyLoss::default()
            },
            ..ReplyEvent::default()
        };
        assert!(matches!(
            decode(&bytes_of(&connect)),
            Ok(KernelEvent::Tcp(TcpEvent::SynRetransmit { .. }))
        ));
        assert!(matches!(
            decode(&bytes_of(&dns)),
            Ok(KernelEvent::DnsReply(_))
        ));
        assert!(matches!(
            decode(&bytes_of(&reply)),
            Ok(KernelEvent::ReplyLost(ReplyLost { is_final: true, .. }))
        ));
    }

    #[test]
    fn v4_mapped_v6_addresses_read_as_v4() {
        let mut b = [0u8; 16];
        b[10] = 0xff;
        b[11] = 0xff;
        b[12..].copy_from_slice(&[10, 0, 0, 7]);
        assert_eq!(
            ip_from_kernel(AF_INET6, b),
            Ok("10.0.0.7".parse().expect("ip"))
        );
    }

    #[test]
    fn an_unknown_address_family_is_an_error() {
        assert_eq!(
            ip_from_kernel(99, [0; 16]),
            Err(DecodeError::UnknownFamily { family: 99 })
        );
    }

    #[test]
    fn comm_ends_at_its_first_nul() {
        assert_eq!(comm_to_string(b"curl\0\0\0x"), "curl");
        assert_eq!(comm_to_string(b"0123456789abcdef"), "0123456789abcdef");
    }
}
