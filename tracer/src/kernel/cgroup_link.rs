//! Attaching the `connect()` hooks so they run before any other program that rewrites the address.
//!
//! The point of recording the dialled address is to see it before a socket-level load balancer
//! (Cilium's socket LB) replaces it with a backend. Cgroup programs of a descendant cgroup normally run
//! before those of the root, so a rewriter attached below us would run first. Linux 6.15 added
//! `BPF_F_PREORDER`: a program attached with it runs before the programs of descendant cgroups.
//! aya 0.14 has no way to pass it, so the link is created with the `bpf(BPF_LINK_CREATE)` syscall
//! directly. Older kernels refuse the flag; then the plain attach is used and a rewriter in a child
//! cgroup is seen after its rewrite.
use std::{
    io,
    os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd},
};

const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_F_PREORDER: u32 = 1 << 6;
pub const BPF_CGROUP_INET4_CONNECT: u32 = 10;
pub const BPF_CGROUP_INET6_CONNECT: u32 = 11;

/// The `link_create` member of `union bpf_attr`, padded to the size the kernel expects at least.
#[repr(C)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    _rest: [u64; 8],
}

/// A cgroup link created with `BPF_F_PREORDER`; closing the fd (drop) detaches it.
pub fn attach_preorder(
    program: impl AsFd,
    cgroup: impl AsFd,
    attach_type: u32,
) -> io::Result<OwnedFd> {
    let attr = LinkCreateAttr {
        prog_fd: program.as_fd().as_raw_fd().cast_unsigned(),
        target_fd: cgroup.as_fd().as_raw_fd().cast_unsigned(),
        attach_type,
        flags: BPF_F_PREORDER,
        _rest: [0; 8],
    };
    // SAFETY: bpf(2) reads `size_of::<LinkCreateAttr>()` bytes of `attr`, which we own; unused
    // fields are zero as the kernel requires.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_CREATE,
            &raw const attr,
            size_of::<LinkCreateAttr>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}
