//! What a running array reports about itself: the engine's counters, the stripe cache's and
//! every member's, as one JSON document: what `uraid stats NAME` asks a running array for
//! over its control socket, and prints (`--json` keeps it, `--file` reads it back).

use crate::counters::CountersSnapshot;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::Path;
use uraid_core::array::{Array, ArrayStats};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsReport {
    pub engine: EngineStats,
    pub cache: CacheReport,
    /// In member (role) order.
    pub members: Vec<MemberReport>,
    /// The NBD server's counters, when the array is served over NBD (`uraid serve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbd: Option<NbdReport>,
}

/// What an NBD server counted since it started: connections and requests (`uraid-nbd`'s
/// `ServerStats`, with the connection limit in force). A copy of its fields, not the type:
/// the member runtime does not depend on a frontend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NbdReport {
    pub connections_active: u64,
    /// `None`: no limit.
    pub connections_max: Option<u64>,
    pub connections_accepted: u64,
    /// Turned away because `connections_max` were open.
    pub connections_over_limit: u64,
    /// Closed for breaking the protocol.
    pub connections_refused: u64,
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub trims: u64,
    pub write_zeroes: u64,
    /// NBD_CMD_BLOCK_STATUS requests answered (absent from reports before them).
    #[serde(default)]
    pub block_status: u64,
    /// Replies that carried an error.
    pub errors: u64,
    pub read_bytes: u64,
    pub written_bytes: u64,
}

/// `ArrayStats`, field for field (md's names where md has them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineStats {
    pub reads_bypassed: u64,
    pub bytes_copied: u64,
    pub stripe_writes_full: u64,
    /// Whole stripes written as one batch each (their heads' worth is in `stripe_writes_full`).
    #[serde(default)]
    pub stripe_batches: u64,
    pub stripe_writes_rmw: u64,
    pub stripe_writes_rcw: u64,
    pub stripe_writes_degraded: u64,
    pub read_errors_corrected: u64,
    pub stripe_discards: u64,
    pub mismatch_cnt: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheReport {
    /// md's stripe_cache_size.
    pub stripe_cache_size: usize,
    /// md's stripe_cache_active: heads in use now.
    pub stripe_cache_active: usize,
    pub hits: u64,
    pub misses: u64,
    /// Times a request waited because every head was in use.
    pub exhausted: u64,
    pub buffer_bytes: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberReport {
    pub name: String,
    pub failed: bool,
    /// The member's counters, as fields of this object.
    #[serde(flatten)]
    pub io: CountersSnapshot,
}

impl CacheReport {
    /// One engine's stripe cache now.
    #[must_use]
    pub fn of(array: &Array) -> CacheReport {
        let cache = array.cache();
        CacheReport {
            stripe_cache_size: cache.capacity(),
            stripe_cache_active: cache.active(),
            hits: cache.stats.hits,
            misses: cache.stats.misses,
            exhausted: cache.stats.exhausted,
            buffer_bytes: cache.buffer_bytes(),
        }
    }

    /// Two engines' caches as one (a runtime's workers each have theirs).
    #[must_use]
    pub fn sum(self, o: CacheReport) -> CacheReport {
        CacheReport {
            stripe_cache_size: self.stripe_cache_size + o.stripe_cache_size,
            stripe_cache_active: self.stripe_cache_active + o.stripe_cache_active,
            hits: self.hits + o.hits,
            misses: self.misses + o.misses,
            exhausted: self.exhausted + o.exhausted,
            buffer_bytes: self.buffer_bytes + o.buffer_bytes,
        }
    }
}

impl EngineStats {
    fn from_array(s: ArrayStats) -> EngineStats {
        EngineStats {
            reads_bypassed: s.reads_bypassed,
            bytes_copied: s.bytes_copied,
            stripe_writes_full: s.stripe_writes_full,
            stripe_batches: s.stripe_batches,
            stripe_writes_rmw: s.stripe_writes_rmw,
            stripe_writes_rcw: s.stripe_writes_rcw,
            stripe_writes_degraded: s.stripe_writes_degraded,
            read_errors_corrected: s.read_errors_corrected,
            stripe_discards: s.stripe_discards,
            mismatch_cnt: s.mismatch_sectors,
        }
    }
}

impl StatsReport {
    /// The report of one engine and its members' counters (`names` and `counters` in member
    /// order).
    #[must_use]
    pub fn new(array: &Array, names: &[String], counters: &[CountersSnapshot]) -> StatsReport {
        let mut failed = vec![false; names.len()];
        for m in array.failed_members() {
            if let Some(f) = failed.get_mut(m.get()) {
                *f = true;
            }
        }
        StatsReport::of(array.stats(), CacheReport::of(array), names, &failed, counters)
    }

    /// The report of engine counters `stats` and `cache` (a runtime's, summed over its
    /// workers) and its members' (`names`, `failed` and `counters` in member order).
    #[must_use]
    pub fn of(
        stats: ArrayStats,
        cache: CacheReport,
        names: &[String],
        failed: &[bool],
        counters: &[CountersSnapshot],
    ) -> StatsReport {
        let members = names
            .iter()
            .zip(failed)
            .zip(counters)
            .map(|((name, &failed), &io)| MemberReport { name: name.clone(), failed, io })
            .collect();
        StatsReport { engine: EngineStats::from_array(stats), cache, members, nbd: None }
    }

    /// Writes the report to `path` atomically (a temporary file renamed over it), so that a
    /// reader never sees half a document.
    pub fn publish(&self, path: &Path) -> io::Result<()> {
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }

    pub fn read(path: &Path) -> io::Result<StatsReport> {
        let text = std::fs::read(path)?;
        serde_json::from_slice(&text).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))
        })
    }
}
