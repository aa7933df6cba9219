//! The memory limit (`-m`) and what keeps the store under it: eviction of
//! the least recently used items, approximated, and the crawler that
//! returns expired items' memory without anyone asking for them
//! (memcached's LRU crawler).
//!
//! **What counts.** Everything the items use: the map's index (slots,
//! link buckets, a resize's second index), every entry's allocation (the
//! map's 12-byte header, a key longer than 8 bytes, the item's 20-byte
//! header and data) and the allocator's own cost per allocation, taken as
//! [`ALLOC_OVERHEAD`]. The map counts its bytes without a scan
//! ([`dlht::ByteMap::memory`]); a store checks the total before it links an
//! item and, over the limit, evicts until the item fits.
//!
//! **Which items go.** Two policies, both walking the map's bins from a
//! hand with [`dlht::ByteMap::iter_bins`] and judging each entry by its
//! stamp ([`dlht::ValueRef::stamp`], a word per stored value that a get
//! writes without making a new version):
//! - [`Policy::Clock`] (the default): a get sets the entry's reference
//!   bit, once (a hot item's line is written once per turn of the hand,
//!   not on every get); the hand clears set bits and evicts entries whose
//!   bit is clear.
//! - [`Policy::Sampled`] (Redis's approximated LRU): a get stores the
//!   current tick; eviction samples a few entries from a random bin and
//!   evicts the one unused longest.
//!
//! Both evict by identity (the very version judged, with `remove_if`), so
//! a concurrent store of the key is never lost. Expired and flushed items
//! met on the way are removed first, as memcached's eviction does.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use dlht::{Guard, ValueRef};

use super::{bump, Store};
use crate::item;

/// The allocator's cost per allocation beyond the bytes asked for, counted
/// against the limit with each entry: glibc's malloc keeps an 8-byte size
/// word and rounds chunks up to 16 bytes (8 bytes of rounding on average).
pub const ALLOC_OVERHEAD: u64 = 16;

/// Bins the eviction hand reads per step.
const HAND_STEP: usize = 8;
/// Entries [`Policy::Sampled`] compares per eviction (Redis's default
/// `maxmemory-samples`).
const SAMPLES: usize = 5;
/// Bins the crawler reads per pass of its loop.
const CRAWL_STEP: usize = 1024;
/// How long the crawler sleeps between steps (`lru_crawler sleep` sets it).
pub(super) const CRAWL_PAUSE: Duration = Duration::from_millis(50);
/// The shortest pause `lru_crawler sleep` may set. memcached's crawler
/// runs only when asked to crawl; this one walks the map all the time, and
/// with `sleep 0` and a 1 ms floor an idle server spent a third of a core
/// on it: 10 ms keeps an idle walk near 1% of a core.
const CRAWL_PAUSE_MIN: Duration = Duration::from_millis(10);

/// [`Policy::Clock`]'s stamp bits.
const REFERENCED: u32 = 1;
/// Set by the first get, never cleared: memcached's "fetched" bit, for
/// `evicted_unfetched` and `expired_unfetched`.
const FETCHED: u32 = 2;

/// How eviction picks its victim (see the module's notes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    /// CLOCK: a reference bit per entry and a hand over the bins.
    #[default]
    Clock,
    /// Redis's sampled LRU: the oldest of a few sampled entries.
    Sampled,
}

impl Policy {
    /// The policy the environment names (`DLHT_EVICTION=clock|sampled`, for
    /// measuring one against the other), else the default.
    pub fn from_env() -> Policy {
        match std::env::var("DLHT_EVICTION").as_deref() {
            Ok("sampled") => Policy::Sampled,
            _ => Policy::Clock,
        }
    }
}

/// Eviction's state: the hands and the policy.
#[derive(Debug, Default)]
pub(super) struct Evictor {
    pub(super) policy: Policy,
    /// Where the eviction hand is (a bin number, taken modulo the bins).
    hand: AtomicUsize,
    /// Where the crawler is.
    crawl_hand: AtomicUsize,
    /// A random-enough sequence for [`Policy::Sampled`]'s bins.
    sample_seed: AtomicU64,
}

impl Evictor {
    /// Hands at bin 0, evicting by `policy`.
    pub(super) fn new(policy: Policy) -> Self {
        Evictor { policy, ..Default::default() }
    }
}

