//! memcached 1.6.18's meta commands (`mg`, `ms`, `md`, `ma`, `mn`, `me`) on
//! the store, with the replies of its `proto_text.c` byte for byte where the
//! item layout allows.
//!
//! Every change goes through the store's compare-and-replace machinery
//! ([`Store::modify`]), so meta commands are lock-free and never lose an
//! update. Return flags are written in request order as memcached writes
//! them, by walking the request's flags once more after the item is judged.
//!
//! memcached's item flags: stale, win token sent and binary key are bits of the
//! item header (`item::TimeWord`), carried by what memcached changes in place
//! (a touch, `md I`, a number that fits) and dropped by what it allocates
//! anew (a store, an append, a number that grew); fetched (`h`, `me`'s
//! `fetch`) is the entry's stamp, which a get sets and a change in place
//! carries to the new version.
//!
//! What differs from memcached, and why:
//! - `l` and `me`'s `la` count from the last modification or touch (memcached
//!   counts from the last access, bumped at most once a minute: the same
//!   within a minute of a store);
//! - `me`'s `cls` follows memcached's default slab classes (`-n 48 -f 1.25`),
//!   items over 512 KiB (chunked in memcached) reporting the largest class.

use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use dlht::Guard;

use super::{bump, data_number, Dead, Store, Verdict};
use super::{CLIENT_ERROR_NON_NUMERIC, SERVER_ERROR_OUT_OF_MEMORY, SERVER_ERROR_OUT_OF_MEMORY_STORING};
use crate::item::{self, ItemRef, Meta};
use crate::protocol::meta::{ArithMode, MetaCommand, MetaFlags, MetaKey, SetMode};
use crate::protocol::reply::CLIENT_ERROR_OPAQUE_TOO_LONG;
use crate::protocol::text::{Limits, KEY_MAX_LENGTH};

/// memcached's `sizeof(item)` on 64-bit builds, for `me`'s `size`.
const ITEM_STRUCT_SIZE: usize = 48;
/// memcached's default `-n` (minimum chunk space beside the item struct).
const SLAB_CHUNK_MIN: u32 = 48;
/// memcached's default `slab_chunk_size_max` (half its 1 MiB slab page).
const SLAB_CHUNK_MAX: u32 = 512 * 1024;

impl Store {
    /// Run one meta command, appending its reply (if any) to `out`.
    pub(super) fn meta(&self, command: &MetaCommand<'_>, now: u32, out: &mut Vec<u8>, guard: &Guard) {
        match command {
            MetaCommand::Noop => out.extend_from_slice(b"MN\r\n"),
            MetaCommand::Debug { key } => self.meta_debug(key, now, out, guard),
            MetaCommand::Get { key, flags } => self.meta_get(key, flags, now, out, guard),
            MetaCommand::Set { key, flags, mode, data } => {
                self.meta_set(key, flags, *mode, data, now, out, guard)
            }
            MetaCommand::Delete { key, flags } => self.meta_delete(key, flags, now, out, guard),
            MetaCommand::Arithmetic { key, flags, mode } => {
                self.meta_arithmetic(key, flags, *mode, now, out, guard)
            }
        }
    }

