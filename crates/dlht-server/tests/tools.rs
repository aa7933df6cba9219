//! The `dlht-server` binary under the tools that people run against
//! memcached: libmemcached's `memccapable`, Python's `pymemcache` (its
//! `Client` and `HashClient`) and twemproxy's `nutcracker`.
//!
//! Everything runs over loopback. Servers take a free port (`-p 0 -v`, the
//! port read from their first line on stderr: `tests/process`, shared with
//! `tests/server.rs`); every process started is killed by a guard however
//! the test ends, and every tool runs under a time limit. A tool that is
//! not installed makes its test print a note and pass (the project's test
//! command installs them all).

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod process;
use process::{free_port, run_with_limit, ChildGuard, Server};

/// Read and write timeout of every socket.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a tool may run before it is killed and the test fails.
const TOOL_LIMIT: Duration = Duration::from_secs(60);

/// `tool`'s path, if it is installed (on `PATH` or in the usual places).
fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/bin", "/usr/bin", "/usr/sbin", "/bin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
}

/// A Python 3 that can import pymemcache: `python3` on `PATH`, else the
/// system's (a pyenv or virtualenv `python3` may not see Debian's package).
fn python_with_pymemcache() -> Option<PathBuf> {
    let candidates = which("python3").into_iter().chain([PathBuf::from("/usr/bin/python3")]);
    candidates.filter(|p| p.is_file()).find(|python| {
        Command::new(python)
            .args(["-c", "import pymemcache"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

fn connect(addr: SocketAddr) -> std::io::Result<BufReader<TcpStream>> {
    let s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))?;
    s.set_nodelay(true)?;
    Ok(BufReader::new(s))
}

fn read_line(r: &mut BufReader<TcpStream>) -> std::io::Result<String> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(line)
}

/// Reads the reply to one `get` of one key: its value, `None` for a miss,
/// or the error line a proxy sends in its place.
fn read_get_reply(r: &mut BufReader<TcpStream>) -> std::io::Result<GetReply> {
    let line = read_line(r)?;
    if line == "END\r\n" {
        return Ok(Ok(None));
    }
    let Some(header) = line.strip_prefix("VALUE ") else {
        return Ok(Err(line.trim_end().to_string()));
    };
    let len: usize = header.split_whitespace().nth(2).and_then(|n| n.parse().ok()).expect("VALUE length");
    let mut data = vec![0; len + 2];
    r.read_exact(&mut data)?;
    assert_eq!(&data[len..], b"\r\n", "value not ended by CRLF");
    data.truncate(len);
    let end = read_line(r)?;
    assert_eq!(end, "END\r\n", "after the value of a one-key get");
    Ok(Ok(Some(data)))
}

/// The reply to a one-key `get`: the value, `None` for a miss, or an
/// error line.
type GetReply = Result<Option<Vec<u8>>, String>;

/// Sends `get` for each key, pipelined in batches, and returns the replies
/// in order.
fn get_each(addr: SocketAddr, keys: &[String]) -> std::io::Result<Vec<GetReply>> {
    let mut r = connect(addr)?;
    let mut replies = Vec::with_capacity(keys.len());
    for batch in keys.chunks(500) {
        let request: String = batch.iter().map(|k| format!("get {k}\r\n")).collect();
        r.get_mut().write_all(request.as_bytes())?;
        for _ in batch {
            replies.push(read_get_reply(&mut r)?);
        }
    }
    Ok(replies)
}

/// Sets every key to its value, pipelined in batches; each must be stored.
fn set_each(addr: SocketAddr, pairs: &[(String, String)]) {
    let mut r = connect(addr).expect("connect to set");
    for batch in pairs.chunks(500) {
        let request: String =
            batch.iter().map(|(k, v)| format!("set {k} 0 0 {}\r\n{v}\r\n", v.len())).collect();
        r.get_mut().write_all(request.as_bytes()).unwrap();
        for (k, _) in batch {
            assert_eq!(read_line(&mut r).unwrap(), "STORED\r\n", "set {k}");
        }
    }
}

/// One number from a server's `stats`.
fn stat(addr: SocketAddr, name: &str) -> u64 {
    let mut r = connect(addr).expect("connect for stats");
    r.get_mut().write_all(b"stats\r\n").unwrap();
    let mut found = None;
    loop {
        let line = read_line(&mut r).expect("stats reply");
        if line == "END\r\n" {
            break;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.len() == 3 && words[0] == "STAT" && words[1] == name {
            found = words[2].parse().ok();
        }
    }
    found.unwrap_or_else(|| panic!("no stat {name}"))
}

#[test]
fn memccapable_ascii_passes() {
    let Some(memccapable) = which("memccapable") else {
        eprintln!("note: memccapable (libmemcached-tools) not installed; test skipped");
        return;
    };
    let server = Server::start(&["-t", "2"]);
    let started = Instant::now();
    let (status, output) = run_with_limit(
        Command::new(memccapable).args(["-h", "127.0.0.1", "-p", &server.addr.port().to_string(), "-a"]),
        TOOL_LIMIT,
    );
    eprintln!("memccapable ran for {:?}", started.elapsed());
    let status = status.unwrap_or_else(|| panic!("memccapable ran past {TOOL_LIMIT:?}:\n{output}"));
    assert!(status.success() && output.contains("All tests passed"), "memccapable: {status}\n{output}");
}

#[test]
fn pymemcache_exercises_every_command() {
    let Some(python) = python_with_pymemcache() else {
        eprintln!("note: no python3 with pymemcache (python3-pymemcache) installed; test skipped");
        return;
    };
    let servers: Vec<Server> = (0..3).map(|_| Server::start(&["-t", "1"])).collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/pymemcache_client.py");
    let mut cmd = Command::new(&python);
    cmd.arg(&script).arg("127.0.0.1");
    cmd.args(servers.iter().map(|s| s.addr.port().to_string()));
    let started = Instant::now();
    let (status, output) = run_with_limit(&mut cmd, TOOL_LIMIT);
    eprintln!("{} {} ran for {:?}:\n{output}", python.display(), script.display(), started.elapsed());
    let status = status.unwrap_or_else(|| panic!("the pymemcache script ran past {TOOL_LIMIT:?}"));
    assert!(status.success(), "the pymemcache script failed ({status}); its output is above");
    assert!(output.contains("all pymemcache checks passed"));
}

/// A running `nutcracker`, with the address it listens on. Dropped, it
/// kills nutcracker and, unless the test failed, removes its configuration
/// and log.
struct Proxy {
    addr: SocketAddr,
    child: ChildGuard,
    files: [PathBuf; 2],
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.0.kill();
        let _ = self.child.0.wait();
        if !std::thread::panicking() {
            for file in &self.files {
                let _ = std::fs::remove_file(file);
            }
        }
    }
}

/// Starts nutcracker over `servers` on a free port, with a free stats
/// port; tries again with other ports if it cannot bind.
fn start_nutcracker(nutcracker: &Path, servers: &[Server]) -> Proxy {
    let template = include_str!("tools/nutcracker.yml.in");
    let server_lines: Vec<String> = servers.iter().map(|s| format!("   - {}:1", s.addr)).collect();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let mut failures = String::new();
    for attempt in 0..5 {
        let listen = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let stats_port = free_port();
        let name = format!("nutcracker-{}-{}", std::process::id(), listen.port());
        let conf = dir.join(format!("{name}.yml"));
        let log = dir.join(format!("{name}.log"));
        let yaml =
            template.replace("@LISTEN@", &listen.to_string()).replace("@SERVERS@", &server_lines.join("\n"));
        std::fs::write(&conf, yaml).unwrap();
        if attempt == 0 {
            let (status, output) =
                run_with_limit(Command::new(nutcracker).arg("-t").arg("-c").arg(&conf), TOOL_LIMIT);
            assert!(
                status.is_some_and(|s| s.success()),
                "nutcracker -t rejects the configuration:\n{output}"
            );
        }
        let child = Command::new(nutcracker)
            .arg("-c")
            .arg(&conf)
            .args(["-s", &stats_port.to_string(), "-a", "127.0.0.1"])
            .arg("-o")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nutcracker starts");
        let mut child = ChildGuard(child);
        // Ready when it answers a get through to a server and still runs
        // (had it failed to bind, it exits, and the port is another's).
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if child.0.try_wait().unwrap().is_some() {
                break;
            }
            let answered = connect(listen).and_then(|mut r| {
                r.get_mut().write_all(b"get readiness-probe\r\n")?;
                read_line(&mut r)
            });
            if answered.is_ok_and(|line| line == "END\r\n") && child.0.try_wait().unwrap().is_none() {
                return Proxy { addr: listen, child, files: [conf, log] };
            }
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(child);
        let log_text = std::fs::read_to_string(&log).unwrap_or_default();
        failures += &format!("attempt {attempt} on {listen}:\n{log_text}\n");
        let _ = std::fs::remove_file(&conf);
        let _ = std::fs::remove_file(&log);
    }
    panic!("nutcracker did not start:\n{failures}");
}

#[test]
fn twemproxy_over_three_instances() {
    let Some(nutcracker) = which("nutcracker") else {
        eprintln!("note: nutcracker (twemproxy) not installed; test skipped");
        return;
    };
    let started = Instant::now();
    let mut servers: Vec<Server> = (0..3).map(|_| Server::start(&["-t", "1"])).collect();
    let proxy = start_nutcracker(&nutcracker, &servers);

    const N: usize = 10_000;
    let pairs: Vec<(String, String)> =
        (0..N).map(|i| (format!("key:{i}"), format!("value-{i}-{}", "x".repeat(i % 50)))).collect();
    let keys: Vec<String> = pairs.iter().map(|(k, _)| k.clone()).collect();
    let value_of: HashMap<&str, &str> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    set_each(proxy.addr, &pairs);

    // Every key reads back through the proxy, one get at a time...
    let replies = get_each(proxy.addr, &keys).expect("gets through the proxy");
    for ((k, v), reply) in pairs.iter().zip(&replies) {
        assert_eq!(reply, &Ok(Some(v.clone().into_bytes())), "get {k} through the proxy");
    }
    // ... and in a multi-get, which the proxy splits over the servers.
    let mut r = connect(proxy.addr).unwrap();
    let request = format!("get {}\r\n", keys[..100].join(" "));
    r.get_mut().write_all(request.as_bytes()).unwrap();
    let mut seen = HashSet::new();
    loop {
        let line = read_line(&mut r).unwrap();
        if line == "END\r\n" {
            break;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        assert!(words.len() == 4 && words[0] == "VALUE", "multi-get through the proxy: {line:?}");
        let mut data = vec![0; words[3].parse::<usize>().unwrap() + 2];
        r.read_exact(&mut data).unwrap();
        assert_eq!(&data[..data.len() - 2], value_of[words[1]].as_bytes(), "multi-get {}", words[1]);
        assert!(seen.insert(words[1].to_string()), "{} twice in a multi-get", words[1]);
    }
    assert_eq!(seen.len(), 100, "multi-get of 100 keys through the proxy");

    // The keys are spread over the three instances.
    let items: Vec<u64> = servers.iter().map(|s| stat(s.addr, "curr_items")).collect();
    eprintln!("twemproxy: curr_items per instance {items:?} (of {N})");
    assert_eq!(items.iter().sum::<u64>(), N as u64, "curr_items over the instances");
    for (s, n) in servers.iter().zip(&items) {
        assert!(*n >= N as u64 / 5, "{} holds {n} of {N} keys: fewer than 20%", s.addr);
    }

    // Which instance holds each of a sample of the keys, asked directly.
    let sample: Vec<String> = keys.iter().step_by(10).cloned().collect();
    let mut owner: HashMap<String, usize> = HashMap::new();
    for (i, s) in servers.iter().enumerate() {
        let replies = get_each(s.addr, &sample).expect("gets from an instance");
        for (k, reply) in sample.iter().zip(replies) {
            match reply {
                Ok(Some(v)) => {
                    assert_eq!(v, value_of[k.as_str()].as_bytes(), "{k} on {}", s.addr);
                    assert!(owner.insert(k.clone(), i).is_none(), "{k} on two instances");
                }
                Ok(None) => {}
                Err(e) => panic!("get {k} from {}: {e}", s.addr),
            }
        }
    }
    assert_eq!(owner.len(), sample.len(), "every sampled key is on one instance");

    // Kill one instance: the proxy ejects it, and the keys on the other two
    // still read back through it. Requests just after the kill may fail.
    let dead = 1;
    servers[dead].kill();
    assert!(TcpStream::connect(servers[dead].addr).is_err(), "the killed instance still accepts");
    let on_survivors: Vec<String> = sample.iter().filter(|k| owner[*k] != dead).cloned().collect();
    let killed_at = Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        let outcome = get_each(proxy.addr, &sample).map(|replies| {
            let mut found = 0;
            let mut wrong = Vec::new();
            let (mut dead_missed, mut dead_errors) = (0, 0);
            for (k, reply) in sample.iter().zip(replies) {
                if owner[k] == dead {
                    match reply {
                        Ok(None) => dead_missed += 1,
                        Err(_) => dead_errors += 1,
                        Ok(Some(v)) => wrong.push(format!("{k}: {:?}", String::from_utf8_lossy(&v))),
                    }
                } else if reply == Ok(Some(value_of[k.as_str()].as_bytes().to_vec())) {
                    found += 1;
                } else {
                    wrong.push(format!("{k}: {reply:?}"));
                }
            }
            (found, wrong, dead_missed, dead_errors)
        });
        match outcome {
            Ok((found, wrong, dead_missed, dead_errors))
                if found == on_survivors.len() && wrong.is_empty() =>
            {
                eprintln!(
                    "twemproxy: after killing {} ({:?} and {attempts} attempts later): {found}/{} sampled keys \
                     on the survivors found; of those on the killed instance, {dead_missed} missed and \
                     {dead_errors} errors",
                    servers[dead].addr,
                    killed_at.elapsed(),
                    on_survivors.len(),
                );
                break;
            }
            outcome => {
                if killed_at.elapsed() > Duration::from_secs(6) {
                    let summary = match outcome {
                        Ok((found, wrong, _, _)) => {
                            format!(
                                "{found}/{} found; wrong: {:?}",
                                on_survivors.len(),
                                &wrong[..wrong.len().min(10)]
                            )
                        }
                        Err(e) => format!("the proxy connection failed: {e}"),
                    };
                    panic!("after killing an instance, keys on the survivors do not read back: {summary}");
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    }
    eprintln!("twemproxy test took {:?}", started.elapsed());
}

/// Warm restart (`-e DIR`) through pymemcache: a writer sets keys (each
/// acknowledged set and its cas unique recorded as the replies arrive)
/// until the server is killed with SIGKILL under it; a server restarted on
/// the directory has every acknowledged set with its value, flags, cas
/// unique and expiry, and says in `stats` how many items came back.
#[test]
fn pymemcache_sets_survive_kill_9_and_a_restart() {
    let Some(python) = python_with_pymemcache() else {
        eprintln!("note: no python3 with pymemcache (python3-pymemcache) installed; test skipped");
        return;
    };
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp.join(format!("restart-{}", std::process::id()));
    let acks = tmp.join(format!("restart-{}.acks", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tools/pymemcache_restart.py");
    let dir_arg = dir.to_str().unwrap();
    for round in 0..3 {
        let mut server = Server::start(&["-t", "2", "-e", dir_arg]);
        let mut writer = Command::new(&python);
        writer.arg(&script).args([
            "write",
            "127.0.0.1",
            &server.addr.port().to_string(),
            acks.to_str().unwrap(),
        ]);
        writer.arg("1000000").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let mut writer = ChildGuard(writer.spawn().expect("python starts"));
        // Killed while the writer is mid-stream: 0.3 to 1.1 s in.
        std::thread::sleep(Duration::from_millis(300 + 400 * round));
        server.kill();
        let deadline = Instant::now() + TOOL_LIMIT;
        while writer.0.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the writer outlived its server");
            std::thread::sleep(Duration::from_millis(10));
        }
        let acked = std::fs::read_to_string(&acks).unwrap().lines().count();
        let server = Server::start(&["-t", "2", "-e", dir_arg]);
        let mut cmd = Command::new(&python);
        cmd.arg(&script).args([
            "check",
            "127.0.0.1",
            &server.addr.port().to_string(),
            acks.to_str().unwrap(),
        ]);
        let (status, output) = run_with_limit(&mut cmd, TOOL_LIMIT);
        eprintln!("round {round}: {acked} acknowledged sets before kill -9; check:\n{output}");
        let status = status.unwrap_or_else(|| panic!("the check ran past {TOOL_LIMIT:?}"));
        assert!(
            status.success() && output.contains("acknowledged sets came back"),
            "round {round}: {output}"
        );
        drop(server);
    }
    // An acknowledged flush_all survives a kill too.
    let mut server = Server::start(&["-t", "2", "-e", dir_arg]);
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(b"flush_all\r\n").unwrap();
    let mut reply = [0u8; 4];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"OK\r\n");
    server.kill();
    let server = Server::start(&["-t", "2", "-e", dir_arg]);
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(b"get key0 key1 key2\r\n").unwrap();
    let mut reply = [0u8; 5];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"END\r\n", "items a flush_all invalidated came back after kill -9");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&acks);
}
