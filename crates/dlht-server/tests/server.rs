//! The server over loopback: round trips, pipelining, split writes,
//! concurrency, clients that leave or never read, start-up errors and the
//! binary's command line. Every socket has a read timeout and every server
//! is shut down, so a failure cannot hang the suite.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use dlht_server::config::Config;
use dlht_server::server::{self, Running};

mod common;
use common::{connect, read_n, read_through, TIMEOUT};
mod process;
use process::{free_port, run_with_limit, server_command, ChildGuard, Server};

fn config() -> Config {
    Config { port: 0, threads: 2, ..Config::default() }
}

fn start() -> Running {
    server::start(&config()).expect("server starts")
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
    // can take it in between. No -l: the default interfaces.
    let server = Server::spawn(Command::new(bin).args(["-p", "0", "-t", "1", "-v"]));
    let mut c = connect_retrying(server.addr);
    roundtrip(&mut c, "set k 0 0 1\r\nv\r\n", "STORED\r\n");
    roundtrip(&mut c, "get k\r\n", "VALUE k 0 1\r\nv\r\nEND\r\n");
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
        // Digits then a NUL byte: a number to memcached (its data is a C
        // string), rewritten in place with a space over the NUL.
        b"set z 0 0 2\r\n1\0\r\nincr z 1\r\nget z\r\nset y 0 0 2\r\n1a\r\nincr y 1\r\n",
        // ma reads the data as a C string too.
        b"set n 0 0 3\r\n12\0\r\nma n\r\nmg n v\r\n",
        // h: whether the item was fetched before this request.
        b"set h 0 0 1\r\nv\r\nmg h h\r\nmg h h v\r\nset h 0 0 1\r\nw\r\nmg h s h\r\nget h\r\nmg h h\r\n",
    ];
    // A store refused as too large (over -I, 1 MiB): a set, and an ms in
    // any mode, takes the old item with it (memcached's t/getset.t: "Ensure
    // causing a memory overflow doesn't leave stale data"); add, replace,
    // append, prepend and cas leave it.
    let big = vec![b'x'; 1100 * 1024];
    let too_large = |line: &str| [b"set t 0 0 1\r\nv\r\n", line.as_bytes(), &big, b"\r\nget t\r\n"].concat();
    let n = big.len();
    let mut requests: Vec<Vec<u8>> = sequences.iter().map(|s| s.to_vec()).collect();
    for line in [
        format!("set t 0 0 {n}\r\n"),
        format!("set t 0 0 {n} noreply\r\n"),
        format!("add t 0 0 {n}\r\n"),
        format!("replace t 0 0 {n}\r\n"),
        format!("append t 0 0 {n}\r\n"),
        format!("cas t 0 0 {n} 1\r\n"),
        format!("ms t {n}\r\n"),
        format!("ms t {n} ME\r\n"),
        format!("ms t {n} MA q\r\n"),
    ] {
        requests.push(too_large(&line));
    }
    // A gat with a key over 250 bytes after others: memcached touches those
    // before it, then answers only the error.
    let long = "k".repeat(251);
    // (The set goes alone: memcached's error also drops the replies of
    // earlier commands of the same read, STORED included.)
    requests.push(b"set g 0 0 1\r\nv\r\n".to_vec());
    requests.push(format!("gat 100 g nope {long} g\r\nmg g t\r\n").into_bytes());
    // Stale-while-revalidate: md I and ms I (an older cas) mark an item
    // stale; its first mg wins the token ("X W"), later ones see it taken
    // ("Z X"); a vivify (N) and a recache (R) hand it out once too. A new
    // item (set, append, a number that grew) starts fresh; a touch, gat and
    // an in-place incr keep the marks.
    requests.push(b"ms s 1 T100 c\r\nx\r\nms s 1 I C1 c T5\r\ny\r\nmg s v t\r\nmg s v t\r\n".to_vec());
    requests.push(
        b"ms w 2 T50 F3\r\nhi\r\nmd w I T30 k\r\nmg w v f\r\nmg w v f\r\nmd w I\r\nmg w\r\nmg w\r\n".to_vec(),
    );
    requests
        .push(b"ms w 1 I C2\r\nz\r\nmg w v\r\nmg new N30 s t v\r\nmg new s t v\r\nmg new N30 v\r\n".to_vec());
    requests.push(b"ms r 1 T100\r\nx\r\nmg r R200 t\r\nmg r R200 t\r\nmg r t\r\n".to_vec());
    requests.push(
        b"ms st 1\r\n9\r\nmd st I\r\nma st v\r\nmg st v\r\nmd st I\r\nms st 1 MA\r\n1\r\nmg st v\r\n"
            .to_vec(),
    );
    requests.push(
        b"md st I\r\ntouch st 100\r\nmg st v\r\nmd st I\r\nmg st T10 v\r\ngat 100 st\r\nmg st v\r\n".to_vec(),
    );
    requests.push(
        b"set st 0 0 1\r\n1\r\nmd st I\r\nincr st 1\r\nmg st v\r\nincr st 1000000\r\nmg st v\r\n".to_vec(),
    );
    // Whether a get found the item (mg h, me fetch=): a touch, gat, mg T
    // and mg itself mark it (not with u, nor a vivify answered an error);
    // md I and an incr in place keep the mark, a number that grew drops it.
    requests.push(
        b"set f1 0 0 1\r\nx\r\ntouch f1 100\r\nme f1\r\nset f2 0 0 1\r\nx\r\ngat 100 f2\r\nmg f2 h\r\n"
            .to_vec(),
    );
    requests.push(
        b"set f3 0 0 1\r\nx\r\nmg f3 T100 u\r\nme f3\r\nmg f3 u\r\nme f3\r\nmg f4 N100\r\nme f4\r\n".to_vec(),
    );
    requests
        .push(b"set f5 0 0 1\r\n5\r\nget f5\r\nincr f5 1\r\nmg f5 h\r\nincr f5 100\r\nmg f5 h\r\n".to_vec());
    requests.push(b"set f6 0 0 1\r\n5\r\nget f6\r\nmd f6 I\r\nme f6\r\nma f6\r\nme f6\r\n".to_vec());
    // A key stored by an ms with b is given back in base64 (mg k, me),
    // whatever the request; a plain store, an append or a vivify forgets it.
    requests.push(b"ms Zm9v 2 b\r\nhi\r\nmg foo k v\r\nme foo\r\nms foo 2\r\nhi\r\nmg Zm9v b k\r\n".to_vec());
    requests.push(b"mg YmFy b N10 k\r\nmg bar k\r\nma YmF6 b N0 k\r\nmg baz k\r\nms cXV4 2 b\r\nhi\r\nappend qux 0 0 1\r\nx\r\nmg qux k\r\n".to_vec());
    requests.push(b"ms Y29y 1 b\r\n5\r\nincr cor 1\r\nmg cor k\r\nincr cor 100\r\nmg cor k\r\nset plain 0 0 1\r\nx\r\nmg cGxhaW4= b k\r\nme cGxhaW4= b\r\n".to_vec());
    // An opaque over 32 bytes: mg and ma find it after they acted (a
    // vivify, the flags before it, a delta), md before.
    let o33 = format!("O{}", "x".repeat(32));
    requests.push(
        format!("mg miss {o33}\r\nmg miss {o33} q\r\nmg viv N30 {o33} t v\r\nmg viv t v\r\n").into_bytes(),
    );
    requests.push(
        format!("mg viv2 {o33} N30 t\r\nmg viv2 t v\r\nms h 1 T100\r\nx\r\nmg h T50 {o33} t\r\nmg h t\r\n")
            .into_bytes(),
    );
    requests.push(
        format!("mg h {o33} T20 t\r\nmg h t\r\nms n 1\r\n5\r\nma n {o33} v\r\nmg n v\r\n").into_bytes(),
    );
    requests
        .push(format!("ma zz {o33}\r\nma zn N0 {o33}\r\nmg zn v\r\nmd n {o33}\r\nmg n v\r\n").into_bytes());
    for request in &requests {
        let expected = normalize(&exchange(&mut theirs, request));
        let got = normalize(&exchange(&mut ours, request));
        assert_eq!(got, expected, "replies to {:?}", String::from_utf8_lossy(request));
    }
    server.shutdown();
}