    /// `mg`: a read, or a compare-and-replace when `T` touches a hit or `N`
    /// vivifies a miss; stale-while-revalidate as memcached's
    /// `process_mget_command` (`X` for a stale item, `W` to the one fetcher
    /// that wins the right to recompute, `Z` to the others).
    fn meta_get(&self, key: &MetaKey<'_>, flags: &MetaFlags<'_>, now: u32, out: &mut Vec<u8>, guard: &Guard) {
        let mut scratch = [0; KEY_MAX_LENGTH];
        let k = key.bytes(&mut scratch);
        // memcached finds an opaque too long while it writes the reply: after
        // a vivify, and after the flags before it took effect (`T`, `N`).
        let bad_opaque = flags.opaque_too_long_at();
        let upto = bad_opaque.unwrap_or(usize::MAX);
        // (The flags are walked again only for a T behind a long opaque.)
        let touches = || bad_opaque.is_none() || flags.iter().take(upto).any(|f| f.flag == b'T');
        let ttl = flags.ttl.filter(|_| touches()).map(|t| self.clock.realtime(t));
        let vivify = flags.vivify_ttl.map(|t| self.clock.realtime(t));
        let recache = flags.recache_ttl.map(|t| self.clock.realtime(t));
        // The item to report on, whether this command created it, and
        // whether a get had found it before (`h`).
        let mut fetched_before = false;
        let found: Option<(ItemRef<'_>, bool)> = if ttl.is_none() && vivify.is_none() {
            match self.map.get(k, guard) {
                Some(v) => match self.live_counted(v.as_bytes(), now) {
                    Some(item) => {
                        // Relaxed: a hint, as `note_access` says.
                        fetched_before = self.fetched(v.stamp().load(Relaxed));
                        // u: no LRU bump, so not marked fetched either;
                        // nor when memcached bumps after the reply (it
                        // locks the item for h, l and R) and the reply
                        // failed on an opaque too long.
                        let bumped_after_reply_failed = bad_opaque.is_some()
                            && flags.iter().any(|f| matches!(f.flag, b'h' | b'l' | b'R'));
                        if !(flags.no_lru_bump || bumped_after_reply_failed) {
                            self.note_access(v);
                        }
                        Some((item, false))
                    }
                    None => {
                        self.remove_dead(k, now, guard);
                        None
                    }
                },
                None => None,
            }
        } else {
            // memcached touches (T) in place, keeping whether the item was
            // fetched; a new version here starts unfetched, so the mark is
            // carried over (and set, as memcached's bump sets it, unless u).
            fetched_before = self.was_fetched(k, now, guard);
            let start = out.len();
            let mut seen = None;
            let judged = self.modify(k, now, out, guard, |live, buf| match (live, ttl, vivify) {
                (Some(item), Some(_), _) => {
                    seen = Some((item, false));
                    let exptime = final_exptime(flags, upto, item.exptime, false, ttl, vivify);
                    item::push(buf, &Meta { exptime, ..item.meta() }, &[item.data]);
                    Verdict::Store
                }
                (Some(item), None, _) => {
                    seen = Some((item, false));
                    Verdict::Keep(())
                }
                (None, _, Some(_)) => {
                    // memcached links an empty item with exptime 0, then
                    // applies N and T in request order; the vivifier wins
                    // the token (unless the reply failed first).
                    let meta = Meta {
                        exptime: final_exptime(flags, upto, 0, true, ttl, vivify),
                        time: now,
                        cas: self.next_cas(),
                        token_sent: bad_opaque.is_none(),
                        ..Meta::default()
                    };
                    item::push(buf, &meta, &[]);
                    seen = Some((ItemRef { exptime: 0, ..meta.with_data(b"") }, true));
                    Verdict::Store
                }
                (None, _, None) => {
                    seen = None;
                    Verdict::Keep(())
                }
            });
            out.truncate(start);
            // (memcached's bump comes after the reply is written: not after
            // an opaque too long.)
            let bumps = !flags.no_lru_bump && bad_opaque.is_none();
            if judged.is_ok() && seen.is_some() && (fetched_before || bumps) {
                self.mark_fetched(k, guard);
            }
            match judged {
                Ok(None) => {
                    if seen.is_some_and(|(_, created)| created) {
                        bump(&self.local().total_items);
                    }
                    seen
                }
                Ok(Some(())) => seen,
                Err(_) => {
                    bump(&self.local().store_no_memory);
                    out.extend_from_slice(SERVER_ERROR_OUT_OF_MEMORY_STORING);
                    return;
                }
            }
        };
        if bad_opaque.is_some() {
            // memcached counts a miss, nothing for a hit, and q hides
            // nothing.
            if found.is_none() {
                bump(&self.local().cmd_get);
                bump(&self.local().get_misses);
            }
            out.extend_from_slice(CLIENT_ERROR_OPAQUE_TOO_LONG);
            return;
        }
        let Some((item, created)) = found else {
            bump(&self.local().cmd_get);
            bump(&self.local().get_misses);
            if !flags.quiet {
                out.extend_from_slice(b"EN");
                push_echo(out, flags, k, key.base64);
                out.extend_from_slice(b"\r\n");
            }
            return;
        };
        // memcached counts a touching hit as a touch, any other as a get.
        if ttl.is_some() {
            bump(&self.local().cmd_touch);
            bump(&self.local().touch_hits);
        } else {
            bump(&self.local().cmd_get);
            bump(&self.local().get_hits);
        }
        let len = item.data.len();
        if flags.return_value {
            let _ = write!(out, "VA {len}");
        } else {
            out.extend_from_slice(b"HD");
        }
        let mut exptime = item.exptime;
        let mut won = false;
        for f in flags.iter() {
            match f.flag {
                b'T' => exptime = ttl.unwrap_or(exptime),
                b'N' if created => {
                    exptime = vivify.unwrap_or(exptime);
                    won = true;
                }
                b'R' if !item.token_sent
                    && !created
                    && exptime != 0
                    && recache.is_some_and(|r| exptime < r) =>
                {
                    won = true
                }
                b's' => {
                    let _ = write!(out, " s{len}");
                }
                b't' => push_ttl(out, exptime, now),
                b'c' => {
                    let _ = write!(out, " c{}", item.cas);
                }
                b'f' => {
                    let _ = write!(out, " f{}", item.flags);
                }
                b'l' => {
                    let _ = write!(out, " l{}", now.wrapping_sub(item.time));
                }
                b'h' => out.extend_from_slice(if fetched_before { b" h1" } else { b" h0" }),
                b'O' => push_opaque(out, f.token),
                // As the item was stored (base64 if by an `ms ... b`),
                // whatever this request's `b`.
                b'k' => push_key(out, k, item.key_binary),
                _ => {}
            }
        }
        // A stale item's first fetcher wins the token too.
        won |= item.stale && !item.token_sent;
        // Only one fetcher wins: the token goes into the item (a vivified
        // one was stored with it), and a fetcher that finds it taken, or
        // the item replaced, since it read the item loses the race.
        let mut token_sent = item.token_sent && !created;
        if won && !created {
            if self.take_token(k, item.cas, now, guard) {
                // The token's new version keeps the fetched mark this mg set.
                if fetched_before || !flags.no_lru_bump {
                    self.mark_fetched(k, guard);
                }
            } else {
                won = false;
                token_sent = true;
            }
        }
        // memcached's order: Z, X, then W.
        if token_sent {
            out.extend_from_slice(b" Z");
        }
        if item.stale {
            out.extend_from_slice(b" X");
        }
        if won {
            out.extend_from_slice(b" W");
        }
        out.extend_from_slice(b"\r\n");
        if flags.return_value {
            out.extend_from_slice(item.data);
            out.extend_from_slice(b"\r\n");
        }
    }

    /// Mark the item of `key` whose cas is `cas` as having sent its win
    /// token: false if another fetcher did first, or the item was replaced.
    fn take_token(&self, key: &[u8], cas: u64, now: u32, guard: &Guard) -> bool {
        let mut scratch = Vec::new();
        let taken = self.modify(key, now, &mut scratch, guard, |live, buf| match live {
            Some(item) if item.cas == cas && !item.token_sent => {
                item::push(buf, &Meta { token_sent: true, ..item.meta() }, &[item.data]);
                Verdict::Store
            }
            _ => Verdict::Keep(()),
        });
        matches!(taken, Ok(None))
    }

