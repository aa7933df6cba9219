//! Server: memcached 1.6 against dlht-server over loopback, in interleaved
//! rounds (each workload: memcached, then dlht-server), each server a fresh
//! process pinned to the server cores with the same `-t` and `-m`, the load
//! pinned to the other cores.
//!
//! Workloads: `get90-32` and `get90-1k` (90% gets / 10% sets of preloaded
//! keys, 32-byte and 1 KiB values), `multiget16` (gets of 16 preloaded
//! keys), `set` (sets only, 32-byte values) and `hit-ratio` (a Zipf(0.99)
//! trace over more data than the server's small `-m`: get each key, set it
//! on a miss; the hit ratio of the trace's second half and the server's
//! `evictions`). Load: the study's own client ([`client`], every reply
//! parsed and every value checked) for all of them, and libmemcached's
//! `memcaslap` too for `get90-*` and `set`.
//!
//! Reported per run: throughput, p50 and p99 latency, the server's RSS
//! after the run and bytes per item; per workload the ratio dlht-server ÷
//! memcached per round and its median, beside the targets (get-heavy ≥
//! 1.5× at equal or lower p99, multi-get ≥ 2×, set-only ≥ 1.0×).

pub mod client;
pub mod memaslap;
mod plot;
pub mod procs;

use crate::harness::keys::ZipfTrace;
use crate::harness::machine::Machine;
use crate::harness::Spread;
use crate::studies::write;
use serde::Serialize;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Options of the server study.
#[derive(clap::Args, Clone, Debug)]
pub struct ServerArgs {
    /// Interleaved rounds (each workload: memcached, then dlht-server).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Seconds per load measurement (memcaslap: rounded, at least 1).
    #[arg(long, default_value_t = 5.0, value_parser = crate::compare::positive_seconds)]
    pub seconds: f64,
    /// Keys of the get, multi-get and set workloads (preloaded for gets).
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Server worker threads (`-t`), the same for both servers.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Server memory limit in MiB (`-m`) of the throughput workloads.
    #[arg(long, default_value_t = 2048)]
    pub memory: u64,
    /// Cores the servers run on (taskset list).
    #[arg(long, default_value = "0")]
    pub server_cores: String,
    /// Cores the load runs on (taskset list); one load thread per core.
    #[arg(long, default_value = "1")]
    pub load_cores: String,
    /// Connections per load thread (memcaslap: -c, in all).
    #[arg(long, default_value_t = 16)]
    pub conns: usize,
    /// Requests in flight per connection of the study's client.
    #[arg(long, default_value_t = 4)]
    pub depth: usize,
    /// Distinct keys of the hit-ratio trace.
    #[arg(long, default_value_t = 2_000_000)]
    pub hr_keys: u64,
    /// Length of the hit-ratio trace (gets).
    #[arg(long, default_value_t = 2_000_000)]
    pub hr_trace: usize,
    /// Server memory limit in MiB (`-m`) of the hit-ratio workload.
    #[arg(long, default_value_t = 64)]
    pub hr_memory: u64,
    /// Gets in flight in the hit-ratio trace (one connection).
    #[arg(long, default_value_t = 32)]
    pub hr_depth: usize,
    /// dlht-server eviction policies to compare in the hit-ratio workload
    /// (each run with DLHT_EVICTION set to it), comma-separated, e.g.
    /// `clock,sampled`. Default: one run with the variable unset.
    #[arg(long, value_delimiter = ',')]
    pub eviction_policies: Option<Vec<String>>,
    /// Workloads to run, comma-separated (default: all of get90-32,
    /// get90-1k, multiget16, set, hit-ratio).
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(WORKLOADS))]
    pub workloads: Option<Vec<String>>,
    /// The dlht-server binary (default: $CARGO_TARGET_DIR/release or
    /// target/release under the workspace; built if missing).
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// Seed of the key streams and of the hit-ratio trace.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Folder for server.csv, server.json and the processes' logs.
    #[arg(long, default_value = "target/dlht-bench-server")]
    pub out: PathBuf,
    /// Also run dlht-server with `-e DIR` (warm restart: items in a
    /// persistent byte map) beside the in-memory one.
    #[arg(long)]
    pub restartable: bool,
    /// Where `--restartable`'s item directories go (default: beside the
    /// logs in the output folder).
    #[arg(long)]
    pub restart_dir: Option<PathBuf>,
    /// A few seconds: 10^4 keys, 1 round, short runs and trace; still
    /// checks every reply.
    #[arg(long)]
    pub smoke: bool,
}

