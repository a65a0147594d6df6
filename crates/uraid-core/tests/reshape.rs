//! The copy crashed at random writes (the write in flight torn) and taken up again from the
//! last recorded position, over every level and layout, members added (forwards), removed
//! (backwards) or neither (either way), the layout and chunk changed or not, whole or with a
//! slot missing: the array ends with the old data (as much as it holds) followed by zeros, and
//! every new stripe's parity right.

mod common;

use common::pattern as bytes;
use proptest::prelude::*;
use uraid_core::layout::LAYOUTS;
use uraid_core::reshape::{MemberRead, MemberWrite, Reshape, ReshapeError, ReshapeIo};
use uraid_core::{
    DiskIndex, DiskRole, Geometry, Level, SECTOR_BYTES, Sector, StripeNumber, reconstruct,
};

struct Crash;

/// Members in memory; after `writes_left` writes the next one lands half, its other half
/// garbage, and fails. The `missing` slot is never touched.
struct Members {
    disks: Vec<Vec<u8>>,
    writes_left: u64,
    garbage: u8,
    missing: Option<usize>,
    /// A batch's reads and writes go last first (a runtime may run them in any order).
    reversed: bool,
}

impl ReshapeIo for Members {
    type Error = Crash;
    fn read(&mut self, disk: DiskIndex, at: u64, buf: &mut [u8]) -> Result<(), Crash> {
        assert_ne!(Some(disk.get()), self.missing, "a missing member read");
        let at = at as usize;
        buf.copy_from_slice(&self.disks[disk.get()][at..at + buf.len()]);
        Ok(())
    }
    fn write(&mut self, disk: DiskIndex, at: u64, buf: &[u8]) -> Result<(), Crash> {
        assert_ne!(Some(disk.get()), self.missing, "a missing member written");
        let at = at as usize;
        let target = &mut self.disks[disk.get()][at..at + buf.len()];
        if self.writes_left == 0 {
            let half = buf.len() / 2;
            target[..half].copy_from_slice(&buf[..half]);
            target[half..].fill(self.garbage);
            return Err(Crash);
        }
        self.writes_left -= 1;
        target.copy_from_slice(buf);
        Ok(())
    }
    fn read_all(&mut self, reads: &mut [MemberRead<'_>]) -> Result<(), Crash> {
        if self.reversed {
            reads.reverse();
        }
        reads.iter_mut().try_for_each(|r| self.read(r.disk, r.at_bytes, r.buf))
    }
    fn write_all(&mut self, writes: &[MemberWrite<'_>]) -> Result<(), Crash> {
        let order: Vec<_> =
            if self.reversed { writes.iter().rev().collect() } else { writes.iter().collect() };
        order.into_iter().try_for_each(|w| self.write(w.disk, w.at_bytes, w.buf))
    }
}

fn chunk_of(disks: &[Vec<u8>], disk: usize, at_sectors: u64, len: usize) -> &[u8] {
    let at = (at_sectors * SECTOR_BYTES) as usize;
    &disks[disk][at..at + len]
}

/// `shape`: which level and layout (an index), members before, members added (removed when
/// negative), the chunk in KiB, chunks (of the larger chunk) a member; `change`: the new layout
/// (an index into `LAYOUTS`, the old one when `None`) and chunk in KiB, and whether the same
/// members' data moves up (backwards).
fn run_case(
    shape: (usize, usize, isize, u64, u64),
    change: (Option<usize>, u64, bool),
    missing: Option<usize>,
    gaps: &[u64],
    max_stripes: u64,
    crashes: &[u64],
    seed: u64,
) -> Result<(), TestCaseError> {
    let (level_layout, old_disks, added, chunk_kib, chunks) = shape;
    let (layout, _) = LAYOUTS[level_layout % LAYOUTS.len()];
    let level = [Level::Raid4, Level::Raid5, Level::Raid6][level_layout / LAYOUTS.len() % 3];
    let (chunk_bytes, new_disks) = (chunk_kib * 1024, old_disks.saturating_add_signed(added));
    // A new layout the level takes (most of `LAYOUTS` belong to another).
    let takes: Vec<_> = LAYOUTS.iter().filter(|(l, _)| l.check_level(level).is_ok()).collect();
    let new_layout = change.0.map_or(layout, |i| takes[i % takes.len()].0);
    let (Ok(old), Ok(new)) = (
        Geometry::new(level, layout, old_disks, chunk_bytes),
        Geometry::new(level, new_layout, new_disks, change.1 * 1024),
    ) else {
        return Err(TestCaseError::reject("a combination md refuses"));
    };
    let chunk = old.chunk_sectors().max(new.chunk_sectors());
    let component = chunks * chunk;
    // Each member's own offsets: the new one the gap and a few sectors or more below the old
    // (above it backwards: fewer members, or the same moving up).
    let backwards = new_disks < old_disks || (new_disks == old_disks && change.2);
    let gap = Reshape::gap_sectors(&old, &new);
    let (disks, disks_moved) =
        if backwards { (old_disks, new_disks) } else { (new_disks, old_disks) };
    let low: Vec<u64> = (0..disks).map(|d| 8 + gaps[d % gaps.len()] % 13).collect();
    let high: Vec<u64> =
        (0..disks_moved).map(|d| low[d] + gap + gaps[(d + 1) % gaps.len()] % (3 * chunk)).collect();
    let (old_offsets, new_offsets) = if backwards { (low, high) } else { (high, low) };
    let all_disks = old_disks.max(new_disks);
    let missing = missing.map(|slot| slot % all_disks);
    let Ok(reshape) =
        Reshape::new(old.clone(), new.clone(), component, old_offsets.clone(), new_offsets.clone())
    else {
        return Err(TestCaseError::reject("nothing changes"));
    };
    let reshape = reshape.with_missing(missing.as_slice()).expect("one slot missing");
    prop_assert_eq!(reshape.is_backwards(), backwards);
    let device_bytes = ((6 * chunk + 64 + component) * SECTOR_BYTES) as usize;
    let mut members = Members {
        disks: (0..all_disks).map(|d| bytes(seed + d as u64, device_bytes)).collect(),
        writes_left: u64::MAX,
        garbage: 0xa5,
        missing: None,
        reversed: seed % 2 == 1,
    };
    let contents = bytes(seed ^ 0x5eed, (reshape.old_array_sectors() * SECTOR_BYTES) as usize);
    write_old_array(&mut members.disks, &old, &old_offsets, component, &contents);
    members.missing = missing;
    let unit = ((chunk * SECTOR_BYTES) >> (seed % 3)).max(512);
    // Whole new stripes a batch (none: a piece at a time, as for stripes larger than a batch).
    let batch = [0, 1, 2, 7][(seed / 3 % 4) as usize] * new.stripe_data_sectors() * SECTOR_BYTES;
    let (mut position, mut crashes) = (reshape.start_position(), crashes.iter());
    members.writes_left = crashes.next().copied().unwrap_or(u64::MAX);
    while let Some(window) = reshape.next_window(position, max_stripes) {
        reshape.check_position(position).expect("positions stay whole new stripes");
        match reshape.copy_window(&mut members, window, unit, batch) {
            Ok(next) => position = next,
            // Power lost: the next run starts from the position last recorded.
            Err(Crash) => members.writes_left = crashes.next().copied().unwrap_or(u64::MAX),
        }
    }
    prop_assert_eq!(position, reshape.end_position());
    check_new_array(&members.disks, &new, &new_offsets, component, &contents, missing)
}

/// The old array on `disks`: `contents` where the old geometry puts it, and its parity.
fn write_old_array(
    disks: &mut [Vec<u8>],
    old: &Geometry,
    offsets: &[u64],
    component: u64,
    contents: &[u8],
) {
    let (chunk, chunk_bytes) = (old.chunk_sectors(), old.chunk_bytes() as usize);
    for (n, data) in contents.chunks(chunk_bytes).enumerate() {
        let to = old.map_sector(Sector(n as u64 * chunk));
        let at = ((offsets[to.disk.get()] + to.member_sector.0) * SECTOR_BYTES) as usize;
        disks[to.disk.get()][at..at + data.len()].copy_from_slice(data);
    }
    for stripe in 0..old.stripes(component) {
        let map = old.stripe_map(StripeNumber(stripe));
        let at = |d: usize| ((offsets[d] + stripe * chunk) * SECTOR_BYTES) as usize;
        let mut blocks: Vec<Vec<u8>> =
            (0..old.raid_disks()).map(|d| disks[d][at(d)..at(d) + chunk_bytes].to_vec()).collect();
        let parity: Vec<bool> =
            map.roles.iter().map(|r| !matches!(r, DiskRole::Data { .. })).collect();
        let mut views: Vec<&mut [u8]> = blocks.iter_mut().map(Vec::as_mut_slice).collect();
        reconstruct(old.level(), map, &mut views, &parity).expect("parity only");
        for (d, block) in blocks.iter().enumerate() {
            disks[d][at(d)..at(d) + block.len()].copy_from_slice(block);
        }
    }
}

/// The new array on `disks` holds `contents`, then zeros, with every stripe's parity right
/// (the `missing` slot, never written, as the others' parity says).
fn check_new_array(
    disks: &[Vec<u8>],
    new: &Geometry,
    offsets: &[u64],
    component: u64,
    contents: &[u8],
    missing: Option<usize>,
) -> Result<(), TestCaseError> {
    let (chunk, chunk_len, level) = (new.chunk_sectors(), new.chunk_bytes() as usize, new.level());
    for stripe in 0..new.stripes(component) {
        let map = new.stripe_map(StripeNumber(stripe));
        let mut blocks: Vec<Vec<u8>> = (0..new.raid_disks())
            .map(|d| chunk_of(disks, d, offsets[d] + stripe * chunk, chunk_len).to_vec())
            .collect();
        if let Some(slot) = missing {
            let lost: Vec<bool> = (0..new.raid_disks()).map(|d| d == slot).collect();
            let mut views: Vec<&mut [u8]> = blocks.iter_mut().map(Vec::as_mut_slice).collect();
            reconstruct(level, map, &mut views, &lost).expect("one lost");
        }
        for (slot, disk) in map.data_disk.iter().enumerate() {
            let n = (stripe * new.data_disks() as u64) as usize + slot;
            let expected = contents.get(n * chunk_len..(n + 1) * chunk_len);
            let zeros = vec![0u8; chunk_len];
            let expected = expected.unwrap_or(&zeros);
            prop_assert!(blocks[disk.get()] == expected, "stripe {} slot {}", stripe, slot);
        }
        let stored = blocks.clone();
        let lost: Vec<bool> =
            map.roles.iter().map(|r| !matches!(r, DiskRole::Data { .. })).collect();
        let mut views: Vec<&mut [u8]> = blocks.iter_mut().map(Vec::as_mut_slice).collect();
        reconstruct(level, map, &mut views, &lost).expect("parity only");
        prop_assert!(blocks == stored, "stripe {}: parity", stripe);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn crashed_copies_taken_up_again_end_right_whole_or_degraded(
        level_layout in 0usize..45,
        old_disks in 3usize..7,
        added in 1isize..4,
        chunk_kib in prop::sample::select(vec![4u64, 8, 16]),
        new_layout in prop::option::of(0usize..64),
        new_chunk_kib in prop::option::of(prop::sample::select(vec![4u64, 8, 16])),
        added_or_none in prop::option::of(1isize..4),
        removed in prop::option::of(1isize..3),
        up in any::<bool>(),
        chunks in 2u64..14,
        gaps in prop::collection::vec(any::<u64>(), 1..6),
        missing in prop::option::of(0usize..9),
        max_stripes in 1u64..6,
        crashes in prop::collection::vec(0u64..40, 0..5),
        seed in any::<u64>(),
    ) {
        // Without a new layout or chunk (a quarter of the cases) members are added or removed.
        let (added, change) = match (new_layout, new_chunk_kib, added_or_none) {
            (None, None, _) => (added, (None, chunk_kib, up)),
            (l, c, a) => (a.unwrap_or(0), (l, c.unwrap_or(chunk_kib), up)),
        };
        // A third of the cases remove members instead.
        let added = match removed {
            Some(r) if seed % 3 == 0 => -r,
            _ => added,
        };
        let shape = (level_layout, old_disks, added, chunk_kib, chunks);
        run_case(shape, change, missing, &gaps, max_stripes, &crashes, seed)?;
    }
}

fn raid5(disks: usize) -> Geometry {
    Geometry::new(Level::Raid5, LAYOUTS[0].0, disks, 64 * 1024).expect("valid")
}

#[test]
fn first_window_is_the_gap_in_chunks() {
    // 128-sector chunks, offsets 2048 -> 1024: 8 rows of room, 4 -> 5 members.
    let reshape =
        Reshape::new(raid5(4), raid5(5), 128 * 100, vec![2048; 4], vec![1024; 5]).expect("room");
    assert_eq!(reshape.next_window(0, 100), Some(0..8));
    assert_eq!(reshape.next_window(0, 3), Some(0..3));
    // After 8 new stripes (32 chunks = 10 old rows and 2 chunks) the old data starts at row 10.
    assert_eq!(reshape.next_window(8 * 4 * 128, 100), Some(8..18));
    // Past the old data (300 chunks, stripe 75 of the new) only the cap counts.
    assert_eq!(reshape.next_window(75 * 4 * 128, 1000), Some(75..100));
    assert_eq!(reshape.next_window(100 * 4 * 128, 1), None);
    assert!(reshape.check_position(8 * 4 * 128).is_ok());
    assert!(matches!(reshape.check_position(3 * 128), Err(ReshapeError::Position { .. })));
}

#[test]
fn fewer_members_go_backwards_from_the_new_end() {
    // 5 -> 4 members of 100 chunks of 128 sectors, data moving up from 1024 to 2048: the new
    // array holds 300 chunks (38400 sectors) of the old 400.
    let reshape =
        Reshape::new(raid5(5), raid5(4), 128 * 100, vec![1024; 5], vec![2048; 4]).expect("room");
    assert!(reshape.is_backwards());
    assert_eq!((reshape.start_position(), reshape.end_position()), (38400, 0));
    assert_eq!(reshape.new_array_sectors(), 38400);
    // Below the position lie old rows 0..75, ending at 1024 + 75 * 128 = 10624 = 2048 + 67 *
    // 128: new stripes from 67 up clear them.
    assert_eq!(reshape.next_window(38400, 1000), Some(67..100));
    assert_eq!(reshape.next_window(38400, 10), Some(90..100));
    // Near the start the gap of 8 chunks is all there is: 8 new rows above 0 old ones.
    assert_eq!(reshape.next_window(8 * 384, 1000), Some(0..8));
    assert_eq!(reshape.next_window(0, 1000), None);
    // The same members move up too when the offsets say so (a layout change).
    let la = Geometry::new(Level::Raid5, LAYOUTS[1].0, 4, 64 * 1024).expect("valid");
    let same = Reshape::new(raid5(4), la, 1280, vec![1024; 4], vec![2048; 4]).expect("room");
    assert!(same.is_backwards() && same.start_position() == 3840);
}

#[test]
fn refuses_what_is_not_a_grow_with_room() {
    let no_room = Reshape::new(raid5(4), raid5(5), 1280, vec![2048; 4], vec![2000; 5]);
    assert!(matches!(no_room, Err(ReshapeError::NoRoom { disk: 0, .. })));
    // Fewer members move up: the offsets of a grow are refused for them.
    let down = Reshape::new(raid5(5), raid5(4), 1280, vec![2048; 5], vec![1024; 4]);
    assert!(matches!(down, Err(ReshapeError::NoRoom { direction: "above", .. })));
    let up = Reshape::new(raid5(4), raid5(5), 1280, vec![1024; 4], vec![2048; 5]);
    assert!(matches!(up, Err(ReshapeError::NoRoom { direction: "below", .. })));
    let offsets = Reshape::new(raid5(4), raid5(5), 1280, vec![2048; 4], vec![1024; 4]);
    assert!(matches!(offsets, Err(ReshapeError::Offsets { found: 4, expected: 5, .. })));
    let nothing = Reshape::new(raid5(4), raid5(4), 1280, vec![2048; 4], vec![1024; 4]);
    assert!(matches!(nothing, Err(ReshapeError::NotAGrow { .. })));
    let raid6 = Geometry::new(Level::Raid6, LAYOUTS[0].0, 5, 64 * 1024).expect("valid");
    let level = Reshape::new(raid5(4), raid6, 1280, vec![2048; 4], vec![1024; 5]);
    assert!(matches!(level, Err(ReshapeError::NotAGrow { .. })));
    // 1280 sectors a member hold ten 64 KiB chunks but only two of 256 KiB (and a half).
    let big = Geometry::new(Level::Raid5, LAYOUTS[0].0, 4, 256 * 1024).expect("valid");
    let shrinks = Reshape::new(raid5(4), big.clone(), 1280, vec![2048; 4], vec![1024; 4]);
    assert!(matches!(shrinks, Err(ReshapeError::Shrinks { new_sectors: 3072, .. })));
    // A chunk change needs the old and the new chunk between the offsets: 128 + 512.
    let tight = Reshape::new(raid5(4), big.clone(), 2048, vec![2048; 4], vec![1500; 4]);
    assert!(matches!(tight, Err(ReshapeError::NoRoom { gap_sectors: 640, .. })));
    assert!(Reshape::new(raid5(4), big, 2048, vec![2048; 4], vec![1408; 4]).is_ok());
}
