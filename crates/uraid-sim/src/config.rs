//! What one seed simulates: the array (level, layout, members, chunk, stripe_size, stripe
//! cache, write-intent bitmap) and the workload's shape, all drawn from the seed alone.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use uraid_core::array::{Array, ArrayConfig, PartialParityLogConfig, WriteIntentConfig};
use uraid_core::layout::LAYOUTS;
use uraid_core::{Geometry, Layout, Level, SECTOR_BYTES};

/// The array's UUID in its log headers.
pub const SIM_UUID: [u8; 16] = *b"uraid-sim-array!";

/// md's bitmap superblock precedes the bits.
pub const BITMAP_HEADER_BYTES: usize = 256;

#[derive(Clone, Debug, Serialize)]
#[expect(clippy::struct_excessive_bools, reason = "independent draws of one seed")]
pub struct SimConfig {
    pub seed: u64,
    pub level: u8,
    pub layout: &'static str,
    pub members: usize,
    pub chunk_bytes: u64,
    pub stripe_size_bytes: u64,
    pub member_sectors: u64,
    pub stripe_cache_size: usize,
    /// Member sectors per write-intent bit, when the array has a bitmap.
    pub bitmap_chunk_sectors: Option<u64>,
    /// Sectors of each member's partial parity log ring, when the write hole is closed.
    pub log_ring_sectors: Option<u64>,
    /// Whether the log treats the members as rotational (entries at depth 1 on idle members).
    pub log_rotational: bool,
    /// Stripes between two the engine serves, as one of the runtime's workers sees a stream
    /// (the log's `stride_stripes` and the stream's, `set_stream_stride`); the workload still
    /// writes every stripe, and its streams sometimes skip to the engine's next stripe.
    pub log_stride_stripes: u64,
    /// User requests to submit.
    pub requests: usize,
    /// User requests in flight at most.
    pub queue_depth: usize,
    /// Longest request, in sectors.
    pub max_request_sectors: u64,
    /// Whether faults (errors, pulled members, power cuts) are injected.
    pub faults: bool,
    /// Whether members keep md's bad block log: a data write they refuse is listed (durably,
    /// before it completes, as a success) and read around, instead of failing the member.
    pub bad_block_logs: bool,
    /// Whether the engine holds a stream's partial stripes, acknowledged (`set_write_back`),
    /// as the runtime runs it; the simulator's timer ends holds at random moments.
    pub write_back: bool,
    /// A deliberately broken member, to show the checks catch what they claim to.
    #[serde(skip)]
    pub sabotage: Option<Sabotage>,
}

/// Ways to break the simulated members on purpose (tests of the simulator itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sabotage {
    /// Members acknowledge flushes without making anything durable.
    FlushesDoNothing,
    /// One byte of every 64th member read comes back flipped.
    CorruptReads,
    /// Restarts after power cuts skip the partial parity log's replay (the write hole open).
    NoLogReplay,
    /// Restarts replay the log's entries but not its ranges (sequential streams unprotected).
    NoRangeResync,
    /// The engine acknowledges writes that finish after a member failure before the
    /// metadata records it (md without MD_SB_CHANGE_PENDING).
    AckBeforeFailureRecorded,
    /// A member being replaced gets user writes, its new disk only the copy (the member
    /// layer not sending writes to both).
    ReplacementMissesWrites,
    /// Log writes queued for a member before its replacement began reach the new disk too
    /// (the member layer ignoring `MemberIo::before_replacement`).
    ReplacementGetsEarlierLogWrites,
}

