//! Pods looked up on demand: the live watch follows only this node's pods, so a failing record
//! that needs a pod elsewhere asks the API server for it, once, and the answer is kept a while.
//!
//! - [`LookupKey::PodIp`]: `GET /api/v1/pods?fieldSelector=status.podIP=ADDR`, for an address that
//!   no EndpointSlice lists (a connect sent straight to a pod's address);
//! - [`LookupKey::PodName`]: `GET /api/v1/namespaces/NS/pods/NAME`, for the pod an EndpointSlice
//!   names (is the backend a live pod?);
//! - [`LookupKey::Selected`]: `GET /api/v1/namespaces/NS/pods?labelSelector=...`, the pods a
//!   Service selects (how many of them declare the refused port).
//!
//! Every one is read from the API server's cache (`resourceVersion=0`: no read of every pod from
//! etcd), rate-limited ([`BURST`], then [`PER_SECOND`]), cached for [`KEPT_FOR`], and counted
//! (`LookupStats`, in the `stats` record). Only failing records ask (`known.rs`); a healthy connect never does. The
//! tracer's thread keeps the cache ([`PodLookups`]); the watch thread makes the requests
//! ([`serve`]), at most [`IN_FLIGHT`] at once.
use std::{
    collections::HashMap,
    net::IpAddr,
    sync::mpsc,
    time::{Duration, Instant},
};

use futures_util::{StreamExt as _, stream::FuturesUnordered};
use k8s_openapi::api::core::v1::Pod as ApiPod;
use kube::{
    Api, Client,
    api::{GetParams, ListParams},
};

use super::{api_failure::Failure, cluster::Pod};
use crate::record::LookupStats;

/// Lookups that may be made at once after a quiet spell ...
pub const BURST: f64 = 20.0;
/// ... then this many per second.
pub const PER_SECOND: f64 = 2.0;
/// An answer is used this long, then asked again when needed.
pub const KEPT_FOR: Duration = Duration::from_secs(30);
/// A failed lookup is not retried before this.
const RETRY_AFTER: Duration = Duration::from_secs(10);
/// A lookup not answered by then is given up (a hanging API).
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);
const MAX_ENTRIES: usize = 4096;
/// Lookups waiting for the watch thread; past this, a lookup is refused like a rate-limited one.
const QUEUE: usize = 64;
pub const IN_FLIGHT: usize = 4;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LookupKey {
    PodIp(IpAddr),
    PodName {
        namespace: String,
        name: String,
    },
    /// `selector`: `key=value` terms joined by commas.
    Selected {
        namespace: String,
        selector: String,
    },
}

/// What the cache says about a lookup.
#[derive(Debug, Clone, Copy)]
pub enum Lookup<'a> {
    /// The pods the API server answered (none: no such pod).
    Known(&'a [Pod]),
    Pending,
    /// Not asked, expired, failed or refused by the rate limit.
    Unavailable,
}

enum Entry {
    Pending { since: Instant },
    Known { pods: Vec<Pod>, at: Instant },
    Failed { at: Instant },
}

type Answer = (LookupKey, Result<Vec<Pod>, String>);

/// The watch thread's end: lookups to make, and where their answers go.
pub struct Requests {
    keys: tokio::sync::mpsc::Receiver<LookupKey>,
    answers: mpsc::Sender<Answer>,
}

/// The tracer thread's end: the cache, the rate limit and the counts.
pub struct PodLookups {
    cache: HashMap<LookupKey, Entry>,
    tokens: f64,
    refilled: Instant,
    keys: tokio::sync::mpsc::Sender<LookupKey>,
    answers: mpsc::Receiver<Answer>,
    stats: LookupStats,
}

impl PodLookups {
    pub fn new() -> (PodLookups, Requests) {
        let (keys_tx, keys_rx) = tokio::sync::mpsc::channel(QUEUE);
        let (answers_tx, answers_rx) = mpsc::channel();
        (
            PodLookups {
                cache: HashMap::new(),
                tokens: BURST,
                refilled: Instant::now(),
                keys: keys_tx,
                answers: answers_rx,
                stats: LookupStats::default(),
            },
            Requests {
                keys: keys_rx,
                answers: answers_tx,
            },
        )
    }

