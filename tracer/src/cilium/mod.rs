//! Cilium's socket LB, read from its pinned maps (incidents 000 and 004). With Cilium's kube-proxy
//! replacement, Cilium's `connect()` program (`bpf/bpf_sock.c`, `cil_sock{4,6}_connect`) rewrites a
//! Service address into a backend before the tracer's hook sees it on kernels without
//! `BPF_F_PREORDER`, and no conntrack DNAT is left to ask. Cilium remembers, per socket, what it
//! rewrote (to answer `recvmsg()` and `getpeername()` with the Service): the reverse socket NAT map
//! `cilium_lb{4,6}_reverse_sk`, keyed by {socket cookie, backend address, backend port}, holds the
//! Service address and port the application dialled and its reverse NAT index. An entry exists only
//! for a socket Cilium translated, so a hit names the Service for certain; the services and
//! backends maps then tell whether that backend is still one of the Service's (`backend_gone`
//! counts those that are not: a socket glued to a backend Cilium has since removed, the nginx
//! resolver case).
//!
//! Cilium deletes a socket's entry when the socket is released (`cil_sock_release`), often before
//! userspace hears of a connect refused at its first SYN. So the kernel's `connect()` hook reads
//! the map itself, right after Cilium's hook wrote it (`reverse_sk_pins`; the attempt then carries
//! the dialled Service), and the DNS egress hook does the same for an IPv4 query. Userspace asks
//! the map only for what the hooks could not (an IPv6 query, a tracer started after the connect),
//! while the socket lives; names found are kept by cookie until the flow could end
//! (`OPEN_FLOW_TTL`), for its final record.
//!
//! Layouts (`maps.rs`) are those of Cilium 1.14 to 1.18; a map whose key or value size differs is
//! not read, and `stats.socket_lb.cilium.unreadable` says which and why. Nothing here can fail the
//! run: absent maps mean Cilium is not here.
pub mod maps;

use std::{
    net::{IpAddr, SocketAddr},
    path::{Path, PathBuf},
};

use aya::maps::{HashMap, Map, MapData, MapError};
use hashbrown::HashMap as Cache;

use self::maps::{
    Backend4, Backend6, BackendValue, RevNat4, RevNat6, RevSk4Key, RevSk4Value, RevSk6Key,
    RevSk6Value, Service4Key, Service6Key, ServiceKey, ServiceValue,
};
use crate::record::CiliumStats;

/// Where Cilium pins its maps (`bpf/lib/...`: `LIBBPF_PIN_BY_NAME` under the tc globals of its
/// bpffs, `/sys/fs/bpf` by default).
pub const DEFAULT_BPFFS: &str = "/sys/fs/bpf/tc/globals";

/// `--cilium-bpffs` as given: a directory on a bpffs, checked before anything is attached.
pub fn check_bpffs(dir: &Path) -> anyhow::Result<()> {
    match crate::fs_type::magic(dir) {
        Ok(crate::fs_type::BPF_FS_MAGIC) if dir.is_dir() => Ok(()),
        Ok(_) => anyhow::bail!(
            "--cilium-bpffs {}: not a directory on a bpffs (Cilium pins its maps under \
             {DEFAULT_BPFFS})",
            dir.display()
        ),
        Err(e) => anyhow::bail!("--cilium-bpffs {}: {e}", dir.display()),
    }
}

/// The maps in `--cilium-bpffs` (checked), or in the default directory if any.
pub fn open_given(dir: Option<&Path>) -> anyhow::Result<CiliumMaps> {
    if let Some(dir) = dir {
        check_bpffs(dir)?;
    }
    Ok(CiliumMaps::open(dir.unwrap_or(Path::new(DEFAULT_BPFFS))))
}

type Maps<K, V> = Option<HashMap<MapData, K, V>>;

/// One family's maps; each is `None` when absent or of a layout we do not know.
struct Family<RK, RV, SK, B, RN> {
    reverse_sk: Maps<RK, RV>,
    reverse_nat: Maps<[u8; 2], RN>,
    services: Maps<SK, ServiceValue>,
    backends: Maps<u32, B>,
}

const REVERSE_SK4: &str = "cilium_lb4_reverse_sk";
const REVERSE_SK6: &str = "cilium_lb6_reverse_sk";

