//! Named crash points (feature `crash-points`, for the project's tests):
//! the process aborts — as a SIGKILL would stop it, with no unwinding and
//! no destructor — the `n`th time a thread reaches the point named in
//! `DLHT_CRASH_AT=<point>:<n>`, so a test can crash a map at each step of
//! each protocol and check what the next open recovers;
//! `<point>:<n>:<ms>` stalls that thread `ms` milliseconds first, while
//! the others run on. Without the feature, [`at`] is empty.

/// A step of a protocol after which a crash leaves a state recovery must
/// handle (`persist::recover`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPoint {
    /// Insert I4: the slot is claimed (TryInsert).
    InsertClaimed,
    /// Insert I6: the slot is Valid with `(pending, key)`.
    InsertCommitted,
    /// Insert I6–I7: the key is counted in the thread's share, its pair
    /// not yet published.
    InsertCounted,
    /// Insert I7: the pair is published (the insert took effect).
    InsertPublished,
    /// Remove D4: the key is killed, its slot not yet freed.
    RemoveKilled,
    /// Remove D4: the killed key is counted, its slot not yet freed.
    RemoveCounted,
    /// Put P4: the value is swapped in.
    PutSwapped,
    /// Shadow commit S2: the slot is Valid, its value not yet published.
    ShadowCommitting,
    /// Link allocation: link buckets handed out, not yet chained.
    LinkClaimed,
    /// Snapshot: a bin is frozen (its pairs killed and logged).
    SnapshotFreezing,
    /// Transfer T1: the bin is claimed (InTransfer).
    TransferClaimed,
    /// Transfer T2: a slot is killed as moved, its pair not yet placed.
    TransferKilled,
    /// Transfer T2: the pair is placed in the next index.
    TransferPlaced,
    /// Transfer T3: the bin is DoneTransfer.
    TransferFinished,
    /// Shrink S1: every source of a target is claimed.
    MergeClaimed,
    /// Resize R2: the next index is made and attached.
    ResizeAttached,
    /// Resize R4: the file names the new index; not yet current in memory.
    ResizePublished,
    /// Heap allocation: a block taken from a free list or a new slab, not
    /// yet marked live.
    HeapAllocated,
    /// Heap allocation: a block live and filled, not yet linked.
    HeapFilled,
    /// Allocator-mode replace: the new value's word is in the index, the
    /// old value not yet retired.
    BytesReplaced,
    /// Heap carve: a slab's (or run's) block states written, its class not
    /// yet.
    HeapCarving,
    /// Heap reclamation (pre-pass or sweep): blocks of a slab set free in
    /// this incarnation, on no list yet, the slab not given back.
    HeapReclaiming,
    /// Heap reclamation: an emptied slab or run being given back, its later
    /// slabs' headers zeroed, its first slab's not yet.
    HeapGivingBack,
    /// Heap trim: free slabs taken off the free set, their hole not yet
    /// punched.
    HeapTrimming,
}

#[cfg_attr(not(any(feature = "crash-points", feature = "internals")), allow(dead_code))]
impl CrashPoint {
    /// Every point, in protocol order.
    pub const ALL: [CrashPoint; 24] = [
        CrashPoint::InsertClaimed,
        CrashPoint::InsertCommitted,
        CrashPoint::InsertCounted,
        CrashPoint::InsertPublished,
        CrashPoint::RemoveKilled,
        CrashPoint::RemoveCounted,
        CrashPoint::PutSwapped,
        CrashPoint::ShadowCommitting,
        CrashPoint::LinkClaimed,
        CrashPoint::SnapshotFreezing,
        CrashPoint::TransferClaimed,
        CrashPoint::TransferKilled,
        CrashPoint::TransferPlaced,
        CrashPoint::TransferFinished,
        CrashPoint::MergeClaimed,
        CrashPoint::ResizeAttached,
        CrashPoint::ResizePublished,
        CrashPoint::HeapAllocated,
        CrashPoint::HeapFilled,
        CrashPoint::BytesReplaced,
        CrashPoint::HeapCarving,
        CrashPoint::HeapReclaiming,
        CrashPoint::HeapGivingBack,
        CrashPoint::HeapTrimming,
    ];

