//! Strongly consistent snapshots of a [`Map`] (paper §3.4.4).
//!
//! The paper migrates the index to a same-size one, stalling updates until
//! every bin has moved. Here no index is allocated: every bin is frozen in
//! place (`protocol::freeze`: the transfer's first step, then the bin's
//! live pairs killed and recorded), and once all are frozen — the
//! snapshot's instant — each is thawed (pairs written back). An operation on
//! a bin completes before the bin's freeze (and is in the snapshot) or
//! after its thaw (and is not), and every freeze precedes every thaw, so
//! the snapshot is the map's contents at that instant. Operations on a bin
//! wait from its freeze to its thaw: gets too, for up to the whole
//! snapshot. Resizes of the index wait as well (`resize::hold_for_snapshot`).

use super::Map;
use crate::driver::Front;
#[cfg(not(loom))]
use crate::persist::snapshot_log::SnapshotLog;
use crate::plant::{planted, Plant};
#[cfg(not(loom))]
use crate::protocol::freeze::freeze_noting;
use crate::protocol::freeze::{freeze, thaw, Killed};
use crate::resize;
use crate::word::Inline;
use core::hash::BuildHasher;

impl<K: Inline, V: Inline, S: BuildHasher> Map<K, V, S> {
    /// The entries at one instant (a strongly consistent snapshot): every
    /// pair is one the map held at the same moment, during the call.
    ///
    /// Costs two passes over the index and memory for every entry; while it
    /// runs, operations on a bin wait from the moment the snapshot reaches
    /// it until the end, and resizes wait. For a scan that never blocks
    /// anyone, use [`iter`](Self::iter) (weakly consistent).
    ///
    /// ```
    /// let m = dlht::Map::<u64, u64>::new();
    /// for k in 0..10 {
    ///     m.insert(k, k * k).unwrap();
    /// }
    /// let mut s = m.snapshot();
    /// s.sort();
    /// assert_eq!(s, (0..10).map(|k| (k, k * k)).collect::<Vec<_>>());
    /// ```
    pub fn snapshot(&self) -> Vec<(K, V)> {
        match self.try_snapshot() {
            Ok(s) => s,
            Err(e) => panic!("dlht: {e}"),
        }
    }

    /// Like [`snapshot`](Self::snapshot), with a persistent map's failure to
    /// write its snapshot log (see `persist::snapshot_log`) as an error; an
    /// in-memory map never fails.
    pub fn try_snapshot(&self) -> Result<Vec<(K, V)>, crate::Error> {
        let guard = self.core.pin();
        let hash = |w| self.hash_word(w);
        let idx = resize::hold_for_snapshot(&self.core, &guard, &hash);
        // A persistent map logs each pair before killing it.
        #[cfg(not(loom))]
        let mut log = match self.core.persist() {
            Some(p) => match SnapshotLog::create(p.files(), idx) {
                Ok(l) => Some(l),
                Err(e) => {
                    resize::release_snapshot(idx);
                    return Err(e);
                }
            },
            None => None,
        };
        let mut killed: Vec<Killed> = Vec::with_capacity(self.len());
        for b in 0..idx.bins() {
            let from = killed.len();
            #[cfg(not(loom))]
            match &mut log {
                Some(l) => {
                    l.freezing(b);
                    freeze_noting(&idx.bin(b), &mut killed, &mut |e| l.note(e));
                    crate::persist::crash::at(crate::persist::crash::CrashPoint::SnapshotFreezing);
                }
                None => freeze(&idx.bin(b), &mut killed),
            }
            #[cfg(loom)]
            freeze(&idx.bin(b), &mut killed);
            // Planted bug (scripts/planted-bugs.sh): thaw each bin at once,
            // so the bins are read at different instants.
            if planted(Plant::SnapshotThawEarly) {
                thaw(&idx.bin(b), &killed[from..]);
            }
        }
        if planted(Plant::SnapshotThawEarly) {
            resize::release_snapshot(idx);
            return Ok(killed.into_iter().map(|(_, _, k, v)| (K::from_word(k), V::from_word(v))).collect());
        }
        // Every bin is frozen: this is the snapshot's instant.
        let mut rest = &killed[..];
        for b in 0..idx.bins() {
            let n = rest.iter().take_while(|e| e.0 as usize == b).count();
            thaw(&idx.bin(b), &rest[..n]);
            rest = &rest[n..];
        }
        #[cfg(not(loom))]
        if let Some(l) = log {
            l.finish();
        }
        resize::release_snapshot(idx);
        drop(guard);
        Ok(killed.into_iter().map(|(_, _, k, v)| (K::from_word(k), V::from_word(v))).collect())
    }
}
