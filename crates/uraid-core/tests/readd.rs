//! A member back by re-add (`Array::start_readd`): in sync at once outside the bitmap's dirty
//! chunks (reads come from it, writes go to it), rebuilt by a recovery over the dirty chunks
//! alone; a write planned while it was failed, its bit wanted but not yet written, counts as
//! dirty.

mod common;

use common::{Mem, array, pattern, read, run, write};
use uraid_core::array::{Array, IoArea, MemberOp, ReqId, SyncKind, WriteIntentConfig};
use uraid_core::{DiskIndex, Level, Sector};

/// 256 KiB of each member per bit: 4 bits over the 1 MiB test members.
const CHUNK_SECTORS: u64 = 512;
/// A whole stripe's data: 3 data members of 64 KiB chunks.
const STRIPE_BYTES: usize = 3 * (64 << 10);

fn with_bitmap(level: Level, disks: usize) -> Array {
    let mut a = array(level, disks, 64 << 10, 4096);
    a.enable_write_intent(&WriteIntentConfig {
        image: vec![0u8; 4096],
        bits_offset: 256,
        chunk_sectors: CHUNK_SECTORS,
        chunks: 4,
    });
    a
}

#[test]
fn a_readded_member_is_rebuilt_only_in_dirty_chunks() {
    let mut a = with_bitmap(Level::Raid5, 4);
    let mut mem = Mem::new(4);
    let bytes = (a.size_sectors() * 512) as usize;
    let mut model = pattern(1, bytes);
    // Written before the bitmap knew: as if its bits had been cleared long ago.
    let mut plain = array(Level::Raid5, 4, 64 << 10, 4096);
    write(&mut plain, &mut mem, 0, model.clone());
    a.fail_member(DiskIndex(1));
    // Member sector 0..512 is bitmap chunk 0: array sectors 0.. (3 data disks a row).
    write(&mut a, &mut mem, 8, pattern(2, 4096));
    model[8 * 512..8 * 512 + 4096].copy_from_slice(&pattern(2, 4096));
    // A write in chunk 2 (member sector 1024 = stripe 8: array sector 3072), planned with the
    // member failed: its bit is wanted when the member comes back.
    let late = 3 * 1024 + 128;
    a.submit_write(ReqId(7), Sector(late), pattern(3, 8192));
    let mut first: Vec<_> = std::iter::from_fn(|| a.next_io()).collect();
    assert!(first.iter().any(|io| io.area == IoArea::Bitmap), "its bit goes out first");
    // And a whole stripe in chunk 3 (stripe 12: no pre-reads, so not delayed behind the
    // first) while that bitmap write is in flight: its bit waits for the next generation,
    // wanted only.
    let later = 12 * 384;
    a.submit_write(ReqId(8), Sector(later), pattern(5, STRIPE_BYTES));
    first.extend(std::iter::from_fn(|| a.next_io()));
    let stale = a.start_readd(DiskIndex(1)).expect("a bitmap");
    assert_eq!(stale, vec![(0, 512), (1024, 1024)], "chunks 0, 2 and 3");
    for io in &first {
        assert!(mem.perform(&mut a, io));
        a.complete_io(io.tag, true);
    }
    run(&mut a, &mut mem);
    model[late as usize * 512..late as usize * 512 + 8192].copy_from_slice(&pattern(3, 8192));
    let at = later as usize * 512;
    model[at..at + STRIPE_BYTES].copy_from_slice(&pattern(5, STRIPE_BYTES));
    // Chunk 1 (member sectors 512..1024: array sectors 1536..3072) is clean: a write there
    // goes to member 1 now, and a read there reads it.
    let before = mem.log.len();
    // A whole stripe (stripe 4), so that member 1 has a block in it.
    let (clean, len) = (3 * 512, STRIPE_BYTES);
    write(&mut a, &mut mem, clean, pattern(4, len));
    model[clean as usize * 512..clean as usize * 512 + len].copy_from_slice(&pattern(4, len));
    let to_member = |io: &&uraid_core::array::MemberIo| io.member.0 == 1 && io.area == IoArea::Data;
    assert!(mem.log[before..].iter().filter(to_member).any(|io| io.op == MemberOp::Write));
    let before = mem.log.len();
    assert_eq!(read(&mut a, &mut mem, 3 * 512, 3 * 512 * 512), model[3 * 512 * 512..6 * 512 * 512]);
    assert!(mem.log[before..].iter().filter(to_member).any(|io| io.op == MemberOp::Read));
    // The recovery of the dirty chunks, then the member is in sync everywhere.
    for (from, sectors) in stale {
        a.submit_sync(ReqId(1000), SyncKind::Recovery, Sector(from), sectors);
        run(&mut a, &mut mem);
    }
    a.set_recovery_offset(DiskIndex(1), Sector(u64::MAX / 2));
    assert!(a.recovering().is_empty());
    // Member 1 is right everywhere: read with another member failed.
    let mut b = array(Level::Raid5, 4, 64 << 10, 4096);
    b.fail_member(DiskIndex(2));
    assert!(read(&mut b, &mut mem, 0, bytes) == model, "member 1 holds the writes it missed");
}

