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
