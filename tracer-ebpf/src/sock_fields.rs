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

/// `sk_err`: the error the socket reports next (0 if none).
pub fn error(sock: u64) -> i32 {
    field(sock, sock_offsets().sk_err)
}

/// `sk_err_soft`: an error kept while the application held the socket (an ICMP error in
/// `SYN_SENT`), 0 if none or read already.
pub fn soft_error(sock: u64) -> i32 {
    field(sock, sock_offsets().sk_err_soft)
}

/// `sock_extended_err.ee_origin` values of errors that came from ICMP or `ICMPv6`.
const SO_EE_ORIGIN_ICMP: u8 = 2;
const SO_EE_ORIGIN_ICMP6: u8 = 3;
/// `sk_buff_head` starts with `next`, then `prev` (the newest skb): pointer-sized on every arch.
const QUEUE_PREV: u64 = 8;

/// The errno of the newest ICMP error on the socket's error queue (0 if none): an ICMP error that
/// came while the application held the socket, which it reads through `SO_ERROR` (clearing
/// `sk_err_soft`) while the queued copy stays until the socket is freed.
pub fn queued_icmp_error(sock: u64) -> i32 {
    let off = sock_offsets();
    let queue = sock + u64::from(off.sk_error_queue);
    let newest: u64 = read(queue + QUEUE_PREV);
    if newest == 0 || newest == queue {
        return 0; // empty queue: its head points at itself
    }
    let ee = newest + u64::from(off.skb_cb) + u64::from(off.exterr_ee);
    let origin: u8 = read(ee + 4);
    if origin == SO_EE_ORIGIN_ICMP || origin == SO_EE_ORIGIN_ICMP6 {
        read::<u32>(ee).cast_signed()
    } else {
        0
    }
}

/// The TCP state (`skc_state`).
pub fn state(sock: u64) -> u8 {
    field(sock, sock_offsets().skc_state)
}

/// Both ends of the socket, as `connect()` set them so far (the local port is 0 until `connect()` has
/// picked one).
pub fn addrs(sock: u64) -> Addrs {
    let off = sock_offsets();
    let mut addrs = Addrs {
        family: field(sock, off.skc_family),
        sport: u16::from_be(field(sock, off.inet_sport)),
        dport: u16::from_be(field(sock, off.skc_dport)),
        saddr: [0; 16],
        daddr: [0; 16],
    };
    // Read into place: temporaries per field made this frame too large to sit under the
    // tracepoint tier's DNS programs on kernels that count two calls' stacks together.
    if addrs.family == AF_INET6 {
        read_into(sock + u64::from(off.skc_v6_rcv_saddr), &mut addrs.saddr);
        read_into(sock + u64::from(off.skc_v6_daddr), &mut addrs.daddr);
    } else {
        read_into(sock + u64::from(off.skc_rcv_saddr), &mut addrs.saddr[..4]);
        read_into(sock + u64::from(off.skc_daddr), &mut addrs.daddr[..4]);
    }
    addrs
}

/// Kernel bytes at `address` into `out`; left as they were if they cannot be read.
fn read_into(address: u64, out: &mut [u8]) {
    // SAFETY: bpf_probe_read_kernel_buf tolerates any address and fails cleanly.
    let _ = unsafe { aya_ebpf::helpers::bpf_probe_read_kernel_buf(address as *const u8, out) };
}

/// `skc_daddr`: an IPv4 socket's remote address, zero while it is not connected.
pub fn daddr_v4(sock: u64) -> [u8; 4] {
    field(sock, sock_offsets().skc_daddr)
}

/// The socket's network namespace as its inode number (what `stat` on `/proc/PID/ns/net` says), 0 if
/// it cannot be read. Every program type the tracer uses may read it this way on every kernel
/// since 5.10, unlike `bpf_get_netns_cookie`.
pub fn netns_inode(sock: u64) -> u64 {
    let off = sock_offsets();
    let net: u64 = field(sock, off.skc_net);
    if net == 0 {
        return 0;
    }
    u64::from(read::<u32>(net + u64::from(off.net_inum)))
}

/// A kernel pointer as a plain number. To the verifier a socket pointer a hook got from its context
/// may be a map key or a helper argument (the privileged loader may leak pointers), but arithmetic
/// on it is refused. What `bpf_probe_read_kernel` copies is a number to it: the pointer is copied
/// from this program's own stack frame. (Not through a per-CPU map word: a program a softirq runs
/// on the same CPU between another program's store and load there would hand it its own pointer.)
pub fn as_number(pointer: u64) -> u64 {
    let on_stack = pointer;
    read(core::ptr::addr_of!(on_stack) as u64)
}

/// Both ends of a request socket (a handshake in progress): its local port is `skc_num`, in host
/// order; it has no `inet_sock`.
pub fn request_addrs(request: u64) -> Addrs {
    let mut addrs = addrs(request);
    addrs.sport = field(request, sock_offsets().skc_num);
    addrs
}

/// Bytes sent and not yet acknowledged (`snd_nxt - snd_una`).
pub fn unacked(sock: u64) -> u32 {
    let off = sock_offsets();
    let una: u32 = field(sock, off.tcp_snd_una);
    let nxt: u32 = field(sock, off.tcp_snd_nxt);
    nxt.wrapping_sub(una)
}

/// The inode number of the socket a process holds (`socket:[N]`), 0 once orphaned.
pub fn socket_inode(sock: u64) -> u64 {
    let off = sock_offsets();
    let socket: u64 = field(sock, off.sk_socket);
    if socket == 0 {
        return 0;
    }
    read::<u64>(socket + u64::from(off.socket_ino))
}

/// `tcp_sock.rcv_nxt`: non-zero once the socket has taken in a SYN-ACK (0 from `connect()` until
/// then, and left alone by every close), so it tells at the end whether a connect was answered.
pub fn rcv_nxt(sock: u64) -> u32 {
    field(sock, sock_offsets().tcp_rcv_nxt)
}

/// Whether the socket was accepted from a listener (a server's end), not opened by `connect()`: an
/// accepted socket keeps its listener's `sk_max_ack_backlog` (the socket is cloned from the
/// listener), a connecting one has 0. (A listener with `listen(fd, 0)` gives its sockets 0 too.)
pub fn accepted(sock: u64) -> bool {
    field::<u32>(sock, sock_offsets().sk_max_ack_backlog) != 0
}
