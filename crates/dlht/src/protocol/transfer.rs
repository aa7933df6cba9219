//! Transfer of one bin into the next index (paper §3.2.5).
//!
//! T1 CAS the header NoTransfer → InTransfer. From here no other header CAS
//!    can succeed: every operation's CAS expects a NoTransfer header.
//! T2 for each Valid or Shadow slot: CAS the slot from (k, v) to (dead, v).
//!    A live key is then copied into the next index; a pending insert is
//!    killed (its publication CAS fails and it retries in the next index); a
//!    shadow insert is copied as it was, state and words (`protocol::shadow`);
//!    a dead slot is skipped. The CAS loses only to a racing put (retry with
//!    the value it wrote) or a racing publication (retry with the published
//!    pair), so once it succeeds no put can succeed here any more: the copy
//!    is final.
//! T3 store DoneTransfer: operations now go to the next index.
//!
//! A shrink merges several source bins into one target bin and runs the
//! same steps on all of them together ([`transfer_target`]).

use super::link_needed;
use crate::persist::cell::{note_moving, note_transfer};
use crate::persist::crash::{self, CrashPoint};
use crate::plant::{planted, Plant};
use crate::raw::header::{BinState, Header, SlotState, SLOTS_PER_BIN};
use crate::raw::index::{BinRef, Claimant, Index};
use crate::raw::threading::Threading;
use crate::sync::backoff;

/// Transfer bin `b` of `old` into `new`. Returns the number of keys copied.
/// The caller owns bin `b` for transfer (it claimed its chunk).
///
/// A panic in `hash` here (the user's hasher) would leave the bin
/// InTransfer for good: every later operation on it would wait forever, and
/// the resize could never be published. A half-transferred bin cannot be
/// finished without the hasher, so the process aborts with a message
/// instead (see [`AbortOnUnwind`]).
pub fn transfer_bin<T: Threading>(old: &Index, b: usize, new: &Index, hash: &dyn Fn(u64) -> u64) -> usize {
    let unwinding = AbortOnUnwind;
    let copied = transfer_bin_inner::<T>(old, b, new, hash);
    core::mem::forget(unwinding);
    copied
}

/// Aborts the process if dropped, which only happens when a panic unwinds
/// through a transfer (normal exits `forget` it).
struct AbortOnUnwind;

impl Drop for AbortOnUnwind {
    #[cold]
    fn drop(&mut self) {
        eprintln!(
            "dlht: the hasher panicked while a bin was being transferred to another index; \
             the bin can be neither finished nor rolled back, so the process aborts"
        );
        std::process::abort();
    }
}

#[inline(always)]
fn transfer_bin_inner<T: Threading>(old: &Index, b: usize, new: &Index, hash: &dyn Fn(u64) -> u64) -> usize {
    let bin = old.bin_as::<T>(b);
    // Planted bug (scripts/planted-bugs.sh): transfer while a sync writes
    // the files (finding F7).
    let _gate = if planted(Plant::TransferDuringSync) { None } else { old.transfer_gate() };
    note_transfer(old, b);
    let h = match claim(&bin) {
        Claim::Won(h) => {
            crash::at(CrashPoint::TransferClaimed);
            h
        }
        // Forwarded by a shrink that fell back: nothing here.
        Claim::Done => return 0,
        // An insert is transferring its own bin ([`transfer_own_bin`]):
        // the chunk is done only once that bin is.
        Claim::Busy => {
            let mut spins = 0;
            // Planted bug (scripts/planted-bugs.sh): count the bin done
            // while its copy is still being written.
            while bin.header().bin_state() != BinState::DoneTransfer && !planted(Plant::ChunkSkipsBusyBin) {
                backoff(&mut spins);
            }
            return 0;
        }
    };
    // Planted bug (scripts/planted-bugs.sh): keep what a power loss left
    // in the targets.
    if new.empties_targets() && new.bins() > old.bins() && !planted(Plant::TargetsKept) {
        empty_targets::<T>(old, b, new);
    }
    let copied = copy_out(&bin, h, new, hash);
    #[cfg(all(test, not(loom)))]
    hooks::while_transferring();
    finish(&bin, h);
    copied
}

