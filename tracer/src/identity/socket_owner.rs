//! The process that holds a socket, found by the socket's inode number (`socket:[N]` is what
//! `/proc/PID/fd/*` links to). A scan of every process's descriptors: done only for the rare
//! record that needs it (a socket whose replies were lost), never per event.
use std::{fs, path::Path};

/// The pid and comm of a process holding socket inode `inode`, if one still does.
pub fn owner_of(inode: u64, proc_root: &Path) -> Option<(u32, String)> {
    if inode == 0 {
        return None;
    }
    let wanted = format!("socket:[{inode}]");
    for entry in fs::read_dir(proc_root).ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == wanted.as_str())
        });
        if holds {
            let comm = fs::read_to_string(entry.path().join("comm"))
                .map(|c| c.trim_end().to_string())
                .unwrap_or_default();
            return Some((pid, comm));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use super::*;

    #[test]
    fn finds_this_process_by_one_of_its_sockets() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("a socket");
        let fd = std::os::fd::AsRawFd::as_raw_fd(&socket);
        let inode = fs::metadata(format!("/proc/self/fd/{fd}"))
            .expect("the socket's descriptor")
            .ino();
        let (pid, _) = owner_of(inode, Path::new("/proc")).expect("an owner");
        assert_eq!(pid, std::process::id());
        assert_eq!(owner_of(0, Path::new("/proc")), None);
    }
}