    /// `ms`: memcached's `do_store_item` for the mode, a `C` upgrading set
    /// and replace to a cas store (`I` then also accepts an older cas).
    #[allow(clippy::too_many_arguments)]
    fn meta_set(
        &self,
        key: &MetaKey<'_>,
        flags: &MetaFlags<'_>,
        mode: SetMode,
        data: &[u8],
        now: u32,
        out: &mut Vec<u8>,
        guard: &Guard,
    ) {
        bump(&self.local().cmd_set);
        let mut scratch = [0; KEY_MAX_LENGTH];
        let k = key.bytes(&mut scratch);
        let exptime = flags.ttl.map_or(0, |t| self.clock.realtime(t));
        let client_flags = flags.client_flags.unwrap_or(0);
        let req_cas = flags.compare_cas.unwrap_or(0);
        let cas_mode = flags.compare_cas.is_some() && matches!(mode, SetMode::Set | SetMode::Replace);
        let limits = Limits { max_item_size: self.settings.max_item_size, ..Limits::default() };
        let start = out.len();
        let mut new_cas = 0;
        let mut cas_counter: Option<&AtomicU64> = None;
        // A storage command: uncounted, as memcached's `do_store_item`.
        let judged = self.modify_as(false, k, now, out, guard, |live, buf| {
            cas_counter = None;
            // (exptime, and memcached's stale and token-sent flags; the key
            // is binary if it came in base64)
            let mut fresh = |exptime, stale, token_sent| {
                new_cas = self.next_cas();
                let key_binary = key.base64;
                let meta = Meta {
                    flags: client_flags,
                    exptime,
                    time: now,
                    cas: new_cas,
                    stale,
                    token_sent,
                    key_binary,
                };
                item::push(buf, &meta, &[data]);
                Verdict::Store
            };
            let Some(old) = live else {
                return match mode {
                    _ if cas_mode => {
                        cas_counter = Some(&self.local().cas_misses);
                        Verdict::Keep(&b"NF"[..])
                    }
                    SetMode::Set | SetMode::Add => fresh(exptime, false, false),
                    SetMode::Replace | SetMode::Append | SetMode::Prepend => Verdict::Keep(b"NS"),
                };
            };
            let matched = req_cas == 0 || req_cas == old.cas;
            if cas_mode {
                return if req_cas != 0 && req_cas == old.cas {
                    cas_counter = Some(&self.local().cas_hits);
                    fresh(exptime, false, false)
                } else if req_cas != 0 && flags.invalidate && req_cas < old.cas {
                    // memcached's CAS_STALE: stored stale, keeping the old
                    // TTL and whether the token was sent.
                    cas_counter = Some(&self.local().cas_hits);
                    fresh(old.exptime, true, old.token_sent)
                } else {
                    cas_counter = Some(&self.local().cas_badval);
                    Verdict::Keep(b"EX")
                };
            }
            match mode {
                SetMode::Add => Verdict::Keep(b"NS"),
                SetMode::Set | SetMode::Replace => fresh(exptime, false, false),
                SetMode::Append | SetMode::Prepend if !matched => Verdict::Keep(b"EX"),
                SetMode::Append | SetMode::Prepend => {
                    if !limits.item_fits(k.len(), old.flags, old.data.len().saturating_add(data.len())) {
                        return Verdict::Keep(b"NS");
                    }
                    new_cas = self.next_cas();
                    // A new item in memcached: not stale, no token sent.
                    let meta = Meta { cas: new_cas, time: now, ..old.meta().fresh() };
                    let parts = if mode == SetMode::Append { [old.data, data] } else { [data, old.data] };
                    item::push(buf, &meta, &parts);
                    Verdict::Store
                }
            }
        });
        out.truncate(start);
        if let Some(counter) = cas_counter {
            bump(counter);
        }
        let (code, cas) = match judged {
            Ok(None) => {
                bump(&self.local().total_items);
                (&b"HD"[..], new_cas)
            }
            Ok(Some(code)) => (code, 0),
            Err(_) => {
                bump(&self.local().store_no_memory);
                // memcached unlinks the item an ms failed to replace, in
                // every mode (as for one too large: `Parsed::Refused`).
                self.map.remove(k, guard);
                out.extend_from_slice(SERVER_ERROR_OUT_OF_MEMORY_STORING);
                return;
            }
        };
        // memcached's q hides only the nominal HD.
        if flags.quiet && code == b"HD" {
            return;
        }
        out.extend_from_slice(code);
        for f in flags.iter() {
            match f.flag {
                b'O' => push_opaque(out, f.token),
                b'k' => push_key(out, k, key.base64),
                b'c' => {
                    let _ = write!(out, " c{cas}");
                }
                _ => {}
            }
        }
        out.extend_from_slice(b"\r\n");
    }

    /// `md`: remove the very version judged, or with `I` store it again with
    /// a new cas (and `T`'s TTL) as memcached's invalidation does.
    fn meta_delete(
        &self,
        key: &MetaKey<'_>,
        flags: &MetaFlags<'_>,
        now: u32,
        out: &mut Vec<u8>,
        guard: &Guard,
    ) {
        let mut scratch = [0; KEY_MAX_LENGTH];
        let k = key.bytes(&mut scratch);
        let cas_differs = |item: &ItemRef<'_>| flags.compare_cas.is_some_and(|c| c != item.cas);
        let code: &[u8] = if flags.invalidate {
            // memcached marks the item stale in place: it stays fetched if
            // it was.
            let was_fetched = self.was_fetched(k, now, guard);
            let ttl = flags.ttl.map(|t| self.clock.realtime(t));
            let start = out.len();
            let judged = self.modify(k, now, out, guard, |live, buf| match live {
                None => Verdict::Keep(&b"NF"[..]),
                Some(item) if cas_differs(&item) => Verdict::Keep(b"EX"),
                Some(item) => {
                    // memcached marks it stale and clears the token sent,
                    // so that the next fetcher wins.
                    let meta = Meta {
                        cas: self.next_cas(),
                        exptime: ttl.unwrap_or(item.exptime),
                        stale: true,
                        token_sent: false,
                        ..item.meta()
                    };
                    item::push(buf, &meta, &[item.data]);
                    Verdict::Store
                }
            });
            out.truncate(start);
            match judged {
                Ok(None) => {
                    if was_fetched {
                        self.mark_fetched(k, guard);
                    }
                    b"HD"
                }
                Ok(Some(code)) => code,
                Err(_) => {
                    out.extend_from_slice(SERVER_ERROR_OUT_OF_MEMORY);
                    return;
                }
            }
        } else {
            let mut code = &b"NF"[..];
            let mut dead = None;
            let removed = self.map.remove_if(
                k,
                |v| {
                    (code, dead) = (b"NF", None);
                    let Some(item) = item::decode(v) else { return false };
                    dead = self.dead(&item, now);
                    if dead.is_some() {
                        return false;
                    }
                    if cas_differs(&item) {
                        code = b"EX";
                        return false;
                    }
                    code = b"HD";
                    true
                },
                guard,
            );
            if let Some(d) = dead {
                bump(match d {
                    Dead::Flushed => &self.local().get_flushed,
                    Dead::Expired => &self.local().get_expired,
                });
                self.remove_dead(k, now, guard);
            }
            if removed.is_some() {
                bump(&self.local().delete_hits);
                b"HD"
            } else {
                code
            }
        };
        if code != b"HD" {
            bump(&self.local().delete_misses);
        }
        if flags.quiet && code == b"HD" {
            return;
        }
        out.extend_from_slice(code);
        push_echo(out, flags, k, key.base64);
        out.extend_from_slice(b"\r\n");
    }

