//! Which filesystem a path is on (`statfs`): tells a namespace file (nsfs) or a cgroup v2 mount from
//! or a bpffs from anything else a user may name.
use std::{ffi::CString, io, os::unix::ffi::OsStrExt as _, path::Path};

pub const NSFS_MAGIC: u64 = 0x6e73_6673;
pub const CGROUP2_SUPER_MAGIC: u64 = 0x6367_7270;
pub const BPF_FS_MAGIC: u64 = 0xcafe_4a11;

/// The filesystem type (`f_type`) of `path`.
pub fn magic(path: &Path) -> io::Result<u64> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the path"))?;
    // SAFETY: statfs(2) writes into `stat`, which we own; `c_path` is NUL-terminated.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c_path.as_ptr(), &raw mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(
        clippy::cast_sign_loss,
        clippy::useless_conversion,
        reason = "f_type is an i64 in glibc and a u64 in musl; magic numbers are positive"
    )]
    Ok(stat.f_type as u64)
}
