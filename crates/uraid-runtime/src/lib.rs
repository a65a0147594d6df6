//! uraid's multi-threaded runtime: the sans-IO engine (`uraid_core::array::Array`) run by
//! several worker threads with no global lock. md runs every stripe through one raid5d thread,
//! which is the bottleneck of seeds 000 and 002; here each worker owns one `Array`, one
//! `uraid_io::Driver` and its own instance of every member (its own io_uring rings), and serves
//! the rows (full stripes) `row % workers == index`.
//!
//! - `runtime`: `Runtime::start`, `submit` with a completion callback, blocking helpers,
//!   array-wide state (failed members, FLUSH on every worker), stats, shutdown.
//! - `completions`: a turn's completions delivered as a batch, work deferred to its end.
//! - `plug`: a submitting thread's burst held and sent to each worker as one message.
//! - `request`: cutting requests at row boundaries and putting them back together.
//! - `worker`: one worker's loop.
//! - `log`: where the partial parity log's rings are on the members.
//! - `safe_mode`: md's safe mode, the gate that has a clean array marked active before a
//!   write.
//! - `source`: where each worker's member instances come from (files opened again per worker,
//!   or `shared_memory`, a memory medium every worker's handle shares).
//!
//! Invariants: a row is only ever handled by one worker, so no stripe head exists twice and no
//! two engines write the same parity; a member failed by any engine is failed in every engine
//! before that engine plans its next request.

pub mod completions;
mod lifecycle;
pub mod log;
pub mod member_set;
mod plug;
mod request;
pub mod runtime;
pub mod safe_mode;
pub mod shared_memory;
pub mod source;
mod status;
mod wide;
mod worker;

pub use completions::after_completions;
pub use log::LogSetup;
pub use member_set::MemberSet;
pub use request::{Callback, Completed, Op};
pub use runtime::{
    MIN_STRIPE_HEADS_PER_WORKER, Runtime, RuntimeConfig, RuntimeStats, WriteIntentSetup,
};
pub use shared_memory::{SharedMemory, SharedMemoryMember};
pub use source::{FileSource, MemberSource, SharedMemorySource};
pub use status::STATUS_BYTES_MAX;
pub use uraid_core::array::Extent;

use std::sync::Arc;
use thiserror::Error;
use uraid_core::array::ArrayError;

#[derive(Clone, Debug, Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// The engine refused or failed the request (out of range, beyond redundancy, ...).
    #[error(transparent)]
    Array(#[from] ArrayError),
    #[error("offset {offset_bytes} or length {len_bytes} is not a whole number of sectors")]
    Unaligned { offset_bytes: u64, len_bytes: u64 },
    #[error("opening member {member} for worker {worker}: {source}")]
    Open {
        worker: usize,
        member: usize,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("the member source has {found} members, the geometry {expected}")]
    MemberCount { expected: usize, found: usize },
    #[error("worker {worker} stopped serving: {message}")]
    Worker { worker: usize, message: String },
    #[error("the runtime shut down (or a worker died) before the request finished")]
    Gone,
    /// `Op::ReadSegments` / `WriteSegments` with buffers not cut as `Runtime::segment_bytes`
    /// says.
    #[error("request buffers of {found:?} bytes, where the array cuts {expected:?}")]
    Segments { expected: Vec<usize>, found: Vec<usize> },
    #[error("spawning worker {worker}: {message}")]
    Spawn { worker: usize, message: String },
    #[error(
        "partial parity log rings of {ring_bytes} bytes hold too few stripe heads of {unit_bytes} bytes"
    )]
    LogTooSmall { ring_bytes: u64, unit_bytes: u64 },
    #[error("the array is read-only")]
    ReadOnly,
    #[error("the array takes no discard: {member} cannot discard a range so that it reads zeros")]
    DiscardUnsupported { member: String },
}
