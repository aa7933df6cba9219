//! The command line: memcached's flags, with memcached's meanings and
//! defaults, so that scripts written for memcached start this server.

use std::path::PathBuf;

use clap::Parser;

use crate::protocol::text::{Limits, DEFAULT_MAX_ITEM_SIZE};
use crate::store::Settings;

/// The smallest `-I` memcached accepts ("Item max size cannot be less than
/// 1024 bytes.").
pub const ITEM_SIZE_MIN: usize = 1024;
/// The largest `-I` memcached accepts (`ITEM_SIZE_MAX_UPPER_BOUND`, 1 GiB).
pub const ITEM_SIZE_MAX: usize = 1024 * 1024 * 1024;

/// The server's configuration, as memcached's command line spells it.
#[derive(Clone, Debug, PartialEq, Eq, Parser)]
#[command(name = "dlht-server", version, about = "A memcached-compatible cache on dlht's ByteMap")]
pub struct Config {
    /// TCP port to listen on (0: any free port).
    #[arg(short = 'p', long = "port", default_value_t = 11211)]
    pub port: u16,
    /// Interface to listen on (an IP address or host name).
    #[arg(short = 'l', long = "listen", default_value = "127.0.0.1")]
    pub listen: String,
    /// Number of event-loop threads (default: the available cores).
    #[arg(short = 't', long = "threads", default_value_t = default_threads(),
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Memory limit in MiB for the items: keys, values, metadata and the index; at the limit a store evicts the least recently used (CLOCK).
    #[arg(short = 'm', long = "memory-limit", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=(u64::MAX >> 20)))]
    pub memory_limit: u64,
    /// Maximum item size: bytes, or with a k or m suffix (1024 bytes to 1m...1024m).
    #[arg(short = 'I', long = "max-item-size", default_value = "1m", value_parser = parse_item_size)]
    pub max_item_size: usize,
    /// Maximum simultaneous connections.
    #[arg(short = 'c', long = "conn-limit", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub conn_limit: u32,
    /// Verbose: print errors and warnings (repeat for more).
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Text-protocol authentication: a file of `user:password` lines; each
    /// connection must first send `set <any> 0 0 <n>` with data `user password`.
    #[arg(short = 'Y', long = "auth-file", value_name = "FILE")]
    pub auth_file: Option<PathBuf>,
    /// Keep the items in DIR (made if absent), so that a restart — after a
    /// shutdown, a crash or kill -9 — finds every stored item with its
    /// flags, cas unique and expiry (memcached's restartable memory, whose
    /// `-e` names a file: here a directory).
    #[arg(short = 'e', long = "memory-file", value_name = "DIR")]
    pub memory_file: Option<PathBuf>,
    /// With -e: reply to a command that changes items only once the change
    /// is on disk, so that it survives a power loss, not only kill -9 (the
    /// writes of all connections waiting at once share one sync: a group
    /// commit). Without it, a change is on disk within about 30 s.
    #[arg(long = "durable", requires = "memory_file")]
    pub durable: bool,
}

fn default_threads() -> u32 {
    std::thread::available_parallelism().map_or(4, |n| u32::try_from(n.get()).unwrap_or(4))
}

/// memcached's `-I` syntax: a number of bytes, optionally followed by `k`
/// or `m` (either case), within memcached's bounds.
fn parse_item_size(s: &str) -> Result<usize, String> {
    let (digits, unit) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1024),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    let n: usize =
        digits.parse().map_err(|_| format!("'{s}' is not a size (bytes, or a number with k or m)"))?;
    let bytes = n.checked_mul(unit).ok_or_else(|| format!("'{s}' is too large"))?;
    if bytes < ITEM_SIZE_MIN {
        return Err("Item max size cannot be less than 1024 bytes.".into());
    }
    if bytes > ITEM_SIZE_MAX {
        return Err("Cannot set item size limit higher than 1 GB.".into());
    }
    Ok(bytes)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 11211,
            listen: "127.0.0.1".into(),
            threads: default_threads(),
            memory_limit: 64,
            max_item_size: DEFAULT_MAX_ITEM_SIZE,
            conn_limit: 1024,
            verbose: 0,
            auth_file: None,
            memory_file: None,
            durable: false,
        }
    }
}

impl Config {
    /// Checks the rules between flags that memcached checks after parsing
    /// (`-I` at most half of `-m`), with memcached's message.
    pub fn validate(&self) -> Result<(), String> {
        let limit = self.memory_limit.saturating_mul(1024 * 1024);
        if self.max_item_size as u64 > limit / 2 {
            return Err("Cannot set item size limit higher than 1/2 of memory max.".into());
        }
        Ok(())
    }

    /// The settings the store reports in `stats` and enforces.
    pub fn settings(&self) -> Settings {
        Settings {
            limit_maxbytes: self.memory_limit.saturating_mul(1024 * 1024),
            threads: self.threads,
            max_connections: self.conn_limit,
            max_item_size: self.max_item_size,
            durable: self.durable,
        }
    }

    /// The parser's limits.
    pub fn limits(&self) -> Limits {
        Limits { max_item_size: self.max_item_size, ..Limits::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_size_syntax() {
        assert_eq!(parse_item_size("1m"), Ok(1 << 20));
        assert_eq!(parse_item_size("2k"), Ok(2048));
        assert_eq!(parse_item_size("5000"), Ok(5000));
        assert!(parse_item_size("1023").is_err());
        assert!(parse_item_size("1025m").is_err());
        assert!(parse_item_size("1g").is_err());
        assert!(parse_item_size("").is_err());
        assert!(parse_item_size("99999999999999999999m").is_err());
    }

    #[test]
    fn defaults_and_flags() {
        let c = Config::try_parse_from(["dlht-server"]).unwrap();
        assert_eq!(c, Config::default());
        let c = Config::try_parse_from([
            "x", "-p", "0", "-l", "::1", "-t", "2", "-m", "128", "-I", "2m", "-c", "10", "-vv",
        ])
        .unwrap();
        assert_eq!((c.port, c.listen.as_str(), c.threads, c.memory_limit), (0, "::1", 2, 128));
        assert_eq!((c.max_item_size, c.conn_limit, c.verbose), (2 << 20, 10, 2));
        assert!(c.validate().is_ok());
        let c = Config::try_parse_from(["x", "-m", "1", "-I", "1m"]).unwrap();
        assert!(c.validate().is_err());
        assert!(Config::try_parse_from(["x", "-t", "0"]).is_err());
        assert!(Config::try_parse_from(["x", "-p", "70000"]).is_err());
        assert!(Config::try_parse_from(["x", "--bogus"]).is_err());
        let c = Config::try_parse_from(["x", "-Y", "/etc/auth"]).unwrap();
        assert_eq!(c.auth_file, Some(PathBuf::from("/etc/auth")));
        let c = Config::try_parse_from(["x", "--auth-file=f"]).unwrap();
        assert_eq!(c.auth_file, Some(PathBuf::from("f")));
        assert!(Config::try_parse_from(["x", "-Y"]).is_err());
        assert!(Config::try_parse_from(["x", "--durable"]).is_err(), "--durable needs -e");
        let c = Config::try_parse_from(["x", "-e", "d", "--durable"]).unwrap();
        assert!(c.durable && c.settings().durable);
    }
}
