//! What the four list+watch loops (`reflector.rs`) and the publisher (`watch.rs`) share: each
//! kind's store of objects, its health (listed, failing since, what was said), the requests made,
//! and the latest published snapshot; and the operations on them, each under the one lock.
use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use super::{
    api_failure::Failure,
    cluster::{ClusterState, Item},
};

/// The kinds followed, in the order of [`Inner::stores`].
pub const KINDS: [&str; 4] = ["pods", "services", "endpointslices", "nodes"];
/// Where the client's messages go (stderr; tests collect them).
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

/// What the tracer reads: the latest snapshot and how fresh it is.
#[derive(Clone)]
pub struct LiveView {
    pub state: Arc<ClusterState>,
    /// Some kind was never listed, or is not followed right now (its watch is failing).
    pub stale: bool,
    /// Since when the names may be out of date (zero when in sync).
    pub age: Duration,
}

/// Requests made to the API server, per kind in the order of [`KINDS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApiRequests {
    /// List requests (each page one).
    pub lists: [u64; 4],
    pub watches: [u64; 4],
    /// Requests that failed or streams that broke.
    pub failures: [u64; 4],
}

#[derive(Default)]
pub(super) struct Health {
    /// A list of this kind is in the published snapshot.
    listed: bool,
    /// A list arrived and is not published yet: not in sync until it is (else a record could say
    /// "current" and name nothing, in the moment between the two).
    list_pending: bool,
    /// Since the first failure not yet followed by a healthy watch.
    failing_since: Option<Instant>,
    /// The cause last said (forgotten once the watch has been healthy for long: a later failure
    /// is news again).
    said: Option<Failure>,
    /// "following again" has been said since `said`.
    recovery_said: bool,
}

/// An object in a store, with the `resourceVersion` it was read at: a relist keeps the objects
/// that did not change (no second copy of the cluster while it runs).
pub(super) struct Stored {
    pub(super) resource_version: Version,
    pub(super) item: Item,
    /// In the list under way (a relist applies its pages to the store in place, then removes what
    /// it did not see).
    pub(super) listed: bool,
}

/// A `resourceVersion`, which the API says to compare only for equality: kept as a 64-bit hash
/// (FNV-1a), not a string per object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Version(u64);

