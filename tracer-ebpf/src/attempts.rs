//! The open attempt of a socket (`ATTEMPTS`, keyed by the socket's kernel address), as every hook
//! after `connect()` reaches it: the one place that knows how attempts are stored.
use tracer_common::{Attempt, counter};

use crate::maps::{ATTEMPTS, UNSTORED, count};

/// The kernel's `struct sock *` as a tracepoint passed it, as a number: the attempt's key, and where
/// the field reads start from (`sock_fields.rs`).
#[derive(Clone, Copy)]
pub struct Sock(pub u64);

/// The open attempt of `sk`, if it has one.
pub fn attempt_of(sk: Sock) -> Option<&'static mut Attempt> {
    let value = ATTEMPTS.get_ptr_mut(&sk.0)?;
    // SAFETY: a map value pointer from a successful lookup. The hooks that touch an attempt run
    // under its socket's lock, and only `end` removes it.
    Some(unsafe { &mut *value })
}

/// Opens `attempt` on `sk`, replacing any it had; a full table is counted, and the socket
/// remembered as counted (`was_unstored`).
pub fn open(sk: Sock, attempt: &Attempt) -> bool {
    if ATTEMPTS.insert(&sk.0, attempt, 0).is_ok() {
        true
    } else {
        count(counter::ATTEMPTS_MAP_FULL);
        let _ = UNSTORED.insert(&sk.0, &1, 0);
        false
    }
}

/// Whether `open` found no room for `sk` earlier (its loss is counted already). Forgets it.
pub fn was_unstored(sk: Sock) -> bool {
    if UNSTORED.get_ptr(&sk.0).is_some() {
        let _ = UNSTORED.remove(&sk.0);
        true
    } else {
        false
    }
}

/// The attempt is over.
pub fn end(sk: Sock) {
    let _ = ATTEMPTS.remove(&sk.0);
}