/// The reverse socket NAT maps that were read, by pin: the kernel's `connect()` hook reads these
/// itself (`KernelSide::load`), while the socket lives.
#[derive(Debug, Default)]
pub struct ReverseSkPins {
    pub v4: Option<PathBuf>,
    pub v6: Option<PathBuf>,
}

/// Cilium's load-balancing maps, opened from their pins.
pub struct CiliumMaps {
    dir: PathBuf,
    v4: Family<RevSk4Key, RevSk4Value, Service4Key, Backend4, RevNat4>,
    v6: Family<RevSk6Key, RevSk6Value, Service6Key, Backend6, RevNat6>,
    opened: Vec<String>,
    unreadable: Vec<String>,
    /// Services found, by (socket cookie, backend), with the kernel time of the flow that asked.
    cache: Cache<(u64, SocketAddr), (SocketAddr, u64)>,
    named: u64,
    backend_gone: u64,
}

impl CiliumMaps {
    /// Opens whichever of Cilium's maps are pinned in `dir`. Never fails: what is missing or
    /// unreadable is said in `stats()`.
    pub fn open(dir: &Path) -> CiliumMaps {
        let mut o = Opener {
            dir,
            opened: Vec::new(),
            unreadable: Vec::new(),
        };
        let v4 = Family {
            reverse_sk: o.map(REVERSE_SK4),
            reverse_nat: o.map("cilium_lb4_reverse_nat"),
            services: o.map("cilium_lb4_services_v2"),
            backends: o.map("cilium_lb4_backends_v3"),
        };
        let v6 = Family {
            reverse_sk: o.map(REVERSE_SK6),
            reverse_nat: o.map("cilium_lb6_reverse_nat"),
            services: o.map("cilium_lb6_services_v2"),
            backends: o.map("cilium_lb6_backends_v3"),
        };
        CiliumMaps {
            dir: dir.to_path_buf(),
            v4,
            v6,
            opened: o.opened,
            unreadable: o.unreadable,
            cache: Cache::new(),
            named: 0,
            backend_gone: 0,
        }
    }

    /// Whether a reverse socket NAT map could be read: the one that names Services.
    pub fn can_name(&self) -> bool {
        self.v4.reverse_sk.is_some() || self.v6.reverse_sk.is_some()
    }

    /// The directory the maps were looked for in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the reverse socket NAT maps that were read are pinned.
    pub fn reverse_sk_pins(&self) -> ReverseSkPins {
        ReverseSkPins {
            v4: self
                .v4
                .reverse_sk
                .is_some()
                .then(|| self.dir.join(REVERSE_SK4)),
            v6: self
                .v6
                .reverse_sk
                .is_some()
                .then(|| self.dir.join(REVERSE_SK6)),
        }
    }

    /// Counts a Service the kernel's `connect()` hook read from the reverse socket NAT map (once
    /// per flow, at its end), and whether `backend` is still one of its backends.
    pub fn named_at_connect(&mut self, service: SocketAddr, backend: SocketAddr, proto: u8) {
        self.named += 1;
        if self.backend_is_gone(service, backend, proto, None) {
            self.backend_gone += 1;
        }
    }

    /// The Service the application dialled, when Cilium's socket LB connected socket `cookie` to
    /// `backend` instead; `proto` is `IPPROTO_TCP` or `IPPROTO_UDP`. `at_ns` dates the flow for
    /// `expire`.
    pub fn service_of(
        &mut self,
        cookie: u64,
        backend: SocketAddr,
        proto: u8,
        at_ns: u64,
    ) -> Option<SocketAddr> {
        if cookie == 0 {
            return None;
        }
        if let Some((service, seen_ns)) = self.cache.get_mut(&(cookie, backend)) {
            *seen_ns = at_ns;
            return Some(*service);
        }
        let (service, rev_nat_index) = self.reverse_sk(cookie, backend)?;
        self.named += 1;
        if self.backend_is_gone(service, backend, proto, Some(rev_nat_index)) {
            self.backend_gone += 1;
        }
        self.cache.insert((cookie, backend), (service, at_ns));
        Some(service)
    }