/// A file under the temporary directory, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, contents: &[u8]) -> Self {
        let path = std::env::temp_dir().join(format!("dlht-server-{}-{name}", std::process::id()));
        std::fs::write(&path, contents).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Reads whatever arrives until the connection is quiet for `quiet` (or
/// closes): the bytes, and whether it closed.
fn read_until_quiet(s: &mut TcpStream, quiet: Duration) -> (Vec<u8>, bool) {
    s.set_read_timeout(Some(quiet)).unwrap();
    let mut all = Vec::new();
    let mut buf = [0; 65536];
    let closed = loop {
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                break false
            }
            Err(_) => break true,
        }
    };
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    (all, closed)
}

/// Sends `step` and reads its reply: from memcached until it is quiet, from
/// us exactly as many bytes (then whether we closed too).
fn auth_step(theirs: &mut TcpStream, ours: &mut TcpStream, step: &[u8]) -> (String, String) {
    let shown = |b: &[u8], closed: bool| {
        let text = normalize(&String::from_utf8_lossy(b));
        if closed {
            text + "<closed>"
        } else {
            text
        }
    };
    // A write into a connection the server closed may fail; the reply
    // (or the close) is what is compared.
    let _ = theirs.write_all(step);
    let (expected, their_close) = read_until_quiet(theirs, Duration::from_millis(150));
    let _ = ours.write_all(step);
    let mut got = vec![0; expected.len()];
    let got = match ours.read_exact(&mut got) {
        Ok(()) => got,
        Err(_) => read_until_quiet(ours, Duration::from_millis(10)).0,
    };
    let our_close = if their_close {
        read_until_quiet(ours, Duration::from_secs(2)).1
    } else {
        read_until_quiet(ours, Duration::from_millis(10)).1
    };
    (shown(&got, our_close), shown(&expected, their_close))
}

