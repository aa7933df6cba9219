//! A persistent map's snapshot log (`DIR/snapshot.dlht`): while a snapshot
//! holds bins frozen (`protocol::freeze`), each pair it kills is written
//! here first, so that a process dying mid-snapshot loses nothing: recovery
//! writes every logged pair whose slot still holds `(moved, key)` back, and
//! thaws every bin the log says may be frozen. Its size is the snapshot's:
//! work in flight, not the map's size.

use super::files::{self, Mapping};
use super::index_file::FileSet;
use super::layout::{
    HeaderCrc, SnapshotEntry, SnapshotHeader, ENDIAN_CHECK, LAYOUT_VERSION, PAGE, SNAPSHOT_MAGIC,
};
use crate::error::Error;
use crate::protocol::freeze::Killed;
use crate::raw::header::{BinState, SlotState};
use crate::raw::index::Index;
use crate::sync::Ordering;

/// The log's file name.
pub const SNAPSHOT_FILE: &str = "snapshot.dlht";

/// An open snapshot log, written by the one thread taking the snapshot.
pub struct SnapshotLog {
    map: Mapping,
    capacity: usize,
    /// The slot of the last entry, to overwrite it on a retry.
    last: Option<(u32, u8)>,
    set: std::sync::Arc<FileSet>,
}

impl SnapshotLog {
    /// A new log for a snapshot of `idx` (room for every slot it has).
    pub fn create(set: &std::sync::Arc<FileSet>, idx: &Index) -> Result<SnapshotLog, Error> {
        let capacity = idx.bins() * crate::raw::header::SLOTS_PER_BIN;
        let bytes = capacity.checked_mul(size_of::<SnapshotEntry>()).and_then(|b| b.checked_add(PAGE));
        let bytes = bytes.ok_or(Error::CapacityOverflow)?;
        let file = files::create_zeroed(&set.dir().join(SNAPSHOT_FILE), bytes)?;
        let map = Mapping::new(&file, 0, bytes)?;
        // SAFETY: a fresh zeroed page of our own file, which the header
        // fits; every field is valid as zero.
        let h = unsafe { &mut *(map.ptr() as *mut SnapshotHeader) };
        h.magic = SNAPSHOT_MAGIC;
        h.layout_version = LAYOUT_VERSION;
        h.endian = ENDIAN_CHECK;
        h.generation = idx.generation;
        h.capacity = capacity as u64;
        let stamp = set.stamp();
        h.map_id = stamp.map_id;
        h.stamp = stamp.stamp;
        h.header_crc = h.crc();
        Ok(SnapshotLog { map, capacity, last: None, set: set.clone() })
    }

    fn header(&self) -> &SnapshotHeader {
        // SAFETY: page 0 of the mapping; any bytes are a valid header.
        unsafe { &*(self.map.ptr() as *const SnapshotHeader) }
    }

    fn entry(&self, i: usize) -> &SnapshotEntry {
        assert!(i < self.capacity, "dlht invariant: a snapshot killed more pairs than its index has slots");
        // SAFETY: entries 0..capacity follow the header page (the file's
        // size); an entry is atomics only.
        unsafe { &*(self.map.ptr().add(PAGE) as *const SnapshotEntry).add(i) }
    }

    /// Bin `b` is about to be frozen. Relaxed, here and below: the
    /// freeze's CASes that follow are releases, and a crash keeps every
    /// store before them.
    pub fn freezing(&self, b: usize) {
        self.header().frozen.store(b as u64 + 1, Ordering::Relaxed);
    }

    /// The freeze is about to kill `k` (see `protocol::freeze::freeze_noting`).
    pub fn note(&mut self, (bin, slot, key, value): Killed) {
        let n = self.header().entries.load(Ordering::Relaxed) as usize;
        let i = if self.last == Some((bin, slot)) { n - 1 } else { n };
        let e = self.entry(i);
        e.place.store(SnapshotEntry::place_of(bin, slot), Ordering::Relaxed);
        e.key.store(key, Ordering::Relaxed);
        e.value.store(value, Ordering::Relaxed);
        if i == n {
            self.header().entries.store(n as u64 + 1, Ordering::Relaxed);
        }
        self.last = Some((bin, slot));
    }

    /// Every bin is thawed: the log goes.
    pub fn finish(self) {
        files::remove(&self.set.dir().join(SNAPSHOT_FILE));
    }
}

