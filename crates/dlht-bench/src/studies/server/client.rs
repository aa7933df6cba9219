//! The study's own memcached text-protocol load client: blocking
//! `TcpStream`s with 10 s timeouts, each thread driving C connections with
//! a pipeline of D requests each (write every connection's batch, then
//! read every reply in order), every reply parsed (`VALUE`/`END` framing,
//! `STORED`) and every value checked against the bytes derived from its key.

use crate::harness::limit::splitmix;
use hdrhistogram::Histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::ops::Range;
use std::time::{Duration, Instant};

/// Timeout of every connect, read and write.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Keys per multi-get.
pub const MULTI: usize = 16;

/// The key of index `i`, appended to `out`.
pub fn key(i: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(b"dk:");
    let _ = write!(out, "{i}");
}

/// The value of key `i` (`len` bytes), appended to `out`: the 16 hex digits
/// of a hash of `i`, repeated, so that a value given for the wrong key, or
/// cut short, is caught.
pub fn value(i: u64, len: usize, out: &mut Vec<u8>) {
    let h = splitmix(i ^ 0x7661_6c75_6573);
    let digits: [u8; 16] = std::array::from_fn(|j| b"0123456789abcdef"[((h >> (4 * j)) & 15) as usize]);
    out.extend((0..len).map(|j| digits[j % 16]));
}

/// Check failures: how many, and the first few in words.
#[derive(Clone, Debug, Default)]
pub struct Errors {
    /// Failed checks.
    pub count: u64,
    /// The first few, described.
    pub first: Vec<String>,
}

impl Errors {
    /// Count one, keeping its description if it is among the first five.
    pub fn add(&mut self, what: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.len() < 5 {
            self.first.push(what());
        }
    }

    /// Add another set of errors.
    pub fn merge(&mut self, o: Errors) {
        self.count += o.count;
        for e in o.first {
            if self.first.len() < 5 {
                self.first.push(e);
            }
        }
    }
}

/// One connection with its receive buffer.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Scratch for expected keys and values.
    scratch: Vec<u8>,
}

fn protocol(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

impl Conn {
    /// Connect with timeouts on connect, reads and writes.
    pub fn connect(addr: SocketAddr) -> io::Result<Conn> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream, buf: vec![0; 1 << 16], start: 0, end: 0, scratch: Vec::new() })
    }

    /// Write all of `bytes`.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Read more bytes (compacting, growing the buffer when full).
    fn fill(&mut self) -> io::Result<()> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let n = self.stream.read(&mut self.buf[self.end..])?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the server closed the connection"));
        }
        self.end += n;
        Ok(())
    }

    /// The next line (without its `\r\n`), as a range of `buf` valid until
    /// the next read.
    pub fn line(&mut self) -> io::Result<Range<usize>> {
        let mut from = 0; // relative to `start`, which a read may move
        loop {
            let at = self.start + from;
            if let Some(p) = self.buf[at..self.end].windows(2).position(|w| w == b"\r\n") {
                let r = self.start..at + p;
                self.start = at + p + 2;
                return Ok(r);
            }
            from = (self.end - self.start).saturating_sub(1);
            self.fill()?;
        }
    }

    /// The next `n` bytes, as a range of `buf` valid until the next read.
    pub fn block(&mut self, n: usize) -> io::Result<Range<usize>> {
        while self.end - self.start < n {
            self.fill()?;
        }
        let r = self.start..self.start + n;
        self.start += n;
        Ok(r)
    }

    /// Read a `STORED` reply.
    pub fn stored(&mut self) -> io::Result<()> {
        let l = self.line()?;
        if &self.buf[l.clone()] != b"STORED" {
            return Err(protocol(format!(
                "expected STORED, got {:?}",
                String::from_utf8_lossy(&self.buf[l])
            )));
        }
        Ok(())
    }

    /// Read the reply to a get of `keys` (values of `len` bytes): `Ok` with
    /// a hit flag per key; a wrong value is counted in `errors`; a reply
    /// that breaks the framing is an `Err`.
    pub fn get_reply(
        &mut self,
        keys: &[u64],
        len: usize,
        hits: &mut [bool],
        errors: &mut Errors,
    ) -> io::Result<()> {
        hits.iter_mut().for_each(|h| *h = false);
        let mut next = 0; // hits come in request order
        loop {
            let l = self.line()?;
            let line = &self.buf[l.clone()];
            if line == b"END" {
                return Ok(());
            }
            let mut parts = line.split(|&b| b == b' ');
            let (Some(b"VALUE"), Some(k), Some(_flags), Some(n)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(protocol(format!(
                    "expected VALUE or END, got {:?}",
                    String::from_utf8_lossy(line)
                )));
            };
            let n: usize = std::str::from_utf8(n)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| protocol(format!("bad VALUE line {:?}", String::from_utf8_lossy(line))))?;
            // Which requested key is it?
            let mut found = None;
            while next < keys.len() {
                self.scratch.clear();
                key(keys[next], &mut self.scratch);
                next += 1;
                if self.scratch == k {
                    found = Some(next - 1);
                    break;
                }
            }
            let kstr = String::from_utf8_lossy(k).into_owned();
            let data = self.block(n + 2)?;
            if &self.buf[data.end - 2..data.end] != b"\r\n" {
                return Err(protocol(format!("value of {kstr} not followed by \\r\\n")));
            }
            let Some(at) = found else {
                errors.add(|| format!("a reply for key {kstr}, not requested (or out of order)"));
                continue;
            };
            self.scratch.clear();
            value(keys[at], len, &mut self.scratch);
            if self.scratch[..] == self.buf[data.start..data.end - 2] {
                hits[at] = true;
            } else {
                errors.add(|| {
                    format!("wrong value for {kstr}: {n} bytes, expected {len} derived from the key")
                });
            }
        }
    }
}

