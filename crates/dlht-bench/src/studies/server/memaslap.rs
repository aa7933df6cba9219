//! libmemcached's `memcaslap` (memaslap) as a second load tool: its
//! configuration file, its run, and its report.
//!
//! The configuration file has three sections, `key`, `value` (lines of
//! `min_len max_len proportion`) and `cmd` (lines of `type proportion`,
//! type 0 = set, 1 = get). memaslap uses its own keys, `-c × -w` of them (`-w` in units of
//! 1024, so rounded up),
//! setting each before getting it. `-S` makes it print, at the end, a
//! "Total Statistics" block with the average latency and a log2 histogram
//! (µs), from which p50 and p99 are read as the upper bound of their
//! power-of-two bucket (coarse).

use super::procs;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// What memaslap reported.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Operations per second (its TPS).
    pub ops_per_s: f64,
    /// Operations.
    pub ops: u64,
    /// Average latency, µs.
    pub avg_us: Option<f64>,
    /// p50 and p99, µs: upper bounds of their log2 buckets.
    pub p50_us: Option<f64>,
    /// See `p50_us`.
    pub p99_us: Option<f64>,
    /// Its `get_misses`.
    pub get_misses: u64,
}

/// Run memaslap against `addr` for `seconds` (whole, at least 1) with
/// `get_share` of gets, values of `len` bytes, over `keys` keys, pinned to
/// `cores`; its output is kept in `dir`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    addr: SocketAddr,
    get_share: f64,
    len: usize,
    keys: u64,
    seconds: u64,
    threads: usize,
    conns: usize,
    cores: &str,
    dir: &Path,
    tag: &str,
) -> Result<Report, String> {
    let cfg = dir.join(format!("memaslap-{tag}.cfg"));
    let text =
        format!("key\n16 16 1\nvalue\n{len} {len} 1\ncmd\n0 {:.2}\n1 {:.2}\n", 1.0 - get_share, get_share);
    std::fs::write(&cfg, text).map_err(|e| format!("{}: {e}", cfg.display()))?;
    let conns = conns.max(threads);
    // memaslap takes the window in units of 1024 ("62k"): round up.
    let window = format!("{}k", keys.div_ceil(conns as u64).div_ceil(1024).max(1));
    let secs = seconds.max(1);
    let cmd: Vec<String> = [
        "memcaslap",
        "-s",
        &addr.to_string(),
        "-T",
        &threads.to_string(),
        "-c",
        &conns.to_string(),
        "-t",
        &format!("{secs}s"),
        "-S",
        &format!("{secs}s"),
        "-w",
        &window,
        "-X",
        &len.to_string(),
        "-F",
        &cfg.to_string_lossy(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = dir.join(format!("memaslap-{tag}.out"));
    let log = dir.join(format!("memaslap-{tag}.err"));
    let mut g = procs::spawn("memcaslap", cores, &cmd, &[], Some(&out), &log)?;
    let status = g.wait_for(Duration::from_secs(secs + 60));
    let text = std::fs::read_to_string(&out).unwrap_or_default()
        + &std::fs::read_to_string(&log).unwrap_or_default();
    match status {
        None => return Err(format!("memcaslap did not finish within {} s ({})", secs + 60, cmd.join(" "))),
        Some(s) if !s.success() => {
            return Err(format!(
                "memcaslap failed ({s}): {}",
                text.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
            ))
        }
        _ => {}
    }
    parse(&text).ok_or_else(|| format!("could not read memcaslap's report ({})", out.display()))
}

/// Read memaslap's report.
pub fn parse(text: &str) -> Option<Report> {
    let mut r = Report::default();
    let last = text.lines().rev().find(|l| l.starts_with("Run time:"))?;
    let words: Vec<&str> = last.split_whitespace().collect();
    let after = |name: &str| words.iter().position(|w| *w == name).and_then(|i| words.get(i + 1));
    r.ops = after("Ops:")?.parse().ok()?;
    r.ops_per_s = after("TPS:")?.parse().ok()?;
    r.get_misses = text
        .lines()
        .find_map(|l| l.strip_prefix("get_misses:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    // The final "Total Statistics (N events)" block.
    if let Some(at) = text.rfind("Total Statistics (") {
        let block = &text[at..];
        let mut buckets: Vec<(u32, u64)> = Vec::new();
        let mut in_dist = false;
        for l in block.lines().skip(1) {
            let t = l.trim();
            if let Some(v) = t.strip_prefix("Avg:") {
                r.avg_us = v.trim().parse().ok();
            } else if t.starts_with("Log2 Dist") {
                in_dist = true;
            } else if in_dist {
                let Some((base, counts)) = t.split_once(':') else { break };
                let Ok(base) = base.trim().parse::<u32>() else { break };
                for (j, c) in counts.split_whitespace().enumerate() {
                    buckets.push((base + j as u32, c.parse().unwrap_or(0)));
                }
            }
        }
        let total: u64 = buckets.iter().map(|b| b.1).sum();
        let pct = |q: f64| {
            let want = (q * total as f64).ceil() as u64;
            let mut seen = 0;
            buckets
                .iter()
                .find(|b| {
                    seen += b.1;
                    seen >= want.max(1)
                })
                .map(|b| 2f64.powi(b.0 as i32 + 1))
        };
        if total > 0 {
            r.p50_us = pct(0.5);
            r.p99_us = pct(0.99);
        }
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_a_report() {
        let text = "Total Statistics (25872 events)\n   Min:        34\n   Avg:      1240\n   Log2 Dist:\n       4:        0        0        6      113\n       8:     3429    13070     4373     1138\n      12:     1643     1510      421      169\n\ncmd_get: 23291\nget_misses: 3\n\nRun time: 2.0s Ops: 25888 TPS: 12943 Net_rate: 1.5M/s\n";
        let r = super::parse(text).unwrap();
        assert_eq!(r.ops, 25888);
        assert_eq!(r.ops_per_s, 12943.0);
        assert_eq!(r.get_misses, 3);
        assert_eq!(r.avg_us, Some(1240.0));
        assert_eq!(r.p50_us, Some(1024.0)); // bucket 2^9
        assert_eq!(r.p99_us, Some(32768.0)); // bucket 2^14
    }
}