/// The workloads, in the order they run.
const WORKLOADS: [&str; 5] = ["get90-32", "get90-1k", "multiget16", "set", "hit-ratio"];

/// One server to start.
#[derive(Clone, Debug)]
struct Server {
    /// Its name in the results (`memcached`, `dlht-server`, `dlht-server[clock]`).
    name: String,
    /// memcached or not.
    memcached: bool,
    /// Environment it runs with.
    env: Vec<(String, String)>,
    /// Run with `-e DIR` (warm restart), a fresh directory per start.
    restartable: bool,
}

/// One measurement.
#[derive(Clone, Debug, Serialize)]
struct Row {
    round: u32,
    workload: &'static str,
    tool: &'static str,
    server: String,
    /// Requests per second (a multi-get is one).
    requests_per_s: f64,
    /// Keys per second (a multi-get counts 16).
    keys_per_s: f64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    avg_us: Option<f64>,
    rss_bytes: u64,
    items: u64,
    /// The server's `bytes` statistic (data it holds, as it counts it).
    data_bytes: u64,
    bytes_per_item: f64,
    hit_ratio: Option<f64>,
    evictions: Option<u64>,
    errors: u64,
}

/// A ratio dlht-server ÷ memcached for one workload and tool.
#[derive(Clone, Debug, Serialize)]
struct Ratio {
    workload: &'static str,
    tool: &'static str,
    server: String,
    per_round: Vec<f64>,
    median: f64,
    p99_memcached_us: Option<f64>,
    p99_server_us: Option<f64>,
    target: &'static str,
    met: Option<bool>,
}

/// Parsed settings after --smoke.
struct Plan {
    a: ServerArgs,
    bin: PathBuf,
    load_threads: usize,
    dir: PathBuf,
    /// Described before the study pins itself to the load cores.
    machine: Machine,
}

/// Number of cores in a taskset list ("1", "1,3", "2-5").
fn core_count(list: &str) -> Result<usize, String> {
    let mut n = 0;
    for part in list.split(',') {
        let bad = || format!("'{list}' is not a core list such as 1 or 1,2 or 2-5");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) =
                    (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
                if b < a {
                    return Err(bad());
                }
                n += b - a + 1;
            }
            None => {
                part.trim().parse::<usize>().map_err(|_| bad())?;
                n += 1;
            }
        }
    }
    Ok(n)
}

/// Run the study. True if a check failed (a wrong or missing value, a
/// protocol error, a server or tool that did not run).
pub fn run(mut a: ServerArgs) -> bool {
    if a.smoke {
        a.rounds = 1;
        a.seconds = 0.5;
        a.keys = 10_000;
        a.memory = 256;
        a.hr_keys = 100_000;
        a.hr_trace = 200_000;
        a.hr_memory = 4;
    }
    match prepare(a) {
        Ok(plan) => study(&plan),
        Err(e) => {
            eprintln!("dlht-bench server: {e}");
            true
        }
    }
}

fn prepare(a: ServerArgs) -> Result<Plan, String> {
    for tool in ["memcached", "memcaslap", "taskset"] {
        if !procs::have(tool) {
            return Err(format!(
                "{tool} is not installed (Debian: apt-get install memcached libmemcached-tools util-linux)"
            ));
        }
    }
    let load_threads = core_count(&a.load_cores)?;
    core_count(&a.server_cores)?;
    if a.keys < client::MULTI as u64
        || a.hr_keys == 0
        || a.hr_trace < 2
        || a.conns == 0
        || a.depth == 0
        || a.hr_depth == 0
    {
        return Err(
            "--keys (≥ 16), --hr-keys, --hr-trace (≥ 2), --conns, --depth and --hr-depth must be positive"
                .into(),
        );
    }
    let bin = procs::server_binary(a.server_bin.as_deref())?;
    let dir = a.out.clone();
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let machine = Machine::describe();
    procs::pin_self(&a.load_cores)?;
    Ok(Plan { a, bin, load_threads, dir, machine })
}

