//! Which parts of the benchmark a run measures (`--only`, `--skip`; all by default), so one part
//! can be measured again alone.
use clap::ValueEnum;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Section {
    /// The userspace pipeline, the cluster model and serving `--metrics`.
    Userspace,
    /// Program runs per connect of the storm per hook tier, and the programs' body time.
    Runs,
    /// The storm's connect-rate loss per peer, completeness, the machine's CPU at paced rates.
    Storm,
    /// The tracer's added CPU per loopback connect, stats off, against today's design.
    Loopback,
    /// The per-packet tax: bulk TCP and a UDP flood between two namespaces.
    Traffic,
    /// Time to the first `unanswered` record.
    Latency,
    /// Memory under a flood of unanswered SYNs.
    Flood,
    /// Program runs per connect in a VM booting a kernel with fentry.
    Vm,
    /// Peak RSS of `tracer summary` and `tracer replay` of a large recording (no root alone).
    Recordings,
}

impl Section {
    pub const ALL: [Section; 9] = [
        Section::Userspace,
        Section::Runs,
        Section::Storm,
        Section::Loopback,
        Section::Traffic,
        Section::Latency,
        Section::Flood,
        Section::Vm,
        Section::Recordings,
    ];
}

/// The sections a run measures.
#[derive(Debug, Clone)]
pub struct Sections(Vec<Section>);

impl Sections {
    /// `only` (all when empty) minus `skip`.
    pub fn chosen(only: &[Section], skip: &[Section]) -> Sections {
        let base = if only.is_empty() {
            Section::ALL.to_vec()
        } else {
            only.to_vec()
        };
        Sections(base.into_iter().filter(|s| !skip.contains(s)).collect())
    }

    pub fn has(&self, s: Section) -> bool {
        self.0.contains(&s)
    }

    /// Whether any chosen section uses the connect test bed.
    pub fn need_bed(&self) -> bool {
        [
            Section::Runs,
            Section::Storm,
            Section::Loopback,
            Section::Latency,
            Section::Flood,
        ]
        .iter()
        .any(|s| self.has(*s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_then_skip() {
        let all = Sections::chosen(&[], &[Section::Vm]);
        assert!(all.has(Section::Runs) && !all.has(Section::Vm));
        let some = Sections::chosen(&[Section::Traffic], &[]);
        assert!(some.has(Section::Traffic) && !some.has(Section::Runs) && !some.need_bed());
    }
}
