//! Cilium's Service datapath, from its pinned services and backends maps in `--cilium-bpffs`
//! (`cilium_lb{4,6}_services_v2`: a frontend's slots 1..=count each hold a backend id;
//! `cilium_lb{4,6}_backends_v3`: id -> address; layouts in `cilium/maps.rs`). The maps are opened
//! at each read, so a Cilium that starts after the tracer is seen. Neither family's services map
//! pinned there: Cilium is `absent` on this node.
use std::path::{Path, PathBuf};

use aya::{
    Pod,
    maps::{HashMap, Map, MapData},
};

use super::{Entry, Reader, Source, Unread, parse_proto};
use crate::{
    cilium::maps::{
        Backend4, Backend6, BackendValue, Service4Key, Service6Key, ServiceKey, ServiceValue,
    },
    identity::cluster::Proto,
};

pub struct CiliumServices {
    pub dir: PathBuf,
}

impl Reader for CiliumServices {
    fn source(&self) -> Source {
        Source::Cilium
    }

    fn read(&self) -> Result<Vec<Entry>, Unread> {
        let v4 = family::<Service4Key, Backend4>(&self.dir, '4')?;
        let v6 = family::<Service6Key, Backend6>(&self.dir, '6')?;
        if v4.is_none() && v6.is_none() {
            return Err(Unread::Absent(format!(
                "no cilium_lb4_services_v2 or cilium_lb6_services_v2 in {}: Cilium's kube-proxy \
                 replacement is not in use (or pins elsewhere: --cilium-bpffs)",
                self.dir.display()
            )));
        }
        let mut entries: Vec<Entry> = v4.into_iter().chain(v6).flatten().collect();
        // Cilium keeps a frontend once per scope (external, internal): one entry each.
        entries.sort_by_key(|e| (e.service, e.backend, e.location.clone()));
        entries.dedup_by_key(|e| (e.service, e.proto, e.backend));
        Ok(entries)
    }
}

/// One family's (frontend -> backend) entries; `None` when its services map is not pinned.
fn family<K: ServiceKey, B: BackendValue>(
    dir: &Path,
    v: char,
) -> Result<Option<Vec<Entry>>, Unread> {
    let services_name = format!("cilium_lb{v}_services_v2");
    let backends_name = format!("cilium_lb{v}_backends_v3");
    if !dir.join(&services_name).exists() {
        return Ok(None);
    }
    let services: HashMap<MapData, K, ServiceValue> = open(dir, &services_name)?;
    let backends: HashMap<MapData, u32, B> = open(dir, &backends_name)?;
    let mut out = Vec::new();
    for item in &services {
        let (key, value) =
            item.map_err(|e| Unread::Failed(format!("reading {services_name}: {e}")))?;
        if key.slot() == 0 {
            continue; // the frontend itself
        }
        let Ok(backend) = backends.get(&value.backend_id, 0) else {
            continue;
        };
        out.push(Entry {
            service: key.frontend(),
            proto: proto_of(key.proto(), backend.proto()),
            backend: backend.address(),
            location: format!(
                "{services_name} slot {}, {backends_name} id {}",
                key.slot(),
                value.backend_id
            ),
            name_hint: None,
        });
    }
    Ok(Some(out))
}

fn open<K: Pod, V: Pod>(dir: &Path, name: &str) -> Result<HashMap<MapData, K, V>, Unread> {
    MapData::from_pin(dir.join(name))
        .and_then(Map::from_map_data)
        .and_then(HashMap::try_from)
        .map_err(|e| {
            Unread::Failed(format!(
                "{name}: {e} (Cilium 1.14 to 1.18 layouts are read)"
            ))
        })
}

/// The frontend's protocol (Cilium 1.17+ keys frontends by it), else the backend's, else TCP:
/// before 1.17 neither is set, and a Service's TCP and UDP ports share their backends' addresses.
fn proto_of(key: u8, backend: u8) -> Proto {
    [key, backend]
        .into_iter()
        .find(|&p| p != 0)
        .and_then(|p| parse_proto(&p.to_string()))
        .unwrap_or(Proto::Tcp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_is_the_keys_then_the_backends_then_tcp() {
        assert_eq!(proto_of(17, 0), Proto::Udp);
        assert_eq!(proto_of(0, 17), Proto::Udp);
        assert_eq!(proto_of(0, 0), Proto::Tcp);
        assert_eq!(proto_of(6, 17), Proto::Tcp);
    }

    #[test]
    fn a_directory_without_the_services_maps_is_absent_with_the_reason() {
        let dir = std::env::temp_dir().join(format!("tracer-no-cilium-dp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let read = CiliumServices { dir: dir.clone() }.read();
        assert!(
            matches!(&read, Err(Unread::Absent(why)) if why.contains("cilium_lb4_services_v2")),
            "{read:?}"
        );
        std::fs::remove_dir(&dir).expect("rmdir");
    }
}
