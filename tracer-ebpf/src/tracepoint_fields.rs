//! Reading tracepoint records, and the address fields several `sock`/`tcp` tracepoints share
//! (`TP_STORE_ADDRS`).
//!
//! A tracepoint program may load from its record directly when the load is aligned to its size and
//! its offset is a constant: no helper call, a few nanoseconds. `inet_sock_set_state` runs for every
//! TCP state change on the node (about 8 per short connection, client and server side), so the fields
//! each hook decides on are read that way; the address block goes through `bpf_probe_read_kernel`.
use aya_ebpf::{EbpfContext as _, programs::TracePointContext};
use tracer_common::{AF_INET6, tracepoint::AddrBlock};

/// Source and destination as the tracepoint recorded them; IPv4 in the first 4 bytes.
pub struct Addrs {
    pub family: u16,
    pub sport: u16,
    pub dport: u16,
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
}

/// A field read with `bpf_probe_read_kernel`: any offset; a failed read yields the default.
pub fn read<T: Default>(ctx: &TracePointContext, offset: usize) -> T {
    // SAFETY: bpf_probe_read_kernel of a field inside the tracepoint record.
    unsafe { ctx.read_at::<T>(offset) }.unwrap_or_default()
}

/// A field loaded directly from the record. `offset` must be a multiple of `size_of::<T>()` (the
/// verifier rejects the program otherwise, at load time, never at run time).
#[expect(
    clippy::inline_always,
    reason = "the verifier needs the constant offset inside the load instruction: not inlined, the \
              offset becomes a register and the program is rejected (modified ctx ptr)"
)]
#[inline(always)]
pub fn load<T: Copy>(ctx: &TracePointContext, offset: usize) -> T {
    // SAFETY: in-bounds, aligned read of the tracepoint record the kernel passed us.
    unsafe { core::ptr::read(ctx.as_ptr().cast::<u8>().add(offset).cast::<T>()) }
}

/// The address block, through the helper: its offsets come from a table, and the verifier only
/// accepts direct loads whose offset is a constant in the instruction. Read once per connect.
pub fn read_addrs(ctx: &TracePointContext, off: &AddrBlock) -> Addrs {
    let family: u16 = read(ctx, off.family);
    let mut saddr = [0u8; 16];
    let mut daddr = [0u8; 16];
    if family == AF_INET6 {
        saddr = read(ctx, off.saddr_v6);
        daddr = read(ctx, off.daddr_v6);
    } else {
        let s: [u8; 4] = read(ctx, off.saddr);
        let d: [u8; 4] = read(ctx, off.daddr);
        saddr[..4].copy_from_slice(&s);
        daddr[..4].copy_from_slice(&d);
    }
    Addrs {
        family,
        sport: read(ctx, off.sport),
        dport: read(ctx, off.dport),
        saddr,
        daddr,
    }
}