/// A load workload of the client.
#[derive(Clone, Copy, Debug)]
pub enum Mix {
    /// `get_percent`% gets of preloaded keys, the rest sets, values of `len` bytes.
    GetSet { get_percent: u32, len: usize },
    /// Multi-gets of [`MULTI`] preloaded keys, values of `len` bytes.
    Multi { len: usize },
}

/// What a load run measured.
#[derive(Debug)]
pub struct Load {
    /// Requests completed (a multi-get is one).
    pub requests: u64,
    /// Keys asked for (a multi-get counts [`MULTI`]).
    pub keys: u64,
    /// Seconds measured.
    pub seconds: f64,
    /// Per-request latency, ns.
    pub hist: Histogram<u64>,
    /// Failed checks.
    pub errors: Errors,
}

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

/// Set keys `0..keys` to their values (`len` bytes) over `conns` connections,
/// `depth` sets in flight on each; every reply checked.
pub fn preload(addr: SocketAddr, keys: u64, len: usize, conns: usize, depth: usize) -> Result<(), String> {
    let per = keys.div_ceil(conns as u64);
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..conns as u64)
            .map(|c| {
                s.spawn(move || -> Result<(), String> {
                    let mut conn = Conn::connect(addr).map_err(|e| format!("connect: {e}"))?;
                    let (lo, hi) = ((c * per).min(keys), ((c + 1) * per).min(keys));
                    let mut out = Vec::new();
                    let mut i = lo;
                    while i < hi {
                        let n = (hi - i).min(depth as u64);
                        out.clear();
                        for k in i..i + n {
                            push_set(k, len, &mut out);
                        }
                        conn.send(&out).map_err(|e| format!("preload send: {e}"))?;
                        for _ in 0..n {
                            conn.stored().map_err(|e| format!("preload: {e}"))?;
                        }
                        i += n;
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a preload thread panicked".into()))).collect()
    });
    results.into_iter().collect()
}

fn push_set(k: u64, len: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(b"set ");
    key(k, out);
    let _ = write!(out, " 0 0 {len}\r\n");
    value(k, len, out);
    out.extend_from_slice(b"\r\n");
}

/// Run `mix` over keys `0..keys` for `seconds` from `threads` threads, each
/// with `conns` connections keeping `depth` requests in flight. Every
/// get must hit with the key's value (the keys are preloaded).
#[allow(clippy::too_many_arguments)]
pub fn load(
    addr: SocketAddr,
    mix: Mix,
    keys: u64,
    seconds: f64,
    threads: usize,
    conns: usize,
    depth: usize,
    seed: u64,
) -> Result<Load, String> {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let parts: Vec<Result<Load, String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads as u64)
            .map(|t| {
                s.spawn(move || load_thread(addr, mix, keys, deadline, conns, depth, seed ^ splitmix(t + 1)))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a load thread panicked".into()))).collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let mut total = Load { requests: 0, keys: 0, seconds, hist: new_hist(), errors: Errors::default() };
    for p in parts {
        let p = p?;
        total.requests += p.requests;
        total.keys += p.keys;
        total.hist.add(&p.hist).map_err(|e| format!("histogram: {e}"))?;
        total.errors.merge(p.errors);
    }
    Ok(total)
}

/// A request in flight: its keys (one, or [`MULTI`]) and whether it is a get.
struct Pending {
    keys: [u64; MULTI],
    n: usize,
    get: bool,
}

fn load_thread(
    addr: SocketAddr,
    mix: Mix,
    keys: u64,
    deadline: Instant,
    conns: usize,
    depth: usize,
    seed: u64,
) -> Result<Load, String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut cs: Vec<Conn> = (0..conns)
        .map(|_| Conn::connect(addr))
        .collect::<io::Result<_>>()
        .map_err(|e| format!("connect: {e}"))?;
    let mut pending: Vec<Vec<Pending>> = (0..conns).map(|_| Vec::with_capacity(depth)).collect();
    let mut sent = vec![Instant::now(); conns];
    let mut out = Vec::new();
    let mut hits = [false; MULTI];
    let mut r = Load { requests: 0, keys: 0, seconds: 0.0, hist: new_hist(), errors: Errors::default() };
    let len = match mix {
        Mix::GetSet { len, .. } | Mix::Multi { len } => len,
    };
    while Instant::now() < deadline {
        for c in 0..conns {
            out.clear();
            pending[c].clear();
            for _ in 0..depth {
                let mut p = Pending { keys: [0; MULTI], n: 1, get: true };
                match mix {
                    Mix::GetSet { get_percent, .. } => {
                        p.keys[0] = rng.random_range(0..keys);
                        p.get = rng.random_range(0..100) < get_percent;
                    }
                    Mix::Multi { .. } => {
                        p.n = MULTI;
                        p.keys.iter_mut().for_each(|k| *k = rng.random_range(0..keys));
                    }
                }
                if p.get {
                    out.extend_from_slice(b"get");
                    for &k in &p.keys[..p.n] {
                        out.push(b' ');
                        key(k, &mut out);
                    }
                    out.extend_from_slice(b"\r\n");
                } else {
                    push_set(p.keys[0], len, &mut out);
                }
                pending[c].push(p);
            }
            sent[c] = Instant::now();
            cs[c].send(&out).map_err(|e| format!("send: {e}"))?;
        }
        for c in 0..conns {
            for p in &pending[c] {
                if p.get {
                    cs[c]
                        .get_reply(&p.keys[..p.n], len, &mut hits[..p.n], &mut r.errors)
                        .map_err(|e| format!("get: {e}"))?;
                    for (k, h) in p.keys[..p.n].iter().zip(&hits) {
                        if !h {
                            r.errors.add(|| format!("a get of preloaded key dk:{k} missed (or was wrong)"));
                        }
                    }
                } else {
                    cs[c].stored().map_err(|e| format!("set: {e}"))?;
                }
                let ns = sent[c].elapsed().as_nanos() as u64;
                r.hist.saturating_record(ns.max(1));
                r.requests += 1;
                r.keys += p.n as u64;
            }
        }
    }
    Ok(r)
}

/// What a hit-ratio trace measured.
#[derive(Debug)]
pub struct HitRatio {
    /// Gets in the measured (second) half of the trace.
    pub gets: u64,
    /// Of which hits (with the right value).
    pub hits: u64,
    /// Requests (gets and sets) over the whole trace.
    pub requests: u64,
    /// Seconds for the whole trace.
    pub seconds: f64,
    /// Per-get latency, ns.
    pub hist: Histogram<u64>,
    /// Failed checks.
    pub errors: Errors,
}

/// For each key of `trace` in order: get it; on a miss, set it (values of
/// `len` bytes). One connection, `depth` gets in flight, then the sets of
/// that batch's misses: the same requests in the same order for every
/// server that answers alike. Hits are counted over the second half.
pub fn hit_ratio(addr: SocketAddr, trace: &[u32], len: usize, depth: usize) -> Result<HitRatio, String> {
    let mut conn = Conn::connect(addr).map_err(|e| format!("connect: {e}"))?;
    let half = trace.len() / 2;
    let mut r =
        HitRatio { gets: 0, hits: 0, requests: 0, seconds: 0.0, hist: new_hist(), errors: Errors::default() };
    let mut out = Vec::new();
    let mut misses = Vec::new();
    let mut hit = [false];
    let start = Instant::now();
    for (b, batch) in trace.chunks(depth).enumerate() {
        out.clear();
        for &k in batch {
            out.extend_from_slice(b"get ");
            key(k as u64, &mut out);
            out.extend_from_slice(b"\r\n");
        }
        let sent = Instant::now();
        conn.send(&out).map_err(|e| format!("send: {e}"))?;
        misses.clear();
        for (j, &k) in batch.iter().enumerate() {
            conn.get_reply(&[k as u64], len, &mut hit, &mut r.errors).map_err(|e| format!("get: {e}"))?;
            r.hist.saturating_record((sent.elapsed().as_nanos() as u64).max(1));
            if b * depth + j >= half {
                r.gets += 1;
                r.hits += hit[0] as u64;
            }
            if !hit[0] {
                misses.push(k);
            }
        }
        r.requests += batch.len() as u64 + misses.len() as u64;
        if !misses.is_empty() {
            out.clear();
            for &k in &misses {
                push_set(k as u64, len, &mut out);
            }
            conn.send(&out).map_err(|e| format!("send: {e}"))?;
            for _ in &misses {
                conn.stored().map_err(|e| format!("set: {e}"))?;
            }
        }
    }
    r.seconds = start.elapsed().as_secs_f64();
    Ok(r)
}

/// `stats` of the server: its `STAT name value` lines.
pub fn stats(addr: SocketAddr) -> Result<Vec<(String, String)>, String> {
    let mut conn = Conn::connect(addr).map_err(|e| format!("connect: {e}"))?;
    conn.send(b"stats\r\n").map_err(|e| format!("stats: {e}"))?;
    let mut v = Vec::new();
    loop {
        let l = conn.line().map_err(|e| format!("stats: {e}"))?;
        let line = String::from_utf8_lossy(&conn.buf[l]).into_owned();
        if line == "END" {
            return Ok(v);
        }
        let mut p = line.splitn(3, ' ');
        match (p.next(), p.next(), p.next()) {
            (Some("STAT"), Some(n), Some(val)) => v.push((n.to_string(), val.to_string())),
            _ => return Err(format!("stats: unexpected line {line:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;

    /// A fake server: a wrong value for key 1, the right one for key 2, a
    /// miss for anything else.
    fn fake() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut w = s.try_clone().unwrap();
            for line in BufReader::new(s).lines() {
                let line = line.unwrap();
                let mut reply = Vec::new();
                for k in line.split(' ').skip(1) {
                    if k == "dk:1" {
                        reply.extend_from_slice(b"VALUE dk:1 0 3\r\nabc\r\n");
                    } else if k == "dk:2" {
                        reply.extend_from_slice(b"VALUE dk:2 0 32\r\n");
                        value(2, 32, &mut reply);
                        reply.extend_from_slice(b"\r\n");
                    }
                }
                reply.extend_from_slice(b"END\r\n");
                w.write_all(&reply).unwrap();
            }
        });
        addr
    }

    #[test]
    fn wrong_values_and_misses_are_not_hits() {
        let mut c = Conn::connect(fake()).unwrap();
        let mut errors = Errors::default();
        let mut hits = [false; 3];
        c.send(b"get dk:1 dk:2 dk:3\r\n").unwrap();
        c.get_reply(&[1, 2, 3], 32, &mut hits, &mut errors).unwrap();
        assert_eq!(hits, [false, true, false]);
        assert_eq!(errors.count, 1, "{:?}", errors.first);
    }
}