    /// `ma`: memcached's `do_add_delta`, or with `N` a vivify to `J` on a miss.
    fn meta_arithmetic(
        &self,
        key: &MetaKey<'_>,
        flags: &MetaFlags<'_>,
        mode: ArithMode,
        now: u32,
        out: &mut Vec<u8>,
        guard: &Guard,
    ) {
        let mut scratch = [0; KEY_MAX_LENGTH];
        let k = key.bytes(&mut scratch);
        let incr = mode == ArithMode::Incr;
        let delta = flags.delta.unwrap_or(1);
        let req_cas = flags.compare_cas.unwrap_or(0);
        let ttl = flags.ttl.map(|t| self.clock.realtime(t));
        let vivify = flags.vivify_ttl.map(|t| self.clock.realtime(t));
        // memcached finds an opaque too long while it writes the reply,
        // after the delta (or vivify) and the flags before it took effect.
        let bad_opaque = flags.opaque_too_long_at();
        let upto = bad_opaque.unwrap_or(usize::MAX);
        let start = out.len();
        // A number rewritten in place stays fetched if it was.
        let was_fetched = self.was_fetched(k, now, guard);
        // (value, exptime before the flags apply, cas, created, grew)
        let mut done = (0u64, 0u32, 0u64, false, false);
        let judged = self.modify(k, now, out, guard, |live, buf| {
            let Some(item) = live else {
                if vivify.is_none() {
                    return Verdict::Keep(&b"NF"[..]);
                }
                let value = flags.initial.unwrap_or(0);
                let cas = self.next_cas();
                let exptime = final_exptime(flags, upto, 0, true, ttl, vivify);
                item::push_header(buf, &Meta { exptime, time: now, cas, ..Meta::default() });
                let _ = write!(buf, "{value}");
                done = (value, 0, cas, true, false);
                return Verdict::Store;
            };
            if item.data.is_empty() {
                return Verdict::Keep(CLIENT_ERROR_NON_NUMERIC);
            }
            if req_cas != 0 && item.cas != req_cas {
                return Verdict::Keep(b"EX");
            }
            let Some(old) = data_number(item.data) else {
                return Verdict::Keep(CLIENT_ERROR_NON_NUMERIC);
            };
            let value = if incr { old.wrapping_add(delta) } else { old.saturating_sub(delta) };
            let cas = self.next_cas();
            let len = decimal_len(value);
            let grew = len > item.data.len();
            // memcached applies T to the item it returns, which is the old,
            // unlinked one when the number grew: the new item keeps the TTL.
            // A number that grew is a new item: not stale, no token sent.
            let (exptime, kept) = if grew {
                (item.exptime, item.meta().fresh())
            } else {
                (final_exptime(flags, upto, item.exptime, false, ttl, vivify), item.meta())
            };
            item::push_header(buf, &Meta { cas, time: now, exptime, ..kept });
            let digits = buf.len();
            let _ = write!(buf, "{value}");
            // memcached rewrites a number that fits in place, space-padded.
            buf.resize(digits + len.max(item.data.len()), b' ');
            done = (value, item.exptime, cas, false, grew);
            Verdict::Store
        });
        out.truncate(start);
        let (hits, misses) = if incr {
            (&self.local().incr_hits, &self.local().incr_misses)
        } else {
            (&self.local().decr_hits, &self.local().decr_misses)
        };
        let code = match judged {
            Ok(None) => None,
            Ok(Some(code)) => Some(code),
            Err(_) => {
                out.extend_from_slice(SERVER_ERROR_OUT_OF_MEMORY);
                return;
            }
        };
        let bad_opaque = bad_opaque.is_some();
        match code {
            Some(error) if error == CLIENT_ERROR_NON_NUMERIC => out.extend_from_slice(error),
            Some(code) => {
                if code == b"NF" {
                    bump(misses);
                }
                if bad_opaque {
                    out.extend_from_slice(CLIENT_ERROR_OPAQUE_TOO_LONG);
                    return;
                }
                out.extend_from_slice(code);
                push_echo(out, flags, k, key.base64);
                out.extend_from_slice(b"\r\n");
            }
            None => {
                let (value, mut exptime, cas, created, grew) = done;
                if created || grew {
                    bump(&self.local().total_items);
                } else if was_fetched {
                    self.mark_fetched(k, guard);
                }
                if !created {
                    bump(hits);
                }
                if bad_opaque {
                    out.extend_from_slice(CLIENT_ERROR_OPAQUE_TOO_LONG);
                    return;
                }
                // memcached's q hides a delta's reply, not a vivify's.
                if flags.quiet && !created {
                    return;
                }
                if flags.return_value {
                    let _ = write!(out, "VA {}", decimal_len(value));
                } else {
                    out.extend_from_slice(b"HD");
                }
                for f in flags.iter() {
                    match f.flag {
                        b'c' => {
                            let _ = write!(out, " c{cas}");
                        }
                        b't' => push_ttl(out, exptime, now),
                        b'T' => exptime = ttl.unwrap_or(exptime),
                        b'N' if created => exptime = vivify.unwrap_or(exptime),
                        b'O' => push_opaque(out, f.token),
                        b'k' => push_key(out, k, key.base64),
                        _ => {}
                    }
                }
                if flags.return_value {
                    let _ = write!(out, "\r\n{value}");
                }
                out.extend_from_slice(b"\r\n");
            }
        }
    }

    /// `me`: memcached's debug line for a live item, `EN` otherwise.
    fn meta_debug(&self, key: &MetaKey<'_>, now: u32, out: &mut Vec<u8>, guard: &Guard) {
        bump(&self.local().meta_cmds);
        let mut scratch = [0; KEY_MAX_LENGTH];
        let k = key.bytes(&mut scratch);
        let mut fetched = false;
        let item = match self.map.get(k, guard) {
            Some(v) => {
                let item = self.live_counted(v.as_bytes(), now);
                if item.is_none() {
                    self.remove_dead(k, now, guard);
                }
                // Relaxed: a hint, as `note_access` says.
                fetched = self.fetched(v.stamp().load(Relaxed));
                item
            }
            None => None,
        };
        let Some(item) = item else {
            out.extend_from_slice(b"EN\r\n");
            return;
        };
        out.extend_from_slice(b"ME ");
        // As the item was stored, whatever this request's `b`.
        if item.key_binary {
            base64_encode(k, out);
        } else {
            out.extend_from_slice(k);
        }
        // memcached prints `current_time - exptime` with %d.
        let exp = if item.exptime == 0 { -1 } else { now.wrapping_sub(item.exptime) as i32 };
        let size =
            ITEM_STRUCT_SIZE + 8 + k.len() + 1 + if item.flags == 0 { 0 } else { 4 } + item.data.len() + 2;
        let _ = write!(
            out,
            " exp={exp} la={} cas={} fetch={} cls={} size={size}\r\n",
            now.wrapping_sub(item.time),
            item.cas,
            if fetched { "yes" } else { "no" },
            slab_class(size),
        );
    }
}

