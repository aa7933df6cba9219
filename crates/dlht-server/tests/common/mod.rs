//! What the server's integration tests share: a connection with timeouts
//! (a server that stops answering fails the test instead of hanging it)
//! and an exact read.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long a test waits for any one reply.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// A client connection to `addr`, with read and write timeouts, no Nagle.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.set_write_timeout(Some(TIMEOUT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Reads until what was read ends with `end` (a reply's last line).
#[allow(dead_code)] // (not every test binary that includes this module reads so)
pub fn read_through(s: &mut impl Read, end: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    while !got.ends_with(end) {
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "the server closed");
        got.extend_from_slice(&buf[..n]);
    }
    got
}

/// Reads exactly `n` bytes.
pub fn read_n(s: &mut impl Read, n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    let started = Instant::now();
    if let Err(e) = s.read_exact(&mut buf) {
        panic!("no reply after {:?}: {e}", started.elapsed());
    }
    buf
}
