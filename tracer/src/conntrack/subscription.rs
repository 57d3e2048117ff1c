//! When to follow conntrack destroy events (`events.rs`).
//!
//! While any socket is subscribed to `NFNLGRP_CONNTRACK_DESTROY`, the kernel builds a netlink message
//! for every conntrack entry destroyed on the node and runs our socket filter on it, even though the
//! filter lets almost nothing through: on a busy node that is a cost per connection. The events are
//! needed for one case only: a backend answering a DNAT'd SYN with a RST (a Service selecting a pod
//! that does not listen), whose entry conntrack deletes before we can look it up. So by default
//! (`auto`) we follow them only after such a refusal was seen, and stop after a quiet period. The
//! first refusal of a burst has no backend (its entry was gone before we subscribed); the next ones do.
use std::{
    net::SocketAddr,
    path::PathBuf,
    time::{Duration, Instant},
};

use super::{events::DestroyedNat, netlink::Direction};
use crate::clock::monotonic_now_ns;

/// `--conntrack-destroy-events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DestroyEventsMode {
    /// Subscribed after a refused connect whose conntrack entry was gone; closed after a quiet period.
    Auto,
    /// Subscribed from the start.
    Always,
    /// Never subscribed.
    Never,
}

impl DestroyEventsMode {
    pub fn name(self) -> &'static str {
        match self {
            DestroyEventsMode::Auto => "auto",
            DestroyEventsMode::Always => "always",
            DestroyEventsMode::Never => "never",
        }
    }
}

/// How long destroy events stay followed after the last refused connect whose entry was gone.
///
/// Long enough that a client retrying a refused connect with backoff stays inside one burst: common
/// retry caps are below it (gRPC's default maximum backoff is 120 s, most HTTP clients and job
/// retries a minute or less), so after the first refusal of an incident the following ones are named
/// even when they come minutes apart. Short enough that a node which had one incident is back to no
/// per-connection cost a few minutes later. Reopening costs one netlink socket, at most once per quiet
/// period, so a shorter period would gain little and lose backends of slow retries.
pub const QUIET: Duration = Duration::from_mins(5);

/// The decision alone, time passed in: whether destroy events should be followed now.
#[derive(Debug, Clone)]
pub struct Demand {
    mode: DestroyEventsMode,
    quiet: Duration,
    /// The last refused connect whose conntrack entry was gone (`auto`).
    last_refusal: Option<Instant>,
}

impl Demand {
    pub fn new(mode: DestroyEventsMode, quiet: Duration) -> Demand {
        Demand {
            mode,
            quiet,
            last_refusal: None,
        }
    }

    pub fn mode(&self) -> DestroyEventsMode {
        self.mode
    }

    /// A refused connect (RST) whose conntrack entry was already gone when we looked it up.
    pub fn refusal_without_entry(&mut self, now: Instant) {
        self.last_refusal = Some(now);
    }

    /// Whether destroy events should be followed at `now`.
    pub fn wants_open(&self, now: Instant) -> bool {
        match self.mode {
            DestroyEventsMode::Always => true,
            DestroyEventsMode::Never => false,
            DestroyEventsMode::Auto => self
                .last_refusal
                .is_some_and(|last| now.saturating_duration_since(last) < self.quiet),
        }
    }
}

/// The destroy-event socket, opened and closed as `Demand` says, and what its absence cost.
pub struct DestroySubscription {
    demand: Demand,
    /// Namespace of the node's conntrack (None: ours).
    netns: Option<PathBuf>,
    nat: Option<DestroyedNat>,
    /// Kernel monotonic time the open socket was subscribed: entries destroyed before are not in it.
    opened_ns: u64,
    /// Destroy events lost by sockets since closed.
    lost_closed: u64,
    /// Opening failed (warned once): not tried again, as at start before destroy events were lazy.
    unavailable: bool,
    /// Refused connects (RST) whose conntrack entry was gone and that ended while destroy events were
    /// not followed: if a Service's DNAT chose their backend, it could not be named.
    pub refused_before_subscription: u64,
}

impl DestroySubscription {
    /// `always` subscribes here; `auto` and `never` start closed.
    pub fn start(netns: Option<PathBuf>, mode: DestroyEventsMode) -> DestroySubscription {
        let mut subscription = DestroySubscription {
            demand: Demand::new(mode, QUIET),
            netns,
            nat: None,
            opened_ns: 0,
            lost_closed: 0,
            unavailable: false,
            refused_before_subscription: 0,
        };
        subscription.tick(Instant::now());
        subscription
    }