    /// Forgets names of flows not seen for `ttl_ns`.
    pub fn expire(&mut self, now_ns: u64, ttl_ns: u64) {
        self.cache
            .retain(|_, (_, seen_ns)| now_ns.saturating_sub(*seen_ns) < ttl_ns);
    }

    fn reverse_sk(&self, cookie: u64, backend: SocketAddr) -> Option<(SocketAddr, [u8; 2])> {
        match backend.ip() {
            IpAddr::V4(ip) => {
                let key = RevSk4Key::new(cookie, ip, backend.port());
                let v = self.v4.reverse_sk.as_ref()?.get(&key, 0).ok()?;
                Some((maps::v4(v.address, v.port), v.rev_nat_index))
            }
            IpAddr::V6(ip) => {
                let key = RevSk6Key::new(cookie, ip, backend.port());
                let v = self.v6.reverse_sk.as_ref()?.get(&key, 0).ok()?;
                Some((maps::v6(v.address, v.port), v.rev_nat_index))
            }
        }
    }

    /// True when the maps say `backend` is no longer among the backends of the Service frontend
    /// the socket dialled (or the frontend is gone or, when the socket's index is known,
    /// renumbered); false when they agree or cannot say. The frontend is looked up as dialled,
    /// then as the reverse NAT map names the index (a `NodePort` dialled on a node address is a
    /// wildcard frontend, address 0).
    fn backend_is_gone(
        &self,
        service: SocketAddr,
        backend: SocketAddr,
        proto: u8,
        rev_nat_index: Option<[u8; 2]>,
    ) -> bool {
        let mut frontends = vec![service];
        frontends.extend(rev_nat_index.and_then(|i| self.reverse_nat(backend.ip(), i)));
        let Some(current) = frontends
            .into_iter()
            .map(|f| self.frontend(f, proto))
            .find(|c| !matches!(c, Lookup::Absent))
        else {
            return true;
        };
        match current {
            Lookup::Found(index, list) => {
                rev_nat_index.is_some_and(|i| i != index) || !list.contains(&backend)
            }
            Lookup::Absent => true,
            Lookup::Unknown => false,
        }
    }

    fn reverse_nat(&self, family: IpAddr, index: [u8; 2]) -> Option<SocketAddr> {
        if family.is_ipv4() {
            let v = self.v4.reverse_nat.as_ref()?.get(&index, 0).ok()?;
            Some(maps::v4(v.address, v.port))
        } else {
            let v = self.v6.reverse_nat.as_ref()?.get(&index, 0).ok()?;
            Some(maps::v6(v.address, v.port))
        }
    }

    /// A frontend's reverse NAT index and backends, from the services and backends maps.
    fn frontend(&self, frontend: SocketAddr, proto: u8) -> Lookup {
        match frontend {
            SocketAddr::V4(_) => lookup(&self.v4.services, &self.v4.backends, frontend, proto),
            SocketAddr::V6(_) => lookup(&self.v6.services, &self.v6.backends, frontend, proto),
        }
    }

    /// What `stats.socket_lb.cilium` says.
    pub fn stats(&self) -> CiliumStats {
        CiliumStats {
            bpffs: self.dir.display().to_string(),
            present: !self.opened.is_empty() || !self.unreadable.is_empty(),
            maps: self.opened.clone(),
            unreadable: self.unreadable.clone(),
            named: self.named,
            backend_gone: self.backend_gone,
        }
    }
}

/// `frontend` in one family's services and backends maps.
fn lookup<K: ServiceKey, B: BackendValue>(
    services: &Maps<K, ServiceValue>,
    backends: &Maps<u32, B>,
    frontend: SocketAddr,
    proto: u8,
) -> Lookup {
    let (Some(services), Some(backends)) = (services, backends) else {
        return Lookup::Unknown;
    };
    frontend_backends(
        |slot, proto| services.get(&K::of(frontend, slot, proto)?, 0).ok(),
        |id| backends.get(&id, 0).ok().map(|b| b.address()),
        proto,
    )
    .map_or(Lookup::Absent, |(index, list)| Lookup::Found(index, list))
}

/// What the services and backends maps say of a frontend.
enum Lookup {
    Found([u8; 2], Vec<SocketAddr>),
    Absent,
    /// The maps are not there to ask.
    Unknown,
}

