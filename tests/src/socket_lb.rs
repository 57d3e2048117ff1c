//! A miniature socket-level load balancer, like Cilium's: a `cgroup/connect4` program that rewrites
//! `connect(VIP:port)` into `connect(backend:port)` for processes in one test cgroup (and, for
//! `cilium_lb.rs`, a `cgroup/sock_release` program beside it).
//!
//! Written as raw BPF instructions and loaded with `bpf(2)`, so the tests need no BPF toolchain of their
//! own. Attached to a child cgroup of the cgroup v2 root: programs of a descendant cgroup normally run
//! before the root's, which is exactly the order the tracer must defeat to see the dialled address.
use std::{
    fs,
    net::SocketAddrV4,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::PathBuf,
};

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_DETACH: libc::c_long = 9;
const BPF_PROG_TYPE_CGROUP_SOCK: u32 = 9;
const BPF_PROG_TYPE_CGROUP_SOCK_ADDR: u32 = 18;
const BPF_CGROUP_INET4_CONNECT: u32 = 10;
const BPF_CGROUP_INET6_CONNECT: u32 = 11;
const BPF_CGROUP_INET_SOCK_RELEASE: u32 = 34;
const BPF_F_ALLOW_MULTI: u32 = 2;

/// Where a test program runs.
#[derive(Clone, Copy, Debug)]
pub enum Hook {
    /// `cgroup/connect4` (`struct bpf_sock_addr` context).
    Connect4,
    /// `cgroup/connect6`.
    Connect6,
    /// `cgroup/sock_release` (`struct bpf_sock` context), Linux 5.9+.
    SockRelease,
}

impl Hook {
    fn program_type(self) -> u32 {
        match self {
            Hook::Connect4 | Hook::Connect6 => BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
            Hook::SockRelease => BPF_PROG_TYPE_CGROUP_SOCK,
        }
    }

    fn attach_type(self) -> u32 {
        match self {
            Hook::Connect4 => BPF_CGROUP_INET4_CONNECT,
            Hook::Connect6 => BPF_CGROUP_INET6_CONNECT,
            Hook::SockRelease => BPF_CGROUP_INET_SOCK_RELEASE,
        }
    }
}

/// One eBPF instruction: opcode, dst/src registers, offset, immediate.
pub(crate) fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = (src << 4) | dst;
    b[2..4].copy_from_slice(&off.to_le_bytes());
    b[4..8].copy_from_slice(&imm.to_le_bytes());
    b
}

/// `struct bpf_sock_addr` keeps addresses and ports in network byte order; loaded as little-endian
/// 32-bit words, these are the values the program compares and stores.
pub(crate) fn ip_word(addr: &SocketAddrV4) -> i32 {
    i32::from_le_bytes(addr.ip().octets())
}

pub(crate) fn port_word(addr: &SocketAddrV4) -> i32 {
    i32::from(u16::from_le_bytes(addr.port().to_be_bytes()))
}

/// The cgroup v2 root the test cgroups go under (`unified` on a hybrid hierarchy).
pub fn cgroup_v2_root() -> &'static str {
    if std::path::Path::new("/sys/fs/cgroup/unified/cgroup.procs").exists() {
        "/sys/fs/cgroup/unified"
    } else {
        "/sys/fs/cgroup"
    }
}

pub struct SocketLb {
    cgroup: PathBuf,
    attached: Vec<(OwnedFd, Hook)>,
    cgroup_fd: fs::File,
}

impl SocketLb {
    /// Loads the rewriter for `vip -> backend` and attaches it to a new cgroup under the v2 root.
    pub fn new(name: &str, vip: SocketAddrV4, backend: SocketAddrV4) -> SocketLb {
        const USER_IP4: i16 = 4;
        const USER_PORT: i16 = 24;
        let program: Vec<u8> = [
            insn(0x61, 2, 1, USER_IP4, 0),            // r2 = ctx->user_ip4
            insn(0x56, 2, 0, 6, ip_word(&vip)),       // if w2 != vip goto allow
            insn(0x61, 2, 1, USER_PORT, 0),           // r2 = ctx->user_port
            insn(0x56, 2, 0, 4, port_word(&vip)),     // if w2 != port goto allow
            insn(0xb4, 2, 0, 0, ip_word(&backend)),   // w2 = backend address
            insn(0x63, 1, 2, USER_IP4, 0),            // ctx->user_ip4 = w2
            insn(0xb4, 2, 0, 0, port_word(&backend)), // w2 = backend port
            insn(0x63, 1, 2, USER_PORT, 0),           // ctx->user_port = w2
            insn(0xb7, 0, 0, 0, 1),                   // allow: r0 = 1
            insn(0x95, 0, 0, 0, 0),                   // exit
        ]
        .concat();
        SocketLb::with_programs(name, &[(Hook::Connect4, &program)])
    }

