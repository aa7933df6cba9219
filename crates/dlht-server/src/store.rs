//! The text protocol's commands on one `ByteMap`: memcached 1.6.18's
//! meaning and replies, byte for byte where this layer can match them.
//!
//! Every value is an [`item`](crate::item) (metadata then data), immutable
//! in the map: a change stores a new version with a compare-and-replace on
//! the exact version judged (or an insert where the key was absent), and
//! judges again if another thread got there first, so read-modify-write
//! commands are lock-free and never lose an update. Expiry and `flush_all`
//! are lazy: a dead item is a miss, removed when met. The meta commands
//! are in the `meta` submodule.

use std::io::Write as _;
// Orderings: the counters, the verbosity and the cas counter are Relaxed —
// each is one number on its own (statistics; a cas unique only needs the
// atomicity of fetch_add). flush_all's two words are the one pair read
// together: see `dead` and `flush_all`.
use std::sync::atomic::{
    AtomicU32, AtomicU64, AtomicUsize, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};

use dlht::{Access, ByteMap, Durability, FileHasher, Guard, OpenOptions, ValueRef};

use crate::clock::{is_expired, Clock, ITEM_UPDATE_INTERVAL};
use crate::item::{self, ItemRef, Meta, HEADER};
use crate::protocol::meta::MetaKey;
use crate::protocol::num::safe_strtoull;
use crate::protocol::reply;
use crate::protocol::text::{Command, Keys, Limits, StoreOp, DEFAULT_MAX_ITEM_SIZE};

mod admin;
mod evict;
mod meta;
pub mod restart;

pub use evict::{Crawler, Policy, ALLOC_OVERHEAD};

/// Keys of a multi-get looked up together (one pass of the map's
/// prefetching pipeline).
const GET_PASS: usize = 32;

/// Keys a bounded multi-get ([`Store::execute_within`]) answers before it
/// pauses even with no output (a line of 16 MiB of missing keys builds no
/// reply, yet took its event loop 0.8–1.8 s from the other connections):
/// about a millisecond of lookups, then the other connections' turn.
const KEYS_PER_SLICE: usize = 4096;

/// The version `version` and `stats` report.
pub const VERSION: &str = "1.6.18-dlht";

/// The reply to administration commands (`slabs`, `lru`, ...) until they
/// are implemented.
pub const SERVER_ERROR_ADMIN_NOT_IMPLEMENTED: &[u8] = b"SERVER_ERROR command not implemented yet\r\n";
/// memcached's reply when a store cannot get memory.
pub const SERVER_ERROR_OUT_OF_MEMORY_STORING: &[u8] = b"SERVER_ERROR out of memory storing object\r\n";
/// memcached's reply when `incr`/`decr` cannot get memory.
pub const SERVER_ERROR_OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory\r\n";
/// `incr`/`decr` on a value that is not a decimal number.
pub const CLIENT_ERROR_NON_NUMERIC: &[u8] =
    b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";

/// How far [`Store::execute_within`] took a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The command ran to its end.
    Done(Outcome),
    /// A multi-key get stopped at the output bound: call again with
    /// `resume_at` once the output has drained.
    Paused {
        /// How many bytes of the command's key list are answered (counting
        /// earlier calls): the keys before this offset.
        resume_at: usize,
    },
}

/// An item's data as `incr`, `decr` and `ma` read it: memcached's strtoull
/// on the data as a C string (followed by "\r\n" in its item: the end of
/// the data is fine, and so is a NUL byte after the digits).
fn data_number(data: &[u8]) -> Option<u64> {
    safe_strtoull(data.split(|&b| b == 0).next().unwrap_or_default())
}

/// The offset in `list` just past `key`, one of its tokens.
fn end_within(list: &[u8], key: &[u8]) -> usize {
    key.as_ptr() as usize + key.len() - list.as_ptr() as usize
}

/// What the connection should do after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Go on reading commands.
    Continue,
    /// Close once the replies so far are sent (`quit`).
    Close,
}

/// Settings that `stats` reports (memcached's command-line values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `-m`, in bytes.
    pub limit_maxbytes: u64,
    /// `-t`.
    pub threads: u32,
    /// `-c`.
    pub max_connections: u32,
    /// `-I`: append/prepend results that would exceed it are not stored
    /// (the parser refuses larger data blocks itself).
    pub max_item_size: usize,
    /// `--durable` (with `-e`): changes are acknowledged once on disk
    /// ([`Store::durable`]).
    pub durable: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            limit_maxbytes: 64 * 1024 * 1024,
            threads: 4,
            max_connections: 1024,
            max_item_size: DEFAULT_MAX_ITEM_SIZE,
            durable: false,
        }
    }
}

/// memcached's general counters, with its names and its rules for when each
/// moves. The connection counters are the server layer's to move.
#[derive(Debug, Default)]
pub struct Counters {
    /// Open connections (moved by the server layer).
    pub curr_connections: AtomicU64,
    /// Connections ever accepted (moved by the server layer).
    pub total_connections: AtomicU64,
    /// Keys looked up by get/gets (one per key).
    pub cmd_get: AtomicU64,
    /// Storage commands (set/add/replace/append/prepend/cas), stored or not.
    pub cmd_set: AtomicU64,
    /// `flush_all` commands.
    pub cmd_flush: AtomicU64,
    /// Keys touched by touch/gat/gats (one per key).
    pub cmd_touch: AtomicU64,
    /// get/gets keys found live.
    pub get_hits: AtomicU64,
    /// get/gets keys not found live (expired and flushed included).
    pub get_misses: AtomicU64,
    /// get/gets keys found expired.
    pub get_expired: AtomicU64,
    /// get/gets keys found invalidated by `flush_all`.
    pub get_flushed: AtomicU64,
    /// `delete` of an absent key.
    pub delete_misses: AtomicU64,
    /// `delete` of a live key.
    pub delete_hits: AtomicU64,
    /// `incr` of an absent key.
    pub incr_misses: AtomicU64,
    /// `incr` done.
    pub incr_hits: AtomicU64,
    /// `decr` of an absent key.
    pub decr_misses: AtomicU64,
    /// `decr` done.
    pub decr_hits: AtomicU64,
    /// `cas` of an absent key.
    pub cas_misses: AtomicU64,
    /// `cas` stored.
    pub cas_hits: AtomicU64,
    /// `cas` refused: the cas unique did not match.
    pub cas_badval: AtomicU64,
    /// touch/gat keys found live.
    pub touch_hits: AtomicU64,
    /// touch/gat keys not found live.
    pub touch_misses: AtomicU64,
    /// Stores refused for lack of memory.
    pub store_no_memory: AtomicU64,
    /// Stores refused as too large (moved by the connection layer, where
    /// the parser refuses them).
    pub store_too_large: AtomicU64,
    /// Items ever linked (a store, or an incr/decr that made the value longer).
    pub total_items: AtomicU64,
    /// memcached's `meta_cmds` (`stats`' `cmd_meta`): in 1.6.18 only `me`
    /// moves it; mg/ms/md/ma count as gets, sets, deletes and deltas.
    pub meta_cmds: AtomicU64,
    /// Live items removed to make room under `-m`.
    pub evictions: AtomicU64,
    /// Of those, items no get ever found.
    pub evicted_unfetched: AtomicU64,
    /// Expired or flushed items whose memory eviction or the crawler
    /// took back.
    pub reclaimed: AtomicU64,
    /// Of those reclaimed as expired, items no get ever found.
    pub expired_unfetched: AtomicU64,
    /// Of `reclaimed`, those the crawler took back.
    pub crawler_reclaimed: AtomicU64,
}

impl Counters {
    /// `stats reset`: zero every counter but the connection gauge.
    fn reset(&self) {
        for c in [
            &self.total_connections,
            &self.cmd_get,
            &self.cmd_set,
            &self.cmd_flush,
            &self.cmd_touch,
            &self.get_hits,
            &self.get_misses,
            &self.get_expired,
            &self.get_flushed,
            &self.delete_misses,
            &self.delete_hits,
            &self.incr_misses,
            &self.incr_hits,
            &self.decr_misses,
            &self.decr_hits,
            &self.cas_misses,
            &self.cas_hits,
            &self.cas_badval,
            &self.touch_hits,
            &self.touch_misses,
            &self.store_no_memory,
            &self.store_too_large,
            &self.total_items,
            &self.meta_cmds,
            &self.evictions,
            &self.evicted_unfetched,
            &self.reclaimed,
            &self.expired_unfetched,
            &self.crawler_reclaimed,
        ] {
            c.store(0, Relaxed);
        }
    }
}

/// Shards of the counters: more than the threads a server runs.
const COUNTER_SHARDS: usize = 64;

/// One shard of the counters, on lines of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(Counters);

/// The calling thread's shard number: threads take numbers in turn.
fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        // Relaxed: a ticket, nothing published with it.
        static INDEX: usize = NEXT.fetch_add(1, Relaxed);
    }
    INDEX.with(|i| *i)
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}

/// Why an item is not live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dead {
    Flushed,
    Expired,
}

/// What a judge decided about the key's live item.
enum Verdict<R> {
    /// Store the item the judge appended to the buffer.
    Store,
    /// Change nothing, and report this.
    Keep(R),
}

