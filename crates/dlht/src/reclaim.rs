//! Index lifetime: when an old index may be freed (paper §3.2.5, "GC old
//! index"; hazard 4).
//!
//! Each thread holds a cache-padded record (one per map, claimed by one
//! thread at a time: see `records`) holding the *generation* it announced
//! on entering the map, 0 when outside. Indexes are numbered by generation. A thread that
//! announced `g` may reach any index of generation ≥ `g` (it follows `next`
//! pointers from the one it loaded), so an index of generation `r` may be
//! freed once every announcement is 0 or > `r`.
//!
//! Hazard 4 is a store→load race on both sides (Dekker):
//!
//! - enter: `generation` (load) → announce `g` (store) → `current` (load)
//! - publish: `current` (store, SeqCst) → `generation` (store) → scan the
//!   announcements (loads)
//!
//! Either the scan sees the announcement (and keeps the index), or the
//! entering thread's load of `current` sees the publish (and never touches
//! the old index) — provided neither side lets its load pass its store.
//! Two ways to provide that, chosen once per process:
//!
//! - **Asymmetric (Linux, the default where the kernel offers it).** The
//!   process registers for `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`.
//!   The announcement is a plain store followed by a compiler fence — no
//!   locked instruction on the operation's path — and the publisher, before
//!   each scan, calls membarrier, which makes every running thread of the
//!   process execute a full memory barrier. This is the paper's "two atomic
//!   stores per request", made sound.
//! - **Symmetric (fallback).** The announcement is a SeqCst store (an `xchg`
//!   on x86-64) and the scan uses SeqCst loads after a SeqCst fence.
//!
//! Entering is a [`Guard`]: a thread whose announcement is already set is
//! inside (generations start at 1), so only the outermost guard of a
//! thread announces and only its drop leaves — a
//! hasher that calls back into the map cannot clear the announcement the
//! outer operation relies on — and a guard leaves on unwind too.
//!
//! Retiring an index only queues it: its publisher is always inside the map
//! (announced at or below its generation), so scanning then is futile.
//! `newest_retired` holds the newest queued generation (0: none). Every
//! outermost leave loads it (one read-mostly word) and, if the thread had
//! announced a generation at or below it — so it may have been what kept
//! an index alive — frees what has become quiescent. Threads that entered
//! after the resize never collect, so a slow reader holding an old index
//! costs the others nothing. The leave's store of 0 and its load of
//! `newest_retired` pair with the queueing store and the scan as another
//! Dekker pair (same barriers as above), so of a blocker's leave and the
//! scan that saw it inside, one frees the index: nothing waits for a later
//! resize. In the asymmetric protocol one membarrier after an index is
//! retired is enough for all later scans of it (see `free_quiescent`),
//! so a resize costs at most one process-wide barrier.
//!
//! The record also carries the thread's share of the map's length
//! (`map/len.rs`), which reclamation never reads.

use crate::count::{CountShare, LenShare};
use crate::plant::{planted, Plant};
use crate::raw::index::Index;
use crate::sync::{compiler_fence, fence, AtomicU64, AtomicUsize, Mutex, Ordering};

/// One thread's record.
#[derive(Default)]
pub struct ThreadRecord {
    /// Generation announced on entry; 0 outside the map.
    announced: AtomicU64,
    /// This thread's share of the map's length (`map/len.rs`).
    pub len: LenShare,
    /// This thread's share of the bytes of values an allocator-mode map
    /// holds (`map/len.rs`); unused by inlined maps.
    pub value_bytes: CountShare,
    /// The number (plus one) of this record's cell in a persistent map's
    /// file (`persist`); 0 until it writes, and for in-memory maps.
    #[cfg_attr(loom, allow(dead_code))]
    pub persist_cell: crate::sync::unmodelled::AtomicUsize,
    /// Held by one thread at a time (see `records`). Not modelled by
    /// loom, whose records are found by thread id.
    claimed: std::sync::atomic::AtomicBool,
    /// Claimed for one guard only, by a call during thread teardown:
    /// released when that guard leaves (only its thread reads it).
    temporary: std::sync::atomic::AtomicBool,
}

