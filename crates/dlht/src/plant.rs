//! Planted bugs: each reverts one fix, so that scripts/planted-bugs.sh can
//! show the check named for it fails. A build with `--cfg dlht_plants`
//! (`DLHT_PLANTS=1` with the `internals` feature: see build.rs) carries
//! every plant and turns on the one that `DLHT_PLANT` names at run time, so
//! one build serves every plant; in every other build [`planted`] is a
//! constant `false` and the plants compile away.

/// Declares [`Plant`] with the name `DLHT_PLANT` gives each variant.
macro_rules! plants {
    ($($variant:ident = $name:literal,)*) => {
        /// One planted bug (the comment at its site says what it reverts).
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        // A loom build leaves out the persistent map and its plants.
        #[cfg_attr(loom, allow(dead_code))]
        pub(crate) enum Plant {
            $(#[doc = $name] $variant,)*
        }

        #[cfg(dlht_plants)]
        impl Plant {
            /// Every plant, with its name.
            const ALL: &'static [(Plant, &'static str)] = &[$((Plant::$variant, $name),)*];
        }
    };
}

plants! {
    RemoveHeaderOnly = "remove_header_only",
    TransferKeepsKey = "transfer_keeps_key",
    ScanNoReread = "scan_no_reread",
    InsertNoRescan = "insert_no_rescan",
    GetNoValidate = "get_no_validate",
    TrustSignature = "trust_signature",
    InlineAnyLength = "inline_any_length",
    ShadowDropped = "shadow_dropped",
    FreezeNoKill = "freeze_no_kill",
    SnapshotThawEarly = "snapshot_thaw_early",
    GenerationRelaxed = "generation_relaxed",
    LeaveRelaxed = "leave_relaxed",
    ShrinkFinishEach = "shrink_finish_each",
    OwnedNoHold = "owned_no_hold",
    IterClassReuse = "iter_class_reuse",
    LocalFreeNested = "local_free_nested",
    RecordReuseById = "record_reuse_by_id",
    FallbackJudgedLate = "fallback_judged_late",
    OwnedHoldNone = "owned_hold_none",
    LinksNeverRaised = "links_never_raised",
    AbortTakesValid = "abort_takes_valid",
    ChunkSkipsBusyBin = "chunk_skips_busy_bin",
    UpdateBlind = "update_blind",
    ComputeBlind = "compute_blind",
    RecoverNoMoving = "recover_no_moving",
    RecoverNoClean = "recover_no_clean",
    TransferKillsDead = "transfer_kills_dead",
    RecoverNoShadows = "recover_no_shadows",
    FreezeKillsDead = "freeze_kills_dead",
    FallbackFileLate = "fallback_file_late",
    HeapNoMark = "heap_no_mark",
    HeapBumpReset = "heap_bump_reset",
    StampUnchecked = "stamp_unchecked",
    SealUnchecked = "seal_unchecked",
    SettleTrustsDamage = "settle_trusts_damage",
    HeapTrustsMarksAfterCrash = "heap_trusts_marks_after_crash",
    TransferDuringSync = "transfer_during_sync",
    TargetsKept = "targets_kept",
    SyncOldestFirst = "sync_oldest_first",
    MarkersOutliveTheirOpen = "markers_outlive_their_open",
    LinkGivenUnheld = "link_given_unheld",
    FullWhileLinkHeld = "full_while_link_held",
    RecoverIgnoresCounts = "recover_ignores_counts",
    StrayPairsCopied = "stray_pairs_copied",
    IntentLeftToUserCode = "intent_left_to_user_code",
    ShrinkJudgedByFirstSource = "shrink_judged_by_first_source",
    RecoverSkipsRetired = "recover_skips_retired",
    RemoveRecordedAfterKill = "remove_recorded_after_kill",
}

/// Whether `plant` is the one `DLHT_PLANT` names (read once). An unknown
/// name panics, so a misspelt plant cannot pass for one that was not caught.
#[cfg(dlht_plants)]
pub(crate) fn planted(plant: Plant) -> bool {
    static CHOSEN: std::sync::OnceLock<Option<Plant>> = std::sync::OnceLock::new();
    let chosen = CHOSEN.get_or_init(|| {
        let name = std::env::var("DLHT_PLANT").ok().filter(|n| !n.is_empty())?;
        match Plant::ALL.iter().find(|(_, n)| *n == name) {
            Some(&(p, _)) => Some(p),
            None => panic!("DLHT_PLANT={name}: no planted bug has that name (see src/plant.rs)"),
        }
    });
    *chosen == Some(plant)
}

/// No plant outside a `dlht_plants` build.
#[cfg(not(dlht_plants))]
#[inline(always)]
pub(crate) const fn planted(_: Plant) -> bool {
    false
}
