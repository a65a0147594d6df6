//! Request splitting: chunk pieces and stripe-head work tile the request exactly, never cross
//! a chunk or unit boundary, and agree with the geometry's map for every piece.

use proptest::prelude::*;
use uraid_core::request::{split_by_chunk, split_by_head};
use uraid_core::stripe::Cover;
use uraid_core::{Geometry, Level, Sector};

fn setup() -> impl Strategy<Value = (Geometry, u64, u64, u64)> {
    (
        prop_oneof![Just(Level::Raid4), Just(Level::Raid5), Just(Level::Raid6)],
        4usize..=10,
        3u32..=11,
    )
        .prop_flat_map(|(level, disks, chunk_log)| {
            // chunk 4 KiB..1 MiB (8..2048 sectors); stripe_size 4 KiB up to the chunk.
            let chunk_sectors = 1u64 << chunk_log;
            let g =
                Geometry::new(level, level.default_layout(), disks, chunk_sectors * 512).unwrap();
            (Just(g), (3..=chunk_log).prop_map(|u| 1u64 << u), 0u64..100_000, 1u64..5_000)
        })
}

fn tiles(mut ranges: Vec<(u64, u64)>, total: u64) -> bool {
    ranges.sort_unstable();
    let mut at = 0;
    for (start, len) in ranges {
        if start != at || len == 0 {
            return false;
        }
        at += len;
    }
    at == total
}

proptest! {
    #[test]
    fn chunk_pieces_tile_the_request((g, _unit, start, sectors) in setup()) {
        let pieces: Vec<_> = split_by_chunk(&g, Sector(start), sectors).collect();
        prop_assert!(tiles(pieces.iter().map(|p| (p.buf_sector, p.sectors)).collect(), sectors));
        for p in &pieces {
            let first = g.map_sector(Sector(start + p.buf_sector));
            let last = g.map_sector(Sector(start + p.buf_sector + p.sectors - 1));
            prop_assert_eq!(p.addr, first);
            prop_assert_eq!((last.stripe, last.disk), (first.stripe, first.disk), "one chunk");
            prop_assert_eq!(last.member_sector.0, first.member_sector.0 + p.sectors - 1);
        }
    }

    #[test]
    fn head_work_tiles_the_request((g, unit, start, sectors) in setup()) {
        let heads = split_by_head(&g, unit, Sector(start), sectors);
        let mut ranges = Vec::new();
        for h in &heads {
            let mut slots: Vec<u16> = h.blocks.iter().map(|b| b.data_slot).collect();
            slots.dedup();
            prop_assert_eq!(slots.len(), h.blocks.len(), "one range per block");
            for b in &h.blocks {
                prop_assert!(b.first + b.sectors <= unit, "inside the unit");
                let at = g.map_sector(Sector(start + b.buf_sector));
                prop_assert_eq!((at.stripe, at.data_slot), (h.key.stripe, b.data_slot));
                prop_assert_eq!(at.member_sector.0 % g.chunk_sectors(), u64::from(h.key.unit) * unit + b.first);
                let want = if b.sectors == unit { Cover::Full } else { Cover::Partial };
                prop_assert_eq!(h.cover(b.data_slot, unit), want);
                ranges.push((b.buf_sector, b.sectors));
            }
        }
        prop_assert!(tiles(ranges, sectors));
        prop_assert!(heads.windows(2).all(|w| w[0].key < w[1].key), "in key order");
    }
}

#[test]
fn a_full_stripe_write_covers_every_block_of_its_heads() {
    // RAID6 of 10 (8 data), chunk 128 KiB, stripe_size 4 KiB: one 1 MiB stripe-aligned write
    // is 32 heads, each with all 8 data blocks wholly covered.
    let g = Geometry::new(Level::Raid6, Level::Raid6.default_layout(), 10, 128 << 10).unwrap();
    let heads = split_by_head(&g, 8, Sector(0), 2048);
    assert_eq!(heads.len(), 32);
    for h in &heads {
        assert!((0..8).all(|slot| h.cover(slot, 8) == Cover::Full));
    }
    // 4 KiB inside one chunk: one head, one block.
    let heads = split_by_head(&g, 8, Sector(256 + 16), 8);
    assert_eq!((heads.len(), heads[0].blocks.len(), heads[0].cover(1, 8)), (1, 1, Cover::Full));
}
