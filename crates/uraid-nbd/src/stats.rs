//! What the server counted: connections and requests, across all its listeners.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of the counters (`ServerHandle::stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub connections_accepted: u64,
    /// Connections whose thread has not finished yet (handshake, transmission or drain).
    pub connections_active: u64,
    /// Connections that reached transmission (NBD_OPT_GO or NBD_OPT_EXPORT_NAME).
    pub connections_transmitting: u64,
    /// Connections closed for breaking the protocol (bad magic, bad flags, ...).
    pub connections_refused: u64,
    /// Connections turned away because `ServerConfig::connections_max` were open.
    pub connections_over_limit: u64,
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub trims: u64,
    pub write_zeroes: u64,
    /// NBD_CMD_BLOCK_STATUS requests.
    pub block_status: u64,
    /// Replies that carried an error, whatever the command.
    pub errors: u64,
    pub read_bytes: u64,
    pub written_bytes: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub connections_accepted: AtomicU64,
    pub connections_active: AtomicU64,
    pub connections_transmitting: AtomicU64,
    pub connections_refused: AtomicU64,
    pub connections_over_limit: AtomicU64,
    pub reads: AtomicU64,
    pub writes: AtomicU64,
    pub flushes: AtomicU64,
    pub trims: AtomicU64,
    pub write_zeroes: AtomicU64,
    pub block_status: AtomicU64,
    pub errors: AtomicU64,
    pub read_bytes: AtomicU64,
    pub written_bytes: AtomicU64,
}

pub(crate) fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Counters {
    pub fn snapshot(&self) -> ServerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ServerStats {
            connections_accepted: get(&self.connections_accepted),
            connections_active: get(&self.connections_active),
            connections_transmitting: get(&self.connections_transmitting),
            connections_refused: get(&self.connections_refused),
            connections_over_limit: get(&self.connections_over_limit),
            reads: get(&self.reads),
            writes: get(&self.writes),
            flushes: get(&self.flushes),
            trims: get(&self.trims),
            write_zeroes: get(&self.write_zeroes),
            block_status: get(&self.block_status),
            errors: get(&self.errors),
            read_bytes: get(&self.read_bytes),
            written_bytes: get(&self.written_bytes),
        }
    }
}