/// The exptime an item ends with after `T` (and, when this command created
/// it, `N`) apply in request order from `start`, among the first `upto`
/// flags.
fn final_exptime(
    flags: &MetaFlags<'_>,
    upto: usize,
    start: u32,
    created: bool,
    ttl: Option<u32>,
    vivify: Option<u32>,
) -> u32 {
    flags.iter().take(upto).fold(start, |exptime, f| match f.flag {
        b'T' => ttl.unwrap_or(exptime),
        b'N' if created => vivify.unwrap_or(exptime),
        _ => exptime,
    })
}

/// How many decimal digits `value` has.
pub(super) fn decimal_len(value: u64) -> usize {
    value.checked_ilog10().map_or(1, |l| l as usize + 1)
}

/// ` t<remaining>`, `-1` for an item that never expires (memcached's
/// unsigned subtraction included).
fn push_ttl(out: &mut Vec<u8>, exptime: u32, now: u32) {
    if exptime == 0 {
        out.extend_from_slice(b" t-1");
    } else {
        let _ = write!(out, " t{}", exptime.wrapping_sub(now));
    }
}

/// ` O<opaque>`: the token as sent.
fn push_opaque(out: &mut Vec<u8>, opaque: &[u8]) {
    out.extend_from_slice(b" O");
    out.extend_from_slice(opaque);
}

/// memcached's `META_KEY`: ` k<key>`, or ` k<base64> b` for a binary key.
fn push_key(out: &mut Vec<u8>, key: &[u8], base64: bool) {
    out.extend_from_slice(b" k");
    if base64 {
        base64_encode(key, out);
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(key);
    }
}

/// The `O` and `k` flags, in request order: all a miss or failure returns.
fn push_echo(out: &mut Vec<u8>, flags: &MetaFlags<'_>, key: &[u8], base64: bool) {
    for f in flags.iter() {
        match f.flag {
            b'O' => push_opaque(out, f.token),
            b'k' => push_key(out, key, base64),
            _ => {}
        }
    }
}

/// Standard base64 with padding, as memcached's `base64_encode` writes it.
fn base64_encode(bytes: &[u8], out: &mut Vec<u8>) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let sym = |i: u32| ALPHABET.get((i & 63) as usize).copied().unwrap_or(b'=');
    for chunk in bytes.chunks(3) {
        let b = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (b(0) << 16) | (b(1) << 8) | b(2);
        out.push(sym(n >> 18));
        out.push(sym(n >> 12));
        out.push(if chunk.len() > 1 { sym(n >> 6) } else { b'=' });
        out.push(if chunk.len() > 2 { sym(n) } else { b'=' });
    }
}

/// memcached's `slabs_clsid` over the classes `slabs_init` makes with its
/// defaults: 96 bytes, then times 1.25 (8-byte aligned) up to 512 KiB.
fn slab_class(size: usize) -> u32 {
    let mut class_size = ITEM_STRUCT_SIZE as u32 + SLAB_CHUNK_MIN;
    let mut class = 1;
    loop {
        if f64::from(class_size) >= f64::from(SLAB_CHUNK_MAX) / 1.25 {
            return class;
        }
        if class_size % 8 != 0 {
            class_size += 8 - class_size % 8;
        }
        if size <= class_size as usize {
            return class;
        }
        class += 1;
        class_size = (f64::from(class_size) * 1.25) as u32;
    }
}

#[cfg(test)]
mod tests {
    //! Expected replies are the bytes memcached 1.6.18 sent (`memcached -U 0`
    //! on loopback, a python socket client), except where a comment names
    //! one of the differences the module documents.

    use super::super::tests::{run, stat, store};
    use super::{base64_encode, decimal_len, slab_class};

