//! The persistent map against the in-memory one: is the FileMap in process
//! mode within 10% of the in-memory Map on batched get, insdel and
//! population, measured in interleaved rounds; and how long is it to the
//! first get after `kill -9` in the middle of a grow.
//!
//! Throughput: each round builds both tables anew, presized for `--keys`
//! and populated (untimed): a `Map<u64, u64>` and a `FileMap<u64, u64>`
//! made in a fresh, empty directory (deleted after the round). Then, at
//! each thread count, each workload runs on one and then the other, the
//! order alternating from round to round (A B, then B A), on the same key
//! streams: batched gets (`get_many`, every value checked), insert of a
//! fresh key then its remove (one call each, and in batches through
//! `batch`), and population (insert `--keys` fresh keys into a table made
//! small, so that it grows; a FileMap in a fresh directory each time).
//! Ratios FileMap ÷ Map are taken within a round; their median decides
//! the verdict. Beside them: resident bytes per key (and, for the
//! FileMap, its files' size on disk), the share of the table on 2 MiB
//! pages, and page faults per operation, which show where a gap comes
//! from.
//!
//! `--recovery`: this binary runs itself as a child that fills a FileMap,
//! says "growing" and grows it; the parent kills it (SIGKILL) 50–500 ms
//! later, reopens the map, times the open and the first get, and checks
//! every key (untimed).

mod args;
mod footprint;
mod maps;
mod measure;
mod recovery;
mod sync;
mod throughput;

use crate::harness::machine::Machine;
pub(super) use args::keys_arg;
pub use args::PersistArgs;

/// The persistence study. True if a result check failed.
pub fn run(a: PersistArgs) -> bool {
    if a.child {
        return recovery::child(&a);
    }
    let machine = Machine::describe();
    println!("# dlht-bench persist: {}, allocator {}", machine.line(), crate::ALLOCATOR);
    if a.recovery {
        recovery::recovery(&a, &machine)
    } else if !a.sync_ms.is_empty() {
        sync::sync_cost(&a, &machine)
    } else {
        throughput::throughput(&a, &machine)
    }
}
