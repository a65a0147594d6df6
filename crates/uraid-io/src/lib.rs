//! uraid's member runtime: the devices an array's members live on, and the loop that drives the
//! sans-IO engine (`uraid_core::array::Array`) against them.
//!
//! - `member`: the interface (many I/Os in flight, completions reaped later) and its one unsafe
//!   contract: a submitted buffer (each segment of an I/O vector) stays valid until its
//!   completion is reaped.
//! - Backends: `MemoryMember`; `FileMember` (io_uring, O_DIRECT, aligned bounce buffers).
//! - Wrappers: `Throttled` (a disk's bandwidth, IOPS, latency and seeks on an injectable clock)
//!   and `Faulty` (failing ranges, fail after N, failed member, power cut).
//! - `Driver`: one thread, batched submission, no thread per I/O; contiguous member I/Os merged
//!   into one vectored I/O.
//! - `identity`: which file or device a path names, so that a member given twice (by another
//!   path, a link) is refused.
//! - `rotational`: whether a member's disk seeks, as the kernel says.
//! - `MemberCounters`: per-member I/O counts, exact and cheap to read from another thread.
//! - `StatsReport`: the engine's, the stripe cache's and the members' counters as one JSON
//!   document, published to a file that `uraid stats` reads.

/// `eprintln!` that never panics. eprintln! panics when stderr is gone (a closed pipe:
/// EPIPE, since Rust ignores SIGPIPE); in a serve whose log reader went away that killed the
/// signal thread at its first message, and SIGTERM then went unheard (seen with `| head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod allocation;
pub mod buffer_pool;
pub mod clock;
pub mod counters;
pub mod driver;
pub mod faulty;
pub mod fd_limit;
mod file_open;
pub mod file_space;
mod file_sync;
pub mod identity;
pub mod known_bad;
pub mod member;
pub mod member_file;
pub mod member_memory;
pub mod power;
pub mod pullable;
pub mod replacing;
mod ring;
pub mod rotational;
pub mod stats;
pub mod throttled;
pub mod unix_socket;

pub use buffer_pool::{AlignedBuf, BufferPool};
pub use clock::{Clock, ManualClock, RealClock};
pub use counters::{CountersSnapshot, MemberCounters};
pub use driver::{Driver, DriverError, MergeLimits};
pub use faulty::Faulty;
pub use identity::{
    FileIdentity, check_member_kind, held_by_a_server, open_member_path, same_file_message,
    same_file_twice,
};
pub use known_bad::{BadBlockList, KnownBad, PersistBadBlocks};
pub use member::{
    BufPtr, FailedIo, IoCompletion, IoFailure, IoOp, IoRequest, MediaAccess, Member, MemberInfo,
    Segment,
};
pub use member_file::{FileMember, FileOptions};
pub use member_memory::{Medium, MemoryMember};
pub use power::PowerCutReport;
pub use pullable::Pullable;
pub use replacing::{Mode as ReplacementMode, ReplacementControl, Replacing};
pub use stats::{CacheReport, StatsReport};
pub use throttled::{DiskModel, Throttled};