impl Store {
    /// Bytes the items use, as counted against `-m` (see the module notes).
    pub fn used_bytes(&self) -> u64 {
        let memory = self.map.memory();
        (memory.total() as u64).saturating_add(self.map.len() as u64 * ALLOC_OVERHEAD)
    }

    /// Shrink the map's index if it takes more than half the memory limit
    /// while the map holds under 0.75 keys per bin (a grow lands at about
    /// 1.1, and the index shrunk to half then grows again only at 50% more
    /// keys than now, which the limit leaves no room for): a grow
    /// the map made in a burst (or ever made, under a lower limit since
    /// `cache_memlimit`) would otherwise keep the index's memory, which no
    /// eviction frees, and at worst the whole limit (every store refused).
    /// True if it shrank. The crawler's thread calls it; the shrink runs
    /// there (a grow's work, non-blocking for the other threads).
    pub fn keep_index_in_proportion(&self) -> bool {
        // Relaxed: `cache_memlimit` may change it; any value read is one set.
        let limit = self.memory_limit.load(Relaxed);
        let mut memory = self.map.memory();
        if memory.resize_bytes > 0 {
            // Writes help a resize along, but none comes while its second
            // index leaves no room under the limit (every store refused):
            // finish it here (`stats` does).
            self.map.stats();
            memory = self.map.memory();
        }
        let oversized = memory.resize_bytes == 0
            && memory.index_bytes as u64 > limit / 2
            // capacity: two keys per bin
            && self.map.len().saturating_mul(8) <= self.map.capacity().saturating_mul(3);
        if oversized {
            let before = self.map.capacity();
            self.map.shrink_to(0);
            return self.map.capacity() < before;
        }
        false
    }

    /// A get found `v`: mark it used.
    #[inline]
    pub(super) fn note_access(&self, v: ValueRef<'_>) {
        let stamp = v.stamp();
        // Relaxed: the stamp is a hint for eviction, ordered with nothing;
        // a lost update between a get and the hand costs a misjudged
        // victim, never correctness. Written only when it changes, so a hot
        // item's line is not dirtied by every get.
        let want = match self.evictor.policy {
            Policy::Clock => REFERENCED | FETCHED,
            Policy::Sampled => self.tick() | 1,
        };
        if stamp.load(Relaxed) != want {
            stamp.store(want, Relaxed);
        }
    }

    /// [`Policy::Sampled`]'s clock: the cas counter, which every store
    /// moves (an item's cas is its creation tick).
    fn tick(&self) -> u32 {
        (self.cas.load(Relaxed) as u32) << 1
    }

    /// Make room for an item of `incoming` bytes (key and encoded value;
    /// 0 after a store, whose insert may have grown the index): evict
    /// until the total fits under the limit. Err if it cannot (an item
    /// larger than what eviction can free), at once if no eviction could:
    /// one item too large for the whole cache does not empty it first.
    pub(super) fn make_room(&self, incoming: usize, now: u32, guard: &Guard) -> Result<(), dlht::Error> {
        // Relaxed: `cache_memlimit` may change it; any value read is one set.
        let limit = self.memory_limit.load(Relaxed);
        // The map's and the item's headers, and the allocator's cost.
        let need = if incoming == 0 { 0 } else { incoming as u64 + ALLOC_OVERHEAD + 32 };
        if self.used_bytes().saturating_add(need) <= limit {
            return Ok(());
        }
        // What no eviction frees: the index.
        let memory = self.map.memory();
        let index = (memory.index_bytes + memory.link_bytes + memory.resize_bytes) as u64;
        if index.saturating_add(need) > limit {
            return Err(dlht::Error::AllocFailed { bytes: incoming });
        }
        // Two turns of the hand at most (the first may only clear bits):
        // bins are never more than the index's capacity.
        let max_steps = 2 * self.map.capacity().div_ceil(HAND_STEP) + 2;
        for _ in 0..max_steps {
            let freed = match self.evictor.policy {
                Policy::Clock => self.clock_step(now, guard),
                Policy::Sampled => self.sampled_step(now, guard),
            };
            if freed && self.used_bytes().saturating_add(need) <= limit {
                return Ok(());
            }
            if self.map.is_empty() {
                break;
            }
        }
        if self.used_bytes().saturating_add(need) <= limit {
            Ok(())
        } else {
            Err(dlht::Error::AllocFailed { bytes: incoming })
        }
    }

