#!/usr/bin/env bash
# Shows that the checkers catch each hazard of docs/DESIGN.md: every
# planted bug (src/plant.rs: one reverted fix) must make the check named
# for it fail — a loom model (a bin-protocol model in `src/tests/models.rs`
# or a reclamation model in `src/reclaim.rs`), or, for plants outside the
# bin protocol, an integration test. A plant that breaks some other test but
# not its own check does not count.
set -u
cd "$(dirname "$0")/.."
status=0

# Every plant is built in (DLHT_PLANTS=1: crates/dlht/build.rs turns it into
# `--cfg dlht_plants`) and DLHT_PLANT turns one on at run time, so each
# target directory builds dlht and its tests once for all plants (a build
# per plant took 15-20 s each, ten minutes in all). The target directories
# are the ones scripts/test.sh already built, with the same RUSTFLAGS, so no
# dependency rebuilds either.
export DLHT_PLANTS=1

# caught PLANT NAME LABEL RUSTFLAGS TARGET_DIR CARGO_TEST_ARGS...: run the
# check named NAME with the plant on, and see that it failed.
caught() {
  local plant=$1 name=$2 label=$3 flags=$4 dir=$5
  shift 5
  local out failed
  out=$(DLHT_PLANT="$plant" RUSTFLAGS="$flags" CARGO_TARGET_DIR="$dir" \
        cargo test -q -p dlht --release "$@" --no-fail-fast 2>&1)
  # Failing tests as the summary lists them, or, for a run that crashed
  # before its summary (a plant that frees memory still in use can
  # segfault), as the progress lines of `-q` name them.
  failed=$(echo "$out" | grep -E "^    [a-z0-9_:]+$|^[a-z0-9_:]+ --- FAILED$" | sed 's/ --- FAILED$//' | tr -d ' ' | sort -u | paste -sd, -)
  # A run filtered to the one test that crashed (a signal, no summary) is
  # that test failing.
  if [ -z "$failed" ] && [[ " $* " == *" $name "* ]] && echo "$out" | grep -q "didn't exit successfully.*signal"; then
    failed=$name
  fi
  if echo ",$failed," | grep -qE "[,:]$name,"; then
    echo "planted bug $plant: caught by $label (failing: $failed)"
  else
    echo "planted bug $plant: NOT caught by $label (failing: ${failed:-none})"
    echo "$out" | tail -5
    status=1
  fi
}

