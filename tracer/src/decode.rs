//! Stage 2 of the pipeline: raw ring-buffer bytes -> typed kernel events.
//!
//! The kernel writes `#[repr(C)]` records whose first `u32` is the kind; anything shorter than its kind
//! requires, or of an unknown kind, is a `DecodeError` (counted by the caller, never a panic).
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use tracer_common::{
    AF_INET, AF_INET6, Attempt, ConnectEvent, EVENT_CONNECT_END, EVENT_SYN_RETRANSMIT,
};

/// A decoded ring-buffer record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelEvent {
    /// An open attempt sent another SYN: it is unanswered so far.
    SynRetransmit { at_ns: u64, attempt: Attempt },
    /// An attempt that needs attention ended; `error` is the errno reported on the socket (0 if none).
    ConnectEnd {
        at_ns: u64,
        error: i32,
        attempt: Attempt,
    },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("record of {len} bytes is too short (needs {expected})")]
    Truncated { len: usize, expected: usize },
    #[error("unknown record kind {kind}")]
    UnknownKind { kind: u32 },
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
    let kind = u32::from_ne_bytes(kind_bytes);
    match kind {
        EVENT_SYN_RETRANSMIT | EVENT_CONNECT_END => {
            let ev = read_record::<ConnectEvent>(bytes)?;
            Ok(if kind == EVENT_SYN_RETRANSMIT {
                KernelEvent::SynRetransmit {
                    at_ns: ev.event_ns,
                    attempt: ev.attempt,
                }
            } else {
                KernelEvent::ConnectEnd {
                    at_ns: ev.event_ns,
                    error: ev.error,
                    attempt: ev.attempt,
                }
            })
        }
        kind => Err(DecodeError::UnknownKind { kind }),
    }
}

pub fn read_record<T: aya::Pod>(bytes: &[u8]) -> Result<T, DecodeError> {
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
pub fn ip_from_kernel(family: u16, bytes: [u8; 16]) -> Option<IpAddr> {
    match family {
        AF_INET => Some(IpAddr::V4(Ipv4Addr::new(
            bytes[0], bytes[1], bytes[2], bytes[3],
        ))),
        AF_INET6 => {
            let v6 = Ipv6Addr::from(bytes);
            // A v4-mapped address is a v4 connect made through an AF_INET6 socket (Java does this).
            Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4))
        }
        _ => None,
    }
}

/// `comm` as text: up to the first NUL.
pub fn comm_to_string(comm: &[u8]) -> String {
    let end = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    String::from_utf8_lossy(&comm[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_of<T: aya::Pod>(value: &T) -> Vec<u8> {
        // SAFETY: T is Pod; viewing it as bytes is sound.
        unsafe {
            std::slice::from_raw_parts(std::ptr::from_ref(value).cast::<u8>(), size_of::<T>())
        }
        .to_vec()
    }

    #[test]
    fn decodes_a_connect_end_record() {
        let ev = ConnectEvent {
            kind: EVENT_CONNECT_END,
            error: 111,
            event_ns: 42,
            attempt: Attempt {
                syn_count: 3,
                dport: 8080,
                family: AF_INET,
                ..Attempt::default()
            },
        };
        let decoded = decode(&bytes_of(&ev)).expect("valid record");
        assert_eq!(
            decoded,
            KernelEvent::ConnectEnd {
                at_ns: 42,
                error: 111,
                attempt: ev.attempt
            }
        );
    }

    #[test]
    fn truncated_records_are_errors_not_panics() {
        let ev = ConnectEvent {
            kind: EVENT_SYN_RETRANSMIT,
            ..ConnectEvent::default()
        };
        let bytes = bytes_of(&ev);
        for len in 0..bytes.len() {
            assert!(
                decode(&bytes[..len]).is_err(),
                "prefix of {len} bytes must not decode"
            );
        }
    }

    #[test]
    fn unknown_kind_is_an_error() {
        assert_eq!(
            decode(&[9, 0, 0, 0, 1, 2]),
            Err(DecodeError::UnknownKind { kind: 9 })
        );
    }

    #[test]
    fn v4_mapped_v6_addresses_read_as_v4() {
        let mut b = [0u8; 16];
        b[10] = 0xff;
        b[11] = 0xff;
        b[12..].copy_from_slice(&[10, 0, 0, 7]);
        assert_eq!(
            ip_from_kernel(AF_INET6, b),
            Some("10.0.0.7".parse().expect("ip"))
        );
    }
}
