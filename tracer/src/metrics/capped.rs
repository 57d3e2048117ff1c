//! A metric family with a cap on its distinct label sets. Past the cap, an update to a label set not
//! yet seen goes to the family's single `other` series (every label `other`) and is counted in
//! `tracer_metrics_overflow_total{family}`: a flood of distinct destinations cannot grow the
//! endpoint, Prometheus's memory or a scrape without bound, and the fold is never silent.
use std::hash::Hash;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family},
};

/// A label set with a fold for the overflow.
pub trait Overflow {
    /// The label set every overflowing update goes to: each label `other`.
    fn other() -> Self;
}

pub struct Capped<L, M> {
    family: Family<L, M>,
    cap: usize,
    /// Label sets of their own created so far (`other` not included).
    held: usize,
    other: L,
    /// This family's series of `tracer_metrics_overflow_total`.
    overflow: Counter,
}

impl<L, M> Capped<L, M>
where
    L: Clone + Hash + Eq + EncodeLabelSet + Overflow,
    M: Default,
{
    pub fn new(family: Family<L, M>, cap: usize, overflow: Counter) -> Self {
        Capped {
            family,
            cap,
            held: 0,
            other: L::other(),
            overflow,
        }
    }

    /// `update` on the series of `labels`, or on the `other` series when `labels` is new and the
    /// family already holds `cap` label sets.
    pub fn with(&mut self, labels: &L, update: impl FnOnce(&M)) {
        if let Some(metric) = self.family.get(labels) {
            update(&metric);
        } else if self.held < self.cap {
            self.held += 1;
            update(&self.family.get_or_create(labels));
        } else {
            self.overflow.inc();
            update(&self.family.get_or_create(&self.other));
        }
    }

    /// `update` on the series of `labels` only if it exists (resetting a gauge never adds one).
    pub fn existing(&self, labels: &L, update: impl FnOnce(&M)) {
        if let Some(metric) = self.family.get(labels) {
            update(&metric);
        }
    }

    /// Distinct label sets held, the `other` series included.
    pub fn len(&self) -> usize {
        self.held + usize::from(self.overflowed() > 0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Updates folded into `other` so far.
    pub fn overflowed(&self) -> u64 {
        self.overflow.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct Dst {
        dst: String,
    }

    impl Overflow for Dst {
        fn other() -> Self {
            Dst {
                dst: "other".into(),
            }
        }
    }

    #[test]
    fn past_the_cap_new_label_sets_fold_into_other_and_are_counted() {
        let family = Family::<Dst, Counter>::default();
        let mut capped = Capped::new(family.clone(), 3, Counter::default());
        for i in 0..10 {
            capped.with(
                &Dst {
                    dst: format!("d{i}"),
                },
                |c| {
                    c.inc();
                },
            );
        }
        // A label set seen before the cap keeps its own series.
        capped.with(&Dst { dst: "d0".into() }, |c| {
            c.inc();
        });
        assert_eq!(capped.len(), 4);
        assert_eq!(capped.overflowed(), 7);
        assert_eq!(family.get_or_create(&Dst::other()).get(), 7);
        assert_eq!(family.get_or_create(&Dst { dst: "d0".into() }).get(), 2);
    }
}
