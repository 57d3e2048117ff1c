//! Reading the address fields that several `sock`/`tcp` tracepoints share (`TP_STORE_ADDRS`).
use aya_ebpf::programs::TracePointContext;
use tracer_common::{AF_INET6, tracepoint::AddrBlock};

/// Source and destination as the tracepoint recorded them; IPv4 in the first 4 bytes.
pub struct Addrs {
    pub family: u16,
    pub sport: u16,
    pub dport: u16,
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
}

pub fn read<T: Default>(ctx: &TracePointContext, offset: usize) -> T {
    // SAFETY: bpf_probe_read_kernel of a field inside the tracepoint record; a failed read yields the default.
    unsafe { ctx.read_at::<T>(offset) }.unwrap_or_default()
}

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
