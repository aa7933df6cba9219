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

/// Reads exactly `n` bytes.
pub fn read_n(s: &mut impl Read, n: usize) -> Vec<u8> {
    let mut buf = vec![0; n];
    let started = Instant::now();
    if let Err(e) = s.read_exact(&mut buf) {
        panic!("no reply after {:?}: {e}", started.elapsed());
    }
    buf
}
