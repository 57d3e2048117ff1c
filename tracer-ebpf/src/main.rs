//! Kernel side of the black-hole tracer: one file per hook, all sharing the maps in `maps.rs`.
//!
//! The path of one connect attempt through the kernel side:
//! - `cgroup_connect.rs`: `connect()` entry; remember the namespace and the address the app dialled.
//! - `attempts.rs`: where an attempt lives from there on: a table keyed by its socket (with a count
//!   per hash slot in front, so a socket without one is told cheaply).
//! - `inet_sock_set_state.rs`: `CLOSE -> SYN_SENT` starts the attempt's clock; leaving `SYN_SENT`
//!   answers or closes it.
//! - `tcp_retransmit_skb.rs`: every SYN retransmit is counted and sent live (the black hole, as it
//!   happens); `syn_count.rs` settles the count from the socket where the kernel ran no program.
//! - `tcp_receive_reset.rs`: a RST in `SYN_SENT` is remembered, to tell "refused by RST" from ICMP.
//! - `inet_sk_error_report.rs`: the errno the kernel reports ends the attempt (refused, unreachable,
//!   timed out), or an ICMP error queued while the app held the socket is remembered.
//! - `tcp_destroy_sock.rs`: a socket freed with no error reported was abandoned by its application;
//!   one whose `connect()` never reached `SYN_SENT` failed before any SYN left.
//!
//! Replies that never reach the peer (the server side): `replies.rs`, from the data retransmits
//! `tcp_retransmit_skb.rs` sees to the socket's end in `tcp_destroy_sock.rs`.
//!
//! UDP DNS: `cgroup_skb_dns.rs` pairs queries and replies on the cgroup v2 root (maps in
//! `maps_dns.rs`); `inet_sk_error_report.rs` also remembers sockets refused by ICMP.
//!
//! Only tracepoints (`tp_btf`) and cgroup hooks are used: fentry and kprobes are not available on
//! every node. The tracepoint programs (`sock_fields.rs` says why these) read `struct sock` at
//! offsets userspace takes from the running kernel's BTF. No syscall tracepoint: attaching one puts
//! every task of the node on the slow syscall path (about 100 ns more per syscall, measured here),
//! so a `connect()` that fails by itself is seen from the socket instead.
#![no_std]
#![no_main]
// The atomic add of `attempts.rs`: the target's core has no atomic read-modify-write types.
#![feature(core_intrinsics)]
#![expect(
    internal_features,
    reason = "core_intrinsics, for the atomic add of attempts.rs"
)]
#![expect(
    clippy::needless_pass_by_value,
    reason = "program entry points take their context by value (aya's macros)"
)]
#![expect(
    clippy::needless_borrows_for_generic_args,
    reason = "map keys and values go by reference so large ones are not copied on the 512-byte BPF stack"
)]

mod answered;
mod attempts;
mod cgroup_connect;
mod cgroup_skb_dns;
mod dns;
mod error_read_first;
mod inet_sk_error_report;
mod inet_sock_set_state;
mod kernel_skb;
mod maps;
mod maps_dns;
mod replies;
mod sock_fields;
mod sock_recv_length;
mod sock_send_length;
mod syn_count;
mod syn_sent;
mod syscall_buffers;
mod tcp_connect;
mod tcp_destroy_sock;
mod tcp_init_transfer;
mod tcp_receive_reset;
mod tcp_retransmit_skb;
mod tcp_retransmit_synack;
mod udp_enqueue;
mod udp_send_skb;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects any reachable panic, so this is never executed.
    loop {}
}