/// The cache: one `ByteMap` of items, memcached's clock, cas counter,
/// flush state and counters.
pub struct Store {
    map: Items,
    clock: Clock,
    /// The last cas unique handed out (memcached's `get_cas_id` pre-increments).
    cas: AtomicU64,
    /// memcached's `settings.oldest_live`: with `oldest_cas`, what
    /// `flush_all` invalidated (0 = no flush).
    oldest_live: AtomicU32,
    /// memcached's `settings.oldest_cas`.
    oldest_cas: AtomicU64,
    settings: Settings,
    /// The level `verbosity` last set (`stats settings` reports it).
    verbosity: AtomicU32,
    /// memcached's per-thread statistics: one shard per thread (by
    /// [`shard_index`]), so that counting a get writes no shared line.
    counters: Box<[Shard]>,
    evictor: evict::Evictor,
    /// Warm restart's state (`-e DIR`); None for a cache in memory.
    restart: Option<restart::Restart>,
    /// The memory limit in bytes: `-m`, then `cache_memlimit`.
    memory_limit: AtomicU64,
    /// `stats detail`'s per-prefix counts.
    detail: admin::Detail,
    /// `lru_crawler`'s switches.
    crawler_settings: admin::CrawlerSettings,
}

/// The exit status of a server `--durable` stopped: a write it would have
/// acknowledged did not reach the disk (see [`stop_on_lost_write`]).
pub const EXIT_LOST_WRITE: i32 = 75;

/// Stop the server: with `--durable`, a sync of the items or a write of
/// the meta file failed. It cannot go on: its replies would acknowledge
/// changes a restart may not find, and after a failed `fdatasync` the
/// kernel may have dropped the pages it could not write, so no later sync
/// proves them (PostgreSQL stops on a failed fsync for the same reason).
/// A restart recovers what reached the disk.
pub fn stop_on_lost_write(e: &std::io::Error) -> ! {
    eprintln!("dlht-server: stopping (--durable): {e}: changes may not be on disk; a restart finds what is");
    std::process::exit(EXIT_LOST_WRITE)
}

/// The map of items: keyed by the hasher a persistent map keeps in its
/// file, so one type serves the cache in memory and the one in `-e DIR`.
pub type Items = ByteMap<FileHasher>;

impl Default for Store {
    fn default() -> Self {
        Store::new(Clock::system(), Settings::default())
    }
}

impl Store {
    /// An empty cache on `clock` (use [`Clock::manual`] to control time in
    /// tests), evicting by the policy `DLHT_EVICTION` names (the default:
    /// [`Policy::Clock`]).
    pub fn new(clock: Clock, settings: Settings) -> Self {
        Self::with_policy(clock, settings, Policy::from_env())
    }

    /// An empty cache evicting by `policy`.
    pub fn with_policy(clock: Clock, settings: Settings, policy: Policy) -> Self {
        Self::on(Items::with_hasher(FileHasher::random()), clock, settings, policy, None)
    }

