//! md's write-intent bitmap: the 256-byte bitmap superblock (`bitmap_super_t`) and, in
//! `write_intent.rs`, the bits that follow it.
//!
//! An internal bitmap lives `bitmap_offset` sectors (signed) from the md superblock when
//! `feature::BITMAP_OFFSET` is set; r5-bitmap has it 8 sectors after, at member byte 8192.
//! Layout (all little-endian, offsets confirmed by re-encoding r5-bitmap byte for byte):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic 0x6d746962 ("bitm" on disk) |
//! | 4 | 4 | version (4: bits in little-endian order) |
//! | 8 | 16 | uuid (the array's set_uuid) |
//! | 24 | 8 | events |
//! | 32 | 8 | events_cleared |
//! | 40 | 8 | sync_size (sectors per member covered) |
//! | 48 | 4 | state |
//! | 52 | 4 | chunksize (bytes of member data per bit) |
//! | 56 | 4 | daemon_sleep (seconds) |
//! | 60 | 4 | write_behind |
//! | 64 | 4 | sectors_reserved |
//! | 68 | 4 | nodes |
//! | 72 | 64 | cluster_name |
//! | 136 | 120 | pad (zero) |

mod resize;
mod write_intent;

pub use resize::resized_bitmap;
pub use write_intent::WriteIntentBitmap;

use crate::error::BitmapError;
use crate::superblock::Superblock1;
use crate::uuid::Uuid;

/// The bitmap superblock's magic, "bitm" read as a little-endian u32.
pub const BITMAP_MAGIC: u32 = 0x6d74_6962;
/// Size of the bitmap superblock; the bits start right after it.
pub const BITMAP_SUPER_BYTES: usize = 256;
/// md's `BITMAP_MAJOR_HI`: bits stored in little-endian order. The only version accepted:
/// 3 is host-endian (ambiguous without knowing the writer), 5 is clustered md and 6 the
/// lockless bitmap, none of which uraid implements.
pub const BITMAP_VERSION: u32 = 4;
/// mdadm's default `daemon_sleep` (seconds between bitmap flushes).
pub const DEFAULT_DAEMON_SLEEP_SECONDS: u32 = 5;
/// md's `COUNTER_MAX`: the largest write-behind count a 14-bit counter holds.
const WRITE_BEHIND_MAX: u32 = 16383;

/// Bits of `state`; md stores its flag *numbers* as `1 << n`.
pub mod bitmap_state {
    /// The bitmap is out of date (or hit an I/O error); a full resync is needed.
    pub const STALE: u32 = 1 << 1;
    /// A write to the bitmap failed.
    pub const WRITE_ERROR: u32 = 1 << 2;
    /// The bits are host-endian (set for version-3 bitmaps).
    pub const HOSTENDIAN: u32 = 1 << 15;
}

const MAGIC_OFFSET: usize = 0;
const VERSION_OFFSET: usize = MAGIC_OFFSET + 4;
const UUID_OFFSET: usize = VERSION_OFFSET + 4;
const EVENTS_OFFSET: usize = UUID_OFFSET + 16;
const EVENTS_CLEARED_OFFSET: usize = EVENTS_OFFSET + 8;
const SYNC_SIZE_OFFSET: usize = EVENTS_CLEARED_OFFSET + 8;
const STATE_OFFSET: usize = SYNC_SIZE_OFFSET + 8;
const CHUNKSIZE_OFFSET: usize = STATE_OFFSET + 4;
const DAEMON_SLEEP_OFFSET: usize = CHUNKSIZE_OFFSET + 4;
const WRITE_BEHIND_OFFSET: usize = DAEMON_SLEEP_OFFSET + 4;
const SECTORS_RESERVED_OFFSET: usize = WRITE_BEHIND_OFFSET + 4;
const NODES_OFFSET: usize = SECTORS_RESERVED_OFFSET + 4;
const CLUSTER_NAME_OFFSET: usize = NODES_OFFSET + 4;
const PAD_OFFSET: usize = CLUSTER_NAME_OFFSET + 64;

// md's struct comments give 72 for cluster_name and 136 for the pad; the pad fills to 256.
const _: () = assert!(CLUSTER_NAME_OFFSET == 72);
const _: () = assert!(PAD_OFFSET == 136);
const _: () = assert!(PAD_OFFSET + 120 == BITMAP_SUPER_BYTES);

/// A decoded bitmap superblock. Invariants after `decode`: magic and version are md's,
/// `chunk_bytes` is a power of two of at least 512, `daemon_sleep_seconds` is non-zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitmapSuper {
    pub uuid: Uuid,
    /// The md `events` of the last bitmap update; below the superblock's means stale.
    pub events: u64,
    /// `events` when bits were last cleared.
    pub events_cleared: u64,
    /// Sectors of each member the bitmap covers (the component size for raid4/5/6).
    #[doc(alias = "sync_size")]
    pub sync_size_sectors: u64,
    /// [`bitmap_state`] bits.
    pub state: u32,
    /// Bytes of member data per bit (64 MiB in r5-bitmap, mdadm's default).
    #[doc(alias = "chunksize")]
    pub chunk_bytes: u32,
    #[doc(alias = "daemon_sleep")]
    pub daemon_sleep_seconds: u32,
    pub write_behind: u32,
    pub sectors_reserved: u32,
    pub nodes: u32,
    pub cluster_name: [u8; 64],
    /// Written as zero by md; kept verbatim.
    pub pad: [u8; 120],
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4-byte slice"))
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8-byte slice"))
}

