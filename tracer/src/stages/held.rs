//! Records waiting for a pod lookup: a failing connect or DNS query to a remote pod is named once
//! the API server has said which pod that is (`identity/pod_lookup.rs`), for at most [`WAIT`];
//! then it goes out with what is known, counted in `stats.cluster_api.lookups.late`. The record is
//! built again when it goes, from what was kept of it (a built record cannot be re-named), in the
//! order records came; records that need no lookup do not wait behind them.
use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

use crate::{
    identity::pod_lookup::LookupKey,
    record::Record,
    stages::{
        dns::{
            ServiceServer,
            queries::{Outcome, Query},
        },
        enrich::{Enricher, ServiceBackend},
        flows::Flow,
    },
};

/// The longest a record waits for its lookups (the API server answers from its cache in
/// milliseconds; this is for a slow or failing one).
pub const WAIT: Duration = Duration::from_secs(1);

/// What a held record is built from.
pub enum Pending {
    Connect {
        flow: Box<Flow>,
        via: Option<ServiceBackend>,
    },
    Dns {
        query: Box<Query>,
        outcome: Outcome,
        at_ns: u64,
        via: Option<ServiceServer>,
    },
}

struct Held {
    pending: Pending,
    waits_for: Vec<LookupKey>,
    until: Instant,
}

#[derive(Default)]
pub struct HeldRecords {
    queue: VecDeque<Held>,
}

impl HeldRecords {
    pub fn hold(&mut self, pending: Pending, waits_for: Vec<LookupKey>, now: Instant) {
        self.queue.push_back(Held {
            pending,
            waits_for,
            until: now + WAIT,
        });
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The records whose lookups are answered or whose wait is over (all of them with `all`), in
    /// the order they came.
    pub fn release(&mut self, enricher: &mut Enricher, now: Instant, all: bool) -> Vec<Record> {
        let mut out = Vec::new();
        while let Some(front) = self.queue.front() {
            let answered = enricher.identities.answered(&front.waits_for);
            if !answered && !all && now < front.until {
                break;
            }
            let Some(held) = self.queue.pop_front() else {
                break;
            };
            if !answered {
                enricher.identities.count_late();
            }
            out.push(build(held.pending, enricher));
            // Asked again while building (a lookup that answered with a reference to another):
            // not waited for twice.
            let _ = enricher.identities.take_waiting();
        }
        out
    }
}

fn build(pending: Pending, enricher: &mut Enricher) -> Record {
    match pending {
        Pending::Connect { flow, via } => Record::Connect(enricher.connect_record(&flow, via)),
        Pending::Dns {
            query,
            outcome,
            at_ns,
            via,
        } => Record::Dns(enricher.dns_record(&query, outcome, at_ns, via)),
    }
}
