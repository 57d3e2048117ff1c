//! A miniature of Cilium's socket LB with its maps: a `cgroup/connect4` program (see
//! `socket_lb.rs`) that rewrites `connect(VIP:port)` into `connect(backend:port)` and, as Cilium's
//! `__sock4_xlate_fwd` does (Cilium `bpf/bpf_sock.c`, `sock4_update_revnat`), records the socket in
//! a reverse socket NAT map keyed by {socket cookie, backend address, backend port}, and a
//! `cgroup/sock_release` program that deletes the socket's entry when it is released, as Cilium's
//! `cil_sock_release` does (`sock4_delete_revnat`). The Service's reverse NAT, services and
//! backends entries are written from here, as Cilium's agent writes them.
//!
//! The maps carry Cilium's pinned names and the key and value layouts of Cilium 1.14 to 1.18
//! (`bpf/lib/lb.h`, `bpf/lib/common.h`), pinned in `tc/globals` of a bpffs mounted for the test
//! alone: the IPv4 maps for an IPv4 Service, the IPv6 maps for an IPv6 one.
use std::{
    fs,
    net::{IpAddr, SocketAddr},
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::{Path, PathBuf},
    process::{Command, ExitStatus},
};

use crate::{
    socket_lb::{Hook, SocketLb, insn, raise_memlock_limit},
    tracer::Tracer,
};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;
const BPF_OBJ_PIN: libc::c_long = 6;
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_MAP_TYPE_LRU_HASH: u32 = 9;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const HELPER_MAP_UPDATE_ELEM: i32 = 2;
const HELPER_MAP_DELETE_ELEM: i32 = 3;
const HELPER_GET_SOCKET_COOKIE: i32 = 46;

/// The reverse NAT index of the test Service, as Cilium's agent numbers frontends.
pub const REV_NAT_INDEX: u16 = 7;
/// The backend id of the test backend.
const BACKEND_ID: u32 = 1;

pub struct CiliumLb {
    lb: Option<SocketLb>,
    reverse_sk: OwnedFd,
    reverse_sk_key_size: usize,
    services: OwnedFd,
    vip: SocketAddr,
    _maps: Vec<OwnedFd>,
    mount: PathBuf,
}

fn bpf(cmd: libc::c_long, attr: &[u8]) -> libc::c_long {
    // SAFETY: bpf(2) reads `attr` and whatever it points to, all alive in the caller.
    unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_ptr(), attr.len()) }
}

