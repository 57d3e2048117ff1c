//! A miniature of Cilium's socket LB with its maps: a `cgroup/connect4` program (see
//! `socket_lb.rs`) that rewrites `connect(VIP:port)` into `connect(backend:port)` and, as Cilium's
//! `__sock4_xlate_fwd` does (Cilium `bpf/bpf_sock.c`, `sock4_update_revnat`), records the socket in
//! a reverse socket NAT map keyed by {socket cookie, backend address, backend port}, and a
//! `cgroup/sock_release` program that deletes the socket's entry when it is released, as Cilium's
//! `cil_sock_release` does (`sock4_delete_revnat`). The Service's reverse NAT, services and
//! backends entries are written from here, as Cilium's agent writes them.
//!
//! The maps carry Cilium's pinned names and the key and value layouts of Cilium 1.14 to 1.18
//! (`bpf/lib/lb.h`), pinned in `tc/globals` of a bpffs mounted for the test alone. IPv4 only.
use std::{
    fs,
    net::SocketAddrV4,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::{Path, PathBuf},
};

use crate::socket_lb::{Hook, SocketLb, insn, ip_word, port_word, raise_memlock_limit};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
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
    _maps: Vec<OwnedFd>,
    mount: PathBuf,
}

fn bpf(cmd: libc::c_long, attr: &[u8]) -> libc::c_long {
    // SAFETY: bpf(2) reads `attr` and whatever it points to, all alive in the caller.
    unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_ptr(), attr.len()) }
}