    pub fn stats(&self) -> LookupStats {
        self.stats
    }

    /// Lookups a record needed that the cache answered.
    pub fn count_hits(&mut self, hits: u64) {
        self.stats.cache_hits += hits;
    }

    /// A record went out before its lookups were answered.
    pub fn count_late(&mut self) {
        self.stats.late += 1;
    }

    /// The cached answer; asks nothing.
    pub fn get(&self, key: &LookupKey) -> Lookup<'_> {
        match self.cache.get(key) {
            Some(Entry::Known { pods, at }) if at.elapsed() < KEPT_FOR => Lookup::Known(pods),
            Some(Entry::Pending { .. }) => Lookup::Pending,
            _ => Lookup::Unavailable,
        }
    }

    pub fn is_pending(&self, key: &LookupKey) -> bool {
        matches!(self.cache.get(key), Some(Entry::Pending { .. }))
    }

    /// A record needs `key`: asks the API server unless it is cached, on its way, failed a moment
    /// ago, or over the rate limit. Whether it is on its way now.
    pub fn request(&mut self, key: &LookupKey) -> bool {
        let now = Instant::now();
        match self.cache.get(key) {
            Some(Entry::Known { at, .. }) if now.duration_since(*at) < KEPT_FOR => {
                self.stats.cache_hits += 1;
                return false;
            }
            Some(Entry::Pending { .. }) => return true,
            Some(Entry::Failed { at }) if now.duration_since(*at) < RETRY_AFTER => return false,
            _ => {}
        }
        self.tokens =
            (self.tokens + now.duration_since(self.refilled).as_secs_f64() * PER_SECOND).min(BURST);
        self.refilled = now;
        if self.tokens < 1.0 || self.keys.try_send(key.clone()).is_err() {
            self.stats.rate_limited += 1;
            return false;
        }
        self.tokens -= 1.0;
        self.stats.requests += 1;
        self.make_room(now);
        self.cache
            .insert(key.clone(), Entry::Pending { since: now });
        true
    }

    /// Takes in the answers that arrived, and gives up on lookups pending too long.
    pub fn receive(&mut self) {
        let now = Instant::now();
        while let Ok((key, answer)) = self.answers.try_recv() {
            let entry = if let Ok(pods) = answer {
                self.stats.answered += 1;
                Entry::Known { pods, at: now }
            } else {
                self.stats.failed += 1;
                Entry::Failed { at: now }
            };
            self.cache.insert(key, entry);
        }
        let mut given_up = 0;
        for entry in self.cache.values_mut() {
            if let Entry::Pending { since } = entry
                && now.duration_since(*since) >= GIVE_UP_AFTER
            {
                *entry = Entry::Failed { at: now };
                given_up += 1;
            }
        }
        self.stats.failed += given_up;
    }

    /// Keeps the cache bounded: expired answers go first, then the oldest.
    fn make_room(&mut self, now: Instant) {
        if self.cache.len() < MAX_ENTRIES {
            return;
        }
        self.cache.retain(|_, e| match e {
            Entry::Known { at, .. } => now.duration_since(*at) < KEPT_FOR,
            Entry::Failed { at } => now.duration_since(*at) < RETRY_AFTER,
            Entry::Pending { .. } => true,
        });
        while self.cache.len() >= MAX_ENTRIES {
            let oldest = self
                .cache
                .iter()
                .filter_map(|(k, e)| match e {
                    Entry::Known { at, .. } | Entry::Failed { at } => Some((*at, k.clone())),
                    Entry::Pending { .. } => None,
                })
                .min();
            match oldest {
                Some((_, key)) => {
                    self.cache.remove(&key);
                }
                None => break,
            }
        }
    }
}

