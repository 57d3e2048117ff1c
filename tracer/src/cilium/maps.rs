//! Our own types for the key and value layouts of Cilium's load-balancing maps, as its datapath
//! defines them (Cilium `bpf/lib/lb.h`, `bpf/lib/common.h`; `bpf/bpf_sock.c` for how the socket LB
//! fills the reverse socket NAT map). Each is `#[repr(C)]` with every byte named, so its size is
//! the map's key or value size (asserted below) and a key we build hashes like Cilium's (zeroed
//! padding, as Cilium's `key = {}` initialisers).
//!
//! These layouts are the same from Cilium 1.14 to 1.18 for every field read. Checked in several
//! stored versions of Cilium's `bpf/lib/lb.h`, `bpf/lib/common.h` and `bpf/bpf_sock.c`, from the
//! 2019 introduction of the reverse socket NAT map to a recent main branch (versions told apart by
//! their fields, not by release tags): `lb4_backend` grew `cluster_id` and `zone` inside its last 4
//! bytes (`cilium_lb4_backends_v3`; the 8-byte `_v2` predates 1.13 and is not read), `lb4_service`
//! named its last 2 bytes `qcount`, `lb4_key.proto` became meaningful (1.17, protocol
//! differentiation): none moves a field we read. A map whose sizes differ is not read (see
//! `mod.rs`).
//!
//! Addresses and ports are in network order, as Cilium stores them: kept as bytes here. The reverse
//! NAT index is stored in network order too (Cilium's agent writes it so) and only compared or used
//! as a key here: kept as bytes. Backend ids are host order `u32`s, likewise only compared.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The reverse socket NAT map's layouts, shared with the kernel's `connect()` hook.
pub use tracer_common::cilium::{RevSk4Key, RevSk4Value, RevSk6Key, RevSk6Value};

/// `cilium_lb4_reverse_nat` value (`struct lb4_reverse_nat`, packed): the Service frontend of a
/// reverse NAT index. Its key is the index, 2 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RevNat4 {
    pub address: [u8; 4],
    pub port: [u8; 2],
}
const _: () = assert!(size_of::<RevNat4>() == 6);

/// `cilium_lb6_reverse_nat` value (`struct lb6_reverse_nat`, packed).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RevNat6 {
    pub address: [u8; 16],
    pub port: [u8; 2],
}
const _: () = assert!(size_of::<RevNat6>() == 18);

/// `cilium_lb4_services_v2` key (`struct lb4_key`): slot 0 is the frontend, slots 1..=count its
/// backends.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Service4Key {
    pub address: [u8; 4],
    pub port: [u8; 2],
    pub backend_slot: u16,
    pub proto: u8,
    pub scope: u8,
    pub pad: [u8; 2],
}
const _: () = assert!(size_of::<Service4Key>() == 12);

/// `cilium_lb6_services_v2` key (`struct lb6_key`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Service6Key {
    pub address: [u8; 16],
    pub port: [u8; 2],
    pub backend_slot: u16,
    pub proto: u8,
    pub scope: u8,
    pub pad: [u8; 2],
}
const _: () = assert!(size_of::<Service6Key>() == 24);

/// `cilium_lb{4,6}_services_v2` value (`struct lb4_service`, `lb6_service`): in a backend slot,
/// the backend's id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceValue {
    pub backend_id: u32,
    pub count: u16,
    pub rev_nat_index: [u8; 2],
    pub flags: u8,
    pub flags2: u8,
    pub qcount: [u8; 2],
}
const _: () = assert!(size_of::<ServiceValue>() == 12);

/// `cilium_lb4_backends_v3` value (`struct lb4_backend`), keyed by backend id (`u32`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backend4 {
    pub address: [u8; 4],
    pub port: [u8; 2],
    pub proto: u8,
    pub flags: u8,
    /// `cluster_id` and `zone` (1.14+), padding before.
    pub rest: [u8; 4],
}
const _: () = assert!(size_of::<Backend4>() == 12);

/// `cilium_lb6_backends_v3` value (`struct lb6_backend`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backend6 {
    pub address: [u8; 16],
    pub port: [u8; 2],
    pub proto: u8,
    pub flags: u8,
    pub rest: [u8; 4],
}
const _: () = assert!(size_of::<Backend6>() == 24);