    /// Remove `v`, still `key`'s value, if nobody replaced it meanwhile.
    pub(super) fn remove_exact(&self, key: &[u8], v: ValueRef<'_>, guard: &Guard) -> bool {
        let at = v.as_bytes().as_ptr();
        self.map.remove_if(key, |cur| cur.as_ptr() == at, guard).is_some()
    }

    /// Whether a get found `key`'s current item, if live (before this
    /// command).
    pub(super) fn was_fetched(&self, key: &[u8], now: u32, guard: &Guard) -> bool {
        // Relaxed: a hint, as `note_access` says.
        self.map
            .get(key, guard)
            .is_some_and(|v| self.live(&v, now).is_some() && self.fetched(v.stamp().load(Relaxed)))
    }

    /// Mark `key`'s current item fetched (and used), as a get does: for a
    /// new version of an item memcached changes in place (a touch, `md I`,
    /// a token taken), which starts with a fresh stamp here.
    pub(super) fn mark_fetched(&self, key: &[u8], guard: &Guard) {
        if let Some(v) = self.map.get(key, guard) {
            self.note_access(v);
        }
    }

    /// Whether a get ever found the value of this stamp.
    pub(super) fn fetched(&self, stamp: u32) -> bool {
        match self.evictor.policy {
            Policy::Clock => stamp & FETCHED != 0,
            Policy::Sampled => stamp != 0,
        }
    }

    /// If `v` is dead (expired or flushed), remove it and count it
    /// reclaimed: None if it is live, else whether this call removed it.
    fn reclaim_dead(&self, key: &[u8], v: ValueRef<'_>, now: u32, guard: &Guard) -> Option<bool> {
        let dead = self.dead(&item::decode(&v)?, now)?;
        let removed = self.remove_exact(key, v, guard);
        if removed {
            bump(&self.local().reclaimed);
            if dead == super::Dead::Expired && !self.fetched(v.stamp().load(Relaxed)) {
                bump(&self.local().expired_unfetched);
            }
        }
        Some(removed)
    }

    /// Evict `v` (counting it).
    fn evict(&self, key: &[u8], v: ValueRef<'_>, guard: &Guard) -> bool {
        if !self.remove_exact(key, v, guard) {
            return false;
        }
        bump(&self.local().evictions);
        if !self.fetched(v.stamp().load(Relaxed)) {
            bump(&self.local().evicted_unfetched);
        }
        true
    }

    /// One step of the CLOCK hand: true if it freed anything.
    fn clock_step(&self, now: u32, guard: &Guard) -> bool {
        // Relaxed: the hand is a position; threads sharing it only need
        // distinct steps, which fetch_add's atomicity gives.
        let start = self.evictor.hand.fetch_add(HAND_STEP, Relaxed);
        let mut freed = false;
        for (_, key, v) in self.map.iter_bins(start, HAND_STEP, guard) {
            if let Some(removed) = self.reclaim_dead(&key, v, now, guard) {
                freed |= removed;
                continue;
            }
            let stamp = v.stamp();
            let s = stamp.load(Relaxed);
            if s & REFERENCED != 0 {
                stamp.store(s & !REFERENCED, Relaxed);
            } else {
                freed |= self.evict(&key, v, guard);
            }
        }
        freed
    }