/// Makes the lookups asked for, [`IN_FLIGHT`] at most at once, until the tracer's end is dropped.
pub async fn serve(client: Client, url: &str, mut requests: Requests) {
    let mut running = FuturesUnordered::new();
    loop {
        tokio::select! {
            key = requests.keys.recv(), if running.len() < IN_FLIGHT => match key {
                Some(key) => running.push(fetch(client.clone(), url, key)),
                None if running.is_empty() => return,
                None => {}
            },
            Some(answer) = running.next() => {
                if requests.answers.send(answer).is_err() {
                    return;
                }
            }
        }
    }
}

async fn fetch(client: Client, url: &str, key: LookupKey) -> Answer {
    let answer = tokio::time::timeout(GIVE_UP_AFTER, ask(client, &key)).await;
    let answer = match answer {
        Ok(Ok(pods)) => Ok(pods
            .into_iter()
            .filter_map(|p| Pod::try_from(p).ok())
            .collect()),
        Ok(Err(e)) => Err(Failure::from_kube(&e, url).to_string()),
        Err(_) => Err("no answer".to_string()),
    };
    (key, answer)
}

async fn ask(client: Client, key: &LookupKey) -> Result<Vec<ApiPod>, kube::Error> {
    match key {
        LookupKey::PodIp(ip) => {
            let params = ListParams::default()
                .fields(&format!("status.podIP={ip}"))
                .match_any();
            Ok(Api::<ApiPod>::all(client).list(&params).await?.items)
        }
        LookupKey::PodName { namespace, name } => {
            match Api::<ApiPod>::namespaced(client, namespace)
                .get_with(name, &GetParams::any())
                .await
            {
                Ok(pod) => Ok(vec![pod]),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
                Err(e) => Err(e),
            }
        }
        LookupKey::Selected {
            namespace,
            selector,
        } => {
            let params = ListParams::default().labels(selector).match_any();
            Ok(Api::<ApiPod>::namespaced(client, namespace)
                .list(&params)
                .await?
                .items)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> LookupKey {
        LookupKey::PodIp(IpAddr::from([10, 0, 0, n]))
    }

    #[test]
    fn asks_once_then_answers_from_the_cache() {
        let (mut lookups, mut requests) = PodLookups::new();
        assert!(lookups.request(&ip(1)));
        assert!(lookups.request(&ip(1)), "still on its way");
        assert_eq!(lookups.stats().requests, 1);
        let key = requests.keys.try_recv().expect("asked");
        requests
            .answers
            .send((key, Ok(Vec::new())))
            .expect("answer");
        lookups.receive();
        assert!(matches!(lookups.get(&ip(1)), Lookup::Known(p) if p.is_empty()));
        assert!(!lookups.request(&ip(1)));
        assert_eq!(lookups.stats().cache_hits, 1);
        assert_eq!(lookups.stats().requests, 1);
    }

    #[test]
    fn the_rate_limit_refuses_past_the_burst_and_counts_it() {
        let (mut lookups, mut requests) = PodLookups::new();
        let mut asked = 0;
        for n in 0..50 {
            if lookups.request(&ip(n)) {
                asked += 1;
            }
            // The watch thread takes them as fast as they come.
            while requests.keys.try_recv().is_ok() {}
        }
        assert_eq!(asked, 20, "the burst");
        assert_eq!(lookups.stats().rate_limited, 30);
    }

    #[test]
    fn a_failed_lookup_is_not_retried_at_once() {
        let (mut lookups, mut requests) = PodLookups::new();
        assert!(lookups.request(&ip(1)));
        let key = requests.keys.try_recv().expect("asked");
        requests
            .answers
            .send((key, Err("HTTP 500".into())))
            .expect("answer");
        lookups.receive();
        assert!(matches!(lookups.get(&ip(1)), Lookup::Unavailable));
        assert!(!lookups.request(&ip(1)));
        assert_eq!(lookups.stats().requests, 1);
        assert_eq!(lookups.stats().failed, 1);
    }
}
