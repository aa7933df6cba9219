//! Loom models of the header protocol on a tiny index (two bins, keys in
//! bin 0), every interleaving up to a preemption bound. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p dlht --release --lib`
//! (the README's test script does).

use crate::protocol::freeze::{freeze, thaw};
use crate::protocol::insert::{insert, insert_as, Inserted, Mode};
use crate::protocol::put::{update, Change};
use crate::protocol::remove::remove_if;
use crate::protocol::shadow;
use crate::protocol::transfer::{transfer_bin, transfer_target};
use crate::protocol::{get::get, get::probe_primary, put::put, remove::remove, Step};
use crate::raw::index::{BinRef, Index};
use crate::raw::markers::Markers;
use crate::raw::threading::Shared;
use loom::sync::Arc;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

fn markers() -> Markers {
    Markers::for_hash(|w| w)
}

fn index(bins: usize) -> Arc<Index> {
    Arc::new(Index::new(bins, markers(), 1).unwrap())
}

/// Run a protocol from `idx`, following transferred bins (identity hash).
fn drive<T>(idx: &Index, key: u64, op: impl Fn(&BinRef<'_>) -> Step<T>) -> T {
    let mut idx = idx;
    loop {
        match op(&idx.bin(idx.bin_of(key))) {
            Step::Done(r) => return r,
            Step::Moved => idx = idx.next_index().expect("moved without a next index"),
            Step::Full => panic!("a two-key model never fills a bin"),
        }
    }
}

fn ins(idx: &Index, k: u64, v: u64) -> Inserted {
    drive(idx, k, |b| insert(b, k, v))
}
fn gt(idx: &Index, k: u64) -> Option<u64> {
    drive(idx, k, |b| get(b, k))
}
fn pt(idx: &Index, k: u64, v: u64) -> Option<u64> {
    drive(idx, k, |b| put(b, k, v))
}
fn rm(idx: &Index, k: u64) -> Option<u64> {
    drive(idx, k, |b| remove(b, k, true))
}

/// Shadow-insert `k`, then commit it with `v` (if it was taken).
fn shadow_commit(idx: &Index, k: u64, v: u64) -> Inserted {
    let r = drive(idx, k, |b| insert_as(b, k, 0, Mode::Shadow));
    if r == Inserted::New {
        drive(idx, k, |b| shadow::commit(b, k, v));
    }
    r
}

const K: u64 = 2; // bin 0 of two bins
const K2: u64 = 4; // bin 0 too

/// `first(idx, K, 1)` on this thread races `ins(K, 2)` on another: exactly
/// one may take the key, and the other sees its value.
fn race_for_one_key(first: fn(&Index, u64, u64) -> Inserted) {
    model(move || {
        let idx = index(2);
        let i2 = idx.clone();
        let t = loom::thread::spawn(move || ins(&i2, K, 2));
        let a = first(&idx, K, 1);
        let b = t.join().unwrap();
        let winner = match (a, b) {
            (Inserted::New, Inserted::Exists(1)) => 1,
            (Inserted::Exists(2), Inserted::New) => 2,
            other => panic!("not linearizable: {other:?}"),
        };
        assert_eq!(gt(&idx, K), Some(winner));
    });
}

#[test]
fn two_inserts_of_one_key_never_both_succeed() {
    race_for_one_key(ins);
}

/// A two-bin index holding K → 10 while another thread removes K and
/// inserts K2 (which reuses K's slot): runs `read` on this thread meanwhile
/// and returns what it saw.
fn race_with_replacement<R>(read: impl Fn(&Index) -> R) -> R {
    let idx = index(2);
    assert_eq!(ins(&idx, K, 10), Inserted::New);
    let i2 = idx.clone();
    let t = loom::thread::spawn(move || {
        assert_eq!(rm(&i2, K), Some(10));
        assert_eq!(ins(&i2, K2, 20), Inserted::New);
    });
    let seen = read(&idx);
    t.join().unwrap();
    seen
}

#[test]
fn get_never_returns_the_value_of_a_key_that_replaced_it() {
    // Hazard 8: remove(K) then insert(K2) reuses slot 0; a racing get(K)
    // must see K's value or nothing, never K2's.
    model(|| {
        let seen = race_with_replacement(|idx| gt(idx, K));
        assert!(seen == Some(10) || seen.is_none(), "get(K) returned {seen:?}");
    });
}

#[test]
fn probing_the_primary_bucket_never_returns_a_replacing_keys_value() {
    // The same race for the batch pipeline's get (`probe_primary`): it may
    // leave the get undecided (None), but what it decides must be K's value
    // or absence, never K2's.
    model(|| {
        let seen = race_with_replacement(|idx| probe_primary(&idx.bin(idx.bin_of(K)), K));
        assert!(matches!(seen, None | Some(None) | Some(Some(10))), "probe(K) returned {seen:?}");
    });
}

/// A two-bin index holding K → 1 while another thread runs put(K, 2): runs
/// `main` on this thread and returns its result with the put's.
fn race_with_put<R>(main: impl Fn(&Index) -> R) -> (Option<u64>, R, Arc<Index>) {
    let idx = index(2);
    ins(&idx, K, 1);
    let i2 = idx.clone();
    let t = loom::thread::spawn(move || pt(&i2, K, 2));
    let r = main(&idx);
    (t.join().unwrap(), r, idx)
}

#[test]
fn put_racing_remove_never_updates_a_removed_key() {
    // Hazard 1: either put then remove (put=Some(1), remove=Some(2)) or
    // remove then put (remove=Some(1), put=None). Never both "1".
    model(|| {
        let (p, r, idx) = race_with_put(|idx| rm(idx, K));
        assert!(matches!((p, r), (Some(1), Some(2)) | (None, Some(1))), "put={p:?} remove={r:?}");
        assert_eq!(gt(&idx, K), None);
    });
}

#[test]
fn put_cannot_land_in_a_reinserted_slot_with_equal_contents() {
    // Hazard 2: remove(K) and re-insert (K, 1) into the same slot while a put
    // that read the first incarnation races. Legal orders:
    //   P R I: put=Some(1) rm=Some(2) final=1
    //   R P I: put=None    rm=Some(1) final=1
    //   R I P: put=Some(1) rm=Some(1) final=2
    model(|| {
        let (p, r, idx) = race_with_put(|idx| {
            let r = rm(idx, K);
            assert_eq!(ins(idx, K, 1), Inserted::New);
            r
        });
        let f = gt(&idx, K);
        assert!(
            matches!(
                (p, r, f),
                (Some(1), Some(2), Some(1)) | (None, Some(1), Some(1)) | (Some(1), Some(1), Some(2))
            ),
            "put={p:?} remove={r:?} final={f:?}"
        );
    });
}

/// A two-bin index holding K → 1, with a four-bin next index attached.
/// `race(old)` runs on a second thread while this thread transfers bin 0;
/// `check(old, new, result)` runs after both.
fn race_with_transfer<T: Send + 'static>(
    race: impl Fn(&Index) -> T + Send + Sync + Copy + 'static,
    check: impl Fn(&Index, &Index, T) + Send + Sync + Copy + 'static,
) {
    model(move || {
        let old = index(2);
        ins(&old, K, 1);
        let new = old.attach_next(Box::new(Index::new(4, markers(), 2).unwrap()));
        race_during(
            old,
            new,
            |old, new| {
                transfer_bin::<Shared>(old, 0, new, &|w| w);
            },
            race,
            check,
        );
    });
}