    /// One eviction by sampling: of [`SAMPLES`] entries, each the first
    /// met from a random bin, the one unused the longest. True if it
    /// freed anything. (Five neighbours from one random bin would be a
    /// biased sample: where eviction emptied a stretch of bins, what is
    /// left there is the recently used, so a neighbourhood overweighs it.)
    fn sampled_step(&self, now: u32, guard: &Guard) -> bool {
        let tick = self.tick();
        let mut victim: Option<(dlht::KeyBytes<'_>, ValueRef<'_>, u32)> = None;
        let mut freed = false;
        for _ in 0..SAMPLES {
            // Relaxed: a sequence of distinct-enough numbers, nothing more.
            let seed = self.evictor.sample_seed.fetch_add(0x9e37_79b9_7f4a_7c15, Relaxed);
            let start = (seed ^ (seed >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            let start = (start ^ (start >> 32)) as usize;
            let Some((_, key, v)) = self.map.iter_bins(start, usize::MAX, guard).next() else { break };
            if let Some(removed) = self.reclaim_dead(&key, v, now, guard) {
                freed |= removed;
                continue;
            }
            let Some(item) = item::decode(&v) else { continue };
            let stamp = v.stamp().load(Relaxed);
            let last_use = if stamp == 0 { (item.cas as u32) << 1 } else { stamp & !1 };
            let age = tick.wrapping_sub(last_use);
            if victim.as_ref().map_or(true, |&(_, _, oldest)| age > oldest) {
                victim = Some((key, v, age));
            }
        }
        if let Some((key, v, _)) = victim {
            freed |= self.evict(&key, v, guard);
        }
        freed
    }

    /// One step of the crawler: remove the expired and flushed items of
    /// `bins` bins from its hand. Returns how many it removed.
    pub fn crawl(&self, bins: usize) -> usize {
        let guard = self.map.guard();
        let now = self.clock.now();
        // Relaxed: a position (see clock_step).
        let start = self.evictor.crawl_hand.fetch_add(bins, Relaxed);
        let mut removed = 0;
        for (_, key, v) in self.map.iter_bins(start, bins, &guard) {
            if self.reclaim_dead(&key, v, now, &guard) == Some(true) {
                removed += 1;
            }
        }
        self.local().crawler_reclaimed.fetch_add(removed as u64, Relaxed);
        removed
    }

    /// Start the crawler: a thread that walks the map every
    /// `CRAWL_PAUSE` (or as `lru_crawler sleep` says, 10 ms at least),
    /// `CRAWL_STEP` bins at a time, while enabled, removing expired
    /// items; it stops when the handle drops.
    pub fn start_crawler(self: &Arc<Self>) -> std::io::Result<Crawler> {
        let stop = Arc::new(AtomicBool::new(false));
        let (store, flag) = (Arc::clone(self), Arc::clone(&stop));
        let thread = std::thread::Builder::new().name("dlht-crawler".into()).spawn(move || {
            // (items stored at the last look, quiet looks since)
            let (mut looked, mut stored, mut quiet) = (std::time::Instant::now(), 0, TRIMS_WHEN_QUIET);
            // Relaxed: a stop request carries no data.
            while !flag.load(Relaxed) {
                // `lru_crawler disable` pauses it; `sleep` sets its pause.
                if store.crawler_settings.enabled.load(Relaxed) {
                    store.crawl(CRAWL_STEP);
                }
                store.keep_index_in_proportion();
                if looked.elapsed() >= TRIM_EVERY {
                    // Once stores pause for a look: a trim holds malloc's
                    // lock up to a few ms (measured 9 ms with values of
                    // 1 B to 200 KB), which a store would wait on.
                    // Several looks: epoch reclamation frees the last
                    // items evicted a little later.
                    let now_stored = store.total(|c| &c.total_items);
                    if now_stored != stored {
                        (stored, quiet) = (now_stored, 0);
                    } else if quiet < TRIMS_WHEN_QUIET {
                        // What the workers handed to the collector, freed
                        // first (they flush before they wait).
                        store.flush_reclamation();
                        give_free_memory_back();
                        quiet += 1;
                    }
                    looked = std::time::Instant::now();
                }
                let pause = Duration::from_micros(store.crawler_settings.sleep_us.load(Relaxed));
                std::thread::park_timeout(pause.max(CRAWL_PAUSE_MIN));
            }
        })?;
        Ok(Crawler { stop, thread: Some(thread) })
    }
}

/// How often the crawler looks whether stores paused, to hand malloc's
/// free pages back to the system.
const TRIM_EVERY: Duration = Duration::from_millis(250);

/// Trims after stores pause (one per look).
const TRIMS_WHEN_QUIET: u32 = 4;

/// Hand the pages malloc holds free back to the system (`malloc_trim`):
/// evicted items leave holes between live ones, and epoch reclamation
/// frees items in bursts, which glibc keeps resident until trimmed. At
/// `-m 64` after a burst of sets, RSS went from 84 to 72 MiB (values of
/// 1 B to 200 KB) and from 97 to 75 MiB (100 KB values); memcached
/// holds 69.
fn give_free_memory_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The running crawler; dropping it stops the thread and waits for it.
#[derive(Debug)]
pub struct Crawler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Crawler {
    fn drop(&mut self) {
        // Relaxed: see the loop.
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{run, stat};
    use super::*;
    use crate::clock::Clock;
    use crate::store::Settings;

    const T0: i64 = 1_700_000_000;
    const LIMIT: u64 = 2 << 20;

    fn small(policy: Policy) -> Store {
        Store::with_policy(
            Clock::manual(T0, 62),
            Settings { limit_maxbytes: LIMIT, ..Settings::default() },
            policy,
        )
    }

    fn value(i: u32, len: usize) -> String {
        format!("{i:08}").repeat(len / 8)
    }

    /// Ten times the limit in distinct keys: the store stays under it,
    /// evictions are counted, and every key answers a miss or exactly
    /// what was last set.
    #[test]
    fn a_storm_past_the_limit_evicts_and_never_lies() {
        for policy in [Policy::Clock, Policy::Sampled] {
            let s = small(policy);
            let n = (10 * LIMIT / 1024) as u32;
            for i in 0..n {
                let r = run(&s, &format!("set key:{i} {i} 0 1024\r\n{}\r\n", value(i, 1024)));
                assert_eq!(r, "STORED\r\n", "{policy:?} key {i}");
                assert!(s.used_bytes() <= LIMIT, "{policy:?}: {} bytes used after key {i}", s.used_bytes());
            }
            let evictions = stat(&s, "evictions");
            assert!(evictions > (n as u64) / 2, "{policy:?}: {evictions} evictions");
            assert_eq!(stat(&s, "evicted_unfetched"), evictions, "{policy:?}: none was fetched");
            let mut hits = 0;
            for i in 0..n {
                let r = run(&s, &format!("get key:{i}\r\n"));
                if r != "END\r\n" {
                    assert_eq!(r, format!("VALUE key:{i} {i} 1024\r\n{}\r\nEND\r\n", value(i, 1024)));
                    hits += 1;
                }
            }
            assert_eq!(hits as u64 + evictions, n as u64, "{policy:?}");
            assert_eq!(stat(&s, "curr_items"), hits as u64, "{policy:?}");
        }
    }

    /// Tiny items set round after round past the limit: the store holds as
    /// many at the end as after the first rounds. (Before the map's bins
    /// gave back the link buckets they emptied, each bin that ever held
    /// four keys kept one, and the index took a growing share of the
    /// limit: 321,758 items after the first of six rounds at `-m 64`,
    /// 166,063 after the last.)
    #[test]
    fn tiny_items_do_not_decay_with_uptime() {
        let s = small(Policy::Clock);
        let mut held = Vec::new();
        let mut key = 0u64;
        for _ in 0..5 {
            for _ in 0..120_000 {
                key += 1;
                assert_eq!(run(&s, &format!("set k{key} 0 0 1\r\nx\r\n")), "STORED\r\n");
            }
            held.push(stat(&s, "curr_items"));
        }
        let (first, last) = (held[1], held[4]);
        assert!(last * 10 >= first * 9, "items held round by round: {held:?}");
    }

    /// An index grown far past what the items need (a burst, or a lower
    /// `cache_memlimit` since) is shrunk back once it takes more than half
    /// the limit, keeping every item; one in proportion is left alone.
    #[test]
    fn an_oversized_index_is_shrunk_back() {
        let s = small(Policy::Clock);
        for i in 0..1000u32 {
            run(&s, &format!("set k{i} 0 0 1\r\nx\r\n"));
        }
        assert!(!s.keep_index_in_proportion(), "an index in proportion");
        s.map.reserve(40_000); // 40,000 keys: 20,000 bins, 1.25 MiB of 2
        let grown = s.map.memory().index_bytes as u64;
        assert!(grown > LIMIT / 2, "{grown}");
        assert!(s.keep_index_in_proportion());
        assert!((s.map.memory().index_bytes as u64) < grown / 8, "{:?}", s.map.memory());
        assert!((0..1000u32)
            .all(|i| run(&s, &format!("get k{i}\r\n")) == format!("VALUE k{i} 0 1\r\nx\r\nEND\r\n")));
    }

    /// Keys read between stores survive a storm that evicts the others.
    #[test]
    fn recently_read_keys_survive() {
        for policy in [Policy::Clock, Policy::Sampled] {
            let s = small(policy);
            let hot = 100u32;
            for i in 0..hot {
                run(&s, &format!("set hot:{i} 0 0 1024\r\n{}\r\n", value(i, 1024)));
            }
            for i in 0..(10 * LIMIT / 1024) as u32 {
                run(&s, &format!("set cold:{i} 0 0 1024\r\n{}\r\n", value(i, 1024)));
                run(&s, &format!("get hot:{}\r\n", i % hot));
            }
            let alive = (0..hot).filter(|i| run(&s, &format!("get hot:{i}\r\n")) != "END\r\n").count();
            // Sampling keeps a hot key with high probability, not surely.
            let want = if policy == Policy::Clock { hot as usize } else { hot as usize * 9 / 10 };
            assert!(alive >= want, "{policy:?}: {alive} of {hot} hot keys kept");
        }
    }

    /// An item the limit cannot hold: memcached's reply, nothing lost
    /// that could stay, except the item a set or an ms meant to replace
    /// (memcached unlinks it, so no client reads stale data); a replace
    /// leaves it.
    #[test]
    fn an_item_larger_than_the_limit_is_refused() {
        let s = Store::with_policy(
            Clock::manual(T0, 62),
            Settings { limit_maxbytes: 64 << 10, ..Settings::default() },
            Policy::Clock,
        );
        assert_eq!(run(&s, "set small 0 0 1\r\nx\r\n"), "STORED\r\n");
        let big = "y".repeat(100 << 10);
        assert_eq!(
            run(&s, &format!("set big 0 0 {}\r\n{big}\r\n", big.len())),
            "SERVER_ERROR out of memory storing object\r\n"
        );
        assert_eq!(stat(&s, "store_no_memory"), 1);
        assert_eq!(run(&s, "get big\r\n"), "END\r\n");
        let refused = "SERVER_ERROR out of memory storing object\r\n";
        for (store, kept) in [("set small 0 0", false), ("ms small", false), ("replace small 0 0", true)] {
            assert_eq!(run(&s, "set small 0 0 1\r\nx\r\n"), "STORED\r\n");
            assert_eq!(run(&s, &format!("{store} {}\r\n{big}\r\n", big.len())), refused, "{store}");
            let expected = if kept { "VALUE small 0 1\r\nx\r\nEND\r\n" } else { "END\r\n" };
            assert_eq!(run(&s, "get small\r\n"), expected, "after a refused {store}");
        }
    }

    /// The crawler takes back expired and flushed items nobody asks for,
    /// and leaves live ones.
    #[test]
    fn the_crawler_reclaims_expired_items() {
        let s = small(Policy::Clock);
        for i in 0..500 {
            let ttl = if i % 2 == 0 { 10 } else { 0 };
            run(&s, &format!("set k{i} 0 {ttl} 1\r\nx\r\n"));
        }
        run(&s, "get k0\r\n");
        assert_eq!(s.crawl(usize::MAX), 0, "nothing expired yet");
        s.clock().advance(11);
        assert_eq!(s.crawl(usize::MAX), 250);
        assert_eq!(stat(&s, "curr_items"), 250);
        assert_eq!(stat(&s, "crawler_reclaimed"), 250);
        assert_eq!(stat(&s, "reclaimed"), 250);
        assert_eq!(stat(&s, "expired_unfetched"), 249, "k0 was fetched");
        assert_eq!(run(&s, "get k1\r\n"), "VALUE k1 0 1\r\nx\r\nEND\r\n");
        run(&s, "flush_all\r\n");
        s.clock().advance(1);
        assert_eq!(s.crawl(usize::MAX), 250);
        assert_eq!(stat(&s, "curr_items"), 0);
    }

    /// The crawler thread runs by itself and stops when dropped.
    #[test]
    fn the_crawler_thread_runs_and_stops() {
        let s = Arc::new(small(Policy::Clock));
        run(&s, "set k 0 5 1\r\nx\r\n");
        s.clock().advance(6);
        let crawler = s.start_crawler().unwrap();
        let t = std::time::Instant::now();
        while !s.map().is_empty() {
            assert!(t.elapsed() < Duration::from_secs(10), "the crawler never came");
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(crawler);
    }
}