    /// Loads `programs` (raw instructions, each for its hook) and attaches them, in order, to a new
    /// cgroup under the v2 root.
    pub fn with_programs(name: &str, programs: &[(Hook, &[u8])]) -> SocketLb {
        let cgroup = PathBuf::from(cgroup_v2_root()).join(format!("{name}-{}", std::process::id()));
        fs::create_dir_all(&cgroup).expect("create the test cgroup");
        let cgroup_fd = fs::File::open(&cgroup).expect("open the test cgroup");
        let mut lb = SocketLb {
            cgroup,
            attached: Vec::new(),
            cgroup_fd,
        };
        for &(hook, program) in programs {
            let prog = load(hook, program);
            let rc = lb.attach_cmd(BPF_PROG_ATTACH, &prog, hook);
            assert!(
                rc == 0,
                "attaching the test {hook:?} program: {}",
                std::io::Error::last_os_error()
            );
            lb.attached.push((prog, hook));
        }
        lb
    }

    /// The cgroup whose processes are load balanced: write a pid to its `cgroup.procs`.
    pub fn procs_file(&self) -> PathBuf {
        self.cgroup.join("cgroup.procs")
    }

    fn attach_cmd(&self, cmd: libc::c_long, prog: &OwnedFd, hook: Hook) -> libc::c_long {
        let mut attr = [0u8; 32];
        attr[0..4].copy_from_slice(&self.cgroup_fd.as_raw_fd().to_ne_bytes());
        attr[4..8].copy_from_slice(&prog.as_raw_fd().to_ne_bytes());
        attr[8..12].copy_from_slice(&hook.attach_type().to_ne_bytes());
        attr[12..16].copy_from_slice(&BPF_F_ALLOW_MULTI.to_ne_bytes());
        // SAFETY: bpf(2) reads `attr` only.
        unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_ptr(), attr.len()) }
    }
}

/// Lifts the locked-memory limit that kernels before 5.11 charge BPF maps and programs to (later
/// ones charge the memory cgroup), as every BPF loader does. Where it may not be lifted (a
/// container's limit), a kernel that needs it says so when the map or program is created.
pub(crate) fn raise_memlock_limit() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit(2) reads the struct only.
    let _ = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &raw const unlimited) };
}

/// Loads one program for `hook`; a refusal panics with the verifier's log.
fn load(hook: Hook, program: &[u8]) -> OwnedFd {
    raise_memlock_limit();
    let license = b"GPL\0";
    let mut attr = [0u8; 128];
    attr[0..4].copy_from_slice(&hook.program_type().to_ne_bytes());
    attr[4..8].copy_from_slice(&((program.len() / 8) as u32).to_ne_bytes());
    attr[8..16].copy_from_slice(&(program.as_ptr() as u64).to_ne_bytes());
    attr[16..24].copy_from_slice(&(license.as_ptr() as u64).to_ne_bytes());
    attr[68..72].copy_from_slice(&hook.attach_type().to_ne_bytes());
    // SAFETY: bpf(2) reads `attr` and the program and license it points to, all alive here.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, BPF_PROG_LOAD, attr.as_ptr(), attr.len()) };
    if fd < 0 {
        let error = std::io::Error::last_os_error();
        // Again with the verifier's log, to say why.
        let mut log = vec![0u8; 1 << 16];
        attr[24..28].copy_from_slice(&1u32.to_ne_bytes());
        attr[28..32].copy_from_slice(&(log.len() as u32).to_ne_bytes());
        attr[32..40].copy_from_slice(&(log.as_mut_ptr() as u64).to_ne_bytes());
        // SAFETY: as above; the kernel writes at most `log.len()` bytes into `log`.
        unsafe { libc::syscall(libc::SYS_bpf, BPF_PROG_LOAD, attr.as_ptr(), attr.len()) };
        let log = String::from_utf8_lossy(&log);
        panic!(
            "loading the test {hook:?} program: {error}\n{}",
            log.trim_end_matches('\0')
        );
    }
    // SAFETY: a new fd from the kernel, owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) }
}

impl Drop for SocketLb {
    fn drop(&mut self) {
        // Attachments made with BPF_PROG_ATTACH outlive the fds: detach explicitly, then remove the
        // (by now empty) cgroup.
        for (prog, hook) in &self.attached {
            self.attach_cmd(BPF_PROG_DETACH, prog, *hook);
        }
        if let Err(e) = fs::remove_dir(&self.cgroup) {
            eprintln!("socket_lb: cannot remove {}: {e}", self.cgroup.display());
        }
    }
}
