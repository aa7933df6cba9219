//! Warm restart (`-e DIR`, memcached's restartable memory flag): the items
//! live in a persistent `ByteMap` in `DIR`, and what the store keeps beside
//! them — the clock's origin, a bound on the cas uniques handed out, the
//! `flush_all` state — lives in `DIR/dlht-server.meta`, rewritten whole
//! (a temporary file renamed over it) when one of them moves on. The first
//! write of a start, and every write with `--durable`, is synced (the
//! temporary file before the rename, the directory after): a power loss
//! then leaves the old file or the new one, never an empty one. Other
//! writes leave that to the file system (ext4 flushes a file renamed over
//! another, `auto_da_alloc`), so a client's `flush_all` loop costs no
//! syncs; with `--durable` a failed write stops the server, as a failed
//! sync of the items does.
//!
//! Items store times on the server clock (memcached's relative times), so
//! the clock keeps its origin across restarts — as memcached's restart
//! does with `process_started` — and expiry stays absolute. A cas unique
//! is never handed out twice: the file names a bound above every cas
//! handed out, raised by [`CAS_STEP`] before the counter passes it, and a
//! restart counts on from the bound.
//!
//! The file names the map it belongs to (`FileByteMap::map_id`): its
//! times, cas bound and flush state mean nothing for another map's items,
//! so a directory whose meta file names another map — one copied beside
//! another map's files — is refused, as is a meta file from before the
//! name was kept.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

/// The metadata file in the map's directory.
pub const META_FILE: &str = "dlht-server.meta";
/// Where the metadata file is written before it is renamed over it.
const TMP_FILE: &str = "dlht-server.meta.tmp";
/// How far the cas bound is raised at a time (one file write per this
/// many cas uniques).
pub const CAS_STEP: u64 = 1 << 20;
/// More bytes than any meta file holds (about 170).
const MAX_LEN: u64 = 1024;
/// The format's first line. Format 1 did not name its map.
const FORMAT: &str = "dlht-server 2";

/// What the meta file holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// The map whose items these are (`FileByteMap::map_id`).
    pub map_id: u64,
    /// Unix time at which the server clock reads 0.
    pub origin: i64,
    /// Every cas unique handed out is at most this.
    pub cas_bound: u64,
    /// `flush_all`'s state (see `Store::dead`).
    pub oldest_live: u32,
    /// As above.
    pub oldest_cas: u64,
}

/// Why a meta file's text was refused.
#[derive(Debug, PartialEq, Eq)]
enum Refused {
    /// Written in format 1, which does not name its map.
    Unnamed,
    /// Not a whole meta file of this format: cut short, changed or foreign.
    Damaged,
}

impl Meta {
    fn encode(&self) -> String {
        let body = format!(
            "{FORMAT}\nmap_id {:016x}\norigin {}\ncas_bound {}\noldest_live {}\noldest_cas {}\n",
            self.map_id, self.origin, self.cas_bound, self.oldest_live, self.oldest_cas
        );
        // A last line, the CRC-32C of the rest (as the map's own headers
        // carry): a file cut short or changed in a digit is refused instead
        // of read as other times or cas bound. Against damage, not forgery.
        let check = crc32c::crc32c(body.as_bytes());
        format!("{body}check {check:08x}\n")
    }

    fn decode(s: &str) -> Result<Meta, Refused> {
        if s.lines().next() == Some("dlht-server 1") {
            return Err(Refused::Unnamed);
        }
        // Only the very text `encode` writes: each field once, in its
        // place and plain form (no sign, no leading zeros, no CR), nothing
        // after, and a check line that sums the rest.
        Self::fields(s).filter(|meta| meta.encode() == s).ok_or(Refused::Damaged)
    }