impl ThreadRecord {
    /// Give back a record claimed for one guard, if this one is: its thread
    /// is done with it.
    #[inline(always)]
    fn release_if_temporary(&self) {
        // Relaxed: only this thread writes and reads the flag.
        if self.temporary.load(Ordering::Relaxed) {
            self.release_temporary();
        }
    }

    #[cold]
    fn release_temporary(&self) {
        self.temporary.store(false, Ordering::Relaxed);
        // Release: this thread's writes to the record (its shares) happen
        // before the next claimer's reads.
        self.claimed.store(false, Ordering::Release);
    }
}

/// `membarrier` commands (linux/membarrier.h); libc exports the syscall
/// number but not these.
#[cfg(all(target_os = "linux", not(loom)))]
mod membarrier {
    pub const CMD_QUERY: libc::c_int = 0;
    pub const CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    pub const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    fn call(cmd: libc::c_int) -> libc::c_long {
        // SAFETY: membarrier takes two integers and touches no user memory.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_uint) }
    }

    /// Register this process for expedited private barriers; false if the
    /// kernel does not offer them (then the symmetric protocol is used).
    pub fn register() -> bool {
        let cmds = call(CMD_QUERY);
        cmds >= 0
            && cmds & CMD_PRIVATE_EXPEDITED as libc::c_long != 0
            && call(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
    }

    /// A full barrier on every running thread of this process; false if
    /// the kernel refused (ENOMEM, or a seccomp filter installed since we
    /// registered). The caller then frees nothing and tries again later.
    pub fn barrier() -> bool {
        #[cfg(test)]
        if super::tests::FAIL_MEMBARRIER.with(|f| f.get()) {
            return false;
        }
        call(CMD_PRIVATE_EXPEDITED) == 0
    }
}

/// A full barrier on every running thread of this process (membarrier);
/// false if the kernel refused. Only for the asymmetric protocol.
#[cfg(all(target_os = "linux", not(loom)))]
pub(crate) fn process_barrier() -> bool {
    membarrier::barrier()
}

/// Without membarrier there is no asymmetric protocol to serve.
#[cfg(not(all(target_os = "linux", not(loom))))]
pub(crate) fn process_barrier() -> bool {
    unreachable!("dlht invariant: a process barrier without membarrier")
}

/// True if this process uses the asymmetric protocol (decided once).
pub(crate) fn asymmetric() -> bool {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *REGISTERED.get_or_init(membarrier::register)
    }
    #[cfg(not(all(target_os = "linux", not(loom))))]
    {
        false
    }
}

/// The per-map reclamation state.
pub struct Reclaim {
    threads: records::Records,
    /// Replaced indexes not yet freed (in no particular order: a newer one
    /// may be freed before an older one).
    retired: Mutex<Vec<RetiredIndex>>,
    /// Generation of the newest index in `retired`, 0 when it is empty:
    /// checked at every outermost leave.
    newest_retired: AtomicU64,
    /// Indexes freed so far.
    pub freed: AtomicUsize,
    /// Which Dekker protocol this map uses (see the module docs).
    asymmetric: bool,
}

struct RetiredIndex {
    index: *mut Index,
    /// A scan barrier has run since the index was retired (see
    /// `free_quiescent`).
    barriered: bool,
}
// SAFETY: the pointer is an owned Box<Index> handed over to the retired list;
// Index is Send + Sync.
unsafe impl Send for RetiredIndex {}

/// A thread's stay inside a map (see the module docs). Not `Send`: it
/// stands for this thread's announcement.
pub struct Guard<'a> {
    reclaim: &'a Reclaim,
    record: &'a ThreadRecord,
    /// The generation this guard announced; 0 for a nested guard, which
    /// announces nothing and leaves nothing.
    announced: u64,
    _not_send: core::marker::PhantomData<*const ()>,
}

impl<'a> Guard<'a> {
    /// The record of the thread holding the guard.
    #[inline(always)]
    pub fn record(&self) -> &'a ThreadRecord {
        self.record
    }

    /// True if this guard belongs to `reclaim`.
    #[inline(always)]
    pub fn is_of(&self, reclaim: &Reclaim) -> bool {
        core::ptr::eq(self.reclaim, reclaim)
    }
}