/// Start `s` with memory limit `mb` on a free port; wait for it to accept.
fn start(p: &Plan, s: &Server, mb: u64, tag: &str) -> Result<(procs::Guard, SocketAddr), String> {
    let port = procs::free_port()?;
    let (t, m, port_s) = (p.a.threads.to_string(), mb.to_string(), port.to_string());
    let mut cmd: Vec<String> = if s.memcached {
        [
            "memcached",
            "-u",
            "root",
            "-p",
            &port_s,
            "-l",
            "127.0.0.1",
            "-U",
            "0",
            "-t",
            &t,
            "-m",
            &m,
            "-c",
            "4096",
        ]
        .map(String::from)
        .to_vec()
    } else {
        vec![p.bin.to_string_lossy().into_owned()]
    };
    if !s.memcached {
        cmd.extend(["-p", &port_s, "-l", "127.0.0.1", "-t", &t, "-m", &m, "-c", "4096"].map(String::from));
    }
    if s.restartable {
        let dir = p.a.restart_dir.clone().unwrap_or_else(|| p.dir.clone()).join(format!("items-{tag}"));
        let _ = std::fs::remove_dir_all(&dir);
        cmd.extend(["-e".to_string(), dir.to_string_lossy().into_owned()]);
    }
    let log = p.dir.join(format!("{}-{tag}.log", s.name.replace(['[', ']'], "_")));
    let mut g = procs::spawn(&s.name, &p.a.server_cores, &cmd, &s.env, None, &log)?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    procs::wait_ready(&mut g, addr, &log)?;
    Ok((g, addr))
}

/// RSS, items and evictions of a running server.
fn after(g: &procs::Guard, addr: SocketAddr) -> Result<(u64, u64, u64, Option<u64>), String> {
    let st = client::stats(addr)?;
    let get = |n: &str| st.iter().find(|(k, _)| k == n).and_then(|(_, v)| v.parse::<u64>().ok());
    let rss = procs::rss(g.pid()).ok_or_else(|| format!("no RSS for {} (pid {})", g.name, g.pid()))?;
    Ok((rss, get("curr_items").unwrap_or(0), get("bytes").unwrap_or(0), get("evictions")))
}

fn us(h: &hdrhistogram::Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e3)
}

/// One workload against one server with one tool.
fn measure(p: &Plan, round: u32, w: &'static str, tool: &'static str, s: &Server) -> Result<Row, String> {
    let a = &p.a;
    let tag = format!("r{round}-{w}-{tool}");
    let hr = w == "hit-ratio";
    let (mut g, addr) = start(p, s, if hr { a.hr_memory } else { a.memory }, &tag)?;
    let mut row = Row {
        round,
        workload: w,
        tool,
        server: s.name.clone(),
        requests_per_s: 0.0,
        keys_per_s: 0.0,
        p50_us: None,
        p99_us: None,
        avg_us: None,
        rss_bytes: 0,
        items: 0,
        data_bytes: 0,
        bytes_per_item: 0.0,
        hit_ratio: None,
        evictions: None,
        errors: 0,
    };
    let len = if w == "get90-1k" { 1024 } else { 32 };
    let get_share = match w {
        "set" => 0.0,
        _ => 0.9,
    };
    let seed = a.seed ^ round as u64;
    let mut fail = None;
    if tool == "memcaslap" {
        let secs = a.seconds.round().max(1.0) as u64;
        let tag = format!("{}-{tag}", s.name);
        let r = memaslap::run(
            addr,
            get_share,
            len,
            a.keys,
            secs,
            p.load_threads,
            a.conns * p.load_threads,
            &a.load_cores,
            &p.dir,
            &tag,
        )?;
        row.requests_per_s = r.ops_per_s;
        row.keys_per_s = r.ops_per_s;
        (row.p50_us, row.p99_us, row.avg_us) = (r.p50_us, r.p99_us, r.avg_us);
        if r.ops == 0 {
            fail = Some("memcaslap completed no operation".to_string());
        }
    } else if hr {
        let trace = ZipfTrace::new(a.hr_keys, 0.99, a.hr_trace, a.seed)?;
        let r = client::hit_ratio(addr, trace.indexes(), 200, a.hr_depth)?;
        row.requests_per_s = r.requests as f64 / r.seconds;
        row.keys_per_s = row.requests_per_s;
        row.p50_us = us(&r.hist, 0.5);
        row.p99_us = us(&r.hist, 0.99);
        row.avg_us = Some(r.hist.mean() / 1e3);
        row.hit_ratio = Some(r.hits as f64 / r.gets.max(1) as f64);
        row.errors = r.errors.count;
        if r.errors.count > 0 {
            fail = Some(format!("{} failed checks: {}", r.errors.count, r.errors.first.join("; ")));
        }
    } else {
        let mix = match w {
            "multiget16" => client::Mix::Multi { len },
            "set" => client::Mix::GetSet { get_percent: 0, len },
            _ => client::Mix::GetSet { get_percent: 90, len },
        };
        if w != "set" {
            client::preload(addr, a.keys, len, 4, 64)?;
        }
        let r = client::load(addr, mix, a.keys, a.seconds, p.load_threads, a.conns, a.depth, seed)?;
        row.requests_per_s = r.requests as f64 / r.seconds;
        row.keys_per_s = r.keys as f64 / r.seconds;
        row.p50_us = us(&r.hist, 0.5);
        row.p99_us = us(&r.hist, 0.99);
        row.avg_us = Some(r.hist.mean() / 1e3);
        row.errors = r.errors.count;
        if r.errors.count > 0 {
            fail = Some(format!("{} failed checks: {}", r.errors.count, r.errors.first.join("; ")));
        }
        if r.requests == 0 {
            fail = Some("no request completed".into());
        }
    }
    let (rss, items, data, ev) = after(&g, addr)?;
    row.rss_bytes = rss;
    row.items = items;
    row.data_bytes = data;
    row.bytes_per_item = rss as f64 / items.max(1) as f64;
    row.evictions = ev;
    // Still alive? (A crash after the load would otherwise go unseen.)
    if g.wait_for(std::time::Duration::ZERO).is_some() {
        fail = Some(format!("{} exited during the run", s.name));
    }
    drop(g);
    match fail {
        Some(e) => {
            eprintln!("check failed: {w} / {tool} / {}: {e}", s.name);
            Err(format!("{e} (row: {row:?})"))
        }
        None => Ok(row),
    }
}

