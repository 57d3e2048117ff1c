//! cgroup id -> cgroup path, for the source identity.
//!
//! The kernel side records `bpf_get_current_cgroup_id()`: the id of the task's cgroup in the v2
//! hierarchy, which is the inode number of that cgroup's directory under the cgroup2 mount. So a
//! walk of the mount gives every id's path. Walks happen on a miss (a new pod since the last walk),
//! at most once per `min_rescan`, so a flood of unknown ids (host processes in cgroups that came
//! and went) cannot turn into a flood of directory walks.
use std::{
    fs,
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use hashbrown::HashMap;

use super::cgroup::{ContainerRef, parse_cgroup_path};

/// A few seconds: a pod that starts and connects at once is named from its second failed connect on.
pub const MIN_RESCAN: Duration = Duration::from_secs(3);
/// Paths of cgroups that are gone are kept for a while (their last records still want a name),
/// up to this many entries.
const MAX_ENTRIES: usize = 1 << 16;

/// One cgroup: its path, and the container it is (parsed once, at the walk: records come by the
/// million, cgroups by the hundred).
pub struct CgroupEntry {
    pub path: String,
    pub container: Option<ContainerRef>,
}

pub struct CgroupPaths {
    root: Option<PathBuf>,
    by_id: HashMap<u64, CgroupEntry>,
    last_scan: Option<Instant>,
    min_rescan: Duration,
}

impl CgroupPaths {
    /// Paths under the cgroup2 mount `root`; `None` (no cgroup2 mount) resolves nothing.
    pub fn new(root: Option<PathBuf>, min_rescan: Duration) -> CgroupPaths {
        CgroupPaths {
            root,
            by_id: HashMap::new(),
            last_scan: None,
            min_rescan,
        }
    }

    /// The cgroup path (`/kubepods.slice/...`, relative to the mount) of cgroup `id`.
    #[cfg(test)]
    pub fn path(&mut self, id: u64) -> Option<&str> {
        self.entry(id).map(|e| e.path.as_str())
    }

    /// The cgroup with id `id`, walking the mount again on a miss (at most once per `min_rescan`).
    pub fn entry(&mut self, id: u64) -> Option<&CgroupEntry> {
        if id == 0 {
            return None;
        }
        if !self.by_id.contains_key(&id) && self.may_rescan() {
            self.rescan();
        }
        self.by_id.get(&id)
    }

    fn may_rescan(&self) -> bool {
        self.root.is_some()
            && self
                .last_scan
                .is_none_or(|at| at.elapsed() >= self.min_rescan)
    }

    fn rescan(&mut self) {
        self.last_scan = Some(Instant::now());
        let Some(root) = &self.root else { return };
        if self.by_id.len() > MAX_ENTRIES {
            self.by_id.clear();
        }
        walk(root, root, &mut self.by_id);
    }
}

/// Records every directory under `dir` by inode; unreadable directories (a cgroup removed during
/// the walk) are skipped.
fn walk(root: &Path, dir: &Path, out: &mut HashMap<u64, CgroupEntry>) {
    if let Ok(meta) = fs::metadata(dir) {
        let rel = dir.strip_prefix(root).unwrap_or(dir);
        let path = format!("/{}", rel.display());
        out.entry(meta.ino()).or_insert_with(|| CgroupEntry {
            container: parse_cgroup_path(&path),
            path,
        });
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(root, &entry.path(), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inode(p: &Path) -> u64 {
        fs::metadata(p).expect("metadata").ino()
    }

    #[test]
    fn ids_are_directory_inodes_relative_to_the_mount() {
        let root = std::env::temp_dir().join(format!("tracer-cgroup-ids-{}", std::process::id()));
        let pod =
            root.join("kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podx.slice");
        fs::create_dir_all(&pod).expect("mkdir");
        let mut paths = CgroupPaths::new(Some(root.clone()), Duration::ZERO);
        assert_eq!(paths.path(inode(&root)), Some("/"));
        assert_eq!(
            paths.path(inode(&pod)),
            Some("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podx.slice")
        );
        // A cgroup created after the first walk is found by the rescan on a miss.
        let late = root.join("system.slice/late.service");
        fs::create_dir_all(&late).expect("mkdir");
        assert_eq!(paths.path(inode(&late)), Some("/system.slice/late.service"));
        fs::remove_dir_all(&root).expect("cleanup");
    }

    #[test]
    fn misses_rescan_at_most_once_per_interval() {
        let root = std::env::temp_dir().join(format!("tracer-cgroup-rate-{}", std::process::id()));
        fs::create_dir_all(&root).expect("mkdir");
        let mut paths = CgroupPaths::new(Some(root.clone()), Duration::from_hours(1));
        assert_eq!(paths.path(u64::MAX), None);
        let late = root.join("late");
        fs::create_dir_all(&late).expect("mkdir");
        assert_eq!(
            paths.path(inode(&late)),
            None,
            "no second walk within the interval"
        );
        fs::remove_dir_all(&root).expect("cleanup");
    }

    #[test]
    fn our_own_cgroup_is_found_on_the_real_mount() {
        // Every machine the tests run on has cgroup v2 mounted (pure or hybrid): a failure here
        // says so instead of passing having checked nothing.
        let root = crate::kernel::preflight::cgroup2_root().expect("a cgroup v2 mount");
        let own = fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
            })
            .expect("our cgroup v2 path in /proc/self/cgroup");
        let dir = root.join(own.trim_start_matches('/'));
        let meta = fs::metadata(&dir).expect("our cgroup's folder");
        let mut paths = CgroupPaths::new(Some(root), MIN_RESCAN);
        assert_eq!(paths.path(meta.ino()), Some(own.as_str()));
    }
}
