//! Limits of the geometry, with the reason for each. Relationships between them are checked at
//! compile time.

/// Smallest chunk: md requires a multiple of the page size (4 KiB on x86) that is a power of two.
pub const CHUNK_BYTES_MIN: u64 = 4096;

/// Largest chunk uraid accepts. md keeps chunk_sectors in a 32-bit int; 1 GiB is far beyond any
/// array seen in practice and keeps `chunk_sectors * raid_disks` well inside u64 arithmetic.
pub const CHUNK_BYTES_MAX: u64 = 1 << 30;

/// Most members in one array. RAID6 with md's layouts numbers at most `raid_disks - 2` syndrome
/// slots, well under the 255 distinct powers of the generator in GF(2^8).
pub const RAID_DISKS_MAX: u16 = 256;

/// DDF layouts number Q coefficients by physical position (`raid_disks` slots, P and Q slots
/// included), so above 255 members two slots would share a coefficient and a double failure
/// could not be told apart.
pub const RAID_DISKS_MAX_DDF: u16 = 255;

const _: () = assert!(CHUNK_BYTES_MIN.is_power_of_two() && CHUNK_BYTES_MAX.is_power_of_two());
const _: () = assert!(CHUNK_BYTES_MIN <= CHUNK_BYTES_MAX);
// The largest stripe (chunk * members) must fit in u64 bytes with room to spare.
const _: () = assert!(CHUNK_BYTES_MAX.checked_mul(RAID_DISKS_MAX as u64).is_some());
const _: () = assert!(RAID_DISKS_MAX_DDF < RAID_DISKS_MAX);
