//! Newtypes that keep indexes, counts and sizes apart (an off-by-one between a member index and
//! a member count, or between sectors and bytes, is the classic RAID mapping bug).

use std::fmt;

/// md's unit of address: 512 bytes, whatever the device's logical block size.
pub const SECTOR_BYTES: u64 = 512;

/// A member's position in the array: md's device role (raid_disk), 0-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DiskIndex(pub u16);

/// An address in 512-byte sectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Sector(pub u64);

/// A stripe's number: stripe `n` covers member sectors `n * chunk_sectors ..` on every member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct StripeNumber(pub u64);

impl DiskIndex {
    #[must_use]
    pub fn get(self) -> usize {
        usize::from(self.0)
    }
}

impl Sector {
    #[must_use]
    pub fn from_bytes(bytes: u64) -> Sector {
        assert!(bytes.is_multiple_of(SECTOR_BYTES), "byte offset {bytes} is not sector aligned");
        Sector(bytes / SECTOR_BYTES)
    }

    #[must_use]
    pub fn bytes(self) -> u64 {
        self.0 * SECTOR_BYTES
    }
}

impl fmt::Display for DiskIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Sector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0)
    }
}
