//! Asks the Prometheus that scrapes every node's tracer, every `--cluster-refresh`, on a task of its
//! own: a slow or unreachable Prometheus delays only its own answer (a line in the header), never
//! the screen or the keys.
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;

use super::cluster_state::ClusterUpdate;
use crate::sweep::{self, client::Prometheus};

/// The longest a round of queries may take before it is reported failed.
pub fn round_timeout(refresh: Duration) -> Duration {
    (refresh * 3).clamp(Duration::from_secs(5), Duration::from_secs(30))
}

/// The resolution of "how long ago": the refresh interval, within 5 s to 1 min.
pub fn age_step(refresh: Duration) -> u64 {
    refresh.as_secs().clamp(5, 60)
}

/// Starts the poller; it stops when the receiver is dropped.
pub fn spawn(
    prometheus: Prometheus,
    window: Duration,
    refresh: Duration,
) -> mpsc::Receiver<ClusterUpdate> {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(refresh);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let timeout = round_timeout(refresh);
        let window_s = window.as_secs().max(1);
        loop {
            tick.tick().await;
            if tx
                .send(ClusterUpdate::Asking(SystemTime::now()))
                .await
                .is_err()
            {
                return;
            }
            let round = sweep::query_now(&prometheus, window_s, age_step(refresh));
            let update = match tokio::time::timeout(timeout, round).await {
                Ok(Ok(sweep)) => ClusterUpdate::Answer {
                    sweep: Box::new(sweep),
                    at: SystemTime::now(),
                },
                Ok(Err(e)) => ClusterUpdate::Failed {
                    error: format!("{e:#}"),
                    at: SystemTime::now(),
                },
                Err(_) => ClusterUpdate::Failed {
                    error: format!(
                        "Prometheus at {} did not answer within {}s",
                        prometheus.url(),
                        timeout.as_secs()
                    ),
                    at: SystemTime::now(),
                },
            };
            if tx.send(update).await.is_err() {
                return;
            }
        }
    });
    rx
}
