//! Reclamation (`crate::reclaim`) tested through the map that owns it: the
//! membarrier failure path and the per-map thread records with real maps,
//! and the loom models of hazard 4 with the real `Core`. (Here, not in
//! `reclaim.rs`, so that reclamation, a lower room, never names the map.)

#[cfg(not(loom))]
mod with_maps {
    use crate::reclaim::tests::FAIL_MEMBARRIER;
    use crate::Map;

    #[test]
    fn a_failing_membarrier_keeps_retired_indexes_and_carries_on() {
        if !crate::reclaim::asymmetric() {
            eprintln!("membarrier is not offered here: the symmetric protocol never calls it");
            return;
        }
        let m = Map::<u64, u64>::new();
        FAIL_MEMBARRIER.with(|f| f.set(true));
        for k in 0..12_000u64 {
            m.insert(k, k).unwrap(); // grows many times; must not panic
        }
        let s = m.stats();
        assert!(s.resizes >= 3);
        assert_eq!(s.indexes_awaiting_free, s.resizes, "freed without a barrier");
        assert!((0..12_000u64).all(|k| m.get(&k) == Some(k)));
        FAIL_MEMBARRIER.with(|f| f.set(false));
        assert_eq!(m.get(&1), Some(1)); // the next leave frees them
        assert_eq!(m.stats().indexes_awaiting_free, 0);
    }

    #[test]
    fn a_thread_finds_its_own_record_in_each_map() {
        // The one-entry record cache must never hand a thread the record it
        // has in another map. The length share lives in the record, so two
        // maps used in turn, and maps reborn at the address of a dropped one
        // (each round's maps sit in the same stack slots), must still count
        // exactly.
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..200 {
                        // The last map this thread entered is dropped at the
                        // end of the round; the next round's sits where it was.
                        let a = Map::<u64, u64>::new();
                        (0..10u64).for_each(|k| a.insert(k, k).unwrap());
                        assert_eq!(a.len(), 10);
                    }
                    let (a, b) = (Map::<u64, u64>::new(), Map::<u64, u64>::new());
                    for k in 0..10u64 {
                        a.insert(k, k).unwrap();
                        b.insert(k, k).unwrap();
                        b.insert(100 + k, k).unwrap();
                    }
                    assert_eq!((a.len(), b.len()), (10, 20));
                });
            }
        });
    }

    #[test]
    fn the_publisher_frees_the_index_it_retires_on_leaving() {
        // One thread: nobody else is inside, so every replaced index must be
        // gone when the insert that replaced it returns (stats() frees
        // nothing itself).
        let m = Map::<u64, u64>::with_capacity(0);
        for k in 0..20_000u64 {
            m.insert(k, k).unwrap();
            if k % 256 == 0 {
                assert_eq!(m.stats().indexes_awaiting_free, 0, "after {k} inserts");
            }
        }
        let s = m.stats();
        assert!(s.resizes >= 5);
        assert_eq!(s.indexes_awaiting_free, 0);
        assert_eq!(m.core.reclaim.freed.load(crate::sync::Ordering::Relaxed), s.resizes);
    }
}

/// Loom models of hazard 4 with the real `Core` and `Reclaim`.

#[cfg(loom)]
mod loom_model {
    use crate::map::state::Core;
    use crate::raw::index::Index;
    use crate::raw::markers::Markers;
    use loom::sync::Arc;

    /// Every interleaving (the model is small enough for no preemption bound).
    fn model(f: impl Fn() + Sync + Send + 'static) {
        loom::model::Builder::new().check(f);
    }

    /// Replace the current index of `core` by a new one, as a resize's last
    /// chunk finisher does; returns the guard under which it did.
    fn publish_next(core: &Core) -> crate::reclaim::Guard<'_> {
        let guard = core.pin();
        let old = core.current(&guard);
        let next = Box::leak(Box::new(Index::new(2, old.markers, old.generation + 1).unwrap()));
        core.publish(old, next, None);
        guard
    }

    /// A map core with the protocol given, and a reader thread that enters
    /// it, checks it announced no generation past the index it loaded, and
    /// reads the index. The reader is spawned before the caller publishes,
    /// so that nothing orders the publisher's stores before its loads.
    fn core_and_reader(asymmetric: bool) -> (Arc<Core>, loom::thread::JoinHandle<()>) {
        let core = Arc::new(Core::with_protocol(2, Markers::for_hash(|w| w), asymmetric).unwrap());
        let reader = {
            let core = core.clone();
            loom::thread::spawn(move || {
                let guard = core.pin();
                let index = core.current(&guard);
                let announced = core.reclaim.announced();
                assert!(
                    index.generation >= announced,
                    "announced generation {announced} while holding index {}",
                    index.generation
                );
                index.touch();
            })
        };
        (core, reader)
    }

    /// A reader enters while a publisher replaces the index and, on leaving,
    /// frees the old one (symmetric protocol: loom cannot model membarrier).
    /// The index's loom liveness cell reports a free not ordered after the
    /// reader's access; it fails if leaving stores 0 with Relaxed
    /// (`DLHT_PLANT=leave_relaxed`), since the reads made inside
    /// then need not happen before the free.
    #[test]
    fn an_index_is_never_freed_under_a_reader() {
        model(|| {
            let (core, reader) = core_and_reader(false);
            drop(publish_next(&core)); // leaving frees the old index once no reader holds it
            reader.join().unwrap();
        });
    }

    /// The invariant the scan relies on: a thread never announces a
    /// generation newer than the index it then loads. With the generation
    /// loaded Relaxed (`DLHT_PLANT=generation_relaxed`, the code
    /// once had) the asymmetric protocol's announcement, a plain
    /// store, orders nothing: the reader can see generation 2 and still
    /// load index 1, and a scan would free index 1 under it. (In the
    /// symmetric protocol the announcing SeqCst store hides the bug.)
    #[test]
    fn a_thread_never_announces_past_the_index_it_holds() {
        model(|| {
            let (core, reader) = core_and_reader(true);
            // Keep the publisher inside until the reader is done: this
            // model checks the announcement, not the free (which depends on
            // membarrier, outside loom's reach).
            let guard = publish_next(&core);
            reader.join().unwrap();
            drop(guard);
        });
    }
}
