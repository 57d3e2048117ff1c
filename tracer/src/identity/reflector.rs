//! The list+watch loop for one kind, after client-go's reflector: list (paginated), then watch from
//! the list's `resourceVersion`; apply `ADDED`/`MODIFIED`/`DELETED`, move the resume point on
//! `BOOKMARK`, watch again when the server ends the watch, list again on `410 Gone`. Written on
//! kube's `Api::list`/`Api::watch` instead of `kube::runtime::watcher` because the tracer must know
//! when it is *back* in sync after an outage, which that stream does not report.
//!
//! Every failure waits a step of the backoff (`backoff.rs`) before the next request, whatever it
//! was: a refused connection, an HTTP error, a `200` whose stream then breaks (a line that is not
//! JSON, an `ERROR` event), a `410` right after a fresh list, a watch that ends at once without an
//! event. So after the first seconds a broken API sees at most one request per kind per step, and
//! one list per step when lists are needed. The backoff goes back to its first step only after a
//! watch delivered events for [`RESET_AFTER`]. A kind is stale from its first failure until a
//! watch has stayed open for [`HEALTHY_AFTER`]: an API that answers 200 and breaks at once never
//! makes names look current.
use std::{fmt::Debug, time::Duration};

use futures_util::{Stream, StreamExt as _, pin_mut};
use k8s_openapi::serde::de::DeserializeOwned;
use kube::{
    Api, Resource, ResourceExt as _,
    api::{ListParams, WatchEvent, WatchParams},
};
use tokio::time::Instant;

use super::{
    api_failure::Failure,
    backoff::Backoff,
    cluster::{Item, ModelError},
    list_page::list_page,
    watch_state::{
        KINDS, Say, Shared, Stored, Version, count_request, forget_said, list_finished,
        list_started, list_unchanged, list_upsert, mark_current, mark_failed, store_delete,
        store_upsert,
    },
};

/// A watch open this long without a failure makes the kind current again.
pub const HEALTHY_AFTER: Duration = Duration::from_secs(5);
/// A watch that delivered events and stayed open this long puts the backoff back to its first
/// step.
pub const RESET_AFTER: Duration = Duration::from_mins(1);

/// What to follow for one kind.
pub struct Follow<'a> {
    /// Index in [`KINDS`].
    pub kind: usize,
    pub list: ListParams,
    pub watch: WatchParams,
    /// The API server's address, for messages.
    pub url: &'a str,
    pub say: &'a Say,
}

enum WatchEnd {
    /// The server ended the stream (its timeout); `events` delivered.
    Closed {
        events: u64,
    },
    Failed(Failure),
}

/// List, then watch, forever.
pub async fn follow<K>(api: Api<K>, f: Follow<'_>, shared: &Shared)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    Item: TryFrom<K, Error = ModelError>,
{
    let mut backoff = Backoff::from_entropy(f.kind as u64);
    'relist: loop {
        let mut resource_version = match list_all(&api, &f, shared).await {
            Ok(rv) => rv,
            Err(failure) => {
                let wait = backoff.next_wait();
                mark_failed(shared, f.say, f.kind, "list", failure, wait);
                tokio::time::sleep(wait).await;
                continue 'relist;
            }
        };
        loop {
            count_request(shared, f.kind, false);
            let opened = Instant::now();
            let end = match api.watch(&f.watch, &resource_version).await {
                Ok(stream) => {
                    consume(stream, &f, shared, &mut resource_version, &mut backoff).await
                }
                Err(e) => WatchEnd::Failed(Failure::from_kube(&e, f.url)),
            };
            let failure = match end {
                // A stream that closes at once with nothing in it, again and again, is a loop.
                WatchEnd::Closed { events: 0 } if opened.elapsed() < HEALTHY_AFTER => {
                    Failure::ShortWatch
                }
                // The server's timeout: watch again from the resume point.
                WatchEnd::Closed { .. } => continue,
                WatchEnd::Failed(failure) => failure,
            };
            let relist = failure == Failure::Expired;
            let wait = backoff.next_wait();
            mark_failed(shared, f.say, f.kind, "watch", failure, wait);
            tokio::time::sleep(wait).await;
            if relist {
                continue 'relist;
            }
        }
    }
}

