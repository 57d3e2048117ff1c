//! What the kernel programs read at offsets rather than through typed accesses (aya has no CO-RE
//! for Rust programs): struct members from the running kernel's BTF, and this architecture's
//! syscall numbers. Written into the programs' read-only data before load.
use std::path::Path;

use anyhow::{Context as _, bail};
use tracer_common::{HookOffsets, SockOffsets, SyscallNumbers};

use super::btf::KernelBtf;

/// `struct sock` field offsets of the running kernel.
pub fn sock_offsets(kernel_btf: &KernelBtf<'_>, btf_path: &Path) -> anyhow::Result<SockOffsets> {
    let offset = |strukt, member| {
        kernel_btf
            .member_offset(strukt, member)
            .with_context(|| format!("kernel BTF {}", btf_path.display()))
    };
    // The `skc_` fields are read at their `sock_common` offsets from a `struct sock` pointer.
    let common = offset("sock", "__sk_common")?;
    if common != 0 {
        bail!(
            "kernel BTF {}: struct sock does not start with its sock_common (offset {common})",
            btf_path.display()
        );
    }
    Ok(SockOffsets {
        skc_daddr: offset("sock_common", "skc_daddr")?,
        skc_rcv_saddr: offset("sock_common", "skc_rcv_saddr")?,
        skc_dport: offset("sock_common", "skc_dport")?,
        inet_sport: offset("inet_sock", "inet_sport")?,
        skc_family: offset("sock_common", "skc_family")?,
        skc_state: offset("sock_common", "skc_state")?,
        skc_v6_daddr: offset("sock_common", "skc_v6_daddr")?,
        skc_v6_rcv_saddr: offset("sock_common", "skc_v6_rcv_saddr")?,
        skc_cookie: offset("sock_common", "skc_cookie")?,
        sk_protocol: offset("sock", "sk_protocol")?,
        sk_err: offset("sock", "sk_err")?,
        sk_error_queue: offset("sock", "sk_error_queue")?,
        skb_cb: offset("sk_buff", "cb")?,
        exterr_ee: offset("sock_exterr_skb", "ee")?,
        tcp_rcv_nxt: offset("tcp_sock", "rcv_nxt")?,
        skc_net: offset("sock_common", "skc_net")?,
        net_inum: offset("net", "ns")? + offset("ns_common", "inum")?,
        task_tgid: offset("task_struct", "tgid")?,
        task_pid: offset("task_struct", "pid")?,
        task_comm: offset("task_struct", "comm")?,
        sk_err_soft: offset("sock", "sk_err_soft")?,
        tcp_snd_una: offset("tcp_sock", "snd_una")?,
        tcp_snd_nxt: offset("tcp_sock", "snd_nxt")?,
        sk_socket: offset("sock", "sk_socket")?,
        skc_num: offset("sock_common", "skc_num")?,
        socket_ino: (offset("socket_alloc", "vfs_inode")? - offset("socket_alloc", "socket")?)
            + offset("inode", "i_ino")?,
        sk_max_ack_backlog: offset("sock", "sk_max_ack_backlog")?,
        tcp_total_retrans: offset("tcp_sock", "total_retrans")?,
    })
}

/// `struct sk_buff` and `struct pt_regs` offsets for the DNS hooks that read a datagram from an
/// skb (fentry, kprobe) or the caller's registers (the syscall tracepoints). A member this kernel
/// or architecture lacks is an error that rules those tiers out, not the run.
pub fn hook_offsets(kernel_btf: &KernelBtf<'_>) -> Result<HookOffsets, String> {
    let offset = |strukt: &str, member: &str| {
        kernel_btf
            .member_offset(strukt, member)
            .map_err(|e| e.to_string())
    };
    let mut offsets = HookOffsets {
        skb_sk: offset("sk_buff", "sk")?,
        skb_head: offset("sk_buff", "head")?,
        skb_network_header: offset("sk_buff", "network_header")?,
        skb_transport_header: offset("sk_buff", "transport_header")?,
        skb_tail: offset("sk_buff", "tail")?,
        flowi4_uli: offset("flowi4", "uli")?,
        flowi6_uli: offset("flowi6", "uli")?,
        ..HookOffsets::default()
    };
    let (args, nr) = syscall_registers(&offset)?;
    offsets.syscall_args = args;
    offsets.syscall_nr = nr;
    Ok(offsets)
}

/// Where a syscall's six arguments and its number are in this architecture's `struct pt_regs`.
#[cfg(target_arch = "x86_64")]
fn syscall_registers(
    offset: &dyn Fn(&str, &str) -> Result<u32, String>,
) -> Result<([u32; 6], u32), String> {
    // The syscall ABI passes the fourth argument in r10 (a function call would use rcx).
    let mut args = [0; 6];
    for (slot, register) in args.iter_mut().zip(["di", "si", "dx", "r10", "r8", "r9"]) {
        *slot = offset("pt_regs", register)?;
    }
    Ok((args, offset("pt_regs", "orig_ax")?))
}

#[cfg(target_arch = "aarch64")]
fn syscall_registers(
    offset: &dyn Fn(&str, &str) -> Result<u32, String>,
) -> Result<([u32; 6], u32), String> {
    // x0 is overwritten by the return value; the kernel keeps the first argument in orig_x0.
    let regs = offset("pt_regs", "regs")?;
    let mut args = [0; 6];
    args[0] = offset("pt_regs", "orig_x0")?;
    for (i, slot) in args.iter_mut().enumerate().skip(1) {
        *slot = regs + 8 * i as u32;
    }
    Ok((args, offset("pt_regs", "syscallno")?))
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn syscall_registers(
    _offset: &dyn Fn(&str, &str) -> Result<u32, String>,
) -> Result<([u32; 6], u32), String> {
    Err("the syscall registers of this architecture are not known to the tracer".into())
}

/// This architecture's numbers of the send and receive syscalls.
pub fn syscall_numbers() -> SyscallNumbers {
    #[cfg(target_arch = "x86_64")]
    {
        SyscallNumbers {
            read: 0,
            write: 1,
            readv: 19,
            writev: 20,
            sendto: 44,
            recvfrom: 45,
            sendmsg: 46,
            recvmsg: 47,
            sendmmsg: 307,
            recvmmsg: 299,
        }
    }
    // The generic table (include/uapi/asm-generic/unistd.h).
    #[cfg(target_arch = "aarch64")]
    {
        SyscallNumbers {
            read: 63,
            write: 64,
            readv: 65,
            writev: 66,
            sendto: 206,
            recvfrom: 207,
            sendmsg: 211,
            recvmsg: 212,
            sendmmsg: 269,
            recvmmsg: 243,
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        SyscallNumbers::default()
    }
}