/// Check the snapshot log in the map's directory, if there is one, before
/// anything is changed: a log of another map, of another state of this
/// map, or with a damaged header is refused (recovery would write its
/// pairs into the bins). A log whose header was never written (a crash
/// while it was made) is left for recovery to delete.
pub fn check(set: &FileSet) -> Result<(), Error> {
    let path = set.dir().join(SNAPSHOT_FILE);
    let Ok((file, len)) = files::open_rw(&path, "opening the snapshot log") else {
        return Ok(()); // none (or unreadable: recovery skips it too)
    };
    if len < PAGE as u64 {
        return Ok(());
    }
    let map = Mapping::new(&file, 0, PAGE)?;
    // SAFETY: page 0 of the mapping; any bytes are a valid header.
    let h = unsafe { &*(map.ptr() as *const SnapshotHeader) };
    if h.magic == [0; 8] {
        return Ok(());
    }
    if h.magic != SNAPSHOT_MAGIC || h.layout_version != LAYOUT_VERSION || h.header_crc != h.crc() {
        // A log whose making a crash cut short (its header is written field
        // by field, the checksum last) froze no bin and logged no pair:
        // nothing to thaw, and recovery deletes it. (Refused, it kept the
        // map from opening after a kill -9 at that moment.)
        // Relaxed: no thread of this process runs in the map.
        if h.frozen.load(Ordering::Relaxed) == 0 && h.entries.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        return Err(Error::Corrupt { what: "the snapshot log snapshot.dlht is damaged (its header)" });
    }
    set.stamp().check(h.map_id, h.stamp, super::layout::SNAPSHOT_FILE_ERRORS)
}

/// Recovery: thaw what a snapshot that died with its process left frozen in
/// `idx`, from its log in the map's directory, and delete the log. Returns
/// the bins thawed. A log of another index (or unreadable) is deleted: its
/// snapshot ended before that index was resized.
pub fn recover(set: &FileSet, idx: &Index) -> usize {
    // Relaxed loads throughout: the dead process's stores are all in the
    // page cache, and no other thread runs during recovery.
    let path = set.dir().join(SNAPSHOT_FILE);
    let thawed = (|| {
        let (file, len) = files::open_rw(&path, "opening the snapshot log").ok()?;
        if len < PAGE as u64 {
            return None;
        }
        let map = Mapping::new(&file, 0, len as usize).ok()?;
        // SAFETY: page 0 of the mapping; any bytes are a valid header.
        let h = unsafe { &*(map.ptr() as *const SnapshotHeader) };
        // (`check` refused a log of another map or state at the open.)
        if h.magic != SNAPSHOT_MAGIC || h.generation != idx.generation || h.layout_version != LAYOUT_VERSION {
            return None;
        }
        let room = (len as usize - PAGE) / size_of::<SnapshotEntry>();
        let entries = (h.entries.load(Ordering::Relaxed) as usize).min(room);
        for i in 0..entries {
            // SAFETY: i < room: inside the mapping; entries are atomics.
            let e = unsafe { &*(map.ptr().add(PAGE) as *const SnapshotEntry).add(i) };
            let (b, slot) = SnapshotEntry::bin_and_slot(e.place.load(Ordering::Relaxed));
            if b >= idx.bins() || slot >= crate::raw::header::SLOTS_PER_BIN {
                continue;
            }
            let bin = idx.bin(b);
            if bin.header().bin_state() != BinState::InTransfer || bin.header().slot(slot) != SlotState::Valid
            {
                continue;
            }
            let (k, v) = (e.key.load(Ordering::Relaxed), e.value.load(Ordering::Relaxed));
            let s = bin.slot(&mut None, slot);
            // Killed as (moved, k); a thaw that died writing the pair back
            // (value first, then key) left (moved, v).
            let (kw, vw) = (s.load_key(), s.load_value());
            if kw == bin.moved() && (vw == k || vw == v) {
                s.fill_owned(k, v);
            }
        }
        let frozen = (h.frozen.load(Ordering::Relaxed) as usize).min(idx.bins());
        let mut thawed = 0;
        for b in 0..frozen {
            let bin = idx.bin(b);
            let hd = bin.header();
            if hd.bin_state() == BinState::InTransfer {
                bin.bucket.header.store_owned(hd.with_bin_state(BinState::NoTransfer));
                thawed += 1;
            }
        }
        Some(thawed)
    })();
    files::remove(&path);
    thawed.unwrap_or(0)
}