/// Run `race(old)` on a second thread while this thread runs
/// `transfer(old, new)`, then `check(old, new, result)`; frees `new` (from
/// `attach_next`).
fn race_during<T: Send + 'static>(
    old: Arc<Index>,
    new: *mut Index,
    transfer: impl FnOnce(&Index, &Index),
    race: impl Fn(&Index) -> T + Send + 'static,
    check: impl Fn(&Index, &Index, T),
) {
    let o2 = old.clone();
    let t = loom::thread::spawn(move || race(&o2));
    // SAFETY: `new` stays allocated until both threads are done.
    transfer(&old, unsafe { &*new });
    let r = t.join().unwrap();
    // SAFETY: both threads are done with the new index; freed once.
    let new = unsafe { Box::from_raw(new) };
    check(&old, &new, r);
}

#[test]
fn put_racing_a_transfer_is_never_lost() {
    // A put that succeeds in the old bin after it was copied would be lost.
    race_with_transfer(
        |old| pt(old, K, 2),
        |old, new, put| {
            assert_eq!(put, Some(1));
            assert_eq!(gt(new, K), Some(2), "the put was lost in the old index");
            assert_eq!(gt(old, K), Some(2), "old index forwards to the new one");
        },
    );
}

#[test]
fn insert_racing_a_transfer_lands_exactly_once() {
    race_with_transfer(
        |old| ins(old, K2, 5),
        |_, new, inserted| {
            assert_eq!(inserted, Inserted::New);
            assert_eq!(gt(new, K2), Some(5));
            assert_eq!(gt(new, K), Some(1));
            assert_eq!(rm(new, K2), Some(5));
            assert_eq!(gt(new, K2), None, "K2 was inserted twice");
        },
    );
}

