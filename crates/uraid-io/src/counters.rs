//! Per-member I/O counters: what the array exposes as `uraid stats` and what tests assert exactly.
//!
//! Counting happens when a backend accepts an I/O (at submit), so a count never depends on when
//! completions are reaped; a failed I/O counts in its own kind and again in `errors`. The counters
//! are atomics behind an `Arc` so that a stats reader on another thread can snapshot them while
//! the driver thread runs.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::member::IoOp;

#[derive(Debug, Default)]
pub struct MemberCounters {
    read_ios: AtomicU64,
    write_ios: AtomicU64,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
    flushes: AtomicU64,
    discards: AtomicU64,
    discard_bytes: AtomicU64,
    errors: AtomicU64,
}

/// A plain copy of the counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountersSnapshot {
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub flushes: u64,
    pub discards: u64,
    pub discard_bytes: u64,
    pub errors: u64,
}

impl MemberCounters {
    /// Counts one I/O of `len_bytes` accepted by a member.
    pub fn record_submit(&self, op: IoOp, len_bytes: usize) {
        let len = len_bytes as u64;
        // Relaxed: each counter is independent, and a snapshot taken while I/O runs is only
        // required to be some recent value of each.
        match op {
            IoOp::Read => {
                self.read_ios.fetch_add(1, Ordering::Relaxed);
                self.read_bytes.fetch_add(len, Ordering::Relaxed);
            }
            IoOp::Write { .. } => {
                self.write_ios.fetch_add(1, Ordering::Relaxed);
                self.write_bytes.fetch_add(len, Ordering::Relaxed);
            }
            IoOp::Flush => {
                self.flushes.fetch_add(1, Ordering::Relaxed);
            }
            IoOp::Discard => {
                self.discards.fetch_add(1, Ordering::Relaxed);
                self.discard_bytes.fetch_add(len, Ordering::Relaxed);
            }
        }
    }

    /// Counts one I/O that completed with an error.
    pub fn record_error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    #[must_use]
    pub fn snapshot(&self) -> CountersSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CountersSnapshot {
            read_ios: get(&self.read_ios),
            write_ios: get(&self.write_ios),
            read_bytes: get(&self.read_bytes),
            write_bytes: get(&self.write_bytes),
            flushes: get(&self.flushes),
            discards: get(&self.discards),
            discard_bytes: get(&self.discard_bytes),
            errors: get(&self.errors),
        }
    }
}

impl CountersSnapshot {
    /// The element-wise sum, for array totals.
    #[must_use]
    pub fn sum(self, o: CountersSnapshot) -> CountersSnapshot {
        CountersSnapshot {
            read_ios: self.read_ios + o.read_ios,
            write_ios: self.write_ios + o.write_ios,
            read_bytes: self.read_bytes + o.read_bytes,
            write_bytes: self.write_bytes + o.write_bytes,
            flushes: self.flushes + o.flushes,
            discards: self.discards + o.discards,
            discard_bytes: self.discard_bytes + o.discard_bytes,
            errors: self.errors + o.errors,
        }
    }
}