    /// The fields of `s`, read in `encode`'s order (what follows them is
    /// left to `decode`).
    fn fields(s: &str) -> Option<Meta> {
        let mut lines = s.lines();
        if lines.next()? != FORMAT {
            return None;
        }
        let mut field = |name: &str| -> Option<&str> { lines.next()?.strip_prefix(name)?.strip_prefix(' ') };
        Some(Meta {
            map_id: u64::from_str_radix(field("map_id")?, 16).ok()?,
            origin: field("origin")?.parse().ok()?,
            cas_bound: field("cas_bound")?.parse().ok()?,
            oldest_live: field("oldest_live")?.parse().ok()?,
            oldest_cas: field("oldest_cas")?.parse().ok()?,
        })
    }
}

/// `e`, naming the file or directory it is about.
fn about(path: &Path) -> impl Fn(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// A store's restart state: its directory, the cas bound written, and what
/// the open recovered.
pub struct Restart {
    path: PathBuf,
    /// The bound in the file (read without the lock; raised under it).
    cas_bound: AtomicU64,
    /// Serializes rewrites of the file; holds what was written last.
    written: Mutex<Meta>,
    /// Items in the map when it was opened.
    pub recovered_items: u64,
    /// Time the map's open took (recovery included).
    pub recovery_time: Duration,
    /// `--durable`: waits for the disk before replies (`durable_waits`).
    pub durable_waits: AtomicU64,
    /// `--durable`: every write is synced, and a failed one is fatal.
    durable: bool,
}

impl Restart {
    /// Read `dir`'s meta file (None if the directory has none yet: a new
    /// cache), refusing a damaged one and one that does not name its map.
    pub fn read(dir: &Path) -> io::Result<Option<Meta>> {
        let path = dir.join(META_FILE);
        let refused =
            |why: &str| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {why}", path.display()));
        // A plain file only, its name not followed: the server replaces the
        // file (a rename), never writes through a link; and a FIFO or a
        // device is never opened (the open may block, a read never end).
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => {}
            Ok(_) => {
                return Err(refused(
                    "not a regular file (a symlink, directory or device); the server writes this file itself",
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(about(&path)(e)),
        }
        // At most one byte more than a meta file may hold: a longer file is
        // refused without being read whole.
        let mut bytes = Vec::new();
        std::fs::File::open(&path)
            .and_then(|f| f.take(MAX_LEN + 1).read_to_end(&mut bytes))
            .map_err(about(&path))?;
        let text = std::str::from_utf8(&bytes).ok().filter(|_| bytes.len() as u64 <= MAX_LEN);
        match text.ok_or(Refused::Damaged).and_then(Meta::decode) {
            Ok(meta) => Ok(Some(meta)),
            Err(Refused::Damaged) => Err(refused("damaged (not a whole dlht-server meta file)")),
            Err(Refused::Unnamed) => Err(refused(
                "written by an older dlht-server, which did not name the map it belongs to \
                 (nor can this version open that server's map files); start on a new directory",
            )),
        }
    }

    /// Check `dir`'s meta file, if any, before its map is opened (an open
    /// creates or recovers the map, changing the directory): it must be
    /// whole and name `map_id`, the map the directory holds
    /// (`FileByteMap::map_id_of`; None: no map yet, which an open would
    /// make anew, named by no meta file).
    pub fn check_before_open(dir: &Path, map_id: Option<u64>) -> io::Result<()> {
        let Some(meta) = Self::read(dir)? else { return Ok(()) };
        match map_id {
            Some(id) => Self::check_map(dir, &meta, id),
            None => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} names map {:016x}, but {} holds no map: the meta file was copied from another directory",
                    dir.join(META_FILE).display(),
                    meta.map_id,
                    dir.display()
                ),
            )),
        }
    }

    /// Refuse `meta`, read from `dir`, unless it names the map opened
    /// there: another map's times, cas bound and flush state would be read
    /// against these items.
    pub fn check_map(dir: &Path, meta: &Meta, map_id: u64) -> io::Result<()> {
        if meta.map_id == map_id {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} names map {:016x}, but the map in {} is {map_id:016x}: the meta file belongs to another map \
                 (copied from another directory?); refusing to serve these items with it",
                dir.join(META_FILE).display(),
                meta.map_id,
                dir.display()
            ),
        ))
    }

    /// The restart state of `dir`, writing `meta` (the file then holds a
    /// bound above every cas the store will hand out before raising it).
    pub fn start(
        dir: &Path,
        meta: Meta,
        recovered_items: u64,
        recovery_time: Duration,
        durable: bool,
    ) -> io::Result<Restart> {
        let r = Restart {
            path: dir.join(META_FILE),
            cas_bound: AtomicU64::new(meta.cas_bound),
            written: Mutex::new(meta),
            recovered_items,
            recovery_time,
            durable_waits: AtomicU64::new(0),
            durable,
        };
        r.write(&meta, true)?;
        r.sync_dir()?;
        Ok(r)
    }

    /// Replace the file with `meta`: written whole to [`TMP_FILE`], made
    /// anew (a link left there is not written through), with `sync` synced,
    /// then renamed over it (the directory is [`Self::sync_dir`]'s: a
    /// rename durable before the data it names would leave an empty file
    /// after a power loss). An error names the file it is about.
    fn write(&self, meta: &Meta, sync: bool) -> io::Result<()> {
        let tmp = self.path.with_file_name(TMP_FILE);
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(about(&tmp)(e)),
            _ => {}
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .and_then(|mut f| {
                f.write_all(meta.encode().as_bytes())?;
                if sync {
                    f.sync_all()?;
                }
                Ok(())
            })
            .map_err(about(&tmp))?;
        std::fs::rename(&tmp, &self.path).map_err(about(&self.path))
    }

    /// Sync the directory (after a rename [`Self::write`] made).
    fn sync_dir(&self) -> io::Result<()> {
        // (The path is `dir.join(META_FILE)`: it has a parent.)
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(about(dir))
    }

    /// Make sure the file's bound covers cas unique `cas` before it is
    /// handed out.
    pub fn cover_cas(&self, cas: u64) -> io::Result<()> {
        // Relaxed: a bound read here was stored only after the file held
        // it (below, on the thread that wrote the file); an older one read
        // costs only the lock.
        if cas <= self.cas_bound.load(Relaxed) {
            return Ok(());
        }
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if cas > w.cas_bound {
            let mut next = *w;
            next.cas_bound = cas.saturating_add(CAS_STEP);
            self.write(&next, self.durable)?;
            *w = next;
            // Relaxed: the file is written; a thread reading the old bound
            // takes the lock and finds it raised.
            self.cas_bound.store(next.cas_bound, Relaxed);
            if self.durable {
                // (After the state above: the file holds `next` whether
                // or not its directory entry is on disk.)
                self.sync_dir()?;
            }
        }
        Ok(())
    }

    /// Run `flush` (which sets `flush_all`'s state and returns it) and
    /// record what it set, under one lock: concurrent flushes write the
    /// file in the order they set the state, so the file ends with the
    /// state memory ends with.
    pub fn flushed(&self, flush: impl FnOnce() -> (u32, u64)) -> io::Result<()> {
        let mut w = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let (oldest_live, oldest_cas) = flush();
        let mut next = *w;
        next.oldest_live = oldest_live;
        next.oldest_cas = oldest_cas;
        self.write(&next, self.durable)?;
        *w = next;
        if self.durable {
            self.sync_dir()?;
        }
        Ok(())
    }

    /// Report a failed write of the meta file once (the cache keeps
    /// serving; a restart after it may hand out a cas unique again or
    /// bring back what a `flush_all` invalidated). With `--durable` it
    /// stops the server instead ([`crate::store::stop_on_lost_write`]):
    /// a reply would acknowledge what a restart may not find.
    pub fn report(&self, r: io::Result<()>) {
        static REPORTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if let Err(e) = r {
            if self.durable {
                crate::store::stop_on_lost_write(&e);
            }
            // Relaxed: a lone flag; nothing is published with it.
            if !REPORTED.swap(true, Relaxed) {
                eprintln!("dlht-server: cannot write the meta file: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips_and_refuses_damage() {
        let m = Meta { map_id: u64::MAX - 3, origin: -5, cas_bound: u64::MAX, oldest_live: 7, oldest_cas: 9 };
        let text = m.encode();
        assert_eq!(Meta::decode(&text), Ok(m));
        assert_eq!(Meta::decode(&Meta { map_id: 0, ..m }.encode()), Ok(Meta { map_id: 0, ..m }));
        // Cut short anywhere, or changed in any one byte.
        for end in 0..text.len() {
            assert_eq!(Meta::decode(&text[..end]), Err(Refused::Damaged), "cut at {end}");
        }
        for i in 0..text.len() {
            let mut b = text.clone().into_bytes();
            b[i] = if b[i] == b'1' { b'2' } else { b'1' };
            let changed = String::from_utf8(b).unwrap();
            // (A change of the format's number reads as format 1: refused too.)
            assert!(Meta::decode(&changed).is_err(), "changed at {i}: {changed:?}");
        }
        assert_eq!(Meta::decode(&format!("{text}more\n")), Err(Refused::Damaged));
        assert_eq!(Meta::decode("dlht-server 3\norigin 1\n"), Err(Refused::Damaged));
        assert_eq!(Meta::decode(""), Err(Refused::Damaged));
    }

    #[test]
    fn odd_texts_are_refused_even_with_a_good_check() {
        let sealed = |body: &str| format!("{body}check {:08x}\n", crc32c::crc32c(body.as_bytes()));
        let good =
            "dlht-server 2\nmap_id 0000000000000007\norigin 5\ncas_bound 9\noldest_live 0\noldest_cas 0\n";
        assert_eq!(
            Meta::decode(&sealed(good)),
            Ok(Meta { map_id: 7, origin: 5, cas_bound: 9, ..Meta::default() })
        );
        for odd in [
            // Lines in another order, one twice, one missing, one more.
            good.replace("origin 5\ncas_bound 9\n", "cas_bound 9\norigin 5\n"),
            good.replace("origin 5\n", "origin 5\norigin 5\n"),
            good.replace("origin 5\n", ""),
            format!("{good}oldest_cas 0\n"),
            // Numbers in another form, or out of their range.
            good.replace("origin 5", "origin +5"),
            good.replace("cas_bound 9", "cas_bound 09"),
            good.replace("map_id 0000000000000007", "map_id 7"),
            good.replace("oldest_live 0", "oldest_live 4294967296"),
            good.replace("cas_bound 9", "cas_bound 18446744073709551616"),
            good.replace('\n', "\r\n"),
        ] {
            assert_eq!(Meta::decode(&sealed(&odd)), Err(Refused::Damaged), "{odd:?}");
        }
    }

    /// Each entry of `dir`: its name, kind and length.
    fn listing(dir: &Path) -> Vec<(std::ffi::OsString, std::fs::FileType, u64)> {
        let mut all: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let m = std::fs::symlink_metadata(e.path()).unwrap();
                (e.file_name(), m.file_type(), m.len())
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    #[test]
    fn odd_meta_files_are_refused_by_name_and_left_as_they_are() {
        let dir = std::env::temp_dir().join(format!("dlht-server-meta-odd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let meta = dir.join(META_FILE);
        let refused = |what: &str, why: &str| {
            let before = listing(&dir);
            for e in [
                Restart::read(&dir).unwrap_err(),
                Restart::check_before_open(&dir, None).unwrap_err(),
                crate::store::Store::open(&dir, Default::default()).err().unwrap(),
            ] {
                let e = e.to_string();
                assert!(e.contains(&meta.display().to_string()) && e.contains(why), "{what}: {e}");
            }
            assert_eq!(listing(&dir), before, "{what}: the directory changed");
        };
        // Huge (sparse): refused without reading gigabytes.
        std::fs::File::create(&meta).unwrap().set_len(8 << 30).unwrap();
        refused("8 GiB", "damaged");
        std::fs::write(&meta, b"dlht-server 2\nmap_id \xff\xfe\n").unwrap();
        refused("not UTF-8", "damaged");
        std::fs::remove_file(&meta).unwrap();
        std::fs::create_dir(&meta).unwrap();
        refused("a directory", "not a regular file");
        std::fs::remove_dir(&meta).unwrap();
        #[cfg(unix)]
        {
            let target = dir.join("target");
            std::fs::write(&target, Meta { map_id: 7, ..Meta::default() }.encode()).unwrap();
            std::os::unix::fs::symlink(&target, &meta).unwrap();
            refused("a symlink", "not a regular file");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_meta_file_without_its_map_is_refused() {
        // Format 1, as the previous server wrote it: no map named.
        let old = "dlht-server 1\norigin 5\ncas_bound 1048576\noldest_live 0\noldest_cas 0\n";
        assert_eq!(Meta::decode(old), Err(Refused::Unnamed));
        let dir = std::env::temp_dir().join(format!("dlht-server-meta-old-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(META_FILE), old).unwrap();
        let e = Restart::read(&dir).unwrap_err();
        assert!(e.to_string().contains(META_FILE) && e.to_string().contains("older"), "{e}");
        assert!(Restart::check_before_open(&dir, Some(7)).is_err());
        std::fs::write(dir.join(META_FILE), "dlht-server 2\nmap_id 1\n").unwrap();
        let e = Restart::read(&dir).unwrap_err();
        assert!(e.to_string().contains(META_FILE) && e.to_string().contains("damaged"), "{e}");
        // A whole meta file beside no map: an open would make a new one.
        std::fs::write(dir.join(META_FILE), Meta { map_id: 7, ..Meta::default() }.encode()).unwrap();
        let e = Restart::check_before_open(&dir, None).unwrap_err();
        assert!(e.to_string().contains("holds no map"), "{e}");
        Restart::check_before_open(&dir, Some(7)).unwrap();
        let e = Restart::check_before_open(&dir, Some(8)).unwrap_err();
        assert!(e.to_string().contains(META_FILE) && e.to_string().contains("another map"), "{e}");
        let m = Restart::read(&dir).unwrap().unwrap();
        Restart::check_map(&dir, &m, 7).unwrap();
        let e = Restart::check_map(&dir, &m, 8).unwrap_err();
        assert!(e.to_string().contains(META_FILE) && e.to_string().contains("another map"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_go_through_no_link_and_name_the_file_they_failed_on() {
        let dir = std::env::temp_dir().join(format!("dlht-server-meta-write-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        #[cfg(unix)]
        {
            // A link left where the file is written first: replaced, not
            // written through.
            let target = dir.join("target");
            std::fs::write(&target, "kept").unwrap();
            std::os::unix::fs::symlink(&target, dir.join(TMP_FILE)).unwrap();
        }
        let r =
            Restart::start(&dir, Meta { map_id: 1, ..Meta::default() }, 0, Duration::ZERO, false).unwrap();
        #[cfg(unix)]
        assert_eq!(std::fs::read_to_string(dir.join("target")).unwrap(), "kept");
        assert_eq!(Restart::read(&dir).unwrap().unwrap().map_id, 1);
        // A directory in the file's place: the rename fails, naming it.
        std::fs::remove_file(dir.join(META_FILE)).unwrap();
        std::fs::create_dir(dir.join(META_FILE)).unwrap();
        let e = r.cover_cas(1).unwrap_err().to_string();
        assert!(e.contains(&dir.join(META_FILE).display().to_string()), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_cas_bound_is_raised_before_it_is_passed() {
        let dir = std::env::temp_dir().join(format!("dlht-server-meta-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let meta = Meta { map_id: 12, cas_bound: 10, ..Meta::default() };
        let r = Restart::start(&dir, meta, 0, Duration::ZERO, false).unwrap();
        r.cover_cas(10).unwrap();
        assert_eq!(Restart::read(&dir).unwrap().unwrap().cas_bound, 10);
        r.cover_cas(11).unwrap();
        assert_eq!(Restart::read(&dir).unwrap().unwrap().cas_bound, 11 + CAS_STEP);
        r.flushed(|| (3, 4)).unwrap();
        let m = Restart::read(&dir).unwrap().unwrap();
        assert_eq!((m.oldest_live, m.oldest_cas, m.cas_bound, m.map_id), (3, 4, 11 + CAS_STEP, 12));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
