//! The per-Service view: for each Service address, per backend, the verdicts of the last window, and
//! the share failing. "10.96.0.10:80 -> 10.244.1.30:8080 unanswered 48 of 100, 10.244.1.11:8080
//! established 52" is the line that ends the incidents this tool is for.
//!
//! Failures come from the tracer's own final verdicts (only those cross from the kernel); successes
//! from the conntrack table: each new replied, DNAT'd entry is one answered connect to that backend.
use std::{
    collections::{BTreeMap, VecDeque},
    net::SocketAddr,
    time::{Duration, Instant},
};

use hashbrown::HashMap;

use crate::{
    clock::Timestamp,
    record::{BackendShare, ServiceRecord},
    verdict::VerdictKind,
};

/// One outcome of one connect to a backend of a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    at: Instant,
    service: SocketAddr,
    backend: SocketAddr,
    verdict: VerdictKind,
    count: u64,
}

pub struct ServiceView {
    window: Duration,
    outcomes: VecDeque<Outcome>,
}

impl ServiceView {
    pub fn new(window: Duration) -> ServiceView {
        ServiceView {
            window,
            outcomes: VecDeque::new(),
        }
    }

    /// A final verdict of a connect that went to `backend` through `service`.
    pub fn record(
        &mut self,
        at: Instant,
        service: SocketAddr,
        backend: SocketAddr,
        verdict: VerdictKind,
    ) {
        self.add(Outcome {
            at,
            service,
            backend,
            verdict,
            count: 1,
        });
    }

    /// `count` connects answered by `backend` (new replied conntrack entries).
    pub fn established(
        &mut self,
        at: Instant,
        service: SocketAddr,
        backend: SocketAddr,
        count: u64,
    ) {
        self.add(Outcome {
            at,
            service,
            backend,
            verdict: VerdictKind::Established,
            count,
        });
    }

    fn add(&mut self, outcome: Outcome) {
        self.outcomes.push_back(outcome);
    }

    /// One record per Service with outcomes in the window ending at `now`; forgets older outcomes.
    pub fn records(&mut self, now: Instant, time: Timestamp) -> Vec<ServiceRecord> {
        while self
            .outcomes
            .front()
            .is_some_and(|o| now.duration_since(o.at) > self.window)
        {
            self.outcomes.pop_front();
        }
        let mut by_service: BTreeMap<SocketAddr, HashMap<SocketAddr, BTreeMap<VerdictKind, u64>>> =
            BTreeMap::new();
        for o in &self.outcomes {
            *by_service
                .entry(o.service)
                .or_default()
                .entry(o.backend)
                .or_default()
                .entry(o.verdict)
                .or_default() += o.count;
        }
        by_service
            .into_iter()
            .map(|(service, backends)| service_record(service, backends, self.window, time))
            .collect()
    }
}

#[expect(
    clippy::cast_precision_loss,
    reason = "a share needs no 64-bit precision"
)]
fn service_record(
    service: SocketAddr,
    backends: HashMap<SocketAddr, BTreeMap<VerdictKind, u64>>,
    window: Duration,
    time: Timestamp,
) -> ServiceRecord {
    let mut shares: Vec<BackendShare> = backends
        .into_iter()
        .map(|(backend, verdicts)| {
            let total = verdicts.values().sum();
            let failing = verdicts
                .iter()
                .filter(|(v, _)| v.is_failing())
                .map(|(_, n)| n)
                .sum();
            BackendShare {
                backend,
                verdicts,
                total,
                failing,
            }
        })
        .collect();
    shares.sort_by(|a, b| b.failing.cmp(&a.failing).then(a.backend.cmp(&b.backend)));
    let total: u64 = shares.iter().map(|b| b.total).sum();
    let failing: u64 = shares.iter().map(|b| b.failing).sum();
    let parts: Vec<String> = shares
        .iter()
        .map(|b| {
            let (verdict, n) = b
                .verdicts
                .iter()
                .max_by_key(|(v, n)| (**n, v.is_failing()))
                .map_or(("none", 0), |(v, n)| (v.name(), *n));
            format!("{} {verdict} {n} of {total}", b.backend)
        })
        .collect();
    ServiceRecord {
        time,
        service,
        window_s: window.as_secs(),
        summary: format!("{service} -> {}", parts.join(", ")),
        backends: shares,
        total,
        failing,
        failing_share: if total == 0 {
            0.0
        } else {
            failing as f64 / total as f64
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("test address")
    }

    #[test]
    fn names_the_dead_backend_and_its_share() {
        let mut view = ServiceView::new(Duration::from_mins(1));
        let t = Instant::now();
        let (svc, dead, live) = (
            addr("10.96.0.10:80"),
            addr("10.244.1.30:8080"),
            addr("10.244.1.11:8080"),
        );
        for _ in 0..48 {
            view.record(t, svc, dead, VerdictKind::Unanswered);
        }
        view.established(t, svc, live, 52);
        let records = view.records(t, Timestamp::default());
        assert_eq!(records.len(), 1);
        let r = &records[0];
        assert_eq!((r.total, r.failing), (100, 48));
        assert!((r.failing_share - 0.48).abs() < 1e-9);
        assert_eq!(
            r.summary,
            "10.96.0.10:80 -> 10.244.1.30:8080 unanswered 48 of 100, 10.244.1.11:8080 established 52 of 100"
        );
        assert_eq!(r.backends[0].backend, dead, "worst backend first");
    }

    #[test]
    fn outcomes_leave_the_window() {
        let mut view = ServiceView::new(Duration::from_secs(10));
        let t = Instant::now();
        view.record(
            t,
            addr("10.96.0.10:80"),
            addr("10.0.0.1:80"),
            VerdictKind::Refused,
        );
        assert_eq!(
            view.records(t + Duration::from_secs(5), Timestamp::default())
                .len(),
            1
        );
        assert!(
            view.records(t + Duration::from_secs(11), Timestamp::default())
                .is_empty()
        );
    }
}
