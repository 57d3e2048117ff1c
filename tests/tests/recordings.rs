//! Recordings (`trace --output FILE`) that end badly, as they do on a node: the disk fills, the
//! tracer is killed. The tracer says what happened and which file, and `summary` still reads what
//! was written (issue 27, item 4).
use std::{
    io::{BufRead as _, BufReader},
    net::{SocketAddr, SocketAddrV4},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc::{Receiver, channel},
    time::{Duration, Instant},
};

use tests::{
    testbed::{TwoHosts, connect_from},
    tracer::tracer_bin,
};

/// A folder of its own, with a tmpfs of `bytes` mounted on it when asked: removed (and unmounted)
/// on drop.
struct Folder {
    path: PathBuf,
    mounted: bool,
}

impl Folder {
    fn new(name: &str) -> Folder {
        let path = std::env::temp_dir().join(format!("tracer-rec-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create the folder");
        Folder {
            path,
            mounted: false,
        }
    }

    /// A disk that holds `bytes`: a tmpfs of that size on the folder.
    fn small_disk(name: &str, bytes: u64) -> Folder {
        let mut folder = Folder::new(name);
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tracer-test"])
            .arg(&folder.path)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "mount a tmpfs: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        folder.mounted = true;
        folder
    }

    fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(&self.path).status();
        }
        let _ = std::fs::remove_dir_all(&self.path);
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
        let mut child = Command::new(tracer_bin())
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
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the tracer");
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
    let out = Command::new(tracer_bin())
        .arg("summary")
        .arg(file)
        .output()
        .expect("run tracer summary");
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
    let disk = Folder::small_disk("full", DISK);
    let file = disk.file("trace.jsonl");
    let bed = TwoHosts::new("recfull");
    let mut tracer = Recorder::start(&file, &["--netns", bed.client.name()]);
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

    let written = std::fs::read(&file).expect("read the recording");
    assert_eq!(written.len() as u64, DISK, "the disk is full");
    let (code, out, err) = summary(&file);
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
