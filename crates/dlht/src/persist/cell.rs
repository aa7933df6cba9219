//! The calling thread's cell in a persistent map's file, where a transfer
//! (deep inside `protocol::transfer`, which knows no map) records the bin
//! and the slot it is moving, and a write (deep inside `protocol`) counts
//! itself. Set for the span of an operation on a persistent map, and of a
//! resize's work, by [`CellScope`]; null outside one. In-memory maps pay a
//! test of their index per slot moved and per count (one of theirs inside
//! a persistent map's scope, user code called back from a closure, records
//! nothing).

use super::layout::{Counting, Intent, IntentKind, Moving, ThreadCell};
use crate::raw::index::Index;
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

/// `f` of this thread's cell, if it is in a scope and `index` is a map
/// file's (the scope's map's: a thread in one map's scope works in no other
/// persistent map's index without entering that map's own scope).
#[inline(always)]
fn with_cell<R>(index: &Index, f: impl FnOnce(&ThreadCell) -> R) -> Option<R> {
    // The index first: a field of a line every operation reads, where the
    // thread-local costs a call.
    if !index.is_persistent() {
        return None;
    }
    with_this_cell(f)
}

/// `f` of this thread's cell, if it is in a scope.
#[inline(always)]
fn with_this_cell<R>(f: impl FnOnce(&ThreadCell) -> R) -> Option<R> {
    let p = CELL.with(|c| c.get());
    if p.is_null() {
        return None;
    }
    // SAFETY: set by a live `CellScope`, whose cell outlives it.
    Some(f(unsafe { &*p }))
}

/// A transfer of `bin` of `index` is about to claim it.
/// Relaxed, here and below: the protocol's next CAS on the bin is at least
/// a release, and a crash keeps every store that precedes one.
#[inline]
pub fn note_transfer(index: &Index, bin: usize) {
    with_cell(index, |c| {
        c.moving_slot.store(0, Ordering::Relaxed);
        c.intent.store(Intent::pack(IntentKind::Transfer, index.generation, bin), Ordering::Relaxed);
    });
}

/// An operation on `bin` of `index` goes on after user code it called (a
/// `remove_if` predicate) returned: that code may have run operations of
/// the same map, whose intents replaced this one's; named again before the
/// operation's next step, so that recovery visits its bin.
#[inline(always)]
pub fn note_operation_again(index: &Index, bin: usize) {
    with_cell(index, |c| {
        // Relaxed: as in `note_transfer`.
        c.intent.store(Intent::pack(IntentKind::Operation, index.generation, bin), Ordering::Relaxed);
    });
}

/// A write in slot `slot` of its bin of `index`, whose marker pair's second
/// word is `word`, is about to publish (`delta` 1: an insert, a shadow
/// commit) or free (`delta` -1: a remove, after its kill) that pair: count
/// it in the thread's share now, with a record that says so (the record
/// first, then the share: a crash between them leaves the share as it was,
/// which the record's `share_after` tells). True if counted (a persistent
/// map's thread); the caller then calls [`count_settled`] once the pair is
/// published or freed, or [`count_undone`] if it never will be.
#[inline(always)]
pub fn note_count(index: &Index, slot: usize, word: u64, delta: i64) -> bool {
    with_cell(index, |c| {
        record(c, slot, word, delta);
        land(c, delta);
    })
    .is_some()
}

/// A remove of the pair `(_, old)` in slot `slot` of its bin of `index` is
/// about to kill it: record its count now and land it after the kill
/// ([`land_kill`]), so that a kill is never without its record, even in a
/// bin a transfer took meanwhile (which recovery leaves as it is, judging
/// the kill by the record). True if recorded (a persistent map's thread);
/// if the kill then fails, the caller withdraws the record
/// ([`count_settled`]). (The dead pair keeps `old`: a reader that loaded
/// the key word before the kill and the value word after it validates by
/// the header alone, which the kill leaves as it is, so the value word of
/// a killed pair must stay a value of that key.)
#[inline(always)]
pub fn record_kill(index: &Index, slot: usize, old: u64) -> bool {
    with_cell(index, |c| record(c, slot, old, -1)).is_some()
}

/// The kill [`record_kill`] recorded landed: count it.
#[inline(always)]
pub fn land_kill() {
    with_this_cell(|c| land(c, -1));
}

/// Record a count of `delta` about to land on the pair `(_, word)` in
/// `slot`.
#[inline(always)]
fn record(c: &ThreadCell, slot: usize, word: u64, delta: i64) {
    // Relaxed, here and in `land`: the cell's owner only; a crash keeps
    // program order.
    let after = c.len_share.load(Ordering::Relaxed).wrapping_add(delta as u64);
    c.counting_word.store(word, Ordering::Relaxed);
    c.counting.store(Counting::pack(slot, delta, after), Ordering::Relaxed);
}

/// Land the count [`record`] recorded.
#[inline(always)]
fn land(c: &ThreadCell, delta: i64) {
    c.len_share.store(c.len_share.load(Ordering::Relaxed).wrapping_add(delta as u64), Ordering::Relaxed);
}

/// The counted pair was published or freed: the record is done with.
#[inline(always)]
pub fn count_settled() {
    // Relaxed: the owner's; a record left by a crash before this store
    // names a slot no longer holding its pair.
    with_this_cell(|c| c.counting.store(0, Ordering::Relaxed));
}

/// The counted pair will never be published (a transfer killed it): take
/// the count back (the share first: a crash between the two stores leaves
/// a record whose count did not land).
#[cold]
pub fn count_undone(delta: i64) {
    with_this_cell(|c| {
        // Relaxed: as in `note_count`.
        c.len_share.store(c.len_share.load(Ordering::Relaxed).wrapping_sub(delta as u64), Ordering::Relaxed);
        c.counting.store(0, Ordering::Relaxed);
    });
}

/// A transfer is about to kill slot `slot` of `bin` (header state bits
/// `state`), which holds `pair`: if the kill lands and the process dies
/// before the pair is placed in the next index, recovery places it from
/// here.
#[inline]
pub fn note_moving(index: &Index, bin: usize, slot: usize, state: u8, pair: (u64, u64)) {
    with_cell(index, |c| {
        // The slot word last: a record is whole once it names a slot.
        c.moving_slot.store(0, Ordering::Relaxed);
        c.moving_key.store(pair.0, Ordering::Relaxed);
        c.moving_value.store(pair.1, Ordering::Relaxed);
        c.moving_slot.store(Moving::pack(bin, slot, state), Ordering::Relaxed);
    });
}
