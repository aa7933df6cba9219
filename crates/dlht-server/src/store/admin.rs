//! memcached 1.6.18's administration commands, with its replies byte for
//! byte (`proto_text.c`: `process_stat`'s `detail` and `sizes`,
//! `process_slabs_command`, `process_lru_command`,
//! `process_lru_crawler_command`, `process_memlimit_command`).
//!
//! What each does here:
//! - `stats detail on|off|dump`: per-prefix counts of gets, hits, sets and
//!   deletes (the key up to its first `:`), kept while on, as memcached's
//!   `stats_prefix`, and emptied by `stats reset`; at most [`MAX_PREFIXES`]
//!   prefixes (a client naming
//!   endless prefixes must not grow the server past `-m`), the dump sorted
//!   by prefix (memcached's follows its hash table);
//! - `cache_memlimit <MiB>`: the memory limit, at once (a store evicts down
//!   to a lower one);
//! - `lru_crawler enable|disable|sleep|crawl`: the crawler that takes back
//!   expired items (paused while disabled; `sleep` sets its pause between
//!   steps of 1024 bins, in microseconds, 10 ms at least; `crawl` answers as
//!   memcached's, the crawler being always under way);
//! - `stats sizes`: "disabled", as memcached's default (no size histogram
//!   is kept);
//! - `slabs automove|reassign`, `lru tune|mode|temp_ttl`, `lru_crawler
//!   tocrawl`: checked as memcached checks them and answered as memcached
//!   answers, with no effect: items are not in slab classes here, nor in a
//!   segmented LRU (`slabs reassign` between valid classes answers
//!   `NOSPARE`: no class has a page to give).
//!
//! Not here (`SERVER_ERROR command not implemented yet`; README): `watch`
//! (a log stream), `lru_crawler metadump` (a key dump that takes the
//! connection over), `stats conns`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use super::Store;
use crate::protocol::num::{safe_strtol, safe_strtoul};
use crate::protocol::reply;
use crate::protocol::tokens::Tokens;

/// The most prefixes `stats detail` keeps (memcached keeps any number).
pub const MAX_PREFIXES: usize = 4096;
/// memcached's `settings.prefix_delimiter`.
const PREFIX_DELIMITER: u8 = b':';
/// memcached's largest slab class with its default `-n 48 -f 1.25` and
/// 1 MiB pages (`slabs reassign` takes 0, the page pool, to this).
const LARGEST_SLAB_CLASS: i32 = 39;
/// memcached's `MAX_NUMBER_OF_SLAB_CLASSES` (`lru_crawler crawl` takes ids
/// below it).
const MAX_SLAB_CLASSES: u32 = 64;

/// `stats detail`'s state.
#[derive(Debug, Default)]
pub(super) struct Detail {
    on: AtomicBool,
    /// Per prefix: gets, hits, sets, deletes.
    prefixes: Mutex<BTreeMap<Vec<u8>, [u64; 4]>>,
}

/// What a prefix counts (memcached's `PREFIX_STATS` fields).
#[derive(Clone, Copy)]
pub(super) enum DetailOp {
    /// A get, gets, gat or gats key; `true` if found.
    Get(bool),
    /// A storage command (text).
    Set,
    /// A delete (text).
    Delete,
}

/// The crawler's switches (`lru_crawler`).
#[derive(Debug)]
pub struct CrawlerSettings {
    /// False while `lru_crawler disable` holds it.
    pub enabled: AtomicBool,
    /// Pause between steps, in microseconds (`lru_crawler sleep`).
    pub sleep_us: AtomicU64,
}

impl Default for CrawlerSettings {
    fn default() -> Self {
        let pause = super::evict::CRAWL_PAUSE.as_micros() as u64;
        CrawlerSettings { enabled: AtomicBool::new(true), sleep_us: AtomicU64::new(pause) }
    }
}