impl BitmapSuper {
    /// Decodes and validates the first 256 bytes of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<BitmapSuper, BitmapError> {
        if bytes.len() < BITMAP_SUPER_BYTES {
            let needed_bytes = BITMAP_SUPER_BYTES;
            return Err(BitmapError::TooShort { needed_bytes, got_bytes: bytes.len() });
        }
        let magic = u32_at(bytes, MAGIC_OFFSET);
        if magic != BITMAP_MAGIC {
            return Err(BitmapError::BadMagic { found: magic });
        }
        let version = u32_at(bytes, VERSION_OFFSET);
        if version != BITMAP_VERSION {
            return Err(BitmapError::UnsupportedVersion { found: version });
        }
        let bitmap = decode_fields(bytes);
        bitmap.validate()?;
        Ok(bitmap)
    }

    /// Decodes the bitmap of the array whose member superblock is `sb`, as md loads it: its
    /// bits counted over the array's component size, whatever `sync_size` says (md sizes them
    /// by the array and rewrites `sync_size` at its next write; a crash in the middle of a
    /// grow leaves the two apart), and refused when they would run past the data offset
    /// (v1.2 keeps the bitmap between the superblock and the data: md would take data for
    /// bits there, and a reader would allocate what a corrupt chunk size asks).
    pub fn decode_for(bytes: &[u8], sb: &Superblock1) -> Result<BitmapSuper, BitmapError> {
        let mut bitmap = BitmapSuper::decode(bytes)?;
        bitmap.sync_size_sectors = sb.size_sectors;
        // Metadata before the data (v1.1, v1.2): the bitmap must end before the data. (v1.0
        // keeps it after the data, before the superblock at the device's end.)
        let start = i128::from(sb.super_offset_sectors) + i128::from(sb.bitmap_offset_sectors);
        let data = i128::from(sb.data_offset_sectors);
        if sb.super_offset_sectors < sb.data_offset_sectors {
            let room_bytes = u64::try_from((data - start).max(0) * 512).unwrap_or(u64::MAX);
            let needed_bytes = (BITMAP_SUPER_BYTES as u64).saturating_add(bitmap.bits_bytes_u64());
            if needed_bytes > room_bytes {
                return Err(BitmapError::PastData {
                    chunk_bytes: bitmap.chunk_bytes,
                    size_sectors: sb.size_sectors,
                    needed_bytes,
                    room_bytes,
                });
            }
        }
        Ok(bitmap)
    }

    /// Encodes the 256-byte bitmap superblock.
    #[must_use]
    pub fn encode(&self) -> [u8; BITMAP_SUPER_BYTES] {
        let mut out = [0u8; BITMAP_SUPER_BYTES];
        let mut put = |offset: usize, bytes: &[u8]| {
            out[offset..offset + bytes.len()].copy_from_slice(bytes);
        };
        put(MAGIC_OFFSET, &BITMAP_MAGIC.to_le_bytes());
        put(VERSION_OFFSET, &BITMAP_VERSION.to_le_bytes());
        put(UUID_OFFSET, &self.uuid.0);
        put(EVENTS_OFFSET, &self.events.to_le_bytes());
        put(EVENTS_CLEARED_OFFSET, &self.events_cleared.to_le_bytes());
        put(SYNC_SIZE_OFFSET, &self.sync_size_sectors.to_le_bytes());
        put(STATE_OFFSET, &self.state.to_le_bytes());
        put(CHUNKSIZE_OFFSET, &self.chunk_bytes.to_le_bytes());
        put(DAEMON_SLEEP_OFFSET, &self.daemon_sleep_seconds.to_le_bytes());
        put(WRITE_BEHIND_OFFSET, &self.write_behind.to_le_bytes());
        put(SECTORS_RESERVED_OFFSET, &self.sectors_reserved.to_le_bytes());
        put(NODES_OFFSET, &self.nodes.to_le_bytes());
        put(CLUSTER_NAME_OFFSET, &self.cluster_name);
        put(PAD_OFFSET, &self.pad);
        out
    }

    /// The checks md's bitmap loader makes on these fields.
    pub fn validate(&self) -> Result<(), BitmapError> {
        if !self.chunk_bytes.is_power_of_two() || self.chunk_bytes < 512 {
            return Err(BitmapError::BadChunkSize { chunk_bytes: self.chunk_bytes });
        }
        if self.daemon_sleep_seconds == 0 {
            return Err(BitmapError::BadDaemonSleep);
        }
        if self.write_behind > WRITE_BEHIND_MAX {
            return Err(BitmapError::BadWriteBehind { write_behind: self.write_behind });
        }
        Ok(())
    }

    /// A bitmap superblock as mdadm writes it for `--bitmap=internal`: everything zero
    /// except magic, version, uuid, chunksize, daemon_sleep and sync_size.
    #[must_use]
    pub fn new_internal(uuid: Uuid, sync_size_sectors: u64, chunk_bytes: u32) -> BitmapSuper {
        assert!(chunk_bytes.is_power_of_two() && chunk_bytes >= 512, "chunk {chunk_bytes}");
        BitmapSuper {
            uuid,
            events: 0,
            events_cleared: 0,
            sync_size_sectors,
            state: 0,
            chunk_bytes,
            daemon_sleep_seconds: DEFAULT_DAEMON_SLEEP_SECONDS,
            write_behind: 0,
            sectors_reserved: 0,
            nodes: 0,
            cluster_name: [0; 64],
            pad: [0; 120],
        }
    }

    /// Sectors of member data per bit.
    #[must_use]
    pub fn chunk_sectors(&self) -> u64 {
        u64::from(self.chunk_bytes) / 512
    }

    /// Bits in the bitmap: `ceil(sync_size * 512 / chunksize)`. r5-bitmap: 2048 sectors of
    /// 64 MiB chunks is 1 bit.
    #[must_use]
    pub fn chunk_count(&self) -> u64 {
        self.sync_size_sectors.div_ceil(self.chunk_sectors())
    }

    /// Bytes of bits after the superblock: `ceil(chunk_count / 8)`.
    #[must_use]
    pub fn bits_bytes(&self) -> usize {
        self.bits_bytes_u64() as usize
    }

    fn bits_bytes_u64(&self) -> u64 {
        self.chunk_count().div_ceil(8)
    }

    /// Bytes the bitmap occupies on disk, superblock included, rounded up to 4 KiB as mdadm
    /// reserves and fills it. r5-bitmap: 256 + 1 rounds to 4096, so the bad block log that
    /// mdadm placed after it starts 8 + 8 = 16 sectors from the md superblock.
    #[must_use]
    pub fn reserved_bytes(&self) -> usize {
        (BITMAP_SUPER_BYTES + self.bits_bytes()).next_multiple_of(4096)
    }

    /// Whether md would distrust the bits: the bitmap is older than the array (`events`
    /// below the md superblock's) or marked stale.
    #[must_use]
    pub fn is_stale(&self, superblock_events: u64) -> bool {
        self.events < superblock_events || self.state & bitmap_state::STALE != 0
    }
}

