//! Recordings (`trace --output FILE`) that end badly, as they do on a node: the disk fills, the
//! tracer is killed. The tracer says what happened and which file, and `summary` still reads what
//! was written (issue 27, item 4).
use std::{
    ffi::CString,
    fs::File,
    io::{BufRead as _, BufReader},
    net::{SocketAddr, SocketAddrV4},
    os::{
        fd::AsRawFd as _,
        unix::{ffi::OsStrExt as _, process::CommandExt as _},
    },
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc::{Receiver, channel},
    time::{Duration, Instant},
};

use tests::{
    testbed::{TwoHosts, connect_from},
    tracer::tracer_bin,
};

/// A folder of its own, removed on drop.
struct Folder {
    path: PathBuf,
}

impl Folder {
    fn new(name: &str) -> Folder {
        let path = std::env::temp_dir().join(format!("tracer-rec-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create the folder");
        Folder { path }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A disk that holds `bytes`: a tmpfs mounted on `folder` in a mount namespace of the tracer's own
/// (made between fork and exec), so the host never sees it and nothing stays mounted however the
/// test ends. The test holds the namespace open (`ns`) to read the recording after the tracer exits.
struct SmallDisk {
    folder: Folder,
    bytes: u64,
    ns: Option<File>,
}

impl SmallDisk {
    fn new(name: &str, bytes: u64) -> SmallDisk {
        SmallDisk {
            folder: Folder::new(name),
            bytes,
            ns: None,
        }
    }

    /// Makes `command` start in a new mount namespace with the tmpfs on the folder.
    fn mount_for(&self, command: &mut Command) {
        let target = CString::new(self.folder.path.as_os_str().as_bytes()).expect("a path");
        let options = CString::new(format!("size={}", self.bytes)).expect("options");
        let source = CString::new("tracer-test").expect("a name");
        let fstype = CString::new("tmpfs").expect("a type");
        let root = CString::new("/").expect("a path");
        let make = move || -> std::io::Result<()> {
            let check = |rc: libc::c_int| {
                if rc == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            };
            // SAFETY: plain syscalls on C strings that live as long as the closure; nothing here
            // allocates, as the child of a fork must not.
            unsafe {
                check(libc::unshare(libc::CLONE_NEWNS))?;
                // Private, so the tmpfs does not propagate back to the host's mounts.
                check(libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ))?;
                check(libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    fstype.as_ptr(),
                    0,
                    options.as_ptr().cast(),
                ))
            }
        };
        // SAFETY: `make` only makes syscalls (see above).
        unsafe { command.pre_exec(make) };
    }

    /// Holds the mount namespace of `pid` (started by `mount_for`) open.
    fn hold(&mut self, pid: u32) {
        let ns = File::open(format!("/proc/{pid}/ns/mnt")).expect("open the mount namespace");
        self.ns = Some(ns);
    }

    /// `program` run inside the disk's namespace, where the recording is.
    fn inside(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let ns = self.ns.as_ref().expect("the namespace is held");
        let mut command = Command::new("nsenter");
        command
            .arg(format!(
                "--mount=/proc/{}/fd/{}",
                std::process::id(),
                ns.as_raw_fd()
            ))
            .arg("--")
            .arg(program);
        command
    }

    fn file(&self, name: &str) -> PathBuf {
        self.folder.file(name)
    }
}

/// `tracer trace --format json --output FILE ARGS` with its stderr read line by line; returns once
/// it says it is attached.
struct Recorder {
    child: Child,
    stderr: Receiver<String>,
    said: Vec<String>,
}

impl Recorder {
    fn start(output: &Path, args: &[&str]) -> Recorder {
        Recorder::start_on(output, args, None)
    }