/// Transfer bin `b` of `old` into `new` ahead of its chunk, for an insert
/// that found it full (bounded help, `resize::help`): nothing if another
/// thread had claimed it when this looked (one claimed between the look
/// and the claim is waited out, as a chunk's claimant does). Returns the
/// keys copied. The chunk's claimant
/// skips the bin, or waits for it if it is still being copied, so the
/// chunk is complete only once the bin is.
pub fn transfer_own_bin<T: Threading>(
    old: &Index,
    b: usize,
    new: &Index,
    hash: &dyn Fn(u64) -> u64,
) -> usize {
    let bin = old.bin_as::<T>(b);
    if bin.header().bin_state() != BinState::NoTransfer {
        return 0;
    }
    transfer_bin::<T>(old, b, new, hash)
}

/// Transfer into bin `t` of the smaller index `new` every source bin of
/// `old` that merges into it (`t + i·new.bins()`). Returns the keys copied.
/// The caller owns target `t` (it claimed its chunk).
///
/// S1 T1 on every source: their key counts are frozen from here.
/// S2 if the sources' Valid and Shadow slots fit one bin (at most 15;
///    links for a transfer are reserved for every bin full), T2 copies them
///    into `t`. Otherwise (an uneven hash, or a burst of inserts since the
///    shrink began) the target does not exist: each source is copied into
///    the same bin of `fallback`, an index as large as `old` that becomes
///    `new`'s successor, and `t` is stored DoneTransfer, so operations that
///    reach it move on to `fallback`; `new` is then grown into `fallback`
///    before it is published (`resize`). The count is an upper bound (a
///    removed slot not yet released counts), so a misjudged bin only takes
///    the slower path.
/// S3 T3 on every source, only now: until the target is complete no
///    operation can reach it, so the owner stores of `place` stay valid.
pub fn transfer_target<T: Threading>(
    old: &Index,
    t: usize,
    new: &Index,
    fallback: &Index,
    hash: &dyn Fn(u64) -> u64,
) -> usize {
    let sources = old.bins() / new.bins();
    debug_assert!(sources <= MAX_SHRINK_FACTOR, "dlht invariant: a shrink merges at most 16 bins");
    // A target recovery finished (after a crash of the process that began
    // it) has every source done: nothing left.
    if old.bin_as::<T>(t).header().bin_state() == BinState::DoneTransfer {
        return 0;
    }
    let _gate = old.transfer_gate();
    note_transfer(old, t);
    let unwinding = AbortOnUnwind;
    let mut claimed = [(0usize, Header::default()); MAX_SHRINK_FACTOR];
    let mut held = 0;
    for i in 0..sources {
        let s = t + i * new.bins();
        let Claim::Won(h) = claim(&old.bin_as::<T>(s)) else {
            // A persistent index's source a damaged file showed transferred:
            // its keys are lost with it.
            assert!(old.is_persistent(), "dlht invariant: a shrink source was transferred twice");
            continue;
        };
        claimed[held] = (s, h);
        held += 1;
    }
    let claimed = &claimed[..held];
    crash::at(CrashPoint::MergeClaimed);
    let copied = merge::<T>(old, t, new, fallback, hash, claimed, &[]);
    core::mem::forget(unwinding);
    copied
}

/// Recovery, step 1 for a bin a thread of a dead process was transferring
/// (InTransfer): place the pair of the slot it was moving (`moving`: the
/// slot, its header state bits and the pair, as `persist::cell::note_moving`
/// recorded them) if its kill landed and the pair is not in `new` yet.
/// Several dead threads may name the bin (the transferer, and chunk
/// claimants that found it busy): every record is placed before any
/// [`resume_bin`] finishes the bin, since that skips moved slots. Returns
/// the keys placed (0 or 1). The caller is the only thread in the map.
#[cfg_attr(loom, allow(dead_code))]
pub fn place_moving<T: Threading>(
    old: &Index,
    b: usize,
    new: &Index,
    hash: &dyn Fn(u64) -> u64,
    (i, state, pair): (usize, u8, (u64, u64)),
) -> usize {
    let bin = old.bin_as::<T>(b);
    if bin.header().bin_state() != BinState::InTransfer {
        return 0;
    }
    let key = if pair.0 == bin.shadow() { pair.1 } else { pair.0 };
    let Some(slot) = bin.slot_in(bin.bucket.link_meta.load(), i) else { return 0 };
    let killed_by_us = (slot.load_key(), slot.load_value()) == (bin.moved(), key);
    if !killed_by_us || holds(new, hash(key), key) {
        return 0;
    }
    let state = if state == SlotState::Shadow as u8 { SlotState::Shadow } else { SlotState::Valid };
    place::<T>(new, hash(key), pair, state);
    1
}

