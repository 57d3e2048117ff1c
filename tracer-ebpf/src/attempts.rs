//! The open attempt of a socket (`ATTEMPTS`, keyed by the socket's kernel address), as every hook
//! after `connect()` reaches it: the one place that knows how attempts are stored.
//!
//! In front of the table, `OPEN_BY_SLOT` counts the open attempts per slot of the socket address's
//! hash: a socket whose slot counts none has no attempt, and the table is not searched. The count
//! never falls below the attempts really open: it goes up before an insert (down again if the
//! insert fails) and down only after a remove that found the entry.
use core::intrinsics::{AtomicOrdering, atomic_xadd};

use tracer_common::{Attempt, counter};

use crate::{
    maps::{ATTEMPTS, OPEN_BY_SLOT, OPEN_SLOT_BITS, UNSTORED, count},
    sock_fields,
};

/// `bpf_map_update_elem` flag: insert only if the key is absent.
const BPF_NOEXIST: u64 = 1;
const EEXIST: i32 = 17;

/// The kernel's `struct sock *` as a tracepoint passed it, as a number: the attempt's key, and where
/// the field reads start from (`sock_fields.rs`).
#[derive(Clone, Copy)]
pub struct Sock(pub u64);

/// The open attempt of `sk`, if it has one.
pub fn attempt_of(sk: Sock) -> Option<&'static mut Attempt> {
    if !may_be_open(sk) {
        return None;
    }
    let value = ATTEMPTS.get_ptr_mut(&sk.0)?;
    // SAFETY: a map value pointer from a successful lookup. The hooks that touch an attempt run
    // under its socket's lock, and only `end` removes it.
    Some(unsafe { &mut *value })
}

/// Opens `attempt` on `sk`, replacing any it had; a full table is counted, and the socket
/// remembered as counted (`was_unstored`).
pub fn open(sk: Sock, attempt: &Attempt) -> bool {
    add_to_slot(sk, 1);
    match ATTEMPTS.insert(&sk.0, attempt, BPF_NOEXIST) {
        Ok(()) => return true,
        Err(e) if e == -EEXIST => {
            // Replaced: the old attempt is counted already. (Only this socket's own hooks touch its
            // entry, serialised by its lock, so it cannot vanish in between.)
            add_to_slot(sk, -1);
            if ATTEMPTS.insert(&sk.0, attempt, 0).is_ok() {
                return true;
            }
            // Not even a replace went in: the entry is gone, which only end() does, and it took its
            // count with it. Count it as not followed.
        }
        Err(_) => add_to_slot(sk, -1),
    }
    count(counter::ATTEMPTS_MAP_FULL);
    let _ = UNSTORED.insert(&sk.0, &1, 0);
    false
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
    if ATTEMPTS.remove(&sk.0).is_ok() {
        add_to_slot(sk, -1);
    }
}

/// The `OPEN_BY_SLOT` slot of `sk`: socket addresses are slab-aligned, so the low bits say little;
/// a multiplicative hash spreads them.
fn slot_of(sk: Sock) -> u32 {
    (address_number(sk).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - OPEN_SLOT_BITS)) as u32
}

/// `sk`'s address as a plain number (`sock_fields::as_number`). A failure would put every socket in
/// slot 0, consistently.
fn address_number(sk: Sock) -> u64 {
    sock_fields::as_number(sk.0)
}

/// Whether `sk` may have an open attempt: false is certain, true means "search the table".
fn may_be_open(sk: Sock) -> bool {
    // SAFETY: an array map value pointer, valid for the program's run; a plain read of a count
    // others change atomically (a torn read cannot happen for an aligned u64).
    OPEN_BY_SLOT
        .get_ptr(slot_of(sk))
        .is_none_or(|open| unsafe { core::ptr::read_volatile(open) } != 0)
}

fn add_to_slot(sk: Sock, delta: i64) {
    if let Some(open) = OPEN_BY_SLOT.get_ptr_mut(slot_of(sk)) {
        // SAFETY: an aligned array map value, shared by all CPUs, so changed only atomically. The
        // BPF target has no atomic types with read-modify-write (no compare-and-swap); its atomic
        // add is this intrinsic, an instruction of its own (`lock xadd`).
        unsafe {
            atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(open, delta.cast_unsigned())
        };
    }
}