fn study(p: &Plan) -> bool {
    let a = &p.a;
    let machine = &p.machine;
    println!("# dlht-bench server: {}", machine.line());
    let meta = std::fs::metadata(&p.bin).ok().and_then(|m| m.modified().ok());
    let age = meta.and_then(|t| t.elapsed().ok()).map(|d| format!("{:.0} min old", d.as_secs_f64() / 60.0));
    println!(
        "# servers: memcached ({}) and {} ({}); -t {} -m {} MiB (hit-ratio: -m {} MiB) -c 4096, on cores {}; load on cores {} ({} thread(s) × {} connections × depth {}); {} keys, {} s per run, {} round(s)",
        version("memcached"),
        p.bin.display(),
        age.unwrap_or_default(),
        a.threads,
        a.memory,
        a.hr_memory,
        a.server_cores,
        a.load_cores,
        p.load_threads,
        a.conns,
        a.depth,
        a.keys,
        a.seconds,
        a.rounds
    );
    let memcached = Server { name: "memcached".into(), memcached: true, env: vec![], restartable: false };
    let dlht = Server { name: "dlht-server".into(), memcached: false, env: vec![], restartable: false };
    let dlht_e = Server { name: "dlht-server -e".into(), memcached: false, env: vec![], restartable: true };
    let policies: Vec<Server> = match &a.eviction_policies {
        None => vec![dlht.clone()],
        Some(v) => v
            .iter()
            .map(|pol| Server {
                name: format!("dlht-server[{pol}]"),
                memcached: false,
                env: vec![("DLHT_EVICTION".into(), pol.clone())],
                restartable: false,
            })
            .collect(),
    };
    let mut rows: Vec<Row> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for round in 0..a.rounds {
        for w in WORKLOADS {
            if a.workloads.as_ref().is_some_and(|v| !v.iter().any(|x| x == w)) {
                continue;
            }
            let tools: &[&'static str] = match w {
                "get90-32" | "get90-1k" | "set" => &["memcaslap", "client"],
                _ => &["client"],
            };
            for &tool in tools {
                let mut servers = vec![&memcached];
                if w == "hit-ratio" {
                    servers.extend(policies.iter());
                } else {
                    servers.push(&dlht);
                    if a.restartable {
                        servers.push(&dlht_e);
                    }
                }
                for s in servers {
                    eprint!("round {} {w} {tool} {} … ", round + 1, s.name);
                    match measure(p, round, w, tool, s) {
                        Ok(r) => {
                            eprintln!("{:.0} keys/s", r.keys_per_s);
                            rows.push(r);
                        }
                        Err(e) => {
                            eprintln!("FAILED");
                            failures.push(format!("round {} {w} {tool} {}: {e}", round + 1, s.name));
                        }
                    }
                }
            }
        }
    }
    report(p, machine, &rows);
    // The restartable runs' item directories (the servers are stopped).
    let items = a.restart_dir.clone().unwrap_or_else(|| p.dir.clone());
    for e in std::fs::read_dir(&items).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with("items-") {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
    for f in &failures {
        eprintln!("check failed: {f}");
    }
    !failures.is_empty()
}

/// The first line of `program -V`/`--version`.
fn version(program: &str) -> String {
    std::process::Command::new(program)
        .arg("-V")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().next().unwrap_or("").trim().to_string())
        .unwrap_or_default()
}