/// Recovery, step 2: finish the transfer of bin `b` of `old` into `new` a
/// thread of a dead process claimed (the slots it had not reached, T2, then
/// T3), after [`place_moving`]. Returns the keys copied.
#[cfg_attr(loom, allow(dead_code))]
pub fn resume_bin<T: Threading>(old: &Index, b: usize, new: &Index, hash: &dyn Fn(u64) -> u64) -> usize {
    let bin = old.bin_as::<T>(b);
    let h = bin.header();
    if h.bin_state() != BinState::InTransfer {
        return 0; // not claimed yet, or finished
    }
    let copied = copy_out(&bin, h, new, hash);
    finish(&bin, h);
    copied
}

/// Recovery of a shrink's target `t` of `new` whose merge a thread of a
/// dead process began (S1–S3 of [`transfer_target`], finished here): claim
/// the sources it had not claimed, judge the fit from their headers (frozen
/// since their claim, so the same judgement as the dead thread's), place
/// the pairs of `moving` (records naming a source, as for [`place_moving`];
/// all of them, from every cell naming `t`), copy the rest, forward the
/// target if the sources went to `fallback`, finish the sources. Returns
/// the keys copied. The caller is the only thread in the map.
#[cfg_attr(loom, allow(dead_code))]
pub fn resume_target<T: Threading>(
    old: &Index,
    t: usize,
    new: &Index,
    fallback: &Index,
    hash: &dyn Fn(u64) -> u64,
    moving: &[(usize, usize, u8, (u64, u64))],
) -> usize {
    let sources = old.bins() / new.bins();
    let source = |i: usize| old.bin_as::<T>(t + i * new.bins());
    let done = |i: usize| source(i).header().bin_state() == BinState::DoneTransfer;
    // Planted bug (scripts/planted-bugs.sh): judge the target by its first
    // source alone, as this once did.
    if planted(Plant::ShrinkJudgedByFirstSource) && done(0) {
        return 0;
    }
    if (0..sources).any(done) {
        // S3 was under way (it begins once every source is copied, and
        // finishes them in order): finish the rest. A target judged by its
        // first source alone left them InTransfer, and the open's repair
        // then read their moved pairs as garbage: keys `get` and `iter`
        // missed until the shrink was published.
        for i in (0..sources).filter(|&i| !done(i)) {
            let b = source(i);
            finish(&b, b.header());
        }
        return 0;
    }
    let mut claimed = [(0usize, Header::default()); MAX_SHRINK_FACTOR];
    for (i, c) in claimed.iter_mut().enumerate().take(sources) {
        let s = t + i * new.bins();
        let h = match claim(&old.bin_as::<T>(s)) {
            Claim::Won(h) => h,
            _ => old.bin_as::<T>(s).header(), // claimed by the dead thread
        };
        *c = (s, h);
    }
    merge::<T>(old, t, new, fallback, hash, &claimed[..sources], moving)
}

/// S2–S3 of a merge into target `t` of `new` from its sources `claimed`
/// (bin, header at claim): judge the fit from their Valid and Shadow slots
/// (the headers are frozen since the claim, so recovery judges as the dead
/// thread did), place recovery's `moving` records naming a source, copy
/// the sources into `new` or `fallback`, forward the target if they went
/// to the fallback, then finish the sources. Returns the keys copied.
fn merge<T: Threading>(
    old: &Index,
    t: usize,
    new: &Index,
    fallback: &Index,
    hash: &dyn Fn(u64) -> u64,
    claimed: &[(usize, Header)],
    moving: &[(usize, usize, u8, (u64, u64))],
) -> usize {
    let bound: usize = claimed
        .iter()
        .map(|&(_, h)| h.slots_in(SlotState::Valid).or(h.slots_in(SlotState::Shadow)).count())
        .sum();
    let fits = bound <= SLOTS_PER_BIN;
    let dest = if fits {
        new
    } else {
        new.attach_fallback(fallback);
        fallback
    };
    let mut copied = 0;
    for &(b, i, state, pair) in moving {
        if claimed.iter().any(|&(s, _)| s == b) {
            copied += place_moving::<T>(old, b, dest, hash, (i, state, pair));
        }
    }
    for &(s, h) in claimed {
        copied += copy_out(&old.bin_as::<T>(s), h, dest, hash); // S2
                                                                // Planted bug (scripts/planted-bugs.sh): finish each source as soon
                                                                // as it is copied, so an operation can reach a half-filled target.
        if planted(Plant::ShrinkFinishEach) {
            finish(&old.bin_as::<T>(s), h);
        }
    }
    if !fits {
        new.bin_as::<T>(t)
            .bucket
            .header
            .store_owned(Header::default().with_bin_state(BinState::DoneTransfer));
    }
    for &(s, h) in claimed {
        if !planted(Plant::ShrinkFinishEach) {
            finish(&old.bin_as::<T>(s), h); // S3
        }
    }
    copied
}

