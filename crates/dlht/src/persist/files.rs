//! The files of a persistent map: its directory's lock, shared mappings of
//! file regions, and the index files' names. Plain `std::fs` and `libc`
//! (mmap, flock): nothing here knows the layouts beyond their sizes.

use crate::error::Error;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// An `Error::Io` for step `what`.
pub fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::Io { what, kind: e.kind() }
}

/// The lock file's name.
pub const LOCK_FILE: &str = "lock";
/// The map file's name.
pub const MAP_FILE: &str = "map.dlht";

/// The file name of the index of `generation`.
pub fn index_file_name(generation: u64) -> String {
    format!("index.{generation}.dlht")
}

/// The generation an index file's name gives, if it is one.
pub fn index_generation(name: &str) -> Option<u64> {
    let g = name.strip_prefix("index.")?.strip_suffix(".dlht")?;
    // Only names `index_file_name` makes (no sign, no leading zeros).
    if g.is_empty() || (g.len() > 1 && g.starts_with('0')) || !g.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    g.parse().ok()
}

/// The generations of the index files in `dir`.
pub fn index_generations(dir: &Path) -> Result<Vec<u64>, Error> {
    let mut gens = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io("listing the map directory"))? {
        let e = e.map_err(io("listing the map directory"))?;
        if let Some(g) = e.file_name().to_str().and_then(index_generation) {
            gens.push(g);
        }
    }
    gens.sort_unstable();
    Ok(gens)
}

/// An exclusive lock on a map directory, held while the map is open: a
/// second open, in this process or another, gets [`Error::Locked`].
///
/// Two locks: a set of the directories this process has open (a second map
/// of this process), and `flock(2)` on the lock file (another process; the
/// kernel drops it when the process dies, so a crash leaves no stale
/// lock). A flock belongs to the open file, which a child forked by another
/// thread shares until it execs (the file is close-on-exec): a lock held
/// that way is waited out for up to 100 ms before the open is refused.
pub struct DirLock {
    _file: File,
    key: PathBuf,
}

/// The directories this process has open (canonical paths).
static OPEN_HERE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

impl DirLock {
    /// Create `dir` if needed and lock it.
    pub fn take(dir: &Path) -> Result<DirLock, Error> {
        std::fs::create_dir_all(dir).map_err(io("creating the map directory"))?;
        let key = std::fs::canonicalize(dir).map_err(io("resolving the map directory"))?;
        {
            let mut open = OPEN_HERE.lock().unwrap_or_else(|e| e.into_inner());
            if open.contains(&key) {
                return Err(Error::Locked);
            }
            open.push(key.clone());
        }
        let unregister = |e| {
            OPEN_HERE.lock().unwrap_or_else(|e| e.into_inner()).retain(|k| *k != key);
            e
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(LOCK_FILE))
            .map_err(io("opening the map directory's lock file"))
            .map_err(unregister)?;
        let started = std::time::Instant::now();
        loop {
            // SAFETY: flock on a descriptor we own; no memory is passed.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(DirLock { _file: file, key });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::WouldBlock {
                return Err(unregister(Error::Io { what: "locking the map directory", kind: e.kind() }));
            }
            if started.elapsed() > std::time::Duration::from_millis(100) {
                return Err(unregister(Error::Locked));
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // (The flock goes with the file, dropped after this.)
        OPEN_HERE.lock().unwrap_or_else(|e| e.into_inner()).retain(|k| *k != self.key);
    }
}

/// A shared, writable mapping of a file region: every store to it is a
/// store to the file's page cache, which outlives the process.
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a mapping is plain memory; what is stored in it is accessed
// through atomics by its users.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `len` bytes of `file` from `offset` (a multiple of the page
    /// size), shared and writable.
    pub fn new(file: &File, offset: usize, len: usize) -> Result<Mapping, Error> {
        if len == 0 {
            return Err(Error::Corrupt { what: "an empty file region" });
        }
        // SAFETY: a fresh shared mapping of a descriptor we own at no fixed
        // address; failure is reported as MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Io {
                what: "mapping a map file",
                kind: std::io::Error::last_os_error().kind(),
            });
        }
        Ok(Mapping { ptr: p as *mut u8, len })
    }

    /// Map `len` bytes of `file` from `offset` (a multiple of `align`, a
    /// power of two) at an address that is a multiple of `align` too, and
    /// advise huge pages if `huge`: with both aligned, the kernel can back
    /// the mapping with 2 MiB pages where the file system hands it such
    /// folios (tmpfs with `shmem_enabled` at advise, file systems with
    /// large folios); elsewhere the advice does nothing.
    pub fn new_aligned(
        file: &File,
        offset: usize,
        len: usize,
        align: usize,
        pages: Pages,
    ) -> Result<Mapping, Error> {
        if len == 0 {
            return Err(Error::Corrupt { what: "an empty file region" });
        }
        let span = len.checked_add(align).ok_or(Error::CapacityOverflow)?;
        // SAFETY: an anonymous reservation at no fixed address, unused but
        // for its range: the file is mapped over an aligned part of it,
        // and the rest unmapped.
        let base = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                span,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::Io {
                what: "reserving address space for a map file",
                kind: std::io::Error::last_os_error().kind(),
            });
        }
        let start = (base as usize).next_multiple_of(align);
        // SAFETY: [start, start + len) lies inside the reservation, which
        // this process owns; MAP_FIXED replaces that part of it.
        let p = unsafe {
            libc::mmap(
                start as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                file.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        let head = start - base as usize;
        let tail = span - head - len;
        // SAFETY: the parts of the reservation before and after the file
        // mapping, each unmapped once (on failure, the whole reservation).
        unsafe {
            if p == libc::MAP_FAILED {
                libc::munmap(base, span);
            } else {
                if head > 0 {
                    libc::munmap(base, head);
                }
                if tail > 0 {
                    libc::munmap((start + len) as *mut libc::c_void, tail);
                }
            }
        }
        if p == libc::MAP_FAILED {
            return Err(Error::Io {
                what: "mapping a map file",
                kind: std::io::Error::last_os_error().kind(),
            });
        }
        advise(p as usize, len, pages);
        Ok(Mapping { ptr: p as *mut u8, len })
    }

    /// The first byte.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Write the dirty pages of the mapping's first `bytes` (a multiple of
    /// the page size) to the file and wait: a ranged sync (msync), which
    /// writes nothing else of the file.
    pub fn sync_prefix(&self, bytes: usize) -> Result<(), Error> {
        // SAFETY: a page-aligned prefix of this live mapping.
        let r = unsafe { libc::msync(self.ptr as *mut libc::c_void, bytes.min(self.len), libc::MS_SYNC) };
        if r != 0 {
            return Err(Error::Io {
                what: "syncing a map file's header",
                kind: std::io::Error::last_os_error().kind(),
            });
        }
        super::mirror::msynced(self.ptr, bytes.min(self.len));
        Ok(())
    }

    /// Write the mapping's dirty pages to the file and wait (msync).
    pub fn sync(&self) -> Result<(), Error> {
        // SAFETY: exactly this live mapping.
        let r = unsafe { libc::msync(self.ptr as *mut libc::c_void, self.len, libc::MS_SYNC) };
        if r != 0 {
            return Err(Error::Io {
                what: "syncing a map file",
                kind: std::io::Error::last_os_error().kind(),
            });
        }
        super::mirror::msynced(self.ptr, self.len);
        Ok(())
    }

    /// Give the mapping's ownership to the caller: it must `munmap(ptr,
    /// len)` once (a `ZeroedArray` over it does).
    pub fn into_raw(self) -> (*mut u8, usize) {
        let r = (self.ptr, self.len);
        core::mem::forget(self);
        r
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `new`, unmapped once.
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
    }
}

