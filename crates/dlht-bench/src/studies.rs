//! The focused studies of issues 2 and 3: single-thread baselines against
//! the memory limit, the batch-size sweep, the single-thread mode, and the
//! hash functions. `dlht-bench baseline|batching|hashers`.

use crate::{baseline, batching, limit};
use std::time::Duration;

/// Run configuration of a study.
#[derive(Clone, Debug)]
pub struct Config {
    /// log2 of the memory-resident key count.
    pub big_log2: u32,
    /// log2 of the cache-resident key count.
    pub small_log2: u32,
    /// Time per measurement.
    pub duration: Duration,
}

/// Which parts to run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Study {
    /// Single-thread get/insdel/put vs the limit, population, reclamation cost.
    Baseline,
    /// Batch sizes 1..64 at 1 and 2 threads; LocalMap vs Map.
    Batching,
    /// Hash function cost and spread.
    Hashers,
}

/// Run `study`.
pub fn run(study: Study, cfg: &Config) {
    println!("# dlht-bench {study:?}  {}", limit::machine_line());
    println!("# keys are splitmix64(i); default hasher (rapidhash) unless noted");
    let big = 1usize << cfg.big_log2;
    let small = 1usize << cfg.small_log2;
    if study == Study::Hashers {
        hashers(cfg, small);
        return;
    }
    let table_bytes = baseline::index_bytes(big);
    let limit = limit::measure(table_bytes, cfg.duration);
    let row = |name: &str, keys: usize, mops: f64, of_limit: Option<f64>| {
        let pct = of_limit.map(|l| format!("{:.0}%", 100.0 * mops / l)).unwrap_or_else(|| "-".into());
        println!("{name:<34} {keys:>12} {mops:>10.1} {pct:>12}");
    };
    println!("{:<34} {:>12} {:>10} {:>12}", "measurement", "keys", "Mops/s", "% of limit");
    row("memory limit: random line reads", table_bytes / 64, limit.plain, None);
    row("memory limit: prefetched x16", table_bytes / 64, limit.prefetched, None);
    let big_map = baseline::populated::<dlht::DefaultHashBuilder>(big);
    if study == Study::Batching {
        batching(cfg, &big_map, &limit);
        single_thread_mode(cfg, &big_map, &baseline::populated(small));
        return;
    }
    for (keys, label) in [(big, "memory-resident"), (small, "cache-resident")] {
        let small_map;
        let m = if keys == big {
            &big_map
        } else {
            small_map = baseline::populated(small);
            &small_map
        };
        let r = baseline::single_thread(m, cfg.duration);
        let lim = (keys == big).then_some(limit.plain);
        row(&format!("get ({label})"), keys, r.get, lim);
        row(&format!("get miss ({label})"), keys, r.get_miss, lim);
        row(&format!("insert+remove pair ({label})"), keys, r.insdel_pairs, lim);
        row(&format!("put ({label})"), keys, r.put, lim);
        if keys == big {
            println!(
                "# {label} table: {} bins, load factor {:.2}, link buckets in use {} of {}",
                r.stats.bins, r.stats.load_factor, r.stats.link_buckets_in_use, r.stats.link_buckets
            );
        }
    }
    let grow = baseline::population::<dlht::DefaultHashBuilder>(big);
    row("population from empty (grows)", grow.keys, grow.mops, None);
    println!(
        "# population: {} resizes; occupancy of all slots when each index was replaced: {}",
        grow.resizes,
        grow.occupancy.iter().map(|o| format!("{:.0}%", o * 100.0)).collect::<Vec<_>>().join(" ")
    );
    let ns = baseline::enter_leave_ns(cfg.duration);
    println!(
        "# reclamation: enter+leave costs {ns:.1} ns per operation (announce + leave; see dlht reclaim.rs)"
    );
}