impl SimConfig {
    #[must_use]
    pub fn from_seed(seed: u64, faults: bool) -> SimConfig {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_c0f1_9000_0000);
        let level = [4u8, 5, 6][rng.random_range(0..3)];
        let core_level = core_level(level);
        let layouts: Vec<&'static str> = LAYOUTS
            .iter()
            .filter(|(l, _)| *l != Layout::Striped && l.check_level(core_level).is_ok())
            .filter(|(l, _)| level != 4 || *l == Layout::ParityLast)
            .map(|(_, name)| *name)
            .collect();
        let layout = layouts[rng.random_range(0..layouts.len())];
        let members = match level {
            6 => rng.random_range(4..=9),
            _ => rng.random_range(3..=8),
        };
        let chunk_bytes = 4096u64 << rng.random_range(0..=4);
        let stripe_size_bytes = if rng.random_bool(0.7) {
            4096
        } else {
            4096u64 << rng.random_range(0..=chunk_bytes.trailing_zeros() - 12)
        };
        let chunk_sectors = chunk_bytes / SECTOR_BYTES;
        let member_sectors = chunk_sectors * rng.random_range(4..=16);
        let bitmap_chunk_sectors = rng.random_bool(0.5).then(|| {
            let most = (member_sectors / 2).max(8).ilog2();
            1u64 << rng.random_range(3..=most)
        });
        // Drawn from a stream of its own, so that the draws above (and the seeds that found
        // bugs before the log existed) stay as they were. Small rings: they wrap (and reset) often.
        let mut log_rng = StdRng::seed_from_u64(seed ^ 0x0109_0000_ca11_ab1e);
        let unit_sectors = stripe_size_bytes / SECTOR_BYTES;
        let log_ring_sectors =
            log_rng.random_bool(0.85).then(|| 8 + unit_sectors * log_rng.random_range(4..=48));
        let log_rotational = log_rng.random_bool(0.5);
        let bad_block_logs = StdRng::seed_from_u64(seed ^ 0x0bad_b10c_0000_0000).random_bool(0.5);
        // A stream of its own too (added in the fifth session of 2026-11-28): half the seeds
        // as the only engine, the rest as one of two or three.
        let mut stride_rng = StdRng::seed_from_u64(seed ^ 0x0057_0d1e_0000_0000);
        let log_stride_stripes =
            if stride_rng.random_bool(0.5) { 1 } else { stride_rng.random_range(2..=3) };
        // Its own stream too (added in the eighth session of 2026-11-28).
        let write_back = StdRng::seed_from_u64(seed ^ 0x0b0c_4b0c_0000_0000).random_bool(0.5);
        SimConfig {
            bad_block_logs,
            write_back,
            seed,
            level,
            log_ring_sectors,
            log_rotational,
            log_stride_stripes,
            layout,
            members,
            chunk_bytes,
            stripe_size_bytes,
            member_sectors,
            stripe_cache_size: rng.random_range(1..=48),
            bitmap_chunk_sectors,
            requests: rng.random_range(50..=400),
            queue_depth: [1, 2, 4, 8, 32][rng.random_range(0..5)],
            max_request_sectors: [8, 64, 256][rng.random_range(0..3)],
            faults,
            sabotage: None,
        }
    }

    #[must_use]
    pub fn geometry(&self) -> Geometry {
        let layout = Layout::parse(self.layout).expect("a layout from md's table");
        Geometry::new(core_level(self.level), layout, self.members, self.chunk_bytes)
            .expect("drawn within md's rules")
    }

    #[must_use]
    pub fn array_config(&self) -> ArrayConfig {
        ArrayConfig {
            geometry: self.geometry(),
            stripe_size_bytes: self.stripe_size_bytes,
            stripe_cache_size: self.stripe_cache_size,
            member_sectors: self.member_sectors,
        }
    }

    /// The engine settings the seed runs with, on its first engine and on each restart's.
    pub fn configure(&self, array: &mut Array) {
        if self.sabotage != Some(Sabotage::AckBeforeFailureRecorded) {
            array.hold_writes_until_failures_recorded();
        }
        array.set_write_back(self.write_back);
        array.set_stream_stride(self.log_stride_stripes);
    }

    /// Bytes of each member's bitmap area (header and bits, whole pages), 0 without one.
    #[must_use]
    pub fn bitmap_bytes(&self) -> usize {
        self.bitmap_chunks().map_or(0, |chunks| {
            (BITMAP_HEADER_BYTES + chunks.div_ceil(8) as usize).next_multiple_of(4096)
        })
    }

    #[must_use]
    pub fn bitmap_chunks(&self) -> Option<u64> {
        self.bitmap_chunk_sectors.map(|c| self.member_sectors.div_ceil(c))
    }

    /// The engine's bitmap as found in `image` (a member's bitmap area).
    #[must_use]
    pub fn write_intent(&self, image: Vec<u8>) -> Option<WriteIntentConfig> {
        Some(WriteIntentConfig {
            image,
            bits_offset: BITMAP_HEADER_BYTES,
            chunk_sectors: self.bitmap_chunk_sectors?,
            chunks: self.bitmap_chunks()?,
        })
    }

    /// The engine's log for a run (`epoch` counts the restarts).
    #[must_use]
    pub fn log(&self, epoch: u64) -> Option<PartialParityLogConfig> {
        Some(PartialParityLogConfig {
            ring_sectors: self.log_ring_sectors?,
            uuid: SIM_UUID,
            epoch,
            rotational: self.log_rotational,
            stride_stripes: self.log_stride_stripes,
        })
    }

    #[must_use]
    pub fn log_bytes(&self) -> usize {
        self.log_ring_sectors.map_or(0, |s| (s * SECTOR_BYTES) as usize)
    }

    #[must_use]
    pub fn summary(&self) -> String {
        let mut bitmap = self
            .bitmap_chunk_sectors
            .map_or_else(|| "no bitmap".to_owned(), |c| format!("bitmap {}K", c / 2));
        bitmap += &self
            .log_ring_sectors
            .map_or_else(|| ", write hole open".to_owned(), |s| format!(", log ring {}K", s / 2));
        format!(
            "RAID{} {} x{}, chunk {}K, stripe_size {}K, {} sectors/member, cache {}, {bitmap}, \
             {} requests at depth {}, up to {} sectors{}",
            self.level,
            self.layout,
            self.members,
            self.chunk_bytes / 1024,
            self.stripe_size_bytes / 1024,
            self.member_sectors,
            self.stripe_cache_size,
            self.requests,
            self.queue_depth,
            self.max_request_sectors,
            if self.faults { ", faults" } else { "" }
        )
    }
}

fn core_level(level: u8) -> Level {
    match level {
        4 => Level::Raid4,
        5 => Level::Raid5,
        _ => Level::Raid6,
    }
}