/// Opens pinned maps with our layouts, noting which were read and why others were not.
struct Opener<'a> {
    dir: &'a Path,
    opened: Vec<String>,
    unreadable: Vec<String>,
}

impl Opener<'_> {
    fn map<K: aya::Pod, V: aya::Pod>(&mut self, name: &str) -> Maps<K, V> {
        let path = self.dir.join(name);
        if !path.exists() {
            return None;
        }
        let map = MapData::from_pin(&path)
            .and_then(Map::from_map_data)
            .and_then(HashMap::<MapData, K, V>::try_from);
        match map {
            Ok(map) => {
                self.opened.push(name.to_string());
                Some(map)
            }
            Err(e @ (MapError::InvalidKeySize { .. } | MapError::InvalidValueSize { .. })) => {
                self.unreadable.push(format!(
                    "{name}: {e}: a layout of a Cilium version other than 1.14 to 1.18"
                ));
                None
            }
            Err(e) => {
                self.unreadable.push(format!("{name}: {e}"));
                None
            }
        }
    }
}

/// The reverse NAT index of a Service frontend and its backends now: the frontend is slot 0 of
/// the services map, its backends slots 1..=count, each a backend id. Looked up with the socket's
/// protocol, then with protocol 0 (before Cilium 1.17 and without protocol differentiation,
/// frontends are keyed with 0). `None` when the frontend is not there.
fn frontend_backends(
    service: impl Fn(u16, u8) -> Option<ServiceValue>,
    backend: impl Fn(u32) -> Option<SocketAddr>,
    proto: u8,
) -> Option<([u8; 2], Vec<SocketAddr>)> {
    let proto = [proto, 0].into_iter().find(|&p| service(0, p).is_some())?;
    let frontend = service(0, proto)?;
    let backends = (1..=frontend.count)
        .filter_map(|slot| service(slot, proto))
        .filter_map(|slot| backend(slot.backend_id))
        .collect();
    Some((frontend.rev_nat_index, backends))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(backend_id: u32, count: u16, index: u8) -> ServiceValue {
        ServiceValue {
            backend_id,
            count,
            rev_nat_index: [0, index],
            ..ServiceValue::default()
        }
    }

    #[test]
    fn a_frontend_lists_its_backends_by_slot_under_either_protocol_key() {
        let b1: SocketAddr = "10.0.0.5:53".parse().expect("addr");
        let b2: SocketAddr = "10.0.0.6:53".parse().expect("addr");
        let backend = |id| match id {
            11 => Some(b1),
            12 => Some(b2),
            _ => None,
        };
        // Keyed with protocol 0 (Cilium before 1.17): found though the socket is UDP (17).
        let services = |slot, proto| match (slot, proto) {
            (0, 0) => Some(value(0, 2, 7)),
            (1, 0) => Some(value(11, 0, 7)),
            (2, 0) => Some(value(12, 0, 7)),
            _ => None,
        };
        assert_eq!(
            frontend_backends(services, backend, 17),
            Some(([0, 7], vec![b1, b2]))
        );
        // Keyed with the protocol (1.17+): the same.
        let services = |slot, proto| match (slot, proto) {
            (0, 17) => Some(value(0, 1, 7)),
            (1, 17) => Some(value(12, 0, 7)),
            _ => None,
        };
        assert_eq!(
            frontend_backends(services, backend, 17),
            Some(([0, 7], vec![b2]))
        );
        assert_eq!(frontend_backends(|_, _| None, backend, 6), None);
    }

    #[test]
    fn a_directory_without_cilium_maps_opens_nothing_and_names_nothing() {
        let dir = std::env::temp_dir().join(format!("tracer-no-cilium-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let mut maps = CiliumMaps::open(&dir);
        assert!(!maps.can_name());
        let stats = maps.stats();
        assert!(!stats.present, "{stats:?}");
        assert!(stats.maps.is_empty() && stats.unreadable.is_empty());
        let backend = "10.0.0.5:53".parse().expect("addr");
        assert_eq!(maps.service_of(42, backend, 17, 0), None);
        std::fs::remove_dir(&dir).expect("rmdir");
    }
}