/// The batch-size sweep and the single-thread mode on the big table.
fn batching(cfg: &Config, map: &dlht::Map<u64, u64>, limit: &limit::Limit) {
    let keys = map.len() as u64;
    let dur = cfg.duration / 2;
    println!("# batching on the memory-resident table ({keys} keys): gets and insert+remove pairs, M/s;");
    println!("# gets also as % of the prefetched random-read limit at the same thread count");
    println!(
        "{:<8} {:>7} {:>10} {:>9} {:>12} {:>16}",
        "threads", "batch", "get", "% limit", "get speedup", "insdel pairs"
    );
    for threads in [1, 2] {
        let lim = if threads == 1 { limit.prefetched } else { limit.prefetched_2t };
        let rows = batching::sweep(map, keys, threads, dur);
        let base = rows[0].get;
        for r in &rows {
            let b = r.batch.map(|b| b.to_string()).unwrap_or_else(|| "none".into());
            println!(
                "{:<8} {:>7} {:>10.1} {:>8.0}% {:>11.2}x {:>16.2}",
                threads,
                b,
                r.get,
                100.0 * r.get / lim,
                r.get / base,
                r.insdel
            );
        }
    }
    println!(
        "# prefetched random-read limit: {:.1} M lines/s on 1 thread, {:.1} on 2",
        limit.prefetched, limit.prefetched_2t
    );
}

/// LocalMap vs Map, insert+remove pairs on one thread, on both tables.
fn single_thread_mode(cfg: &Config, big: &dlht::Map<u64, u64>, small: &dlht::Map<u64, u64>) {
    println!("# single-thread mode: insert+remove pairs on one thread, M pairs/s");
    println!(
        "{:<18} {:>10} {:>10} {:>8} {:>12} {:>12} {:>8}",
        "table", "Map", "LocalMap", "ratio", "Map b16", "LocalMap b16", "ratio"
    );
    for (name, map) in [("memory-resident", big), ("cache-resident", small)] {
        let st = batching::single_thread_mode(map, map.len() as u64, cfg.duration / 2);
        println!(
            "{:<18} {:>10.2} {:>10.2} {:>7.2}x {:>12.2} {:>12.2} {:>7.2}x",
            name,
            st.map,
            st.local,
            st.local / st.map,
            st.map_batched,
            st.local_batched,
            st.local_batched / st.map_batched
        );
    }
}

/// Hash function comparison: raw cost of hashing one word (stable), get
/// speed on a cache-resident table (where hashing is visible, but noisy on
/// shared VMs), and spread (mean occupancy when the index grows).
fn hashers(cfg: &Config, small: usize) {
    println!("# hash functions: ns per word hashed; gets on the cache-resident table; occupancy at resize (to 2^20 keys)");
    println!("{:<34} {:>12} {:>10} {:>12}", "hasher", "ns/hash", "get Mops/s", "occupancy");
    fn one<S: std::hash::BuildHasher + Default>(name: &str, cfg: &Config, small: usize) {
        let s = S::default();
        let mut acc = 0u64;
        let mut words = crate::keys::KeyStream::new(u64::MAX, 3);
        let mops = limit::run(cfg.duration / 4, || {
            for _ in 0..1024 {
                acc = acc.wrapping_add(s.hash_one(std::hint::black_box(words.next_word())));
            }
            1024
        });
        std::hint::black_box(acc);
        let r = baseline::single_thread(&baseline::populated::<S>(small), cfg.duration / 2);
        let g = baseline::population::<S>(1 << 20);
        let occ = g.occupancy.iter().skip(2).sum::<f64>() / g.occupancy.len().saturating_sub(2).max(1) as f64;
        println!("{name:<34} {:>12.2} {:>10.1} {:>11.0}%", 1e3 / mops, r.get, occ * 100.0);
    }
    // Alternate and repeat, so drift over the run shows.
    for _ in 0..2 {
        one::<dlht::DefaultHashBuilder>("rapidhash (default)", cfg, small);
        one::<wyhash::final3::WyHasherBuilder>("wyhash (final3)", cfg, small);
        one::<dlht::Modulo>("modulo (keys are random)", cfg, small);
    }
}
