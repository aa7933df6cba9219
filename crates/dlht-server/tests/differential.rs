//! A differential fuzzer: random command streams — valid, near-valid and
//! invalid — sent to memcached 1.6.18 (Debian's `/usr/bin/memcached`, on
//! loopback) and to dlht-server, every reply compared byte for byte, and
//! the counters a client can read (`stats`) after each stream. A stream
//! whose replies differ is cut down to the commands that still make them
//! differ, and printed with both replies.
//!
//! The short run (the test command): `DIFF_STREAMS` (default 300) streams
//! of up to 24 commands from the seed `DIFF_SEED` (default fixed, so a
//! failure reproduces). The long run, opt-in:
//! `DIFF_STREAMS=100000 cargo test --release -p dlht-server --test differential`.
//! Skipped, with a note, where memcached is not installed.
//!
//! What the streams leave out, because it cannot be the same on two
//! servers: `stats` itself (pids, times, sizes; the counters a client
//! reads are compared, see [`Client::counters`]), time (TTLs are 0,
//! negative or far; no absolute time in the future, nor `mg ... T-1 t`,
//! which each server reads against its own start; no `flush_all` with a
//! delay), data of whitespace alone (memcached's `incr` reads past it), and
//! `watch`, `lru_crawler metadump` and `stats conns` (not implemented:
//! README).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dlht_server::config::Config;
use dlht_server::server;

// Shared with the other test binaries, which use the rest of it.
#[allow(dead_code)]
mod process;
use process::{free_port, ChildGuard};

/// xorshift64*: a small deterministic generator (the streams must replay
/// exactly from a seed, for the cut-down and for a report).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// One stream's generator: keys of its own (`s<n>k<i>`), so streams do not
/// see each other's items (but for `flush_all`).
struct Gen<'a> {
    rng: &'a mut Rng,
    stream: usize,
}