fn opt(v: Option<f64>, d: usize) -> String {
    v.map(|x| format!("{x:.d$}")).unwrap_or_else(|| "-".into())
}

fn report(p: &Plan, machine: &Machine, rows: &[Row]) {
    println!(
        "{:>5} {:<10} {:<9} {:<20} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>9} {:>6}",
        "round",
        "workload",
        "tool",
        "server",
        "kreq/s",
        "kkeys/s",
        "p50 µs",
        "p99 µs",
        "RSS MiB",
        "B/item",
        "items",
        "hit%",
        "evictions",
        "errors"
    );
    let mut csv = String::from(
        "round,workload,tool,server,requests_per_s,keys_per_s,p50_us,p99_us,avg_us,rss_bytes,items,data_bytes,bytes_per_item,hit_ratio,evictions,errors\n",
    );
    for r in rows {
        println!(
            "{:>5} {:<10} {:<9} {:<20} {:>10.1} {:>10.1} {:>8} {:>8} {:>8.1} {:>8.0} {:>9} {:>6} {:>9} {:>6}",
            r.round + 1,
            r.workload,
            r.tool,
            r.server,
            r.requests_per_s / 1e3,
            r.keys_per_s / 1e3,
            opt(r.p50_us, 1),
            opt(r.p99_us, 1),
            r.rss_bytes as f64 / (1 << 20) as f64,
            r.bytes_per_item,
            r.items,
            opt(r.hit_ratio.map(|h| h * 100.0), 2),
            r.evictions.map(|e| e.to_string()).unwrap_or_else(|| "-".into()),
            r.errors
        );
        let o = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
        let _ = writeln!(
            csv,
            "{},{},{},{},{:.1},{:.1},{},{},{},{},{},{},{:.1},{},{},{}",
            r.round + 1,
            r.workload,
            r.tool,
            r.server,
            r.requests_per_s,
            r.keys_per_s,
            o(r.p50_us),
            o(r.p99_us),
            o(r.avg_us),
            r.rss_bytes,
            r.items,
            r.data_bytes,
            r.bytes_per_item,
            o(r.hit_ratio),
            r.evictions.map(|e| e.to_string()).unwrap_or_default(),
            r.errors
        );
    }
    println!("# memcaslap: p50/p99 are upper bounds of its log2 buckets (coarse); the client: hdrhistogram, per request from its batch's send");
    let ratios = ratios(rows);
    println!();
    println!(
        "{:<10} {:<9} {:<20} {:>28} {:>7} {:>16} {:<28} {:>4}",
        "workload", "tool", "server", "÷ memcached per round", "median", "p99 µs mc→srv", "target", "met"
    );
    for r in &ratios {
        println!(
            "{:<10} {:<9} {:<20} {:>28} {:>7.2} {:>16} {:<28} {:>4}",
            r.workload,
            r.tool,
            r.server,
            r.per_round.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" "),
            r.median,
            format!("{}→{}", opt(r.p99_memcached_us, 0), opt(r.p99_server_us, 0)),
            r.target,
            match r.met {
                Some(true) => "yes",
                Some(false) => "no",
                None => "-",
            }
        );
    }
    // Hit ratios per server.
    let mut servers: Vec<&str> =
        rows.iter().filter(|r| r.workload == "hit-ratio").map(|r| r.server.as_str()).collect();
    servers.dedup();
    servers.sort();
    servers.dedup();
    for s in servers {
        let of = |f: fn(&Row) -> Option<f64>| {
            let v: Vec<f64> =
                rows.iter().filter(|r| r.workload == "hit-ratio" && r.server == s).filter_map(f).collect();
            Spread::of(&v)
        };
        println!(
            "# hit-ratio {s}: hit ratio of the trace's second half {} %, evictions {}, RSS {} MiB, data held {} MiB (`bytes`; -m {} MiB)",
            of(|r| r.hit_ratio.map(|h| h * 100.0)).map(|x| x.show(2)).unwrap_or_default(),
            of(|r| r.evictions.map(|e| e as f64)).map(|x| x.show(0)).unwrap_or_else(|| "-".into()),
            of(|r| Some(r.rss_bytes as f64 / (1 << 20) as f64)).map(|x| x.show(1)).unwrap_or_default(),
            of(|r| Some(r.data_bytes as f64 / (1 << 20) as f64)).map(|x| x.show(1)).unwrap_or_default(),
            p.a.hr_memory
        );
    }
    let mut rcsv =
        String::from("workload,tool,server,per_round,median,p99_memcached_us,p99_server_us,target,met\n");
    for r in &ratios {
        let _ = writeln!(
            rcsv,
            "{},{},{},{},{:.3},{},{},{},{}",
            r.workload,
            r.tool,
            r.server,
            r.per_round.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(" "),
            r.median,
            opt(r.p99_memcached_us, 1),
            opt(r.p99_server_us, 1),
            r.target,
            r.met.map(|m| m.to_string()).unwrap_or_default()
        );
    }
    #[derive(Serialize)]
    struct All<'a> {
        machine: &'a Machine,
        memcached: String,
        server_bin: String,
        args: String,
        rows: &'a [Row],
        ratios: &'a [Ratio],
    }
    let all = All {
        machine,
        memcached: version("memcached"),
        server_bin: p.bin.display().to_string(),
        args: format!("{:?}", p.a),
        rows,
        ratios: &ratios,
    };
    write(&p.dir, "server.csv", &csv);
    write(&p.dir, "server-ratios.csv", &rcsv);
    write(&p.dir, "server.json", &serde_json::to_string_pretty(&all).unwrap_or_default());
    match plot::write(&p.dir, &ratios, &machine.line(), p.a.threads) {
        Ok(files) => println!(
            "# plot: {}",
            files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
        ),
        Err(e) => println!("# note: no plot ({e})"),
    }
    println!("# results: {}", p.dir.display());
}