    /// A cache kept in `dir` (`-e DIR`): the items a previous server left
    /// there — closed or killed — are back, with their flags, cas uniques
    /// and expiry times, and the clock goes on from the previous run's.
    pub fn open(dir: &std::path::Path, settings: Settings) -> std::io::Result<Self> {
        let io = |e: dlht::Error| std::io::Error::other(format!("{}: {e}", dir.display()));
        // Refuse a meta file that does not name the directory's map before
        // the open, which creates or recovers a map.
        restart::Restart::check_before_open(dir, Items::map_id_of(dir).map_err(io)?)?;
        // The heap has room for the memory limit twice over (size classes
        // round values up), and never less than 64 MiB; sparse on disk.
        let heap = settings.limit_maxbytes.saturating_mul(2).max(64 << 20);
        let mut options = OpenOptions::new().heap_bytes(heap);
        if settings.durable {
            // A sync per `durable` call, shared by the callers waiting.
            options = options.durability(Durability::Sync { every: std::time::Duration::ZERO });
        }
        let map = Items::open_with(dir, options).map_err(io)?;
        let r = map.recovery();
        // Read again under the map's directory lock (a server that held it
        // until now may have raised the cas bound since), and check it
        // before the file is rewritten below.
        let mut meta = match restart::Restart::read(dir)? {
            Some(m) => {
                restart::Restart::check_map(dir, &m, map.map_id())?;
                m
            }
            // Items without their clock and cas bound: their times would be
            // read against another clock and cas uniques handed out again.
            None if !map.is_empty() => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: items but no {}", dir.display(), restart::META_FILE),
                ))
            }
            None => restart::Meta {
                map_id: map.map_id(),
                origin: Clock::system().process_started(),
                ..restart::Meta::default()
            },
        };
        let cas = meta.cas_bound;
        meta.cas_bound = cas.saturating_add(restart::CAS_STEP);
        let len = map.len() as u64;
        let restart = restart::Restart::start(dir, meta, len, r.open_time, settings.durable)?;
        let mut s =
            Self::on(map, Clock::system_since(meta.origin), settings, Policy::from_env(), Some(restart));
        s.cas = AtomicU64::new(cas);
        s.oldest_live = AtomicU32::new(meta.oldest_live);
        s.oldest_cas = AtomicU64::new(meta.oldest_cas);
        Ok(s)
    }

    fn on(
        map: Items,
        clock: Clock,
        settings: Settings,
        policy: Policy,
        restart: Option<restart::Restart>,
    ) -> Self {
        Store {
            map,
            clock,
            cas: AtomicU64::new(0),
            oldest_live: AtomicU32::new(0),
            oldest_cas: AtomicU64::new(0),
            settings,
            verbosity: AtomicU32::new(0),
            counters: (0..COUNTER_SHARDS).map(|_| Shard::default()).collect(),
            evictor: evict::Evictor::new(policy),
            restart,
            memory_limit: AtomicU64::new(settings.limit_maxbytes),
            detail: admin::Detail::default(),
            crawler_settings: admin::CrawlerSettings::default(),
        }
    }

    /// The server clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The counters the server layer moves (the connections'): one shard
    /// of them, the same for every thread. The store counts in the shard
    /// of the thread it runs on; [`total`](Self::total) and `stats` sum
    /// the shards.
    pub fn counters(&self) -> &Counters {
        &self.counters[0].0
    }

    /// The calling thread's shard of the counters: a line no other thread
    /// writes, unless more threads than shards count.
    #[inline]
    fn local(&self) -> &Counters {
        &self.counters[shard_index() & (COUNTER_SHARDS - 1)].0
    }

    /// One counter summed over the shards (wrapping: a gauge may go up in
    /// one shard and down in another).
    pub fn total(&self, counter: impl Fn(&Counters) -> &AtomicU64) -> u64 {
        // Relaxed: statistics; each shard's word is read once.
        self.counters.iter().fold(0u64, |sum, shard| sum.wrapping_add(counter(&shard.0).load(Relaxed)))
    }

    /// The map of items (keys to [`item`](crate::item)-encoded values).
    pub fn map(&self) -> &Items {
        &self.map
    }

    /// Hand the items this thread evicted, replaced or removed to the
    /// global collector and free what no thread can still read: an event
    /// loop calls it before it waits for events, so that an idle server
    /// does not keep a burst's last items (up to a bag of 64 per thread,
    /// 6 MiB of 100 KB values) in memory.
    pub fn flush_reclamation(&self) {
        self.map.guard().flush();
    }

    /// True if changes are acknowledged only once on disk (`--durable`):
    /// the connection calls [`durable`](Self::durable) before it sends the
    /// replies of commands that changed items.
    pub fn is_durable(&self) -> bool {
        self.settings.durable && self.restart.is_some()
    }

    /// Wait until every change made before this call is on disk: the next
    /// group sync of the map's files (one for every caller waiting). Once
    /// a sync has failed, every call fails (see [`stop_on_lost_write`]).
    pub fn durable(&self) -> std::io::Result<()> {
        self.map.durable().map_err(|e| std::io::Error::other(format!("syncing the items: {e}")))?;
        if let Some(r) = &self.restart {
            // Relaxed: a statistic.
            r.durable_waits.fetch_add(1, Relaxed);
        }
        Ok(())
    }

    /// A fresh cas unique (memcached's `get_cas_id`: the first is 1).
    fn next_cas(&self) -> u64 {
        let cas = self.cas.fetch_add(1, Relaxed).wrapping_add(1);
        if let Some(r) = &self.restart {
            r.report(r.cover_cas(cas));
        }
        cas
    }

    /// memcached's `item_is_flushed` and `is_expired`, in its order.
    fn dead(&self, item: &ItemRef<'_>, now: u32) -> Option<Dead> {
        // Acquire: pairs with flush_all's Release, so the oldest_cas read
        // next is at least the one stored with this oldest_live.
        let oldest_live = self.oldest_live.load(Acquire);
        if oldest_live != 0 && oldest_live <= now {
            let oldest_cas = self.oldest_cas.load(Relaxed);
            if item.time <= oldest_live || (oldest_cas != 0 && item.cas != 0 && item.cas < oldest_cas) {
                return Some(Dead::Flushed);
            }
        }
        if is_expired(item.exptime, now) {
            return Some(Dead::Expired);
        }
        None
    }

    /// The live item in `bytes`, if any.
    fn live<'v>(&self, bytes: &'v [u8], now: u32) -> Option<ItemRef<'v>> {
        item::decode(bytes).filter(|item| self.dead(item, now).is_none())
    }

    /// The live item in `bytes`, if any, counting a dead one in
    /// `get_expired` or `get_flushed` as memcached's `do_item_get` does for
    /// every command that looks an item up.
    fn live_counted<'v>(&self, bytes: &'v [u8], now: u32) -> Option<ItemRef<'v>> {
        let item = item::decode(bytes)?;
        match self.dead(&item, now) {
            None => Some(item),
            Some(Dead::Flushed) => {
                bump(&self.local().get_flushed);
                None
            }
            Some(Dead::Expired) => {
                bump(&self.local().get_expired);
                None
            }
        }
    }

    /// Remove `key` if its value is (still) dead: a concurrent store of a
    /// live value is left alone.
    fn remove_dead(&self, key: &[u8], now: u32, guard: &Guard) {
        self.map.remove_if(key, |v| self.live(v, now).is_none(), guard);
    }

    /// [`Self::modify_as`], counting a dead item found in `get_flushed` or
    /// `get_expired` as memcached's lookups do (its storage commands, which
    /// do not, call `modify_as(false, ..)`).
    fn modify<'g, R>(
        &'g self,
        key: &[u8],
        now: u32,
        out: &mut Vec<u8>,
        guard: &'g Guard,
        judge: impl FnMut(Option<ItemRef<'g>>, &mut Vec<u8>) -> Verdict<R>,
    ) -> Result<Option<R>, dlht::Error> {
        self.modify_as(true, key, now, out, guard, judge)
    }

    /// Read-modify-write `key`: `judge` sees its live item (None if absent
    /// or dead) and either appends a new item to `out` and says
    /// [`Verdict::Store`], or says [`Verdict::Keep`]. The store is a
    /// compare-and-replace of the very version judged (an insert if the key
    /// was absent); if another thread changed the key meanwhile, `judge`
    /// runs again on the new state. `Ok(None)` when stored: the new item's
    /// bytes are left at `out[start..]` for the caller to use and remove.
    fn modify_as<'g, R>(
        &'g self,
        count_dead: bool,
        key: &[u8],
        now: u32,
        out: &mut Vec<u8>,
        guard: &'g Guard,
        mut judge: impl FnMut(Option<ItemRef<'g>>, &mut Vec<u8>) -> Verdict<R>,
    ) -> Result<Option<R>, dlht::Error> {
        let start = out.len();
        let mut current: Option<ValueRef<'g>> = self.map.get(key, guard);
        loop {
            out.truncate(start);
            let bytes = current.map(|v| v.as_bytes());
            let live =
                bytes.and_then(|b| if count_dead { self.live_counted(b, now) } else { self.live(b, now) });
            match judge(live, out) {
                Verdict::Keep(r) => {
                    out.truncate(start);
                    if current.is_some() && live.is_none() {
                        self.remove_dead(key, now, guard);
                    }
                    return Ok(Some(r));
                }
                Verdict::Store => {
                    let new = out.get(start..).unwrap_or_default();
                    if let Err(e) = self.make_room(key.len() + new.len(), now, guard) {
                        out.truncate(start);
                        return Err(e);
                    }
                    let result = match current {
                        Some(c) => self.map.compare_and_replace(key, c, new, guard).map(|r| r.map(drop)),
                        None => self.map.insert(key, new, guard).map(|r| r.map_err(Some)),
                    };
                    match result {
                        Ok(Ok(())) => {
                            // The insert may have grown the index past the
                            // limit: evict back under it (best effort).
                            let _ = self.make_room(0, now, guard);
                            return Ok(None);
                        }
                        Ok(Err(now_there)) => current = now_there,
                        Err(e) => {
                            out.truncate(start);
                            return Err(e);
                        }
                    }
                }
            }
        }
    }

    /// Start loading the index bins of `command`'s keys into the cache: a
    /// connection that read a pipeline of commands calls this for each of
    /// them before running the first, so that their lookups overlap (a
    /// pipeline is the paper's batch, as a multi-get is).
    pub fn prefetch(&self, command: &Command<'_>) {
        use crate::protocol::meta::MetaCommand;
        match command {
            Command::Get { keys, .. } | Command::Gat { keys, .. } => {
                keys.clone().for_each(|k| self.map.prefetch(k))
            }
            Command::Store { key, .. }
            | Command::Delete { key, .. }
            | Command::Incr { key, .. }
            | Command::Decr { key, .. }
            | Command::Touch { key, .. } => self.map.prefetch(key),
            Command::Meta(
                MetaCommand::Get { key, .. }
                | MetaCommand::Set { key, .. }
                | MetaCommand::Delete { key, .. }
                | MetaCommand::Arithmetic { key, .. },
            ) => {
                let mut scratch = [0; crate::protocol::text::KEY_MAX_LENGTH];
                self.map.prefetch(key.bytes(&mut scratch));
            }
            _ => {}
        }
    }

    /// Run one text-protocol command, appending its reply (if any) to `out`.
    pub fn execute(&self, command: &Command<'_>, out: &mut Vec<u8>) -> Outcome {
        match self.execute_within(command, out, 0, usize::MAX) {
            Progress::Done(outcome) => outcome,
            Progress::Paused { .. } => unreachable!("dlht-server invariant: no output bound, no pause"),
        }
    }

    /// Run one text-protocol command as [`Store::execute`] does, for a
    /// connection that bounds its pending replies: a get, gets, gat or gats
    /// starts at byte `resume_at` of its key list (0, or what an earlier
    /// call paused at) and stops once `out` holds more than `out_limit`
    /// bytes, or after `KEYS_PER_SLICE` (4,096) keys, with keys left,
    /// so that a get line naming a large item a million times never builds
    /// its whole reply in memory (memcached sends such a reply as the
    /// client reads it). `END` comes with the last key. Other commands run
    /// whole.
    pub fn execute_within(
        &self,
        command: &Command<'_>,
        out: &mut Vec<u8>,
        resume_at: usize,
        out_limit: usize,
    ) -> Progress {
        let guard = self.map.guard();
        let now = self.clock.now();
        match command {
            Command::Get { keys, cas } => {
                let list = keys.as_bytes();
                let rest = Keys::new(list.get(resume_at..).unwrap_or_default());
                if let Some(key) = self.get_many(rest, *cas, now, out, out_limit, &guard) {
                    return Progress::Paused { resume_at: end_within(list, key) };
                }
                out.extend_from_slice(b"END\r\n");
            }
            Command::Gat { exptime, keys, cas } => {
                let exptime = self.clock.realtime(*exptime);
                let list = keys.as_bytes();
                let mut rest = Keys::new(list.get(resume_at..).unwrap_or_default());
                let mut slice = if out_limit == usize::MAX { usize::MAX } else { KEYS_PER_SLICE };
                while let Some(key) = rest.next() {
                    self.gat(key, exptime, *cas, now, out, &guard);
                    slice = slice.saturating_sub(1);
                    if (out.len() > out_limit || slice == 0) && !rest.is_empty() {
                        return Progress::Paused { resume_at: end_within(list, key) };
                    }
                }
                out.extend_from_slice(b"END\r\n");
            }
            Command::LongKeyAfter { keys, exptime } => {
                // Each key's reply goes nowhere: one item's worth of memory
                // at a time, however long the line.
                let exptime = exptime.map(|e| self.clock.realtime(e));
                let mut dropped = Vec::new();
                for key in keys.clone() {
                    match exptime {
                        Some(exptime) => self.gat(key, exptime, false, now, &mut dropped, &guard),
                        None => self.get(key, self.map.get(key, &guard), false, now, &mut dropped, &guard),
                    }
                    dropped.clear();
                }
                out.extend_from_slice(reply::CLIENT_ERROR_BAD_FORMAT);
            }
            Command::Store { op, key, flags, exptime, data, cas_unique, noreply } => {
                self.note_detail(key, admin::DetailOp::Set);
                let exptime = self.clock.realtime(*exptime);
                let r = self.store(*op, key, *flags, exptime, data, *cas_unique, now, out, &guard);
                reply_unless(out, *noreply, r);
            }
            Command::Delete { key, noreply } => {
                self.note_detail(key, admin::DetailOp::Delete);
                let r = match self.map.remove(key, &guard) {
                    Some(v) if self.live_counted(&v, now).is_some() => {
                        bump(&self.local().delete_hits);
                        &b"DELETED\r\n"[..]
                    }
                    _ => {
                        bump(&self.local().delete_misses);
                        &b"NOT_FOUND\r\n"[..]
                    }
                };
                reply_unless(out, *noreply, r);
            }
            Command::Incr { key, delta, noreply } => {
                self.arithmetic(key, true, *delta, *noreply, now, out, &guard)
            }
            Command::Decr { key, delta, noreply } => {
                self.arithmetic(key, false, *delta, *noreply, now, out, &guard)
            }
            Command::Touch { key, exptime, noreply } => {
                let exptime = self.clock.realtime(*exptime);
                let start = out.len();
                let r = if self.touch(key, exptime, now, out, &guard).is_some() {
                    &b"TOUCHED\r\n"[..]
                } else {
                    &b"NOT_FOUND\r\n"[..]
                };
                out.truncate(start);
                reply_unless(out, *noreply, r);
            }
            Command::FlushAll { delay: Some(delay), noreply } => {
                self.flush_all(*delay, now);
                reply_unless(out, *noreply, b"OK\r\n");
            }
            Command::FlushAll { delay: None, noreply } => {
                bump(&self.local().cmd_flush);
                reply_unless(out, *noreply, reply::CLIENT_ERROR_INVALID_EXPTIME);
            }
            Command::Version => {
                out.extend_from_slice(b"VERSION ");
                out.extend_from_slice(VERSION.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Command::Verbosity { level, noreply } => {
                self.verbosity.store(*level, Relaxed);
                reply_unless(out, *noreply, b"OK\r\n");
            }
            Command::Quit => return Progress::Done(Outcome::Close),
            Command::Stats { arg, args } => match arg {
                None => self.stats(now, out),
                Some(b"settings") => self.stats_settings(out),
                Some(b"detail") => {
                    let mut after = args.clone();
                    after.next();
                    self.stats_detail(after, out)
                }
                Some(b"sizes") => self.stats_sizes(out),
                Some(b"reset") => {
                    self.counters.iter().for_each(|shard| shard.0.reset());
                    // memcached's `stats reset` empties the prefix table too.
                    self.detail.clear();
                    out.extend_from_slice(b"RESET\r\n");
                }
                Some(_) => out.extend_from_slice(reply::ERROR),
            },
            Command::Shutdown { .. } => out.extend_from_slice(reply::SHUTDOWN_NOT_ENABLED),
            Command::Admin { name, args } => self.admin(name, args.clone(), out),
            Command::Meta(m) => self.meta(m, now, out, &guard),
        }
        Progress::Done(Outcome::Continue)
    }

    /// The keys of a get/gets, [`GET_PASS`] at a time through the map's
    /// prefetching `get_many` (a multi-get is the paper's batch): the index
    /// lookups overlap, then every value found is prefetched whole before
    /// the first is copied out. Stops once `out` holds more than
    /// `out_limit` bytes with keys left, returning the last key it answered
    /// (the rest of a pass is looked up again by the next call).
    fn get_many<'k>(
        &self,
        mut keys: Keys<'k>,
        cas: bool,
        now: u32,
        out: &mut Vec<u8>,
        out_limit: usize,
        guard: &Guard,
    ) -> Option<&'k [u8]> {
        let mut pass: [&[u8]; GET_PASS] = [&[]; GET_PASS];
        let mut found: [Option<ValueRef<'_>>; GET_PASS] = [None; GET_PASS];
        let mut slice = if out_limit == usize::MAX { usize::MAX } else { KEYS_PER_SLICE };
        while !keys.is_empty() {
            let mut n = 0;
            for (slot, key) in pass.iter_mut().zip(keys.by_ref()) {
                *slot = key;
                n += 1;
            }
            if n == 1 {
                self.get(pass[0], self.map.get(pass[0], guard), cas, now, out, guard);
            } else {
                self.map
                    .get_many(&pass[..n], &mut found[..n], Access::Read, guard)
                    .expect("dlht-server invariant: as many answers as keys");
            }
            for (i, key) in pass[..n].iter().enumerate() {
                if n > 1 {
                    self.get(key, found[i], cas, now, out, guard);
                }
                slice = slice.saturating_sub(1);
                if (out.len() > out_limit || slice == 0) && (i + 1 < n || !keys.is_empty()) {
                    return Some(key);
                }
            }
        }
        None
    }

    /// Count a storage command whose data block was bad (see
    /// [`Parsed::BadDataChunk`](crate::protocol::command::Parsed::BadDataChunk)).
    pub fn count_bad_data_chunk(&self) {
        bump(&self.local().cmd_set);
    }

    /// A storage command refused as too large ([`Parsed::Refused`](crate::protocol::command::Parsed::Refused)): count
    /// it in `store_too_large` and, for a `set` or an `ms` (`unlink`),
    /// remove the key's item without a reply, as memcached unlinks the item
    /// the command meant to replace.
    pub fn refuse_too_large(&self, unlink: Option<&MetaKey<'_>>) {
        bump(&self.local().store_too_large);
        if let Some(key) = unlink {
            let mut scratch = [0; crate::protocol::text::KEY_MAX_LENGTH];
            self.map.remove(key.bytes(&mut scratch), &self.map.guard());
        }
    }

    /// One key of get/gets, whose value the map gave as `value`.
    fn get(
        &self,
        key: &[u8],
        value: Option<ValueRef<'_>>,
        cas: bool,
        now: u32,
        out: &mut Vec<u8>,
        guard: &Guard,
    ) {
        bump(&self.local().cmd_get);
        let Some(value) = value else {
            bump(&self.local().get_misses);
            self.note_detail(key, admin::DetailOp::Get(false));
            return;
        };
        let Some(item) = item::decode(&value) else {
            bump(&self.local().get_misses);
            return;
        };
        match self.dead(&item, now) {
            None => {
                bump(&self.local().get_hits);
                self.note_detail(key, admin::DetailOp::Get(true));
                self.note_access(value);
                push_value(out, key, &item, cas);
            }
            Some(dead) => {
                bump(&self.local().get_misses);
                self.note_detail(key, admin::DetailOp::Get(false));
                // Counted by the lookup that takes it out, as memcached's
                // does: a multi-get naming the key twice finds it in one
                // batch, but memcached's second lookup finds nothing.
                if self.remove_exact(key, value, guard) {
                    bump(match dead {
                        Dead::Flushed => &self.local().get_flushed,
                        Dead::Expired => &self.local().get_expired,
                    });
                }
            }
        }
    }

    /// Give the live item of `key` the expiry `exptime` (a new version with
    /// the same data, flags and cas, as memcached keeps the cas on touch):
    /// the new item's bytes at `out[start..]` where `start` is returned.
    fn touch(&self, key: &[u8], exptime: u32, now: u32, out: &mut Vec<u8>, guard: &Guard) -> Option<usize> {
        bump(&self.local().cmd_touch);
        let start = out.len();
        let judged = self.modify(key, now, out, guard, |live, buf| match live {
            Some(item) => {
                item::push(buf, &Meta { exptime, time: now, ..item.meta() }, &[item.data]);
                Verdict::Store
            }
            None => Verdict::Keep(()),
        });
        if let Ok(None) = judged {
            bump(&self.local().touch_hits);
            // memcached's touch bumps the item in place: fetched from now.
            self.mark_fetched(key, guard);
            Some(start)
        } else {
            bump(&self.local().touch_misses);
            None
        }
    }

    /// One key of gat/gats.
    fn gat(&self, key: &[u8], exptime: u32, cas: bool, now: u32, out: &mut Vec<u8>, guard: &Guard) {
        let touched = self.touch(key, exptime, now, out, guard);
        self.note_detail(key, admin::DetailOp::Get(touched.is_some()));
        let Some(start) = touched else { return };
        let end = out.len();
        if let Some(item) = out.get(start..end).and_then(item::decode) {
            let meta = item.meta();
            push_value_line(out, key, meta.flags, end - start - HEADER, cas.then_some(meta.cas));
            out.extend_from_within(start + HEADER..end);
            out.extend_from_slice(b"\r\n");
        }
        out.drain(start..end);
    }

    /// set/add/replace/append/prepend/cas: the reply.
    #[allow(clippy::too_many_arguments)]
    fn store(
        &self,
        op: StoreOp,
        key: &[u8],
        flags: u32,
        exptime: u32,
        data: &[u8],
        cas_unique: u64,
        now: u32,
        out: &mut Vec<u8>,
        guard: &Guard,
    ) -> &'static [u8] {
        bump(&self.local().cmd_set);
        let start = out.len();
        let limits = Limits { max_item_size: self.settings.max_item_size, ..Limits::default() };
        // A storage command: memcached's `do_store_item` replaces a dead item
        // without counting it in get_expired or get_flushed.
        let judged = self.modify_as(false, key, now, out, guard, |live, buf| {
            // memcached takes a cas unique only for an item it links.
            let fresh = || Meta { flags, exptime, time: now, cas: self.next_cas(), ..Meta::default() };
            match (op, live) {
                (StoreOp::Set, _) | (StoreOp::Add, None) | (StoreOp::Replace, Some(_)) => {
                    item::push(buf, &fresh(), &[data]);
                }
                (StoreOp::Add, Some(_)) | (StoreOp::Replace | StoreOp::Append | StoreOp::Prepend, None) => {
                    return Verdict::Keep(&b"NOT_STORED\r\n"[..]);
                }
                // memcached 1.6.18: an append/prepend whose item would be
                // over `-I` is NOT_STORED.
                (StoreOp::Append | StoreOp::Prepend, Some(item))
                    if !limits.item_fits(
                        key.len(),
                        item.flags,
                        item.data.len().saturating_add(data.len()),
                    ) =>
                {
                    return Verdict::Keep(&b"NOT_STORED\r\n"[..]);
                }
                (StoreOp::Append | StoreOp::Prepend, Some(item)) => {
                    // A new item in memcached: not stale, no token sent.
                    let meta = Meta { cas: self.next_cas(), time: now, ..item.meta().fresh() };
                    let parts = if op == StoreOp::Append { [item.data, data] } else { [data, item.data] };
                    item::push(buf, &meta, &parts);
                }
                (StoreOp::Cas, None) => return Verdict::Keep(&b"NOT_FOUND\r\n"[..]),
                (StoreOp::Cas, Some(item)) if item.cas != cas_unique => {
                    return Verdict::Keep(&b"EXISTS\r\n"[..])
                }
                (StoreOp::Cas, Some(_)) => item::push(buf, &fresh(), &[data]),
            }
            Verdict::Store
        });
        out.truncate(start);
        let r = match judged {
            Ok(None) => {
                bump(&self.local().total_items);
                b"STORED\r\n"
            }
            Ok(Some(r)) => r,
            Err(_) => {
                bump(&self.local().store_no_memory);
                // As memcached: a set that fails takes the old item with it,
                // so that no client reads the value it meant to replace.
                if op == StoreOp::Set {
                    self.map.remove(key, guard);
                }
                SERVER_ERROR_OUT_OF_MEMORY_STORING
            }
        };
        if op == StoreOp::Cas {
            bump(match r {
                b"STORED\r\n" => &self.local().cas_hits,
                b"EXISTS\r\n" => &self.local().cas_badval,
                _ => &self.local().cas_misses,
            });
        }
        r
    }

    /// incr/decr.
    #[allow(clippy::too_many_arguments)]
    fn arithmetic(
        &self,
        key: &[u8],
        incr: bool,
        delta: u64,
        noreply: bool,
        now: u32,
        out: &mut Vec<u8>,
        guard: &Guard,
    ) {
        let start = out.len();
        let mut value = 0u64;
        let mut grew = false;
        // A number rewritten in place stays fetched if it was (see below).
        let was_fetched = self.was_fetched(key, now, guard);
        let judged = self.modify(key, now, out, guard, |live, buf| {
            let Some(item) = live else { return Verdict::Keep(&b"NOT_FOUND\r\n"[..]) };
            // memcached: "Can't delta zero byte values"; then strtoull.
            let Some(old) = (!item.data.is_empty()).then(|| data_number(item.data)).flatten() else {
                return Verdict::Keep(CLIENT_ERROR_NON_NUMERIC);
            };
            value = if incr { old.wrapping_add(delta) } else { old.saturating_sub(delta) };
            let len = meta::decimal_len(value);
            // memcached rewrites the number in place when it fits, padding
            // with spaces to the old length; else it makes a new item
            // (which starts neither stale nor with a token sent).
            grew = len > item.data.len();
            let kept = if grew { item.meta().fresh() } else { item.meta() };
            item::push_header(buf, &Meta { cas: self.next_cas(), time: now, ..kept });
            let digits = buf.len();
            let _ = write!(buf, "{value}");
            buf.resize(digits + len.max(item.data.len()), b' ');
            Verdict::Store
        });
        out.truncate(start);
        let (hits, misses) = if incr {
            (&self.local().incr_hits, &self.local().incr_misses)
        } else {
            (&self.local().decr_hits, &self.local().decr_misses)
        };
        match judged {
            Ok(None) => {
                bump(hits);
                if grew {
                    bump(&self.local().total_items);
                } else if was_fetched {
                    // memcached's item, changed in place, keeps its mark.
                    self.mark_fetched(key, guard);
                }
                if !noreply {
                    let _ = write!(out, "{value}\r\n");
                }
            }
            Ok(Some(r)) => {
                if r == b"NOT_FOUND\r\n" {
                    bump(misses);
                }
                reply_unless(out, noreply, r);
            }
            Err(_) => reply_unless(out, noreply, SERVER_ERROR_OUT_OF_MEMORY),
        }
    }

    /// memcached's `process_flush_all_command` (with cas enabled): items
    /// last modified at or before `oldest_live`, or older than `oldest_cas`,
    /// are dead once the clock reaches `oldest_live`.
    fn flush_all(&self, delay: i64, now: u32) {
        bump(&self.local().cmd_flush);
        let flush = || {
            let new_oldest = if delay > 0 { self.clock.realtime(delay) } else { now };
            let oldest_live = new_oldest.wrapping_sub(1);
            if oldest_live <= now {
                self.oldest_cas.store(self.next_cas(), Relaxed);
            }
            // Release: publishes the oldest_cas above with it (see `dead`).
            self.oldest_live.store(oldest_live, Release);
            (oldest_live, self.oldest_cas.load(Relaxed))
        };
        match &self.restart {
            // In the meta file before the reply (a flush survives a kill).
            Some(r) => r.report(r.flushed(flush)),
            None => drop(flush()),
        }
    }

    /// `stats settings`: the settings this store holds, in memcached's
    /// order (the listener's, slabs', LRU's and TLS's are not here).
    fn stats_settings(&self, out: &mut Vec<u8>) {
        let mut stat = |name: &str, value: &dyn std::fmt::Display| {
            let _ = write!(out, "STAT {name} {value}\r\n");
        };
        stat("maxbytes", &self.memory_limit.load(Relaxed));
        stat("maxconns", &self.settings.max_connections);
        stat("verbosity", &self.verbosity.load(Relaxed));
        stat("oldest", &self.oldest_live.load(Relaxed));
        stat("evictions", &"on");
        stat("num_threads", &self.settings.threads);
        stat("cas_enabled", &"yes");
        stat("item_size_max", &self.settings.max_item_size);
        stat("flush_enabled", &"yes");
        if self.restart.is_some() {
            // dlht's own (`-e`): whether changes are answered once on disk.
            stat("durable", &if self.is_durable() { "yes" } else { "no" });
        }
        out.extend_from_slice(b"END\r\n");
    }

    /// `stats` with no argument: memcached's general statistics that this
    /// store keeps, in memcached's order.
    fn stats(&self, now: u32, out: &mut Vec<u8>) {
        let c = |f: fn(&Counters) -> &AtomicU64| self.total(f);
        let mut stat = |name: &str, value: &dyn std::fmt::Display| {
            let _ = write!(out, "STAT {name} {value}\r\n");
        };
        stat("pid", &std::process::id());
        stat("uptime", &now.wrapping_sub(ITEM_UPDATE_INTERVAL));
        stat("time", &self.clock.unix_time());
        stat("version", &VERSION);
        stat("pointer_size", &usize::BITS);
        stat("max_connections", &self.settings.max_connections);
        stat("curr_connections", &c(|c| &c.curr_connections));
        stat("total_connections", &c(|c| &c.total_connections));
        stat("cmd_get", &c(|c| &c.cmd_get));
        stat("cmd_set", &c(|c| &c.cmd_set));
        stat("cmd_flush", &c(|c| &c.cmd_flush));
        stat("cmd_touch", &c(|c| &c.cmd_touch));
        stat("cmd_meta", &c(|c| &c.meta_cmds));
        stat("get_hits", &c(|c| &c.get_hits));
        stat("get_misses", &c(|c| &c.get_misses));
        stat("get_expired", &c(|c| &c.get_expired));
        stat("get_flushed", &c(|c| &c.get_flushed));
        stat("delete_misses", &c(|c| &c.delete_misses));
        stat("delete_hits", &c(|c| &c.delete_hits));
        stat("incr_misses", &c(|c| &c.incr_misses));
        stat("incr_hits", &c(|c| &c.incr_hits));
        stat("decr_misses", &c(|c| &c.decr_misses));
        stat("decr_hits", &c(|c| &c.decr_hits));
        stat("cas_misses", &c(|c| &c.cas_misses));
        stat("cas_hits", &c(|c| &c.cas_hits));
        stat("cas_badval", &c(|c| &c.cas_badval));
        stat("touch_hits", &c(|c| &c.touch_hits));
        stat("touch_misses", &c(|c| &c.touch_misses));
        stat("store_too_large", &c(|c| &c.store_too_large));
        stat("store_no_memory", &c(|c| &c.store_no_memory));
        stat("limit_maxbytes", &self.memory_limit.load(Relaxed));
        stat("threads", &self.settings.threads);
        let memory = self.map.memory();
        stat("bytes", &memory.value_bytes);
        // memcached's name for its hash table's size: here the index's bins,
        // its link buckets and a resize's second index.
        stat("hash_bytes", &(memory.index_bytes + memory.link_bytes + memory.resize_bytes));
        stat("hash_is_expanding", &u8::from(memory.resize_bytes > 0));
        stat("curr_items", &self.map.len());
        stat("total_items", &c(|c| &c.total_items));
        stat("expired_unfetched", &c(|c| &c.expired_unfetched));
        stat("evicted_unfetched", &c(|c| &c.evicted_unfetched));
        stat("evictions", &c(|c| &c.evictions));
        stat("reclaimed", &c(|c| &c.reclaimed));
        stat("crawler_reclaimed", &c(|c| &c.crawler_reclaimed));
        if let Some(r) = &self.restart {
            // Warm restart (`-e`): items found in the directory at start,
            // and the time the open took, recovery included.
            stat("restart_items_recovered", &r.recovered_items);
            stat("restart_recovery_us", &r.recovery_time.as_micros());
            if self.is_durable() {
                // `--durable`: reads whose replies waited for the disk.
                stat("durable_waits", &r.durable_waits.load(Relaxed));
            }
        }
        out.extend_from_slice(b"END\r\n");
    }
}