impl Gen<'_> {
    fn key(&mut self) -> String {
        match self.rng.below(40) {
            0 => "k".repeat(251),
            1 => "k".repeat(250),
            2 => String::new(),
            _ => format!("s{}k{}", self.stream, self.rng.below(4)),
        }
    }

    fn data(&mut self) -> Vec<u8> {
        let pool: &[&[u8]] = &[
            b"",
            b"0",
            b"1",
            b"12",
            b"99",
            b"18446744073709551615",
            b"18446744073709551616",
            b"abc",
            b"1\0",
            b" 5",
            b"-3",
            b"value with spaces",
            // Not data of whitespace alone: memcached's incr runs strtoull
            // over it and on into whatever bytes follow the item in its
            // slab (a number left by an earlier item makes it count on).
        ];
        self.rng.pick(pool).to_vec()
    }

    /// A number token: mostly sane, sometimes not.
    fn number(&mut self, sane: &[&str]) -> String {
        if self.rng.chance(85) {
            self.rng.pick(sane).to_string()
        } else {
            self.rng
                .pick(&[
                    "x",
                    "",
                    "-1",
                    "4294967296",
                    "18446744073709551616",
                    "1x",
                    "+100",
                    " 1",
                    "0x10",
                    "2147483648",
                ])
                .to_string()
        }
    }

    fn exptime(&mut self) -> String {
        // (No absolute time in the future: each server reads it against its
        // own start, a second apart.)
        self.number(&["0", "-1", "100", "1000000", "1000000000", "-1000"])
    }

    fn noreply(&mut self) -> &'static str {
        if self.rng.chance(15) {
            " noreply"
        } else {
            ""
        }
    }

    fn storage(&mut self, name: &str) -> Vec<u8> {
        let key = self.key();
        let data = self.data();
        let flags = self.number(&["0", "1", "4294967295"]);
        let exptime = self.exptime();
        let mut len = data.len().to_string();
        if self.rng.chance(6) {
            len = self.number(&["0", "1", "3"]);
        }
        let cas = if name == "cas" {
            format!(" {}", self.number(&["0", "1", "2", "5", "99"]))
        } else {
            String::new()
        };
        let noreply = self.noreply();
        let mut line = format!("{name} {key} {flags} {exptime} {len}{cas}{noreply}\r\n").into_bytes();
        line.extend_from_slice(&data);
        line.extend_from_slice(b"\r\n");
        line
    }

    fn meta_flags(&mut self, choices: &[&str]) -> String {
        let n = self.rng.below(5);
        let mut out = String::new();
        for _ in 0..n {
            let f = *self.rng.pick(choices);
            out.push(' ');
            out.push_str(f);
        }
        out
    }

    fn command(&mut self) -> Vec<u8> {
        let r = &mut *self;
        match r.rng.below(30) {
            0..=3 => {
                let name = *r.rng.pick(&["set", "add", "replace", "append", "prepend", "cas", "set"]);
                r.storage(name)
            }
            4..=6 => {
                let name = *r.rng.pick(&["get", "gets"]);
                let n = 1 + r.rng.below(4);
                let keys: Vec<String> = (0..n).map(|_| r.key()).collect();
                format!("{name} {}\r\n", keys.join(" ")).into_bytes()
            }
            7 => {
                let name = *r.rng.pick(&["gat", "gats"]);
                let e = r.exptime();
                let n = 1 + r.rng.below(3);
                let keys: Vec<String> = (0..n).map(|_| r.key()).collect();
                format!("{name} {e} {}\r\n", keys.join(" ")).into_bytes()
            }
            8 => {
                let (k, e, nr) = (r.key(), r.exptime(), r.noreply());
                format!("touch {k} {e}{nr}\r\n").into_bytes()
            }
            9 | 10 => {
                let name = *r.rng.pick(&["incr", "decr"]);
                let (k, d, nr) = (r.key(), r.number(&["1", "0", "10", "18446744073709551615"]), r.noreply());
                format!("{name} {k} {d}{nr}\r\n").into_bytes()
            }
            11 => {
                let (k, nr) = (r.key(), r.noreply());
                let hold = *r.rng.pick(&["", "", " 0", " 1"]);
                format!("delete {k}{hold}{nr}\r\n").into_bytes()
            }
            12..=14 => {
                let k = r.key();
                let f = r.meta_flags(&[
                    "v",
                    "s",
                    "t",
                    "c",
                    "f",
                    "k",
                    "q",
                    "O1",
                    "Oab",
                    "T0",
                    "T100",
                    "N0",
                    "N100",
                    "R100",
                    "R0",
                    "h",
                    "u",
                    "E5",
                    "Z",
                    "b",
                    "Tx",
                    "O0123456789012345678901234567890123",
                ]);
                format!("mg {k}{f}\r\n").into_bytes()
            }
            15..=17 => {
                let k = r.key();
                let data = r.data();
                let f = r.meta_flags(&[
                    "c", "k", "q", "O1", "T0", "T100", "F5", "C1", "C2", "C99", "I", "MS", "ME", "MA", "MP",
                    "MR", "MX", "b", "Fx",
                ]);
                let len = if r.rng.chance(6) { r.number(&["0", "1", "3"]) } else { data.len().to_string() };
                let mut line = format!("ms {k} {len}{f}\r\n").into_bytes();
                line.extend_from_slice(&data);
                line.extend_from_slice(b"\r\n");
                line
            }
            18 | 19 => {
                let k = r.key();
                let f = r.meta_flags(&["q", "k", "O1", "C1", "C3", "I", "T100", "T0", "x", "b"]);
                format!("md {k}{f}\r\n").into_bytes()
            }
            20 | 21 => {
                let k = r.key();
                let f = r.meta_flags(&[
                    "v",
                    "t",
                    "c",
                    "k",
                    "q",
                    "O1",
                    "N0",
                    "N100",
                    "J5",
                    "J18446744073709551615",
                    "D1",
                    "D100",
                    "MI",
                    "MD",
                    "M+",
                    "M-",
                    "MX",
                    "C1",
                    "T100",
                    "Dx",
                ]);
                format!("ma {k}{f}\r\n").into_bytes()
            }
            22 => {
                let k = r.key();
                format!("{} {k}\r\n", r.rng.pick(&["me", "mn"])).into_bytes()
            }
            23 => r
                .rng
                .pick(&[
                    "flush_all\r\n",
                    "flush_all 0\r\n",
                    "flush_all noreply\r\n",
                    "flush_all x\r\n",
                    "flush_all -1\r\n",
                ])
                .as_bytes()
                .to_vec(),
            24 => r
                .rng
                .pick(&["verbosity 1\r\n", "verbosity\r\n", "verbosity 1 noreply\r\n", "verbosity x y z\r\n"])
                .as_bytes()
                .to_vec(),
            25 => r
                .rng
                .pick(&[
                    "stats detail on\r\n",
                    "stats detail off\r\n",
                    "stats detail dump\r\n",
                    "stats detail\r\n",
                    "stats bogus\r\n",
                    "slabs automove invalid\r\n",
                    "slabs reassign 1 2\r\n",
                    "lru_crawler\r\n",
                    "cache_memlimit 100\r\n",
                    "cache_memlimit x\r\n",
                    "lru x\r\n",
                ])
                .as_bytes()
                .to_vec(),
            26 => {
                // Garbage: printable words, or nothing.
                let n = r.rng.below(4);
                let words: Vec<String> = (0..n)
                    .map(|_| format!("{}{}", r.rng.pick(&["GET", "foo", "Set", "m", "1"]), r.rng.below(10)))
                    .collect();
                format!("{}\r\n", words.join(" ")).into_bytes()
            }
            27 => {
                // A command with its line ended by a bare "\n".
                let k = r.key();
                format!("{} {k}\n", r.rng.pick(&["get", "mg", "delete", "mn"])).into_bytes()
            }
            _ => {
                // Extra or missing tokens.
                let k = r.key();
                r.rng
                    .pick(&[
                        format!("set {k} 0 0\r\n"),
                        format!("set {k} 0 0 1 2 3\r\nx\r\n"),
                        format!("incr {k}\r\n"),
                        format!("touch {k}\r\n"),
                        format!("delete {k} 0 noreply extra\r\n"),
                        format!("get {k} {}\r\n", " ".repeat(3)),
                        format!("cas {k} 0 0 1\r\nx\r\n"),
                        "mg\r\n".to_string(),
                        "ms\r\n".to_string(),
                        format!("ms {k}\r\n"),
                        format!("ms {k} x\r\n"),
                    ])
                    .clone()
                    .into_bytes()
            }
        }
    }
}

