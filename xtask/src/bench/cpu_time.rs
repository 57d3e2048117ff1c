//! CPU time to the nanosecond, from the scheduler's own accounting (`clock_gettime` on CPU-time
//! clocks): the calling thread's, another process's (every thread, the exited ones included), and
//! the softirq thread of one CPU. No sampling and no clock of ours in the measured path: each
//! figure is two reads around a round.
use std::time::Duration;

use anyhow::bail;

fn read_clock(clock: libc::clockid_t) -> anyhow::Result<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) writes one timespec we own.
    if unsafe { libc::clock_gettime(clock, &raw mut ts) } != 0 {
        bail!("clock_gettime: {}", std::io::Error::last_os_error());
    }
    Ok(Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    ))
}

/// CPU time of the calling thread so far. With the kernel's default accounting (no
/// `CONFIG_IRQ_TIME_ACCOUNTING`) this includes the softirq work run on its CPU while it was the
/// running thread: on loopback, the whole receive path of the packets it sends.
pub fn this_thread() -> anyhow::Result<Duration> {
    read_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of process `pid` so far, all its threads, the exited ones included.
pub fn process(pid: u32) -> anyhow::Result<Duration> {
    let mut clock: libc::clockid_t = 0;
    let pid = libc::pid_t::try_from(pid)?;
    // SAFETY: clock_getcpuclockid(3) writes one clockid_t we own.
    let rc = unsafe { libc::clock_getcpuclockid(pid, &raw mut clock) };
    if rc != 0 {
        bail!(
            "clock_getcpuclockid({pid}): {}",
            std::io::Error::from_raw_os_error(rc)
        );
    }
    read_clock(clock)
}

/// The pid of `ksoftirqd/CPU`, which runs the softirq work a CPU could not finish in the context
/// of the thread that raised it.
pub fn ksoftirqd(cpu: usize) -> anyhow::Result<u32> {
    let want = format!("ksoftirqd/{cpu}");
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if std::fs::read_to_string(entry.path().join("comm")).is_ok_and(|c| c.trim() == want) {
            return Ok(pid);
        }
    }
    bail!("no {want} thread in /proc")
}

/// Whether the running kernel takes interrupt and softirq time out of the threads it interrupts
/// (`CONFIG_IRQ_TIME_ACCOUNTING`): then a thread's CPU time leaves out the softirq work on its CPU.
/// None when the kernel's configuration cannot be read.
pub fn irq_time_accounted() -> Option<bool> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let config = std::fs::read_to_string(format!("/boot/config-{}", release.trim()))
        .ok()
        .or_else(|| {
            let out = std::process::Command::new("zcat")
                .arg("/proc/config.gz")
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        })?;
    Some(config.lines().any(|l| l == "CONFIG_IRQ_TIME_ACCOUNTING=y"))
}

/// What one reading of the thread's and `ksoftirqd`'s CPU clocks costs, from 1000 of them.
pub fn clock_read_cost(softirq_thread: u32) -> anyhow::Result<Duration> {
    const READS: u32 = 1000;
    let before = this_thread()?;
    for _ in 0..READS {
        std::hint::black_box(this_thread()? + process(softirq_thread)?);
    }
    Ok(this_thread()?.saturating_sub(before) / READS)
}

/// Pins the calling thread to one CPU.
pub fn pin_this_thread(cpu: usize) -> anyhow::Result<()> {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET on a set we own, with a CPU number below CPU_SETSIZE (checked by the caller's
    // online count).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: sched_setaffinity(2) on the calling thread (0) with a set we own and its size.
    let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set) };
    if rc != 0 {
        bail!("pinning to CPU {cpu}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// Gives the calling thread the highest CPU weight (nice -20): on a machine shared with other
/// work it is preempted far less often, and each preemption costs it cold caches.
pub fn favour_this_thread() -> anyhow::Result<()> {
    // SAFETY: gettid(2) has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: setpriority(2) on the calling thread's own id.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, u32::try_from(tid)?, -20) };
    if rc != 0 {
        bail!("nice -20: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// The scheduler weight of the benchmark's whole session (its autogroup), raised for a section and
/// put back on Drop. With `CONFIG_SCHED_AUTOGROUP` a thread's nice only ranks it within its own
/// session; against the other sessions of a shared machine the session's nice counts.
pub struct FavouredSession {
    previous: Option<i32>,
}

const AUTOGROUP: &str = "/proc/self/autogroup";

impl FavouredSession {
    /// nice -20 for the session; nothing when the kernel has no autogroups.
    pub fn raise() -> FavouredSession {
        let previous = std::fs::read_to_string(AUTOGROUP)
            .ok()
            .and_then(|s| s.split_whitespace().last()?.parse().ok());
        if previous.is_some()
            && let Err(e) = std::fs::write(AUTOGROUP, "-20")
        {
            eprintln!("bench: could not raise the session's CPU weight ({e}); measuring without");
            return FavouredSession { previous: None };
        }
        FavouredSession { previous }
    }
}

impl Drop for FavouredSession {
    fn drop(&mut self) {
        if let Some(nice) = self.previous
            && let Err(e) = std::fs::write(AUTOGROUP, nice.to_string())
        {
            eprintln!("bench: could not put the session's nice back to {nice}: {e}");
        }
    }
}

/// The number of CPUs online.
pub fn cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_clock_covers_what_the_thread_clock_counts() {
        let before = this_thread().expect("thread clock");
        let process_before = process(std::process::id()).expect("process clock");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut x = 0u64;
        // Work until the thread's own clock says 20 ms, however busy the machine is.
        while this_thread().expect("thread clock").saturating_sub(before)
            < Duration::from_millis(20)
        {
            assert!(std::time::Instant::now() < deadline, "no CPU time in 20 s");
            for _ in 0..10_000 {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            }
        }
        std::hint::black_box(x);
        let spent = this_thread().expect("thread clock").saturating_sub(before);
        let process_spent = process(std::process::id())
            .expect("process clock")
            .saturating_sub(process_before);
        assert!(process_spent >= spent, "{process_spent:?} < {spent:?}");
    }
}