fn decode_fields(bytes: &[u8]) -> BitmapSuper {
    BitmapSuper {
        uuid: Uuid(bytes[UUID_OFFSET..UUID_OFFSET + 16].try_into().expect("16 bytes")),
        events: u64_at(bytes, EVENTS_OFFSET),
        events_cleared: u64_at(bytes, EVENTS_CLEARED_OFFSET),
        sync_size_sectors: u64_at(bytes, SYNC_SIZE_OFFSET),
        state: u32_at(bytes, STATE_OFFSET),
        chunk_bytes: u32_at(bytes, CHUNKSIZE_OFFSET),
        daemon_sleep_seconds: u32_at(bytes, DAEMON_SLEEP_OFFSET),
        write_behind: u32_at(bytes, WRITE_BEHIND_OFFSET),
        sectors_reserved: u32_at(bytes, SECTORS_RESERVED_OFFSET),
        nodes: u32_at(bytes, NODES_OFFSET),
        cluster_name: bytes[CLUSTER_NAME_OFFSET..PAD_OFFSET].try_into().expect("64 bytes"),
        pad: bytes[PAD_OFFSET..BITMAP_SUPER_BYTES].try_into().expect("120 bytes"),
    }
}

/// mdadm's default chunk for an internal bitmap created with 1.x metadata: the smallest
/// power of two from 4 KiB up whose bits fit `room_sectors` (at most 128 KiB of bitmap,
/// superblock included), but never below 64 MiB. `size_sectors` is the component size.
///
/// Worked example (r5-bitmap): size 2048 sectors, room 8 sectors: 4096 bytes per bit gives
/// 257 bits, which fit; the 64 MiB floor then wins, the fixture's chunksize 0x0400_0000.
#[must_use]
pub fn default_chunk_bytes(size_sectors: u64, room_sectors: u64) -> u64 {
    let room_sectors = room_sectors.min(256);
    assert!(room_sectors >= 1, "no room for a bitmap");
    let max_bits = (room_sectors * 512 - BITMAP_SUPER_BYTES as u64) * 8;
    let mut chunk_bytes: u64 = 4096;
    // mdadm counts one spare bit and halves (rounding up) as it doubles the chunk.
    let mut bits = size_sectors.saturating_mul(512) / chunk_bytes + 1;
    while bits > max_bits {
        chunk_bytes *= 2;
        bits = bits.div_ceil(2);
    }
    chunk_bytes.max(64 << 20)
}
