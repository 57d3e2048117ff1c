//! Reads the kernel's per-CPU counters and per-destination healthy counts, summed over CPUs.
use aya::maps::{MapData, PerCpuArray, PerCpuHashMap};
use hashbrown::HashMap;
use tracer_common::{HealthyKey, HealthyStats, counter};

pub struct Counters {
    array: PerCpuArray<MapData, u64>,
}

/// Totals since load, by `tracer_common::counter` index.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CounterValues(pub [u64; counter::COUNT as usize]);

impl CounterValues {
    pub fn get(&self, index: u32) -> u64 {
        self.0[index as usize]
    }
}

impl Counters {
    pub fn new(array: PerCpuArray<MapData, u64>) -> Counters {
        Counters { array }
    }

    pub fn read(&self) -> CounterValues {
        let mut values = CounterValues::default();
        for (index, slot) in values.0.iter_mut().enumerate() {
            if let Ok(per_cpu) = self.array.get(&(index as u32), 0) {
                *slot = per_cpu.iter().sum();
            }
        }
        values
    }
}

/// Healthy counts per (destination, process); `deltas` returns what changed since the previous call.
pub struct Healthy {
    map: PerCpuHashMap<MapData, HealthyKey, HealthyStats>,
    previous: HashMap<HealthyKey, u64>,
}

impl Healthy {
    pub fn new(map: PerCpuHashMap<MapData, HealthyKey, HealthyStats>) -> Healthy {
        Healthy {
            map,
            previous: HashMap::new(),
        }
    }

    /// Per key: connects since the previous call, their summed wait, and the process's latest
    /// cgroup and comm. The mean wait is over all connects so far (per-CPU sums cannot be split).
    pub fn deltas(&mut self) -> Vec<(HealthyKey, HealthyStats)> {
        let mut out = Vec::new();
        for (key, per_cpu) in self.map.iter().flatten() {
            let mut total = HealthyStats::default();
            for s in per_cpu.iter().filter(|s| s.established > 0) {
                total.established += s.established;
                total.syn_sent_ns_total += s.syn_sent_ns_total;
                total.cgroup_id = s.cgroup_id;
                total.comm = s.comm;
            }
            let before = self
                .previous
                .insert(key, total.established)
                .unwrap_or_default();
            let new = total.established.saturating_sub(before);
            if new > 0 {
                let mean = total.syn_sent_ns_total / total.established.max(1);
                out.push((
                    key,
                    HealthyStats {
                        established: new,
                        syn_sent_ns_total: mean * new,
                        ..total
                    },
                ));
            }
        }
        out
    }
}

/// Runs of our programs the kernel skipped: a program is not run when it would nest inside a BPF
/// program already running on that CPU (for a formatted tracepoint, any program; for the others, the
/// same one). The kernel counts them per program (`recursion_misses` in the program's fdinfo); each
/// is an event that never reached us.
pub struct SkippedRuns {
    /// Program file descriptors, owned by the `Ebpf` that `KernelSide` keeps alive.
    fds: Vec<std::os::fd::RawFd>,
}

impl SkippedRuns {
    pub fn new(fds: Vec<std::os::fd::RawFd>) -> SkippedRuns {
        SkippedRuns { fds }
    }

    /// Whether this kernel counts skipped runs at all (`recursion_misses` appeared in 5.12).
    pub fn counted_by_kernel(&self) -> bool {
        self.fds.first().is_some_and(|fd| {
            std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
                .is_ok_and(|text| text.lines().any(|l| l.starts_with("recursion_misses:")))
        })
    }

    /// Total over our programs; a program whose fdinfo cannot be read counts 0.
    pub fn read(&self) -> u64 {
        self.fds
            .iter()
            .filter_map(|fd| std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok())
            .map(|text| recursion_misses(&text))
            .sum()
    }
}

/// `recursion_misses:` from a BPF program's fdinfo (absent on kernels before 5.12: 0).
fn recursion_misses(fdinfo: &str) -> u64 {
    fdinfo
        .lines()
        .find_map(|line| line.strip_prefix("recursion_misses:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::recursion_misses;

    #[test]
    fn reads_recursion_misses_from_fdinfo() {
        let fdinfo = "pos:\t0\nflags:\t02000002\nprog_type:\t5\nprog_jited:\t1\n\
                      run_time_ns:\t0\nrun_cnt:\t0\nrecursion_misses:\t17\nverified_insns:\t99\n";
        assert_eq!(recursion_misses(fdinfo), 17);
        assert_eq!(
            recursion_misses("prog_type:\t5\n"),
            0,
            "older kernels: absent"
        );
    }
}