LOOM_PLANTS=$(cat <<'PLANTS'
remove_header_only put_racing_remove_never_updates_a_removed_key
transfer_keeps_key put_racing_a_transfer_is_never_lost
scan_no_reread two_inserts_of_one_key_never_both_succeed
insert_no_rescan two_inserts_of_one_key_never_both_succeed
get_no_validate get_never_returns_the_value_of_a_key_that_replaced_it
get_no_validate probing_the_primary_bucket_never_returns_a_replacing_keys_value
generation_relaxed a_thread_never_announces_past_the_index_it_holds
leave_relaxed an_index_is_never_freed_under_a_reader
shadow_dropped a_shadow_commit_racing_a_transfer_is_never_lost
abort_takes_valid a_shadow_abort_never_frees_a_commit_it_reads_torn
freeze_no_kill a_put_racing_a_freeze_is_never_lost
shrink_finish_each an_insert_racing_a_merge_lands_exactly_once
owned_no_hold an_owned_guard_never_reads_a_freed_element
owned_hold_none an_element_retired_as_the_last_owned_guard_leaves_is_freed_once
link_given_unheld an_insert_racing_a_link_given_back_lands_in_a_chained_link
full_while_link_held a_bin_holding_a_link_to_give_back_is_never_full
PLANTS
)
TEST_PLANTS=$(cat <<'PLANTS'
trust_signature alloc_map alloc_map_matches_hashmap_with_colliding_signatures
inline_any_length byte_map keys_differing_only_in_trailing_zeros_or_namespace_are_distinct
snapshot_thaw_early snapshot a_snapshot_is_one_instant_under_writers_and_resizes
iter_class_reuse iter a_held_iterator_reads_each_key_once_across_grows_and_shrinks
local_free_nested reentry an_update_whose_closure_grows_the_map_updates_the_key_once
record_reuse_by_id teardown a_map_entered_from_a_tls_destructor_keeps_its_index_for_other_threads
links_never_raised capacity churn_at_capacity_does_not_grow_a_presized_map
update_blind alloc_rmw concurrent_updates_count_exactly
compute_blind every_mode every_mode_counts_exactly_through_update_and_compute
recover_no_moving persist every_crash_point_is_recovered
recover_no_clean persist every_crash_point_is_recovered
transfer_kills_dead persist every_crash_point_is_recovered
recover_no_shadows persist a_shadow_insert_held_by_a_dead_process_is_aborted
freeze_kills_dead persist every_crash_point_is_recovered
heap_no_mark persist_bytes every_acknowledged_byte_write_survives_kill_9
heap_bump_reset persist_bytes a_closed_byte_map_reopens_with_every_value
stamp_unchecked persist_damage an_older_copy_of_a_file_is_refused
seal_unchecked persist_damage mutated_directories_never_crash_or_serve_wrong_bytes
settle_trusts_damage persist_damage bins_left_in_transfer_by_damage_are_repaired
heap_trusts_marks_after_crash persist_damage marks_made_durable_before_their_unlink_are_not_trusted
markers_outlive_their_open damage_review an_insert_or_snapshot_over_a_revived_marker_slot_goes_on
recover_ignores_counts persist the_length_is_exact_after_a_crash_after_an_insert
stray_pairs_copied damage_review a_marker_pair_of_an_earlier_open_is_never_a_key
intent_left_to_user_code persist the_length_is_exact_after_a_crash_in_a_remove_whose_predicate_writes
shrink_judged_by_first_source persist a_crash_inside_a_shrink_keeps_every_key_visible
recover_skips_retired persist a_count_in_an_index_a_grow_retired_is_judged
remove_recorded_after_kill persist a_count_in_an_index_a_grow_retired_is_judged
PLANTS
)
UNIT_PLANTS=$(cat <<'PLANTS'
fallback_judged_late an_unused_shrink_fallback_is_freed_when_a_grow_follows_at_once
chunk_skips_busy_bin a_resize_is_not_published_while_an_insert_copies_its_own_bin
fallback_file_late a_grow_right_after_a_persistent_shrink_keeps_its_file
PLANTS
)
RACY_PLANTS=$(cat <<'PLANTS'
sync_oldest_first persist a_power_loss_between_a_grows_index_syncs_keeps_the_map_exact
targets_kept persist a_power_loss_between_a_grows_index_syncs_keeps_the_map_exact
transfer_during_sync persist a_power_loss_between_a_grows_index_syncs_keeps_the_map_exact
PLANTS
)

# The control: with every plant built in and none on, each check passes, so
# a check that fails below fails because of its plant.
tests=() filters=()
while read -r _ test name; do tests+=(--test "$test"); filters+=("$name"); done <<<"$TEST_PLANTS
$RACY_PLANTS"
while read -r _ name; do filters+=("$name"); done <<<"$UNIT_PLANTS"
mapfile -t tests < <(printf '%s\n' "${tests[@]}" | paste - - | sort -u | tr '\t' '\n')
if ! out=$(RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -q -p dlht --release --lib 2>&1) ||
   ! out=$(cargo test -q -p dlht --release --lib "${tests[@]}" -- "${filters[@]}" 2>&1); then
  echo "with every plant built in and none on, the checks fail:"
  echo "$out" | tail -20
  exit 1
fi
echo "with every plant built in and none on, every check passes"

while read -r plant model; do
  caught "$plant" "$model" "$model" "--cfg loom" target/loom --lib "$model"
done <<<"$LOOM_PLANTS"

# Plants outside the loom models, each caught by an integration test.
while read -r plant test name; do
  caught "$plant" "$name" "$test::$name" "" target --test "$test" "$name"
done <<<"$TEST_PLANTS"

# Plants caught by a unit test of the library (outside loom: they need a
# test hook or a count only the unit tests have).
while read -r plant name; do
  caught "$plant" "$name" "unit test $name" "" target --lib "$name"
done <<<"$UNIT_PLANTS"

# Plants whose check races the map's own threads (a simulated power loss
# in a grow), and catches them in most runs, not all: each is run up to
# five times, and caught if a run fails its check (each run alone caught
# them in 3 or 4 of 4).
while read -r plant test name; do
  for run in 1 2 3 4 5; do
    out=$(caught "$plant" "$name" "$test::$name (run $run)" "" target --test "$test" "$name")
    if echo "$out" | grep -q "^planted bug $plant: caught"; then break; fi
  done
  echo "$out" | head -1
  echo "$out" | grep -q "^planted bug $plant: caught" || status=1
done <<<"$RACY_PLANTS"
exit $status