/// Open `path` for reading and writing; its length.
pub fn open_rw(path: &Path, what: &'static str) -> Result<(File, u64), Error> {
    let f = OpenOptions::new().read(true).write(true).open(path).map_err(io(what))?;
    let len = f.metadata().map_err(io(what))?.len();
    Ok((f, len))
}

/// Create `path` (replacing a leftover) as `len` zero bytes (a sparse file).
pub fn create_zeroed(path: &Path, len: usize) -> Result<File, Error> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(io("creating an index file"))?;
    f.set_len(len as u64).map_err(io("sizing an index file"))?;
    Ok(f)
}

/// Give `len` bytes of `file` from `offset` their disk blocks now, as
/// unwritten extents (`fallocate(FALLOC_FL_KEEP_SIZE)`: nothing is written,
/// they read as zeros, the file's size is unchanged), so that the pages a
/// mapping then faults in find their blocks allocated instead of reserving
/// them one fault at a time. True if the file system did; false if it
/// cannot (no `fallocate` there: the blocks are then taken as the pages are
/// first written, as without this). A full file system or quota is an
/// error (`what` names the step), as is an I/O error.
pub fn preallocate(file: &File, offset: usize, len: usize, what: &'static str) -> Result<bool, Error> {
    #[cfg(target_os = "linux")]
    loop {
        // SAFETY: fallocate on a descriptor we own; no memory is passed.
        let r = unsafe {
            libc::fallocate(
                file.as_raw_fd(),
                libc::FALLOC_FL_KEEP_SIZE,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if r == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ENOSPC | libc::EDQUOT | libc::EIO | libc::EFBIG) => {
                Err(Error::Io { what, kind: e.kind() })
            }
            // EOPNOTSUPP, ENOSYS, EINVAL, ...: not here; blocks come on first write.
            _ => Ok(false),
        };
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, offset, len, what);
        Ok(false)
    }
}

/// Make a rename or a creation in `dir` durable (fsync of the directory).
pub fn sync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io("syncing the map directory"))?;
    super::mirror::dir_synced(dir);
    Ok(())
}

/// Remove `path`, ignoring a file already gone.
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_names_round_trip_and_nothing_else_parses() {
        for g in [1u64, 2, 10, 123456789, u64::MAX] {
            assert_eq!(index_generation(&index_file_name(g)), Some(g));
        }
        for bad in
            ["index..dlht", "index.01.dlht", "index.-1.dlht", "index.1.dlht.tmp", "map.dlht", "index.x.dlht"]
        {
            assert_eq!(index_generation(bad), None, "{bad}");
        }
    }
}

/// The pages a map file's mapping asks the kernel for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pages {
    /// The kernel's choice.
    Default,
    /// 2 MiB pages where the file system gives them (`MADV_HUGEPAGE`): a
    /// large index's TLB reach, as for an array in memory.
    Huge,
    /// 4 KiB pages (`MADV_RANDOM`: no readahead, so the page cache makes
    /// one-page folios): a sync then writes the pages that changed, not
    /// whole 2 MiB folios. For maps synced per call
    /// (`Durability::Sync` with a zero interval).
    Small,
}

/// Give `len` bytes at `at`, a live mapping of this process, the advice
/// `pages` asks for (failure is harmless: the kernel's defaults).
pub fn advise(at: usize, len: usize, pages: Pages) {
    let advice = match pages {
        Pages::Default => return,
        Pages::Huge => libc::MADV_HUGEPAGE,
        Pages::Small => libc::MADV_RANDOM,
    };
    // SAFETY: advice on the caller's live mapping; it changes no contents.
    unsafe {
        libc::madvise(at as *mut libc::c_void, len, advice);
    }
}