/// Append `r` unless the command said `noreply`.
fn reply_unless(out: &mut Vec<u8>, noreply: bool, r: &[u8]) {
    if !noreply {
        out.extend_from_slice(r);
    }
}

/// `VALUE <key> <flags> <bytes>[ <cas>]\r\n`.
fn push_value_line(out: &mut Vec<u8>, key: &[u8], flags: u32, len: usize, cas: Option<u64>) {
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    let _ = write!(out, " {flags} {len}");
    if let Some(cas) = cas {
        let _ = write!(out, " {cas}");
    }
    out.extend_from_slice(b"\r\n");
}

/// One hit of a get-family command.
fn push_value(out: &mut Vec<u8>, key: &[u8], item: &ItemRef<'_>, cas: bool) {
    push_value_line(out, key, item.flags, item.data.len(), cas.then_some(item.cas));
    out.extend_from_slice(item.data);
    out.extend_from_slice(b"\r\n");
}

/// Expected replies are as observed from memcached 1.6.18 (`memcached -U 0`
/// on loopback, driven by a python socket client), except where a comment
/// says the store differs on purpose.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::text::{parse, Limits, Parsed};

    const T0: i64 = 1_700_000_000;

    pub(super) fn store() -> Store {
        Store::new(Clock::manual(T0, 62), Settings::default())
    }

    /// Parse and run every command of `input`; the replies, and whether a
    /// command asked to close.
    pub(super) fn run_all(s: &Store, input: &[u8]) -> (Vec<u8>, Outcome) {
        let mut out = Vec::new();
        let mut rest = input;
        loop {
            match parse(rest, &Limits::default()) {
                Parsed::Command { command, consumed } => {
                    if s.execute(&command, &mut out) == Outcome::Close {
                        return (out, Outcome::Close);
                    }
                    rest = &rest[consumed..];
                }
                Parsed::Error { reply, consumed, close } => {
                    out.extend_from_slice(reply);
                    if close {
                        return (out, Outcome::Close);
                    }
                    rest = &rest[consumed..];
                }
                Parsed::BadDataChunk { reply, consumed } => {
                    s.count_bad_data_chunk();
                    out.extend_from_slice(reply);
                    rest = &rest[consumed..];
                }
                Parsed::Refused { unlink, reply, line, remaining } if line + remaining <= rest.len() => {
                    s.refuse_too_large(unlink.as_ref());
                    out.extend_from_slice(reply);
                    rest = &rest[line + remaining..];
                }
                Parsed::Incomplete | Parsed::Swallow { .. } | Parsed::Refused { .. } => {
                    return (out, Outcome::Continue)
                }
            }
        }
    }

    pub(super) fn run(s: &Store, input: &str) -> String {
        String::from_utf8(run_all(s, input.as_bytes()).0).unwrap()
    }

    pub(super) fn stat(s: &Store, name: &str) -> u64 {
        let all = run(s, "stats\r\n");
        let prefix = format!("STAT {name} ");
        all.lines().find_map(|l| l.strip_prefix(&prefix)).unwrap().parse().unwrap()
    }

    #[test]
    fn get_and_gets() {
        let s = store();
        assert_eq!(run(&s, "get a\r\n"), "END\r\n");
        assert_eq!(run(&s, "set a 5 0 3\r\n100\r\n"), "STORED\r\n");
        assert_eq!(run(&s, "set b 0 0 0\r\n\r\n"), "STORED\r\n");
        assert_eq!(run(&s, "get a x b\r\n"), "VALUE a 5 3\r\n100\r\nVALUE b 0 0\r\n\r\nEND\r\n");
        assert_eq!(run(&s, "gets a\r\n"), "VALUE a 5 3 1\r\n100\r\nEND\r\n");
        assert_eq!(run(&s, "gets a a\r\n"), "VALUE a 5 3 1\r\n100\r\nVALUE a 5 3 1\r\n100\r\nEND\r\n");
        assert_eq!((stat(&s, "cmd_get"), stat(&s, "get_hits"), stat(&s, "get_misses")), (7, 5, 2));
    }

    #[test]
    fn storage_commands() {
        let s = store();
        assert_eq!(run(&s, "add k 1 0 1\r\na\r\n"), "STORED\r\n");
        assert_eq!(run(&s, "add k 2 0 1\r\nb\r\n"), "NOT_STORED\r\n");
        assert_eq!(run(&s, "replace zz 0 0 1\r\nx\r\n"), "NOT_STORED\r\n");
        assert_eq!(run(&s, "append zz 0 0 1\r\nx\r\n"), "NOT_STORED\r\n");
        assert_eq!(run(&s, "prepend zz 0 0 1\r\nx\r\n"), "NOT_STORED\r\n");
        assert_eq!(run(&s, "replace k 3 0 2\r\nbb\r\n"), "STORED\r\n");
        // append/prepend keep the item's flags and exptime.
        assert_eq!(run(&s, "append k 7 -1 2\r\ncc\r\n"), "STORED\r\n");
        assert_eq!(run(&s, "prepend k 9 -1 2\r\naa\r\n"), "STORED\r\n");
        assert_eq!(run(&s, "gets k\r\n"), "VALUE k 3 6 4\r\naabbcc\r\nEND\r\n");
        assert_eq!(run(&s, "cas k 0 0 1 3\r\nx\r\n"), "EXISTS\r\n");
        assert_eq!(run(&s, "cas zz 0 0 1 3\r\nx\r\n"), "NOT_FOUND\r\n");
        assert_eq!(run(&s, "cas k 4 0 1 4\r\nx\r\n"), "STORED\r\n");
        assert_eq!(run(&s, "cas k 4 0 1 4\r\ny\r\n"), "EXISTS\r\n");
        assert_eq!(run(&s, "gets k\r\n"), "VALUE k 4 1 5\r\nx\r\nEND\r\n");
        // Refused stores take no cas unique; an immediate flush takes one,
        // a delayed one none (memcached 1.6.18: uniques 31, 33, 34).
        run(&s, "flush_all\r\nset k 0 0 1\r\n1\r\n");
        assert_eq!(run(&s, "gets k\r\n"), "VALUE k 0 1 7\r\n1\r\nEND\r\n");
        run(&s, "flush_all 100\r\nset k 0 0 1\r\n1\r\n");
        assert_eq!(run(&s, "gets k\r\n"), "VALUE k 0 1 8\r\n1\r\nEND\r\n");
        assert_eq!(
            [stat(&s, "cmd_set"), stat(&s, "cas_hits"), stat(&s, "cas_badval"), stat(&s, "cas_misses")],
            [14, 1, 2, 1]
        );
        assert_eq!(stat(&s, "total_items"), 7);
        assert_eq!(stat(&s, "curr_items"), 1);
    }

    #[test]
    fn append_over_the_item_size_limit_is_not_stored() {
        let s = Store::new(Clock::manual(T0, 62), Settings { max_item_size: 1000, ..Settings::default() });
        let big = "a".repeat(900);
        assert_eq!(run(&s, &format!("set big 0 0 900\r\n{big}\r\n")), "STORED\r\n");
        let more = "b".repeat(100);
        assert_eq!(run(&s, &format!("append big 0 0 100\r\n{more}\r\n")), "NOT_STORED\r\n");
        assert_eq!(run(&s, &format!("prepend big 0 0 100\r\n{more}\r\n")), "NOT_STORED\r\n");
        assert_eq!(run(&s, "append big 0 0 1\r\nb\r\n"), "STORED\r\n");
    }

    #[test]
    fn cas_unique_changes_on_every_modification() {
        let s = store();
        let cas_of = |s: &Store| -> u64 {
            let r = run(s, "gets k\r\n");
            r.lines().next().unwrap().rsplit(' ').next().unwrap().parse().unwrap()
        };
        run(&s, "set k 0 0 1\r\n1\r\n");
        let mut seen = vec![cas_of(&s)];
        for cmd in [
            "set k 0 0 1\r\n2\r\n",
            "replace k 0 0 1\r\n3\r\n",
            "append k 0 0 1\r\n4\r\n",
            "prepend k 0 0 1\r\n5\r\n",
            "incr k 1\r\n",
            "decr k 1\r\n",
        ] {
            run(&s, cmd);
            let cas = cas_of(&s);
            assert!(!seen.contains(&cas), "{cmd}");
            seen.push(cas);
        }
        // touch and gat keep the cas (memcached 1.6.18: "gets" after "touch"
        // shows the same unique).
        run(&s, "touch k 100\r\n");
        assert_eq!(cas_of(&s), *seen.last().unwrap());
        let cas = *seen.last().unwrap();
        assert_eq!(run(&s, "gats 100 k\r\n"), format!("VALUE k 0 3 {cas}\r\n534\r\nEND\r\n"));
        assert_eq!(cas_of(&s), cas);
    }

    #[test]
    fn delete() {
        let s = store();
        run(&s, "set k 0 0 1\r\nx\r\n");
        assert_eq!(run(&s, "delete k\r\n"), "DELETED\r\n");
        assert_eq!(run(&s, "delete k\r\n"), "NOT_FOUND\r\n");
        assert_eq!(run(&s, "get k\r\n"), "END\r\n");
        assert_eq!((stat(&s, "delete_hits"), stat(&s, "delete_misses")), (1, 1));
        run(&s, "set k 0 -1 1\r\nx\r\n");
        assert_eq!(run(&s, "delete k\r\n"), "NOT_FOUND\r\n");
    }

    #[test]
    fn incr_decr() {
        let s = store();
        assert_eq!(run(&s, "incr zz 1\r\n"), "NOT_FOUND\r\n");
        assert_eq!(run(&s, "decr zz 1\r\n"), "NOT_FOUND\r\n");
        // A shorter number is written in place, padded with spaces.
        run(&s, "set a 5 0 3\r\n100\r\n");
        assert_eq!(run(&s, "decr a 1\r\n"), "99\r\n");
        assert_eq!(run(&s, "get a\r\n"), "VALUE a 5 3\r\n99 \r\nEND\r\n");
        assert_eq!(run(&s, "incr a 1\r\n"), "100\r\n");
        assert_eq!(run(&s, "get a\r\n"), "VALUE a 5 3\r\n100\r\nEND\r\n");
        // A longer one makes the value longer.
        assert_eq!(run(&s, "incr a 900\r\n"), "1000\r\n");
        assert_eq!(run(&s, "get a\r\n"), "VALUE a 5 4\r\n1000\r\nEND\r\n");
        run(&s, "append a 7 0 1\r\nx\r\n");
        assert_eq!(
            run(&s, "incr a 1\r\n"),
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
        );
        // incr wraps at 2^64; decr stops at 0.
        run(&s, "set n 0 0 20\r\n18446744073709551615\r\n");
        assert_eq!(run(&s, "incr n 1\r\n"), "0\r\n");
        assert_eq!(run(&s, "get n\r\n"), "VALUE n 0 20\r\n0                   \r\nEND\r\n");
        assert_eq!(run(&s, "decr n 5\r\n"), "0\r\n");
        run(&s, "set n 0 0 20\r\n18446744073709551616\r\n");
        assert_eq!(
            run(&s, "incr n 1\r\n"),
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
        );
        run(&s, "set n 0 0 5\r\n 12 x\r\n");
        assert_eq!(run(&s, "incr n 1\r\n"), "13\r\n");
        assert_eq!(run(&s, "get n\r\n"), "VALUE n 0 5\r\n13   \r\nEND\r\n");
        run(&s, "set n 0 0 0\r\n\r\n");
        assert_eq!(
            run(&s, "incr n 1\r\n"),
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
        );
        run(&s, "set n 0 0 25\r\n0000000000000000000000001\r\n");
        assert_eq!(run(&s, "incr n 1\r\n"), "2\r\n");
        assert_eq!(run(&s, "get n\r\n"), "VALUE n 0 25\r\n2                        \r\nEND\r\n");
        run(&s, "set n 0 0 2\r\n-1\r\n");
        assert_eq!(
            run(&s, "incr n 1\r\n"),
            "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
        );
        run(&s, "set n 0 0 3\r\n+12\r\n");
        assert_eq!(run(&s, "incr n 1\r\n"), "13\r\n");
        assert_eq!(run(&s, "get n\r\n"), "VALUE n 0 3\r\n13 \r\nEND\r\n");
        assert_eq!(run(&s, "incr n 18446744073709551615\r\n"), "12\r\n");
        assert_eq!([stat(&s, "incr_hits"), stat(&s, "incr_misses")], [7, 1]);
        assert_eq!([stat(&s, "decr_hits"), stat(&s, "decr_misses")], [2, 1]);
    }

    /// A session replayed against a fresh memcached 1.6.18 (cas uniques
    /// included: both start at 1 and take one per linked item, incr/decr
    /// and immediate flush), each command's reply byte for byte.
    #[test]
    fn session_matches_memcached() {
        let s = store();
        let session: &[(&str, &str)] = &[
            ("get a b c\r\n", "END\r\n"),
            ("set a 1 0 3\r\nabc\r\n", "STORED\r\n"),
            ("gets a\r\n", "VALUE a 1 3 1\r\nabc\r\nEND\r\n"),
            ("add a 2 0 1\r\nx\r\n", "NOT_STORED\r\n"),
            ("add b 2 0 1\r\nx\r\n", "STORED\r\n"),
            ("replace b 3 0 2\r\nyy\r\n", "STORED\r\n"),
            ("replace c 3 0 2\r\nyy\r\n", "NOT_STORED\r\n"),
            ("append b 9 0 2\r\nzz\r\n", "STORED\r\n"),
            ("prepend b 9 0 2\r\nww\r\n", "STORED\r\n"),
            ("gets a b c\r\n", "VALUE a 1 3 1\r\nabc\r\nVALUE b 3 6 5\r\nwwyyzz\r\nEND\r\n"),
            ("cas a 0 0 1 99\r\nq\r\n", "EXISTS\r\n"),
            ("cas a 7 0 1 1\r\nq\r\n", "STORED\r\n"),
            ("gets a\r\n", "VALUE a 7 1 6\r\nq\r\nEND\r\n"),
            ("cas c 0 0 1 1\r\nq\r\n", "NOT_FOUND\r\n"),
            ("incr a 5\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
            ("set n 0 0 2\r\n10\r\n", "STORED\r\n"),
            ("incr n 5\r\n", "15\r\n"),
            ("decr n 100\r\n", "0\r\n"),
            ("gets n\r\n", "VALUE n 0 2 9\r\n0 \r\nEND\r\n"),
            ("incr n 18446744073709551615\r\n", "18446744073709551615\r\n"),
            ("incr n 2\r\n", "1\r\n"),
            ("gets n\r\n", "VALUE n 0 20 11\r\n1                   \r\nEND\r\n"),
            ("set n 0 0 1\r\n5\r\n", "STORED\r\n"),
            ("decr n 3\r\n", "2\r\n"),
            ("incr n 100\r\n", "102\r\n"),
            ("gets n\r\n", "VALUE n 0 3 14\r\n102\r\nEND\r\n"),
            ("touch n 100\r\n", "TOUCHED\r\n"),
            ("touch q 100\r\n", "NOT_FOUND\r\n"),
            ("gats 100 n q a\r\n", "VALUE n 0 3 14\r\n102\r\nVALUE a 7 1 6\r\nq\r\nEND\r\n"),
            ("gat 0 n\r\n", "VALUE n 0 3\r\n102\r\nEND\r\n"),
            ("delete a\r\n", "DELETED\r\n"),
            ("delete a\r\n", "NOT_FOUND\r\n"),
            ("get a\r\n", "END\r\n"),
            ("set e 0 -1 1\r\nx\r\n", "STORED\r\n"),
            ("get e\r\n", "END\r\n"),
            ("gets b n\r\n", "VALUE b 3 6 5\r\nwwyyzz\r\nVALUE n 0 3 14\r\n102\r\nEND\r\n"),
            ("flush_all\r\n", "OK\r\n"),
            ("get b n\r\n", "END\r\n"),
            ("set b 0 0 1\r\nz\r\n", "STORED\r\n"),
            ("gets b\r\n", "VALUE b 0 1 17\r\nz\r\nEND\r\n"),
            ("incr zz 1 noreply\r\n", ""),
            ("set k 0 0 1 noreply\r\n1\r\n", ""),
            ("get k\r\n", "VALUE k 0 1\r\n1\r\nEND\r\n"),
            ("verbosity 5\r\n", "OK\r\n"),
            ("stats reset\r\n", "RESET\r\n"),
            ("stats nonesuch\r\n", "ERROR\r\n"),
            ("flush_all noreply\r\n", ""),
            ("get k\r\n", "END\r\n"),
        ];
        for (command, reply) in session {
            assert_eq!(run(&s, command), *reply, "{command}");
        }
    }

    #[test]
    fn expiry_relative_absolute_negative() {
        let s = store();
        run(&s, "set r 0 10 1\r\nx\r\n");
        run(&s, "set a 0 1700000082 1\r\nx\r\n"); // unix T0 + 82: clock 82
        run(&s, "set p 0 1600000000 1\r\nx\r\n"); // before the clock's 0
        run(&s, "set n 0 -1 1\r\nx\r\n");
        run(&s, "set z 0 0 1\r\nx\r\n");
        assert_eq!(run(&s, "get p n\r\n"), "END\r\n");
        assert_eq!(stat(&s, "get_expired"), 2);
        assert_eq!(stat(&s, "curr_items"), 3);
        s.clock().set(71);
        assert_eq!(
            run(&s, "get r a z\r\n"),
            "VALUE r 0 1\r\nx\r\nVALUE a 0 1\r\nx\r\nVALUE z 0 1\r\nx\r\nEND\r\n"
        );
        s.clock().set(72);
        assert_eq!(run(&s, "get r a z\r\n"), "VALUE a 0 1\r\nx\r\nVALUE z 0 1\r\nx\r\nEND\r\n");
        s.clock().set(82);
        assert_eq!(run(&s, "get r a z\r\n"), "VALUE z 0 1\r\nx\r\nEND\r\n");
        // Expired items are absent to every command.
        assert_eq!(run(&s, "replace r 0 0 1\r\ny\r\n"), "NOT_STORED\r\n");
        assert_eq!(run(&s, "add a 0 0 1\r\ny\r\n"), "STORED\r\n");
        assert_eq!(run(&s, "touch r 0\r\n"), "NOT_FOUND\r\n");
        assert_eq!(run(&s, "incr r 1\r\n"), "NOT_FOUND\r\n");
        // A command that looks an expired item up counts it (memcached's
        // do_item_get) and removes it; a storage command replaces it
        // uncounted (memcached 1.6.18: set, add, replace over an expired
        // item leave get_expired as it was).
        run(&s, "set x 0 -1 1\r\nx\r\nset y 0 -1 1\r\nx\r\nset w 0 -1 1\r\nx\r\n");
        let before = stat(&s, "get_expired");
        assert_eq!(
            run(&s, "delete x\r\nincr y 1\r\nadd w 0 0 1\r\nw\r\n"),
            "NOT_FOUND\r\nNOT_FOUND\r\nSTORED\r\n"
        );
        assert_eq!(stat(&s, "get_expired") - before, 2);
        assert_eq!(stat(&s, "get_misses"), 5);
        assert_eq!(stat(&s, "curr_items"), 3);
    }

    #[test]
    fn touch_and_gat_extend() {
        let s = store();
        run(&s, "set k 3 10 2\r\nhi\r\n");
        assert_eq!(run(&s, "touch k 100\r\n"), "TOUCHED\r\n");
        s.clock().advance(50);
        assert_eq!(run(&s, "gat 100 k zz\r\n"), "VALUE k 3 2\r\nhi\r\nEND\r\n");
        s.clock().advance(99);
        assert_eq!(run(&s, "get k\r\n"), "VALUE k 3 2\r\nhi\r\nEND\r\n");
        s.clock().advance(1);
        assert_eq!(run(&s, "get k\r\n"), "END\r\n");
        assert_eq!(run(&s, "touch k 10\r\n"), "NOT_FOUND\r\n");
        // gat counts as touches, not gets (memcached 1.6.18).
        assert_eq!([stat(&s, "cmd_touch"), stat(&s, "touch_hits"), stat(&s, "touch_misses")], [4, 2, 2]);
        assert_eq!([stat(&s, "cmd_get"), stat(&s, "get_hits")], [2, 1]);
        // touch with a negative exptime expires at once.
        run(&s, "set k 0 0 1\r\nx\r\n");
        assert_eq!(run(&s, "gat -1 k\r\n"), "VALUE k 0 1\r\nx\r\nEND\r\n");
        assert_eq!(run(&s, "get k\r\n"), "END\r\n");
    }

    /// `stats detail`: per-prefix counts of text gets (gat too), sets and
    /// deletes while on, kept when turned off, emptied by `stats reset`
    /// (memcached 1.6.18's replies).
    #[test]
    fn stats_detail_counts_prefixes() {
        let s = store();
        assert_eq!(run(&s, "stats detail\r\n"), "CLIENT_ERROR usage: stats detail on|off|dump\r\n");
        assert_eq!(run(&s, "stats detail on\r\n"), "OK\r\n");
        run(&s, "set a:1 0 0 1\r\nx\r\nget a:1 a:2 b:1 c\r\ndelete b:2\r\ngat 0 a:1\r\nms a:7 1\r\nx\r\n");
        let dump = "PREFIX a get 3 hit 2 set 1 del 0\r\nPREFIX b get 1 hit 0 set 0 del 1\r\nEND\r\n";
        assert_eq!(
            run(&s, "stats detail off\r\nget a:1\r\nstats detail dump\r\n"),
            format!("OK\r\nVALUE a:1 0 1\r\nx\r\nEND\r\n{dump}")
        );
        assert_eq!(run(&s, "stats reset\r\nstats detail dump\r\n"), "RESET\r\nEND\r\n");
    }

    /// A bounded multi-get of keys that are all missing builds no reply,
    /// yet pauses after [`KEYS_PER_SLICE`] keys (so that its event loop
    /// serves the other connections), and resumes where it stopped: every
    /// key looked up once, `END` once, at the end.
    #[test]
    fn a_multi_get_with_no_output_still_pauses() {
        let s = store();
        run(&s, "set hit 0 0 1\r\nx\r\n");
        let keys: Vec<String> = (0..3 * KEYS_PER_SLICE + 10)
            .map(|i| if i == 2 * KEYS_PER_SLICE { "hit".into() } else { format!("miss{i}") })
            .collect();
        let line = format!("get {}\r\n", keys.join(" "));
        let Parsed::Command { command, .. } = parse(line.as_bytes(), &Limits::default()) else {
            panic!("a get line")
        };
        let (mut out, mut at, mut pauses) = (Vec::new(), 0, 0);
        while let Progress::Paused { resume_at } = s.execute_within(&command, &mut out, at, 1 << 20) {
            assert!(resume_at > at, "progress");
            at = resume_at;
            pauses += 1;
        }
        assert_eq!(pauses, 3);
        assert_eq!(out, b"VALUE hit 0 1\r\nx\r\nEND\r\n");
        assert_eq!(stat(&s, "cmd_get"), keys.len() as u64);
        // Unbounded (`execute`), it runs whole.
        let mut out = Vec::new();
        assert_eq!(s.execute(&command, &mut out), Outcome::Continue);
        assert_eq!(out, b"VALUE hit 0 1\r\nx\r\nEND\r\n");
    }

    /// memcached 1.6.18 counts every storage command refused as too large
    /// in `store_too_large` (none in `cmd_set`), quiet or not; a set or an
    /// ms takes the old item with it, the others leave it.
    #[test]
    fn too_large_stores_are_counted() {
        let s = store();
        let big = "x".repeat(2_000_000);
        run(&s, "set k 0 0 1\r\nv\r\nset j 0 0 1\r\nv\r\n");
        let (sets, stored) = (stat(&s, "cmd_set"), stat(&s, "total_items"));
        let replies = run(
            &s,
            &format!(
                "add j 0 0 2000000 noreply\r\n{big}\r\nappend j 0 0 2000000\r\n{big}\r\n\
                 set k 0 0 2000000\r\n{big}\r\nms j 2000000 MA\r\n{big}\r\nmn\r\n"
            ),
        );
        let too_large = "SERVER_ERROR object too large for cache\r\n";
        assert_eq!(replies, format!("{too_large}{too_large}{too_large}MN\r\n"));
        assert_eq!(stat(&s, "store_too_large"), 4);
        assert_eq!([stat(&s, "cmd_set"), stat(&s, "total_items")], [sets, stored]);
        assert_eq!(run(&s, "get k j\r\n"), "END\r\n");
    }

    #[test]
    fn flush_all_now_and_delayed() {
        let s = store();
        run(&s, "set a 0 0 1\r\nx\r\n");
        assert_eq!(run(&s, "flush_all\r\n"), "OK\r\n");
        assert_eq!(run(&s, "get a\r\n"), "END\r\n");
        assert_eq!(stat(&s, "get_flushed"), 1);
        // Stored after the flush, in the same second: live.
        run(&s, "set a 0 0 1\r\ny\r\n");
        assert_eq!(run(&s, "get a\r\n"), "VALUE a 0 1\r\ny\r\nEND\r\n");
        assert_eq!(run(&s, "add a 0 0 1\r\nz\r\n"), "NOT_STORED\r\n");
        // Delayed by 10: memcached's oldest_live is the flush time minus 1,
        // so items stored up to then die one second early.
        s.clock().advance(5);
        assert_eq!(run(&s, "flush_all 10\r\n"), "OK\r\n");
        run(&s, "set b 0 0 1\r\nb\r\n");
        s.clock().advance(8);
        assert_eq!(run(&s, "get a b\r\n"), "VALUE a 0 1\r\ny\r\nVALUE b 0 1\r\nb\r\nEND\r\n");
        run(&s, "set c 0 0 1\r\nc\r\n");
        s.clock().advance(1);
        assert_eq!(run(&s, "get a b c\r\n"), "END\r\n");
        // memcached's `it->time <= oldest_live`: an item stored in the
        // flush's own second is dead too (and stays dead).
        run(&s, "set d 0 0 1\r\nd\r\n");
        assert_eq!(run(&s, "get d\r\n"), "END\r\n");
        s.clock().advance(1);
        run(&s, "set e 0 0 1\r\ne\r\n");
        assert_eq!(run(&s, "get e\r\n"), "VALUE e 0 1\r\ne\r\nEND\r\n");
        assert_eq!(run(&s, "flush_all 0 noreply\r\n"), "");
        assert_eq!(run(&s, "get e\r\n"), "END\r\n");
        assert_eq!(stat(&s, "cmd_flush"), 3);
    }

    #[test]
    fn noreply_suppresses_every_reply() {
        let s = store();
        let input = "set k 0 0 1 noreply\r\n5\r\nadd k 0 0 1 noreply\r\n5\r\nreplace k 0 0 1 noreply\r\n6\r\n\
                     append k 0 0 1 noreply\r\n0\r\nprepend k 0 0 1 noreply\r\n1\r\ncas k 0 0 1 1 noreply\r\nx\r\n\
                     incr k 1 noreply\r\ndecr k 2 noreply\r\nincr zz 1 noreply\r\ntouch k 0 noreply\r\n\
                     touch zz 0 noreply\r\nverbosity 1 noreply\r\ndelete zz noreply\r\n";
        assert_eq!(run(&s, input), "");
        assert_eq!(run(&s, "get k\r\n"), "VALUE k 0 3\r\n159\r\nEND\r\n");
        assert_eq!(run(&s, "delete k noreply\r\nget k\r\n"), "END\r\n");
    }

    #[test]
    fn misc_commands() {
        let s = store();
        assert_eq!(run(&s, "version\r\n"), "VERSION 1.6.18-dlht\r\n");
        assert_eq!(run(&s, "verbosity 1\r\n"), "OK\r\n");
        assert_eq!(run(&s, "stats foo\r\n"), "ERROR\r\n");
        // Lines as memcached 1.6.18 prints them (a subset: see stats_settings).
        run(&s, "verbosity 1\r\nflush_all\r\n");
        assert_eq!(
            run(&s, "stats settings\r\n"),
            "STAT maxbytes 67108864\r\nSTAT maxconns 1024\r\nSTAT verbosity 1\r\nSTAT oldest 61\r\n\
             STAT evictions on\r\nSTAT num_threads 4\r\nSTAT cas_enabled yes\r\n\
             STAT item_size_max 1048576\r\nSTAT flush_enabled yes\r\nEND\r\n"
        );
        assert_eq!(run(&s, "shutdown\r\n"), "ERROR: shutdown not enabled\r\n");
        assert_eq!(run(&s, "mn\r\n"), "MN\r\n");
        let (out, outcome) = run_all(&s, b"version\r\nquit\r\nversion\r\n");
        assert_eq!((out, outcome), (b"VERSION 1.6.18-dlht\r\n".to_vec(), Outcome::Close));
        run(&s, "get a\r\n");
        assert_eq!(stat(&s, "cmd_get"), 1);
        assert_eq!(run(&s, "stats reset\r\n"), "RESET\r\n");
        assert_eq!(stat(&s, "cmd_get"), 0);
    }

    #[test]
    fn stats_lines() {
        let s = store();
        s.counters().curr_connections.store(3, Relaxed);
        let all = run(&s, "stats\r\n");
        assert!(all.ends_with("END\r\n"));
        for name in [
            "pid",
            "uptime",
            "time",
            "version",
            "curr_connections",
            "total_connections",
            "cmd_get",
            "cmd_set",
            "cmd_touch",
            "cmd_flush",
            "get_hits",
            "get_misses",
            "get_expired",
            "get_flushed",
            "delete_misses",
            "delete_hits",
            "incr_misses",
            "incr_hits",
            "decr_misses",
            "decr_hits",
            "cas_misses",
            "cas_hits",
            "cas_badval",
            "touch_hits",
            "touch_misses",
            "bytes",
            "curr_items",
            "total_items",
            "expired_unfetched",
            "evictions",
            "limit_maxbytes",
            "threads",
        ] {
            assert!(all.contains(&format!("STAT {name} ")), "{name}");
        }
        assert!(all.contains("STAT uptime 2\r\n"));
        assert!(all.contains("STAT time 1700000062\r\n"));
        assert!(all.contains("STAT version 1.6.18-dlht\r\n"));
        assert!(all.contains("STAT curr_connections 3\r\n"));
        assert!(all.contains("STAT limit_maxbytes 67108864\r\n"));
    }

    #[test]
    fn concurrent_incr_and_append_are_exact() {
        let s = store();
        run(&s, "set c0 0 0 1\r\n0\r\nset c1 0 0 1\r\n0\r\nset log 0 0 0\r\n\r\n");
        const PER: usize = 500;
        std::thread::scope(|scope| {
            for t in 0..4 {
                let s = &s;
                scope.spawn(move || {
                    for i in 0..PER {
                        let key = if i % 2 == 0 { "c0" } else { "c1" };
                        assert!(!run(s, &format!("incr {key} 3\r\n")).starts_with('C'));
                        assert_eq!(run(s, &format!("append log 0 0 1\r\n{t}\r\n")), "STORED\r\n");
                    }
                    for _ in 0..PER / 5 {
                        run(s, "decr c1 1\r\n");
                    }
                });
            }
        });
        let num = |key: &str| -> u64 {
            let r = run(&s, &format!("get {key}\r\n"));
            r.lines().nth(1).unwrap().trim().parse().unwrap()
        };
        assert_eq!(num("c0"), (4 * PER / 2 * 3) as u64);
        assert_eq!(num("c1"), (4 * PER / 2 * 3 - 4 * PER / 5) as u64);
        let log = run(&s, "get log\r\n");
        let data = log.lines().nth(1).unwrap();
        assert_eq!(data.len(), 4 * PER);
        for t in 0..4 {
            assert_eq!(data.matches(char::from(b'0' + t)).count(), PER);
        }
        assert_eq!(stat(&s, "incr_hits"), (4 * PER) as u64);
    }
}