/// Starts `memcached -Y file` on a free port; `None` (and a note) if it is
/// not installed or does not start.
fn start_memcached(args: &[&str]) -> Option<(ChildGuard, SocketAddr)> {
    let memcached = "/usr/bin/memcached";
    if !std::path::Path::new(memcached).exists() {
        eprintln!("note: {memcached} not found; differential test skipped");
        return None;
    }
    let port = free_port();
    let child = Command::new(memcached)
        .args(["-U", "0", "-l", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-u", "root"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let guard = ChildGuard(child);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    match try_connect(addr) {
        Some(_) => Some((guard, addr)),
        None => {
            eprintln!("note: {memcached} did not start; differential test skipped");
            None
        }
    }
}

#[test]
fn authentication_same_replies_as_memcached() {
    let file = TempFile::new("auth", b"alice:secret\r\nbob:pw2\ncarol:a:b\n");
    let Some((_memcached, their_addr)) = start_memcached(&["-Y", file.0.to_str().unwrap()]) else {
        return;
    };
    let server = server::start(&Config { auth_file: Some(file.0.clone()), ..config() }).unwrap();
    // Each scenario on a fresh connection; each step is sent on its own and
    // its reply awaited (memcached keeps only the last reply of the
    // unauthenticated commands it reads at once: see OBSERVED.md).
    let long_line = vec![b'k'; 2049];
    let big_login = [&b"set x 0 0 16383\r\n"[..], &vec![b'a'; 16383], b"\r\n"].concat();
    let ok_login = [&b"set x 0 0 16382\r\n"[..], &vec![b'a'; 16382], b"\r\n"].concat();
    let scenarios: &[&[&[u8]]] = &[
        // A good login; then everything works, a second "login" is a set.
        &[
            b"set x 0 0 12\r\nalice secret\r\n",
            b"get x\r\n",
            b"set y 0 0 12\r\nalice wrong!\r\n",
            b"get y\r\n",
        ],
        // Wrong password, unknown user, wrong case: then a good login.
        &[
            b"set x 0 0 12\r\nalice wrong!\r\n",
            b"set x 0 0 10\r\nnobody pw2\r\n",
            b"set x 0 0 7\r\nBOB pw2\r\n",
            b"get x\r\n",
            b"set x 0 0 7\r\nbob pw2\r\n",
            b"version\r\n",
        ],
        // Commands before logging in.
        &[b"get x\r\n", b"version\r\n", b"quit\r\n", b"bogus\r\n", b"\r\n", b"stats\r\n", b"mn\r\n"],
        &[b"add x 0 0 12\r\nalice secret\r\n", b"cas x 0 0 12 1\r\n", b"ms x 7\r\n", b"set x 0 0\r\n"],
        &[b"set x 0 0 abc\r\n", b"set x 0 0 -1\r\n", b"set\tx 0 0 7\r\n", b"\x80\r\n"],
        // Malformed data blocks.
        &[b"set x 0 0 11\r\nalicesecret\r\n", b"set x 0 0 0\r\n\r\n", b"set x 0 0 12\r\nalice:secret\r\n"],
        &[b"set x 0 0 7\r\nbob pw2XX", b"set x 0 0 8\r\nbob pw2\n\r\n", b"set x 0 0 7\r\nbob\0pw2\r\n"],
        // noreply is ignored; key, flags, exptime and extra tokens too.
        &[b"set x 0 0 12 noreply\r\nalice wrong!\r\n", b"set x 0 0 12 noreply\r\nalice secret\r\n"],
        &[b"set a-key 77 -5 9 extra\r\nbob pw2 z\r\n", b"get a-key\r\n"],
        &[b"  set x 0 0 13\nalice  secret\r\n", b"get x\r\n"],
        &[b"set x 0 0 9\r\ncarol a:b\r\n", b"get x\r\n"],
        // Split across writes.
        &[b"set x 0 0 7\r\n", b"bob ", b"pw2\r", b"\n", b"get x\r\n"],
        &[b"\n", b"version\r\n"],
        // Too much before logging in: closed.
        &[&long_line],
        &[&big_login],
        &[&ok_login, b"set x 0 0 7\r\nbob pw2\r\n"],
    ];
    for scenario in scenarios {
        let mut theirs = connect(their_addr);
        let mut ours = connect(server.local_addr());
        for step in *scenario {
            let (got, expected) = auth_step(&mut theirs, &mut ours, step);
            let shown = String::from_utf8_lossy(&step[..step.len().min(60)]).into_owned();
            assert_eq!(got, expected, "reply to {shown:?} in {:?}", scenario.len());
        }
    }
    server.shutdown();
}

#[test]
fn authentication_gates_each_connection() {
    let file = TempFile::new("gates", b"alice:secret\n");
    let server = server::start(&Config { auth_file: Some(file.0.clone()), ..config() }).unwrap();
    let mut a = connect(server.local_addr());
    let mut b = connect(server.local_addr());
    roundtrip(&mut a, "get k\r\n", "CLIENT_ERROR unauthenticated\r\n");
    roundtrip(&mut a, "set k 0 0 12\r\nalice secret\r\n", "STORED\r\n");
    roundtrip(&mut a, "set k 0 0 1\r\nv\r\nget k\r\n", "STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n");
    // Another connection is still to log in; the login's key is untouched.
    roundtrip(&mut b, "get k\r\n", "CLIENT_ERROR unauthenticated\r\n");
    roundtrip(&mut b, "set k 0 0 11\r\nalice wrong\r\n", "CLIENT_ERROR authentication failure\r\n");
    roundtrip(&mut b, "set k 0 0 12\r\nalice secret\r\nget k\r\n", "STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n");
    // Pipelined: login and commands in one write, each with its reply.
    let mut c = connect(server.local_addr());
    roundtrip(
        &mut c,
        "get k\r\nset x 0 0 3\r\nbad\r\nset x 0 0 12\r\nalice secret\r\nget k\r\n",
        "CLIENT_ERROR unauthenticated\r\nCLIENT_ERROR bad authentication token format\r\nSTORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n",
    );
    server.shutdown();
}

#[test]
fn empty_auth_file_lets_nobody_in() {
    let file = TempFile::new("empty", b"");
    let server = server::start(&Config { auth_file: Some(file.0.clone()), ..config() }).unwrap();
    let mut c = connect(server.local_addr());
    roundtrip(&mut c, "get k\r\n\r\n", "CLIENT_ERROR unauthenticated\r\nCLIENT_ERROR unauthenticated\r\n");
    roundtrip(&mut c, "set k 0 0 3\r\na b\r\n", "CLIENT_ERROR authentication failure\r\n");
    server.shutdown();
}

#[test]
fn bad_auth_files_stop_the_binary() {
    let bin = env!("CARGO_BIN_EXE_dlht-server");
    let malformed = TempFile::new("malformed", b"alice:secret\n\nbob:pw\n");
    let missing = std::env::temp_dir().join(format!("dlht-server-{}-missing", std::process::id()));
    let dir = std::env::temp_dir();
    let cases = [
        (malformed.0.clone(), "has a malformed entry. Should be 'user:password'"),
        (missing.clone(), "Could not open authfile"),
        (dir, "Could not open authfile"),
    ];
    for (path, message) in cases {
        let out = Command::new(bin).args(["-p", "0", "-Y"]).arg(&path).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{path:?}: {stderr}");
        assert!(stderr.contains(message), "{path:?}: {stderr}");
        assert!(stderr.contains(&*path.to_string_lossy()), "{path:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!stderr.contains("panicked"));
    }
    let err = server::start(&Config { auth_file: Some(missing.clone()), ..config() }).err().unwrap();
    assert_eq!(
        err.to_string(),
        format!("Could not open authfile [{}] for reading: No such file or directory", missing.display())
    );
}

#[test]
fn binary_protocol_clients_get_an_error_and_a_close() {
    let server = start();
    // A binary `version` request: 24-byte header, magic 0x80, opcode 0x0b.
    let mut request = vec![0u8; 24];
    request[0] = 0x80;
    request[1] = 0x0b;
    let mut c = connect(server.local_addr());
    c.write_all(&request).unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).expect("closed in time");
    assert_eq!(all, b"ERROR\r\n");
    // 0x80 later in a connection is text, as in memcached.
    let mut c = connect(server.local_addr());
    roundtrip(
        &mut c,
        "version\r\n\x7f\r\n",
        &format!("VERSION {}\r\nERROR\r\n", dlht_server::store::VERSION),
    );
    server.shutdown();
}

/// A pipeline (every command in one write, parsed ahead and prefetched
/// together by the connection) answers exactly as the same commands sent
/// one at a time, errors and swallowed data blocks included.
#[test]
fn a_pipeline_answers_as_commands_one_by_one() {
    let mut script = Vec::new();
    for i in 0..300 {
        script.push(match i % 10 {
            0 => format!("set k{} 0 0 2\r\nv{}\r\n", i % 37, i % 10),
            1 => format!("get k{} k{} absent k{}\r\n", i % 37, (i + 1) % 37, (i + 5) % 37),
            2 => format!("incr n{} 3\r\n", i % 5),
            3 => format!("set n{} 0 0 1\r\n7\r\n", i % 5),
            4 => "bogus command\r\n".to_string(),
            5 => format!("set big 0 0 2000000\r\n{}\r\n", "x".repeat(2_000_000)),
            6 => format!("mg k{} v c\r\n", i % 37),
            7 => format!("delete k{}\r\n", (i + 3) % 37),
            8 => format!("gets k{}\r\n", i % 37),
            _ => "set bad 0 0 3\r\ntoo long\r\n".to_string(),
        });
    }
    let cas = |s: &str| -> String {
        // Normalize cas uniques (the two servers' counters differ by test order).
        s.lines()
            .map(|l| match l.split(' ').collect::<Vec<_>>()[..] {
                ["VALUE", k, f, n, _] => format!("VALUE {k} {f} {n} C"),
                _ => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (one, all) = (start(), start());
    let mut a = connect(one.local_addr());
    let mut b = connect(all.local_addr());
    let mut expected = Vec::new();
    for command in &script {
        a.write_all(command.as_bytes()).unwrap();
        a.write_all(b"mn\r\n").unwrap();
        // Read up to this command's "MN\r\n".
        expected.extend_from_slice(&read_through(&mut a, b"MN\r\n"));
    }
    let pipeline: String = script.iter().flat_map(|c| [c.as_str(), "mn\r\n"]).collect();
    b.write_all(pipeline.as_bytes()).unwrap();
    let got = read_n(&mut b, expected.len());
    assert_eq!(cas(&String::from_utf8_lossy(&got)), cas(&String::from_utf8_lossy(&expected)));
    one.shutdown();
    all.shutdown();
}

/// `dlht-server -e dir` on a loopback port of its choosing.
fn start_on_dir(dir: &Path) -> Server {
    Server::start(&["-t", "1", "-e", dir.to_str().unwrap()])
}

/// Runs `dlht-server -e dir`, which must refuse the directory: exit, with
/// a failure status, within [`TIMEOUT`]. Returns what it wrote.
fn refused_start(dir: &Path) -> String {
    let (status, message) =
        run_with_limit(&mut server_command(&["-t", "1", "-e", dir.to_str().unwrap()]), TIMEOUT);
    let status = status.unwrap_or_else(|| panic!("{} served, saying {message:?}", dir.display()));
    assert!(!status.success(), "{} refused with success: {message:?}", dir.display());
    assert!(!message.contains("panicked"), "{message}");
    message
}

/// Each file in `dir` by name, with a hash of its contents.
fn hash_files(dir: &Path) -> std::collections::BTreeMap<String, u64> {
    use std::hash::Hasher;
    let mut files = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let mut file = std::fs::File::open(entry.path()).unwrap();
        // SipHash with fixed keys: the same contents hash the same.
        let mut h = std::hash::DefaultHasher::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = file.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            h.write(&buf[..n]);
        }
        files.insert(entry.file_name().into_string().unwrap(), h.finish());
    }
    files
}

/// Sets `key{i}` to `value{i}` with flags `flags + i`, for `i` in 0..n.
fn set_items(addr: SocketAddr, key: &str, flags: u32, n: u32) {
    let mut c = connect(addr);
    for i in 0..n {
        let value = format!("value{i}");
        roundtrip(
            &mut c,
            &format!("set {key}{i} {} 0 {}\r\n{value}\r\n", flags + i, value.len()),
            "STORED\r\n",
        );
    }
}

/// Warm restart (`-e DIR`) refuses a meta file that is not the directory
/// map's own — another directory's, copied beside the map's files, or one
/// from before the meta file named its map — instead of serving the items
/// with another map's times, cas uniques and flush state; and it refuses
/// before it writes anything of its own there (the meta file is as it was).
/// With its own meta file back, the directory serves its items.
#[test]
fn a_meta_file_of_another_map_is_refused() {
    let tmp = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let [a, b, c] = ["a", "b", "c"].map(|n| tmp.join(format!("foreign-meta-{}-{n}", std::process::id())));
    for dir in [&a, &b, &c] {
        let _ = std::fs::remove_dir_all(dir);
    }
    for (dir, key, flags) in [(&a, "a", 100), (&b, "b", 200)] {
        let mut server = start_on_dir(dir);
        set_items(server.addr, key, flags, 5);
        server.kill();
    }
    let meta = |dir: &Path| dir.join("dlht-server.meta");
    let own = std::fs::read(meta(&b)).unwrap();
    std::fs::copy(meta(&a), meta(&b)).unwrap();
    let before = hash_files(&b);
    let message = refused_start(&b);
    assert!(
        message.contains(&meta(&b).display().to_string()) && message.contains("another map"),
        "{message:?}"
    );
    // Refused before the map is opened (its id read from its map file):
    // nothing in the directory changes, the map's files included.
    assert_eq!(hash_files(&b), before, "the directory changed");

    // A meta file of the format before this one (it named no map) is
    // refused before the map is opened: nothing in the directory changes.
    let old = "dlht-server 1\norigin 5\ncas_bound 1048576\noldest_live 0\noldest_cas 0\n";
    std::fs::write(meta(&b), old).unwrap();
    let before = hash_files(&b);
    let message = refused_start(&b);
    assert!(message.contains(&meta(&b).display().to_string()) && message.contains("older"), "{message:?}");
    assert_eq!(hash_files(&b), before, "the directory changed");

    // Another map's meta file alone: refused before a map is made there.
    std::fs::create_dir_all(&c).unwrap();
    std::fs::copy(meta(&a), meta(&c)).unwrap();
    let before = hash_files(&c);
    let message = refused_start(&c);
    assert!(
        message.contains(&meta(&c).display().to_string()) && message.contains("holds no map"),
        "{message:?}"
    );
    assert_eq!(hash_files(&c), before, "the directory changed");

    // With its own meta file back, b serves its own items, flags and all.
    std::fs::write(meta(&b), own).unwrap();
    let server = start_on_dir(&b);
    let mut s = connect(server.addr);
    for i in 0..5 {
        let value = format!("value{i}");
        let reply = format!("VALUE b{i} {} {}\r\n{value}\r\nEND\r\n", 200 + i, value.len());
        roundtrip(&mut s, &format!("get b{i}\r\n"), &reply);
    }
    roundtrip(&mut s, "get a0\r\n", "END\r\n");
    drop(server);
    for dir in [&a, &b, &c] {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Reads a `stats` reply (up to its "END\r\n") and returns stat `name`.
fn stat_of(c: &mut TcpStream, args: &str, name: &str) -> Option<String> {
    c.write_all(format!("stats{args}\r\n").as_bytes()).unwrap();
    let got = read_through(c, b"END\r\n");
    let prefix = format!("STAT {name} ");
    String::from_utf8(got).unwrap().lines().find_map(|l| l.strip_prefix(&prefix).map(str::to_owned))
}

/// `--durable` (with `-e`): every read whose commands change items waits
/// for the disk once before its replies go (`durable_waits`), reads that
/// change nothing never do, and the items are there after a kill -9;
/// `--durable` without `-e` is refused. (That the wait is a sync that
/// survives a power loss is the library's group commit, proven under
/// LazyFS by `scripts/power-loss.sh`.)
#[test]
fn durable_replies_wait_for_the_disk() {
    let dir =
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("durable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut server = Server::start(&["-t", "1", "-e", dir.to_str().unwrap(), "--durable"]);
    let mut c = connect(server.addr);
    assert_eq!(stat_of(&mut c, " settings", "durable").as_deref(), Some("yes"));
    let waits = |c: &mut TcpStream| -> u64 { stat_of(c, "", "durable_waits").unwrap().parse().unwrap() };
    let mut w = waits(&mut c);
    for (request, reply, waited) in [
        ("set k 5 0 3\r\nabc\r\n", "STORED\r\n", true),
        ("get k\r\n", "VALUE k 5 3\r\nabc\r\nEND\r\n", false),
        ("mg k v\r\n", "VA 3\r\nabc\r\n", false),
        ("mg k T60\r\n", "HD\r\n", true),
        ("set n 0 0 1\r\n5\r\n", "STORED\r\n", true),
        ("incr n 2\r\n", "7\r\n", true),
        ("touch n 100\r\n", "TOUCHED\r\n", true),
        ("ms m 2\r\nhi\r\n", "HD\r\n", true),
        ("md m\r\n", "HD\r\n", true),
        ("delete n\r\n", "DELETED\r\n", true),
        ("version\r\n", "VERSION ", false),
    ] {
        roundtrip(&mut c, request, reply);
        if request.starts_with("version") {
            let mut line = String::new();
            BufReader::new(&mut c).read_line(&mut line).unwrap();
        }
        let now = waits(&mut c);
        assert_eq!(now, w + u64::from(waited), "{request:?}");
        w = now;
    }
    // A pipeline: one wait per read (loopback may split it: at most one per
    // command), and every reply after it.
    let pipeline: String = (0..20).map(|i| format!("set p{i} 0 0 1\r\n{}\r\n", i % 10)).collect();
    c.write_all(pipeline.as_bytes()).unwrap();
    assert_eq!(read_str(&mut c, 20 * 8), "STORED\r\n".repeat(20));
    let now = waits(&mut c);
    assert!((w + 1..=w + 20).contains(&now), "{w} -> {now}");
    server.kill();
    let server = start_on_dir(&dir);
    let mut c = connect(server.addr);
    roundtrip(&mut c, "get k p19\r\n", "VALUE k 5 3\r\nabc\r\nVALUE p19 0 1\r\n9\r\nEND\r\n");
    assert_eq!(stat_of(&mut c, " settings", "durable").as_deref(), Some("no"));
    drop(server);
    let (status, message) = run_with_limit(&mut server_command(&["--durable"]), TIMEOUT);
    assert!(status.is_some_and(|s| !s.success()), "{message}");
    assert!(message.contains("--memory-file"), "{message}");
    std::fs::remove_dir_all(&dir).unwrap();
}
