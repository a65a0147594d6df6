//! Where the partial parity log lives (the engine's `enable_partial_parity_log`): one area at
//! the same offset on every member, cut into a fixed number of equal rings. Worker `i` writes
//! ring `i`, so an array with a log runs at most `rings` workers. The cut depends only on the
//! area and `rings`, never on the worker count, so whoever replays the log after a crash
//! (`uraid-md`) finds every ring where the crashed run wrote it.

use uraid_core::SECTOR_BYTES;
use uraid_core::array::PartialParityLogConfig;
use uraid_core::ppl::LOG_HEADER_SECTORS;

/// Log rings are cut at 4 KiB boundaries (members with 4 KiB sectors).
const RING_ALIGN_BYTES: u64 = 4096;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSetup {
    /// Where the area starts on every member (bytes from the device's start).
    pub offset_bytes: u64,
    pub bytes: u64,
    /// Rings the area is cut into (the most workers the array runs with).
    pub rings: usize,
    pub uuid: [u8; 16],
    /// Orders runs (md's events at assemble): a replay keeps only the newest run's entries.
    pub epoch: u64,
    /// Every member is on a disk that seeks (see `PartialParityLogConfig::rotational`).
    pub rotational: bool,
}

impl LogSetup {
    /// Bytes of each ring: an equal share of the area, whole 4 KiB blocks.
    #[must_use]
    pub fn ring_bytes(&self) -> u64 {
        self.bytes / self.rings.max(1) as u64 / RING_ALIGN_BYTES * RING_ALIGN_BYTES
    }

    /// Where ring `ring` starts on every member.
    #[must_use]
    pub fn ring_offset_bytes(&self, ring: usize) -> u64 {
        assert!(ring < self.rings, "ring {ring} of {}", self.rings);
        self.offset_bytes + ring as u64 * self.ring_bytes()
    }

    /// Whether a ring holds what the engine needs for stripe heads of `unit_sectors`: a
    /// header and a few blocks.
    #[must_use]
    pub fn fits(&self, unit_sectors: u64) -> bool {
        self.ring_bytes() / SECTOR_BYTES >= LOG_HEADER_SECTORS + 4 * unit_sectors
    }

    /// The engine's configuration (its ring's sectors; the driver gets the offset), for one
    /// of `workers` engines that take stripes in turn.
    #[must_use]
    pub fn engine_config(&self, workers: usize) -> PartialParityLogConfig {
        PartialParityLogConfig {
            ring_sectors: self.ring_bytes() / SECTOR_BYTES,
            uuid: self.uuid,
            epoch: self.epoch,
            rotational: self.rotational,
            stride_stripes: workers.max(1) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_are_equal_aligned_shares_at_fixed_places() {
        let setup = LogSetup {
            offset_bytes: 16 << 10,
            bytes: (1 << 20) - (16 << 10),
            rings: 8,
            uuid: [1; 16],
            epoch: 3,
            rotational: false,
        };
        // 1008 KiB / 8 = 126 KiB: already whole 4 KiB blocks? 126 KiB is not: 124 KiB.
        assert_eq!(setup.ring_bytes(), 124 << 10);
        assert_eq!(setup.ring_offset_bytes(0), 16 << 10);
        assert_eq!(setup.ring_offset_bytes(7), (16 << 10) + 7 * (124 << 10));
        assert!(
            setup.ring_offset_bytes(7) + setup.ring_bytes() <= setup.offset_bytes + setup.bytes
        );
        assert_eq!(setup.engine_config(1).ring_sectors, 248);
        assert!(setup.fits(8)); // 4 KiB heads
        assert!(setup.fits(32));
        assert!(!setup.fits(64)); // 32 KiB heads need 8 + 256 sectors
    }
}
