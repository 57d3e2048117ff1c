//! Does this kernel load fentry programs? Asked with the smallest one there is (`r0 = 0; exit`,
//! attached to nothing), loaded and closed at once: no side effect. Some vendor kernels refuse
//! every trampoline program with EPERM and an empty verifier log whatever the program, as a policy
//! (this project's development VM does); every distribution kernel a node runs loads them.
use std::os::fd::{FromRawFd as _, OwnedFd};

use super::btf::KernelBtf;

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TYPE_TRACING: u32 = 26;
const BPF_TRACE_FENTRY: u32 = 24;
/// The function the probe names; every kernel with BTF has it.
const TARGET: &str = "tcp_connect";

/// `union bpf_attr` for `BPF_PROG_LOAD`, the fields up to `attach_btf_obj_fd` (Linux 5.10's
/// layout; later kernels only add fields after it, and take a shorter attribute as zero-filled).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_btf_obj_fd: u32,
    _pad: u32,
}

/// `Ok` when a fentry program loads, else why not.
pub fn probe(kernel_btf: &KernelBtf<'_>) -> Result<(), String> {
    let Some(attach_btf_id) = kernel_btf.function_id(TARGET) else {
        return Err(format!(
            "no function {TARGET} in the kernel's BTF to probe fentry with"
        ));
    };
    // BPF_MOV64_IMM(r0, 0); BPF_EXIT_INSN()
    let insns: [u64; 2] = [0x0000_0000_0000_00b7, 0x0000_0000_0000_0095];
    let license = c"GPL";
    let attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_TRACING,
        insn_cnt: 2,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        expected_attach_type: BPF_TRACE_FENTRY,
        attach_btf_id,
        ..ProgLoadAttr::default()
    };
    // SAFETY: bpf(2) reads `attr` (and the instructions and licence it points at, alive for the
    // call) and returns a new file descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            &raw const attr,
            size_of::<ProgLoadAttr>(),
        )
    };
    if fd < 0 {
        let error = std::io::Error::last_os_error();
        return Err(format!(
            "this kernel refuses fentry programs (a two-instruction one got: {error})"
        ));
    }
    // SAFETY: a file descriptor bpf(2) just returned to us; closed when dropped.
    drop(unsafe { OwnedFd::from_raw_fd(fd as i32) });
    Ok(())
}