fn create_map(kind: u32, name: &str, key: usize, value: usize) -> OwnedFd {
    raise_memlock_limit();
    let mut attr = [0u8; 72];
    attr[0..4].copy_from_slice(&kind.to_ne_bytes());
    attr[4..8].copy_from_slice(&(key as u32).to_ne_bytes());
    attr[8..12].copy_from_slice(&(value as u32).to_ne_bytes());
    attr[12..16].copy_from_slice(&1024u32.to_ne_bytes());
    // The kernel keeps 15 bytes of a name (Cilium's maps show truncated in `bpftool map` too).
    let short = &name.as_bytes()[..name.len().min(15)];
    attr[28..28 + short.len()].copy_from_slice(short);
    let fd = bpf(BPF_MAP_CREATE, &attr);
    assert!(
        fd >= 0,
        "creating map {name}: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a new fd from the kernel, owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) }
}

fn pin(fd: &OwnedFd, path: &Path) {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL");
    let mut attr = [0u8; 16];
    attr[0..8].copy_from_slice(&(c_path.as_ptr() as u64).to_ne_bytes());
    attr[8..12].copy_from_slice(&(fd.as_raw_fd() as u32).to_ne_bytes());
    let rc = bpf(BPF_OBJ_PIN, &attr);
    assert!(
        rc == 0,
        "pinning {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

fn update(fd: &OwnedFd, key: &[u8], value: &[u8]) {
    let mut attr = [0u8; 32];
    attr[0..4].copy_from_slice(&(fd.as_raw_fd() as u32).to_ne_bytes());
    attr[8..16].copy_from_slice(&(key.as_ptr() as u64).to_ne_bytes());
    attr[16..24].copy_from_slice(&(value.as_ptr() as u64).to_ne_bytes());
    let rc = bpf(BPF_MAP_UPDATE_ELEM, &attr);
    assert!(
        rc == 0,
        "updating a test map: {}",
        std::io::Error::last_os_error()
    );
}

fn octets(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(ip) => ip.octets().to_vec(),
        IpAddr::V6(ip) => ip.octets().to_vec(),
    }
}

/// Cilium's address fields in network order, as the little-endian 32-bit words a program loads
/// and stores.
fn address_words(ip: IpAddr) -> Vec<i32> {
    octets(ip)
        .chunks(4)
        .map(|w| i32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect()
}

/// A port in network order in the low 16 bits of a word, as `user_port` and `dst_port` hold it.
fn port_word(port: u16) -> i32 {
    i32::from(u16::from_le_bytes(port.to_be_bytes()))
}

/// `struct lb{4,6}_key` of `address:port`, backend slot `slot`, protocol 0 (Cilium before 1.17).
fn service_key(addr: SocketAddr, slot: u16) -> Vec<u8> {
    [
        &octets(addr.ip())[..],
        &addr.port().to_be_bytes(),
        &slot.to_ne_bytes(),
        &[0, 0, 0, 0],
    ]
    .concat()
}

/// `struct lb{4,6}_service`: backend id (0 for the frontend), backend count, reverse NAT index
/// (network order, as the agent writes it), flags.
fn service_value(backend_id: u32, count: u16) -> Vec<u8> {
    [
        &backend_id.to_ne_bytes()[..],
        &count.to_ne_bytes(),
        &REV_NAT_INDEX.to_be_bytes(),
        &[0, 0, 0, 0],
    ]
    .concat()
}

/// One family's map names, sizes and hooks.
struct Family {
    v: char,
    hook: Hook,
    /// `struct ipv{4,6}_revnat_tuple` and `_entry` sizes.
    reverse_sk: (usize, usize),
}

fn family(ip: IpAddr) -> Family {
    match ip {
        IpAddr::V4(_) => Family {
            v: '4',
            hook: Hook::Connect4,
            reverse_sk: (16, 8),
        },
        IpAddr::V6(_) => Family {
            v: '6',
            hook: Hook::Connect6,
            reverse_sk: (32, 20),
        },
    }
}

impl CiliumLb {
    /// Mounts a bpffs, creates and pins Cilium's LB maps of `vip`'s family with the Service
    /// `vip` -> `backend`, and attaches the rewriter and the releaser to a new cgroup under the v2
    /// root.
    pub fn new(name: &str, vip: impl Into<SocketAddr>, backend: impl Into<SocketAddr>) -> CiliumLb {
        let (vip, backend) = (vip.into(), backend.into());
        assert_eq!(vip.is_ipv4(), backend.is_ipv4(), "one family");
        let mount = std::env::temp_dir().join(format!("{name}-bpffs-{}", std::process::id()));
        fs::create_dir_all(&mount).expect("bpffs mount point");
        let c_mount = std::ffi::CString::new(mount.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mount(2) with NUL-terminated strings we own.
        let rc = unsafe {
            libc::mount(
                c"bpf".as_ptr(),
                c_mount.as_ptr(),
                c"bpf".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        assert!(
            rc == 0,
            "mounting a bpffs: {}",
            std::io::Error::last_os_error()
        );
        let globals = mount.join("tc/globals");
        fs::create_dir_all(&globals).expect("tc/globals");

        let f = family(vip.ip());
        let alen = octets(vip.ip()).len();
        let map = |kind, what: &str, key, value| {
            let name = format!("cilium_lb{}_{what}", f.v);
            let fd = create_map(kind, &name, key, value);
            pin(&fd, &globals.join(&name));
            fd
        };
        let (key, value) = f.reverse_sk;
        let reverse_sk = map(BPF_MAP_TYPE_LRU_HASH, "reverse_sk", key, value);
        let reverse_nat = map(BPF_MAP_TYPE_HASH, "reverse_nat", 2, alen + 2);
        let services = map(BPF_MAP_TYPE_HASH, "services_v2", alen + 8, 12);
        let backends = map(BPF_MAP_TYPE_HASH, "backends_v3", 4, alen + 8);
        // What Cilium's agent writes for a Service with one backend.
        update(
            &reverse_nat,
            &REV_NAT_INDEX.to_be_bytes(),
            &[&octets(vip.ip())[..], &vip.port().to_be_bytes()].concat(),
        );
        update(&services, &service_key(vip, 0), &service_value(0, 1));
        update(
            &services,
            &service_key(vip, 1),
            &service_value(BACKEND_ID, 0),
        );
        update(
            &backends,
            &BACKEND_ID.to_ne_bytes(),
            &[
                &octets(backend.ip())[..],
                &backend.port().to_be_bytes(),
                &[0u8; 6],
            ]
            .concat(),
        );

        let connect = rewriter(vip, backend, reverse_sk.as_raw_fd());
        let release = releaser(vip.ip(), reverse_sk.as_raw_fd());
        let lb =
            SocketLb::with_programs(name, &[(f.hook, &connect), (Hook::SockRelease, &release)]);
        CiliumLb {
            lb: Some(lb),
            reverse_sk,
            reverse_sk_key_size: key,
            services,
            vip,
            _maps: vec![reverse_nat, backends],
            mount,
        }
    }

    /// The directory holding the pinned maps, for `--cilium-bpffs`.
    pub fn bpffs(&self) -> PathBuf {
        self.mount.join("tc/globals")
    }

    /// The cgroup whose processes are load balanced: write a pid to its `cgroup.procs`.
    pub fn procs_file(&self) -> PathBuf {
        self.lb.as_ref().expect("attached").procs_file()
    }

    /// Starts the tracer on namespace `netns` with these maps (`--cilium-bpffs`), its `connect()`
    /// hook attached as on kernels before 6.15 (`--no-preorder`: after this LB's rewrite), and
    /// `extra` arguments.
    pub fn start_tracer(&self, netns: &str, extra: &[&str]) -> Tracer {
        let bpffs = self.bpffs();
        let mut args = vec![
            "--netns",
            netns,
            "--no-preorder",
            "--cilium-bpffs",
            bpffs.to_str().expect("utf-8 path"),
        ];
        args.extend_from_slice(extra);
        Tracer::start(&args)
    }

    /// Runs `client` (a command and its arguments) in the load-balanced cgroup inside namespace
    /// `netns`, with the tracer's userspace stopped until the client has exited and its socket
    /// is released (Cilium's entry deleted, checked): whatever the tracer names then, its kernel
    /// hooks read while the socket lived, as on a busy node.
    pub fn run_released(&self, tracer: &Tracer, netns: &str, client: &[&str]) -> ExitStatus {
        tracer.pause();
        let status = Command::new("sh")
            .arg("-c")
            .arg(r#"echo $$ > "$0" && exec ip netns exec "$@""#)
            .arg(self.procs_file())
            .arg(netns)
            .args(client)
            .status();
        let released = self.reverse_sk_is_empty();
        tracer.resume();
        let status = status.expect("run the client");
        assert!(
            released,
            "the client's socket is released and its entry gone"
        );
        status
    }

    /// What Cilium's agent does when the backend leaves the Service: its slot goes and the
    /// frontend counts no backend.
    pub fn remove_backend(&self) {
        update(
            &self.services,
            &service_key(self.vip, 0),
            &service_value(0, 0),
        );
        let key = service_key(self.vip, 1);
        let mut attr = [0u8; 32];
        attr[0..4].copy_from_slice(&(self.services.as_raw_fd() as u32).to_ne_bytes());
        attr[8..16].copy_from_slice(&(key.as_ptr() as u64).to_ne_bytes());
        let rc = bpf(BPF_MAP_DELETE_ELEM, &attr);
        assert!(
            rc == 0,
            "deleting the backend slot: {}",
            std::io::Error::last_os_error()
        );
    }

    /// Whether the reverse socket NAT map holds no socket (all released).
    pub fn reverse_sk_is_empty(&self) -> bool {
        let mut next = vec![0u8; self.reverse_sk_key_size];
        let mut attr = [0u8; 32];
        attr[0..4].copy_from_slice(&(self.reverse_sk.as_raw_fd() as u32).to_ne_bytes());
        // A null key asks for the first key.
        attr[16..24].copy_from_slice(&(next.as_mut_ptr() as u64).to_ne_bytes());
        bpf(BPF_MAP_GET_NEXT_KEY, &attr) != 0
    }
}

/// Instructions with forward jumps to one label, patched when the label is placed.
#[derive(Default)]
struct Program {
    insns: Vec<[u8; 8]>,
    jumps_to_label: Vec<usize>,
}

impl Program {
    fn push(&mut self, i: [u8; 8]) {
        self.insns.push(i);
    }

    /// `if w<reg> != imm goto label`.
    fn jne_to_label(&mut self, reg: u8, imm: i32) {
        self.jumps_to_label.push(self.insns.len());
        self.push(insn(0x56, reg, 0, 0, imm));
    }

    fn place_label(&mut self) {
        let here = self.insns.len();
        for &at in &self.jumps_to_label {
            let off = i16::try_from(here - at - 1).expect("short jump");
            self.insns[at][2..4].copy_from_slice(&off.to_le_bytes());
        }
        self.jumps_to_label.clear();
    }

    fn load_map(&mut self, reg: u8, fd: i32) {
        self.push(insn(0x18, reg, BPF_PSEUDO_MAP_FD, 0, fd));
        self.push(insn(0, 0, 0, 0, 0));
    }

    fn bytes(self) -> Vec<u8> {
        self.insns.concat()
    }
}

/// The rewriter (`struct bpf_sock_addr` context): for `connect(vip)`, the socket's cookie and
/// backend -> the Service address and reverse NAT index in the reverse socket NAT map, then the
/// address rewritten to `backend`.
fn rewriter(vip: SocketAddr, backend: SocketAddr, reverse_sk: i32) -> Vec<u8> {
    const USER_IP4: i16 = 4;
    const USER_IP6: i16 = 8;
    const USER_PORT: i16 = 24;
    let user_ip = if vip.is_ipv4() { USER_IP4 } else { USER_IP6 };
    let (vip_words, backend_words) = (address_words(vip.ip()), address_words(backend.ip()));
    let alen = 4 * vip_words.len() as i16;
    let (key_size, value_size) = family(vip.ip()).reverse_sk;
    // The key at the top of the stack, the value (8-aligned) below it.
    let key = -(key_size as i16);
    let value = key - (value_size as i16 + 7) / 8 * 8;
    let mut value_tail = [0u8; 4];
    value_tail[..2].copy_from_slice(&vip.port().to_be_bytes());
    value_tail[2..].copy_from_slice(&REV_NAT_INDEX.to_be_bytes());

    let mut p = Program::default();
    p.push(insn(0xbf, 6, 1, 0, 0)); // r6 = ctx
    for (i, &w) in vip_words.iter().enumerate() {
        p.push(insn(0x61, 2, 6, user_ip + 4 * i as i16, 0)); // r2 = ctx->user_ip[i]
        p.jne_to_label(2, w);
    }
    p.push(insn(0x61, 2, 6, USER_PORT, 0)); // r2 = ctx->user_port
    p.jne_to_label(2, port_word(vip.port()));
    p.push(insn(0xbf, 1, 6, 0, 0)); // r1 = ctx
    p.push(insn(0x85, 0, 0, 0, HELPER_GET_SOCKET_COOKIE)); // r0 = cookie
    p.push(insn(0x7b, 10, 0, key, 0)); // key.cookie = r0
    for (i, &w) in backend_words.iter().enumerate() {
        p.push(insn(0x62, 10, 0, key + 8 + 4 * i as i16, w)); // key.address = backend
    }
    p.push(insn(0x62, 10, 0, key + 8 + alen, port_word(backend.port()))); // key.port, pad 0
    if key_size == 32 {
        p.push(insn(0x62, 10, 0, key + 28, 0)); // the C padding after the port
    }
    for (i, &w) in vip_words.iter().enumerate() {
        p.push(insn(0x62, 10, 0, value + 4 * i as i16, w)); // value.address = vip
    }
    p.push(insn(
        0x62,
        10,
        0,
        value + alen,
        i32::from_le_bytes(value_tail),
    )); // port, index
    p.load_map(1, reverse_sk);
    p.push(insn(0xbf, 2, 10, 0, 0)); // r2 = fp
    p.push(insn(0x07, 2, 0, 0, i32::from(key))); // r2 = &key
    p.push(insn(0xbf, 3, 10, 0, 0)); // r3 = fp
    p.push(insn(0x07, 3, 0, 0, i32::from(value))); // r3 = &value
    p.push(insn(0xb7, 4, 0, 0, 0)); // r4 = BPF_ANY
    p.push(insn(0x85, 0, 0, 0, HELPER_MAP_UPDATE_ELEM));
    for (i, &w) in backend_words.iter().enumerate() {
        p.push(insn(0xb4, 2, 0, 0, w)); // w2 = backend address word
        p.push(insn(0x63, 6, 2, user_ip + 4 * i as i16, 0)); // ctx->user_ip[i] = w2
    }
    p.push(insn(0xb4, 2, 0, 0, port_word(backend.port()))); // w2 = backend port
    p.push(insn(0x63, 6, 2, USER_PORT, 0)); // ctx->user_port = w2
    p.place_label(); // allow:
    p.push(insn(0xb7, 0, 0, 0, 1)); // r0 = 1
    p.push(insn(0x95, 0, 0, 0, 0)); // exit
    p.bytes()
}

/// The releaser (`struct bpf_sock` context): at release, a socket's entry goes, keyed by its
/// cookie and its destination (the backend it was connected to), as Cilium's `cil_sock_release`.
fn releaser(family_of: IpAddr, reverse_sk: i32) -> Vec<u8> {
    const FAMILY: i16 = 4;
    const DST_PORT: i16 = 48;
    const DST_IP4: i16 = 52;
    const DST_IP6: i16 = 56;
    let (af, dst_ip, words) = if family_of.is_ipv4() {
        (libc::AF_INET, DST_IP4, 1)
    } else {
        (libc::AF_INET6, DST_IP6, 4)
    };
    let (key_size, _) = family(family_of).reverse_sk;
    let key = -(key_size as i16);
    let mut p = Program::default();
    p.push(insn(0xbf, 6, 1, 0, 0)); // r6 = ctx
    p.push(insn(0x61, 2, 6, FAMILY, 0)); // r2 = ctx->family
    p.jne_to_label(2, af);
    p.push(insn(0xbf, 1, 6, 0, 0)); // r1 = ctx
    p.push(insn(0x85, 0, 0, 0, HELPER_GET_SOCKET_COOKIE)); // r0 = cookie
    p.push(insn(0x7b, 10, 0, key, 0)); // key.cookie = r0
    for i in 0..words {
        p.push(insn(0x61, 2, 6, dst_ip + 4 * i, 0)); // r2 = ctx->dst_ip[i]
        p.push(insn(0x63, 10, 2, key + 8 + 4 * i, 0)); // key.address[i] = w2
    }
    // ctx->dst_port: network order in the low 16 bits; stored with the zero pad after it.
    p.push(insn(0x61, 2, 6, DST_PORT, 0));
    p.push(insn(0x63, 10, 2, key + 8 + 4 * words, 0));
    if key_size == 32 {
        p.push(insn(0x62, 10, 0, key + 28, 0));
    }
    p.load_map(1, reverse_sk);
    p.push(insn(0xbf, 2, 10, 0, 0)); // r2 = fp
    p.push(insn(0x07, 2, 0, 0, i32::from(key))); // r2 = &key
    p.push(insn(0x85, 0, 0, 0, HELPER_MAP_DELETE_ELEM));
    p.place_label(); // out:
    p.push(insn(0xb7, 0, 0, 0, 1)); // r0 = 1
    p.push(insn(0x95, 0, 0, 0, 0)); // exit
    p.bytes()
}

impl Drop for CiliumLb {
    fn drop(&mut self) {
        // Detach first, then the pins go with the mount (the maps with their last fd).
        drop(self.lb.take());
        let c_mount =
            std::ffi::CString::new(self.mount.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: umount2(2) with a NUL-terminated path we own.
        if unsafe { libc::umount2(c_mount.as_ptr(), libc::MNT_DETACH) } != 0 {
            eprintln!(
                "cilium_lb: cannot unmount {}: {}",
                self.mount.display(),
                std::io::Error::last_os_error()
            );
        }
        let _ = fs::remove_dir(&self.mount);
    }
}