impl Drop for Guard<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.announced != 0 {
            self.reclaim.leave(self.record, self.announced);
        }
    }
}

impl Reclaim {
    /// Empty state.
    pub fn new() -> Self {
        Self::with_protocol(asymmetric())
    }

    /// Empty state, with the Dekker protocol given (see the module docs).
    pub(crate) fn with_protocol(asymmetric: bool) -> Self {
        Reclaim {
            threads: records::Records::default(),
            retired: Mutex::new(Vec::new()),
            newest_retired: AtomicU64::new(0),
            freed: AtomicUsize::new(0),
            asymmetric,
        }
    }

    /// The generation this thread announced (0 outside the map).
    #[cfg(all(test, loom))]
    pub(crate) fn announced(&self) -> u64 {
        self.threads.get().announced.load(Ordering::Relaxed)
    }

    /// Enter the map: the outermost guard of this thread announces the
    /// generation in `generation`; nested ones do nothing. The caller loads
    /// the current index next (SeqCst: the load half of the Dekker pair).
    #[inline(always)]
    pub fn pin<'a>(&'a self, generation: &AtomicU64) -> Guard<'a> {
        let record = self.threads.get();
        let mut announced = 0;
        // Relaxed: only this thread writes its announcement; non-zero means
        // an outer guard of this thread is inside this map.
        if record.announced.load(Ordering::Relaxed) == 0 {
            // Acquire: pairs with the SeqCst store in `Core::publish`. A
            // Relaxed load could be satisfied after our load of `current`
            // on a weakly ordered CPU (aarch64): we would announce the new
            // generation while holding the index it replaced, and the scan
            // would free that index under us. Acquire orders the load of
            // `current` after it, so the index we load is at least as new
            // as the generation we announce. (Free on x86-64.)
            // Planted bug (scripts/planted-bugs.sh): the Relaxed load this
            // code once had.
            let g = if planted(Plant::GenerationRelaxed) {
                generation.load(Ordering::Relaxed)
            } else {
                generation.load(Ordering::Acquire)
            };
            self.announce(record, g);
            announced = g;
        }
        Guard { reclaim: self, record, announced, _not_send: core::marker::PhantomData }
    }

    /// Announce generation `g` for this thread (see the module docs).
    #[inline(always)]
    fn announce(&self, record: &ThreadRecord, g: u64) {
        if self.asymmetric {
            // Release + compiler fence: the publisher's membarrier supplies
            // the hardware StoreLoad barrier on this thread when it matters.
            // Release is not needed by that argument (nothing this thread
            // wrote before is read through the announcement) but costs
            // nothing on x86-64 and keeps the store ordered after the
            // generation load in the language model too.
            record.announced.store(g, Ordering::Release);
            compiler_fence(Ordering::SeqCst);
        } else {
            record.announced.store(g, Ordering::SeqCst);
            // loom treats SeqCst accesses as AcqRel (it would report the
            // store-buffering outcome the C++ model forbids here); its
            // SeqCst fence restores the ordering the real build has.
            #[cfg(loom)]
            fence(Ordering::SeqCst);
        }
    }

    /// Leave the map (the outermost guard's drop; `announced` is what it
    /// announced). The store of 0 is Release at least: every read of the
    /// index made inside happens before a scanner that sees 0 frees it.
    /// Then, if this thread may have been keeping a retired index alive,
    /// free what has become quiescent.
    #[inline(always)]
    fn leave(&self, record: &ThreadRecord, announced: u64) {
        if self.asymmetric {
            // Release + compiler fence: the store must not sink below the
            // load of `newest_retired`; the hardware side is membarrier's.
            record.announced.store(0, Ordering::Release);
            compiler_fence(Ordering::SeqCst);
        } else {
            // SeqCst: the store half of the leave/scan Dekker pair.
            // Planted bug (scripts/planted-bugs.sh): a Relaxed leave lets a
            // scan that sees 0 free the index before the reads made inside.
            if planted(Plant::LeaveRelaxed) {
                record.announced.store(0, Ordering::Relaxed);
            } else {
                record.announced.store(0, Ordering::SeqCst);
            }
        }
        // SeqCst: the load half of that pair (a plain load on x86-64).
        let newest = self.newest_retired.load(Ordering::SeqCst);
        if newest != 0 && announced <= newest {
            self.collect();
        }
        record.release_if_temporary();
    }

    /// Run `f` on this thread's record without entering the map (to count
    /// into its shares).
    #[inline]
    pub fn with_record<X>(&self, f: impl FnOnce(&ThreadRecord) -> X) -> X {
        let record = self.threads.get();
        let x = f(record);
        record.release_if_temporary();
        x
    }

    /// Visit every thread's record (for the length, `map/len.rs`).
    pub fn for_each_record(&self, f: impl FnMut(&ThreadRecord)) {
        self.threads.for_each(f)
    }

    /// The publisher's half of the Dekker pair, before scanning. False if
    /// it could not be had (membarrier refused): then nothing may be freed.
    fn scan_barrier(&self) -> bool {
        #[cfg(all(target_os = "linux", not(loom)))]
        if self.asymmetric {
            return membarrier::barrier();
        }
        fence(Ordering::SeqCst);
        true
    }

    /// True if no thread is inside with an announced generation ≤ `g`.
    fn quiescent_up_to(&self, g: u64) -> bool {
        let mut quiet = true;
        self.threads.for_each(|r| {
            // SeqCst: the load half of the publisher's side of the Dekker
            // pair (and Acquire: a 0 seen here orders the leaver's reads
            // before the free).
            let a = r.announced.load(Ordering::SeqCst);
            quiet &= a == 0 || a > g;
        });
        quiet
    }

    /// Hand over `old` (already replaced as current) to be freed once safe.
    /// Only queues it: the caller (the publisher) is inside the map with a
    /// generation at or below `old`'s, so no scan could free it yet. The
    /// outermost leave of the last thread inside it, the publisher's own
    /// included, frees it.
    ///
    /// # Safety
    /// `old` came from `Box::into_raw`, is no longer reachable from the map's
    /// current pointer, and is handed over once.
    pub unsafe fn retire(&self, old: *mut Index) {
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        retired.push(RetiredIndex { index: old, barriered: false });
        self.publish_newest(&retired);
    }

    /// Store the newest listed generation (0: none) in `newest_retired`.
    /// Called under the `retired` mutex. SeqCst: the store half of the
    /// leave/scan Dekker pair (see the module docs), before any scan.
    fn publish_newest(&self, retired: &[RetiredIndex]) {
        // SAFETY: retired indexes stay allocated while they are listed.
        let newest = retired.iter().map(|r| unsafe { (*r.index).generation }).max().unwrap_or(0);
        self.newest_retired.store(newest, Ordering::SeqCst);
    }

    /// Free every retired index no thread can still reach. Waits for the
    /// mutex rather than skipping when another thread holds it: that thread
    /// may have scanned before this one left, and then only this call frees
    /// the index. Only threads that were inside a retired index get here.
    #[cold]
    fn collect(&self) {
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        self.free_quiescent(&mut retired);
    }

    /// Free the retired indexes that have become quiescent.
    ///
    /// In the asymmetric protocol a membarrier is needed only once per
    /// retired index, after it stopped being current: when it returns,
    /// every announcement made before it is globally visible, so any later
    /// scan (ordered after it through the `retired` mutex) sees every
    /// thread that can still reach the index, and every thread entering
    /// later loads a newer index. Scans of already-barriered indexes are
    /// plain loads, and a resize costs at most one membarrier however often
    /// threads leave while a slow reader holds the old index. In the
    /// symmetric protocol the SeqCst scan loads already follow the SeqCst
    /// store of `current` in the single total order, which is all the
    /// Dekker pair needs; every scan still runs a SeqCst fence, which is
    /// cheap, and which loom (modelling SeqCst accesses as AcqRel) needs.
    fn free_quiescent(&self, retired: &mut Vec<RetiredIndex>) {
        let fence_now = !self.asymmetric || retired.iter().any(|r| !r.barriered);
        if fence_now {
            if !self.scan_barrier() {
                // Keep everything, and have every leave try again until a
                // barrier succeeds (newest_retired = MAX matches them all).
                self.newest_retired.store(u64::MAX, Ordering::SeqCst);
                return;
            }
            retired.iter_mut().for_each(|r| r.barriered = true);
        }
        let mut i = 0;
        while i < retired.len() {
            // SAFETY: retired indexes stay allocated until freed right here.
            let g = unsafe { (*retired[i].index).generation };
            if !self.quiescent_up_to(g) {
                i += 1;
                continue;
            }
            // Off the list before it is freed: even a panicking drop must
            // not leave it there to be freed twice.
            let index = retired.swap_remove(i).index;
            // SAFETY: no thread announced a generation ≤ g, and new entrants
            // load the current index (generation > g), so none can reach
            // this one; it was handed over once and is off the list.
            drop(unsafe { Box::from_raw(index) });
            self.freed.fetch_add(1, Ordering::Relaxed); // a statistic
        }
        self.publish_newest(retired);
    }

    /// Number of indexes waiting to be freed.
    pub fn pending(&self) -> usize {
        self.retired.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Default for Reclaim {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Reclaim {
    fn drop(&mut self) {
        // A loom model that failed while collecting poisoned loom's mutex,
        // whose `get_mut` would then panic during the unwind (an abort
        // instead of a reported failure). Leak instead; models only.
        #[cfg(loom)]
        if std::thread::panicking() {
            return;
        }
        for r in self.retired.get_mut().unwrap_or_else(|e| e.into_inner()).drain(..) {
            // SAFETY: the map is being dropped: no thread is inside it.
            drop(unsafe { Box::from_raw(r.index) });
        }
    }
}

/// The per-thread records of one map.
mod records {
    use super::ThreadRecord;
    #[cfg(not(loom))]
    use std::cell::{Cell, RefCell};
    #[cfg(not(loom))]
    use std::collections::HashMap;
    #[cfg(not(loom))]
    use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
    #[cfg(not(loom))]
    use std::sync::Arc;

    /// One record per thread inside the map, each *claimed* by one thread
    /// at a time, found through a one-entry cache.
    ///
    /// Written here rather than taken from the `thread_local` crate, which
    /// this replaced: the crate releases a thread's id in a TLS destructor
    /// and gives the id, and with it the record, to the next new thread,
    /// while a later TLS destructor of the first thread (any `Drop` that
    /// touches the map during thread exit, crossbeam-epoch's deferred
    /// drops included) could still reach the record: two live threads on
    /// one announcement, and an index freed under one of them. Here a
    /// thread claims a record (a flag set by CAS) and releases it only
    /// when its own table of claims is destroyed at thread exit, which
    /// also empties the cache; a call from a TLS destructor that runs
    /// after that claims a temporary record for the length of its guard.
    ///
    /// The cache is a const-initialized std thread-local (one `%fs`-relative
    /// load on x86-64 Linux, no destructor, so readable during teardown)
    /// holding the record of the map this thread entered last, keyed by an
    /// id no other `Records` of the process ever has: a full lookup costs
    /// about a fifth of an unbatched memory-resident get, as much again as
    /// the announcement itself.
    #[cfg(not(loom))]
    pub struct Records {
        registry: Arc<Registry>,
    }

    /// The records of one map: an append-only list, shared with the tables
    /// of claims of the threads that hold them (a thread may release its
    /// claim after the map is gone).
    #[cfg(not(loom))]
    struct Registry {
        /// Unique in the process (a u64 counter: never wraps in practice).
        id: u64,
        head: AtomicPtr<Node>,
        /// Set when the map drops: claims on it can be forgotten.
        dropped: AtomicBool,
    }

    /// A record, alone in a pair of cache lines (as crossbeam's
    /// `CachePadded` pads on x86-64: the adjacent-line prefetcher pairs
    /// lines), so threads never share a line.
    #[cfg(not(loom))]
    #[repr(align(128))]
    struct Node {
        record: ThreadRecord,
        /// The next node; fixed before this one is published.
        next: *mut Node,
    }

    /// A thread's claims: the record it holds in each map it entered.
    /// Dropped at thread exit, releasing them.
    #[cfg(not(loom))]
    #[derive(Default)]
    struct Claims {
        held: RefCell<HashMap<u64, (Arc<Registry>, *const Node)>>,
        /// Prune claims on dropped maps when `held` reaches this size.
        prune_at: Cell<usize>,
    }

    #[cfg(not(loom))]
    std::thread_local! {
        /// The id of the `Records` this thread looked up last, and its
        /// record there (claimed by this thread).
        static LAST: Cell<(u64, *const ThreadRecord)> = const { Cell::new((0, core::ptr::null())) };
        static CLAIMS: Claims = Claims::default();
    }

    #[cfg(not(loom))]
    impl Default for Records {
        fn default() -> Self {
            // Relaxed: the counter only hands out distinct numbers.
            static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            let registry =
                Registry { id, head: AtomicPtr::new(core::ptr::null_mut()), dropped: AtomicBool::new(false) };
            Records { registry: Arc::new(registry) }
        }
    }

    #[cfg(not(loom))]
    impl Drop for Records {
        fn drop(&mut self) {
            // Relaxed: only lets threads forget their claims sooner.
            self.registry.dropped.store(true, Ordering::Relaxed);
        }
    }

    #[cfg(not(loom))]
    impl Records {
        /// This thread's record. During thread teardown, after the
        /// thread's claims were released, a record claimed for one guard
        /// (`ThreadRecord::temporary`): the guard's leave, or the caller,
        /// gives it back.
        #[inline(always)]
        pub fn get(&self) -> &ThreadRecord {
            let (id, record) = LAST.with(|l| l.get());
            if id == self.registry.id {
                // SAFETY: this thread stored `record` with this id in
                // `get_slow`, from these `Records` (ids are never reused),
                // and holds its claim (the cache is emptied when the
                // claims are released): it points into a node of
                // `self.registry`, which stays at a fixed address while
                // `self` lives, and `self` is borrowed for the returned
                // lifetime.
                return unsafe { &*record };
            }
            self.get_slow()
        }

        #[cold]
        #[inline(never)]
        fn get_slow(&self) -> &ThreadRecord {
            let r = &self.registry;
            match CLAIMS.try_with(|c| c.node_in(r)) {
                Ok(node) => {
                    // SAFETY: a node of `r`, alive while `self` is.
                    let record = unsafe { &(*node).record };
                    LAST.with(|l| l.set((r.id, record as *const ThreadRecord)));
                    record
                }
                // This thread's claims are gone (a TLS destructor running
                // after theirs): a record for this guard only.
                Err(_) => {
                    // SAFETY: as above.
                    let record = unsafe { &(*r.claim()).record };
                    // Relaxed: only this thread reads it.
                    record.temporary.store(true, Ordering::Relaxed);
                    record
                }
            }
        }

        /// Visit every record.
        pub fn for_each(&self, mut f: impl FnMut(&ThreadRecord)) {
            // Acquire: pairs with the Release push, so a node's fields are
            // initialized when read.
            let mut p = self.registry.head.load(Ordering::Acquire);
            while !p.is_null() {
                // SAFETY: nodes are freed only with the registry.
                let node = unsafe { &*p };
                f(&node.record);
                p = node.next;
            }
        }
    }

    #[cfg(not(loom))]
    impl Registry {
        /// Claim a free record, or add one: the node, claimed by this thread.
        fn claim(&self) -> *const Node {
            let mut p = self.head.load(Ordering::Acquire);
            while !p.is_null() {
                // SAFETY: nodes are freed only with the registry.
                let node = unsafe { &*p };
                // Acquire: pairs with the Release stores that give a record
                // back (`ThreadRecord::release_temporary`, `Claims::drop`),
                // so the last holder's writes to the record are seen.
                let claimed = &node.record.claimed;
                if !claimed.load(Ordering::Relaxed)
                    && claimed.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
                {
                    return p;
                }
                p = node.next;
            }
            let node = Box::into_raw(Box::new(Node {
                record: ThreadRecord { claimed: AtomicBool::new(true), ..ThreadRecord::default() },
                next: core::ptr::null_mut(),
            }));
            let mut head = self.head.load(Ordering::Relaxed);
            loop {
                // SAFETY: `node` is ours until published.
                unsafe { (*node).next = head };
                // Release: publishes the node's contents to `for_each`
                // and `claim`.
                match self.head.compare_exchange_weak(head, node, Ordering::Release, Ordering::Relaxed) {
                    Ok(_) => return node,
                    Err(h) => head = h,
                }
            }
        }
    }

    #[cfg(not(loom))]
    impl Drop for Registry {
        fn drop(&mut self) {
            let mut p = *self.head.get_mut();
            while !p.is_null() {
                // SAFETY: the last reference to the registry is gone: every
                // node was made by Box::into_raw in `claim` and is freed once.
                let node = unsafe { Box::from_raw(p) };
                p = node.next;
            }
        }
    }

    #[cfg(not(loom))]
    impl Claims {
        /// This thread's node in `r`, claimed on first use.
        fn node_in(&self, r: &Arc<Registry>) -> *const Node {
            if let Some(&(_, node)) = self.held.borrow().get(&r.id) {
                return node;
            }
            let node = r.claim();
            let mut held = self.held.borrow_mut();
            if held.len() >= self.prune_at.get() {
                // Forget the claims on maps since dropped (their records
                // die with the last claim), so that a thread that makes
                // and drops maps for ever holds a bounded table.
                // Relaxed: see `Records::drop`.
                held.retain(|_, (reg, _)| !reg.dropped.load(Ordering::Relaxed));
                self.prune_at.set((held.len() * 2).max(16));
            }
            held.insert(r.id, (r.clone(), node));
            node
        }
    }

    #[cfg(not(loom))]
    impl Drop for Claims {
        fn drop(&mut self) {
            // First the cache, so that a later TLS destructor of this
            // thread takes a temporary record rather than a released one.
            // Planted bug (scripts/planted-bugs.sh): keep using a record
            // after giving it up, as the `thread_local` crate's ids let
            // the old cache do.
            if !crate::plant::planted(crate::plant::Plant::RecordReuseById) {
                LAST.with(|l| l.set((0, core::ptr::null())));
            }
            for (_, (_registry, node)) in self.held.get_mut().drain() {
                // SAFETY: `_registry` keeps the node alive.
                let node = unsafe { &*node };
                // A guard of this thread is still inside (held by a
                // thread-local destroyed later, say) and will leave
                // through this record: keep it claimed for good rather
                // than let another thread share it. Relaxed: only this
                // thread writes it.
                if node.record.announced.load(Ordering::Relaxed) != 0 {
                    continue;
                }
                // Release: this thread's writes to the record happen
                // before the next claimer's reads.
                node.record.claimed.store(false, Ordering::Release);
            }
        }
    }

    /// Under loom every modelled thread runs on one OS thread, so
    /// thread-locals would hand all of them one record. Records are
    /// found by loom thread id instead, through a std (not loom) mutex:
    /// the lookup must add no synchronization the real build lacks.
    #[cfg(loom)]
    #[derive(Default)]
    pub struct Records {
        owners: std::sync::Mutex<Vec<loom::thread::ThreadId>>,
        records: [crossbeam_utils::CachePadded<ThreadRecord>; 4],
    }

    #[cfg(loom)]
    impl Records {
        pub fn get(&self) -> &ThreadRecord {
            let me = loom::thread::current().id();
            let mut owners = self.owners.lock().unwrap();
            let i = owners.iter().position(|&t| t == me).unwrap_or_else(|| {
                owners.push(me);
                owners.len() - 1
            });
            &self.records[i]
        }

        pub fn for_each(&self, f: impl FnMut(&ThreadRecord)) {
            let n = self.owners.lock().unwrap().len();
            self.records[..n].iter().map(|r| &**r).for_each(f)
        }
    }
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests {
    use std::cell::Cell;

    std::thread_local! {
        /// Makes this thread's membarrier calls fail, as they would under
        /// ENOMEM or a seccomp filter installed after registration.
        pub(crate) static FAIL_MEMBARRIER: Cell<bool> = const { Cell::new(false) };
    }
}