/// How reading a reply ended.
enum Ended {
    /// At the marker.
    Marker,
    /// The server closed the connection.
    Closed,
    /// Nothing more came in time.
    Quiet,
    /// A second marker, sent after a quiet spell, was answered: the reply
    /// is whole, and the connection may still owe the first marker's line.
    Resynced,
}

/// A connection that reconnects after the server closed it.
struct Client {
    addr: SocketAddr,
    r: BufReader<TcpStream>,
}

impl Client {
    fn new(addr: SocketAddr) -> Client {
        Client { addr, r: BufReader::new(connect(addr)) }
    }

    /// Send `request`, then `version` (whose `VERSION` line marks the end of
    /// the request's replies: no stream sends one itself), and read up to
    /// that line. After a quiet spell — a data block that took the marker
    /// in, or a reply slowed by a busy machine — send a second `version`
    /// and wait longer: the replies up to the first `VERSION` that comes
    /// (either marker's) count, and the connection is made again, so that
    /// nothing owed on it is read as the next request's. `<closed>` or
    /// `<quiet>` (no marker even then) end a reply that ended that way.
    fn exchange(&mut self, request: &[u8]) -> Vec<u8> {
        let mut reply = Vec::new();
        let sent = |r: &mut BufReader<TcpStream>, bytes: &[u8]| r.get_mut().write_all(bytes).is_ok();
        let ended = if sent(&mut self.r, request) && sent(&mut self.r, b"version\r\n") {
            match self.read_to_marker(&mut reply, Duration::from_millis(150)) {
                Ended::Quiet if sent(&mut self.r, b"version\r\n") => {
                    match self.read_to_marker(&mut reply, Duration::from_secs(1)) {
                        Ended::Marker => Ended::Resynced,
                        other => other,
                    }
                }
                other => other,
            }
        } else {
            Ended::Closed
        };
        match ended {
            Ended::Marker => return reply,
            Ended::Closed => reply.extend_from_slice(b"<closed>"),
            Ended::Resynced => {}
            Ended::Quiet => reply.extend_from_slice(b"<quiet>"),
        }
        self.r = BufReader::new(connect(self.addr));
        reply
    }

