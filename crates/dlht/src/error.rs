//! Errors: what can go wrong without anything being lost.

use core::fmt;

/// Why a map could not be created or grown. The map is unchanged when one
/// of these is returned: no key was lost, no operation half-done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The requested capacity does not fit the index format (more than
    /// 2^29 bins, a 32 GiB index) or overflows the address space.
    CapacityOverflow,
    /// The operating system or the allocator refused memory (for the index,
    /// or for an entry of an [`AllocMap`](crate::AllocMap)).
    AllocFailed {
        /// Bytes requested.
        bytes: usize,
    },
    /// More keys hash into one bin than a bin can hold (15), and growing the
    /// index cannot separate them: the hash function maps distinct keys to
    /// one hash. Only possible with a degenerate `BuildHasher`, such as the
    /// modulo hasher fed keys that are equal modulo 2^31.
    BinOverflow,
    /// This CPU cannot swap 16 bytes atomically without a lock (on x86-64:
    /// it lacks `cmpxchg16b`, which every x86-64 CPU since about 2008 has).
    /// dlht's slots need it; the map is not created.
    Unsupported,
    /// A namespace id beyond the last (see [`NAMESPACES`](crate::NAMESPACES)).
    NamespaceOutOfRange {
        /// The id asked for.
        namespace: usize,
    },
    /// A batch's output buffer is not as long as its requests.
    LengthMismatch {
        /// Requests (or keys) given.
        requests: usize,
        /// Responses (or outputs) given.
        responses: usize,
    },
    /// A key or value longer than a [`ByteMap`](crate::ByteMap) entry's
    /// length field holds (`u32::MAX` bytes).
    TooLong {
        /// Its length.
        bytes: usize,
    },
    /// A persistent map's file or directory could not be read, written or
    /// mapped (what was being done, and the operating system's reason).
    Io {
        /// The step that failed.
        what: &'static str,
        /// The operating system's reason.
        kind: std::io::ErrorKind,
    },
    /// A persistent map's file is not one dlht wrote, or was damaged
    /// (truncated, overwritten): nothing was changed in it.
    Corrupt {
        /// What is wrong.
        what: &'static str,
    },
    /// A persistent map's file is dlht's, but for another map: another
    /// layout version, key or value size, kind of map or hash function.
    /// Nothing was changed in it.
    Incompatible {
        /// What differs.
        what: &'static str,
    },
    /// Another process (or another map of this one) has the persistent map
    /// open: a directory is opened by one map at a time.
    Locked,
    /// A persistent map holds as many shadow inserts as its file has room
    /// to record (each until it commits or aborts).
    ShadowLimit {
        /// The most a map holds at once.
        limit: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::CapacityOverflow => write!(f, "requested capacity is too large for a dlht index"),
            Error::AllocFailed { bytes } => write!(f, "could not allocate {bytes} bytes"),
            Error::NamespaceOutOfRange { namespace } => {
                write!(f, "namespace {namespace} is out of range: a map has namespaces 0 to {}", crate::NAMESPACES - 1)
            }
            Error::LengthMismatch { requests, responses } => write!(
                f,
                "a batch of {requests} requests needs as many response slots, not {responses}"
            ),
            Error::Unsupported => {
                write!(f, "this CPU has no lock-free 16-byte compare-and-swap (x86-64: cmpxchg16b), which dlht needs")
            }
            Error::TooLong { bytes } => {
                write!(f, "a key or value of {bytes} bytes is longer than the {} a byte map holds", u32::MAX)
            }
            Error::Io { what, kind } => write!(f, "{what}: {kind}"),
            Error::Corrupt { what } => write!(f, "not a valid dlht map file: {what}"),
            Error::Incompatible { what } => write!(f, "a dlht map file of another kind: {what}"),
            Error::Locked => write!(f, "the map directory is open in another map or process"),
            Error::ShadowLimit { limit } => {
                write!(f, "a persistent map holds at most {limit} shadow inserts at once")
            }
            Error::BinOverflow => write!(
                f,
                "more than 15 keys share one bin even at the largest index size; the hash function does not separate them"
            ),
        }
    }
}

impl std::error::Error for Error {}
