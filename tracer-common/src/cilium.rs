//! The key and value of Cilium's reverse socket NAT maps (`cilium_lb{4,6}_reverse_sk`), read by
//! the tracer's `connect()` hook (kernels where it runs after Cilium's) and by userspace. Layouts of
//! Cilium 1.14 to 1.18 (`bpf/lib/common.h`: `ipv4_revnat_tuple`, `ipv4_revnat_entry` and their
//! IPv6 twins; filled by `bpf/bpf_sock.c`). Addresses, ports and the reverse NAT index are in
//! network order, as Cilium stores them: kept as bytes.
use core::net::{Ipv4Addr, Ipv6Addr};

/// `CILIUM_REVERSE_SK` (a global set before load): the IPv4 map is Cilium's pinned one.
pub const REVERSE_SK4_BOUND: u32 = 1;
/// `CILIUM_REVERSE_SK`: the IPv6 map is Cilium's pinned one.
pub const REVERSE_SK6_BOUND: u32 = 2;

/// `cilium_lb4_reverse_sk` key: the socket cookie and the backend the socket was connected to.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RevSk4Key {
    pub cookie: u64,
    pub address: [u8; 4],
    pub port: [u8; 2],
    pub pad: [u8; 2],
}
const _: () = assert!(size_of::<RevSk4Key>() == 16);

/// `cilium_lb4_reverse_sk` value: the Service address the application dialled, and its reverse
/// NAT index.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RevSk4Value {
    pub address: [u8; 4],
    pub port: [u8; 2],
    pub rev_nat_index: [u8; 2],
}
const _: () = assert!(size_of::<RevSk4Value>() == 8);

/// `cilium_lb6_reverse_sk` key (C pads it to 32 for the `u64`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RevSk6Key {
    pub cookie: u64,
    pub address: [u8; 16],
    pub port: [u8; 2],
    pub pad: [u8; 2],
    pub tail: [u8; 4],
}
const _: () = assert!(size_of::<RevSk6Key>() == 32);

/// `cilium_lb6_reverse_sk` value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RevSk6Value {
    pub address: [u8; 16],
    pub port: [u8; 2],
    pub rev_nat_index: [u8; 2],
}
const _: () = assert!(size_of::<RevSk6Value>() == 20);

impl RevSk4Key {
    /// The key of socket `cookie` connected to `backend:port` (`port` in host order).
    #[must_use]
    pub fn new(cookie: u64, backend: Ipv4Addr, port: u16) -> RevSk4Key {
        RevSk4Key {
            cookie,
            address: backend.octets(),
            port: port.to_be_bytes(),
            pad: [0; 2],
        }
    }
}

impl RevSk6Key {
    #[must_use]
    pub fn new(cookie: u64, backend: Ipv6Addr, port: u16) -> RevSk6Key {
        RevSk6Key {
            cookie,
            address: backend.octets(),
            port: port.to_be_bytes(),
            pad: [0; 2],
            tail: [0; 4],
        }
    }
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: repr(C), Copy, every byte a named field, valid for any bit pattern.
    unsafe impl aya::Pod for super::RevSk4Key {}
    unsafe impl aya::Pod for super::RevSk4Value {}
    unsafe impl aya::Pod for super::RevSk6Key {}
    unsafe impl aya::Pod for super::RevSk6Value {}
}