// Keys of a four-bin index: A and C in bin 0, B in bin 2; a shrink to two
// bins merges bins 0 and 2 into bin 0.
const A: u64 = 4;
const B: u64 = 2;
const C: u64 = 8;

/// A four-bin index holding A → 1 and B → 1 (in different bins), with a
/// two-bin next index and a fallback attached: a shrink. `race(old)` runs
/// on a second thread while this thread transfers target bin 0 (both
/// sources); `check(old, new, result)` runs after both.
fn race_with_shrink<T: Send + 'static>(
    race: impl Fn(&Index) -> T + Send + Sync + Copy + 'static,
    check: impl Fn(&Index, &Index, T) + Send + Sync + Copy + 'static,
) {
    model(move || {
        let old = index(4);
        ins(&old, A, 1);
        ins(&old, B, 1);
        let new = old.attach_next(Box::new(Index::new(2, markers(), 2).unwrap()));
        let fallback = Index::new(4, markers(), 3).unwrap();
        let merge = |old: &Index, new: &Index| {
            transfer_target::<Shared>(old, 0, new, &fallback, &|w| w);
        };
        race_during(old, new, merge, race, |old, new, r| {
            assert!(new.next_index().is_none(), "two keys fit: no fallback");
            check(old, new, r);
        });
    });
}

#[test]
fn an_insert_racing_a_merge_lands_exactly_once() {
    // An insert into the first source once it is done must not meet a
    // target still being filled from the second.
    race_with_shrink(
        |old| ins(old, C, 5),
        |old, new, inserted| {
            assert_eq!(inserted, Inserted::New);
            assert_eq!((gt(new, A), gt(new, B), gt(new, C)), (Some(1), Some(1), Some(5)), "a key was lost");
            assert_eq!(gt(old, C), Some(5), "old index forwards to the new one");
            assert_eq!(rm(new, C), Some(5));
            assert_eq!(gt(new, C), None, "C was inserted twice");
        },
    );
}

#[test]
fn a_put_racing_a_merge_is_never_lost() {
    race_with_shrink(
        |old| pt(old, B, 2),
        |_, new, put| {
            assert_eq!(put, Some(1));
            assert_eq!((gt(new, A), gt(new, B)), (Some(1), Some(2)), "the put was lost");
        },
    );
}

#[test]
fn a_shadow_insert_and_an_insert_of_one_key_never_both_win() {
    // The plain insert waits while the key is shadowed, then sees the
    // commit; or it wins first and the shadow insert is refused.
    race_for_one_key(shadow_commit);
}

#[test]
fn a_shadow_commit_racing_a_transfer_is_never_lost() {
    // The transfer may find the shadow hidden, half committed (Valid, not
    // published) or published; the commit must end visible exactly once.
    race_with_transfer(
        |old| shadow_commit(old, K2, 5),
        |_, new, r| {
            assert_eq!(r, Inserted::New);
            assert_eq!(gt(new, K2), Some(5), "the commit was lost");
            assert_eq!(gt(new, K), Some(1));
            assert_eq!(rm(new, K2), Some(5));
            assert_eq!(gt(new, K2), None, "K2 is there twice");
        },
    );
}

