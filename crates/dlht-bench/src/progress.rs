//! Progress of a long phase, on a terminal and off it.
//!
//! indicatif hides its bars when stderr is not a terminal, so a run piped
//! into a CI log, `tee` or `cat` said nothing for minutes. [`Progress`]
//! draws the bar on a terminal, and off one prints a plain line on
//! stderr, cargo-like: when a phase starts, then at least every
//! [`EVERY`] while it runs, never two lines closer than [`GAP`]. A helper
//! thread per visible phase prints them, so a phase whose work never
//! reports a step (a latency histogram, a child process) still shows that
//! it runs:
//!
//! ```text
//!    Measuring round 2/5: dlht-batch get on 2 threads: 123/640 steps (19%), 1m02s elapsed, about 4m10s left
//!   Populating papaya: 12582912/33554432 keys (37%), 8s elapsed, about 14s left
//!      Latency papaya, one thread: 12s elapsed
//! ```
//!
//! A lower room: it imports nothing else from the crate.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Off a terminal: a line at least this often while a phase runs.
pub const EVERY: Duration = Duration::from_secs(10);
/// Off a terminal: never two lines closer than this (over all phases).
pub const GAP: Duration = Duration::from_secs(2);
/// How often the helper thread looks whether a line is due.
const POLL: Duration = Duration::from_millis(250);

/// When the last plain line went out, over all phases: the rate limit.
static LAST_LINE: Mutex<Option<Instant>> = Mutex::new(None);

/// A phase's progress: an indicatif bar on a terminal, plain lines off it,
/// nothing when hidden. Shared by reference between a phase's threads.
pub struct Progress {
    /// The bar on a terminal (hidden otherwise).
    bar: ProgressBar,
    /// The plain lines off a terminal (None on one, or when hidden).
    plain: Option<Plain>,
}

/// The plain-line side of a phase: its state and the thread that prints it.
struct Plain {
    shared: Arc<Shared>,
    ticker: Option<JoinHandle<()>>,
}

/// What the helper thread reads.
struct Shared {
    /// Steps done: an atomic, so that the phase's threads count without a
    /// lock (populating counts every 16 keys, on every thread).
    pos: AtomicU64,
    state: Mutex<State>,
    /// Wakes the helper thread when the phase ends.
    ended: Condvar,
}

/// What a plain line says, less the count.
struct State {
    /// The line's head, right-aligned as cargo's ("Measuring").
    verb: &'static str,
    /// What runs now.
    message: String,
    /// Steps in all, if known (then the line estimates the time left).
    len: Option<u64>,
    /// What a step is ("keys", "steps").
    unit: &'static str,
    start: Instant,
    /// A line of this phase went out.
    reported: bool,
    done: bool,
}

/// True when stderr is a terminal: then indicatif draws the bars.
pub fn on_terminal() -> bool {
    std::io::stderr().is_terminal()
}

impl Progress {
    /// A phase of `len` steps of `unit` ("keys", "steps"), headed `verb`.
    pub fn new(verb: &'static str, len: u64, unit: &'static str) -> Progress {
        let template =
            format!("{{prefix:>12}} [{{bar:30}}] {{pos}}/{{len}} {unit} {{msg}} ({{elapsed}}, {{eta}} left)");
        Progress::make(verb, Some(len), unit, &template)
    }

    /// A phase whose steps are not counted (a spinner on a terminal; off
    /// one, lines with the elapsed time only).
    pub fn phase(verb: &'static str, message: impl Into<String>) -> Progress {
        let p = Progress::make(verb, None, "", "{spinner} {prefix:>12} {msg} ({elapsed})");
        p.set_message(message);
        p
    }

    /// Nothing at all: for the untimed fills inside a measurement.
    pub fn hidden() -> Progress {
        Progress { bar: ProgressBar::hidden(), plain: None }
    }

    /// The same phase drawn with `template` on a terminal (indicatif's
    /// syntax; the plain lines do not change).
    pub fn with_template(self, template: &str) -> Progress {
        if let Ok(style) = ProgressStyle::with_template(template) {
            self.bar.set_style(style.progress_chars("=> "));
        }
        self
    }

