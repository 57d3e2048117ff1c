//! Live cluster state: list and watch pods, Services, EndpointSlices and nodes through the
//! Kubernetes API, into the same [`ClusterState`] model a `--cluster-state` file gives.
//!
//! One thread with its own small event loop follows the four kinds, so a slow API server or a big
//! relist never delays the ring-buffer consumer; the tracer's loop only takes the latest snapshot.
//!
//! The loop per kind is the API's own contract (client-go's reflector): list (paginated), then watch
//! from the list's `resourceVersion`; apply `ADDED`/`MODIFIED`/`DELETED`, move the resume point on
//! `BOOKMARK`, watch again when the server ends the watch, list again on `410 Gone` (the resume
//! point is too old). It is written here on kube's `Api::list`/`Api::watch` instead of
//! `kube::runtime::watcher` because the tracer must know when it is *back* in sync after an outage
//! (a successful re-watch, a bookmark), which that stream does not report: it only reports errors.
//!
//! When the API is unreachable the last snapshot stays in use and is marked stale (with its age),
//! and tracing goes on.
use std::{
    collections::HashMap,
    fmt::Debug,
    sync::{Arc, Mutex, MutexGuard},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use futures_util::{StreamExt as _, pin_mut};
use k8s_openapi::{
    api::{
        core::v1::{Node, Pod, Service},
        discovery::v1::EndpointSlice,
    },
    serde::de::DeserializeOwned,
};
use kube::{
    Api, Client, Config, Resource, ResourceExt as _,
    api::{ListParams, WatchEvent, WatchParams},
};

use super::cluster::{ClusterState, Item, ModelError};

/// The kinds followed, in the order of [`Inner::stores`].
const KINDS: [&str; 4] = ["pods", "services", "endpointslices", "nodes"];
/// Changes are published at most this often (a rollout changes many objects at once).
const PUBLISH_EVERY: Duration = Duration::from_millis(200);
const PAGE_SIZE: u32 = 500;
/// Server-side end of a watch; the client then watches again from its resume point.
const WATCH_TIMEOUT_S: u32 = 290;
const BACKOFF_MAX: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum WatchStartError {
    #[error("cannot make a Kubernetes client: {0}")]
    Client(kube::Error),
    #[error("cannot start the Kubernetes watch thread: {0}")]
    Thread(std::io::Error),
}

/// What the tracer reads: the latest snapshot and how fresh it is.
#[derive(Clone)]
pub struct LiveView {
    pub state: Arc<ClusterState>,
    /// Some kind was never listed, or its watch is failing.
    pub stale: bool,
    /// Since when the names may be out of date (zero when in sync).
    pub age: Duration,
}

#[derive(Default)]
struct Health {
    /// A list of this kind is in the published snapshot.
    listed: bool,
    /// A list arrived and is not published yet: not in sync until it is (else a record could say
    /// "current" and name nothing, in the moment between the two).
    list_pending: bool,
    failing_since: Option<Instant>,
}

struct Inner {
    state: Arc<ClusterState>,
    stores: [HashMap<String, Item>; 4],
    /// Nodes deleted since the start, newest last (at most `DEPARTED_NODES_KEPT`).
    departed: Vec<super::cluster::Node>,
    dirty: bool,
    health: [Health; 4],
    started: Instant,
}

type Shared = Arc<Mutex<Inner>>;

/// Deleted nodes remembered: their addresses may still be where a connection's NAT state was.
const DEPARTED_NODES_KEPT: usize = 256;

fn lock(shared: &Shared) -> MutexGuard<'_, Inner> {
    // A panic on the watch thread must not take identities down with it: use what is there.
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running list+watch of the cluster. Dropping it stops the thread.
pub struct LiveCluster {
    shared: Shared,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl LiveCluster {
    /// Starts following the cluster `config` points at. Fails only if no client can be made from
    /// the config; an unreachable API is not an error (the view is stale until it answers).
    pub fn start(config: Config) -> Result<LiveCluster, WatchStartError> {
        let shared: Shared = Arc::new(Mutex::new(Inner {
            state: Arc::new(ClusterState::default()),
            stores: Default::default(),
            departed: Vec::new(),
            dirty: false,
            health: Default::default(),
            started: Instant::now(),
        }));
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("k8s-watch".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(kube::Error::Service(Box::new(e))));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let client = match Client::try_from(config) {
                        Ok(c) => {
                            let _ = ready_tx.send(Ok(()));
                            c
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    tokio::select! {
                        _ = stop_rx => {}
                        () = follow_all(client, thread_shared) => {}
                    }
                });
            })
            .map_err(WatchStartError::Thread)?;
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(WatchStartError::Client(e)),
            Err(_) => {
                return Err(WatchStartError::Client(kube::Error::Service(
                    "the watch thread ended before making a client".into(),
                )));
            }
        }
        Ok(LiveCluster {
            shared,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    pub fn view(&self) -> LiveView {
        let inner = lock(&self.shared);
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
}

impl Drop for LiveCluster {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn follow_all(client: Client, shared: Shared) {
    let publish = async {
        let mut tick = tokio::time::interval(PUBLISH_EVERY);
        loop {
            tick.tick().await;
            publish_if_dirty(&shared);
        }
    };
    tokio::join!(
        follow::<Pod>(Api::all(client.clone()), 0, &shared),
        follow::<Service>(Api::all(client.clone()), 1, &shared),
        follow::<EndpointSlice>(Api::all(client.clone()), 2, &shared),
        follow::<Node>(Api::all(client), 3, &shared),
        publish,
    );
}

fn publish_if_dirty(shared: &Shared) {
    let mut inner = lock(shared);
    if !inner.dirty {
        return;
    }
    inner.dirty = false;
    let items: Vec<Item> = inner
        .stores
        .iter()
        .flat_map(|s| s.values().cloned())
        .collect();
    inner.state =
        Arc::new(ClusterState::from_items(items).with_departed_nodes(inner.departed.clone()));
    for (kind, health) in inner.health.iter_mut().enumerate() {
        if std::mem::take(&mut health.list_pending) {
            health.listed = true;
            if health.failing_since.take().is_some() {
                eprintln!(
                    "tracer: Kubernetes API: following {} again; names are current",
                    KINDS[kind]
                );
            }
        }
    }
}

/// `namespace/name` and the object in the model; `None` for an object the model cannot hold
/// (reported).
fn to_item<K>(obj: K, kind: usize) -> Option<(String, Item)>
where
    K: Resource,
    Item: TryFrom<K, Error = ModelError>,
{
    let key = key_of(&obj);
    match Item::try_from(obj) {
        Ok(item) => Some((key, item)),
        Err(e) => {
            eprintln!(
                "tracer: warning: Kubernetes API: skipping {} {key}: {e}",
                KINDS[kind]
            );
            None
        }
    }
}

fn key_of<K: Resource>(obj: &K) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

fn mark_ok(shared: &Shared, kind: usize) {
    let mut inner = lock(shared);
    if inner.health[kind].list_pending {
        return; // in sync once the list is published
    }
    if inner.health[kind].failing_since.take().is_some() {
        eprintln!(
            "tracer: Kubernetes API: following {} again; names are current",
            KINDS[kind]
        );
    }
}

fn mark_failed(shared: &Shared, kind: usize, what: &str, error: &dyn std::fmt::Display) {
    let mut inner = lock(shared);
    if inner.health[kind].failing_since.is_none() {
        inner.health[kind].failing_since = Some(Instant::now());
        eprintln!(
            "tracer: warning: Kubernetes API: cannot {what} {}: {error}; tracing goes on, pod and \
             Service names are marked stale until it answers",
            KINDS[kind]
        );
    }
}

fn is_gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 410)
}

struct Backoff(Duration);

impl Backoff {
    fn reset(&mut self) {
        self.0 = Duration::from_millis(500);
    }

    async fn wait(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(BACKOFF_MAX);
    }
}

/// List, then watch, forever: the reflector loop for one kind.
async fn follow<K>(api: Api<K>, kind: usize, shared: &Shared)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    Item: TryFrom<K, Error = ModelError>,
{
    let mut backoff = Backoff(Duration::ZERO);
    backoff.reset();
    'relist: loop {
        let mut items = HashMap::new();
        let mut continue_token = None;
        let mut resource_version = loop {
            let params = ListParams {
                limit: Some(PAGE_SIZE),
                continue_token: continue_token.take(),
                ..ListParams::default()
            };
            match api.list(&params).await {
                Ok(list) => {
                    items.extend(list.items.into_iter().filter_map(|o| to_item(o, kind)));
                    continue_token = list.metadata.continue_.filter(|c| !c.is_empty());
                    if continue_token.is_none() {
                        break list.metadata.resource_version.unwrap_or_default();
                    }
                }
                Err(e) => {
                    mark_failed(shared, kind, "list", &e);
                    backoff.wait().await;
                    continue 'relist;
                }
            }
        };
        {
            let mut inner = lock(shared);
            inner.stores[kind] = items;
            inner.health[kind].list_pending = true;
            inner.dirty = true;
        }
        backoff.reset();
        loop {
            let params = WatchParams::default().timeout(WATCH_TIMEOUT_S);
            let stream = match api.watch(&params, &resource_version).await {
                Ok(stream) => stream,
                Err(e) if is_gone(&e) => continue 'relist,
                Err(e) => {
                    mark_failed(shared, kind, "watch", &e);
                    backoff.wait().await;
                    continue;
                }
            };
            mark_ok(shared, kind);
            let started = Instant::now();
            let mut events = 0_u64;
            pin_mut!(stream);
            while let Some(event) = stream.next().await {
                events += 1;
                match event {
                    Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj)) => {
                        resource_version = obj.resource_version().unwrap_or(resource_version);
                        if let Some((key, item)) = to_item(obj, kind) {
                            let mut inner = lock(shared);
                            inner.stores[kind].insert(key, item);
                            inner.dirty = true;
                        }
                    }
                    Ok(WatchEvent::Deleted(obj)) => {
                        resource_version = obj.resource_version().unwrap_or(resource_version);
                        let mut inner = lock(shared);
                        if let Some(Item::Node(node)) = inner.stores[kind].remove(&key_of(&obj)) {
                            if inner.departed.len() == DEPARTED_NODES_KEPT {
                                inner.departed.remove(0);
                            }
                            inner.departed.push(node);
                        }
                        inner.dirty = true;
                    }
                    Ok(WatchEvent::Bookmark(mark)) => {
                        resource_version = mark.metadata.resource_version;
                        mark_ok(shared, kind);
                    }
                    // The resume point is older than the server keeps: list everything again.
                    Ok(WatchEvent::Error(status)) if status.code == 410 => continue 'relist,
                    Ok(WatchEvent::Error(status)) => {
                        mark_failed(shared, kind, "watch", &status);
                        break;
                    }
                    Err(e) => {
                        mark_failed(shared, kind, "watch", &e);
                        break;
                    }
                }
            }
            // The server ended the watch (its timeout, or it went away): watch again from the resume
            // point, without spinning if it keeps closing at once.
            if events == 0 && started.elapsed() < Duration::from_secs(1) {
                backoff.wait().await;
            }
        }
    }
}
