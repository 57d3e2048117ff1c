//! tracefs for the bpftrace peer: mounted at `/sys/kernel/tracing` if it is not there (a fresh
//! machine), unmounted again when the benchmark ends. Left alone if it was mounted already.
use std::{ffi::CString, path::Path};

use anyhow::{Context as _, bail};

const TRACING: &str = "/sys/kernel/tracing";

pub struct Tracefs {
    mounted_by_us: bool,
}

impl Tracefs {
    pub fn ensure() -> anyhow::Result<Tracefs> {
        if Path::new(TRACING).join("events").is_dir() {
            return Ok(Tracefs {
                mounted_by_us: false,
            });
        }
        let target = CString::new(TRACING).context("path")?;
        let fstype = CString::new("tracefs").context("fstype")?;
        // SAFETY: mount(2) with NUL-terminated strings we own and no data.
        let rc = unsafe {
            libc::mount(
                fstype.as_ptr(),
                target.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            bail!(
                "no tracefs at {TRACING} and mounting it failed: {}",
                std::io::Error::last_os_error()
            );
        }
        eprintln!("bench: mounted tracefs at {TRACING} for bpftrace (unmounted at the end)");
        Ok(Tracefs {
            mounted_by_us: true,
        })
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_by_us
            && let Ok(target) = CString::new(TRACING)
        {
            // SAFETY: umount2(2) on the mount made in `ensure`.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    }
}
