//! Live cluster state: list and watch this node's pods and the cluster's Services, EndpointSlices
//! and nodes through the Kubernetes API, into the same [`ClusterState`] model a `--cluster-state`
//! file gives; pods elsewhere are looked up on demand (`pod_lookup.rs`) for the records that need
//! them.
//!
//! One thread with its own small event loop follows the four kinds and answers the lookups, so a
//! slow API server or a big relist never delays the ring-buffer consumer; the tracer's loop only
//! takes the latest snapshot. The loop per kind is in `reflector.rs`; what the loops and the
//! publisher share, in `watch_state.rs`.
//!
//! What each tracer asks of the API server (docs/deploy.md has the figures):
//! - pods: `fieldSelector=spec.nodeName=NODE`, listed from the API server's cache
//!   (`resourceVersion=0`, which the API server indexes by node, as for the kubelet), then watched;
//! - Services, EndpointSlices, nodes: every one of the cluster, listed in pages of 500, then watched;
//! - on-demand pod lookups, rate-limited and cached.
//!
//! When the API is unreachable or its watches break, the last snapshot stays in use and is marked
//! stale (with its age), tracing goes on, and each change of cause is said once on stderr.
use std::{
    sync::{Arc, Mutex},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    core::v1::{Node, Pod, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api, Client, Config,
    api::{ListParams, WatchParams},
};

pub use super::watch_state::{ApiRequests, KINDS, LiveView, Say};
use super::{
    pod_lookup::{self, PodLookups},
    reflector::{self, Follow},
    watch_state::{Inner, Shared, lock, publish_if_dirty, view},
};

const POD: usize = 0;
/// Changes are published at most this often (a rollout changes many objects at once) ...
const PUBLISH_EVERY: Duration = Duration::from_millis(200);
/// ... and at most this share of the watch thread's time goes into building snapshots: a cluster
/// of 150,000 pods takes tens of milliseconds per snapshot, and its EndpointSlices change all the
/// time.
const PUBLISH_SHARE: u32 = 20;
const PAGE_SIZE: u32 = 500;
/// Server-side end of a watch; the client then watches again from its resume point.
const WATCH_TIMEOUT_S: u32 = 290;

#[derive(Debug, thiserror::Error)]
pub enum WatchStartError {
    #[error("cannot make a Kubernetes client: {0}")]
    Client(kube::Error),
    #[error("cannot start the Kubernetes watch thread: {0}")]
    Thread(std::io::Error),
}

/// What to follow, and how to speak.
#[derive(Clone)]
pub struct LiveOptions {
    /// This node's name: only its pods are listed and watched.
    pub node_name: String,
    pub say: Say,
}

impl LiveOptions {
    /// Messages to stderr.
    pub fn new(node_name: &str) -> LiveOptions {
        LiveOptions {
            node_name: node_name.to_string(),
            say: Arc::new(|line| eprintln!("{line}")),
        }
    }
}

/// A running list+watch of the cluster. Dropping it stops the thread.
pub struct LiveCluster {
    shared: Shared,
    node: String,
    lookups: PodLookups,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl LiveCluster {
    /// Starts following the cluster `config` points at. Fails only if no client can be made from
    /// the config; an unreachable API is not an error (the view is stale until it answers).
    pub fn start(config: Config, options: LiveOptions) -> Result<LiveCluster, WatchStartError> {
        let shared: Shared = Arc::new(Mutex::new(Inner::new()));
        let (lookups, lookup_requests) = PodLookups::new();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread_shared = Arc::clone(&shared);
        let url = config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string();
        let node = options.node_name.clone();
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
                        () = follow_all(client, &url, thread_shared, &options, lookup_requests) => {}
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
            node,
            lookups,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    pub fn view(&self) -> LiveView {
        view(&self.shared)
    }

    /// The node whose pods are followed.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Requests made so far by the list+watch loops.
    pub fn requests(&self) -> ApiRequests {
        lock(&self.shared).requests
    }

    /// The on-demand pod lookups (answers are taken in by [`PodLookups::receive`]).
    pub fn lookups(&self) -> &PodLookups {
        &self.lookups
    }

    pub fn lookups_mut(&mut self) -> &mut PodLookups {
        &mut self.lookups
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

async fn follow_all(
    client: Client,
    url: &str,
    shared: Shared,
    options: &LiveOptions,
    lookups: pod_lookup::Requests,
) {
    let publish = async {
        let mut next = Instant::now();
        loop {
            tokio::time::sleep_until(next.into()).await;
            let built = publish_if_dirty(&shared, &options.say);
            next = Instant::now() + PUBLISH_EVERY.max(built * PUBLISH_SHARE);
        }
    };
    // This node's pods from the API server's cache (`resourceVersion=0`, indexed by node: no
    // read of every pod from etcd); in one answer, as the cache does not page.
    let on_node = format!("spec.nodeName={}", options.node_name);
    let pods = Follow {
        kind: POD,
        list: ListParams::default().fields(&on_node).match_any(),
        watch: WatchParams::default()
            .fields(&on_node)
            .timeout(WATCH_TIMEOUT_S),
        url,
        say: &options.say,
    };
    let cluster_wide = |kind| Follow {
        kind,
        list: ListParams::default().limit(PAGE_SIZE),
        watch: WatchParams::default().timeout(WATCH_TIMEOUT_S),
        url,
        say: &options.say,
    };
    tokio::join!(
        reflector::follow::<Pod>(Api::all(client.clone()), pods, &shared),
        reflector::follow::<Service>(Api::all(client.clone()), cluster_wide(1), &shared),
        reflector::follow::<EndpointSlice>(Api::all(client.clone()), cluster_wide(2), &shared),
        reflector::follow::<Node>(Api::all(client.clone()), cluster_wide(3), &shared),
        pod_lookup::serve(client, url, lookups),
        publish,
    );
}
