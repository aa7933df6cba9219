//! One client connection: its input buffer, the parse-and-execute loop and
//! its pending output, with backpressure (a connection whose client does not
//! read its replies is not read either, so its buffers stay bounded), and
//! `-Y` authentication (a connection that has not logged in may only log
//! in: see [`crate::auth`]).

use std::io::{self, Read, Write};
use std::sync::Arc;

use mio::net::TcpStream;
use mio::Interest;

use crate::auth::{self, AuthFile, Login};
use crate::protocol::reply;
use crate::protocol::text::{parse, parse_resuming, Command, Keys, Limits, Parsed, BINARY_REQUEST_MAGIC};
use crate::store::{Outcome, Progress, Store};

/// Commands of a pipeline parsed ahead and prefetched together.
const PIPELINE: usize = 16;

/// While more than this many reply bytes wait to be sent, the connection's
/// input is neither parsed nor read.
pub const MAX_PENDING_OUTPUT: usize = 4 * 1024 * 1024;

/// Passes over backlogged input one readiness event may make (see
/// [`Conn::yielded`]).
const BACKLOG_PASSES_PER_EVENT: usize = 1;

/// How much free space a read asks for at least.
const READ_CHUNK: usize = 16 * 1024;
/// The most one read asks for.
const MAX_READ: usize = 256 * 1024;
/// A buffer left empty with more capacity than this is shrunk, so that an
/// idle connection that once moved a large value does not keep its memory.
const SHRINK_ABOVE: usize = 1024 * 1024;

/// Whether a connection stays open after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Keep it registered.
    Open,
    /// Drop it: the client left, an I/O error, or a `quit` or fatal
    /// protocol error whose replies are now sent.
    Closed,
}

/// One client connection (memcached's `conn`).
pub struct Conn {
    stream: TcpStream,
    /// Received bytes not yet parsed (the front of the stream).
    input: Vec<u8>,
    /// Replies; `out[written..]` is still to be sent.
    out: Vec<u8>,
    written: usize,
    /// Bytes of a refused data block still to be discarded as they arrive.
    swallow: usize,
    /// The reply to that refusal, sent once the block is swallowed, as
    /// memcached sends it (a client that never sends the block gets none).
    swallowed_reply: &'static [u8],
    /// No more input is parsed: close once `out` is sent.
    closing: bool,
    /// Parsing stopped at [`MAX_PENDING_OUTPUT`] with input left to parse.
    backlogged: bool,
    /// The multi-key get at the front of `input` that stopped at
    /// [`MAX_PENDING_OUTPUT`]: the rest of its reply is built as the client
    /// reads.
    paused: Option<Paused>,
    /// The last event stopped with work left that no readiness event will
    /// announce (see [`Conn::yielded`]).
    yielded: bool,
    /// An event said the peer closed its side (or the socket failed): read
    /// to the end from now on, as no later event may say it again.
    read_closed: bool,
    /// The peer closed its side: nothing more arrives, but every complete
    /// command it sent is still answered before the connection closes (a
    /// client may half-close after its last request and read the replies).
    eof: bool,
    /// The interest the stream is registered with.
    interest: Interest,
    /// The users, while the connection has still to log in (`-Y`).
    auth: Option<Arc<AuthFile>>,
    /// No input byte has been looked at yet (for the binary-protocol check).
    fresh: bool,
    /// Why the server closed the connection, when it was not the client's
    /// doing (for `-v`).
    close_reason: Option<String>,
    /// Bytes at the front of `input` known to hold no "\n": the command
    /// there is a line still arriving, searched for its end only in what
    /// comes next (a 16 MiB get line arrives in hundreds of reads).
    newline_free: usize,
}

impl Conn {
    /// A connection on an accepted stream, registered (by the caller) for
    /// [`Conn::INITIAL_INTEREST`].
    pub fn new(stream: TcpStream) -> Self {
        Conn::with_auth(stream, None)
    }

    /// A connection that must log in first with a user of `auth` (`-Y`),
    /// or, with `None`, one that need not.
    pub fn with_auth(stream: TcpStream, auth: Option<Arc<AuthFile>>) -> Self {
        Conn {
            stream,
            input: Vec::with_capacity(READ_CHUNK),
            out: Vec::new(),
            written: 0,
            swallow: 0,
            swallowed_reply: b"",
            closing: false,
            backlogged: false,
            paused: None,
            yielded: false,
            read_closed: false,
            eof: false,
            interest: Self::INITIAL_INTEREST,
            auth,
            fresh: true,
            close_reason: None,
            newline_free: 0,
        }
    }

    /// Whether the connection still has to log in.
    pub fn needs_login(&self) -> bool {
        self.auth.is_some()
    }