fn create_map(kind: u32, name: &str, key: u32, value: u32) -> OwnedFd {
    raise_memlock_limit();
    let mut attr = [0u8; 72];
    attr[0..4].copy_from_slice(&kind.to_ne_bytes());
    attr[4..8].copy_from_slice(&key.to_ne_bytes());
    attr[8..12].copy_from_slice(&value.to_ne_bytes());
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

/// `struct lb4_key` of `address:port`, backend slot `slot`, protocol 0 (Cilium before 1.17).
fn service_key(addr: SocketAddrV4, slot: u16) -> Vec<u8> {
    [
        &addr.ip().octets()[..],
        &addr.port().to_be_bytes(),
        &slot.to_ne_bytes(),
        &[0, 0, 0, 0],
    ]
    .concat()
}

/// `struct lb4_service`: backend id (0 for the frontend), backend count, reverse NAT index
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

impl CiliumLb {
    /// Mounts a bpffs, creates and pins Cilium's IPv4 LB maps with the Service `vip` -> `backend`,
    /// and attaches the rewriter to a new cgroup under the v2 root.
    pub fn new(
        name: &str,
        cgroup_root: &str,
        vip: SocketAddrV4,
        backend: SocketAddrV4,
    ) -> CiliumLb {
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

        let reverse_sk = create_map(BPF_MAP_TYPE_LRU_HASH, "cilium_lb4_reverse_sk", 16, 8);
        let reverse_nat = create_map(BPF_MAP_TYPE_HASH, "cilium_lb4_reverse_nat", 2, 6);
        let services = create_map(BPF_MAP_TYPE_HASH, "cilium_lb4_services_v2", 12, 12);
        let backends = create_map(BPF_MAP_TYPE_HASH, "cilium_lb4_backends_v3", 4, 12);
        for (fd, name) in [
            (&reverse_sk, "cilium_lb4_reverse_sk"),
            (&reverse_nat, "cilium_lb4_reverse_nat"),
            (&services, "cilium_lb4_services_v2"),
            (&backends, "cilium_lb4_backends_v3"),
        ] {
            pin(fd, &globals.join(name));
        }
        // What Cilium's agent writes for a Service with one backend.
        update(
            &reverse_nat,
            &REV_NAT_INDEX.to_be_bytes(),
            &[&vip.ip().octets()[..], &vip.port().to_be_bytes()].concat(),
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
                &backend.ip().octets()[..],
                &backend.port().to_be_bytes(),
                &[0u8; 6],
            ]
            .concat(),
        );

        let connect = rewriter(vip, backend, reverse_sk.as_raw_fd());
        let release = releaser(reverse_sk.as_raw_fd());
        let lb = SocketLb::with_programs(
            name,
            cgroup_root,
            &[(Hook::Connect4, &connect), (Hook::SockRelease, &release)],
        );
        CiliumLb {
            lb: Some(lb),
            reverse_sk,
            _maps: vec![reverse_nat, services, backends],
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

    /// Whether the reverse socket NAT map holds no socket (all released).
    pub fn reverse_sk_is_empty(&self) -> bool {
        let mut next = [0u8; 16];
        let mut attr = [0u8; 32];
        attr[0..4].copy_from_slice(&(self.reverse_sk.as_raw_fd() as u32).to_ne_bytes());
        // A null key asks for the first key.
        attr[16..24].copy_from_slice(&(next.as_mut_ptr() as u64).to_ne_bytes());
        bpf(BPF_MAP_GET_NEXT_KEY, &attr) != 0
    }
}

/// The rewriter: for `connect(vip)`, the socket's cookie and backend -> the Service address and
/// reverse NAT index in the reverse socket NAT map, then the address rewritten to `backend`.
fn rewriter(vip: SocketAddrV4, backend: SocketAddrV4, reverse_sk: i32) -> Vec<u8> {
    const USER_IP4: i16 = 4;
    const USER_PORT: i16 = 24;
    let mut value_tail = [0u8; 4];
    value_tail[..2].copy_from_slice(&vip.port().to_be_bytes());
    value_tail[2..].copy_from_slice(&REV_NAT_INDEX.to_be_bytes());
    [
        insn(0xbf, 6, 1, 0, 0),                                 // 0: r6 = ctx
        insn(0x61, 2, 6, USER_IP4, 0),                          // 1: r2 = ctx->user_ip4
        insn(0x56, 2, 0, 21, ip_word(&vip)),                    // 2: if w2 != vip goto allow
        insn(0x61, 2, 6, USER_PORT, 0),                         // 3: r2 = ctx->user_port
        insn(0x56, 2, 0, 19, port_word(&vip)),                  // 4: if w2 != port goto allow
        insn(0xbf, 1, 6, 0, 0),                                 // 5: r1 = ctx
        insn(0x85, 0, 0, 0, HELPER_GET_SOCKET_COOKIE),          // 6: r0 = cookie
        insn(0x7b, 10, 0, -16, 0),                              // 7: key.cookie = r0
        insn(0x62, 10, 0, -8, ip_word(&backend)),               // 8: key.address = backend
        insn(0x62, 10, 0, -4, port_word(&backend)),             // 9: key.port = backend port, pad 0
        insn(0x62, 10, 0, -24, ip_word(&vip)),                  // 10: value.address = vip
        insn(0x62, 10, 0, -20, i32::from_le_bytes(value_tail)), // 11: value.port, rev_nat_index
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, reverse_sk),        // 12: r1 = reverse_sk map
        insn(0, 0, 0, 0, 0),      // 13: (second half of the 64-bit load)
        insn(0xbf, 2, 10, 0, 0),  // 14: r2 = fp
        insn(0x07, 2, 0, 0, -16), // 15: r2 = &key
        insn(0xbf, 3, 10, 0, 0),  // 16: r3 = fp
        insn(0x07, 3, 0, 0, -24), // 17: r3 = &value
        insn(0xb7, 4, 0, 0, 0),   // 18: r4 = BPF_ANY
        insn(0x85, 0, 0, 0, HELPER_MAP_UPDATE_ELEM), // 19: update
        insn(0xb4, 2, 0, 0, ip_word(&backend)), // 20: w2 = backend address
        insn(0x63, 6, 2, USER_IP4, 0), // 21: ctx->user_ip4 = w2
        insn(0xb4, 2, 0, 0, port_word(&backend)), // 22: w2 = backend port
        insn(0x63, 6, 2, USER_PORT, 0), // 23: ctx->user_port = w2
        insn(0xb7, 0, 0, 0, 1),   // 24: allow: r0 = 1
        insn(0x95, 0, 0, 0, 0),   // 25: exit
    ]
    .concat()
}

/// At release, an IPv4 socket's entry goes: the key is its cookie and its destination (the
/// backend it was connected to), read from `struct bpf_sock`.
fn releaser(reverse_sk: i32) -> Vec<u8> {
    const FAMILY: i16 = 4;
    const DST_PORT: i16 = 48;
    const DST_IP4: i16 = 52;
    const AF_INET: i32 = 2;
    [
        insn(0xbf, 6, 1, 0, 0),                          // 0: r6 = ctx
        insn(0x61, 2, 6, FAMILY, 0),                     // 1: r2 = ctx->family
        insn(0x56, 2, 0, 12, AF_INET),                   // 2: if w2 != AF_INET goto out
        insn(0xbf, 1, 6, 0, 0),                          // 3: r1 = ctx
        insn(0x85, 0, 0, 0, HELPER_GET_SOCKET_COOKIE),   // 4: r0 = cookie
        insn(0x7b, 10, 0, -16, 0),                       // 5: key.cookie = r0
        insn(0x61, 2, 6, DST_IP4, 0),                    // 6: r2 = ctx->dst_ip4
        insn(0x63, 10, 2, -8, 0),                        // 7: key.address = w2
        insn(0x61, 2, 6, DST_PORT, 0), // 8: r2 = ctx->dst_port (network order, low 16 bits)
        insn(0x63, 10, 2, -4, 0),      // 9: key.port = w2, pad 0
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, reverse_sk), // 10: r1 = reverse_sk map
        insn(0, 0, 0, 0, 0),           // 11: (second half of the 64-bit load)
        insn(0xbf, 2, 10, 0, 0),       // 12: r2 = fp
        insn(0x07, 2, 0, 0, -16),      // 13: r2 = &key
        insn(0x85, 0, 0, 0, HELPER_MAP_DELETE_ELEM), // 14: delete
        insn(0xb7, 0, 0, 0, 1),        // 15: out: r0 = 1
        insn(0x95, 0, 0, 0, 0),        // 16: exit
    ]
    .concat()
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