    fn make(verb: &'static str, len: Option<u64>, unit: &'static str, template: &str) -> Progress {
        if on_terminal() {
            let bar = match len {
                Some(n) => ProgressBar::new(n),
                None => ProgressBar::new_spinner(),
            };
            let style = ProgressStyle::with_template(template).expect("a valid progress template");
            bar.set_style(style.progress_chars("=> "));
            bar.set_prefix(verb);
            if len.is_none() {
                bar.enable_steady_tick(Duration::from_millis(200));
            }
            return Progress { bar, plain: None };
        }
        let shared = Arc::new(Shared {
            pos: AtomicU64::new(0),
            state: Mutex::new(State {
                verb,
                message: String::new(),
                len,
                unit,
                start: Instant::now(),
                reported: false,
                done: false,
            }),
            ended: Condvar::new(),
        });
        let ticker = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new().name("progress".into()).spawn(move || tick(&shared)).ok()
        };
        Progress { bar: ProgressBar::hidden(), plain: Some(Plain { shared, ticker }) }
    }

    /// Say what runs now.
    pub fn set_message(&self, message: impl Into<String>) {
        let message = message.into();
        if let Some(p) = &self.plain {
            p.shared.state.lock().unwrap_or_else(|e| e.into_inner()).message = message;
        } else {
            self.bar.set_message(message);
        }
    }

    /// `n` more steps done.
    #[inline]
    pub fn inc(&self, n: u64) {
        match &self.plain {
            // Relaxed: a count for a progress line, read by the helper thread.
            Some(p) => {
                p.shared.pos.fetch_add(n, Ordering::Relaxed);
            }
            None => self.bar.inc(n),
        }
    }

    /// A line of the phase's own (a step's result) on stderr: above the bar
    /// on a terminal; off one, it counts as a progress line, so the next
    /// plain line comes [`EVERY`] after it.
    pub fn println(&self, line: impl AsRef<str>) {
        if self.plain.is_none() && !self.bar.is_hidden() {
            self.bar.println(line);
            return;
        }
        let mut last = LAST_LINE.lock().unwrap_or_else(|e| e.into_inner());
        eprintln!("{}", line.as_ref());
        *last = Some(Instant::now());
    }

    /// The phase is over: the bar goes, the lines stop.
    pub fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
        if let Some(p) = &self.plain {
            p.shared.state.lock().unwrap_or_else(|e| e.into_inner()).done = true;
            p.shared.ended.notify_all();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish_and_clear();
        if let Some(t) = self.plain.as_mut().and_then(|p| p.ticker.take()) {
            let _ = t.join();
        }
    }
}

/// The helper thread: a line when the phase starts and then every
/// [`EVERY`], each at least [`GAP`] after the last line of any phase.
fn tick(shared: &Shared) {
    let mut state = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    // A first look after one poll: the phase has said what runs by then,
    // and a phase shorter than that needs no line.
    state = shared.ended.wait_timeout(state, POLL).unwrap_or_else(|e| e.into_inner()).0;
    while !state.done {
        let now = Instant::now();
        {
            let mut last = LAST_LINE.lock().unwrap_or_else(|e| e.into_inner());
            let since = last.map(|t| now.duration_since(t));
            let gap_ok = since.map_or(true, |s| s >= GAP);
            let due = !state.reported || since.map_or(true, |s| s >= EVERY);
            if gap_ok && due {
                // Relaxed: see Progress::inc.
                eprintln!("{}", line(&state, shared.pos.load(Ordering::Relaxed), now));
                *last = Some(now);
                state.reported = true;
            }
        }
        state = shared.ended.wait_timeout(state, POLL).unwrap_or_else(|e| e.into_inner()).0;
    }
}

/// One plain line: what runs, the count, elapsed and estimated time left.
fn line(s: &State, pos: u64, now: Instant) -> String {
    let elapsed = now.duration_since(s.start);
    let mut out = format!("{:>12} {}", s.verb, s.message);
    if let Some(len) = s.len {
        let pos = pos.min(len);
        let pct = (pos * 100).checked_div(len).unwrap_or(100);
        out += &format!(": {pos}/{len} {} ({pct}%)", s.unit);
    }
    out += &format!(", {} elapsed", hms(elapsed));
    if let Some(left) = s.len.and_then(|len| remaining(elapsed, pos, len)) {
        out += &format!(", about {} left", hms(left));
    }
    out
}

/// Time left if the remaining steps go as fast as the done ones did (no
/// guess in the first second, or before a step is done).
fn remaining(elapsed: Duration, pos: u64, len: u64) -> Option<Duration> {
    (pos > 0 && elapsed >= Duration::from_secs(1))
        .then(|| elapsed.mul_f64(len.saturating_sub(pos) as f64 / pos as f64))
}

/// "7s", "1m02s", "1h03m".
pub fn hms(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s / 60 % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_cargo() {
        assert_eq!(hms(Duration::from_secs(7)), "7s");
        assert_eq!(hms(Duration::from_secs(62)), "1m02s");
        assert_eq!(hms(Duration::from_secs(3780)), "1h03m");
    }

    #[test]
    fn a_line_says_what_runs_and_what_is_left() {
        let start = Instant::now();
        let s = State {
            verb: "Measuring",
            message: "round 1/2: dlht get on 1 threads".into(),
            len: Some(10),
            unit: "steps",
            start,
            reported: false,
            done: false,
        };
        let l = line(&s, 5, start + Duration::from_secs(20));
        assert_eq!(
            l,
            "   Measuring round 1/2: dlht get on 1 threads: 5/10 steps (50%), 20s elapsed, about 20s left"
        );
        let none = State { len: None, ..s };
        assert_eq!(
            line(&none, 0, start + Duration::from_secs(3)),
            "   Measuring round 1/2: dlht get on 1 threads, 3s elapsed"
        );
    }

    #[test]
    fn no_estimate_before_the_first_step() {
        assert_eq!(remaining(Duration::from_secs(5), 0, 10), None);
        assert_eq!(remaining(Duration::from_millis(500), 5, 10), None);
        assert_eq!(remaining(Duration::from_secs(5), 10, 10), Some(Duration::ZERO));
    }
}