    /// The same, writing to `disk`.
    fn start_on(output: &Path, args: &[&str], disk: Option<&mut SmallDisk>) -> Recorder {
        let mut command = Command::new(tracer_bin());
        command
            .args([
                "trace",
                "--format",
                "json",
                "--stats-interval",
                "1",
                "--output",
            ])
            .arg(output)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(disk) = &disk {
            disk.mount_for(&mut command);
        }
        let mut child = command.spawn().expect("start the tracer");
        if let Some(disk) = disk {
            disk.hold(child.id());
        }
        let pipe = child.stderr.take().expect("stderr");
        let (tx, stderr) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut recorder = Recorder {
            child,
            stderr,
            said: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !recorder.said.iter().any(|l| l.contains("attached")) {
            let left = deadline.saturating_duration_since(Instant::now());
            match recorder.stderr.recv_timeout(left) {
                Ok(line) => recorder.said.push(line),
                Err(_) => panic!("the tracer did not attach: {:?}", recorder.said),
            }
        }
        recorder
    }

    /// Whether it has exited, and with what code.
    fn exited(&mut self) -> Option<Option<i32>> {
        self.child
            .try_wait()
            .expect("wait for the tracer")
            .map(|s| s.code())
    }

    /// Everything it wrote on stderr, once it has exited.
    fn stderr_after_exit(mut self) -> String {
        self.child.wait().expect("wait for the tracer");
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_secs(2)) {
            self.said.push(line);
        }
        self.said.join("\n")
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tracer summary FILE`: exit code, stdout, stderr.
fn summary(file: &Path) -> (Option<i32>, String, String) {
    let mut command = Command::new(tracer_bin());
    outcome(command.arg("summary").arg(file))
}

fn outcome(command: &mut Command) -> (Option<i32>, String, String) {
    let out = command.output().expect("run tracer summary");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Connects refused by RST (nothing listens on the port): one final record each.
fn refused_connects(bed: &TwoHosts, n: usize) {
    let to = SocketAddr::from(SocketAddrV4::new(bed.server_ip, 9));
    for _ in 0..n {
        let r = connect_from(&bed.client, "refused", to, Duration::from_secs(2));
        assert!(r.is_err(), "nothing listens on port 9");
    }
}

/// Item 4 of issue 27: on a full disk the tracer stopped with `No space left on device (os error
/// 28)`, naming no file and writing no final stats, and `summary` refused the recording whose last
/// line the full disk had cut.
#[test]
fn a_full_disk_is_named_the_final_stats_go_to_stderr_and_the_recording_is_read() {
    const DISK: u64 = 16 * 1024;
    let mut disk = SmallDisk::new("full", DISK);
    let file = disk.file("trace.jsonl");
    let bed = TwoHosts::new("recfull");
    let mut tracer = Recorder::start_on(&file, &["--netns", bed.client.name()], Some(&mut disk));
    assert!(
        !file.exists(),
        "the recording is on the tmpfs, which only the tracer's namespace sees"
    );
    // A record is about 600 bytes: the disk is full after a few dozen.
    let deadline = Instant::now() + Duration::from_secs(60);
    let code = loop {
        if let Some(code) = tracer.exited() {
            break code;
        }
        assert!(Instant::now() < deadline, "the disk never filled");
        refused_connects(&bed, 10);
    };
    let stderr = tracer.stderr_after_exit();
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "tracer: error: writing output file {}: No space left on device (os error 28)",
            file.display()
        )),
        "the error names the file:\n{stderr}"
    );
    assert!(
        stderr.contains("tracer: final stats, not in the output: attempts "),
        "the final stats on stderr:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");

    let written = disk
        .inside("cat")
        .arg(&file)
        .output()
        .expect("read the recording")
        .stdout;
    assert_eq!(written.len() as u64, DISK, "the disk is full");
    let (code, out, err) = outcome(disk.inside(tracer_bin()).arg("summary").arg(&file));
    assert_eq!(code, Some(0), "summary reads the recording:\n{err}");
    assert!(
        out.contains("refused rst") && out.contains(&format!("{}:9", bed.server_ip)),
        "{out}"
    );
    // The last write stopped where the disk did: in the middle of a line, unless a line happened
    // to end on the last byte.
    if written.last() != Some(&b'\n') {
        let lines = written.split(|&b| b == b'\n').count();
        assert!(
            err.contains(&format!(":{lines}: the last line is cut short")),
            "the cut line is said:\n{err}"
        );
    }
}

/// Item 4 of issue 27: a recording of a tracer killed with SIGKILL (as the OOM killer does) is read
/// as far as it was written.
#[test]
fn a_recording_of_a_killed_tracer_is_read() {
    let folder = Folder::new("killed");
    let file = folder.file("trace.jsonl");
    let bed = TwoHosts::new("reckill");
    let tracer = Recorder::start(&file, &["--netns", bed.client.name()]);
    refused_connects(&bed, 5);
    // Records reach the file once per batch (about 50 ms).
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&file)
        .unwrap_or_default()
        .matches("\"verdict\":\"refused\"")
        .count()
        < 5
    {
        assert!(
            Instant::now() < deadline,
            "the refusals never reached the file"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(tracer.child.id() as libc::pid_t, libc::SIGKILL) };
    let stderr = tracer.stderr_after_exit();
    let (code, out, err) = summary(&file);
    assert_eq!(
        code,
        Some(0),
        "summary reads the recording:\n{err}\ntracer:\n{stderr}"
    );
    let row = out
        .lines()
        .find(|l| l.contains("refused rst"))
        .unwrap_or_else(|| panic!("a row of refusals:\n{out}"));
    assert!(
        row.split_whitespace().nth(3) == Some("5"),
        "the five refusals: {row}\n{out}"
    );
    // The tracer writes whole lines, but a SIGKILL during the write(2) of a batch stops the kernel's
    // copy between two pages, leaving a prefix of it: the same file cut inside its last line.
    let mut written = std::fs::read(&file).expect("read the recording");
    assert_eq!(written.last(), Some(&b'\n'));
    let lines = written.iter().filter(|&&b| b == b'\n').count();
    let last_starts = written[..written.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |at| at + 1);
    written.truncate(last_starts + (written.len() - last_starts) / 2);
    std::fs::write(&file, &written).expect("write the cut recording");
    let (code, _, err) = summary(&file);
    assert_eq!(code, Some(0), "summary reads the cut recording:\n{err}");
    assert!(
        err.contains(&format!(":{lines}: the last line is cut short")),
        "the cut line is said:\n{err}"
    );
}