impl Store {
    /// Count `op` on `key` for `stats detail`, if on. One load when off.
    #[inline]
    pub(super) fn note_detail(&self, key: &[u8], op: DetailOp) {
        // Relaxed: a switch for statistics.
        if !self.detail.on.load(Relaxed) {
            return;
        }
        // memcached: the key up to the delimiter (or a NUL); none, no count.
        let Some(len) = key.iter().position(|&b| b == PREFIX_DELIMITER || b == 0) else { return };
        if key[len] != PREFIX_DELIMITER {
            return;
        }
        let mut prefixes = self.detail.prefixes.lock().unwrap_or_else(|e| e.into_inner());
        let prefix = &key[..len];
        if !prefixes.contains_key(prefix) && prefixes.len() >= MAX_PREFIXES {
            return;
        }
        let counts = prefixes.entry(prefix.to_vec()).or_default();
        match op {
            DetailOp::Get(hit) => {
                counts[0] += 1;
                counts[1] += u64::from(hit);
            }
            DetailOp::Set => counts[2] += 1,
            DetailOp::Delete => counts[3] += 1,
        }
    }

    /// `stats detail on|off|dump` (`args`: the tokens after `detail`).
    pub(super) fn stats_detail(&self, mut args: Tokens<'_>, out: &mut Vec<u8>) {
        match args.next() {
            Some(b"on") => {
                self.detail.set(true);
                out.extend_from_slice(b"OK\r\n");
            }
            Some(b"off") => {
                self.detail.set(false);
                out.extend_from_slice(b"OK\r\n");
            }
            Some(b"dump") => self.detail.dump(out),
            _ => out.extend_from_slice(b"CLIENT_ERROR usage: stats detail on|off|dump\r\n"),
        }
    }

    /// `stats sizes`: memcached's default, no histogram.
    pub(super) fn stats_sizes(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"STAT sizes_status disabled\r\nEND\r\n");
    }

    /// An administration command (`name` and its arguments after it).
    pub(super) fn admin(&self, name: &[u8], args: Tokens<'_>, out: &mut Vec<u8>) {
        let args: Vec<&[u8]> = args.collect();
        let reply: &[u8] = match name {
            b"cache_memlimit" => return self.cache_memlimit(&args, out),
            b"slabs" => slabs(&args),
            b"lru" => lru(&args),
            b"lru_crawler" => self.lru_crawler(&args),
            _ => crate::store::SERVER_ERROR_ADMIN_NOT_IMPLEMENTED,
        };
        out.extend_from_slice(reply);
    }

    fn cache_memlimit(&self, args: &[&[u8]], out: &mut Vec<u8>) {
        let noreply = args.last() == Some(&&b"noreply"[..]) && args.len() > 1;
        let reply: &[u8] = match args.first().and_then(|a| safe_strtoul(a)) {
            None => reply::ERROR,
            Some(mib) if mib < 8 => b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n",
            Some(mib) if mib > 1_000_000_000 => {
                b"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n"
            }
            Some(mib) => {
                // Relaxed: the limit is read by each store on its own.
                self.memory_limit.store(u64::from(mib) * 1024 * 1024, Relaxed);
                b"OK\r\n"
            }
        };
        if !noreply {
            out.extend_from_slice(reply);
        }
    }

    fn lru_crawler(&self, args: &[&[u8]]) -> &'static [u8] {
        let crawler = &self.crawler_settings;
        match args {
            [b"crawl", classes] => {
                // Relaxed: switches.
                if !crawler.enabled.load(Relaxed) {
                    b"CLIENT_ERROR lru crawler disabled\r\n"
                } else if *classes == b"all" || crawl_classes_valid(classes) {
                    b"OK\r\n"
                } else {
                    b"BADCLASS invalid class id\r\n"
                }
            }
            [b"metadump", _] => crate::store::SERVER_ERROR_ADMIN_NOT_IMPLEMENTED,
            [b"tocrawl", n] => match safe_strtoul(n) {
                Some(_) => b"OK\r\n",
                None => reply::CLIENT_ERROR_BAD_FORMAT,
            },
            [b"sleep", n] => match safe_strtoul(n) {
                None => reply::CLIENT_ERROR_BAD_FORMAT,
                Some(us) if us > 1_000_000 => b"CLIENT_ERROR sleep must be one second or less\r\n",
                Some(us) => {
                    crawler.sleep_us.store(u64::from(us), Relaxed);
                    b"OK\r\n"
                }
            },
            // memcached fails to start a second crawler thread.
            [b"enable"] if crawler.enabled.swap(true, Relaxed) => {
                b"ERROR failed to start lru crawler thread\r\n"
            }
            [b"enable"] => b"OK\r\n",
            [b"disable"] => {
                crawler.enabled.store(false, Relaxed);
                b"OK\r\n"
            }
            _ => reply::ERROR,
        }
    }
}

