//! Facts about the running kernel, read independently of the tracer, so tests can check that the
//! capabilities the tracer reports match the kernel it runs on.
use std::fs;

/// `uname -r`.
pub fn release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .expect("/proc/sys/kernel/osrelease")
        .trim()
        .to_string()
}

/// (major, minor) of the running kernel.
pub fn version() -> (u32, u32) {
    let release = release();
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse().ok());
    (
        parts.next().expect("major version"),
        parts.next().expect("minor version"),
    )
}

/// Whether the kernel's BTF declares the tracepoint (`btf_trace_NAME`), which `tp_btf` programs
/// need.
pub fn has_tracepoint(name: &str) -> bool {
    let btf = fs::read("/sys/kernel/btf/vmlinux").expect("kernel BTF at /sys/kernel/btf/vmlinux");
    let needle = format!("\0btf_trace_{name}\0");
    btf.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Whether the kernel has a kprobe PMU to attach kprobes through.
pub fn has_kprobes() -> bool {
    std::path::Path::new("/sys/bus/event_source/devices/kprobe/type").exists()
}

/// Whether the kernel loads an fentry program at all (some vendor kernels refuse every
/// trampoline program as a policy): the smallest one, `r0 = 0; exit`, attached to nothing,
/// loaded and closed. The BTF id of its target comes from `bpftool`, not from the tracer.
pub fn loads_fentry() -> bool {
    let out = std::process::Command::new("bpftool")
        .args(["btf", "dump", "file", "/sys/kernel/btf/vmlinux"])
        .output()
        .expect("run bpftool (Debian package bpftool)");
    let dump = String::from_utf8_lossy(&out.stdout);
    let id: u32 = dump
        .lines()
        .find(|l| l.contains("FUNC 'tcp_connect'"))
        .and_then(|l| l.strip_prefix('['))
        .and_then(|l| l.split(']').next())
        .and_then(|n| n.parse().ok())
        .expect("tcp_connect in the kernel's BTF");
    // union bpf_attr for BPF_PROG_LOAD, up to attach_btf_id (offset 108).
    let mut attr = [0u8; 120];
    let insns: [u64; 2] = [0xb7, 0x95]; // r0 = 0; exit
    let license = c"GPL";
    attr[0..4].copy_from_slice(&26u32.to_ne_bytes()); // BPF_PROG_TYPE_TRACING
    attr[4..8].copy_from_slice(&2u32.to_ne_bytes());
    attr[8..16].copy_from_slice(&(insns.as_ptr() as u64).to_ne_bytes());
    attr[16..24].copy_from_slice(&(license.as_ptr() as u64).to_ne_bytes());
    attr[68..72].copy_from_slice(&24u32.to_ne_bytes()); // BPF_TRACE_FENTRY
    attr[108..112].copy_from_slice(&id.to_ne_bytes());
    // SAFETY: bpf(2) reads the attribute and what it points at, alive for the call.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, 5, attr.as_ptr(), attr.len()) };
    if fd >= 0 {
        // SAFETY: a descriptor bpf(2) just returned.
        unsafe { libc::close(fd as i32) };
    }
    fd >= 0
}
