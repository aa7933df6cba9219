//! The server over loopback: round trips, pipelining, split writes,
//! concurrency, clients that leave or never read, start-up errors and the
//! binary's command line. Every socket has a read timeout and every server
//! is shut down, so a failure cannot hang the suite.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use dlht_server::config::Config;
use dlht_server::server::{self, Running};

const TIMEOUT: Duration = Duration::from_secs(5);

fn config() -> Config {
    Config { port: 0, threads: 2, ..Config::default() }
}

fn start() -> Running {
    server::start(&config()).expect("server starts")
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.set_write_timeout(Some(TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Reads exactly `n` bytes.
fn read_n(s: &mut impl Read, n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    let started = Instant::now();
    if let Err(e) = s.read_exact(&mut buf) {
        panic!("no reply after {:?}: {e}", started.elapsed());
    }
    buf
}

fn read_str(s: &mut impl Read, n: usize) -> String {
    String::from_utf8(read_n(s, n)).unwrap()
}

/// Sends `request` and reads exactly `expected.len()` bytes, which must be
/// `expected`.
fn roundtrip(s: &mut TcpStream, request: &str, expected: &str) {
    s.write_all(request.as_bytes()).unwrap();
    assert_eq!(read_str(s, expected.len()), expected, "reply to {request:?}");
}

#[test]
fn set_get_round_trip() {
    let server = start();
    let mut c = connect(server.local_addr());
    roundtrip(&mut c, "set k 5 0 3\r\nabc\r\n", "STORED\r\n");
    roundtrip(&mut c, "get k\r\n", "VALUE k 5 3\r\nabc\r\nEND\r\n");
    roundtrip(&mut c, "get missing\r\n", "END\r\n");
    roundtrip(&mut c, "bogus\r\n", "ERROR\r\n");
    assert!(server.store().counters().total_connections.load(Ordering::SeqCst) >= 1);
    server.shutdown();
}

#[test]
fn many_commands_in_one_write() {
    let server = start();
    let mut c = connect(server.local_addr());
    roundtrip(
        &mut c,
        "set a 0 0 1\r\n1\r\nset b 0 0 2\r\n22\r\nincr a 5\r\nget a b\r\ndelete b\r\nget b\r\n",
        "STORED\r\nSTORED\r\n6\r\nVALUE a 0 1\r\n6\r\nVALUE b 0 2\r\n22\r\nEND\r\nDELETED\r\nEND\r\n",
    );
    server.shutdown();
}

#[test]
fn command_split_byte_by_byte() {
    let server = start();
    let mut c = connect(server.local_addr());
    for b in b"set split 0 0 5\r\nhello\r\nget split\r\n" {
        c.write_all(&[*b]).unwrap();
        c.flush().unwrap();
    }
    let expected = "STORED\r\nVALUE split 0 5\r\nhello\r\nEND\r\n";
    assert_eq!(read_str(&mut c, expected.len()), expected);
    server.shutdown();
}

#[test]
fn too_large_value_is_swallowed_across_writes() {
    let server = server::start(&Config { max_item_size: 2048, ..config() }).unwrap();
    let mut c = connect(server.local_addr());
    c.write_all(b"set big 0 0 5000\r\n").unwrap();
    let data = vec![b'x'; 5000];
    for chunk in data.chunks(700) {
        c.write_all(chunk).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    roundtrip(&mut c, "\r\nget big\r\n", "SERVER_ERROR object too large for cache\r\nEND\r\n");
    roundtrip(&mut c, "set small 0 0 1\r\ns\r\nget small\r\n", "STORED\r\nVALUE small 0 1\r\ns\r\nEND\r\n");
    server.shutdown();
}

#[test]
fn large_values_round_trip() {
    let server = start();
    let mut c = connect(server.local_addr());
    let value: String = (0..1_000_000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    roundtrip(&mut c, &format!("set large 0 0 {}\r\n{value}\r\n", value.len()), "STORED\r\n");
    let expected = format!("VALUE large 0 {}\r\n{value}\r\nEND\r\n", value.len());
    roundtrip(&mut c, &"get large\r\n".repeat(20), &expected.repeat(20));
    server.shutdown();
}

#[test]
fn connection_counters_move() {
    let server = start();
    let counters = &server.store().counters();
    let total = counters.total_connections.load(Ordering::SeqCst);
    let mut a = connect(server.local_addr());
    let mut b = connect(server.local_addr());
    roundtrip(&mut a, "get x\r\n", "END\r\n");
    roundtrip(&mut b, "get x\r\n", "END\r\n");
    assert_eq!(counters.curr_connections.load(Ordering::SeqCst), 2);
    assert_eq!(counters.total_connections.load(Ordering::SeqCst), total + 2);
    drop(a);
    let deadline = Instant::now() + TIMEOUT;
    while counters.curr_connections.load(Ordering::SeqCst) != 1 {
        assert!(Instant::now() < deadline, "curr_connections never dropped");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(b);
    server.shutdown();
}

#[test]
fn multi_get_of_100_keys() {
    let server = start();
    let mut c = connect(server.local_addr());
    let mut sets = String::new();
    let mut stored = String::new();
    let mut get = String::from("get");
    let mut values = String::new();
    for i in 0..100 {
        sets += &format!("set key{i} {i} 0 {}\r\nvalue{i}\r\n", format!("value{i}").len());
        stored += "STORED\r\n";
        get += &format!(" key{i}");
        values += &format!("VALUE key{i} {i} {}\r\nvalue{i}\r\n", format!("value{i}").len());
    }
    roundtrip(&mut c, &sets, &stored);
    roundtrip(&mut c, &(get + "\r\n"), &(values + "END\r\n"));
    server.shutdown();
}

#[test]
fn quit_closes_after_replies() {
    let server = start();
    let mut c = connect(server.local_addr());
    c.write_all(b"set q 0 0 1\r\nx\r\nquit\r\nget q\r\n").unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).expect("closed in time");
    assert_eq!(all, b"STORED\r\n");
    server.shutdown();
}

#[test]
fn concurrent_clients() {
    let server = start();
    let addr = server.local_addr();
    let clients: Vec<_> = (0..200)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = connect(addr);
                for i in 0..100 {
                    let value = format!("{t}-{i}");
                    let set = format!("set c{t} 0 0 {}\r\n{value}\r\n", value.len());
                    roundtrip(&mut c, &set, "STORED\r\n");
                    let get = format!("VALUE c{t} 0 {}\r\n{value}\r\nEND\r\n", value.len());
                    roundtrip(&mut c, &format!("get c{t}\r\n"), &get);
                }
            })
        })
        .collect();
    for client in clients {
        client.join().expect("client thread");
    }
    server.shutdown();
}

#[test]
fn client_leaving_mid_data_block_does_not_disturb_others() {
    let server = start();
    let mut other = connect(server.local_addr());
    roundtrip(&mut other, "set o 0 0 2\r\nok\r\n", "STORED\r\n");
    {
        let mut leaver = connect(server.local_addr());
        leaver.write_all(b"set gone 0 0 100\r\nonly part of it").unwrap();
        leaver.shutdown(Shutdown::Both).unwrap();
    }
    roundtrip(&mut other, "get o gone\r\n", "VALUE o 0 2\r\nok\r\nEND\r\n");
    // The server notices the close and forgets the connection.
    let deadline = Instant::now() + TIMEOUT;
    while server.store().counters().curr_connections.load(Ordering::SeqCst) != 1 {
        assert!(Instant::now() < deadline, "connection count never dropped");
        std::thread::sleep(Duration::from_millis(10));
    }
    server.shutdown();
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[test]
fn client_that_never_reads_is_not_read_either() {
    let server = start();
    let mut setter = connect(server.local_addr());
    let value = "v".repeat(10_000);
    roundtrip(&mut setter, &format!("set big 0 0 {}\r\n{value}\r\n", value.len()), "STORED\r\n");
    let before = rss_bytes();

    // A pipeline of gets whose replies (10 KB each) it never reads: the
    // server must stop reading it once its output backs up, so our writes
    // stop going through.
    let hog = connect(server.local_addr());
    hog.set_write_timeout(Some(Duration::from_millis(500))).unwrap();
    let writer = {
        let mut hog = hog.try_clone().unwrap();
        std::thread::spawn(move || {
            let chunk = "get big\r\n".repeat(10_000);
            let mut sent = 0usize;
            // At most 2 GB of replies' worth; stops at the first timeout.
            while sent < 200 * chunk.len() {
                match hog.write_all(chunk.as_bytes()) {
                    Ok(()) => sent += chunk.len(),
                    Err(_) => break,
                }
            }
            sent
        })
    };
    let sent = writer.join().unwrap();
    assert!(sent < 200 * "get big\r\n".len() * 10_000, "the server kept reading");

    // Others still get answers promptly.
    let started = Instant::now();
    let mut c = connect(server.local_addr());
    roundtrip(&mut c, "get nothing\r\n", "END\r\n");
    assert!(started.elapsed() < Duration::from_secs(2));
    let grown = rss_bytes().saturating_sub(before);
    assert!(grown < 256 << 20, "RSS grew by {grown} bytes");
    drop(hog);
    server.shutdown();
}

#[test]
fn taken_port_is_an_error() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let err = server::start(&Config { port, ..config() }).err().expect("start fails");
    assert_eq!(err.to_string(), format!("failed to listen on 127.0.0.1:{port}: Address already in use"));
}

#[test]
fn connections_over_the_limit_are_refused() {
    let server = server::start(&Config { conn_limit: 2, ..config() }).unwrap();
    let mut a = connect(server.local_addr());
    let mut b = connect(server.local_addr());
    roundtrip(&mut a, "get x\r\n", "END\r\n");
    roundtrip(&mut b, "get x\r\n", "END\r\n");
    let mut c = connect(server.local_addr());
    let mut all = Vec::new();
    c.read_to_end(&mut all).expect("closed in time");
    assert_eq!(all, b"ERROR Too many open connections\r\n");
    roundtrip(&mut a, "get x\r\n", "END\r\n");
    server.shutdown();
}

#[test]
fn shutdown_releases_the_port() {
    let server = start();
    let addr = server.local_addr();
    let mut c = connect(addr);
    roundtrip(&mut c, "get x\r\n", "END\r\n");
    server.shutdown();
    let mut all = Vec::new();
    let _ = c.read_to_end(&mut all);
    assert!(all.is_empty());
    TcpListener::bind(addr).expect("port free after shutdown");
}

/// Kills and reaps a child process however the test ends.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn binary_help_and_bad_flags() {
    let bin = env!("CARGO_BIN_EXE_dlht-server");
    let help = Command::new(bin).arg("--help").output().unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--max-item-size"));
    let version = Command::new(bin).arg("--version").output().unwrap();
    assert!(version.status.success());
    for bad in [&["--bogus"][..], &["-p", "notaport"], &["-I", "10"], &["-m", "1", "-I", "1m"]] {
        let out = Command::new(bin).args(bad).output().unwrap();
        assert!(!out.status.success(), "{bad:?} accepted");
        assert!(!out.stderr.is_empty(), "{bad:?}: no message");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
}

#[test]
fn binary_serves() {
    let bin = env!("CARGO_BIN_EXE_dlht-server");
    // Port 0 and -v: the server names the port it got, so no other test
    // can take it in between.
    let mut child = Command::new(bin)
        .args(["-p", "0", "-t", "1", "-v"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _guard = ChildGuard(child);
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).unwrap();
    let addr: SocketAddr = line
        .split_whitespace()
        .find_map(|word| word.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let mut c = connect_retrying(addr);
    roundtrip(&mut c, "set k 0 0 1\r\nv\r\n", "STORED\r\n");
    roundtrip(&mut c, "get k\r\n", "VALUE k 0 1\r\nv\r\nEND\r\n");
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn connect_retrying(addr: SocketAddr) -> TcpStream {
    try_connect(addr).unwrap_or_else(|| panic!("no server on {addr}"))
}

/// Connects to a server that is starting, for up to [`TIMEOUT`].
fn try_connect(addr: SocketAddr) -> Option<TcpStream> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Ok(s) = TcpStream::connect(addr) {
            s.set_read_timeout(Some(TIMEOUT)).unwrap();
            s.set_write_timeout(Some(TIMEOUT)).unwrap();
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `request` and then `version` (whose reply marks the end of the
/// request's replies; both servers send one) and returns the replies before
/// the `VERSION` line.
fn exchange(r: &mut BufReader<TcpStream>, request: &[u8]) -> String {
    r.get_mut().write_all(request).unwrap();
    // Ask for a marker after the request so we know where its reply ends.
    r.get_mut().write_all(b"version\r\n").unwrap();
    let mut reply = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return reply + "<closed>";
        }
        if line.starts_with("VERSION ") {
            return reply;
        }
        reply += &line;
    }
}

/// Replaces the cas unique of `VALUE` lines with "<cas>" and the version
/// with "<version>".
fn normalize(reply: &str) -> String {
    reply
        .split_inclusive("\r\n")
        .map(|line| {
            let words: Vec<&str> = line.trim_end().split(' ').collect();
            if words[0] == "VALUE" && words.len() == 5 {
                format!("VALUE {} {} {} <cas>\r\n", words[1], words[2], words[3])
            } else if words[0] == "VERSION" {
                "VERSION <version>\r\n".into()
            } else {
                line.to_string()
            }
        })
        .collect()
}

#[test]
fn same_replies_as_memcached() {
    let memcached = "/usr/bin/memcached";
    if !std::path::Path::new(memcached).exists() {
        eprintln!("note: {memcached} not found; differential test skipped");
        return;
    }
    let port = free_port();
    let child = Command::new(memcached)
        .args(["-U", "0", "-l", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-u", "root"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = ChildGuard(child);
    let server = start();
    let Some(theirs) = try_connect(SocketAddr::from(([127, 0, 0, 1], port))) else {
        eprintln!("note: {memcached} did not start; differential test skipped");
        return;
    };
    let mut theirs = BufReader::new(theirs);
    let mut ours = BufReader::new(connect(server.local_addr()));
    // Make sure the other end really is memcached.
    theirs.get_mut().write_all(b"version\r\n").unwrap();
    let mut line = String::new();
    theirs.read_line(&mut line).unwrap();
    eprintln!("differential test against memcached: {}", line.trim_end());
    if !line.starts_with("VERSION 1.") || line.contains("dlht") {
        // Its port was taken in between (by a server of another test).
        eprintln!("note: {memcached} did not start; differential test skipped");
        return;
    }
    let sequences: &[&[u8]] = &[
        b"set a 1 0 3\r\nabc\r\n",
        b"get a\r\n",
        b"gets a\r\n",
        b"add a 0 0 1\r\nx\r\n",
        b"add b 0 0 1\r\n5\r\n",
        b"replace c 0 0 1\r\nx\r\n",
        b"append a 0 0 2\r\nde\r\n",
        b"prepend a 0 0 2\r\nzz\r\n",
        b"get a b c\r\n",
        b"incr b 10\r\ndecr b 100\r\nincr a 1\r\nincr nope 1\r\n",
        b"touch a 100\r\ntouch nope 1\r\n",
        b"delete a\r\ndelete a\r\n",
        b"cas b 0 0 1 1\r\nx\r\n",
        b"set n 0 0 1 noreply\r\nn\r\nget n\r\n",
        b"bogus command\r\n",
        b"get\r\n",
        b"set k 0 0 notanumber\r\n",
        b"set toolong 0 0 2\r\nabcd\r\n",
        b"verbosity 1\r\n",
        b"flush_all\r\nget b\r\n",
    ];
    for request in sequences {
        let expected = normalize(&exchange(&mut theirs, request));
        let got = normalize(&exchange(&mut ours, request));
        assert_eq!(got, expected, "replies to {:?}", String::from_utf8_lossy(request));
    }
    server.shutdown();
}
