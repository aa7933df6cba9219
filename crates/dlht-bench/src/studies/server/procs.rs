//! The processes the study starts: servers and memcaslap, each pinned with
//! `taskset`, each held by a guard that kills and reaps it when dropped
//! (also on an error or a panic).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A started process, killed and waited for when dropped.
pub struct Guard {
    /// What it is, for messages.
    pub name: String,
    child: Child,
}

impl Guard {
    /// Its process id (`taskset` execs the program, so this is the program's).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait up to `limit` for it to exit by itself; then kill it. Its exit
    /// status, or `None` if it had to be killed.
    pub fn wait_for(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let t = Instant::now();
        while t.elapsed() < limit {
            match self.child.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => break,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Start `cmd` (`program args…`) under `taskset -c cores`, with `env` set,
/// its stdout to `stdout` (null if `None`) and its stderr to `log`.
pub fn spawn(
    name: &str,
    cores: &str,
    cmd: &[String],
    env: &[(String, String)],
    stdout: Option<&Path>,
    log: &Path,
) -> Result<Guard, String> {
    let err = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let out = match stdout {
        Some(p) => Stdio::from(std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => Stdio::null(),
    };
    let mut c = Command::new("taskset");
    c.arg("-c").arg(cores).args(cmd).stdin(Stdio::null()).stdout(out).stderr(err);
    for (k, v) in env {
        c.env(k, v);
    }
    let child = c
        .spawn()
        .map_err(|e| format!("could not start {name} (taskset -c {cores} {}): {e}", cmd.join(" ")))?;
    Ok(Guard { name: name.to_string(), child })
}

/// A loopback port nobody listens on now.
pub fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| format!("no free port: {e}"))
}

/// Wait (up to 10 s) until `addr` accepts; fail early if the process exits.
pub fn wait_ready(g: &mut Guard, addr: SocketAddr, log: &Path) -> Result<(), String> {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(s)) = g.child.try_wait() {
            let msg = std::fs::read_to_string(log).unwrap_or_default();
            return Err(format!("{} exited ({s}) before accepting: {}", g.name, msg.trim()));
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("{} did not accept on {addr} within 10 s", g.name))
}

/// Resident memory of a process, bytes (`VmRSS` of /proc/PID/status).
pub fn rss(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let l = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    l.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb * 1024)
}

/// Pin the calling thread, and so every thread and process it starts
/// afterwards, to `cores` (`taskset -p` on its thread id).
pub fn pin_self(cores: &str) -> Result<(), String> {
    let link = std::fs::read_link("/proc/thread-self").map_err(|e| format!("/proc/thread-self: {e}"))?;
    let tid = link.file_name().and_then(|t| t.to_str()).ok_or("no thread id")?.to_string();
    let o = Command::new("taskset")
        .args(["-p", "-c", cores, &tid])
        .output()
        .map_err(|e| format!("taskset -p -c {cores} {tid}: {e}"))?;
    if !o.status.success() {
        return Err(format!("taskset -p -c {cores} {tid}: {}", String::from_utf8_lossy(&o.stderr).trim()));
    }
    Ok(())
}

/// Whether `program` is on the PATH (or is a path that exists).
pub fn have(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// The workspace root (two folders above this crate).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The dlht-server binary: `given`, else `$CARGO_TARGET_DIR/release` (if
/// set), else the workspace's `target/release`; built with cargo first if
/// missing (a note is printed).
pub fn server_binary(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(p) = given {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(format!("--server-bin {} is not a file", p.display()))
        };
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_relative() { workspace().join(t) } else { t })
        .unwrap_or_else(|| workspace().join("target"));
    let bin = target.join("release/dlht-server");
    if bin.is_file() {
        return Ok(bin);
    }
    println!("# {} is missing: running cargo build --release -p dlht-server", bin.display());
    let s = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "-p", "dlht-server"])
        .current_dir(workspace())
        .status()
        .map_err(|e| format!("cargo build --release -p dlht-server: {e}"))?;
    if !s.success() || !bin.is_file() {
        return Err(format!(
            "cargo build --release -p dlht-server failed ({s}), or made no {}",
            bin.display()
        ));
    }
    Ok(bin)
}
