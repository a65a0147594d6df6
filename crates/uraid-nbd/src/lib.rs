//! uraid's NBD server: exports a `BlockBackend` (the uraid runtime, or memory) over TCP or
//! Unix sockets with the NBD protocol (the NBD project's `doc/proto.md`), with std threads.
//!
//! - `wire`: the protocol's numbers and fixed-size messages.
//! - `handshake`: fixed newstyle negotiation (EXPORT_NAME, INFO, GO, LIST, ABORT,
//!   STRUCTURED_REPLY, LIST_ and SET_META_CONTEXT with `meta_context`; anything else is
//!   NBD_REP_ERR_UNSUP).
//! - `meta_context`: the base:allocation metadata context (NBD_CMD_BLOCK_STATUS).
//! - `transmission`: one connection's requests, pipelined; replies as completions arrive.
//! - `output`: a connection's replies, sent by the threads that complete them, in batches.
//! - `server`: listeners, threads, shutdown with drain, stats.
//! - `backend`: the `BlockBackend` trait, its impl for `uraid_runtime::Runtime`, `MemoryBackend`.
//! - `client`: a minimal blocking client (tests, crash tests).
//!
//! Fault model: any client may send anything, or vanish at any byte. A protocol violation
//! closes that connection only; other connections keep being served. A write is acknowledged
//! only after the backend completed it, and a flush only after the backend's flush, so what
//! a client saw acknowledged is what the array holds.

#![forbid(unsafe_code)]

mod backend;
pub mod client;
#[doc(hidden)]
pub mod fuzzing;
mod handshake;
mod meta_context;
mod output;
mod pool;
mod reply;
mod server;
mod socket;
mod stats;
mod transmission;
mod window;
pub mod wire;

pub use backend::{
    BackendDone, BackendError, BackendOp, BlockBackend, BlockExtent, MemoryBackend, SegmentsDone,
    SegmentsOp, StatusDone,
};
pub use server::{ListenAddr, Server, ServerHandle, StatsSource};
pub use stats::ServerStats;

use thiserror::Error;

/// The export's name when none is configured (the empty name selects it too).
pub const DEFAULT_EXPORT_NAME: &str = "uraid";
/// The largest request served by default: 32 MiB, what the protocol calls safe for any client.
pub const DEFAULT_BLOCK_BYTES_MAX: u32 = 32 << 20;

#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Clients may ask for this name or for "" (the default export).
    pub export_name: String,
    /// Sent as NBD_INFO_DESCRIPTION when a client asks.
    pub description: Option<String>,
    /// NBD_FLAG_READ_ONLY: writes, trims and zeroing fail with EPERM.
    pub read_only: bool,
    /// The array's chunk or full stripe, overriding the backend's; rounded down to a power
    /// of two, as NBD requires.
    pub preferred_block_bytes: Option<u32>,
    /// The maximum request length (a multiple of 512): longer reads, writes and zeroing fail
    /// with EINVAL.
    pub block_bytes_max: u32,
    /// How long a client may take from its connect to the end of the handshake before it is
    /// disconnected (qemu-nbd's --handshake-limit, 10 s by default there too): each
    /// connection holds a thread and a socket, and one that never finishes would hold them
    /// for ever. `None`: no limit.
    pub handshake_limit: Option<std::time::Duration>,
    /// Connections served at once; a client beyond them is told why (NBD_REP_ERR_POLICY
    /// to its options) and closed on. Each holds a thread and up to its share of the
    /// in-flight bytes, at least 32 MiB, so without a limit any number of clients could
    /// make the server as large as they like. `None`: no limit.
    pub connections_max: Option<usize>,
    /// Told of each client turned away over `connections_max`, with how many have been in
    /// all: the client reads the reason, and this is how the operator does (the server's
    /// log). Called on the accept thread: it must not block.
    pub over_limit: Option<OverLimitHook>,
}

/// `ServerConfig::over_limit`.
#[derive(Clone)]
pub struct OverLimitHook(pub std::sync::Arc<dyn Fn(u64) + Send + Sync>);

impl std::fmt::Debug for OverLimitHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OverLimitHook")
    }
}

/// `ServerConfig::connections_max` by default: more than the kernel client, fio's jobs or
/// nbdcopy open (qemu-nbd allows one unless told otherwise, nbdkit any number).
pub const DEFAULT_CONNECTIONS_MAX: usize = 64;

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            export_name: DEFAULT_EXPORT_NAME.into(),
            description: None,
            read_only: false,
            preferred_block_bytes: None,
            block_bytes_max: DEFAULT_BLOCK_BYTES_MAX,
            handshake_limit: Some(std::time::Duration::from_secs(10)),
            connections_max: Some(DEFAULT_CONNECTIONS_MAX),
            over_limit: None,
        }
    }
}

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ServerError {
    #[error("maximum block size {0} is not a positive multiple of 512")]
    BlockBytesMax(u32),
    #[error("export size {0} is not a whole number of 512-byte blocks")]
    SizeUnaligned(u64),
    #[error("export name of {0} bytes is longer than NBD's 4096")]
    NameTooLong(usize),
}
