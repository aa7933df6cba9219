//! The dlht-server cache served by tokio instead of the server's own mio
//! event loops: a tool for measuring the server's choice of event loop
//! (threads that each run a mio loop over their connections, against
//! tokio), not a product. See `docs/results/issue24-tokio/`.
//!
//! Each connection is one task that does what `conn.rs` does: read into a
//! buffer (zeroing the read room as `conn.rs` does, so that only the event
//! loop differs), parse every complete command, run pipelines through
//! `Store::prefetch` then `Store::execute`, answer `Parsed::Error` and
//! `Parsed::Swallow` the same way, then `write_all` the replies (the await
//! is the backpressure: a client that does not read is not read). No `-Y`,
//! `-c` or `-v`.
//!
//! Modes: a multi-thread runtime with `-t` workers (the default), or
//! `--current-thread-per-core`: `-t` threads, each a current-thread runtime
//! accepting its own share from the one listening socket.
//!
//! ```text
//! cargo run --release -p dlht-server --example tokio_server -- -p 11311 -t 1
//! ```

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use clap::Parser;
use dlht_server::clock::Clock;
use dlht_server::config::Config;
use dlht_server::protocol::reply;
use dlht_server::protocol::text::{parse, Limits, Parsed, BINARY_REQUEST_MAGIC};
use dlht_server::store::{Outcome, Store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Commands of a pipeline parsed ahead and prefetched together (as conn.rs).
const PIPELINE: usize = 16;
/// How much free space a read asks for at least, and at most (as conn.rs).
const READ_CHUNK: usize = 16 * 1024;
const MAX_READ: usize = 256 * 1024;

#[derive(Parser, Debug)]
#[command(about = "dlht-server's cache on tokio (to measure the server's own event loop against)")]
struct Args {
    /// TCP port to listen on.
    #[arg(short = 'p', long = "port", default_value_t = 11211)]
    port: u16,
    /// Interface to listen on.
    #[arg(short = 'l', long = "listen", default_value = "127.0.0.1")]
    listen: String,
    /// Worker threads (runtimes, with --current-thread-per-core).
    #[arg(short = 't', long = "threads", default_value_t = 4)]
    threads: u32,
    /// Memory limit in MiB.
    #[arg(short = 'm', long = "memory-limit", default_value_t = 64)]
    memory_limit: u64,
    /// One current-thread runtime per thread instead of one multi-thread runtime.
    #[arg(long = "current-thread-per-core")]
    current_thread_per_core: bool,
}

fn main() -> io::Result<()> {
    let args = Args::parse();
    let config = Config {
        port: args.port,
        listen: args.listen.clone(),
        threads: args.threads.max(1),
        memory_limit: args.memory_limit,
        ..Config::default()
    };
    config.validate().map_err(io::Error::other)?;
    let store = Arc::new(Store::new(Clock::system(), config.settings()));
    let _crawler = store.start_crawler()?;
    let limits = config.limits();
    let listener = std::net::TcpListener::bind((config.listen.as_str(), config.port))?;
    listener.set_nonblocking(true)?;
    let threads = config.threads as usize;
    if args.current_thread_per_core {
        let mut handles = Vec::new();
        for i in 0..threads {
            let (listener, store) = (listener.try_clone()?, Arc::clone(&store));
            let rt = tokio::runtime::Builder::new_current_thread().enable_io().build()?;
            let thread = std::thread::Builder::new()
                .name(format!("tokio-ct-{i}"))
                .spawn(move || rt.block_on(accept_loop(listener, store, limits)))?;
            handles.push(thread);
        }
        for h in handles {
            h.join().expect("runtime thread panicked")?;
        }
        Ok(())
    } else {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads).enable_io().build()?;
        rt.block_on(accept_loop(listener, store, limits))
    }
}

