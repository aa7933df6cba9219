//! A power loss, simulated in process (feature `crash-points`, for the
//! project's tests): every sync of a watched directory's files — an
//! `fdatasync`, a ranged `msync`, a directory `fsync` — copies what it
//! makes durable into memory, and [`materialize`] writes out the directory
//! a power loss at that instant would leave: each file as its syncs left
//! it, nothing written after. Without the feature the hooks are empty.
//!
//! What it models, and why it suffices for the tests that use it: data is
//! durable only once a sync covered it, which is the property the sync
//! ordering of `Durability::Sync` is written against (LazyFS, the opt-in
//! study, drops unsynced writes the same way). A name is durable once its
//! directory was synced, or once the file itself was (ext4 commits the
//! entry with the file's first sync). It does not model the kernel's own
//! writeback, which can only make more durable, in any order: what that
//! breaks needs LazyFS (docs/results/power-loss).
//!
//! The hooks find a file by its descriptor (`/proc/self/fd`) or, for an
//! `msync`, by its address (`/proc/self/maps`): slow, and only for tests.

#[cfg(feature = "crash-points")]
mod imp {
    use std::collections::{BTreeMap, HashMap};
    use std::fs::File;
    use std::io;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileExt, MetadataExt};
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    const PAGE: u64 = 4096;

    /// A file's durable contents: its length and its pages with data.
    #[derive(Default)]
    struct Content {
        len: u64,
        pages: BTreeMap<u64, Vec<u8>>,
    }

    /// A file: its inode and birth time (an inode number is reused once
    /// its file is deleted).
    type FileId = (u64, Option<std::time::SystemTime>);

    fn id(meta: &std::fs::Metadata) -> FileId {
        (meta.ino(), meta.created().ok())
    }

    /// A watched directory: its durable names and their files' contents.
    struct Mirror {
        dir: PathBuf,
        names: HashMap<String, FileId>,
        files: HashMap<FileId, Content>,
        /// A power loss to take right after a file is synced (see
        /// [`lose_power_after`]).
        trigger: Option<Trigger>,
    }

    /// See [`lose_power_after`].
    struct Trigger {
        synced: Box<dyn Fn(&str) -> bool + Send>,
        dest: PathBuf,
        taken: std::sync::Arc<std::sync::atomic::AtomicBool>,
    }

    static MIRRORS: Mutex<Vec<Mirror>> = Mutex::new(Vec::new());

    fn mirrors() -> std::sync::MutexGuard<'static, Vec<Mirror>> {
        MIRRORS.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Watch `dir` from now on: what is there now counts as durable.
    pub fn watch(dir: &Path) -> io::Result<()> {
        let dir = dir.canonicalize()?;
        let mut m = Mirror { dir: dir.clone(), names: HashMap::new(), files: HashMap::new(), trigger: None };
        for e in std::fs::read_dir(&dir)? {
            let e = e?;
            if e.file_type()?.is_file() {
                let f = File::open(e.path())?;
                let fid = id(&f.metadata()?);
                m.names.insert(e.file_name().to_string_lossy().into_owned(), fid);
                m.files.insert(fid, read_range(&f, 0, u64::MAX)?);
            }
        }
        let mut all = mirrors();
        all.retain(|m| m.dir != dir);
        all.push(m);
        Ok(())
    }

    /// Stop watching `dir`.
    pub fn unwatch(dir: &Path) {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        mirrors().retain(|m| m.dir != dir);
    }

    /// Write into `dest` (an empty directory) the files of the watched
    /// `dir` as a power loss now would leave them.
    pub fn materialize(dir: &Path, dest: &Path) -> io::Result<()> {
        let dir = dir.canonicalize()?;
        let all = mirrors();
        let m = all.iter().find(|m| m.dir == dir).ok_or(io::ErrorKind::NotFound)?;
        write_out(m, dest)
    }

    /// Once, right after a sync of a file of the watched `dir` whose name
    /// `synced` accepts (before the sync that called it goes on to other
    /// files), write into `dest` what a power loss then would leave, as
    /// [`materialize`] does: a fault at a protocol point, as LazyFS's
    /// crash after an `fsync`. The flag returned says when it was taken.
    pub fn lose_power_after(
        dir: &Path,
        synced: impl Fn(&str) -> bool + Send + 'static,
        dest: &Path,
    ) -> io::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        let dir = dir.canonicalize()?;
        let mut all = mirrors();
        let m = all.iter_mut().find(|m| m.dir == dir).ok_or(io::ErrorKind::NotFound)?;
        let taken = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        m.trigger =
            Some(Trigger { synced: Box::new(synced), dest: dest.to_path_buf(), taken: taken.clone() });
        Ok(taken)
    }

    fn write_out(m: &Mirror, dest: &Path) -> io::Result<()> {
        for (name, file) in &m.names {
            let f = File::create(dest.join(name))?;
            let Some(c) = m.files.get(file) else { continue };
            f.set_len(c.len)?;
            for (p, bytes) in &c.pages {
                f.write_all_at(bytes, p * PAGE)?;
            }
        }
        Ok(())
    }

    /// The pages of `f` with data in `[from, to)` (to clamped to its
    /// length), holes skipped.
    fn read_range(f: &File, from: u64, to: u64) -> io::Result<Content> {
        let len = f.metadata()?.len();
        let to = to.min(len);
        let mut c = Content { len, pages: BTreeMap::new() };
        let mut at = from / PAGE * PAGE;
        while at < to {
            // SAFETY: lseek on a descriptor we hold; errors are returned.
            let data = unsafe { libc::lseek(f.as_raw_fd(), at as libc::off_t, libc::SEEK_DATA) };
            if data < 0 || data as u64 >= to {
                break; // ENXIO: no data past `at`
            }
            let start = data as u64 / PAGE * PAGE;
            // SAFETY: as above.
            let hole = unsafe { libc::lseek(f.as_raw_fd(), start as libc::off_t, libc::SEEK_HOLE) };
            let end = if hole < 0 { to } else { (hole as u64).min(to) };
            let mut p = start;
            while p < end {
                let mut buf = vec![0u8; PAGE as usize];
                let n = f.read_at(&mut buf, p)?;
                buf.truncate(n);
                if buf.iter().any(|&b| b != 0) {
                    c.pages.insert(p / PAGE, buf);
                }
                p += PAGE;
            }
            at = end.max(start + PAGE);
        }
        Ok(c)
    }

    /// Record that `[from, to)` of the file at `path` (all of it: `None`)
    /// is durable, and its name with it.
    fn synced_path(path: &Path, range: Option<(u64, u64)>) {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return };
        let mut all = mirrors();
        let Some(m) = all.iter_mut().find(|m| m.dir == dir) else { return };
        let Ok(f) = File::open(path) else { return };
        let Ok(meta) = f.metadata() else { return };
        let (from, to) = range.unwrap_or((0, u64::MAX));
        let Ok(new) = read_range(&f, from, to) else { return };
        let c = m.files.entry(id(&meta)).or_default();
        if range.is_none() {
            *c = new;
        } else {
            let first = from / PAGE;
            let last = to.min(new.len).div_ceil(PAGE);
            c.pages.retain(|p, _| *p < first || *p >= last);
            c.pages.extend(new.pages);
            c.len = new.len;
        }
        let name = name.to_string_lossy().into_owned();
        m.names.insert(name.clone(), id(&meta));
        if m.trigger.as_ref().is_some_and(|t| (t.synced)(&name)) {
            let t = m.trigger.take().expect("checked above");
            if write_out(m, &t.dest).is_ok() {
                t.taken.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }

    /// An `fdatasync` (or `fsync`) of `file` succeeded.
    pub(crate) fn file_synced(file: &File) {
        if mirrors().is_empty() {
            return;
        }
        if let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
            synced_path(&path, None);
        }
    }

    /// An `msync` of `[addr, addr + len)` succeeded.
    pub(crate) fn msynced(addr: *const u8, len: usize) {
        if mirrors().is_empty() {
            return;
        }
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return };
        let a = addr as u64;
        for line in maps.lines() {
            let mut w = line.split_whitespace();
            let (Some(range), _, Some(off), _, _, Some(path)) =
                (w.next(), w.next(), w.next(), w.next(), w.next(), w.next())
            else {
                continue;
            };
            let Some((s, e)) = range.split_once('-') else { continue };
            let (Ok(s), Ok(e), Ok(off)) =
                (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16), u64::from_str_radix(off, 16))
            else {
                continue;
            };
            if s <= a && a < e {
                let from = off + (a - s);
                synced_path(Path::new(path), Some((from, from + len as u64)));
                return;
            }
        }
    }

    /// An `fsync` of the directory `dir` succeeded: its names now are
    /// durable, and names gone from it are gone.
    pub(crate) fn dir_synced(dir: &Path) {
        if mirrors().is_empty() {
            return;
        }
        let Ok(dir) = dir.canonicalize() else { return };
        let mut all = mirrors();
        let Some(m) = all.iter_mut().find(|m| m.dir == dir) else { return };
        let Ok(entries) = std::fs::read_dir(&dir) else { return };
        let mut names = HashMap::new();
        for e in entries.flatten() {
            // By path (statx), not the entry's `fstatat`, which gives no
            // birth time: the file's id must match its syncs'.
            let Ok(meta) = std::fs::symlink_metadata(e.path()) else { continue };
            if meta.is_file() {
                names.insert(e.file_name().to_string_lossy().into_owned(), id(&meta));
                // A name made durable before any of its data: the length
                // the file was given, zeros.
                m.files.entry(id(&meta)).or_insert(Content { len: meta.len(), pages: BTreeMap::new() });
            }
        }
        m.names = names;
        let live: Vec<FileId> = m.names.values().copied().collect();
        m.files.retain(|f, _| live.contains(f));
    }
}

#[cfg(not(feature = "crash-points"))]
mod imp {
    #[inline(always)]
    pub(crate) fn file_synced(_: &std::fs::File) {}
    #[inline(always)]
    pub(crate) fn msynced(_: *const u8, _: usize) {}
    #[inline(always)]
    pub(crate) fn dir_synced(_: &std::path::Path) {}
}

#[cfg(feature = "crash-points")]
pub use imp::*;
#[cfg(not(feature = "crash-points"))]
pub(crate) use imp::*;