/// Every page of a list, into the store; the list's `resourceVersion`. The pages update the store
/// in place, object by object as each is parsed: a relist never holds a second index of the kind,
/// nor a whole page of decoded objects, beside the model.
async fn list_all<K>(api: &Api<K>, f: &Follow<'_>, shared: &Shared) -> Result<String, Failure>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    Item: TryFrom<K, Error = ModelError>,
{
    list_started(shared, f.kind);
    let mut continue_token = None;
    loop {
        count_request(shared, f.kind, true);
        let mut params = f.list.clone();
        params.continue_token = continue_token.take();
        let page = list_page(api, &params, |obj: K| {
            let key = key_of(&obj);
            let resource_version = Version::of(&obj.resource_version().unwrap_or_default());
            // Unchanged since the last list: the object already in the store, not a copy.
            if list_unchanged(shared, f.kind, &key, resource_version) {
                return;
            }
            if let Some(item) = to_model(obj, f.kind, &key, f.say) {
                list_upsert(shared, f.kind, key, resource_version, item);
            }
        })
        .await
        .map_err(|e| Failure::from_kube(&e, f.url))?;
        continue_token = page.continue_.filter(|c| !c.is_empty());
        if continue_token.is_none() {
            list_finished(shared, f.kind);
            return Ok(page.resource_version.unwrap_or_default());
        }
    }
}

/// Applies a watch stream's events until it ends or fails.
async fn consume<K>(
    stream: impl Stream<Item = Result<WatchEvent<K>, kube::Error>>,
    f: &Follow<'_>,
    shared: &Shared,
    resource_version: &mut String,
    backoff: &mut Backoff,
) -> WatchEnd
where
    K: Resource + Clone + DeserializeOwned + Debug,
    Item: TryFrom<K, Error = ModelError>,
{
    pin_mut!(stream);
    let opened = Instant::now();
    let healthy = tokio::time::sleep_until(opened + HEALTHY_AFTER);
    let settled = tokio::time::sleep_until(opened + RESET_AFTER);
    pin_mut!(healthy, settled);
    let (mut events, mut current, mut reset) = (0_u64, false, false);
    loop {
        tokio::select! {
            event = stream.next() => {
                match event {
                    None => return WatchEnd::Closed { events },
                    Some(Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj))) => {
                        events += 1;
                        *resource_version = obj.resource_version().unwrap_or_default();
                        let key = key_of(&obj);
                        let stored_version = Version::of(resource_version);
                        if let Some(item) = to_model(obj, f.kind, &key, f.say) {
                            let stored = Stored {
                                resource_version: stored_version,
                                item,
                                listed: false,
                            };
                            store_upsert(shared, f.kind, key, stored);
                        }
                    }
                    Some(Ok(WatchEvent::Deleted(obj))) => {
                        events += 1;
                        *resource_version = obj.resource_version().unwrap_or_default();
                        store_delete(shared, f.kind, &key_of(&obj));
                    }
                    Some(Ok(WatchEvent::Bookmark(mark))) => {
                        events += 1;
                        *resource_version = mark.metadata.resource_version;
                    }
                    Some(Ok(WatchEvent::Error(status))) if status.code == 410 => {
                        return WatchEnd::Failed(Failure::Expired);
                    }
                    Some(Ok(WatchEvent::Error(status))) => {
                        return WatchEnd::Failed(Failure::ErrorEvent {
                            code: status.code,
                            message: status.message.clone(),
                        });
                    }
                    Some(Err(e)) => return WatchEnd::Failed(Failure::from_kube(&e, f.url)),
                }
            }
            () = &mut healthy, if !current => {
                current = true;
                mark_current(shared, f.say, f.kind);
            }
            () = &mut settled, if !reset => {
                reset = true;
            }
        }
        if reset && events > 0 && backoff.failures() > 0 {
            backoff.reset();
            forget_said(shared, f.kind);
        }
    }
}

/// `namespace/name`, the key of the stores.
fn key_of<K: Resource>(obj: &K) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// The object in the model; `None` for one the model cannot hold (said).
fn to_model<K>(obj: K, kind: usize, key: &str, say: &Say) -> Option<Item>
where
    Item: TryFrom<K, Error = ModelError>,
{
    match Item::try_from(obj) {
        Ok(item) => Some(item),
        Err(e) => {
            say(&format!(
                "tracer: warning: Kubernetes API: skipping {} {key}: {e}",
                KINDS[kind]
            ));
            None
        }
    }
}