/// Per workload and tool: dlht-server (each variant) ÷ memcached, per round.
fn ratios(rows: &[Row]) -> Vec<Ratio> {
    let mut out = Vec::new();
    let mut keys: Vec<(&'static str, &'static str, &str)> = rows
        .iter()
        .filter(|r| r.server != "memcached")
        .map(|r| (r.workload, r.tool, r.server.as_str()))
        .collect();
    keys.dedup();
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(*k));
    for (w, tool, server) in keys {
        let find = |s: &str, round: u32| {
            rows.iter().find(|r| r.workload == w && r.tool == tool && r.server == s && r.round == round)
        };
        let mut per = Vec::new();
        let (mut p99m, mut p99s) = (Vec::new(), Vec::new());
        for round in 0..=rows.iter().map(|r| r.round).max().unwrap_or(0) {
            if let (Some(m), Some(s)) = (find("memcached", round), find(server, round)) {
                if m.keys_per_s > 0.0 {
                    per.push(s.keys_per_s / m.keys_per_s);
                }
                p99m.extend(m.p99_us);
                p99s.extend(s.p99_us);
            }
        }
        let Some(median) = Spread::of(&per).map(|s| s.median) else { continue };
        let med = |v: &[f64]| Spread::of(v).map(|s| s.median);
        let (pm, ps) = (med(&p99m), med(&p99s));
        let lower_p99 = match (pm, ps) {
            (Some(m), Some(s)) => s <= m,
            _ => true,
        };
        let (target, met) = match w {
            "get90-32" | "get90-1k" => ("≥ 1.5× at equal or lower p99", Some(median >= 1.5 && lower_p99)),
            "multiget16" => ("≥ 2× (keys/s)", Some(median >= 2.0)),
            "set" => ("≥ 1.0×", Some(median >= 1.0)),
            _ => ("(throughput of the trace)", None),
        };
        out.push(Ratio {
            workload: w,
            tool,
            server: server.to_string(),
            per_round: per,
            median,
            p99_memcached_us: pm,
            p99_server_us: ps,
            target,
            met,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn core_lists() {
        assert_eq!(super::core_count("1").unwrap(), 1);
        assert_eq!(super::core_count("1,3").unwrap(), 2);
        assert_eq!(super::core_count("2-5").unwrap(), 4);
        assert!(super::core_count("x").is_err());
        assert!(super::core_count("3-1").is_err());
    }

    #[test]
    fn values_depend_on_the_key() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        super::client::value(1, 40, &mut a);
        super::client::value(2, 40, &mut b);
        assert_eq!(a.len(), 40);
        assert_ne!(a, b);
    }
}