    /// A session of meta commands replayed against a fresh memcached 1.6.18,
    /// every reply byte for byte, cas values included (both hand out 1, 2,
    /// ... to linked items), then its counters.
    #[test]
    fn meta_session_matches_memcached() {
        let s = store();
        let big = format!("ms big 1000 F1\r\n{}\r\n", "A".repeat(1000));
        let session: &[(&str, &str)] = &[
            ("mn\r\n", "MN\r\n"),
            ("mg a v\r\n", "EN\r\n"),
            ("mg a q v k O1\r\nmn\r\n", "MN\r\n"),
            ("ms a 3 T0 F5 c k O9\r\nabc\r\n", "HD c1 ka O9\r\n"),
            ("mg a s v t c f k O2 l\r\n", "VA 3 s3 t-1 c1 f5 ka O2 l0\r\nabc\r\n"),
            ("mg a q v\r\n", "VA 3\r\nabc\r\n"),
            ("ms a 2 ME c\r\nxx\r\n", "NS c0\r\n"),
            ("ms b 2 ME c q\r\nbb\r\n", ""),
            ("ms b 1 MA c\r\nZ\r\n", "HD c3\r\n"),
            ("ms b 1 MP O5\r\nA\r\n", "HD O5\r\n"),
            ("mg b v c f\r\n", "VA 4 c4 f0\r\nAbbZ\r\n"),
            ("ms zz 1 MR\r\nx\r\n", "NS\r\n"),
            ("ms zz 1 MA q\r\nx\r\n", "NS\r\n"),
            ("ms a 1 C1 c\r\nq\r\n", "HD c5\r\n"),
            ("ms a 1 C1 c\r\nr\r\n", "EX c0\r\n"),
            ("ms zz 1 C1\r\nx\r\n", "NF\r\n"),
            ("ms Zm9v 3 b k c\r\nbar\r\n", "HD kZm9v b c6\r\n"),
            ("mg Zm9v b k v s\r\n", "VA 3 kZm9v b s3\r\nbar\r\n"),
            ("mg Zm!9v b k\r\n", "HD kZm9v b\r\n"),
            ("md Zm9v b k q\r\n", ""),
            ("md Zm9v b k\r\n", "NF kZm9v b\r\n"),
            ("ms n 1\r\n9\r\n", "HD\r\n"),
            ("ma n v\r\n", "VA 2\r\n10\r\n"),
            ("ma n v t c MD D3\r\n", "VA 1 t-1 c9\r\n7\r\n"),
            ("ma n q\r\n", ""),
            ("ma n v D100 M-\r\n", "VA 1\r\n0\r\n"),
            ("ma n v MI D18446744073709551615\r\n", "VA 20\r\n18446744073709551615\r\n"),
            ("mg n v s\r\n", "VA 20 s20\r\n18446744073709551615\r\n"),
            ("ma nn N0 J10 v c t k O3\r\n", "VA 2 c13 t-1 knn O3\r\n10\r\n"),
            ("ma nn v\r\n", "VA 2\r\n11\r\n"),
            ("ma nn C1 v\r\n", "EX\r\n"),
            ("ma zz\r\n", "NF\r\n"),
            ("ma zz q O4\r\n", "NF O4\r\n"),
            ("ma zz N0 q\r\n", "HD\r\n"),
            ("ms w 3\r\nabc\r\n", "HD\r\n"),
            ("ma w\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
            ("md w C1 O6\r\n", "EX O6\r\n"),
            ("md w q\r\n", ""),
            ("md w\r\n", "NF\r\n"),
            ("mg t1 N30 s t v c\r\n", "VA 0 s0 t30 c17 W\r\n\r\n"),
            ("mg zz s v t c\r\n", "VA 1 s1 t-1 c15\r\n0\r\n"),
            ("me Zm9v b\r\n", "EN\r\n"),
            ("ms r 1 T100\r\nx\r\n", "HD\r\n"),
            ("mg r R200 t\r\n", "HD t100 W\r\n"),
            ("ms w2 2 T50 F3\r\nhi\r\n", "HD\r\n"),
            ("md w2 I T30 k\r\n", "HD kw2\r\n"),
            ("me w2\r\n", "ME w2 exp=-30 la=0 cas=20 fetch=no cls=1 size=67\r\n"),
            ("ma w2\r\n", "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"),
            ("ms w2 1 I C1 c\r\nz\r\n", "HD c21\r\n"),
            ("me w2\r\n", "ME w2 exp=-30 la=0 cas=21 fetch=no cls=1 size=62\r\n"),
            ("mg k1 k O123 q\r\nmg a k q\r\nmn\r\n", "HD ka\r\nMN\r\n"),
            (big.as_str(), "HD\r\n"),
            ("me big\r\n", "ME big exp=-1 la=0 cas=22 fetch=no cls=12 size=1066\r\n"),
        ];
        for (command, reply) in session {
            assert_eq!(run(&s, command), *reply, "{command}");
        }
        let names = [
            "cmd_get",
            "cmd_set",
            "cmd_touch",
            "cmd_meta",
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
            "curr_items",
            "total_items",
        ];
        let memcached = [13, 17, 0, 4, 10, 3, 0, 0, 3, 2, 2, 4, 0, 2, 1, 2, 1, 0, 0, 9, 17];
        for (name, value) in names.iter().zip(memcached) {
            assert_eq!(stat(&s, name), value, "{name}");
        }
    }

    #[test]
    fn mg_return_flags_in_request_order() {
        let s = store();
        // memcached: "HD c1 ka O9", then the flags in the order asked.
        assert_eq!(run(&s, "ms a 2 T0 F5 c k O9\r\nhi\r\n"), "HD c1 ka O9\r\n");
        assert_eq!(run(&s, "mg a s v t c f k O1 l\r\n"), "VA 2 s2 t-1 c1 f5 ka O1 l0\r\nhi\r\n");
        assert_eq!(run(&s, "mg a O1 k c\r\n"), "HD O1 ka c1\r\n");
        // h: whether a get found the item before this one (memcached 1.6.18:
        // a fresh item answers h0 once, then h1; me says fetch=yes).
        assert_eq!(
            run(&s, "ms b 1\r\nx\r\nme b\r\n"),
            "HD\r\nME b exp=-1 la=0 cas=2 fetch=no cls=1 size=61\r\n"
        );
        assert_eq!(run(&s, "mg b h v\r\nmg b h\r\n"), "VA 1 h0\r\nx\r\nHD h1\r\n");
        assert_eq!(run(&s, "me b\r\n"), "ME b exp=-1 la=0 cas=2 fetch=yes cls=1 size=61\r\n");
        assert_eq!(run(&s, "mg a h\r\n"), "HD h1\r\n");
        // l counts seconds since the store (memcached: since the last access).
        s.clock().advance(3);
        assert_eq!(run(&s, "mg a l\r\n"), "HD l3\r\n");
        // A miss echoes only O and k; "EN" hidden by q.
        assert_eq!(run(&s, "mg zz s v k O7 c\r\n"), "EN kzz O7\r\n");
        assert_eq!(run(&s, "mg zz q k O1\r\nmn\r\n"), "MN\r\n");
        // q hides nothing on a hit.
        assert_eq!(run(&s, "mg a q\r\n"), "HD\r\n");
        assert_eq!([stat(&s, "cmd_get"), stat(&s, "get_hits"), stat(&s, "get_misses")], [9, 7, 2]);
    }

    #[test]
    fn mg_touch_vivify_and_recache() {
        let s = store();
        run(&s, "ms a 1 T100 F7\r\nx\r\n");
        // memcached: "me a" → "ME a exp=-100 la=0 cas=1 fetch=no cls=1 size=65".
        assert_eq!(run(&s, "me a\r\n"), "ME a exp=-100 la=0 cas=1 fetch=no cls=1 size=65\r\n");
        // T touches (counted as a touch), t before T shows the old TTL.
        assert_eq!(run(&s, "mg a t T50 v\r\n"), "VA 1 t100\r\nx\r\n");
        assert_eq!(run(&s, "mg a t c\r\n"), "HD t50 c1\r\n");
        assert_eq!(run(&s, "mg zz T50 t v\r\n"), "EN\r\n");
        assert_eq!([stat(&s, "cmd_touch"), stat(&s, "touch_hits"), stat(&s, "touch_misses")], [1, 1, 0]);
        assert_eq!([stat(&s, "cmd_get"), stat(&s, "get_misses")], [2, 1]);
        s.clock().advance(20);
        assert_eq!(run(&s, "mg a t\r\n"), "HD t30\r\n");
        // R wins when the TTL is below it.
        assert_eq!(run(&s, "mg a R31 t\r\n"), "HD t30 W\r\n");
        // The token was sent: every later mg says so (Z), R or not.
        assert_eq!(run(&s, "mg a R31 t\r\nmg a t\r\n"), "HD t30 Z\r\nHD t30 Z\r\n");
        // memcached: "mg new N30 s t v c" → "VA 0 s0 t30 c<n> W".
        assert_eq!(run(&s, "mg new N30 s t v c\r\n"), "VA 0 s0 t30 c2 W\r\n\r\n");
        // memcached: "Z" from then on (the vivifier holds the token).
        assert_eq!(run(&s, "mg new s t v c\r\n"), "VA 0 s0 t30 c2 Z\r\n\r\n");
        assert_eq!(run(&s, "mg new N30 v\r\n"), "VA 0 Z\r\n\r\n");
        s.clock().advance(30);
        assert_eq!(run(&s, "mg new v\r\nmg a v\r\n"), "EN\r\nEN\r\n");
        assert_eq!(stat(&s, "get_expired"), 2);
        assert_eq!(stat(&s, "total_items"), 2);
    }

    #[test]
    fn base64_keys() {
        let s = store();
        // memcached: "HD kZm9v b c1", "VA 2 kZm9v b", "HD kZm9v b".
        assert_eq!(run(&s, "ms Zm9v 2 b k c\r\nhi\r\n"), "HD kZm9v b c1\r\n");
        assert_eq!(run(&s, "mg Zm9v b k v\r\n"), "VA 2 kZm9v b\r\nhi\r\n");
        assert_eq!(run(&s, "mg Zm!9v b k\r\n"), "HD kZm9v b\r\n");
        // memcached: "VA 2 kZm9v b" (the item remembers it was stored
        // with b); a plain store of the same key forgets it.
        assert_eq!(run(&s, "mg foo k v\r\n"), "VA 2 kZm9v b\r\nhi\r\n");
        // memcached: "fetch=yes" (fetched by the mg above).
        assert_eq!(run(&s, "me Zm9v b\r\n"), "ME Zm9v exp=-1 la=0 cas=1 fetch=yes cls=1 size=64\r\n");
        assert_eq!(run(&s, "md Zm9v b k q\r\nmd Zm9v b k\r\n"), "NF kZm9v b\r\n");
        assert_eq!(run(&s, "me Zm9v b\r\n"), "EN\r\n");
    }

    #[test]
    fn ms_modes_and_cas() {
        let s = store();
        // memcached: each reply below.
        assert_eq!(run(&s, "ms k 1 ME c\r\na\r\n"), "HD c1\r\n");
        assert_eq!(run(&s, "ms k 1 ME c\r\nb\r\n"), "NS c0\r\n");
        assert_eq!(run(&s, "ms k 1 MA\r\nc\r\nms k 1 MP\r\nz\r\n"), "HD\r\nHD\r\n");
        assert_eq!(run(&s, "mg k v c\r\n"), "VA 3 c3\r\nzac\r\n");
        assert_eq!(
            run(&s, "ms zz 1 MR\r\nx\r\nms zz 1 MA\r\nx\r\nms zz 1 MP\r\nx\r\n"),
            "NS\r\nNS\r\nNS\r\n"
        );
        assert_eq!(run(&s, "ms zz 1 C1\r\nx\r\nms zz 1 MR C1\r\nx\r\n"), "NF\r\nNF\r\n");
        // Append with a wrong cas: EX; with the right one: stored.
        assert_eq!(run(&s, "ms k 1 MA C1\r\nx\r\n"), "EX\r\n");
        assert_eq!(run(&s, "ms k 1 MA C3 c\r\nx\r\n"), "HD c4\r\n");
        assert_eq!(run(&s, "ms k 1 C3 c\r\ny\r\n"), "EX c0\r\n");
        assert_eq!(run(&s, "ms k 1 C4 c O1 k\r\ny\r\n"), "HD c5 O1 kk\r\n");
        // Quiet: only HD is hidden.
        assert_eq!(run(&s, "ms k 1 q\r\nx\r\nms k 1 q ME\r\nx\r\nmn\r\n"), "NS\r\nMN\r\n");
        // I with an older cas stores (memcached marks it stale, keeping the
        // TTL); a newer one is EX.
        run(&s, "ms s 1 T100 c\r\nx\r\n");
        assert_eq!(run(&s, "ms s 1 I C1 c T5\r\ny\r\n"), "HD c8\r\n");
        // memcached: "VA 1 t100 X W" (stale, token won), then "Z X".
        assert_eq!(run(&s, "mg s v t\r\n"), "VA 1 t100 X W\r\ny\r\n");
        assert_eq!(run(&s, "mg s v t\r\n"), "VA 1 t100 Z X\r\ny\r\n");
        assert_eq!(run(&s, "ms s 1 I C1000 c\r\nz\r\n"), "EX c0\r\n");
        assert_eq!(
            [stat(&s, "cmd_set"), stat(&s, "cas_hits"), stat(&s, "cas_badval"), stat(&s, "cas_misses")],
            [18, 2, 2, 2]
        );
    }

    #[test]
    fn md_with_cas_quiet_and_invalidate() {
        let s = store();
        run(&s, "ms k 1\r\nx\r\n");
        // memcached: "EX O6", nothing (q), "NF".
        assert_eq!(run(&s, "md k C9 O6\r\n"), "EX O6\r\n");
        assert_eq!(run(&s, "md k C1 q\r\n"), "");
        assert_eq!(run(&s, "md k q\r\n"), "NF\r\n");
        // md I: a new cas and TTL, the data kept, marked stale: the next mg
        // wins the token ("X W"), later ones see it taken ("Z X").
        run(&s, "ms w 2 T50 F3\r\nhi\r\n");
        assert_eq!(run(&s, "md w I T30 k\r\n"), "HD kw\r\n");
        assert_eq!(run(&s, "me w\r\n"), "ME w exp=-30 la=0 cas=3 fetch=no cls=1 size=66\r\n");
        assert_eq!(run(&s, "mg w v f\r\n"), "VA 2 f3 X W\r\nhi\r\n");
        assert_eq!(run(&s, "mg w v f\r\n"), "VA 2 f3 Z X\r\nhi\r\n");
        assert_eq!(run(&s, "md zz I\r\n"), "NF\r\n");
        run(&s, "ms e 1 T-1\r\nx\r\n");
        assert_eq!(run(&s, "md e\r\n"), "NF\r\n");
        assert_eq!([stat(&s, "delete_hits"), stat(&s, "delete_misses"), stat(&s, "get_expired")], [1, 4, 1]);
    }

    #[test]
    fn ma_modes_vivify_and_floor() {
        let s = store();
        // memcached: "VA 1 c1 t-1 kvv O7\r\n5", then "... c2 ... 0" (floor).
        assert_eq!(run(&s, "ma vv N0 J5 MD D9 v c t k O7\r\n"), "VA 1 c1 t-1 kvv O7\r\n5\r\n");
        assert_eq!(run(&s, "ma vv N0 J5 MD D9 v c t k O7\r\n"), "VA 1 c2 t-1 kvv O7\r\n0\r\n");
        assert_eq!(
            run(&s, "ma vv M+ D7 v\r\nma vv M- v\r\nma vv MI\r\n"),
            "VA 1\r\n7\r\nVA 1\r\n6\r\nHD\r\n"
        );
        // Quiet hides a delta's reply, not a vivify's nor a miss.
        assert_eq!(run(&s, "ma vv q\r\nma zz q O4\r\nma z2 N0 q\r\nmn\r\n"), "NF O4\r\nHD\r\nMN\r\n");
        // N and T apply in request order.
        assert_eq!(run(&s, "ma u N100 T50 t\r\nma u2 T50 N100 t\r\n"), "HD t50\r\nHD t100\r\n");
        assert_eq!(run(&s, "mg u t\r\nmg u2 t\r\n"), "HD t50\r\nHD t100\r\n");
        // memcached's T on a number that grew lands on the old item: shown,
        // not kept. In place it is kept.
        run(&s, "ms n 1\r\n9\r\n");
        assert_eq!(run(&s, "ma n v T100 t\r\nmg n t\r\n"), "VA 2 t100\r\n10\r\nHD t-1\r\n");
        assert_eq!(run(&s, "ma n v t T100\r\nmg n t\r\n"), "VA 2 t-1\r\n11\r\nHD t100\r\n");
        // Cas compare, non-numeric values.
        assert_eq!(run(&s, "ma n C1\r\n"), "EX\r\n");
        assert_eq!(
            run(&s, "ms w 3\r\nabc\r\nma w\r\nma w C1\r\n"),
            "HD\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\nEX\r\n"
        );
        assert_eq!(
            run(&s, "ms e 0\r\n\r\nma e C1\r\n"),
            "HD\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
        );
        assert_eq!(run(&s, "ma zz MD\r\n"), "NF\r\n");
        assert_eq!([stat(&s, "incr_hits"), stat(&s, "incr_misses")], [5, 1]);
        assert_eq!([stat(&s, "decr_hits"), stat(&s, "decr_misses")], [2, 1]);
    }

    #[test]
    fn mn_and_me() {
        let s = store();
        assert_eq!(run(&s, "mn\r\nmn x y\r\n"), "MN\r\nMN\r\n");
        assert_eq!(run(&s, "me k\r\n"), "EN\r\n");
        run(&s, "ms k 1 T100\r\nx\r\n");
        s.clock().advance(30);
        assert_eq!(run(&s, "me k\r\n"), "ME k exp=-70 la=30 cas=1 fetch=no cls=1 size=61\r\n");
        assert_eq!(stat(&s, "cmd_meta"), 2);
    }

    #[test]
    fn concurrent_ma_and_ms_append_are_exact() {
        let s = store();
        run(&s, "ms c 1\r\n0\r\nms log 0\r\n\r\n");
        const PER: u64 = 300;
        std::thread::scope(|scope| {
            for t in 0..4 {
                let s = &s;
                scope.spawn(move || {
                    for _ in 0..PER {
                        assert!(run(s, "ma c D2\r\n").starts_with("HD"));
                        assert_eq!(run(s, &format!("ms log 1 MA\r\n{t}\r\n")), "HD\r\n");
                        assert!(run(s, "ma c MD q\r\n").is_empty());
                    }
                });
            }
        });
        assert_eq!(run(&s, "ma c D0 v\r\n"), format!("VA 4\r\n{}\r\n", 4 * PER));
        assert_eq!(run(&s, "mg log s\r\n"), format!("HD s{}\r\n", 4 * PER));
    }

    /// Of many fetchers racing for a stale item's token, exactly one wins
    /// ("W"); every other sees it taken ("Z X"), whatever the interleaving.
    #[test]
    fn one_fetcher_wins_a_stale_items_token() {
        let s = store();
        for round in 0..20 {
            run(&s, &format!("ms k 1\r\n{}\r\nmd k I\r\n", round % 10));
            let replies: Vec<String> = std::thread::scope(|scope| {
                let s = &s;
                let handles: Vec<_> = (0..4)
                    .map(|_| scope.spawn(move || (0..8).map(|_| run(s, "mg k\r\n")).collect::<Vec<_>>()))
                    .collect();
                handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
            });
            let wins = replies.iter().filter(|r| *r == "HD X W\r\n").count();
            let lost = replies.iter().filter(|r| *r == "HD Z X\r\n").count();
            assert_eq!((wins, lost), (1, replies.len() - 1), "round {round}: {replies:?}");
        }
    }

    proptest::proptest! {
        /// Any meta command line (flags from memcached's set, numbers
        /// included) gets a reply without a panic, and `mn` always answers.
        #[test]
        fn any_meta_command_is_answered(
            cmds in proptest::collection::vec(
                (
                    proptest::sample::select(vec!["mg", "ms", "md", "ma", "me"]),
                    proptest::sample::select(vec!["k", "Zm9v", "n"]),
                    proptest::collection::vec(
                        proptest::sample::select(vec![
                            "b", "c", "f", "h", "k", "l", "O1", "q", "s", "t", "u", "v", "I", "T0", "T-1",
                            "T5", "N0", "N9", "R3", "F7", "C1", "C0", "MS", "ME", "MA", "MP", "MR", "MI",
                            "MD", "J18446744073709551615", "D9",
                        ]),
                        0..6,
                    ),
                ),
                1..20,
            )
        ) {
            let s = store();
            for (cmd, key, flags) in cmds {
                let mut seen = std::collections::HashSet::new();
                let flags: Vec<_> = flags.into_iter().filter(|f| seen.insert(f.as_bytes()[0])).collect();
                let line = if cmd == "ms" {
                    format!("ms {key} 2 {}\r\n12\r\n", flags.join(" "))
                } else {
                    format!("{cmd} {key} {}\r\n", flags.join(" "))
                };
                run(&s, &line);
                s.clock().advance(1);
                proptest::prop_assert_eq!(run(&s, "mn\r\n"), "MN\r\n");
            }
        }
    }

    #[test]
    fn helpers() {
        let mut out = Vec::new();
        for (bytes, encoded) in
            [(&b""[..], ""), (b"f", "Zg=="), (b"fo", "Zm8="), (b"foo", "Zm9v"), (b"\xff\x00", "/wA=")]
        {
            out.clear();
            base64_encode(bytes, &mut out);
            assert_eq!(out, encoded.as_bytes());
        }
        assert_eq!([decimal_len(0), decimal_len(9), decimal_len(10), decimal_len(u64::MAX)], [1, 1, 2, 20]);
        // memcached 1.6.18's default classes: 96, 120, 152, ..., 1184 (12th).
        assert_eq!(
            [slab_class(61), slab_class(96), slab_class(97), slab_class(1066), slab_class(1185)],
            [1, 1, 2, 12, 13]
        );
        assert_eq!(slab_class(2_000_000), slab_class(600_000));
    }
}
