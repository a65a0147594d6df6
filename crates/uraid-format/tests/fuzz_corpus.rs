//! Goal: the decoders' fuzz corpora (fuzz/corpus/superblock, fuzz/corpus/bitmap) keep passing
//! on stable, in every CI run, without cargo fuzz.
//!
//! Method: each corpus file goes through the decode half of its fuzz target (the same fix-ups
//! of the first byte, the same round-trip checks); the assembly planner and the bit operations
//! stay with the fuzz targets. A corpus that is missing or nearly empty fails: the files are
//! committed, so that is a broken checkout, not a skip.

use std::path::PathBuf;
use uraid_format::{BITMAP_MAGIC, BITMAP_SUPER_BYTES, BITMAP_VERSION, BitmapSuper};
use uraid_format::{Superblock1, WriteIntentBitmap, sb_csum};

const AREA_BYTES: usize = 4096;
const SUPERBLOCK_MAGIC: u32 = 0xa92b_4efc;
const MAX_DEV_OFFSET: usize = 220;
const SB_CSUM_OFFSET: usize = 216;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus")).join(target);
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let files: Vec<_> = entries
        .map(|e| e.unwrap().path())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    assert!(files.len() >= 2, "{}: {} files", dir.display(), files.len());
    files
}

/// fuzz/fuzz_targets/superblock.rs: byte 0 forces the magic (bit 0), bounds max_dev (bit 1)
/// and seals (bit 2); the next 4 KiB are the area.
fn superblock_area(data: &[u8]) -> Option<Vec<u8>> {
    let (&fix, rest) = data.split_first()?;
    let mut a = rest[..rest.len().min(AREA_BYTES)].to_vec();
    a.resize(AREA_BYTES, 0);
    if fix & 1 != 0 {
        a[0..4].copy_from_slice(&SUPERBLOCK_MAGIC.to_le_bytes());
        a[4..8].copy_from_slice(&1u32.to_le_bytes());
    }
    let max_dev = u32::from_le_bytes(a[MAX_DEV_OFFSET..MAX_DEV_OFFSET + 4].try_into().unwrap());
    let max_dev = if fix & 2 != 0 { max_dev % 1921 } else { max_dev };
    a[MAX_DEV_OFFSET..MAX_DEV_OFFSET + 4].copy_from_slice(&max_dev.to_le_bytes());
    if fix & 4 != 0 && max_dev <= 1920 {
        let csum = sb_csum(&a[..256 + 2 * max_dev as usize]);
        a[SB_CSUM_OFFSET..SB_CSUM_OFFSET + 4].copy_from_slice(&csum.to_le_bytes());
    }
    Some(a)
}

#[test]
fn superblock_corpus_round_trips() {
    let mut decoded = 0;
    for (path, data) in corpus("superblock") {
        let Some(area) = superblock_area(&data) else { continue };
        let Ok(sb) = Superblock1::decode(&area) else { continue };
        decoded += 1;
        let encoded = sb.encode();
        assert_eq!(encoded, area[..encoded.len()], "{}", path.display());
        assert_eq!(Superblock1::decode(&encoded).unwrap(), sb, "{}", path.display());
        let _ = (sb.role(), sb.array_state(), sb.name(), sb.ppl());
    }
    // The md fixtures' own areas are among the seeds.
    assert!(decoded >= 10, "only {decoded} superblocks decoded");
}

#[test]
fn bitmap_corpus_round_trips() {
    let mut decoded = 0;
    for (path, data) in corpus("bitmap") {
        let Some((&fix, rest)) = data.split_first() else { continue };
        let mut bytes = rest.to_vec();
        if fix & 1 != 0 && bytes.len() >= 8 {
            bytes[0..4].copy_from_slice(&BITMAP_MAGIC.to_le_bytes());
            bytes[4..8].copy_from_slice(&BITMAP_VERSION.to_le_bytes());
        }
        let Ok(sb) = BitmapSuper::decode(&bytes) else { continue };
        decoded += 1;
        assert_eq!(sb.encode()[..], bytes[..BITMAP_SUPER_BYTES], "{}", path.display());
        assert_eq!(BitmapSuper::decode(&sb.encode()).unwrap(), sb, "{}", path.display());
        let bits = &bytes[BITMAP_SUPER_BYTES..];
        if let Ok(bitmap) = WriteIntentBitmap::decode(&sb, bits) {
            assert_eq!(bitmap.encode(), &bits[..sb.bits_bytes()], "{}", path.display());
            assert!(bitmap.dirty_count() <= bitmap.chunks());
        }
    }
    assert!(decoded >= 2, "only {decoded} bitmaps decoded");
}