/// Accepts connections and spawns one task each (on the current runtime).
async fn accept_loop(listener: std::net::TcpListener, store: Arc<Store>, limits: Limits) -> io::Result<()> {
    let listener = TcpListener::from_std(listener)?;
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of descriptors and the like (no "time" feature to sleep).
            Err(_) => {
                tokio::task::yield_now().await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let store = Arc::clone(&store);
        let counters = store.counters();
        counters.curr_connections.fetch_add(1, Ordering::SeqCst);
        counters.total_connections.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let _ = serve(stream, &store, &limits).await;
            store.counters().curr_connections.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// One connection's state between reads.
#[derive(Default)]
struct Conn {
    input: Vec<u8>,
    out: Vec<u8>,
    /// Bytes of a refused data block still to be discarded.
    swallow: usize,
    /// Close once `out` is sent.
    closing: bool,
    /// No input byte looked at yet (binary-protocol check).
    fresh: bool,
}

async fn serve(mut stream: TcpStream, store: &Store, limits: &Limits) -> io::Result<()> {
    let mut c = Conn { input: Vec::with_capacity(READ_CHUNK), fresh: true, ..Conn::default() };
    let bound = limits.max_item_size.saturating_add(1024 * 1024).max(16 * 1024 * 1024);
    loop {
        if c.swallow == 0 && c.input.len() >= bound {
            return Ok(()); // "command line too long", as conn.rs
        }
        let len = c.input.len();
        let room = (c.input.capacity() - len).clamp(READ_CHUNK, MAX_READ);
        c.input.resize(len + room, 0);
        let n = stream.read(&mut c.input[len..]).await;
        c.input.truncate(len + *n.as_ref().unwrap_or(&0));
        if n? == 0 {
            return Ok(());
        }
        c.process(store, limits);
        if !c.out.is_empty() {
            stream.write_all(&c.out).await?;
            c.out.clear();
        }
        if c.closing {
            return Ok(());
        }
    }
}

impl Conn {
    /// conn.rs's `process`, without `-Y` and without the output bound (the
    /// output is written out, awaiting, after every read).
    fn process(&mut self, store: &Store, limits: &Limits) {
        let Conn { input, out, swallow, closing, fresh } = self;
        let mut pos = (*swallow).min(input.len());
        *swallow -= pos;
        while pos < input.len() && !*closing {
            if std::mem::take(fresh) && input[pos] == BINARY_REQUEST_MAGIC {
                out.extend_from_slice(reply::ERROR);
                *closing = true;
                break;
            }
            match parse(&input[pos..], limits) {
                Parsed::Incomplete => break,
                Parsed::Command { command, consumed } => {
                    pos += consumed;
                    if pos == input.len() {
                        *closing |= store.execute(&command, out) == Outcome::Close;
                        continue;
                    }
                    let mut batch = Vec::with_capacity(PIPELINE);
                    batch.push(command);
                    while batch.len() < PIPELINE && pos < input.len() {
                        match parse(&input[pos..], limits) {
                            Parsed::Command { command, consumed } => {
                                pos += consumed;
                                batch.push(command);
                            }
                            _ => break,
                        }
                    }
                    batch.iter().for_each(|c| store.prefetch(c));
                    for command in &batch {
                        if store.execute(command, out) == Outcome::Close {
                            *closing = true;
                            break;
                        }
                    }
                }
                Parsed::Error { reply, consumed, close } => {
                    out.extend_from_slice(reply);
                    pos += consumed;
                    *closing |= close;
                }
                Parsed::BadDataChunk { reply, consumed } => {
                    store.count_bad_data_chunk();
                    out.extend_from_slice(reply);
                    pos += consumed;
                }
                Parsed::Swallow { reply, line, remaining } => {
                    out.extend_from_slice(reply);
                    pos += line;
                    let skip = remaining.min(input.len() - pos);
                    pos += skip;
                    *swallow = remaining - skip;
                }
                Parsed::Refused { unlink, reply, line, remaining } => {
                    store.refuse_too_large(unlink.as_ref());
                    out.extend_from_slice(reply);
                    pos += line;
                    let skip = remaining.min(input.len() - pos);
                    pos += skip;
                    *swallow = remaining - skip;
                }
            }
        }
        input.drain(..pos);
    }
}
