//! dlht-bench: the DLHT evaluation as one command.
//!
//! `cargo run --release -p dlht-bench` compares dlht (unbatched, batched,
//! single-thread) with papaya, dashmap, scc, flurry, std's
//! RwLock<HashMap> and (one thread) hashbrown on the paper's workloads (and
//! GrowT and Boost's concurrent_flat_map when built in; leapfrog on
//! request), in
//! interleaved rounds with the machine's memory limit, and writes CSV,
//! JSON and plots. `dlht-bench
//! baseline|batching|hashers|sizes|counters|drain|memory|server|persist|persist-bytes|profile`
//! run the focused studies.

mod compare;
mod harness;
mod progress;
mod studies;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator (feature `mimalloc`).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The global allocator this build uses, for the results' headers.
pub const ALLOCATOR: &str = if cfg!(feature = "mimalloc") { "mimalloc" } else { "system" };

/// The DLHT evaluation: dlht against real peers and the machine's memory limit.
///
/// With no subcommand: the comparison. Every system runs the same workloads
/// on the same key streams (seeded by --seed) on a prepopulated,
/// memory-resident table, at each thread count, in --rounds interleaved
/// rounds with the memory limit (random cache-line reads over a huge-page
/// array the size of dlht's index, plain and prefetched); every result is
/// checked (a get of a present key that misses is reported, never
/// counted). Each figure is also measured on a cache-resident twin, and a
/// memory-resident figure within 25% of its twin is flagged. Then
/// Population (insert 2^population-log2 fresh keys into a table sized for
/// 1024), latency percentiles, and the resize time series (gets sampled
/// every 50 ms while other threads grow the table, as in the paper's Fig.
/// 8). Results: a table on stdout; CSV, JSON (every round) and PNG/SVG
/// plots in the folder named at the end. `--quick`: a first look in about
/// two minutes (fewer systems, workloads, thread counts and rounds; the
/// header says what it leaves out). Progress goes to stderr: bars on a
/// terminal, a plain line at least every 10 s otherwise.
#[derive(Parser, Debug)]
#[command(version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    study: Option<StudyCmd>,
    #[command(flatten)]
    compare: compare::CompareArgs,
}