    /// Why the server (not the client) ended the connection: an I/O error,
    /// or input it refuses (for `-v` logging). `None` while open, and when
    /// the client left or sent `quit`.
    pub fn close_reason(&self) -> Option<&str> {
        self.close_reason.as_deref()
    }

    /// The interest a new connection is registered with.
    pub const INITIAL_INTEREST: Interest = Interest::READABLE;

    /// The stream, to register and deregister it.
    pub fn stream_mut(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// The interest the stream is registered with now.
    pub fn interest(&self) -> Interest {
        self.interest
    }

    fn pending(&self) -> usize {
        self.out.len() - self.written
    }

    /// Handles a readiness event (of any kind: reading, parsing and writing
    /// are all retried, as mio's events are edge-triggered); `read_closed`
    /// if the event said the peer closed its side or the socket failed
    /// (then reading goes on to the end of the input). Returns the state
    /// and the interest the stream should now be registered with.
    pub fn ready(&mut self, store: &Store, limits: &Limits, read_closed: bool) -> (State, Interest) {
        match self.drive(store, limits, read_closed) {
            Ok(State::Open) => {
                let wanted = if self.pending() > MAX_PENDING_OUTPUT {
                    Interest::WRITABLE
                } else if self.pending() > 0 {
                    Interest::READABLE | Interest::WRITABLE
                } else {
                    Interest::READABLE
                };
                (State::Open, wanted)
            }
            Ok(State::Closed) => (State::Closed, self.interest),
            Err(e) => {
                self.close_reason = Some(e.to_string());
                (State::Closed, self.interest)
            }
        }
    }

    /// Whether the last [`Conn::ready`] stopped with replies still to build
    /// (a long multi-get, or input parsed no further for its output) after
    /// its share of the event loop: the caller runs it again after the
    /// other connections' events, as no readiness event will come for it
    /// (memcached's `reqs_per_event`).
    pub fn yielded(&self) -> bool {
        self.yielded
    }

    /// Records the interest the caller registered the stream with.
    pub fn set_interest(&mut self, interest: Interest) {
        self.interest = interest;
    }

    fn drive(&mut self, store: &Store, limits: &Limits, read_closed: bool) -> io::Result<State> {
        self.yielded = false;
        self.read_closed |= read_closed;
        // Backlogged input (a long multi-get's rest) parsed per event: one
        // pass of up to MAX_PENDING_OUTPUT bytes of replies, then the other
        // connections' turn.
        let mut passes = BACKLOG_PASSES_PER_EVENT;
        loop {
            if !self.flush()? {
                // The client is not reading: stop unless there is little
                // pending, in which case more input may still be read. A
                // multi-get resumes only once its replies are all sent, so
                // that each resume builds a full MAX_PENDING_OUTPUT of them
                // (its line is parsed again at each).
                if self.closing || self.pending() > MAX_PENDING_OUTPUT || self.paused.is_some() {
                    return Ok(State::Open);
                }
            }
            if self.closing {
                return Ok(if self.pending() == 0 { State::Closed } else { State::Open });
            }
            if self.pending() > MAX_PENDING_OUTPUT {
                return Ok(State::Open);
            }
            if self.backlogged {
                // Commands left unparsed by backpressure go before any read.
                if passes == 0 {
                    self.yielded = true;
                    return Ok(State::Open);
                }
                passes -= 1;
                self.process(store, limits);
                continue;
            }
            if self.eof {
                // Every complete command is answered (a partial one is
                // dropped): close once the replies are sent.
                self.closing = true;
                continue;
            }
            if !self.input.is_empty() && self.swallow == 0 && self.input.len() >= input_bound(limits) {
                // An incomplete command larger than any valid one (only an
                // endless get line can do this): memcached would run out of
                // memory; close instead.
                self.close_reason = Some("command line too long".into());
                return Ok(State::Closed);
            }
            let len = self.input.len();
            // Read into the spare capacity (bounded, as it is zeroed first).
            let room = (self.input.capacity() - len).clamp(READ_CHUNK, MAX_READ);
            self.input.resize(len + room, 0);
            let read = self.stream.read(&mut self.input[len..]);
            match read {
                Ok(0) => {
                    self.input.truncate(len);
                    // The client left or half-closed (perhaps mid-command).
                    self.eof = true;
                }
                Ok(n) => {
                    self.input.truncate(len + n);
                    self.process(store, limits);
                    if n < room && !self.backlogged && !self.read_closed {
                        // A short read emptied the socket: bytes (or the
                        // peer's close) arriving later raise a new
                        // edge-triggered event, so the read that would only
                        // say WouldBlock is skipped — one system call per
                        // request fewer (tokio does the same). A close that
                        // came with this event is read to the end instead.
                        self.flush()?;
                        return Ok(if self.closing && self.pending() == 0 {
                            State::Closed
                        } else {
                            State::Open
                        });
                    }
                }
                Err(e) => {
                    self.input.truncate(len);
                    match e.kind() {
                        io::ErrorKind::WouldBlock => {
                            self.flush()?;
                            return Ok(if self.closing && self.pending() == 0 {
                                State::Closed
                            } else {
                                State::Open
                            });
                        }
                        io::ErrorKind::Interrupted => {}
                        _ => return Err(e),
                    }
                }
            }
        }
    }

    /// Parses and executes the complete commands at the front of the input,
    /// until the input runs out, a command closes the connection or the
    /// output passes [`MAX_PENDING_OUTPUT`]. With `--durable`, if any of
    /// them changed items, the replies wait for the disk ([`Store::durable`]).
    fn process(&mut self, store: &Store, limits: &Limits) {
        let Conn {
            input,
            out,
            swallow,
            swallowed_reply,
            closing,
            written,
            backlogged,
            paused,
            auth,
            fresh,
            close_reason,
            newline_free,
            ..
        } = self;
        *backlogged = false;
        let mut changed = false;
        let mut pos = 0;
        let skip = (*swallow).min(input.len());
        pos += skip;
        *swallow -= skip;
        if *swallow == 0 {
            out.extend_from_slice(core::mem::take(swallowed_reply));
        }
        'commands: while pos < input.len() && !*closing {
            if out.len() - *written > MAX_PENDING_OUTPUT {
                *backlogged = true;
                break;
            }
            // Replies past this bound wait for the client to read.
            let bound = *written + MAX_PENDING_OUTPUT;
            if let Some(p) = *paused {
                // The multi-get stopped here goes on, its line not parsed
                // again (up to 16 MiB of keys, each checked by a parse).
                let command = p.command(&input[pos..]);
                changed |= command.changes();
                match store.execute_within(&command, out, p.resume_at, bound) {
                    Progress::Paused { resume_at } => {
                        *paused = Some(Paused { resume_at, ..p });
                        *backlogged = true;
                        break;
                    }
                    Progress::Done(outcome) => {
                        *paused = None;
                        pos += p.consumed;
                        *closing |= outcome == Outcome::Close;
                    }
                }
                continue;
            }
            if std::mem::take(fresh) && input[pos] == BINARY_REQUEST_MAGIC {
                // A binary-protocol client, which this server does not
                // speak: answer as `memcached -B ascii` answers 0x80 at the
                // start of a line, then close, so that the client fails at
                // once instead of waiting for a binary reply (memcached -B
                // ascii waits for a "\n" that may never come).
                out.extend_from_slice(reply::ERROR);
                *closing = true;
                *close_reason = Some("binary protocol request (not supported)".into());
                break;
            }
            if let Some(users) = auth {
                match auth::parse_login(&input[pos..]) {
                    Login::Incomplete => break,
                    Login::Close => {
                        *closing = true;
                        *close_reason = Some("unauthenticated input too long".into());
                    }
                    Login::Reply { reply, consumed } => {
                        out.extend_from_slice(reply);
                        pos += consumed;
                    }
                    Login::Credentials { user, password, consumed } => {
                        pos += consumed;
                        if users.check(user, password) {
                            out.extend_from_slice(auth::STORED);
                            *auth = None;
                        } else {
                            out.extend_from_slice(auth::AUTHENTICATION_FAILURE);
                        }
                    }
                }
                continue;
            }
            // The hint holds for the command at the front only.
            let hint = if pos == 0 { core::mem::take(newline_free) } else { 0 };
            let (parsed, free) = parse_resuming(&input[pos..], limits, hint);
            match parsed {
                Parsed::Incomplete => {
                    // Its bytes move to the front of `input` below.
                    *newline_free = free;
                    break;
                }
                Parsed::Command { command, consumed } => {
                    if pos + consumed == input.len() {
                        // The one command of this read.
                        changed |= command.changes();
                        match store.execute_within(&command, out, 0, bound) {
                            Progress::Paused { resume_at } => {
                                *paused = Some(Paused::of(&command, &input[pos..], consumed, resume_at));
                                *backlogged = true;
                                break 'commands;
                            }
                            Progress::Done(outcome) => {
                                pos += consumed;
                                *closing |= outcome == Outcome::Close;
                            }
                        }
                        continue;
                    }
                    // A pipeline: parse the commands behind this one,
                    // start loading all their keys' bins, then run them in
                    // order (their lookups overlap, as a multi-get's do).
                    // Whatever is not a complete command is left to the
                    // loop.
                    let mut batch = Vec::with_capacity(PIPELINE);
                    let mut end = pos + consumed;
                    batch.push((command, consumed));
                    while batch.len() < PIPELINE && end < input.len() {
                        match parse(&input[end..], limits) {
                            Parsed::Command { command, consumed } => {
                                end += consumed;
                                batch.push((command, consumed));
                            }
                            _ => break,
                        }
                    }
                    batch.iter().for_each(|(c, _)| store.prefetch(c));
                    for (command, consumed) in &batch {
                        changed |= command.changes();
                        match store.execute_within(command, out, 0, bound) {
                            Progress::Paused { resume_at } => {
                                *paused = Some(Paused::of(command, &input[pos..], *consumed, resume_at));
                                *backlogged = true;
                                break 'commands;
                            }
                            Progress::Done(outcome) => {
                                pos += consumed;
                                if outcome == Outcome::Close {
                                    *closing = true;
                                    break;
                                }
                            }
                        }
                    }
                }
                Parsed::Error { reply, consumed, close } => {
                    out.extend_from_slice(reply);
                    pos += consumed;
                    if close {
                        // A line too long or an HTTP request: memcached
                        // closes too.
                        *closing = true;
                        *close_reason = Some("input memcached closes on (a line too long, HTTP)".into());
                    }
                }
                Parsed::BadDataChunk { reply, consumed } => {
                    store.count_bad_data_chunk();
                    out.extend_from_slice(reply);
                    pos += consumed;
                }
                Parsed::Swallow { reply, line, remaining } => {
                    pos += line;
                    let skip = remaining.min(input.len() - pos);
                    pos += skip;
                    *swallow = remaining - skip;
                    *swallowed_reply = reply;
                    if *swallow == 0 {
                        out.extend_from_slice(core::mem::take(swallowed_reply));
                    }
                }
                Parsed::Refused { unlink, reply, line, remaining } => {
                    store.refuse_too_large(unlink.as_ref());
                    changed = true;
                    pos += line;
                    let skip = remaining.min(input.len() - pos);
                    pos += skip;
                    *swallow = remaining - skip;
                    *swallowed_reply = reply;
                    if *swallow == 0 {
                        out.extend_from_slice(core::mem::take(swallowed_reply));
                    }
                }
            }
        }
        if changed && store.is_durable() {
            // One wait for all of this read's changes (and, through the
            // group commit, other connections'). The event loop waits too:
            // Redis's `appendfsync always` does the same.
            if let Err(e) = store.durable() {
                // Nothing of this read is acknowledged: the server stops
                // before any of its replies goes.
                crate::store::stop_on_lost_write(&e);
            }
        }
        input.drain(..pos);
        if input.is_empty() && input.capacity() > SHRINK_ABOVE {
            input.shrink_to(READ_CHUNK);
        }
    }