#[test]
fn a_shadow_abort_racing_a_transfer_leaves_nothing() {
    race_with_transfer(
        |old| {
            let r = drive(old, K2, |b| insert_as(b, K2, 0, Mode::Shadow));
            assert_eq!(gt(old, K2), None, "a shadow insert is hidden");
            drive(old, K2, |b| shadow::abort(b, K2));
            r
        },
        |_, new, r| {
            assert_eq!(r, Inserted::New);
            assert_eq!(gt(new, K2), None);
            // A shadow left behind would make this insert wait forever.
            assert_eq!(ins(new, K2, 7), Inserted::New);
        },
    );
}

#[test]
fn a_shadow_abort_never_frees_a_commit_it_reads_torn() {
    // K2 is shadowed in slot 0 and K in slot 1. K2's commit publishes the
    // value K, so between its S2 and S3 slot 0 reads (shadow, K2) and then
    // (K2, K): an abort of K that read the marker before S3 and the value
    // after it sees (shadow, K) in a Valid slot. Its header CAS would then
    // succeed (S3 leaves the header alone) and free K2's slot.
    model(|| {
        let idx = index(2);
        assert_eq!(drive(&idx, K2, |b| insert_as(b, K2, 0, Mode::Shadow)), Inserted::New);
        assert_eq!(drive(&idx, K, |b| insert_as(b, K, 0, Mode::Shadow)), Inserted::New);
        let i2 = idx.clone();
        let t = loom::thread::spawn(move || drive(&i2, K2, |b| shadow::commit(b, K2, K)));
        drive(&idx, K, |b| shadow::abort(b, K));
        t.join().unwrap();
        assert_eq!(gt(&idx, K2), Some(K), "the abort freed the commit's slot");
        assert_eq!(gt(&idx, K), None);
        // The aborted shadow is gone: an insert of K does not wait on it.
        assert_eq!(ins(&idx, K, 7), Inserted::New);
    });
}

/// A two-bin index holding K → 1 while `race` runs on another thread and
/// this thread freezes bin 0 and thaws it (a snapshot of one bin): returns
/// the pairs the freeze recorded, what `race` returned, and the index.
fn race_with_freeze<T: Send + 'static>(
    race: impl Fn(&Index) -> T + Send + 'static,
) -> (Vec<(u64, u64)>, T, Arc<Index>) {
    let idx = index(2);
    ins(&idx, K, 1);
    let i2 = idx.clone();
    let t = loom::thread::spawn(move || race(&i2));
    let mut killed = Vec::new();
    freeze(&idx.bin(0), &mut killed);
    thaw(&idx.bin(0), &killed);
    let r = t.join().unwrap();
    (killed.into_iter().map(|(_, _, k, v)| (k, v)).collect(), r, idx)
}

#[test]
fn a_put_racing_a_freeze_is_never_lost() {
    // Put before the freeze: recorded (K, 2). After the thaw: recorded
    // (K, 1). Either way the put took effect and returned 1.
    model(|| {
        let (seen, put, idx) = race_with_freeze(|idx| pt(idx, K, 2));
        assert_eq!(put, Some(1));
        assert!(seen == [(K, 1)] || seen == [(K, 2)], "recorded {seen:?}");
        assert_eq!(gt(&idx, K), Some(2), "the put was lost");
    });
}

#[test]
fn a_remove_and_an_insert_racing_a_freeze_are_seen_whole() {
    model(|| {
        let (seen, (r, i), idx) = race_with_freeze(|idx| (rm(idx, K), ins(idx, K2, 5)));
        assert_eq!((r, i), (Some(1), Inserted::New));
        // The snapshot is a state of the bin at one moment: K alone (both
        // after), nothing (between), or K2 alone (both before).
        assert!(seen == [(K, 1)] || seen.is_empty() || seen == [(K2, 5)], "recorded {seen:?}");
        assert_eq!((gt(&idx, K), gt(&idx, K2)), (None, Some(5)));
        // The thawed bin works: the freed slot is reusable.
        assert_eq!(ins(&idx, K, 3), Inserted::New);
    });
}