impl Version {
    pub(super) fn of(resource_version: &str) -> Version {
        let mut hash = 0xcbf2_9ce4_8422_2325_u64;
        for byte in resource_version.bytes() {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
        Version(hash)
    }
}

pub(super) struct Inner {
    state: Arc<ClusterState>,
    stores: [HashMap<Box<str>, Stored>; 4],
    /// Nodes deleted since the start, newest last (at most `DEPARTED_NODES_KEPT`).
    departed: Vec<Arc<super::cluster::Node>>,
    dirty: bool,
    health: [Health; 4],
    started: Instant,
    pub(super) requests: ApiRequests,
    /// How long the last snapshot took to build.
    last_build: Duration,
}

impl Inner {
    pub(super) fn new() -> Inner {
        Inner {
            state: Arc::new(ClusterState::default()),
            stores: Default::default(),
            departed: Vec::new(),
            dirty: false,
            health: Default::default(),
            started: Instant::now(),
            requests: ApiRequests::default(),
            last_build: Duration::ZERO,
        }
    }
}

pub(super) type Shared = Arc<Mutex<Inner>>;

/// Deleted nodes remembered: their addresses may still be where a connection's NAT state was.
const DEPARTED_NODES_KEPT: usize = 256;

pub(super) fn lock(shared: &Shared) -> MutexGuard<'_, Inner> {
    // A panic on the watch thread must not take identities down with it: use what is there.
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The latest snapshot, stale if some kind was never listed or is failing, with its age.
pub(super) fn view(shared: &Shared) -> LiveView {
    let inner = lock(shared);
    let now = Instant::now();
    let mut age = Duration::ZERO;
    let mut stale = false;
    for h in &inner.health {
        let since = match (h.listed, h.failing_since) {
            (false, _) => Some(inner.started),
            (true, failing) => failing,
        };
        if let Some(since) = since {
            stale = true;
            age = age.max(now.saturating_duration_since(since));
        }
    }
    LiveView {
        state: Arc::clone(&inner.state),
        stale,
        age,
    }
}

/// Builds and publishes a snapshot if anything changed; how long the build took.
pub(super) fn publish_if_dirty(shared: &Shared, say: &Say) -> Duration {
    let started = Instant::now();
    let mut inner = lock(shared);
    if !inner.dirty {
        return inner.last_build;
    }
    inner.dirty = false;
    let items = inner
        .stores
        .iter()
        .flat_map(|s| s.values().map(|stored| stored.item.clone()));
    let state = ClusterState::from_items(items).with_departed_nodes(inner.departed.clone());
    let old = std::mem::replace(&mut inner.state, Arc::new(state));
    let mut listed = false;
    for (kind, health) in inner.health.iter_mut().enumerate() {
        if std::mem::take(&mut health.list_pending) {
            listed = true;
            health.listed = true;
            // After a failure, current once a watch has been healthy too (`mark_current`).
            if health.failing_since.is_none() {
                say_recovered(health, say, kind);
            }
        }
    }
    inner.last_build = started.elapsed();
    let built = inner.last_build;
    drop(inner);
    drop(old);
    if listed {
        release_free_memory();
    }
    built
}

/// Hands back to the system the memory a list left free: glibc keeps the freed pages of a
/// thread's arena (the pages of a list, the objects a relist replaced), musl returns them itself.
fn release_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists; no pointer is handed over.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A list of `kind` begins: nothing in the store is seen yet.
pub(super) fn list_started(shared: &Shared, kind: usize) {
    for stored in lock(shared).stores[kind].values_mut() {
        stored.listed = false;
    }
}

/// The list has the object at `key` at `resource_version`: true (and it is seen) if the store
/// holds it at that version already, so it need not be converted again.
pub(super) fn list_unchanged(
    shared: &Shared,
    kind: usize,
    key: &str,
    resource_version: Version,
) -> bool {
    let mut inner = lock(shared);
    match inner.stores[kind].get_mut(key) {
        Some(stored) if stored.resource_version == resource_version => {
            stored.listed = true;
            true
        }
        _ => false,
    }
}

/// The list has an object the store lacks or holds at another version: stored now (and seen),
/// published when the list ends.
pub(super) fn list_upsert(
    shared: &Shared,
    kind: usize,
    key: String,
    resource_version: Version,
    item: Item,
) {
    let mut inner = lock(shared);
    let stored = Stored {
        resource_version,
        item,
        listed: true,
    };
    match inner.stores[kind].get_mut(key.as_str()) {
        Some(old) => *old = stored,
        None => {
            inner.stores[kind].insert(key.into_boxed_str(), stored);
        }
    }
}

/// The last page of a list of `kind` arrived: what it did not have leaves the store (not as a
/// deletion: a node gone is not remembered as departed, as no watch saw it go), and the store is
/// published at the next tick.
pub(super) fn list_finished(shared: &Shared, kind: usize) {
    let mut inner = lock(shared);
    inner.stores[kind].retain(|_, stored| stored.listed);
    inner.health[kind].list_pending = true;
    inner.dirty = true;
}

pub(super) fn store_upsert(shared: &Shared, kind: usize, key: String, stored: Stored) {
    let mut inner = lock(shared);
    inner.stores[kind].insert(key.into_boxed_str(), stored);
    inner.dirty = true;
}

pub(super) fn store_delete(shared: &Shared, kind: usize, key: &str) {
    let mut inner = lock(shared);
    if let Some(Stored {
        item: Item::Node(node),
        ..
    }) = inner.stores[kind].remove(key)
    {
        if inner.departed.len() == DEPARTED_NODES_KEPT {
            inner.departed.remove(0);
        }
        inner.departed.push(node);
    }
    inner.dirty = true;
}

pub(super) fn count_request(shared: &Shared, kind: usize, list: bool) {
    let mut inner = lock(shared);
    if list {
        inner.requests.lists[kind] += 1;
    } else {
        inner.requests.watches[kind] += 1;
    }
}

/// A request of `kind` failed: names are stale from now until a watch has been healthy for a
/// while; the cause is said if it is not the one said last.
pub(super) fn mark_failed(
    shared: &Shared,
    say: &Say,
    kind: usize,
    what: &str,
    failure: Failure,
    retry_in: Duration,
) {
    let mut inner = lock(shared);
    inner.requests.failures[kind] += 1;
    let health = &mut inner.health[kind];
    if health.failing_since.is_none() {
        health.failing_since = Some(Instant::now());
    }
    if health.said.as_ref().is_some_and(|s| s.same_cause(&failure)) {
        return;
    }
    say(&format!(
        "tracer: warning: Kubernetes API: cannot {what} {}: {failure}; tracing goes on, pod and \
         Service names are marked stale until it answers (next try in {:.1} s; waits double up \
         to {} s, each plus up to as much again at random)",
        KINDS[kind],
        retry_in.as_secs_f64(),
        super::backoff::CAP.as_secs()
    ));
    health.said = Some(failure);
    health.recovery_said = false;
}

/// The watch of `kind` has been healthy for a while: names are current again (once the list is
/// published).
pub(super) fn mark_current(shared: &Shared, say: &Say, kind: usize) {
    let mut inner = lock(shared);
    let health = &mut inner.health[kind];
    if health.failing_since.take().is_some() && !health.list_pending {
        say_recovered(health, say, kind);
    }
}

/// "Following again", once after the cause that was said.
fn say_recovered(health: &mut Health, say: &Say, kind: usize) {
    if health.said.is_some() && !health.recovery_said {
        health.recovery_said = true;
        say(&format!(
            "tracer: Kubernetes API: following {} again; names are current",
            KINDS[kind]
        ));
    }
}

/// The watch of `kind` has delivered events for long: a later failure is a new story.
pub(super) fn forget_said(shared: &Shared, kind: usize) {
    lock(shared).health[kind].said = None;
}