    /// The backend of a destroyed entry whose original direction is `original`, for a connect whose
    /// conntrack lookup found no entry. `refused_at_ns`: the kernel time a connect refused by a RST
    /// ended (None for other updates); such a refusal is what opens the subscription in `auto`.
    pub fn backend_after_miss(
        &mut self,
        original: Direction,
        refused_at_ns: Option<u64>,
        now: Instant,
    ) -> Option<SocketAddr> {
        let backend = self.nat.as_mut().and_then(|n| n.backend_of(original));
        if let Some(ended_ns) = refused_at_ns {
            let followed = self.nat.is_some() && ended_ns >= self.opened_ns;
            if backend.is_none() && !followed {
                self.refused_before_subscription += 1;
            }
            self.demand.refusal_without_entry(now);
            self.tick(now);
        }
        backend
    }

    /// Opens or closes the socket as the demand at `now` says (called on refusals and periodically).
    pub fn tick(&mut self, now: Instant) {
        let auto = self.demand.mode() == DestroyEventsMode::Auto;
        match (self.demand.wants_open(now), self.nat.is_some()) {
            (true, false) if !self.unavailable => match DestroyedNat::open(self.netns.as_deref()) {
                Ok(nat) => {
                    self.nat = Some(nat);
                    self.opened_ns = monotonic_now_ns();
                    if auto {
                        eprintln!(
                            "tracer: a refused connect had no conntrack entry left: following \
                                 conntrack destroy events to name the backends of the next refusals \
                                 (until {} min without one)",
                            QUIET.as_secs() / 60
                        );
                    }
                }
                Err(e) => {
                    eprintln!("tracer: warning: no backends for refused Service connects: {e}");
                    self.unavailable = true;
                }
            },
            (false, true) => {
                self.lost_closed += self.nat.take().map_or(0, |n| n.lost);
                if auto {
                    eprintln!(
                        "tracer: no refused connect without a conntrack entry for {} min: no \
                         longer following conntrack destroy events",
                        QUIET.as_secs() / 60
                    );
                }
            }
            _ => {}
        }
    }

    pub fn mode(&self) -> DestroyEventsMode {
        self.demand.mode()
    }

    /// Subscribed right now.
    pub fn is_open(&self) -> bool {
        self.nat.is_some()
    }

    /// Destroy events the kernel could not queue, since start.
    pub fn lost(&self) -> u64 {
        self.lost_closed + self.nat.as_ref().map_or(0, |n| n.lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_mins(1);

    #[test]
    fn auto_is_closed_at_start_and_opens_on_a_refusal_without_entry() {
        let t = Instant::now();
        let mut demand = Demand::new(DestroyEventsMode::Auto, QUIET);
        assert!(!demand.wants_open(t));
        assert!(
            !demand.wants_open(t + 10 * MIN),
            "nothing refused: stays closed"
        );
        demand.refusal_without_entry(t + 10 * MIN);
        assert!(demand.wants_open(t + 10 * MIN));
    }

    #[test]
    fn auto_stays_open_while_refusals_keep_coming() {
        let t = Instant::now();
        let mut demand = Demand::new(DestroyEventsMode::Auto, QUIET);
        demand.refusal_without_entry(t);
        for minutes in [4, 8, 12] {
            assert!(demand.wants_open(t + minutes * MIN), "{minutes} min");
            demand.refusal_without_entry(t + minutes * MIN);
        }
        assert!(
            demand.wants_open(t + 16 * MIN),
            "4 min after the last refusal"
        );
    }

    #[test]
    fn auto_closes_after_the_quiet_period_and_reopens() {
        let t = Instant::now();
        let mut demand = Demand::new(DestroyEventsMode::Auto, QUIET);
        demand.refusal_without_entry(t);
        assert!(demand.wants_open(t + Duration::from_secs(QUIET.as_secs() - 1)));
        assert!(
            !demand.wants_open(t + QUIET),
            "closed once the period has passed"
        );
        assert!(!demand.wants_open(t + 3 * QUIET));
        demand.refusal_without_entry(t + 3 * QUIET);
        assert!(demand.wants_open(t + 3 * QUIET), "reopened");
        assert!(!demand.wants_open(t + 4 * QUIET), "and closed again");
    }

    #[test]
    fn always_and_never_do_not_depend_on_refusals() {
        let t = Instant::now();
        let mut always = Demand::new(DestroyEventsMode::Always, QUIET);
        let mut never = Demand::new(DestroyEventsMode::Never, QUIET);
        assert!(always.wants_open(t));
        assert!(!never.wants_open(t));
        always.refusal_without_entry(t);
        never.refusal_without_entry(t);
        assert!(always.wants_open(t + 10 * QUIET));
        assert!(!never.wants_open(t));
    }
}
