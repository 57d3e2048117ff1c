//! Named network namespaces as `ip netns add` and `ip netns del` make them (a new namespace
//! bind-mounted at `/run/netns/NAME`), so `ip netns list`, `--netns NAME` and the tests see the
//! demo's namespaces, and no `ip` binary is needed to make them.
use std::{
    ffi::CString,
    fs::OpenOptions,
    io,
    os::unix::{ffi::OsStrExt as _, fs::OpenOptionsExt as _},
    path::{Path, PathBuf},
};

use crate::netns::NAMED_NETNS_DIR;

#[derive(Debug, thiserror::Error)]
#[error("cannot create network namespace {path}: {source}")]
pub struct CreateError {
    path: PathBuf,
    source: io::Error,
}

pub fn path_of(name: &str) -> PathBuf {
    Path::new(NAMED_NETNS_DIR).join(name)
}

/// Creates the namespace `name`; fails if it exists.
pub fn create(name: &str) -> Result<PathBuf, CreateError> {
    let path = path_of(name);
    let failed = |source| CreateError {
        path: path.clone(),
        source,
    };
    shared_run_dir().map_err(failed)?;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o000)
        .open(&path)
        .map_err(failed)?;
    // unshare() moves only the calling thread: a thread of its own, which then ends.
    let target = path.clone();
    let mounted = std::thread::spawn(move || -> io::Result<()> {
        // SAFETY: unshare has no memory preconditions; it affects this thread only.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        mount(
            Path::new("/proc/thread-self/ns/net"),
            &target,
            libc::MS_BIND,
        )
    })
    .join()
    .unwrap_or_else(|_| Err(io::Error::other("namespace thread panicked")));
    if let Err(e) = mounted {
        let _ = std::fs::remove_file(&path);
        return Err(failed(e));
    }
    Ok(path)
}

/// Removes the namespace `name` if it exists: its links, addresses, routes and rules go with it
/// once nothing else holds it.
pub fn remove(name: &str) {
    let path = path_of(name);
    if let Ok(c) = CString::new(path.as_os_str().as_bytes()) {
        // SAFETY: a valid NUL-terminated path; a failure (not mounted) is harmless here.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
    let _ = std::fs::remove_file(&path);
}

/// `/run/netns` exists and is a shared mount point, as `ip netns add` leaves it, so a namespace
/// mounted there is seen from every mount namespace that shares it.
fn shared_run_dir() -> io::Result<()> {
    let dir = Path::new(NAMED_NETNS_DIR);
    std::fs::create_dir_all(dir)?;
    let shared = libc::MS_SHARED | libc::MS_REC;
    match mount(Path::new("none"), dir, shared) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            // Not a mount point yet: make it one (bind it onto itself), then share it.
            mount(dir, dir, libc::MS_BIND | libc::MS_REC)?;
            mount(Path::new("none"), dir, shared)
        }
        other => other,
    }
}

/// mount(2) with no file system type and no data: binds and propagation changes.
fn mount(source: &Path, target: &Path, flags: libc::c_ulong) -> io::Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let (source, target) = (c(source)?, c(target)?);
    // SAFETY: valid NUL-terminated strings that outlive the call; "none" for the type, no data.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            c"none".as_ptr(),
            flags,
            std::ptr::null(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
