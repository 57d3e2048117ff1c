//! Kernel-side cost and memory of a running tracer, read from outside it:
//! - `kernel.bpf_stats_enabled` (restored on Drop of `BpfStats`), then `run_time_ns` / `run_cnt` of
//!   each of its programs from `/proc/PID/fdinfo` of its `bpf-prog` fds;
//! - `memlock` of its `bpf-map` fds (kernel memory of its maps);
//! - `VmHWM` (peak RSS) from `/proc/PID/status`.
use std::{collections::BTreeMap, path::PathBuf, process::Command};

use anyhow::Context as _;

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// Turns on kernel BPF run-time statistics; puts back the previous value on Drop.
pub struct BpfStats {
    previous: String,
}

impl BpfStats {
    pub fn enable() -> anyhow::Result<BpfStats> {
        let previous =
            std::fs::read_to_string(BPF_STATS).context("reading kernel.bpf_stats_enabled")?;
        std::fs::write(BPF_STATS, "1").context("enabling kernel.bpf_stats_enabled")?;
        Ok(BpfStats {
            previous: previous.trim().to_string(),
        })
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(BPF_STATS, &self.previous) {
            eprintln!(
                "bench: could not restore kernel.bpf_stats_enabled={}: {e}",
                self.previous
            );
        }
    }
}

/// Cumulative run statistics of one program, by its kernel id.
#[derive(Debug, Clone, Default)]
pub struct ProgStat {
    pub id: u64,
    pub name: String,
    pub run_time_ns: u64,
    pub run_cnt: u64,
    /// Runs the kernel skipped: the program would have nested inside itself on that CPU.
    pub recursion_misses: u64,
}

/// fdinfo text of every fd of `pid` whose link target is `kind`.
fn fds_of_kind(pid: u32, kind: &str) -> Vec<String> {
    let dir = PathBuf::from(format!("/proc/{pid}/fd"));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy() == kind))
        .filter_map(|e| {
            std::fs::read_to_string(format!(
                "/proc/{pid}/fdinfo/{}",
                e.file_name().to_string_lossy()
            ))
            .ok()
        })
        .collect()
}

fn field(fdinfo: &str, name: &str) -> Option<u64> {
    fdinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == name).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Reads the run statistics of one process's programs again and again: their names are looked up
/// once (bpftool), the counters each time (fdinfo).
pub struct ProgReader {
    pid: u32,
    names: BTreeMap<u64, String>,
}

impl ProgReader {
    pub fn new(pid: u32) -> ProgReader {
        let names = counters(pid)
            .into_keys()
            .map(|id| (id, prog_name(id).unwrap_or_else(|| format!("prog_id {id}"))))
            .collect();
        ProgReader { pid, names }
    }

    /// The counters now, one entry per program id, named.
    pub fn read(&self) -> Vec<ProgStat> {
        counters(self.pid)
            .into_values()
            .map(|mut s| {
                s.name = self.names.get(&s.id).cloned().unwrap_or_else(|| {
                    prog_name(s.id).unwrap_or_else(|| format!("prog_id {}", s.id))
                });
                s
            })
            .collect()
    }
}

/// The unnamed counters of every program `pid` holds, by program id.
fn counters(pid: u32) -> BTreeMap<u64, ProgStat> {
    let mut by_id = BTreeMap::new();
    for info in fds_of_kind(pid, "anon_inode:bpf-prog") {
        let Some(id) = field(&info, "prog_id") else {
            continue;
        };
        by_id.entry(id).or_insert_with(|| ProgStat {
            id,
            name: String::new(),
            run_time_ns: field(&info, "run_time_ns").unwrap_or(0),
            run_cnt: field(&info, "run_cnt").unwrap_or(0),
            recursion_misses: field(&info, "recursion_misses").unwrap_or(0),
        });
    }
    by_id
}

/// A program's name from bpftool, if installed.
fn prog_name(id: u64) -> Option<String> {
    let out = Command::new("bpftool")
        .args(["prog", "show", "id", &id.to_string(), "--json"])
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v.get("name")?.as_str().map(str::to_string)
}

/// Sum of `memlock` over the maps `pid` holds (each map once): the kernel memory of its maps.
pub fn map_memlock(pid: u32) -> u64 {
    let by_id: BTreeMap<u64, u64> = fds_of_kind(pid, "anon_inode:bpf-map")
        .iter()
        .filter_map(|i| Some((field(i, "map_id")?, field(i, "memlock")?)))
        .collect();
    by_id.values().sum()
}

/// Peak resident set size of `pid`, bytes (`VmHWM`).
pub fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// CPU time `pid` has used so far, all threads, user + system, seconds (`/proc/PID/stat`).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: count fields after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After ')' come state (field 3) ... utime is field 14, stime field 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((utime + stime) as f64 / ticks)
}
