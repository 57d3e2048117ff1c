//! `tracer summary` and `tracer replay` of a recording larger than the memory they may use: their
//! peak RSS, for a small file and a large one of the same records, side by side. Reading a
//! recording must not need memory that grows with the file (issue 27, item 3).
//!
//! The recording is generated here: a busy node's mix of connect records (refused, abandoned after
//! a live update, slow, timed out, and some live flows that never end), healthy counts, DNS, Service
//! and stats records, 2,000 workloads x destinations. `summary` runs under GNU `time`, which
//! reports its peak RSS; `replay --speed 0` runs in a tmux terminal of its own until its header
//! says `ENDED`, and its `VmHWM` is read before it is told to quit.
use std::{
    fs::File,
    io::{BufWriter, Write as _},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use super::{kstats, report::Table};

/// GNU time (Debian package `time`), which reports its child's peak RSS (`%M`, KiB).
const TIME: &str = "/usr/bin/time";

/// What `summary` and `replay` may use, whatever the file's size.
const TARGET_MIB: f64 = 64.0;
/// The small recording, for comparison: the model has seen every row by then.
const SMALL_MIB: u64 = 32;
/// The large one: eight times what they may use.
pub const LARGE_MIB: u64 = 512;

/// One command's run over one file.
struct Measured {
    peak_mib: f64,
    secs: f64,
}

/// `keep`: leave the recordings in place (`--keep`), to read them with another tracer.
pub fn run(tracer: &Path, large_mib: u64, keep: bool, table: &mut Table) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("bhb-bench-recordings-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = measure_all(tracer, &dir, large_mib, table);
    if keep {
        eprintln!("bench: recordings kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn measure_all(tracer: &Path, dir: &Path, large_mib: u64, table: &mut Table) -> anyhow::Result<()> {
    let small = dir.join("small.jsonl");
    let large = dir.join("large.jsonl");
    let small_records = write_recording(&small, SMALL_MIB << 20)?;
    let large_records = write_recording(&large, large_mib << 20)?;
    eprintln!(
        "bench: recordings of {SMALL_MIB} MiB ({small_records} records) and {large_mib} MiB \
         ({large_records} records)"
    );
    for (command, measure) in [
        (
            "summary",
            summary as fn(&Path, &Path) -> anyhow::Result<Measured>,
        ),
        ("replay --speed 0", replay),
    ] {
        let s = measure(tracer, &small)?;
        let l = measure(tracer, &large)?;
        table.check(
            format!("tracer {command} of a {large_mib} MiB recording: peak RSS, MiB"),
            format!("{:.0}", l.peak_mib),
            format!("<= {TARGET_MIB:.0}"),
            l.peak_mib <= TARGET_MIB,
        );
        table.info(
            format!(
                "tracer {command}: peak MiB of {SMALL_MIB} MiB vs {large_mib} MiB, and MiB/s read"
            ),
            format!(
                "{:.0} vs {:.0} ({:.2}x), {:.0} MiB/s",
                s.peak_mib,
                l.peak_mib,
                l.peak_mib / s.peak_mib,
                large_mib as f64 / l.secs
            ),
        );
        if l.peak_mib > TARGET_MIB {
            table.notes.push(format!(
                "tracer {command} held {:.0} MiB for a {large_mib} MiB recording ({:.0} MiB for \
                 {SMALL_MIB} MiB): its memory grows with the file",
                l.peak_mib, s.peak_mib
            ));
        }
    }
    Ok(())
}

/// `tracer summary FILE`, output discarded; its peak RSS as GNU `time` reports it. Not from this
/// process's own `wait4`: a child started from a process as large as the benchmark (the cluster
/// model section leaves it at about 150 MiB) takes the parent's peak into its own `ru_maxrss`,
/// since `exec` folds the peak of the memory it leaves (the parent's, for a `vfork`ed or forked
/// child) into the process's. `time` is small, and forks the tracer from its own memory.
fn summary(tracer: &Path, file: &Path) -> anyhow::Result<Measured> {
    let started = Instant::now();
    let out = Command::new(TIME)
        .args(["--format", "%M"])
        .arg(tracer)
        .arg("summary")
        .arg(file)
        .stdout(Stdio::null())
        .output()
        .with_context(|| format!("running tracer summary through {TIME}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!(
            "tracer summary of {} failed ({}): {stderr}",
            file.display(),
            out.status
        );
    }
    // The tracer's own stderr comes first; `time`'s line is the last.
    let peak_kib: f64 = stderr
        .lines()
        .last()
        .and_then(|line| line.trim().parse().ok())
        .with_context(|| format!("{TIME} printed no peak RSS: {stderr}"))?;
    Ok(Measured {
        peak_mib: peak_kib / 1024.0,
        secs: started.elapsed().as_secs_f64(),
    })
}

/// `tracer replay FILE --speed 0` in a 120x40 tmux terminal, until its header says `ENDED`.
fn replay(tracer: &Path, file: &Path) -> anyhow::Result<Measured> {
    // A server per file: the last one may still be exiting when the next starts.
    let stem = file
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let tmux = Tmux {
        socket: format!("bhb-bench-replay-{}-{stem}", std::process::id()),
    };
    let started = Instant::now();
    let command = format!(
        "exec '{}' replay '{}' --speed 0",
        tracer.display(),
        file.display()
    );
    tmux.run(&[
        "new-session",
        "-d",
        "-x",
        "120",
        "-y",
        "40",
        "-s",
        "replay",
        &command,
    ])?;
    let pid: u32 = tmux
        .run(&["display-message", "-p", "-t", "replay", "#{pane_pid}"])?
        .trim()
        .parse()
        .context("the replay's pid from tmux")?;
    let deadline = started + Duration::from_mins(10);
    loop {
        let screen = tmux.run(&["capture-pane", "-p", "-t", "replay"])?;
        if screen.contains(" ENDED ") {
            break;
        }
        if Instant::now() > deadline || super::interrupted() {
            bail!("tracer replay did not finish: its screen:\n{screen}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let secs = started.elapsed().as_secs_f64();
    let peak = kstats::vm_hwm(pid).context("the replay's VmHWM")?;
    tmux.run(&["send-keys", "-t", "replay", "q"])?;
    Ok(Measured {
        peak_mib: peak as f64 / (1024.0 * 1024.0),
        secs,
    })
}

/// A tmux server of our own, killed on Drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .context("running tmux (cargo xtask setup installs it)")?;
        if !out.status.success() {
            bail!(
                "tmux {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// Writes about `bytes` of recording to `path`; returns the records written.
fn write_recording(path: &PathBuf, bytes: u64) -> anyhow::Result<u64> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = Counted {
        inner: BufWriter::with_capacity(1 << 20, file),
        bytes: 0,
        records: 0,
    };
    let mut flow = 0u64;
    while out.bytes < bytes {
        node_second(&mut out, &mut flow)?;
    }
    out.inner.flush()?;
    Ok(out.records)
}

struct Counted {
    inner: BufWriter<File>,
    bytes: u64,
    records: u64,
}

impl Counted {
    fn line(&mut self, line: &str) -> anyhow::Result<()> {
        self.inner.write_all(line.as_bytes())?;
        self.inner.write_all(b"\n")?;
        self.bytes += line.len() as u64 + 1;
        self.records += 1;
        Ok(())
    }
}

/// Workloads (comm, netns) and destinations: 50 x 40 pairs.
const SOURCES: u64 = 50;
const DESTINATIONS: u64 = 40;
/// Flows a recorded second of the node holds.
const FLOWS_PER_SECOND: u64 = 500;

/// `2026-11-30T16:40:02.118Z` for `ms` after the recording's start (within a day).
fn time(ms: u64) -> String {
    let ms = ms % 86_400_000;
    format!(
        "2026-11-30T{:02}:{:02}:{:02}.{:03}Z",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// One second of a busy node: its flows, then the counts and stats written once a second.
fn node_second(out: &mut Counted, flow: &mut u64) -> anyhow::Result<()> {
    let second = *flow / FLOWS_PER_SECOND;
    for _ in 0..FLOWS_PER_SECOND {
        one_flow(out, *flow)?;
        *flow += 1;
    }
    let at = time(second * 1000 + 999);
    for d in 0..DESTINATIONS {
        out.line(&format!(
            r#"{{"schema":1,"kind":"healthy","time":"{at}","verdict":"established","dst":"10.244.{}.{}:8080","pid":{},"comm":"app-{}","cgroup_id":{},"netns":"cni-{:04x}","netns_inode":{},"established":{},"mean_syn_sent_ms":0.4}}"#,
            d / 200,
            d % 200 + 2,
            1000 + d % SOURCES,
            d % SOURCES,
            5000 + d % SOURCES,
            d % SOURCES,
            4000 + d % SOURCES,
            10 + d % 7
        ))?;
    }
    out.line(&format!(
        r#"{{"schema":1,"kind":"dns","time":"{at}","verdict":"unanswered","name":"web.test","qtype":"A","id":{},"server":"10.96.0.10:53","client":"10.244.0.5:{}","pid":3131,"tid":3131,"comm":"nginx","cgroup_id":1,"netns":"cni-5e1f","netns_inode":4120,"socket_cookie":77,"waited_ms":2000,"explanation":"No reply from 10.96.0.10:53 to web.test A after 2000 ms: the server is down, unreachable, or drops the query."}}"#,
        second % 65_536,
        30_000 + second % 30_000
    ))?;
    out.line(&format!(
        r#"{{"schema":1,"kind":"service","time":"{at}","service":"10.96.0.10:80","window_s":60,"backends":[{{"backend":"10.244.1.30:8080","verdicts":{{"abandoned":40}},"total":40,"failing":40}},{{"backend":"10.244.1.11:8080","verdicts":{{"established":60}},"total":60,"failing":0}}],"total":100,"failing":40,"failing_share":0.4,"summary":"10.96.0.10:80 -> 10.244.1.30:8080 unanswered 40 of 100, 10.244.1.11:8080 established 60 of 100"}}"#
    ))?;
    out.line(&format!(
        r#"{{"schema":1,"kind":"stats","time":"{at}","attempts":{},"established_first_syn":{},"events":{},"open_flows":12,"dropped":{{"ring_buffer_full":0,"attempts_map_full":0,"healthy_map_full":0,"decode_errors":0,"expired_flows":{}}},"final":false}}"#,
        *flow * 3,
        *flow * 2,
        *flow * 4,
        *flow / 100
    ))
}

/// One connect attempt's records: most are refused, a quarter abandoned after a live update, some
/// slow, a few time out, and one in a hundred never ends (the tracer forgot it: `expired_flows`).
fn one_flow(out: &mut Counted, flow: u64) -> anyhow::Result<()> {
    let ms = flow * 1000 / FLOWS_PER_SECOND;
    let source = flow % SOURCES;
    let dst = flow / SOURCES % DESTINATIONS;
    let line = |at: u64,
                verdict: &str,
                cause: &str,
                is_final: bool,
                syns: u32,
                sent: u64,
                why: &str| {
        format!(
            r#"{{"schema":1,"kind":"connect","time":"{}","verdict":"{verdict}"{cause},"final":{is_final},"src":"10.244.0.{}:{}","dst":"10.244.{}.{}:8080","dialed":"10.96.{}.{}:80","syns":{syns},"syn_sent_ms":{sent},"pid":{},"tid":{},"comm":"app-{source}","cgroup_id":{},"netns":"cni-{source:04x}","netns_inode":{},"flow":"ffff8881{flow:08x}-{:x}","explanation":"{why}"}}"#,
            time(at),
            source + 2,
            32_768 + flow % 28_000,
            dst / 200,
            dst % 200 + 2,
            dst / 200,
            dst % 200 + 10,
            1000 + source,
            1000 + source + flow % 7,
            5000 + source,
            4000 + source,
            flow.wrapping_mul(0x9e37_79b9) & 0xff_ffff
        )
    };
    let rst = r#","cause":"rst""#;
    match flow % 100 {
        0..60 => out.line(&line(
            ms,
            "refused",
            rst,
            true,
            1,
            0,
            "10.244.1.30:8080 answered with a RST: the host is up but nothing listens on that port.",
        )),
        60..85 => {
            out.line(&line(ms, "unanswered", "", false, 2, 1012, "2 SYNs to 10.96.0.10:80 (backend 10.244.1.30:8080) and no answer for 1.0s: nothing at that address answers and nothing refuses. A deleted pod still in the datapath, or a silent drop."))?;
            out.line(&line(ms + 500, "abandoned", "", true, 2, 1503, "The application gave up after 1.5s and 2 SYNs with no answer from 10.96.0.10:80 (backend 10.244.1.30:8080): the SYN left and nothing came back (a black hole, not a refusal)."))
        }
        85..95 => out.line(&line(ms, "slow", "", true, 2, 1010, "10.96.0.10:80 (backend 10.244.1.11:8080) answered only after 2 SYNs (1.0s): the first SYN was lost on the way (a drop on the path, or a listener whose accept queue was full).")),
        95..99 => {
            out.line(&line(ms, "unanswered", "", false, 2, 1012, "2 SYNs and no answer for 1.0s."))?;
            out.line(&line(ms, "unanswered", "", false, 3, 3036, "3 SYNs and no answer for 3.0s."))?;
            out.line(&line(ms, "timed_out", "", true, 7, 127_000, "The kernel gave up after 7 SYNs and 127.0s with no answer: the SYN left and nothing came back (a black hole, not a refusal)."))
        }
        _ => out.line(&line(ms, "unanswered", "", false, 2, 1012, "2 SYNs and no answer for 1.0s.")),
    }
}