    /// The point's name in `DLHT_CRASH_AT`.
    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::InsertClaimed => "insert-claimed",
            CrashPoint::InsertCommitted => "insert-committed",
            CrashPoint::InsertCounted => "insert-counted",
            CrashPoint::InsertPublished => "insert-published",
            CrashPoint::RemoveKilled => "remove-killed",
            CrashPoint::RemoveCounted => "remove-counted",
            CrashPoint::PutSwapped => "put-swapped",
            CrashPoint::ShadowCommitting => "shadow-committing",
            CrashPoint::LinkClaimed => "link-claimed",
            CrashPoint::SnapshotFreezing => "snapshot-freezing",
            CrashPoint::TransferClaimed => "transfer-claimed",
            CrashPoint::TransferKilled => "transfer-killed",
            CrashPoint::TransferPlaced => "transfer-placed",
            CrashPoint::TransferFinished => "transfer-finished",
            CrashPoint::MergeClaimed => "merge-claimed",
            CrashPoint::ResizeAttached => "resize-attached",
            CrashPoint::ResizePublished => "resize-published",
            CrashPoint::HeapAllocated => "heap-allocated",
            CrashPoint::HeapFilled => "heap-filled",
            CrashPoint::BytesReplaced => "bytes-replaced",
            CrashPoint::HeapCarving => "heap-carving",
            CrashPoint::HeapReclaiming => "heap-reclaiming",
            CrashPoint::HeapGivingBack => "heap-giving-back",
            CrashPoint::HeapTrimming => "heap-trimming",
        }
    }
}

#[cfg(feature = "crash-points")]
mod armed {
    use super::CrashPoint;
    use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
    use std::sync::OnceLock;

    /// The armed point, from the environment, read once.
    fn armed() -> Option<CrashPoint> {
        static ARMED: OnceLock<Option<CrashPoint>> = OnceLock::new();
        *ARMED.get_or_init(|| {
            let spec = std::env::var("DLHT_CRASH_AT").ok()?;
            // A spec that names no point, or does not parse, is the test's
            // mistake: it would otherwise never crash.
            fn bad(spec: &str) -> ! {
                panic!("DLHT_CRASH_AT={spec}: not <point>:<n>[:<stall ms>]")
            }
            let fields: Vec<&str> = spec.split(':').collect();
            let p = CrashPoint::ALL.into_iter().find(|p| p.name() == fields[0]).unwrap_or_else(|| bad(&spec));
            let number = |i: usize| fields[i].parse::<u64>().unwrap_or_else(|_| bad(&spec));
            if !(2..=3).contains(&fields.len()) {
                bad(&spec);
            }
            COUNTDOWN.store(number(1) as i64, Ordering::Relaxed);
            STALL_MS.store(if fields.len() == 3 { number(2) } else { 0 }, Ordering::Relaxed);
            Some(p)
        })
    }

    static COUNTDOWN: AtomicI64 = AtomicI64::new(0);
    static STALL_MS: AtomicU64 = AtomicU64::new(0);

    #[inline]
    pub fn at(p: CrashPoint) {
        if armed() == Some(p) && COUNTDOWN.fetch_sub(1, Ordering::Relaxed) == 1 {
            // A stalled thread (`<point>:<n>:<ms>`): the others run on
            // meanwhile (a grow may finish and retire the index it was in),
            // as when the scheduler takes the thread off its core.
            // Relaxed: stored inside `armed`'s one-time initialisation,
            // which happens before every `armed()` that returns.
            let ms = STALL_MS.load(Ordering::Relaxed);
            if ms > 0 {
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
            std::process::abort();
        }
    }
}

/// Abort here if this is the armed point's `n`th arrival (feature
/// `crash-points`; nothing otherwise).
#[inline(always)]
pub fn at(p: CrashPoint) {
    #[cfg(feature = "crash-points")]
    armed::at(p);
    #[cfg(not(feature = "crash-points"))]
    let _ = p;
}