    /// Read reply lines into `reply` up to a `VERSION` line (not kept),
    /// waiting at most `quiet` for each.
    fn read_to_marker(&mut self, reply: &mut Vec<u8>, quiet: Duration) -> Ended {
        self.r.get_mut().set_read_timeout(Some(quiet)).unwrap();
        loop {
            let mut line = Vec::new();
            match self.r.read_until(b'\n', &mut line) {
                Ok(0) => {
                    reply.extend_from_slice(&line);
                    return Ended::Closed;
                }
                Ok(_) if line.starts_with(b"VERSION ") => return Ended::Marker,
                Ok(_) => reply.extend_from_slice(&line),
                Err(_) => {
                    reply.extend_from_slice(&line);
                    return Ended::Quiet;
                }
            }
        }
    }

    /// The counters a client reads, after a stream. Not `curr_items`,
    /// `get_expired` and `get_flushed`: memcached's allocator takes dead
    /// items out of the tail of the slab class it allocates in (counting
    /// them `reclaimed`), so whether a later command finds one dead (and
    /// counts it) depends on which items share a slab class; dlht-server
    /// has no slab classes.
    fn counters(&mut self) -> Vec<(String, String)> {
        const COUNTED: &[&str] = &[
            "cmd_get",
            "cmd_set",
            "cmd_flush",
            "cmd_touch",
            "cmd_meta",
            "get_hits",
            "get_misses",
            "delete_misses",
            "delete_hits",
            "incr_misses",
            "incr_hits",
            "decr_misses",
            "decr_hits",
            "cas_misses",
            "cas_hits",
            "cas_badval",
            "touch_hits",
            "touch_misses",
            "store_too_large",
            "store_no_memory",
            "total_items",
        ];
        let reply = self.exchange(b"stats\r\n");
        String::from_utf8_lossy(&reply)
            .lines()
            .filter_map(|l| {
                let mut w = l.split(' ');
                let (_, name, value) = (w.next()?, w.next()?, w.next()?);
                COUNTED.contains(&name).then(|| (name.to_string(), value.to_string()))
            })
            .collect()
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => {
                s.set_nodelay(true).unwrap();
                s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
                return s;
            }
            Err(e) if Instant::now() > deadline => panic!("connect to {addr}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The replies of both servers to `stream`, command by command, and the
/// counters that moved differently.
type Outcome = (Vec<(Vec<u8>, Vec<u8>)>, Vec<String>);

fn run_stream(theirs: &mut Client, ours: &mut Client, stream: &[Vec<u8>]) -> Outcome {
    let (before_t, before_o) = (theirs.counters(), ours.counters());
    let replies = stream.iter().map(|c| (theirs.exchange(c), ours.exchange(c))).collect();
    let (after_t, after_o) = (theirs.counters(), ours.counters());
    let delta = |before: &[(String, String)], after: &[(String, String)], name: &str| {
        let get = |xs: &[(String, String)]| {
            xs.iter().find(|(n, _)| n == name).and_then(|(_, v)| v.parse::<i64>().ok()).unwrap_or(0)
        };
        get(after) - get(before)
    };
    let counters = after_t
        .iter()
        .filter_map(|(name, _)| {
            let (t, o) = (delta(&before_t, &after_t, name), delta(&before_o, &after_o, name));
            (t != o).then(|| format!("{name}: memcached +{t}, dlht-server +{o}"))
        })
        .collect();
    (replies, counters)
}

fn differs((replies, counters): &Outcome) -> bool {
    !counters.is_empty() || replies.iter().any(|(t, o)| !same_but_a_tick(t, o))
}

/// True if `a` and `b` are the same reply, but for the seconds a TTL or an
/// age shows (`t`, `l`, `exp=`, `la=`) differing by one: each server's
/// clock ticks on its own, and a stream can cross a second on one and not
/// on the other.
fn same_but_a_tick(a: &[u8], b: &[u8]) -> bool {
    if a == b {
        return true;
    }
    let split = |r: &[u8]| r.split(|&c| c == b' ' || c == b'\n').map(<[u8]>::to_vec).collect::<Vec<_>>();
    let (ta, tb) = (split(a), split(b));
    ta.len() == tb.len()
        && ta.iter().zip(&tb).all(|(x, y)| {
            x == y
                || [&b"exp="[..], b"la=", b"t", b"l"].iter().any(|p| {
                    let n = |w: &[u8]| {
                        std::str::from_utf8(w.strip_prefix(*p)?)
                            .ok()?
                            .trim_end_matches('\r')
                            .parse::<i64>()
                            .ok()
                    };
                    matches!((n(x), n(y)), (Some(i), Some(j)) if (i - j).abs() <= 1)
                })
        })
}

#[test]
fn same_replies_as_memcached_on_random_streams() {
    let memcached = "/usr/bin/memcached";
    if !std::path::Path::new(memcached).exists() {
        eprintln!("note: {memcached} not found; differential fuzzing skipped");
        return;
    }
    let streams: usize = std::env::var("DIFF_STREAMS").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    let seed: u64 = std::env::var("DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_2026_1128);
    let port = free_port();
    let child = Command::new(memcached)
        .args(["-U", "0", "-l", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-u", "root", "-m", "64"])
        // No background reclaiming (its LRU maintainer takes expired items
        // out on its own time; dlht-server's crawler is disabled below).
        .args(["-o", "no_lru_crawler,no_lru_maintainer"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = ChildGuard(child);
    let config = Config { port: 0, threads: 1, ..Config::default() };
    let running = server::start(&config).expect("dlht-server starts");
    let mut theirs = Client::new(SocketAddr::from(([127, 0, 0, 1], port)));
    let mut ours = Client::new(running.local_addr());
    let stats = String::from_utf8_lossy(&theirs.exchange(b"stats\r\n")).into_owned();
    assert!(stats.contains("STAT version 1.6") && !stats.contains("dlht"), "not memcached on port {port}");
    eprintln!(
        "differential fuzzing against memcached {}",
        stats.lines().find(|l| l.contains("version")).unwrap_or("")
    );

    // dlht-server's crawler off too: it would take flushed and expired
    // items out on its own time, and the counters of the gets that find
    // them would differ.
    assert_eq!(ours.exchange(b"lru_crawler disable\r\n"), b"OK\r\n");
    let mut rng = Rng(seed | 1);
    let mut failures = Vec::new();
    let started = Instant::now();
    for s in 0..streams {
        let n = 1 + rng.below(24);
        let mut gen = Gen { rng: &mut rng, stream: s };
        let stream: Vec<Vec<u8>> = (0..n).map(|_| gen.command()).collect();
        let outcome = run_stream(&mut theirs, &mut ours, &stream);
        if !differs(&outcome) {
            continue;
        }
        if std::env::var_os("DIFF_SHOW_UNCUT").is_some() {
            for (c, (t, o)) in stream.iter().zip(&outcome.0) {
                let mark = if same_but_a_tick(t, o) { " " } else { "≠" };
                eprintln!(
                    "{mark} {:?}: {:?} / {:?}",
                    String::from_utf8_lossy(c),
                    String::from_utf8_lossy(t),
                    String::from_utf8_lossy(o)
                );
            }
            eprintln!("{:?}", outcome.1);
        }
        // Cut it down: drop commands while the replies still differ
        // (each try on keys of a fresh stream number, so no item of an
        // earlier try is left to change the outcome).
        let mut cut = stream.clone();
        let mut fresh = streams + s * 1000;
        let mut i = 0;
        while i < cut.len() {
            let mut tried = cut.clone();
            tried.remove(i);
            fresh += 1;
            let renamed: Vec<Vec<u8>> = tried.iter().map(|c| rename(c, s, fresh)).collect();
            if differs(&run_stream(&mut theirs, &mut ours, &renamed)) {
                cut = tried;
            } else {
                i += 1;
            }
        }
        fresh += 1;
        let renamed: Vec<Vec<u8>> = cut.iter().map(|c| rename(c, s, fresh)).collect();
        let (replies, counters) = run_stream(&mut theirs, &mut ours, &renamed);
        let mut report = format!("stream {s} (seed {seed}), cut to {} of {n} commands:\n", cut.len());
        for (c, (t, o)) in renamed.iter().zip(&replies) {
            let mark = if same_but_a_tick(t, o) { " " } else { "≠" };
            report += &format!(
                "{mark} {:?}\n    memcached:   {:?}\n    dlht-server: {:?}\n",
                String::from_utf8_lossy(c),
                String::from_utf8_lossy(t),
                String::from_utf8_lossy(o)
            );
        }
        for c in &counters {
            report += &format!("  counter {c}\n");
        }
        if !differs(&(replies.clone(), counters.clone())) {
            report += "  (the same this time: the first run's differences were)\n";
            for (c, (t, o)) in stream.iter().zip(&outcome.0) {
                let mark = if same_but_a_tick(t, o) { " " } else { "≠" };
                report += &format!(
                    "  {mark} {:?}: {:?} / {:?}\n",
                    String::from_utf8_lossy(c),
                    String::from_utf8_lossy(t),
                    String::from_utf8_lossy(o)
                );
            }
            for c in &outcome.1 {
                report += &format!("  counter {c}\n");
            }
        }
        eprintln!("{report}");
        failures.push(report);
        if failures.len() >= 10 {
            break;
        }
    }
    running.shutdown();
    eprintln!("{streams} streams in {:.1} s, {} differed", started.elapsed().as_secs_f64(), failures.len());
    assert!(
        failures.is_empty(),
        "{} streams differ from memcached; the first:\n{}",
        failures.len(),
        failures[0]
    );
}

/// `command` with the keys of stream `from` renamed to stream `to`.
fn rename(command: &[u8], from: usize, to: usize) -> Vec<u8> {
    let (a, b) = (format!("s{from}k"), format!("s{to}k"));
    let mut out = Vec::with_capacity(command.len());
    let mut i = 0;
    while i < command.len() {
        if command[i..].starts_with(a.as_bytes()) {
            out.extend_from_slice(b.as_bytes());
            i += a.len();
        } else {
            out.push(command[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn the_generator_replays_from_its_seed() {
    let streams = |seed| {
        let mut rng = Rng(seed);
        (0..20)
            .map(|s| {
                let mut gen = Gen { rng: &mut rng, stream: s };
                gen.command()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(streams(7), streams(7));
    assert_ne!(streams(7), streams(9));
    assert_eq!(rename(b"get s3k1 s3k2 s31k0\r\n", 3, 45), b"get s45k1 s45k2 s31k0\r\n");
    // A second's tick is forgiven in TTLs and ages only.
    assert!(same_but_a_tick(b"VA 1 t100 l0\r\nx\r\n", b"VA 1 t99 l1\r\nx\r\n"));
    assert!(same_but_a_tick(b"ME k exp=-100 la=0 cas=5\r\n", b"ME k exp=-99 la=1 cas=5\r\n"));
    assert!(!same_but_a_tick(b"HD t100\r\n", b"HD t98\r\n"));
    assert!(!same_but_a_tick(b"HD c5\r\n", b"HD c6\r\n"));
    assert!(!same_but_a_tick(b"VALUE k 0 1\r\n5\r\n", b"VALUE k 0 1\r\n6\r\n"));
    assert!(differs(&(vec![(b"STORED\r\n".to_vec(), b"NOT_STORED\r\n".to_vec())], Vec::new())));
    assert!(differs(&(Vec::new(), vec!["cmd_get: memcached +1, dlht-server +0".into()])));
    assert!(!differs(&(vec![(b"END\r\n".to_vec(), b"END\r\n".to_vec())], Vec::new())));
}