#[derive(Subcommand, Debug)]
enum StudyCmd {
    /// dlht alone: get, get of absent keys, insert+remove and put against
    /// the limit at each thread count (the comparison's options; these are
    /// its defaults), then occupancy at each resize and the cost of the
    /// reclamation announcement.
    Baseline(compare::CompareArgs),
    /// Gets and insert+remove pairs unbatched and in batches of 1..64, for
    /// Map and the single-thread LocalMap, against the limit (the
    /// comparison's options; --batch defaults to the sweep).
    Batching(compare::CompareArgs),
    /// Hash functions: ns per word, cached gets, occupancy at resize.
    Hashers(studies::HasherArgs),
    /// Key and value sizes (paper Figs. 9, 10): the allocator mode against
    /// papaya, dashmap and scc, values of 8 B … 1.5 KB and keys of 8 … 256 B.
    Sizes(studies::sizes::SizeArgs),
    /// Counters: threads add 1 to counters of Zipf-distributed keys
    /// (fetch-add, inserting when absent), dlht against dashmap, papaya and
    /// scc; every total checked.
    Counters(studies::counters::CounterArgs),
    /// YCSB core workloads A, B, C, D, F in process (E: no ordered scans),
    /// scrambled Zipfian θ 0.99 and uniform, 8-byte values and ten 100-byte
    /// fields, dlht against papaya, dashmap and scc; every read checked.
    Ycsb(studies::ycsb::YcsbArgs),
    /// Fill then drain, repeated: each phase's rate and the resident memory
    /// after it, dlht against dashmap, papaya and scc.
    Drain(studies::drain::DrainArgs),
    /// Non-partitioned hash join (paper §5.3.6): build on R, probe with
    /// S (16-byte tuples, S's keys drawn from R's), dlht one call at a time
    /// and batched against papaya, dashmap and hashbrown per radix
    /// partition; build and probe tuples/s, bytes per R tuple; every
    /// result checked.
    Join(studies::join::JoinArgs),
    /// Lock manager (paper §5.3.3): transactions lock sorted keys with one
    /// order-preserving batch of inserts that stops at the first conflict,
    /// unlock with a batch of removes; locks+unlocks/s and abort rate,
    /// dlht against dashmap and papaya; mutual exclusion checked.
    Locks(studies::locks::LockArgs),
    /// Smallbank (paper §5.3.5): OLTPBench's mix of six money-moving
    /// transactions over savings and checking balances, serialized by the
    /// lock manager (dlht, dashmap) or per-key atomics (dlht-atomics);
    /// committed txn/s and abort rates; money conserved, checked.
    Smallbank(studies::smallbank::SmallbankArgs),
    /// TATP (paper §5.3.5): a home-location register's four tables and
    /// seven transactions in the standard mix, call forwardings inserted by
    /// shadow inserts; txn/s and success rate, dlht against dashmap;
    /// referential integrity and whole rows checked.
    Tatp(studies::tatp::TatpArgs),
    /// k-mer counting (DRAMHiT's skewed writes): every 32-mer of a
    /// genome-like sequence (or a FASTA file) counted by fetch_add, batched
    /// merges, and dashmap; every count checked.
    Kmer(studies::kmer::KmerArgs),
    /// Resident bytes per key, 2^10 … 2^25 keys, grown from empty and
    /// presized, dlht against every Rust peer (each point a fresh process).
    Memory(studies::memory::MemoryArgs),
    /// Exactly --ops gets per access mode, untimed, for valgrind (see
    /// scripts/profile-gets.sh).
    Profile(studies::profile::ProfileArgs),
    /// memcached 1.6 against dlht-server over loopback: get-heavy
    /// (32 B and 1 KiB values), 16-key multi-gets, set-only, and the hit
    /// ratio of a Zipf trace that does not fit; interleaved rounds, servers
    /// and load pinned apart, load from memcaslap and from a checking
    /// pipelined client; ratios dlht-server ÷ memcached beside the targets.
    Server(studies::server::ServerArgs),
    /// The persistent map (FileMap, process durability) against the
    /// in-memory Map: batched gets, insert+remove pairs and
    /// population, in interleaved rounds on the same key streams, with the
    /// ratio FileMap ÷ Map per round, resident and on-disk bytes per key,
    /// and a verdict against "within 10%"; `--recovery`: the time to the
    /// first get after kill -9 in the middle of a grow.
    Persist(studies::persist::PersistArgs),
    /// The persistent byte map (FileByteMap) against the in-memory ByteMap:
    /// batched gets, insert+remove and population in interleaved rounds,
    /// ratios per round, resident and on-disk bytes per key.
    PersistBytes(studies::persist_bytes::PersistBytesArgs),
}

fn main() {
    let cli = Cli::parse();
    let failed = match cli.study {
        None => compare::run(cli.compare).0.failed(),
        Some(StudyCmd::Baseline(a)) => studies::baseline(a),
        Some(StudyCmd::Batching(a)) => studies::batching(a),
        Some(StudyCmd::Hashers(a)) => {
            studies::hashers(a);
            false
        }
        Some(StudyCmd::Sizes(a)) => studies::sizes::run(a),
        Some(StudyCmd::Counters(a)) => studies::counters::run(a),
        Some(StudyCmd::Ycsb(a)) => studies::ycsb::run(a),
        Some(StudyCmd::Drain(a)) => studies::drain::run(a),
        Some(StudyCmd::Memory(a)) => studies::memory::run(a),
        Some(StudyCmd::Join(a)) => studies::join::run(a),
        Some(StudyCmd::Locks(a)) => studies::locks::run(a),
        Some(StudyCmd::Smallbank(a)) => studies::smallbank::run(a),
        Some(StudyCmd::Tatp(a)) => studies::tatp::run(a),
        Some(StudyCmd::Kmer(a)) => studies::kmer::run(a),
        Some(StudyCmd::Server(a)) => studies::server::run(a),
        Some(StudyCmd::Persist(a)) => studies::persist::run(a),
        Some(StudyCmd::PersistBytes(a)) => studies::persist_bytes::run(a),
        Some(StudyCmd::Profile(a)) => {
            studies::profile::run(a);
            false
        }
    };
    if failed {
        eprintln!("dlht-bench: a result check failed (see the notes above)");
        std::process::exit(1);
    }
}
