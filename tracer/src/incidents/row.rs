//! One row of the ranked table: a source workload, a destination and a verdict, with the flows
//! that reached it.
use std::{
    net::SocketAddr,
    time::{Duration, SystemTime},
};

use serde::Serialize;

use super::spread::Spread;
use crate::{
    clock::Timestamp,
    record::{ConnectRecord, HealthyRecord},
    verdict::{Cause, VerdictKind},
};

/// Rows that changed less than this long ago are marked (`+` new, `*` changed).
pub const MARK_FOR: Duration = Duration::from_secs(5);
/// Rows not seen for this long fade and sink below the active ones (they do not vanish).
pub const FADE_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct RowKey {
    /// The source workload: its name and Kubernetes namespace when cluster state names the pod
    /// (`workload`), else the process name and its network namespace.
    pub comm: String,
    pub netns: String,
    pub workload: bool,
    /// What the application dialled, when a load balancer rewrote it (the Service).
    pub service: Option<SocketAddr>,
    /// The socket destination (the backend behind a Service).
    pub backend: SocketAddr,
    pub verdict: VerdictKind,
    pub cause: Option<Cause>,
}

impl RowKey {
    pub fn of_connect(c: &ConnectRecord) -> RowKey {
        let (comm, netns, workload) = source_of(&c.comm, &c.netns, &c.identity);
        RowKey {
            comm,
            netns,
            workload,
            // kube-proxy flows name both from conntrack; socket-LB flows carry the dialled address.
            service: c.service.or(c.dialed.filter(|d| *d != c.dst)),
            backend: c.backend.unwrap_or(c.dst),
            verdict: c.verdict.kind(),
            cause: c.verdict.cause(),
        }
    }

    pub fn of_healthy(h: &HealthyRecord) -> RowKey {
        let (comm, netns, workload) = source_of(&h.comm, &h.netns, &h.identity);
        RowKey {
            comm,
            netns,
            workload,
            service: None,
            backend: h.dst,
            verdict: h.verdict,
            cause: None,
        }
    }

    /// `refused rst`, `abandoned`.
    pub fn verdict_label(&self) -> String {
        match &self.cause {
            Some(cause) => format!("{} {cause}", self.verdict),
            None => self.verdict.name().to_string(),
        }
    }

    /// `app/frontend` (namespace/workload, as kubectl says it) or `curl/cni-3f2a` (process/netns).
    pub fn source_label(&self) -> String {
        if self.workload {
            format!("{}/{}", self.netns, self.comm)
        } else {
            format!("{}/{}", self.comm, self.netns)
        }
    }
}

/// The source workload of a record: the pod's owner (a Deployment's pods share one row) or the pod,
/// in its namespace, when cluster state names it; else the process and its network namespace.
fn source_of(comm: &str, netns: &str, id: &crate::identity::Identity) -> (String, String, bool) {
    let owner = id
        .src_owner
        .as_deref()
        .map(|o| o.rsplit('/').next().unwrap_or(o));
    match (id.src_namespace.as_deref(), owner.or(id.src_pod.as_deref())) {
        (Some(namespace), Some(name)) => (name.to_string(), namespace.to_string(), true),
        _ => (comm.to_string(), netns.to_string(), false),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub key: RowKey,
    /// Flows that reached this verdict (for `established`: connects counted by the kernel).
    pub count: u64,
    /// Flows in this row still open (only `unanswered` rows have any).
    pub live: u64,
    /// SYNs of the typical ended flow (the most common count), or of the latest flow while none
    /// has ended.
    pub syns: u16,
    /// Time in `SYN_SENT` of the latest flow, or the mean for healthy connects.
    pub syn_sent_ms: f64,
    /// SYNs and times of the ended flows: what is typical of them, and their range.
    pub spread: Spread,
    #[serde(serialize_with = "serialize_time")]
    pub first_seen: SystemTime,
    #[serde(serialize_with = "serialize_time")]
    pub last_seen: SystemTime,
    /// The sentence of the latest ended flow with the typical SYN count, or of the latest flow
    /// while none has ended.
    pub explanation: String,
    /// The records of the latest flow, live updates then its end.
    pub timeline: Vec<ConnectRecord>,
    #[serde(skip)]
    pub(super) changed_at: SystemTime,
}

/// Serde writes `SystemTime` as seconds and nanos; a person copying a row wants RFC 3339.
fn serialize_time<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&Timestamp(*t))
}

/// How a row reads at a glance right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    New,
    Changed,
    Steady,
    /// Resolved: no live flow left and nothing new for `FADE_AFTER`, or an `unanswered` row whose
    /// flows all ended.
    Faded,
}

impl Row {
    /// A row first seen at `t`, with no flow counted yet.
    pub fn new(key: RowKey, t: SystemTime) -> Row {
        Row {
            key,
            count: 0,
            live: 0,
            syns: 0,
            syn_sent_ms: 0.0,
            spread: Spread::default(),
            first_seen: t,
            last_seen: t,
            explanation: String::new(),
            timeline: Vec::new(),
            changed_at: t,
        }
    }

    pub fn mark(&self, now: SystemTime) -> Mark {
        let since = |t: SystemTime| now.duration_since(t).unwrap_or_default();
        let resolved_live = self.key.verdict == VerdictKind::Unanswered && self.live == 0;
        if resolved_live || since(self.last_seen) >= FADE_AFTER {
            Mark::Faded
        } else if since(self.first_seen) < MARK_FOR {
            Mark::New
        } else if since(self.changed_at) < MARK_FOR {
            Mark::Changed
        } else {
            Mark::Steady
        }
    }

    /// Age of the problem: since this row was first seen.
    pub fn age(&self, now: SystemTime) -> Duration {
        now.duration_since(self.first_seen).unwrap_or_default()
    }

    /// The count a person compares: live flows for `unanswered`, all flows otherwise.
    pub fn shown_count(&self) -> u64 {
        if self.key.verdict == VerdictKind::Unanswered {
            self.live
        } else {
            self.count
        }
    }
}