/// `lru_crawler crawl 1,2,...`: every id (between commas, empty ones
/// skipped as `strtok_r` skips them) a slab class below 64.
fn crawl_classes_valid(list: &[u8]) -> bool {
    list.split(|&b| b == b',')
        .filter(|id| !id.is_empty())
        .all(|id| safe_strtoul(id).is_some_and(|c| (1..MAX_SLAB_CLASSES).contains(&c)))
}

/// `slabs automove <0|1|2|ratio x>`, `slabs reassign <src> <dst>`.
fn slabs(args: &[&[u8]]) -> &'static [u8] {
    match args {
        [b"reassign", src, dst] => match (safe_strtol(src), safe_strtol(dst)) {
            (Some(src), Some(dst)) if src == dst => b"SAME src and dst class are identical\r\n",
            (Some(src), Some(dst))
                if (0..=LARGEST_SLAB_CLASS).contains(&src) && (0..=LARGEST_SLAB_CLASS).contains(&dst) =>
            {
                b"NOSPARE source class has no spare pages\r\n"
            }
            (Some(_), Some(_)) => b"BADCLASS invalid src or dst class id\r\n",
            _ => reply::CLIENT_ERROR_BAD_FORMAT,
        },
        [b"automove", b"ratio", ratio, ..] => match safe_strtod(ratio) {
            Some(_) => b"OK\r\n",
            None => reply::ERROR,
        },
        [b"automove", level, ..] => match safe_strtoul(level) {
            None => reply::CLIENT_ERROR_BAD_FORMAT,
            Some(0..=2) => b"OK\r\n",
            Some(_) => reply::ERROR,
        },
        _ => reply::ERROR,
    }
}

/// `lru tune <hot%> <warm%> <hot factor> <factor>`, `lru mode
/// flat|segmented`, `lru temp_ttl <ttl>`.
fn lru(args: &[&[u8]]) -> &'static [u8] {
    match args {
        [b"tune", hot, warm, hot_factor, factor, ..] => {
            let parsed =
                (safe_strtoul(hot), safe_strtoul(warm), safe_strtod(hot_factor), safe_strtod(factor));
            let (Some(hot), Some(warm), Some(hot_factor), Some(factor)) = parsed else { return reply::ERROR };
            if u64::from(hot) + u64::from(warm) > 80 {
                b"ERROR hot and warm pcts must not exceed 80\r\n"
            } else if factor <= 0.0 || hot_factor <= 0.0 {
                b"ERROR hot/warm age factors must be greater than 0\r\n"
            } else {
                b"OK\r\n"
            }
        }
        [b"mode", b"flat" | b"segmented", ..] => b"OK\r\n",
        [b"temp_ttl", ttl, ..] if safe_strtol(ttl).is_some() => b"OK\r\n",
        _ => reply::ERROR,
    }
}

/// memcached's `safe_strtod`: a whole token read as a C double.
fn safe_strtod(token: &[u8]) -> Option<f64> {
    std::str::from_utf8(token).ok()?.parse::<f64>().ok()
}

impl Detail {
    /// `stats detail on|off`.
    pub(super) fn set(&self, on: bool) {
        // Relaxed: a switch for statistics.
        self.on.store(on, Relaxed);
    }

    /// Forget every prefix (`stats reset`).
    pub(super) fn clear(&self) {
        self.prefixes.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// `stats detail dump`: a `PREFIX` line per prefix, then `END`.
    pub(super) fn dump(&self, out: &mut Vec<u8>) {
        let prefixes = self.prefixes.lock().unwrap_or_else(|e| e.into_inner());
        for (prefix, [get, hit, set, del]) in prefixes.iter() {
            out.extend_from_slice(b"PREFIX ");
            out.extend_from_slice(prefix);
            let _ = write!(out, " get {get} hit {hit} set {set} del {del}\r\n");
        }
        out.extend_from_slice(b"END\r\n");
    }
}
