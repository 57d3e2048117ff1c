//! How the ended flows of one row were spread: SYNs per flow and time to the end, so a row of
//! 9,560 abandoned flows says what is typical of them (the most common SYN count, the median
//! time) and their range, not what its latest flow happened to be.
//!
//! Counts, not flows: memory is bounded by the distinct values seen, whatever the row's size (times
//! of a second or more are kept to 3 significant digits, far finer than they are shown).
use std::collections::BTreeMap;

use serde::Serialize;

use crate::verdict::format_duration;

/// SYN counts whose latest sentence is kept (a flow's SYN count is a handful in practice; a
/// hostile recording could give thousands).
const SENTENCES_KEPT: usize = 16;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Spread {
    /// Flows by their SYN count.
    syns: BTreeMap<u16, u64>,
    /// The sentence of the latest flow of each SYN count (the first `SENTENCES_KEPT` counts).
    sentences: BTreeMap<u16, String>,
    /// Flows by their time to the end, ms (3 significant digits from 1 s).
    ms: BTreeMap<u64, u64>,
    ms_min: u64,
    ms_max: u64,
    flows: u64,
}

/// What a row's flows have in common, for the screen and the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typical {
    /// The most common SYN count (the larger one on a tie), its flows, and the range.
    pub syns: u16,
    pub flows_with_syns: u64,
    pub syns_range: (u16, u16),
    /// The median time to the end, and the range, ms.
    pub median_ms: u64,
    pub ms_range: (u64, u64),
    pub flows: u64,
}

impl Spread {
    /// One more ended flow.
    pub fn add(&mut self, syns: u16, ms: u64, sentence: &str) {
        *self.syns.entry(syns).or_default() += 1;
        if let Some(kept) = self.sentences.get_mut(&syns) {
            kept.clear();
            kept.push_str(sentence);
        } else if self.sentences.len() < SENTENCES_KEPT {
            self.sentences.insert(syns, sentence.to_string());
        }
        *self.ms.entry(rounded(ms)).or_default() += 1;
        if self.flows == 0 {
            (self.ms_min, self.ms_max) = (ms, ms);
        } else {
            self.ms_min = self.ms_min.min(ms);
            self.ms_max = self.ms_max.max(ms);
        }
        self.flows += 1;
    }

    /// The most common SYN count (the larger one on a tie) and its flows. Cheap: one entry per
    /// SYN count.
    pub fn typical_syns(&self) -> Option<(u16, u64)> {
        self.syns
            .iter()
            .max_by_key(|&(syns, n)| (n, syns))
            .map(|(&syns, &n)| (syns, n))
    }

    /// What is typical of the flows, and their range; `None` before the first ended flow.
    pub fn typical(&self) -> Option<Typical> {
        let (syns, flows_with_syns) = self.typical_syns()?;
        let syns_range = (*self.syns.keys().next()?, *self.syns.keys().next_back()?);
        // The lower median: the value at or below which half the flows ended.
        let half = self.flows.div_ceil(2);
        let mut seen = 0;
        let median = self
            .ms
            .iter()
            .find(|&(_, n)| {
                seen += n;
                seen >= half
            })
            .map_or(self.ms_min, |(&ms, _)| ms);
        Some(Typical {
            syns,
            flows_with_syns,
            syns_range,
            median_ms: median.clamp(self.ms_min, self.ms_max),
            ms_range: (self.ms_min, self.ms_max),
            flows: self.flows,
        })
    }

    /// What is typical of the flows, when they differ as far as a person can see.
    pub fn typical_if_varied(&self) -> Option<Typical> {
        self.typical().filter(Typical::varies)
    }

    /// The sentence of the latest flow with the typical SYN count.
    pub fn typical_sentence(&self) -> Option<&str> {
        let (syns, _) = self.typical_syns()?;
        self.sentences.get(&syns).map(String::as_str)
    }
}

impl Typical {
    /// Whether the flows differ as far as a person can see: more than one SYN count, or times that
    /// read differently.
    pub fn varies(&self) -> bool {
        self.syns_range.0 != self.syns_range.1
            || duration(self.ms_range.0) != duration(self.ms_range.1)
    }

