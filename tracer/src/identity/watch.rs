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
    dirty: bool,
    health: [Health; 4],
    started: Instant,
}

type Shared = Arc<Mutex<Inner>>;

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
    inner.state = Arc::new(ClusterState::from_items(items));
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
                        inner.stores[kind].remove(&key_of(&obj));
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

#[cfg(test)]
pub mod fixture;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{fixture::ApiFixture, *};

    fn pod(name: &str, ip: &str, ready: bool, rv: &str) -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "app", "uid": format!("uid-{name}"), "resourceVersion": rv},
            "spec": {"containers": [{"name": "c"}], "nodeName": "node-a"},
            "status": {"phase": "Running", "podIP": ip,
                       "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
        })
    }

    fn wait_for(live: &LiveCluster, what: &str, ok: impl Fn(&LiveView) -> bool) -> LiveView {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let view = live.view();
            if ok(&view) {
                return view;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; pods: {:?}",
                names(&view)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn names(view: &LiveView) -> Vec<(String, bool)> {
        let mut v: Vec<_> = view
            .state
            .pods()
            .iter()
            .map(|p| (p.name.clone(), p.ready))
            .collect();
        v.sort();
        v
    }

    /// Against the fixture API server (see `fixture.rs`: a scripted stand-in speaking the API's JSON,
    /// not a real API server): list, watch events, a bookmark that moves the resume point, a `410 Gone`
    /// in the stream and one on the watch request, each forcing a relist; then the server goes away
    /// and the names are kept but marked stale.
    #[test]
    fn follows_list_watch_bookmarks_and_relists_after_410_gone() {
        let a = |ready, rv| pod("web-a", "10.244.1.10", ready, rv);
        let fx = ApiFixture::start();
        let pods = "/api/v1/pods";
        fx.list(
            pods,
            "100",
            vec![a(true, "90"), pod("web-b", "10.244.1.11", true, "95")],
        );
        fx.watch(pods, vec![
            json!({"type": "ADDED", "object": pod("web-c", "10.244.1.12", true, "101")}),
            json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "150"}}}),
        ], false);
        fx.watch(pods, vec![
            json!({"type": "MODIFIED", "object": a(false, "160")}),
            json!({"type": "DELETED", "object": pod("web-b", "10.244.1.11", true, "170")}),
            json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
                   "status": "Failure", "message": "too old resource version: 170 (180)", "reason": "Expired", "code": 410}}),
        ], false);
        // web-c was deleted while we were not watching: only a relist can tell.
        fx.list(
            pods,
            "200",
            vec![a(false, "160"), pod("web-d", "10.244.1.13", true, "190")],
        );
        fx.gone(pods);
        fx.list(
            pods,
            "300",
            vec![a(true, "250"), pod("web-d", "10.244.1.13", true, "190")],
        );
        // Then the default: watches that stay open until the server stops.

        let live = LiveCluster::start(Config::new(fx.url().parse().expect("url"))).expect("client");
        let view = wait_for(&live, "the state after the second relist", |v| {
            !v.stale && names(v) == [("web-a".to_string(), true), ("web-d".to_string(), true)]
        });
        assert_eq!(view.age, Duration::ZERO);
        assert_eq!(
            view.state
                .pod_by_ip("10.244.1.13".parse().expect("ip"))
                .map(|p| p.name.as_str()),
            Some("web-d")
        );

        let log = fx.requests(pods);
        let expected = [
            "list limit=500",
            "watch rv=100",
            "watch rv=150",   // the bookmark moved the resume point
            "list limit=500", // ERROR 410 in the stream
            "watch rv=200",
            "list limit=500", // HTTP 410 on the watch request
            "watch rv=300",
        ];
        assert_eq!(
            &log[..expected.len()],
            expected,
            "requests for pods: {log:?}"
        );
        assert!(
            fx.requests("/api/v1/nodes")
                .starts_with(&["list limit=500".to_string()])
        );
        assert!(
            fx.requests("/apis/discovery.k8s.io/v1/endpointslices")
                .starts_with(&["list limit=500".to_string()])
        );

        // The API goes away: tracing goes on with the last names, marked stale.
        fx.stop();
        let view = wait_for(&live, "stale names", |v| v.stale);
        assert_eq!(names(&view).len(), 2, "the last snapshot stays in use");
    }

    /// Regression: a record once said "in sync" and named nothing, between a list and its publication.
    #[test]
    fn names_are_current_only_once_the_list_is_in_the_snapshot() {
        let fx = ApiFixture::start();
        fx.list(
            "/api/v1/pods",
            "5",
            vec![pod("web-a", "10.244.1.10", true, "5")],
        );
        let live = LiveCluster::start(Config::new(fx.url().parse().expect("url"))).expect("client");
        let deadline = Instant::now() + Duration::from_secs(10);
        while live.view().stale {
            assert!(Instant::now() < deadline, "never in sync");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            names(&live.view()).len(),
            1,
            "in sync means the list is in the snapshot"
        );
    }

    #[test]
    fn an_api_that_never_answers_gives_stale_empty_state_not_an_error() {
        // A port nothing listens on (bound, then closed).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        let live = LiveCluster::start(Config::new(
            format!("http://127.0.0.1:{port}").parse().expect("url"),
        ))
        .expect("client");
        std::thread::sleep(Duration::from_millis(300));
        let view = live.view();
        assert!(view.stale);
        assert!(view.state.pods().is_empty());
        assert!(view.age >= Duration::from_millis(250), "{:?}", view.age);
    }
}
