//! The calling thread's cell in a persistent map's file, where a transfer
//! (deep inside `protocol::transfer`, which knows no map) records the bin
//! and the slot it is moving. Set for the span of a resize's work by
//! [`CellScope`]; null outside one, and always for in-memory maps, whose
//! transfers then pay one thread-local load per slot moved.

use super::layout::{Intent, IntentKind, Moving, ThreadCell};
use crate::sync::Ordering;
use core::cell::Cell;

std::thread_local! {
    static CELL: Cell<*const ThreadCell> = const { Cell::new(core::ptr::null()) };
}

/// While alive, this thread's transfers record into `cell`.
pub struct CellScope {
    prev: *const ThreadCell,
}

impl CellScope {
    /// Record this thread's transfers into `cell` until the scope drops.
    /// The cell must outlive the scope (it lives in the map file's mapping,
    /// which the map holds while any of its threads works in it).
    pub fn enter(cell: &ThreadCell) -> CellScope {
        CellScope { prev: CELL.with(|c| c.replace(cell)) }
    }
}

impl Drop for CellScope {
    fn drop(&mut self) {
        CELL.with(|c| c.set(self.prev));
    }
}

#[inline(always)]
fn with_cell(f: impl FnOnce(&ThreadCell)) {
    let p = CELL.with(|c| c.get());
    if !p.is_null() {
        // SAFETY: set by a live `CellScope`, whose cell outlives it.
        f(unsafe { &*p })
    }
}

/// A transfer of `bin` of the index of `generation` is about to claim it.
/// Relaxed, here and below: the protocol's next CAS on the bin is at least
/// a release, and a crash keeps every store that precedes one.
#[inline]
pub fn note_transfer(generation: u64, bin: usize) {
    with_cell(|c| {
        c.moving_slot.store(0, Ordering::Relaxed);
        c.intent.store(Intent::pack(IntentKind::Transfer, generation, bin), Ordering::Relaxed);
    })
}

/// A transfer is about to kill slot `slot` of `bin` (header state bits
/// `state`), which holds `pair`: if the kill lands and the process dies
/// before the pair is placed in the next index, recovery places it from
/// here.
#[inline]
pub fn note_moving(bin: usize, slot: usize, state: u8, pair: (u64, u64)) {
    with_cell(|c| {
        // The slot word last: a record is whole once it names a slot.
        c.moving_slot.store(0, Ordering::Relaxed);
        c.moving_key.store(pair.0, Ordering::Relaxed);
        c.moving_value.store(pair.1, Ordering::Relaxed);
        c.moving_slot.store(Moving::pack(bin, slot, state), Ordering::Relaxed);
    })
}