#[test]
fn two_conditional_changes_of_one_word_never_both_win() {
    // Allocator mode's smallest case: two threads that read the same
    // entry word (1) swap it conditionally — one for a new entry (2), one
    // away (a remove of exactly that word). Exactly one may win; the
    // loser sees the winner's result.
    model(|| {
        let idx = index(2);
        ins(&idx, K, 1);
        let i2 = idx.clone();
        let t = loom::thread::spawn(move || drive(&i2, K, |b| update(b, K, |c| (c == 1).then_some(2))));
        let removed = drive(&idx, K, |b| remove_if(b, K, |c| c == 1, true));
        let updated = t.join().unwrap();
        let end = gt(&idx, K);
        match (updated, removed) {
            (Change::Changed(1), Change::Kept(2)) => assert_eq!(end, Some(2)),
            (Change::Absent, Change::Changed(1)) => assert_eq!(end, None),
            other => panic!("not linearizable: {other:?}, then {end:?}"),
        }
    });
}

/// A bin of K, K2, 6 and 8 (8 in the single link bucket, the index's only
/// link an insert may claim): this thread removes 8 and gives the emptied
/// link back, while another inserts 10, which needs a link slot (the
/// primary bucket is full). The insert lands exactly once, in a link the
/// bin chains (the given-back one, taken from the pool, or the one it
/// still had), never in the quarantine slot a reader of an unchained link
/// meets; every other key stays.
#[test]
fn an_insert_racing_a_link_given_back_lands_in_a_chained_link() {
    use crate::protocol::links::give_back_keeping;
    model(|| {
        let idx = index(2);
        idx.return_links();
        for k in [K, K2, 6, 8] {
            assert_eq!(ins(&idx, k, k * 10), Inserted::New);
        }
        let i2 = idx.clone();
        let t = loom::thread::spawn(move || loop {
            match insert(&i2.bin(0), 10, 100) {
                Step::Done(r) => return r,
                // No link to chain until the given-back one is pooled.
                Step::Full => loom::thread::yield_now(),
                Step::Moved => unreachable!("no resize in this model"),
            }
        });
        assert_eq!(rm(&idx, 8), Some(80));
        let pool = idx.link_pool().unwrap().clone();
        give_back_keeping(&idx.bin(0), 0, |kind, first| pool.give(kind, first));
        assert_eq!(t.join().unwrap(), Inserted::New);
        for k in [K, K2, 6, 10] {
            assert_eq!(gt(&idx, k), Some(k * 10), "key {k}");
        }
        assert_eq!(gt(&idx, 8), None);
        assert!(idx.quarantine_is_clean(), "a key was written into the quarantine slot");
    });
}

/// A bin of eight bins' index (keys multiples of 8) with three keys in its
/// primary bucket, two in its single link and an emptied pair: this thread
/// gives the pair back (holding its eight slots meanwhile), while another
/// inserts three keys. The bin has room for all of them throughout, so no
/// insert may report it full (which grows the index: two threads' churn
/// once doubled a cache's index to its whole memory limit).
#[test]
fn a_bin_holding_a_link_to_give_back_is_never_full() {
    use crate::protocol::links::give_back;
    model(|| {
        let idx = index(8);
        idx.return_links();
        while idx.raise_link_soft() {}
        for k in [8, 16, 24, 32, 40, 48, 56, 64] {
            assert_eq!(ins(&idx, k, k), Inserted::New);
        }
        for k in [64, 48, 56] {
            assert_eq!(rm(&idx, k), Some(k));
        }
        let i2 = idx.clone();
        let t = loom::thread::spawn(move || {
            for k in [72, 80, 88] {
                match insert(&i2.bin(0), k, k) {
                    Step::Done(r) => assert_eq!(r, Inserted::New),
                    Step::Full => panic!("insert of {k}: the bin reported full"),
                    Step::Moved => unreachable!("no resize in this model"),
                }
            }
        });
        let pool = idx.link_pool().unwrap().clone();
        give_back(&idx.bin(0), |kind, first| pool.give(kind, first));
        t.join().unwrap();
        for k in [8, 16, 24, 32, 40, 72, 80, 88] {
            assert_eq!(gt(&idx, k), Some(k), "key {k}");
        }
    });
}
