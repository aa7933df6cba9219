//! memcached's server clock and time rules: the clock counts seconds since
//! (about) the process started; exptimes given by clients are converted to
//! it with `realtime`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// memcached's `REALTIME_MAXDELTA`: exptimes up to 30 days are relative to
/// now, larger ones are absolute unix times.
pub const REALTIME_MAXDELTA: i64 = 60 * 60 * 24 * 30;

/// memcached's `ITEM_UPDATE_INTERVAL`: the clock starts at this plus 2
/// (memcached backdates its start so that the clock is never 0), and
/// `uptime` is the clock minus this.
pub const ITEM_UPDATE_INTERVAL: u32 = 60;

/// Where the clock reads the time from.
#[derive(Debug)]
enum Source {
    /// The system's unix time, read on each call.
    System,
    /// A value that tests set and advance.
    Manual(AtomicU32),
}

/// The server clock (memcached's `current_time`, a `rel_time_t`), either
/// following the system time or set by hand (tests advance it without
/// sleeping).
#[derive(Debug)]
pub struct Clock {
    /// Unix time at which the server clock reads 0 (memcached's
    /// `process_started`).
    process_started: i64,
    source: Source,
}

fn unix_now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl Clock {
    /// A clock following the system time, reading `ITEM_UPDATE_INTERVAL +
    /// 2` now, as memcached's does at start.
    pub fn system() -> Self {
        Clock { process_started: unix_now() - i64::from(ITEM_UPDATE_INTERVAL + 2), source: Source::System }
    }

    /// A clock following the system time whose 0 is the unix time
    /// `process_started` (a restarted cache's, kept from its first run;
    /// any value, read from a file: the clock saturates, never overflows).
    pub fn system_since(process_started: i64) -> Self {
        Clock { process_started, source: Source::System }
    }

    /// A clock that reads `now` until [`set`](Self::set) or
    /// [`advance`](Self::advance), whose 0 is the unix time
    /// `process_started`.
    pub fn manual(process_started: i64, now: u32) -> Self {
        Clock { process_started, source: Source::Manual(AtomicU32::new(now)) }
    }

    /// The server clock now (seconds).
    pub fn now(&self) -> u32 {
        match &self.source {
            // Saturating: `process_started` may come from a restarted
            // cache's meta file, any i64 (see `system_since`).
            Source::System => {
                u32::try_from(unix_now().saturating_sub(self.process_started).max(0)).unwrap_or(u32::MAX)
            }
            // Relaxed: a test's clock, one number read on its own.
            Source::Manual(now) => now.load(Ordering::Relaxed),
        }
    }

    /// Set a manual clock (no effect on a system clock).
    pub fn set(&self, now: u32) {
        if let Source::Manual(n) = &self.source {
            n.store(now, Ordering::Relaxed);
        }
    }

    /// Advance a manual clock by `secs` (no effect on a system clock).
    pub fn advance(&self, secs: u32) {
        if let Source::Manual(n) = &self.source {
            n.fetch_add(secs, Ordering::Relaxed);
        }
    }

    /// The unix time at which the clock read 0.
    pub fn process_started(&self) -> i64 {
        self.process_started
    }

    /// The unix time now, by this clock (`stats`' `time`).
    pub fn unix_time(&self) -> i64 {
        self.process_started.saturating_add(i64::from(self.now()))
    }

    /// memcached's `realtime` with `EXPTIME_TO_POSITIVE_TIME` applied first:
    /// a client's exptime on the server clock. 0 stays 0 (never); a
    /// negative one becomes 1 (already expired); up to 30 days is relative
    /// to now; larger is a unix time, 1 if at or before the clock's 0.
    pub fn realtime(&self, exptime: i64) -> u32 {
        let exptime = if exptime < 0 { REALTIME_MAXDELTA + 1 } else { exptime };
        if exptime == 0 {
            0
        } else if exptime > REALTIME_MAXDELTA {
            if exptime <= self.process_started {
                1
            } else {
                // memcached truncates to rel_time_t (32 bits); wrapping,
                // the same bits, for a `process_started` far below 0.
                exptime.wrapping_sub(self.process_started) as u32
            }
        } else {
            // exptime <= 30 days: fits u32; memcached's sum wraps as here.
            (exptime as u32).wrapping_add(self.now())
        }
    }
}

/// Whether an item with this server-clock exptime has expired at `now`
/// (memcached: `exptime != 0 && exptime <= current_time`).
pub fn is_expired(exptime: u32, now: u32) -> bool {
    exptime != 0 && exptime <= now
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_rules() {
        let clock = Clock::manual(1_700_000_000, 100);
        assert_eq!(clock.realtime(0), 0);
        assert_eq!(clock.realtime(-1), 1);
        assert!(is_expired(clock.realtime(-1), clock.now()));
        assert_eq!(clock.realtime(10), 110);
        assert_eq!(clock.realtime(REALTIME_MAXDELTA), REALTIME_MAXDELTA as u32 + 100);
        assert_eq!(clock.realtime(1_700_000_500), 500);
        assert_eq!(clock.realtime(REALTIME_MAXDELTA + 1), 1);
        assert_eq!(clock.realtime(1_700_000_000), 1);
        assert_eq!(clock.unix_time(), 1_700_000_100);
        clock.advance(5);
        assert_eq!(clock.now(), 105);
        clock.set(7);
        assert_eq!(clock.now(), 7);
    }

    #[test]
    fn any_origin_from_a_meta_file_is_a_clock() {
        for (origin, now) in [(i64::MIN, u32::MAX), (i64::MAX, 0)] {
            let clock = Clock::system_since(origin);
            assert_eq!(clock.now(), now, "{origin}");
            assert_eq!(clock.unix_time(), origin.saturating_add(i64::from(now)));
            clock.realtime(REALTIME_MAXDELTA + 1);
            clock.realtime(10);
        }
    }

    #[test]
    fn expiry_boundary() {
        assert!(!is_expired(0, u32::MAX));
        assert!(!is_expired(11, 10));
        assert!(is_expired(10, 10));
    }

    #[test]
    fn system_clock_starts_at_62() {
        let clock = Clock::system();
        let now = clock.now();
        assert!((62..=64).contains(&now), "{now}");
        clock.set(1000);
        assert!(clock.now() < 1000);
    }
}
