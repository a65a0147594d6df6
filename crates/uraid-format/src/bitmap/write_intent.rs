//! The bits of md's write-intent bitmap: one bit per bitmap chunk of member data, set
//! ("dirty") before a write to that chunk may start and cleared once the stripes under it are
//! in sync again. After a crash only dirty chunks need a resync.
//!
//! Bit order (version 4, confirmed on r5-bitmap): chunk `n` is bit `n % 8` of byte `n / 8`
//! of the area that starts right after the 256-byte bitmap superblock, least significant bit
//! first. r5-bitmap has one chunk; its byte is 0xfe: chunk 0 clean (bit 0 clear) after the
//! resync, and bits 1..7 still set from mdadm's initial 0xff fill. Bits past the last chunk
//! mean nothing; they are kept as read so that `encode(decode(b)) == b`.
//!
//! Chunks index member sectors counted from `data_offset` (for raid4/5/6 md marks the
//! bitmap with the stripe's sector on each member), so chunk `n` covers member data sectors
//! `n * chunk_sectors .. (n + 1) * chunk_sectors`.

use std::ops::Range;

use super::BitmapSuper;
use crate::error::BitmapError;

/// The bits of one bitmap, with the geometry needed to map sectors to bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteIntentBitmap {
    chunk_sectors: u64,
    chunk_count: u64,
    bits: Vec<u8>,
}

impl WriteIntentBitmap {
    /// Decodes the bit area for the bitmap described by `superblock`. `bytes` starts right
    /// after the bitmap superblock and must hold at least `superblock.bits_bytes()`.
    pub fn decode(
        superblock: &BitmapSuper,
        bytes: &[u8],
    ) -> Result<WriteIntentBitmap, BitmapError> {
        let needed_bytes = superblock.bits_bytes();
        if bytes.len() < needed_bytes {
            return Err(BitmapError::TooShort { needed_bytes, got_bytes: bytes.len() });
        }
        Ok(WriteIntentBitmap {
            chunk_sectors: superblock.chunk_sectors(),
            chunk_count: superblock.chunk_count(),
            bits: bytes[..needed_bytes].to_vec(),
        })
    }

    /// Every byte 0xff, as mdadm writes a new bitmap so that the first assembly resyncs
    /// everything.
    #[must_use]
    pub fn new_all_dirty(superblock: &BitmapSuper) -> WriteIntentBitmap {
        Self::filled(superblock, 0xff)
    }

    /// Every bit clear: nothing to resync (an array created in sync).
    #[must_use]
    pub fn new_clean(superblock: &BitmapSuper) -> WriteIntentBitmap {
        Self::filled(superblock, 0x00)
    }

    fn filled(superblock: &BitmapSuper, byte: u8) -> WriteIntentBitmap {
        WriteIntentBitmap {
            chunk_sectors: superblock.chunk_sectors(),
            chunk_count: superblock.chunk_count(),
            bits: vec![byte; superblock.bits_bytes()],
        }
    }

    /// The bit area as stored on disk, `ceil(chunks / 8)` bytes.
    #[must_use]
    pub fn encode(&self) -> &[u8] {
        &self.bits
    }

    /// How many chunks (bits) the bitmap tracks.
    #[must_use]
    pub fn chunks(&self) -> u64 {
        self.chunk_count
    }

    /// Member sectors per chunk.
    #[must_use]
    pub fn chunk_sectors(&self) -> u64 {
        self.chunk_sectors
    }

    fn locate(&self, chunk: u64) -> (usize, u8) {
        assert!(chunk < self.chunk_count, "chunk {chunk} of {}", self.chunk_count);
        ((chunk / 8) as usize, 1u8 << (chunk % 8))
    }

    /// Whether `chunk` may hold stripes that are out of sync.
    #[must_use]
    pub fn is_dirty(&self, chunk: u64) -> bool {
        let (byte, mask) = self.locate(chunk);
        self.bits[byte] & mask != 0
    }

    /// Marks `chunk` dirty (before writing to it).
    pub fn set(&mut self, chunk: u64) {
        let (byte, mask) = self.locate(chunk);
        self.bits[byte] |= mask;
        debug_assert!(self.is_dirty(chunk));
    }

    /// Marks `chunk` clean (once its stripes are in sync).
    pub fn clear(&mut self, chunk: u64) {
        let (byte, mask) = self.locate(chunk);
        self.bits[byte] &= !mask;
        debug_assert!(!self.is_dirty(chunk));
    }

    /// How many chunks are dirty (bits past the last chunk do not count).
    #[must_use]
    pub fn dirty_count(&self) -> u64 {
        (0..self.chunk_count).filter(|chunk| self.is_dirty(*chunk)).count() as u64
    }

    /// The chunks covering member data sectors `start_sector .. start_sector + sector_count`
    /// (sectors counted from data_offset). Worked example with 64 MiB chunks (131072
    /// sectors): sectors 131000..131100 straddle the boundary and cover chunks 0..2.
    #[must_use]
    pub fn chunks_covering(&self, start_sector: u64, sector_count: u64) -> Range<u64> {
        if sector_count == 0 {
            return 0..0;
        }
        let last_sector = start_sector + sector_count - 1;
        let first = start_sector / self.chunk_sectors;
        let end = last_sector / self.chunk_sectors + 1;
        assert!(end <= self.chunk_count, "sectors past the bitmap's sync_size");
        first..end
    }

    /// Marks dirty every chunk a write to the given member sectors touches.
    pub fn set_range(&mut self, start_sector: u64, sector_count: u64) {
        for chunk in self.chunks_covering(start_sector, sector_count) {
            self.set(chunk);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uuid::Uuid;

    fn small_bitmap() -> WriteIntentBitmap {
        // 20 chunks of 8 sectors: 3 bytes, the last one with 4 meaningless bits.
        let superblock = BitmapSuper::new_internal(Uuid::default(), 160, 4096);
        WriteIntentBitmap::new_clean(&superblock)
    }

    #[test]
    fn bit_order_is_lsb_first() {
        let mut bitmap = small_bitmap();
        assert_eq!(bitmap.chunks(), 20);
        bitmap.set(0);
        bitmap.set(9);
        bitmap.set(19);
        assert_eq!(bitmap.encode(), &[0x01, 0x02, 0x08]);
        bitmap.clear(9);
        assert!(!bitmap.is_dirty(9));
        assert_eq!(bitmap.dirty_count(), 2);
    }

    #[test]
    fn sector_ranges_map_to_chunks() {
        let mut bitmap = small_bitmap();
        assert_eq!(bitmap.chunks_covering(0, 8), 0..1);
        assert_eq!(bitmap.chunks_covering(7, 2), 0..2);
        assert_eq!(bitmap.chunks_covering(152, 8), 19..20);
        assert_eq!(bitmap.chunks_covering(40, 0), 0..0);
        bitmap.set_range(15, 10);
        assert_eq!(bitmap.encode(), &[0b0000_1110, 0, 0]);
    }

    #[test]
    #[should_panic(expected = "chunk 20 of 20")]
    fn chunk_past_the_end_panics() {
        let _ = small_bitmap().is_dirty(20);
    }
}
