//! The network layer: the listener, `-t` event-loop threads (one mio `Poll`
//! each, over its own connections), round-robin accept balancing, the `-c`
//! connection limit, `-Y` authentication and shutdown.

use std::fmt;
use std::io::{self, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use crate::auth::AuthFile;
use crate::clock::Clock;
use crate::config::Config;
use crate::conn::{Conn, State};
use crate::protocol::text::Limits;
use crate::store::{Crawler, Store};

/// What memcached sends a connection over `-c` before closing it.
pub const TOO_MANY_CONNECTIONS: &[u8] = b"ERROR Too many open connections\r\n";

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
/// Connection tokens start here (index + FIRST_CONN).
const FIRST_CONN: usize = 2;

/// Why the server did not start.
#[derive(Debug)]
pub struct Error {
    message: String,
    source: Option<io::Error>,
}

impl Error {
    fn io(what: String, e: io::Error) -> Self {
        Error { message: what, source: Some(e) }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            // "Address already in use", without io::Error's " (os error 98)".
            Some(e) => {
                let text = e.to_string();
                let text = text.find(" (os error").map_or(text.as_str(), |i| &text[..i]);
                write!(f, "{}: {}", self.message, text)
            }
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

/// The server: a namespace for [`Server::start`].
pub struct Server;

impl Server {
    /// Starts a server with `config` (see [`start`]).
    pub fn start(config: &Config) -> Result<Running, Error> {
        start(config)
    }
}

/// A started server; [`Running::shutdown`] (or dropping it) stops it.
pub struct Running {
    local_addr: SocketAddr,
    store: Arc<Store>,
    stop: Arc<AtomicBool>,
    stop_listener: Arc<AtomicBool>,
    wakers: Vec<Arc<Waker>>,
    threads: Vec<JoinHandle<()>>,
    /// The thread that reclaims expired items (stopped on drop).
    crawler: Option<Crawler>,
}

impl Running {
    /// The address the listener is bound to (with the real port when the
    /// configuration asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The cache, shared by all connections (for its counters).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Stops accepting, closes every connection and joins all threads.
    pub fn shutdown(mut self) {
        self.stop_threads();
    }

    fn stop_threads(&mut self) {
        // The listener first (the last thread and waker), so that no
        // connection is handed to a worker that has stopped.
        self.stop_listener.store(true, Ordering::SeqCst);
        if let (Some(waker), Some(thread)) = (self.wakers.pop(), self.threads.pop()) {
            let _ = waker.wake();
            let _ = thread.join();
        }
        self.stop.store(true, Ordering::SeqCst);
        for waker in &self.wakers {
            let _ = waker.wake();
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        self.crawler = None;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

/// Loads `config.auth_file` (if any), binds the listener on
/// `config.listen:config.port`, starts `config.threads` event-loop threads
/// and the listener thread.
pub fn start(config: &Config) -> Result<Running, Error> {
    config.validate().map_err(|message| Error { message, source: None })?;
    let auth = match &config.auth_file {
        Some(path) => {
            Some(Arc::new(AuthFile::load(path).map_err(|e| Error { message: e.to_string(), source: None })?))
        }
        None => None,
    };
    let shown = format!("{}:{}", config.listen, config.port);
    let addrs: Vec<SocketAddr> = (config.listen.as_str(), config.port)
        .to_socket_addrs()
        .map_err(|e| Error::io(format!("failed to resolve {shown}"), e))?
        .collect();
    let mut listener = None;
    let mut last_error = io::Error::new(io::ErrorKind::NotFound, "no address");
    for addr in addrs {
        match TcpListener::bind(addr) {
            Ok(l) => {
                listener = Some(l);
                break;
            }
            Err(e) => last_error = e,
        }
    }
    let mut listener =
        listener.ok_or_else(|| Error::io(format!("failed to listen on {shown}"), last_error))?;
    let local_addr =
        listener.local_addr().map_err(|e| Error::io(format!("failed to listen on {shown}"), e))?;

    let store = Arc::new(match &config.memory_file {
        Some(dir) => Store::open(dir, config.settings())
            .map_err(|e| Error::io(format!("failed to open the cache in {}", dir.display()), e))?,
        None => Store::new(Clock::system(), config.settings()),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let stop_listener = Arc::new(AtomicBool::new(false));
    let limits = config.limits();
    let setup = |e: io::Error| Error::io("failed to start an event loop".into(), e);

    let mut running = Running {
        local_addr,
        store: Arc::clone(&store),
        stop: Arc::clone(&stop),
        stop_listener: Arc::clone(&stop_listener),
        wakers: Vec::new(),
        threads: Vec::new(),
        crawler: None,
    };
    running.crawler =
        Some(store.start_crawler().map_err(|e| Error::io("failed to start a thread".into(), e))?);
    let mut workers = Vec::new();
    for i in 0..config.threads.max(1) {
        let poll = Poll::new().map_err(setup)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(setup)?);
        let (tx, rx) = mpsc::channel();
        let worker = Worker {
            poll,
            rx,
            store: Arc::clone(&store),
            limits,
            auth: auth.clone(),
            verbose: config.verbose,
            stop: Arc::clone(&stop),
            conns: Vec::new(),
            free: Vec::new(),
            again: Vec::new(),
        };
        let handle = thread::Builder::new()
            .name(format!("dlht-worker-{i}"))
            .spawn(move || worker.run())
            .map_err(|e| Error::io("failed to start a thread".into(), e))?;
        running.threads.push(handle);
        running.wakers.push(Arc::clone(&waker));
        workers.push((tx, waker));
    }

    let poll = Poll::new().map_err(setup)?;
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE).map_err(setup)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(setup)?);
    running.wakers.push(waker);
    let acceptor = Acceptor {
        poll,
        listener,
        workers,
        next: 0,
        store,
        stop: stop_listener,
        verbose: config.verbose,
        max_connections: config.conn_limit,
    };
    let handle = thread::Builder::new()
        .name("dlht-listener".into())
        .spawn(move || acceptor.run())
        .map_err(|e| Error::io("failed to start a thread".into(), e))?;
    running.threads.push(handle);
    if config.verbose > 0 {
        eprintln!("dlht-server: listening on {local_addr} with {} threads", config.threads);
    }
    Ok(running)
}

/// An accepted connection and its peer, on its way to a worker.
type Handoff = (TcpStream, SocketAddr);

/// The listener thread: accepts and hands connections to the workers.
struct Acceptor {
    poll: Poll,
    listener: TcpListener,
    workers: Vec<(Sender<Handoff>, Arc<Waker>)>,
    next: usize,
    store: Arc<Store>,
    stop: Arc<AtomicBool>,
    verbose: u8,
    max_connections: u32,
}

impl Acceptor {
    fn run(mut self) {
        let mut events = Events::with_capacity(64);
        while !self.stop.load(Ordering::SeqCst) {
            if let Err(e) = self.poll.poll(&mut events, None) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                if self.verbose > 0 {
                    eprintln!("dlht-server: listener poll failed: {e}");
                }
                return;
            }
            if events.iter().any(|e| e.token() == LISTENER) {
                self.accept_all();
            }
        }
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    let counters = self.store.counters();
                    let max = u64::from(self.max_connections);
                    if counters.curr_connections.load(Ordering::SeqCst) >= max {
                        // memcached's reply to a connection over -c (best
                        // effort: the socket is new, so the write fits).
                        let _ = stream.write(TOO_MANY_CONNECTIONS);
                        if self.verbose > 0 {
                            eprintln!("dlht-server: too many open connections ({peer} refused)");
                        }
                        continue;
                    }
                    counters.curr_connections.fetch_add(1, Ordering::SeqCst);
                    // Relaxed: a statistic.
                    counters.total_connections.fetch_add(1, Ordering::Relaxed);
                    let _ = stream.set_nodelay(true);
                    let (tx, waker) = &self.workers[self.next % self.workers.len()];
                    self.next = self.next.wrapping_add(1);
                    if tx.send((stream, peer)).is_err() {
                        counters.curr_connections.fetch_sub(1, Ordering::SeqCst);
                    } else {
                        let _ = waker.wake();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of file descriptors and the like: back off a little
                    // rather than spin.
                    if self.verbose > 0 {
                        eprintln!("dlht-server: accept failed: {e}");
                    }
                    // Events are edge-triggered: keep trying until the
                    // backlog is empty (or the server stops).
                    thread::sleep(Duration::from_millis(10));
                    if self.stop.load(Ordering::SeqCst) {
                        return;
                    }
                }
            }
        }
    }
}

/// One event-loop thread and its connections.
struct Worker {
    poll: Poll,
    rx: Receiver<Handoff>,
    store: Arc<Store>,
    limits: Limits,
    /// `-Y`: the users new connections must log in as.
    auth: Option<Arc<AuthFile>>,
    /// `-v`: log connections the server ends, and why.
    verbose: u8,
    stop: Arc<AtomicBool>,
    /// Connections by token (index + FIRST_CONN); `None` is a free slot.
    conns: Vec<Option<(Conn, SocketAddr)>>,
    /// Connections that yielded with work left ([`Conn::yielded`]), run
    /// again after the next poll's events.
    again: Vec<usize>,
    free: Vec<usize>,
}

impl Worker {
    fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        // Whether events were handled since reclamation was flushed.
        let mut worked = false;
        while !self.stop.load(Ordering::SeqCst) {
            // With connections to run again, only look for events.
            let timeout = if self.again.is_empty() { None } else { Some(std::time::Duration::ZERO) };
            if timeout.is_none() && std::mem::take(&mut worked) {
                // About to wait: what this thread retired goes to the
                // collector first (`Store::flush_reclamation`).
                self.store.flush_reclamation();
            }
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                break;
            }
            let again = std::mem::take(&mut self.again);
            worked |= !events.is_empty() || !again.is_empty();
            for event in events.iter() {
                match event.token() {
                    WAKER => self.adopt(),
                    Token(t) => self.ready(t - FIRST_CONN, event.is_read_closed() || event.is_error()),
                }
            }
            for index in again {
                // (Unless an event of this round ran it again already.)
                if !self.again.contains(&index) {
                    self.ready(index, false);
                }
            }
        }
        let open = self.conns.iter().filter(|c| c.is_some()).count() as u64;
        self.conns.clear();
        // Streams handed over but never adopted.
        let queued = self.rx.try_iter().count() as u64;
        self.store.counters().curr_connections.fetch_sub(open + queued, Ordering::SeqCst);
    }

    /// Registers the connections the listener handed over.
    fn adopt(&mut self) {
        while let Ok((stream, peer)) = self.rx.try_recv() {
            let index = self.free.pop().unwrap_or_else(|| {
                self.conns.push(None);
                self.conns.len() - 1
            });
            let mut conn = Conn::with_auth(stream, self.auth.clone());
            if self
                .poll
                .registry()
                .register(conn.stream_mut(), Token(index + FIRST_CONN), Conn::INITIAL_INTEREST)
                .is_err()
            {
                self.free.push(index);
                self.store.counters().curr_connections.fetch_sub(1, Ordering::SeqCst);
                if self.verbose > 0 {
                    eprintln!("dlht-server: connection from {peer}: could not register it");
                }
                continue;
            }
            self.conns[index] = Some((conn, peer));
        }
    }

    fn ready(&mut self, index: usize, read_closed: bool) {
        let Some(Some((conn, peer))) = self.conns.get_mut(index) else { return };
        let (state, interest) = conn.ready(&self.store, &self.limits, read_closed);
        let keep = state == State::Open
            && (interest == conn.interest()
                || self
                    .poll
                    .registry()
                    .reregister(conn.stream_mut(), Token(index + FIRST_CONN), interest)
                    .is_ok());
        if keep {
            conn.set_interest(interest);
            if conn.yielded() {
                self.again.push(index);
            }
            return;
        }
        if self.verbose > 0 {
            if let Some(reason) = conn.close_reason() {
                eprintln!("dlht-server: connection from {peer} closed: {reason}");
            }
        }
        let _ = self.poll.registry().deregister(conn.stream_mut());
        self.conns[index] = None;
        self.free.push(index);
        self.store.counters().curr_connections.fetch_sub(1, Ordering::SeqCst);
    }
}
