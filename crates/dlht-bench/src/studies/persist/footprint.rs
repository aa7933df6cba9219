//! What the process holds and what the files take: resident memory by
//! kind, page faults, and a map directory's bytes on disk.

use std::path::Path;

/// Resident memory of this process, in bytes, by kind.
#[derive(Clone, Copy, Default)]
pub(super) struct Resident {
    /// VmRSS: all of it.
    pub(super) all: u64,
    pub(super) anon: u64,
    /// Pages of mapped files (a FileMap's index).
    pub(super) file: u64,
    /// Anonymous memory on 2 MiB pages plus file pages mapped by 2 MiB
    /// entries (smaps_rollup).
    pub(super) huge: u64,
}

impl Resident {
    pub(super) fn now() -> Resident {
        let status = |f| crate::compare::proc_bytes("/proc/self/status", f).unwrap_or(0);
        let rollup = |f| crate::compare::proc_bytes("/proc/self/smaps_rollup", f).unwrap_or(0);
        Resident {
            all: status("VmRSS:"),
            anon: status("RssAnon:"),
            file: status("RssFile:"),
            huge: rollup("AnonHugePages:") + rollup("FilePmdMapped:"),
        }
    }
}

/// Minor and major page faults of this process so far (/proc/self/stat).
pub(super) fn faults() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: state is the 3rd
    // field of the line, minflt the 10th, majflt the 12th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().map(|w| w.parse().unwrap_or(0)).collect();
    (f.get(7).copied().unwrap_or(0), f.get(9).copied().unwrap_or(0))
}

/// The files of a map's directory: bytes allocated on disk (st_blocks ×
/// 512) and apparent size (st_size); the index files are sparse.
pub(super) fn disk(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return (0, 0) };
    entries
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .fold((0, 0), |(a, s), m| (a + m.blocks() * 512, s + m.len()))
}