/// True if the bin of `hash` in `idx` holds `key` in a Valid or Shadow
/// slot, live or as a shadow insert (recovery's check for a pair already
/// placed).
#[cfg_attr(loom, allow(dead_code))]
fn holds(idx: &Index, hash: u64, key: u64) -> bool {
    let bin = idx.bin(idx.bin_of(hash));
    let h = bin.header();
    let mut lm = None;
    h.slots_in(SlotState::Valid).or(h.slots_in(SlotState::Shadow)).into_iter().any(|i| {
        let slot = bin.slot(&mut lm, i);
        let k = slot.load_key();
        k == key || (k == bin.shadow() && slot.load_value() == key)
    })
}

/// Most source bins one shrink step merges into a target.
pub const MAX_SHRINK_FACTOR: usize = 16;

/// What [`claim`] found.
enum Claim {
    /// This thread now owns the bin for transfer, under this header.
    Won(Header),
    /// Already DoneTransfer: a bin of a shrink's target index that the
    /// shrink forwarded, or a grow's bin an insert transferred ahead of
    /// its chunk.
    Done,
    /// InTransfer by another thread: an insert transferring its own bin.
    Busy,
}

/// T1: CAS the header NoTransfer → InTransfer (the CAS fails only across
/// other operations' header changes).
fn claim<T: Threading>(bin: &BinRef<'_, T>) -> Claim {
    let mut h = bin.header();
    loop {
        match h.bin_state() {
            BinState::NoTransfer => {}
            BinState::DoneTransfer => return Claim::Done,
            BinState::InTransfer => return Claim::Busy,
        }
        let claimed = h.with_bin_state(BinState::InTransfer);
        match bin.cas_header(h, claimed) {
            Ok(()) => return Claim::Won(claimed),
            Err(found) => h = found,
        }
    }
}

/// T3: the bin's keys are in the next index.
fn finish<T: Threading>(bin: &BinRef<'_, T>, h: Header) {
    bin.bucket.header.store_owned(h.with_bin_state(BinState::DoneTransfer));
    crash::at(CrashPoint::TransferFinished);
}

