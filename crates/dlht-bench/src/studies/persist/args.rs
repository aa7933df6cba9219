//! The study's options, and the workload names they accept: a room of
//! their own, below every part of the study that reads them.

use std::path::PathBuf;

/// The workloads, in the order they run.
pub(super) const WORKLOADS: [&str; 4] = ["get-batch", "insdel", "insdel-batch", "population"];

/// Parses a power of two of keys: `2^N` or the number itself.
pub(in crate::studies) fn keys_arg(s: &str) -> Result<u64, String> {
    let n = match s.trim().strip_prefix("2^") {
        Some(e) => e.parse::<u32>().ok().filter(|&e| e < 40).map(|e| 1u64 << e),
        None => s.trim().parse::<u64>().ok(),
    };
    match n {
        Some(n) if n.is_power_of_two() && (1 << 10..=1 << 32).contains(&n) => Ok(n),
        _ => Err(format!("'{s}' is not a power of two of keys from 2^10 to 2^32 (write 2^N or the number)")),
    }
}

/// Options of the persistence study.
#[derive(clap::Args, Clone, Debug)]
pub struct PersistArgs {
    /// Keys in the tables, a power of two: 2^N or the number (default 2^25,
    /// a 2 GiB index, far beyond the L3 cache; both tables are held at
    /// once, about 5 GiB at 2^25). With --recovery: keys the child inserts
    /// before it grows the map (default 2^25 too).
    #[arg(long, value_parser = keys_arg)]
    pub keys: Option<u64>,
    /// Thread counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Vec<u16>,
    /// Interleaved rounds (each builds both tables anew; with --recovery,
    /// each kills and recovers a freshly filled map).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 2.0, value_parser = crate::compare::positive_seconds)]
    pub secs: f64,
    /// Requests per batch: keys per get_many, insert+remove pairs per batch.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub batch: u32,
    /// Folder the FileMaps' directories go in (default: a new folder under
    /// the system's temp dir). Each map's directory is deleted when the map
    /// is done with; the folder too, if the study made it.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seed of the key streams (the same for both maps).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Folder for persist.csv and persist.json (recovery.csv and
    /// recovery.json with --recovery).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Tiny tables (2^14 keys; 2^16 with --recovery), one round, short
    /// measurements.
    #[arg(long)]
    pub smoke: bool,
    /// Workloads to run, comma-separated (default: all): get-batch,
    /// insdel, insdel-batch, population. With population alone, the
    /// presized tables the others share are not built.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(WORKLOADS))]
    pub workloads: Vec<String>,
    /// Instead: recovery time after kill -9 in the middle of a grow.
    #[arg(long)]
    pub recovery: bool,
    /// With --recovery: rounds alternate a cold open — after the kill,
    /// `sync`, then `3` written to /proc/sys/vm/drop_caches (root only), so
    /// the map's files are read from disk — and a warm one (the killed
    /// process's pages still cached), cold first. Use an even --rounds.
    #[arg(long, requires = "recovery")]
    pub drop_caches: bool,
    /// With --recovery: kill the child 50–500 ms after its grow has
    /// finished, not during it (an open then resumes nothing).
    #[arg(long, requires = "recovery")]
    pub after_grow: bool,
    /// Instead: the cost of sync mode. Insert+remove pairs on a FileMap
    /// with `Durability::Sync { every }` for each interval given (ms;
    /// 0 = a sync per `durable()` call, here one after every batch of
    /// --batch pairs, whose latency is reported), against process mode, in
    /// interleaved rounds. E.g. `--sync-ms 0,1,10,100`.
    #[arg(long, value_delimiter = ',')]
    pub sync_ms: Vec<u64>,
    /// The --recovery child's job: fill the map in --dir, print "growing",
    /// grow it, wait to be killed.
    #[arg(long, hide = true)]
    pub child: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_as_powers_of_two() {
        assert_eq!(keys_arg("2^25"), Ok(1 << 25));
        assert_eq!(keys_arg("16384"), Ok(1 << 14));
        assert!(keys_arg("1000").is_err());
        assert!(keys_arg("2^4").is_err());
        assert!(keys_arg("x").is_err());
    }
}
