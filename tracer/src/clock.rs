//! Kernel timestamps (`bpf_ktime_get_ns`, `CLOCK_MONOTONIC`) -> wall-clock time for records.
use std::{
    fmt,
    str::FromStr,
    time::{Duration, SystemTime},
};

#[derive(Clone, Copy, Debug)]
pub struct KernelClock {
    /// Wall-clock time at monotonic zero.
    boot: SystemTime,
}

impl Default for KernelClock {
    fn default() -> KernelClock {
        KernelClock::new()
    }
}

impl KernelClock {
    pub fn new() -> KernelClock {
        let mono = monotonic_now_ns();
        KernelClock {
            boot: SystemTime::now() - Duration::from_nanos(mono),
        }
    }

    /// A clock whose monotonic zero was at `boot`: recorded or synthetic timestamps read the same
    /// on every run.
    pub fn with_boot(boot: SystemTime) -> KernelClock {
        KernelClock { boot }
    }

    pub fn wall(self, ktime_ns: u64) -> SystemTime {
        self.boot + Duration::from_nanos(ktime_ns)
    }
}

/// The kernel's `CLOCK_MONOTONIC`, the clock of `bpf_ktime_get_ns`.
pub fn monotonic_now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// RFC 3339 UTC with milliseconds, as in every record's `time`.
pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// A record's wall-clock time: written RFC 3339 UTC with milliseconds
/// (`2026-11-30T16:40:02.118Z`), read back from any RFC 3339 time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub SystemTime);

impl Default for Timestamp {
    fn default() -> Timestamp {
        Timestamp(SystemTime::UNIX_EPOCH)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        humantime::format_rfc3339_millis(self.0).fmt(f)
    }
}

impl FromStr for Timestamp {
    type Err = String;

    fn from_str(s: &str) -> Result<Timestamp, String> {
        humantime::parse_rfc3339_weak(s)
            .map(Timestamp)
            .map_err(|e| format!("`{s}` is not an RFC 3339 time ({e})"))
    }
}

crate::serde_text::serde_as_text!(Timestamp);
