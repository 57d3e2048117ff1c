//! Reading `struct sock` through the `sk` pointer a `tp_btf` tracepoint passes. Offsets come from
//! the running kernel's BTF (`SOCK_OFFSETS`, written by userspace before load: aya has no CO-RE); each
//! read goes through `bpf_probe_read_kernel`, which fails cleanly (the default value then) rather
//! than faulting. (Plain loads of `struct sock` fields also pass the verifier, the offsets being
//! frozen read-only data, but measured no faster in the benchmark, and fields past `struct sock`
//! would still need the helper.)
//!
//! `tp_btf`, not the formatted tracepoints: a formatted tracepoint first copies every field into a
//! perf buffer and then runs the program behind a per-CPU "is any BPF program running" check that
//! skips it when it nests (a timer softirq landing inside another program). `inet_sock_set_state`
//! runs about 8 times per short connection on a node; here the uninteresting transitions return
//! after comparing two arguments. (`tp_btf` rather than raw tracepoints: the kernel checks it
//! against the tracepoint's BTF, so no tracefs is needed.)
use aya_ebpf::helpers::bpf_probe_read_kernel;
use tracer_common::AF_INET6;

use crate::maps::sock_offsets;

/// Source and destination of a socket; IPv4 in the first 4 bytes. Ports in host order.
pub struct Addrs {
    pub family: u16,
    pub sport: u16,
    pub dport: u16,
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
}

/// A kernel value at `address`; the default if it cannot be read.
pub fn read<T: Default>(address: u64) -> T {
    // SAFETY: bpf_probe_read_kernel tolerates any address and fails cleanly.
    unsafe { bpf_probe_read_kernel(address as *const T) }.unwrap_or_default()
}

fn field<T: Default>(sock: u64, offset: u32) -> T {
    read(sock + u64::from(offset))
}

/// `sk_protocol` (`IPPROTO_TCP` for the sockets we follow).
pub fn protocol(sock: u64) -> u16 {
    field(sock, sock_offsets().sk_protocol)
}

/// The socket cookie (`skc_cookie`), 0 if nobody asked for it yet.
pub fn cookie(sock: u64) -> u64 {
    field(sock, sock_offsets().skc_cookie)
}

/// The TCP state (`skc_state`).
pub fn state(sock: u64) -> u8 {
    field(sock, sock_offsets().skc_state)
}

/// Both ends of the socket, as `connect()` set them so far (the local port is 0 until `connect()` has
/// picked one).
pub fn addrs(sock: u64) -> Addrs {
    let off = sock_offsets();
    let family: u16 = field(sock, off.skc_family);
    let mut saddr = [0u8; 16];
    let mut daddr = [0u8; 16];
    if family == AF_INET6 {
        saddr = field(sock, off.skc_v6_rcv_saddr);
        daddr = field(sock, off.skc_v6_daddr);
    } else {
        let s: [u8; 4] = field(sock, off.skc_rcv_saddr);
        let d: [u8; 4] = field(sock, off.skc_daddr);
        saddr[..4].copy_from_slice(&s);
        daddr[..4].copy_from_slice(&d);
    }
    Addrs {
        family,
        sport: u16::from_be(field(sock, off.inet_sport)),
        dport: u16::from_be(field(sock, off.skc_dport)),
        saddr,
        daddr,
    }
}

/// `tcp_sock.rcv_nxt`: non-zero once the socket has taken in a SYN-ACK (0 from `connect()` until
/// then, and left alone by every close), so it tells at the end whether a connect was answered.
pub fn rcv_nxt(sock: u64) -> u32 {
    field(sock, sock_offsets().tcp_rcv_nxt)
}