    /// Writes pending output until it is all sent (`true`) or the socket
    /// would block (`false`).
    fn flush(&mut self) -> io::Result<bool> {
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if self.written > self.out.len() / 2 {
                        self.out.drain(..self.written);
                        self.written = 0;
                    }
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.written = 0;
        if self.out.capacity() > SHRINK_ABOVE {
            self.out.shrink_to(SHRINK_ABOVE);
        }
        Ok(true)
    }
}

/// A multi-key get stopped at the output bound, at the front of the input:
/// where its key list lies in its line and what it is, so that it goes on
/// without parsing the line again.
#[derive(Clone, Copy, Debug)]
struct Paused {
    /// The command's bytes (line and "\r\n").
    consumed: usize,
    /// Its key list, from the command's first byte.
    keys: (usize, usize),
    /// get/gets (no exptime) or gat/gats.
    exptime: Option<i64>,
    cas: bool,
    /// Bytes of the key list answered (see [`Progress::Paused`]).
    resume_at: usize,
}

impl Paused {
    /// `command`, parsed from the front of `at` (`consumed` bytes), stopped
    /// `resume_at` bytes into its key list.
    fn of(command: &Command<'_>, at: &[u8], consumed: usize, resume_at: usize) -> Paused {
        let (keys, exptime, cas) = match command {
            Command::Get { keys, cas } => (keys, None, *cas),
            Command::Gat { exptime, keys, cas } => (keys, Some(*exptime), *cas),
            _ => unreachable!("dlht-server invariant: only a multi-key get pauses"),
        };
        let list = keys.as_bytes();
        let start = list.as_ptr() as usize - at.as_ptr() as usize;
        Paused { consumed, keys: (start, start + list.len()), exptime, cas, resume_at }
    }

    /// The command again, from the same bytes at the front of `at`.
    fn command<'a>(&self, at: &'a [u8]) -> Command<'a> {
        let keys = Keys::new(&at[self.keys.0..self.keys.1]);
        match self.exptime {
            None => Command::Get { keys, cas: self.cas },
            Some(exptime) => Command::Gat { exptime, keys, cas: self.cas },
        }
    }
}

/// The most unparsed input a connection may hold: a largest data block and
/// its line, or a (very long) get line.
fn input_bound(limits: &Limits) -> usize {
    limits.max_item_size.saturating_add(1024 * 1024).max(16 * 1024 * 1024)
}
