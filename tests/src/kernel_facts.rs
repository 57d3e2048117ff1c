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

/// Whether cgroup programs can be attached with `BPF_F_PREORDER`: upstream since 6.15, and
/// backported in Debian's 6.12 packages (release `6.12.*+deb*`, such as `6.12.117+deb12-amd64`);
/// Debian's 5.10 and 6.1 lack it. One answer per kernel of the matrix: a kernel that differs fails
/// the capability test, and this table gets its line.
pub fn has_preorder() -> bool {
    let version = version();
    version >= (6, 15) || (version == (6, 12) && release().contains("+deb"))
}
