//! Child processes for the tests that run binaries (`tests/server.rs`,
//! `tests/tools.rs`): every process started is killed and reaped by a
//! guard however the test ends, and waited for under a time limit. A
//! `dlht-server` takes a free loopback port (`-p 0 -v`) and names it on
//! the first line of its stderr, so no other test can take it in between.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest a server may take to name its address.
const START_LIMIT: Duration = Duration::from_secs(10);

/// Kills and reaps a child process however the test ends.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `dlht-server -p 0 -l 127.0.0.1 -v` and `args`: a server on a loopback
/// port of its choosing, which it names on stderr.
pub fn server_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dlht-server"));
    cmd.args(["-p", "0", "-l", "127.0.0.1", "-v"]).args(args);
    cmd
}

/// A `dlht-server` process (killed when dropped) and the address it named.
pub struct Server {
    pub addr: SocketAddr,
    pub child: ChildGuard,
}

impl Server {
    /// Starts [`server_command`]`(args)` and reads the address it names.
    pub fn start(args: &[&str]) -> Server {
        Server::spawn(&mut server_command(args))
    }

    /// Starts `cmd`, a `dlht-server` with `-p 0 -v`, and reads the address
    /// it names on its first line of stderr (within [`START_LIMIT`]).
    pub fn spawn(cmd: &mut Command) -> Server {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dlht-server starts");
        let stderr = child.stderr.take().unwrap();
        let child = ChildGuard(child);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stderr).lines();
            let _ = tx.send(lines.next().and_then(Result::ok));
            // Keep reading, so that a verbose server never blocks on a full
            // pipe.
            for line in lines.map_while(Result::ok) {
                eprintln!("{line}");
            }
        });
        let line = rx.recv_timeout(START_LIMIT).ok().flatten().expect("dlht-server prints its address");
        let addr = line
            .split_whitespace()
            .find_map(|word| word.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        Server { addr, child }
    }

    pub fn kill(&mut self) {
        let _ = self.child.0.kill();
        let _ = self.child.0.wait();
    }
}

/// Runs `cmd` for at most `limit`, killing it on expiry. Returns its exit
/// status (`None`: killed) and its stdout then stderr.
pub fn run_with_limit(cmd: &mut Command, limit: Duration) -> (Option<ExitStatus>, String) {
    let mut child =
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("tool starts");
    let read_all = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().unwrap()));
    let stderr = read_all(Box::new(child.stderr.take().unwrap()));
    let mut child = ChildGuard(child);
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("wait for tool") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(child); // Kills it if it is still running, closing its pipes.
    let output = stdout.join().unwrap() + &stderr.join().unwrap();
    (status, output)
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