/// A RAID6 of 6 with a bitmap, over members holding pattern `seed` (written before the
/// bitmap knew: no bit set), and the first two data members of row 0.
fn raid6_written(seed: u64) -> (Array, Mem, Vec<u8>, [DiskIndex; 2]) {
    let a = with_bitmap(Level::Raid6, 6);
    let mut mem = Mem::new(6);
    let model = pattern(seed, (a.size_sectors() * 512) as usize);
    let mut plain = array(Level::Raid6, 6, 64 << 10, 4096);
    write(&mut plain, &mut mem, 0, model.clone());
    let g = uraid_core::Geometry::new(Level::Raid6, Level::Raid6.default_layout(), 6, 64 << 10)
        .unwrap();
    let map = g.stripe_map(uraid_core::StripeNumber(0));
    (a, mem, model, [map.data_disk[0], map.data_disk[1]])
}

/// A degraded read in flight when a member comes back by re-add: planned with it lost, the
/// head did not read it, and the member is in sync there now. Rebuilding the wanted block
/// with the member counted good would take its unread buffer for data (the simulator's seed
/// 1313 read garbage so); the head plans again and reads it.
#[test]
fn a_read_in_flight_when_a_member_comes_back_plans_again() {
    let (mut a, mut mem, model, [back, wanted]) = raid6_written(6);
    a.fail_member(back);
    a.fail_member(wanted);
    // Slot 1's first block (array sector 128): rebuilt from the four others.
    a.submit_read(ReqId(1), Sector(128), vec![0; 4096]);
    let reads: Vec<_> = std::iter::from_fn(|| a.next_io()).collect();
    assert!(reads.iter().all(|io| io.member != back && io.member != wanted));
    assert_eq!(a.start_readd(back).expect("a bitmap"), vec![], "no bit set");
    for io in &reads {
        assert!(mem.perform(&mut a, io));
        a.complete_io(io.tag, true);
    }
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 1);
    assert!(done[0].2 == model[128 * 512..128 * 512 + 4096], "the block as written");
    assert!(mem.log.iter().any(|io| io.member == back && io.op == MemberOp::Read));
}

/// The same for a recovery batch: planned while one member was failed and another (a spare)
/// recovering, it did not read the first, which came back by re-add before the batch
/// computed. Rebuilding the spare's block with the member counted good took its unread
/// buffer for data (the simulator's seed 47175199, once it started a second recovery beside
/// one under way); the batch reads it first.
#[test]
fn a_recovery_batch_in_flight_when_a_member_comes_back_reads_it() {
    let (mut a, mut mem, _, [back, spare]) = raid6_written(7);
    let want = mem.disks.clone();
    a.fail_member(back);
    a.fail_member(spare);
    // A blank spare in the second slot, recovered whole.
    mem.disks[spare.get()].fill(0);
    a.start_recovery(spare, Sector(0));
    // Its first head (member sectors 0..8), read from the four members in sync.
    a.submit_sync(ReqId(1), SyncKind::Recovery, Sector(0), 8);
    let ios: Vec<_> = std::iter::from_fn(|| a.next_io()).collect();
    let reads = ios.iter().filter(|io| io.area == IoArea::Data && io.op == MemberOp::Read);
    assert_eq!(reads.clone().count(), 4, "{ios:?}");
    assert!(reads.clone().all(|io| io.member != back && io.member != spare));
    assert_eq!(a.start_readd(back).expect("a bitmap"), vec![], "no bit set");
    for io in &ios {
        assert!(mem.perform(&mut a, io));
        a.complete_io(io.tag, true);
    }
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 1);
    assert!(done[0].1.is_ok());
    let spare_block = &mem.disks[spare.get()][..4096];
    assert!(spare_block == &want[spare.get()][..4096], "the spare's block rebuilt right");
    assert!(mem.log.iter().any(|io| io.member == back && io.op == MemberOp::Read));
}
