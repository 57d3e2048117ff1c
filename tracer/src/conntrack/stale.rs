//! NAT entries that never got a reply: conntrack entries still in `SYN_SENT` and `[UNREPLIED]` past a
//! threshold. This is what `conntrack -E` shows raw during a black hole; here each is reported once,
//! with the backend the DNAT chose.
use std::time::{Duration, Instant};

use hashbrown::{HashMap, HashSet};

use super::netlink::{Entry, TcpState};
use crate::{
    clock::Timestamp,
    record::{StaleNatRecord, Tuple},
};

pub struct StaleNat {
    threshold: Duration,
    /// First time each unreplied entry was seen, by conntrack id.
    first_seen: HashMap<u32, Instant>,
    reported: HashSet<u32>,
}

impl StaleNat {
    pub fn new(threshold: Duration) -> StaleNat {
        StaleNat {
            threshold,
            first_seen: HashMap::new(),
            reported: HashSet::new(),
        }
    }

    /// Takes a full dump; returns records for entries that just crossed the threshold.
    pub fn update(
        &mut self,
        now: Instant,
        entries: &[Entry],
        time: Timestamp,
    ) -> Vec<StaleNatRecord> {
        let unreplied: Vec<&Entry> = entries
            .iter()
            .filter(|e| !e.replied && e.tcp_state == Some(TcpState::SynSent))
            .collect();
        let live: HashSet<u32> = unreplied.iter().map(|e| e.id).collect();
        self.first_seen.retain(|id, _| live.contains(id));
        self.reported.retain(|id| live.contains(id));
        let mut out = Vec::new();
        for e in unreplied {
            let first = *self.first_seen.entry(e.id).or_insert(now);
            let age = now.duration_since(first);
            if age >= self.threshold && self.reported.insert(e.id) {
                out.push(record(e, age, time));
            }
        }
        out
    }
}

fn record(e: &Entry, age: Duration, time: Timestamp) -> StaleNatRecord {
    let backend = e.backend();
    let via = backend.map_or_else(String::new, |b| format!(" (DNAT to {b})"));
    StaleNatRecord {
        time,
        original: Tuple {
            src: e.original.src,
            dst: e.original.dst,
        },
        reply: Tuple {
            src: e.reply.src,
            dst: e.reply.dst,
        },
        backend,
        state: "SYN_SENT".into(),
        age_s: age.as_secs(),
        explanation: format!(
            "conntrack entry {} -> {}{via} has waited at least {}s in SYN_SENT [UNREPLIED]: the SYN \
             was forwarded and nothing ever answered.",
            e.original.src,
            e.original.dst,
            age.as_secs()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conntrack::netlink::Direction;

    fn entry(id: u32, replied: bool) -> Entry {
        let a = |s: &str| s.parse().expect("addr");
        Entry {
            id,
            original: Direction {
                src: a("10.244.0.5:40000"),
                dst: a("10.96.0.10:80"),
            },
            reply: Direction {
                src: a("10.244.1.30:8080"),
                dst: a("10.244.0.5:40000"),
            },
            replied,
            assured: replied,
            dst_nat: true,
            tcp_state: Some(if replied {
                TcpState::Established
            } else {
                TcpState::SynSent
            }),
            timeout_s: 100,
        }
    }

    #[test]
    fn reports_an_unreplied_entry_once_after_the_threshold() {
        let mut stale = StaleNat::new(Duration::from_secs(5));
        let t = Instant::now();
        let dump = [entry(1, false), entry(2, true)];
        assert!(stale.update(t, &dump, Timestamp::default()).is_empty());
        let later = stale.update(t + Duration::from_secs(6), &dump, Timestamp::default());
        assert_eq!(later.len(), 1);
        assert_eq!(
            later[0].backend.map(|b| b.to_string()).as_deref(),
            Some("10.244.1.30:8080")
        );
        assert!(
            later[0].explanation.contains("DNAT to 10.244.1.30:8080"),
            "{}",
            later[0].explanation
        );
        assert!(
            stale
                .update(t + Duration::from_secs(7), &dump, Timestamp::default())
                .is_empty(),
            "once"
        );
    }

    #[test]
    fn entries_that_go_away_are_forgotten() {
        let mut stale = StaleNat::new(Duration::from_secs(5));
        let t = Instant::now();
        stale.update(t, &[entry(1, false)], Timestamp::default());
        stale.update(t + Duration::from_secs(1), &[], Timestamp::default());
        // Back after going away: a new entry, whose age counts from its return, not from t.
        assert!(
            stale
                .update(
                    t + Duration::from_secs(6),
                    &[entry(1, false)],
                    Timestamp::default()
                )
                .is_empty(),
            "5 s after t but not after its return"
        );
        let reported = stale.update(
            t + Duration::from_secs(12),
            &[entry(1, false)],
            Timestamp::default(),
        );
        assert_eq!(reported.len(), 1, "reported once 5 s past its return");
        assert_eq!(reported[0].age_s, 6, "{:?}", reported[0]);
    }
}
