//! A cgroup v2 hierarchy for the hooks when the node has none mounted (cgroup v1 only). The unified
//! hierarchy exists in every kernel the tracer supports, mounted or not, and every process is in it,
//! so programs attached to its root see every socket of the node. It is mounted in a private folder
//! for as long as the tracer runs, then unmounted (as Cilium's agent does, in `/run/cilium`).
use std::{
    ffi::CString,
    io,
    os::unix::ffi::OsStrExt as _,
    path::{Path, PathBuf},
};

pub struct CgroupMount {
    path: PathBuf,
}

impl CgroupMount {
    pub fn new() -> io::Result<CgroupMount> {
        let path = PathBuf::from(format!("/run/tracer-cgroup2-{}", std::process::id()));
        std::fs::create_dir_all(&path)?;
        let target = c_path(&path)?;
        let fstype = CString::from(c"cgroup2");
        // SAFETY: mount(2) with NUL-terminated strings we own and no data.
        let rc = unsafe {
            libc::mount(
                fstype.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            let error = io::Error::last_os_error();
            let _ = std::fs::remove_dir(&path);
            return Err(error);
        }
        Ok(CgroupMount { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CgroupMount {
    fn drop(&mut self) {
        if let Ok(target) = c_path(&self.path) {
            // SAFETY: umount2(2) on the path we mounted; MNT_DETACH so a busy mount still goes.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = std::fs::remove_dir(&self.path);
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}