    /// `2 SYNs in 9508 of 9560 flows (from 1 to 2), ended after 1.5s (median; from 50ms to 1.5s)`.
    pub fn text(&self) -> String {
        let (low, high) = self.syns_range;
        let syns = if low == high {
            format!("{} SYNs in all {} flows", self.syns, self.flows)
        } else {
            format!(
                "{} SYNs in {} of {} flows (from {low} to {high})",
                self.syns, self.flows_with_syns, self.flows
            )
        };
        let (low, high) = (duration(self.ms_range.0), duration(self.ms_range.1));
        let time = if low == high {
            format!("ended after {low}")
        } else {
            format!(
                "ended after {} (median; from {low} to {high})",
                duration(self.median_ms)
            )
        };
        format!("{syns}, {time}")
    }
}

fn duration(ms: u64) -> String {
    format_duration(std::time::Duration::from_millis(ms))
}

/// `ms` to 3 significant digits from 1 s (1503 ms -> 1500 ms, 127.48 s -> 127 s); exact below.
fn rounded(ms: u64) -> u64 {
    let mut step = 1;
    while ms / step >= 1000 {
        step *= 10;
    }
    ms / step * step
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_row_of_the_issue_says_what_is_typical_not_its_latest_flow() {
        // Issue 27, item 6: 9,560 abandoned flows, 9,508 of them with 2 SYNs over 1.5 s, the latest
        // with 1 SYN after 50 ms.
        let mut s = Spread::default();
        for i in 0..9_508 {
            s.add(2, 1_500 + i % 7, "2 SYNs, 1.5s");
        }
        for _ in 0..52 {
            s.add(1, 50, "1 SYN, 50ms");
        }
        let t = s.typical().expect("flows");
        assert_eq!(
            (t.syns, t.flows_with_syns, t.syns_range),
            (2, 9_508, (1, 2))
        );
        assert_eq!((t.median_ms, t.ms_range), (1_500, (50, 1_506)));
        assert!(t.varies());
        assert_eq!(
            t.text(),
            "2 SYNs in 9508 of 9560 flows (from 1 to 2), ended after 1.5s (median; from 50ms to 1.5s)"
        );
        assert_eq!(s.typical_sentence(), Some("2 SYNs, 1.5s"));
    }

    #[test]
    fn flows_alike_do_not_vary() {
        let mut s = Spread::default();
        s.add(2, 1_500, "a");
        s.add(2, 1_502, "b");
        let t = s.typical().expect("flows");
        assert!(!t.varies(), "{t:?}");
        assert_eq!(t.text(), "2 SYNs in all 2 flows, ended after 1.5s");
        assert_eq!(
            s.typical_sentence(),
            Some("b"),
            "the latest of the typical count"
        );
        assert_eq!(Spread::default().typical(), None);
    }

    #[test]
    fn the_median_is_of_the_flows_and_ties_take_more_syns() {
        let mut s = Spread::default();
        for ms in [10, 20, 30, 4_000, 5_000] {
            s.add(if ms < 100 { 1 } else { 3 }, ms, "x");
        }
        s.add(3, 6_000, "y");
        s.add(1, 40, "z");
        let t = s.typical().expect("flows");
        assert_eq!(t.median_ms, 40, "the 4th of 7");
        assert_eq!(t.syns, 1, "4 flows with 1 SYN, 3 with 3: {t:?}");
        let mut tie = Spread::default();
        tie.add(1, 0, "one");
        tie.add(2, 0, "two");
        assert_eq!(tie.typical().expect("flows").syns, 2);
    }

    #[test]
    fn distinct_values_are_bounded() {
        let mut s = Spread::default();
        for ms in 0..1_000_000 {
            s.add(u16::try_from(ms % 5_000).expect("small"), ms, "x");
        }
        assert!(s.ms.len() <= 1000 + 900 * 3, "{}", s.ms.len());
        assert_eq!(s.sentences.len(), SENTENCES_KEPT);
        assert_eq!((s.ms_min, s.ms_max), (0, 999_999), "the range is exact");
        assert_eq!(rounded(127_480), 127_000);
        assert_eq!(rounded(999), 999);
    }
}