// SAFETY: plain `#[repr(C)]` data with every byte a named field (no implicit padding), valid for
// any bit pattern.
unsafe impl aya::Pod for RevNat4 {}
unsafe impl aya::Pod for RevNat6 {}
unsafe impl aya::Pod for Service4Key {}
unsafe impl aya::Pod for Service6Key {}
unsafe impl aya::Pod for ServiceValue {}
unsafe impl aya::Pod for Backend4 {}
unsafe impl aya::Pod for Backend6 {}

/// A services-map key of either family (`Service4Key`, `Service6Key`), so the services and
/// backends maps are read by one piece of code for both.
pub trait ServiceKey: aya::Pod {
    /// The key of slot `slot` of `frontend` under protocol `proto`; `None` for the other family.
    fn of(frontend: SocketAddr, slot: u16, proto: u8) -> Option<Self>;
    fn frontend(&self) -> SocketAddr;
    fn slot(&self) -> u16;
    fn proto(&self) -> u8;
}

/// A backends-map value of either family (`Backend4`, `Backend6`).
pub trait BackendValue: aya::Pod {
    fn address(&self) -> SocketAddr;
    fn proto(&self) -> u8;
}

impl ServiceKey for Service4Key {
    fn of(frontend: SocketAddr, slot: u16, proto: u8) -> Option<Service4Key> {
        let SocketAddr::V4(f) = frontend else {
            return None;
        };
        Some(Service4Key {
            address: f.ip().octets(),
            port: f.port().to_be_bytes(),
            backend_slot: slot,
            proto,
            ..Service4Key::default()
        })
    }
    fn frontend(&self) -> SocketAddr {
        v4(self.address, self.port)
    }
    fn slot(&self) -> u16 {
        self.backend_slot
    }
    fn proto(&self) -> u8 {
        self.proto
    }
}

impl ServiceKey for Service6Key {
    fn of(frontend: SocketAddr, slot: u16, proto: u8) -> Option<Service6Key> {
        let SocketAddr::V6(f) = frontend else {
            return None;
        };
        Some(Service6Key {
            address: f.ip().octets(),
            port: f.port().to_be_bytes(),
            backend_slot: slot,
            proto,
            ..Service6Key::default()
        })
    }
    fn frontend(&self) -> SocketAddr {
        v6(self.address, self.port)
    }
    fn slot(&self) -> u16 {
        self.backend_slot
    }
    fn proto(&self) -> u8 {
        self.proto
    }
}

impl BackendValue for Backend4 {
    fn address(&self) -> SocketAddr {
        v4(self.address, self.port)
    }
    fn proto(&self) -> u8 {
        self.proto
    }
}

impl BackendValue for Backend6 {
    fn address(&self) -> SocketAddr {
        v6(self.address, self.port)
    }
    fn proto(&self) -> u8 {
        self.proto
    }
}

/// An address and port as Cilium stores them (network order) -> a socket address.
pub fn v4(address: [u8; 4], port: [u8; 2]) -> SocketAddr {
    SocketAddr::new(
        IpAddr::V4(Ipv4Addr::from(address)),
        u16::from_be_bytes(port),
    )
}

pub fn v6(address: [u8; 16], port: [u8; 2]) -> SocketAddr {
    SocketAddr::new(
        IpAddr::V6(Ipv6Addr::from(address)),
        u16::from_be_bytes(port),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_ports_are_read_in_network_order() {
        assert_eq!(
            v4([10, 96, 0, 10], [0, 53]).to_string(),
            "10.96.0.10:53",
            "port 53 is stored as the bytes 0x00 0x35"
        );
        let key = RevSk4Key::new(7, Ipv4Addr::new(10, 0, 0, 5), 8080);
        assert_eq!(key.port, [0x1f, 0x90]);
        assert_eq!(key.address, [10, 0, 0, 5]);
        assert_eq!(
            v6(Ipv6Addr::LOCALHOST.octets(), [0x1f, 0x90]).to_string(),
            "[::1]:8080"
        );
    }
}