/// T2 on a bin claimed with header `h`: kill each Valid or Shadow slot and
/// copy what it held into `dest`. Returns the keys copied.
fn copy_out<T: Threading>(bin: &BinRef<'_, T>, h: Header, dest: &Index, hash: &dyn Fn(u64) -> u64) -> usize {
    let (dead, pending, shadow, moved) = (bin.dead(), bin.pending(), bin.shadow(), bin.moved());
    // A pair whose key is not this bin's (`Index::may_hold_strays`): killed
    // as dead, not copied to the bin its hash selects, where it would
    // become a key.
    // Planted bug (scripts/planted-bugs.sh): copy such a pair.
    let stray = |k: u64| {
        bin.index.may_hold_strays()
            && bin.index.bin_of(hash(k)) != bin.bin
            && !planted(Plant::StrayPairsCopied)
    };
    let mut lm = None;
    let mut copied = 0;
    // Copy a killed slot's words `w`, which were in state `state`: a live
    // key, or a shadow insert (keyed by its value word); not a pending one.
    let mut copy = |w: (u64, u64), state: SlotState| {
        // Planted bug (scripts/planted-bugs.sh): drop a shadow insert caught
        // between its commit's header flip and its publication, as a plain
        // pending insert is dropped.
        if planted(Plant::ShadowDropped) && w.0 == shadow && state == SlotState::Valid {
            return;
        }
        let (key, state) = match w.0 {
            k if k == shadow => (w.1, state),
            // (A Shadow slot holding a key, not the marker, is a damaged
            // file's: dropped, as `scan` and `find` skip it.)
            k if k != pending && state == SlotState::Valid => (k, SlotState::Valid),
            _ => return,
        };
        // (A damaged file's keys that overflow a target bin are dropped by
        // `place`.)
        place::<T>(dest, hash(key), w, state); // T2
        copied += 1;
    };
    for i in h.slots_in(SlotState::Valid).or(h.slots_in(SlotState::Shadow)) {
        let slot = bin.slot(&mut lm, i);
        let mut cur = (slot.load_key(), slot.load_value());
        loop {
            if cur.0 == dead || cur.0 == moved {
                break;
            }
            // Planted bug (scripts/planted-bugs.sh): copy without a transfer
            // key, so a racing put can still succeed in the old bin.
            if planted(Plant::TransferKeepsKey) && cur.0 != pending && cur.0 != shadow {
                copy(cur, h.slot(i));
                break;
            }
            // A pending insert is killed as dead (it is not copied); a
            // copied slot as moved, with its key (see `raw::markers`), after
            // a persistent map's thread recorded the pair (`persist::cell`).
            let dropped = cur.0 != pending && cur.0 != shadow && stray(cur.0);
            let killed = if cur.0 == pending || dropped {
                (dead, cur.1)
            } else {
                note_moving(bin.index, bin.bin, i, h.slot(i) as u8, cur);
                // Planted bug (scripts/planted-bugs.sh): kill as a remove
                // does, so recovery cannot tell the move from a remove.
                if planted(Plant::TransferKillsDead) {
                    (dead, cur.1)
                } else {
                    (moved, if cur.0 == shadow { cur.1 } else { cur.0 })
                }
            };
            match bin.dwcas(slot, cur, killed) {
                Ok(()) if dropped => break,
                Ok(()) => {
                    crash::at(CrashPoint::TransferKilled);
                    copy(cur, h.slot(i));
                    crash::at(CrashPoint::TransferPlaced);
                    break;
                }
                Err(found) => cur = found,
            }
        }
    }
    copied
}

/// Empty the bins of the larger index `new` that bin `b` of `old`, just
/// claimed for transfer, grows into (see [`Index::empties_targets`]):
/// every slot Invalid; chained link buckets stay chained, for reuse. No
/// operation reaches them before `b` is done, so the stores are owned.
fn empty_targets<T: Threading>(old: &Index, b: usize, new: &Index) {
    for j in 0..new.bins() / old.bins() {
        let bin = new.bin_as::<T>(b + j * old.bins());
        let h = bin.header();
        if !h.has_no_slots() {
            bin.bucket.header.store_owned(h.with_no_slots());
        }
    }
}

/// Put a transferred pair into its bin of `new`. The bin is reachable by no
/// other thread yet (when growing, its source bin is InTransfer, and
/// distinct source bins feed distinct target bins because the new mask
/// extends the old one; when shrinking, every source of the target is
/// InTransfer until all are copied), so plain owner stores suffice. It
/// holds at most 15 keys (one source bin's, or sources counted to fit), and
/// link buckets for transfers are reserved for every bin full.
fn place<T: Threading>(new: &Index, hash: u64, (key, value): (u64, u64), state: SlotState) {
    let bin = new.bin_as::<T>(new.bin_of(hash));
    let h = bin.header();
    // Only a damaged file's target (bins shown full, links shown used up)
    // can refuse a pair: it is lost, not a panic mid-transfer.
    let Some(i) = h.first_invalid() else {
        assert!(new.is_persistent(), "dlht invariant: a transfer target bin overflowed");
        return;
    };
    if let Some(kind) = link_needed(&bin, i) {
        if !new.chain(&bin, kind, Claimant::Transfer) {
            assert!(new.is_persistent(), "dlht invariant: transfer link reserve exhausted");
            return;
        }
    }
    bin.slot(&mut None, i).fill_owned(key, value);
    bin.bucket.header.store_owned(h.with_slot(i, state));
}

#[cfg(all(test, not(loom)))]
pub(crate) mod hooks {
    use std::cell::RefCell;

    std::thread_local! {
        /// Run once while this thread holds a bin InTransfer, copied but
        /// not finished (a test hook for that window).
        pub(crate) static WHILE_TRANSFERRING: RefCell<Option<Box<dyn FnOnce()>>> = const { RefCell::new(None) };
    }

    pub(crate) fn while_transferring() {
        if let Some(f) = WHILE_TRANSFERRING.with(|h| h.borrow_mut().take()) {
            f()
        }
    }
}
