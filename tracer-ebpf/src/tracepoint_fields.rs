//! Reading a formatted tracepoint's record (only `sys_exit_connect` is one; the socket hooks are raw
//! tracepoints, see `sock_fields.rs`).
//!
//! A tracepoint program may load from its record directly when the load is aligned to its size and
//! its offset is a constant: no helper call, a few nanoseconds.
use aya_ebpf::{EbpfContext as _, programs::TracePointContext};

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
