//! md's write-intent bitmap in the engine: bits durable on every member before the writes
//! they cover, cleared lazily after two idle ticks, kept while degraded.

mod common;

use common::{Mem, array, pattern, read, run, write};
use uraid_core::array::{Array, IoArea, MemberOp, ReqId, WriteIntentConfig};
use uraid_core::{DiskIndex, Level, Sector};

const BITS_AT: usize = 256;
/// 256 KiB of each member per bit: 4 bits over the 1 MiB test members.
const CHUNK_SECTORS: u64 = 512;

fn with_bitmap(level: Level, disks: usize) -> (Array, Mem) {
    let mut a = array(level, disks, 64 << 10, 4096);
    a.enable_write_intent(&WriteIntentConfig {
        image: vec![0u8; 4096],
        bits_offset: BITS_AT,
        chunk_sectors: CHUNK_SECTORS,
        chunks: 4,
    });
    (a, Mem::new(disks))
}

/// RAID5 x4 whose bitmap is loaded with `bits` set, as after a crash.
fn loaded_raid5(bits: u8) -> Array {
    let mut a = array(Level::Raid5, 4, 64 << 10, 4096);
    let mut image = vec![0u8; 4096];
    image[BITS_AT] = bits;
    a.enable_write_intent(&WriteIntentConfig {
        image,
        bits_offset: BITS_AT,
        chunk_sectors: CHUNK_SECTORS,
        chunks: 4,
    });
    a
}

fn bits(mem: &Mem, member: usize) -> u8 {
    mem.bitmaps[member][BITS_AT]
}

/// A write's bit reaches every member (FUA) before any of its data or parity goes out.
#[test]
fn the_bit_is_durable_before_the_write() {
    let (mut a, mut mem) = with_bitmap(Level::Raid6, 6);
    // Array sector in the second bitmap chunk: member sector 512 is stripe 4 (64 KiB chunks).
    let sector = 4 * 4 * 128;
    a.submit_write(ReqId(1), Sector(sector), pattern(1, 4096));
    let mut first_turn = Vec::new();
    while let Some(io) = a.next_io() {
        first_turn.push(io);
    }
    // The bitmap update goes out with the rmw's pre-reads (old data, P, Q), in one turn.
    let bitmap: Vec<_> = first_turn.iter().filter(|io| io.area == IoArea::Bitmap).collect();
    assert_eq!(bitmap.len(), 6, "one bitmap page write per member");
    assert!(bitmap.iter().all(|io| io.fua && io.op == MemberOp::Write));
    assert!(first_turn.iter().all(|io| io.area == IoArea::Bitmap || io.op == MemberOp::Read));
    for io in &first_turn {
        assert!(mem.perform(&mut a, io));
        a.complete_io(io.tag, true);
    }
    assert!((0..6).all(|m| bits(&mem, m) == 0b10), "bit 1 set on every member");
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 1);
    assert!(mem.log.iter().skip(first_turn.len()).all(|io| io.area == IoArea::Data));
    assert_eq!(a.write_intent_dirty_chunks(), vec![1]);
    // A second write to the same region needs no bitmap update.
    let pages = a.write_intent_page_writes();
    write(&mut a, &mut mem, sector + 8, pattern(2, 4096));
    assert_eq!(a.write_intent_page_writes(), pages);
}

/// Writes of one turn to several regions share one bitmap update.
#[test]
fn one_generation_for_a_turn_of_writes() {
    let (mut a, mut mem) = with_bitmap(Level::Raid5, 4);
    let region_bytes = CHUNK_SECTORS * 512 * 3; // 3 data members per stripe row
    for r in 0..4u64 {
        a.submit_write(ReqId(r), Sector(r * region_bytes / 512), pattern(r, 8192));
    }
    let done = run(&mut a, &mut mem);
    assert!(done.iter().all(|d| d.1.is_ok()));
    assert_eq!(a.write_intent_page_writes(), 1, "one page, written once to each member");
    assert_eq!(mem.log.iter().filter(|io| io.area == IoArea::Bitmap).count(), 4);
    assert_eq!(bits(&mem, 0), 0b1111);
}

/// Bits clear after two ticks without writes; not while the array is degraded; a write after
/// a clear sets the bit again first.
#[test]
fn bits_clear_lazily_and_stay_while_degraded() {
    let (mut a, mut mem) = with_bitmap(Level::Raid5, 4);
    write(&mut a, &mut mem, 0, pattern(3, 4096));
    a.write_intent_tick();
    run(&mut a, &mut mem);
    assert_eq!(bits(&mem, 0), 0b1, "one tick: not yet");
    a.write_intent_tick();
    run(&mut a, &mut mem);
    assert!((0..4).all(|m| bits(&mem, m) == 0), "two idle ticks: cleared everywhere");
    assert!(a.write_intent_dirty_chunks().is_empty());

    write(&mut a, &mut mem, 0, pattern(4, 4096));
    assert_eq!(bits(&mem, 0), 0b1, "set again before the write");
    a.fail_member(DiskIndex(3));
    for _ in 0..3 {
        a.write_intent_tick();
        run(&mut a, &mut mem);
    }
    assert_eq!(a.write_intent_dirty_chunks(), vec![0], "kept while degraded");
    assert_eq!(read(&mut a, &mut mem, 0, 4096), pattern(4, 4096));
}

/// A write in flight keeps its region's bit however many ticks pass.
#[test]
fn a_region_being_written_is_not_cleared() {
    let (mut a, mut mem) = with_bitmap(Level::Raid5, 4);
    write(&mut a, &mut mem, 0, pattern(5, 4096));
    a.write_intent_tick();
    a.submit_write(ReqId(9), Sector(8), pattern(6, 4096));
    // Perform everything except the data writes, then tick twice.
    let mut held = Vec::new();
    while let Some(io) = a.next_io() {
        if io.op == MemberOp::Write && io.area == IoArea::Data {
            held.push(io);
        } else {
            let ok = mem.perform(&mut a, &io);
            a.complete_io(io.tag, ok);
        }
    }
    assert!(!held.is_empty());
    a.write_intent_tick();
    a.write_intent_tick();
    assert!(a.next_io().is_none(), "no bitmap update while the region is written");
    for io in &held {
        let ok = mem.perform(&mut a, io);
        a.complete_io(io.tag, ok);
    }
    run(&mut a, &mut mem);
    assert_eq!(bits(&mem, 0), 0b1);
}

/// Bits found set when the bitmap is loaded (a crash) stay set, however idle, until their
/// resync is reported; then they clear lazily like any other.
#[test]
fn bits_found_set_stay_until_resynced() {
    let mut a = loaded_raid5(0b0110);
    let mut mem = Mem::new(4);
    assert_eq!(a.write_intent_unsynced_chunks(), vec![1, 2]);
    for _ in 0..3 {
        a.write_intent_tick();
        run(&mut a, &mut mem);
    }
    assert_eq!(a.write_intent_dirty_chunks(), vec![1, 2], "pinned until resynced");
    // Half of chunk 1 is not the chunk: nothing unpinned.
    a.write_intent_resynced(Sector(CHUNK_SECTORS), CHUNK_SECTORS / 2);
    assert_eq!(a.write_intent_unsynced_chunks(), vec![1, 2]);
    a.write_intent_resynced(Sector(CHUNK_SECTORS), CHUNK_SECTORS);
    assert_eq!(a.write_intent_unsynced_chunks(), vec![2]);
    for _ in 0..2 {
        a.write_intent_tick();
        run(&mut a, &mut mem);
    }
    assert_eq!(a.write_intent_dirty_chunks(), vec![2]);
    assert!((0..4).all(|m| bits(&mem, m) == 0b0100), "chunk 1 cleared on every member");
}

/// The image loaded after a crash is one member's: a generation the crash tore may have set
/// bits on it alone. Writes to a chunk whose bit it holds wait until the image is on every
/// member; else, with that member failed next, a restart reading another member's bitmap
/// would not know the chunk was written degraded, and a re-add would leave it stale (seed
/// 31084478 of the simulator: parity left stale on the re-added member).
#[test]
fn bits_loaded_at_a_restart_reach_every_member_before_writes_they_cover() {
    let mut a = loaded_raid5(0b0001);
    let mut mem = Mem::new(4);
    assert!((0..4).all(|m| bits(&mem, m) == 0), "the other members never got bit 0");
    a.submit_write(ReqId(1), Sector(0), pattern(7, 4096));
    let mut first_turn = Vec::new();
    while let Some(io) = a.next_io() {
        first_turn.push(io);
    }
    let bitmap = first_turn.iter().filter(|io| io.area == IoArea::Bitmap).count();
    assert_eq!(bitmap, 4, "the loaded image to every member: {first_turn:?}");
    assert!(first_turn.iter().all(|io| io.area == IoArea::Bitmap || io.op == MemberOp::Read));
    for io in &first_turn {
        assert!(mem.perform(&mut a, io));
        a.complete_io(io.tag, true);
    }
    assert!((0..4).all(|m| bits(&mem, m) & 1 == 1), "bit 0 on every member");
    let done = run(&mut a, &mut mem);
    assert!(done.len() == 1 && done[0].1.is_ok());
    assert!(read(&mut a, &mut mem, 0, 4096) == pattern(7, 4096));
}

/// A new bitmap superblock from the lifecycle layer goes to every member with page 0.
#[test]
fn a_new_header_is_written_to_every_member() {
    let (mut a, mut mem) = with_bitmap(Level::Raid6, 6);
    let header = vec![0xabu8; BITS_AT];
    a.write_intent_set_header(&header);
    assert!(a.busy(), "a header waiting to be written keeps the engine busy");
    run(&mut a, &mut mem);
    assert!((0..6).all(|m| mem.bitmaps[m][..BITS_AT] == header[..]));
    assert!(!a.busy());
}

/// A bit is cleared only after the writes it covered are durable: every member is flushed
/// before the page that clears it goes out (md's PREFLUSH). Found by the simulator: with the
/// data and parity still in a member's volatile cache, a power cut after the clearing page
/// left a torn stripe no resync would visit.
#[test]
fn clearing_a_bit_flushes_the_members_first() {
    let (mut a, mut mem) = with_bitmap(Level::Raid5, 4);
    write(&mut a, &mut mem, 0, pattern(6, 4096));
    let from = mem.log.len();
    a.write_intent_tick();
    run(&mut a, &mut mem);
    a.write_intent_tick();
    run(&mut a, &mut mem);
    assert!((0..4).all(|m| bits(&mem, m) == 0), "cleared");
    let after: Vec<_> = mem.log[from..].to_vec();
    let first_page = after.iter().position(|io| io.area == IoArea::Bitmap).expect("a page");
    for m in 0..4u16 {
        let flushed = after[..first_page]
            .iter()
            .any(|io| io.member == DiskIndex(m) && io.op == MemberOp::Flush);
        assert!(flushed, "member {m} flushed before the clearing page");
    }
    // Setting a bit needs no flush: the write waits for the FUA page anyway.
    let from = mem.log.len();
    write(&mut a, &mut mem, 0, pattern(7, 4096));
    assert!(mem.log[from..].iter().all(|io| io.op != MemberOp::Flush));
}

/// A member whose flush before a clearing generation fails may not hold the writes the bits
/// covered: the bits stay (it fails, and a re-add would rebuild it where they are set). Also
/// with a replacement started just before the generation: every bit then counts as off the
/// disk until written again for the new device, so the kept bit must go out set with the
/// generation's pages; dropped from it, it stayed set in the image with nothing to write it,
/// and the next write to its chunk waited for it for good (the simulator's seed 29059083, as a
/// stall).
#[test]
fn a_failed_flush_before_clearing_keeps_the_bits() {
    for replacing in [false, true] {
        let (mut a, mut mem) = with_bitmap(Level::Raid5, 4);
        write(&mut a, &mut mem, 0, pattern(8, 4096));
        a.write_intent_tick();
        run(&mut a, &mut mem);
        a.write_intent_tick();
        if replacing {
            a.start_replacement(DiskIndex(3));
        }
        let flushes: Vec<_> = std::iter::from_fn(|| a.next_io()).collect();
        assert!(!flushes.is_empty() && flushes.iter().all(|io| io.op == MemberOp::Flush));
        for io in &flushes {
            let ok = io.member != DiskIndex(2) && mem.perform(&mut a, io);
            a.complete_io(io.tag, ok);
        }
        run(&mut a, &mut mem);
        assert_eq!(a.failed_members(), vec![DiskIndex(2)]);
        assert_eq!(a.write_intent_dirty_chunks(), vec![0], "kept, replacing {replacing}");
        assert!([0, 1, 3].iter().all(|&m| bits(&mem, m) == 0b1), "still set on the members");
        // A write to chunk 0 finds its bit durable and goes.
        write(&mut a, &mut mem, 8, pattern(9, 4096));
        assert_eq!(read(&mut a, &mut mem, 8, 4096), pattern(9, 4096));
    }
}

/// Clears a tick asked for before a member failed are not applied once it has.
#[test]
fn clears_wanted_before_a_failure_are_dropped() {
    let (mut a, mut mem) = with_bitmap(Level::Raid5, 4);
    write(&mut a, &mut mem, 0, pattern(9, 4096));
    a.write_intent_tick();
    run(&mut a, &mut mem);
    a.write_intent_tick();
    a.fail_member(DiskIndex(1));
    run(&mut a, &mut mem);
    assert_eq!(a.write_intent_dirty_chunks(), vec![0], "kept");
    assert!([0, 2, 3].iter().all(|&m| bits(&mem, m) == 0b1), "still set on the members");
}

/// A whole-stripe discard changes data and parity like a write: its bit is durable on every
/// member before the member discards go out (found by the simulator: a power cut during
/// unflushed discards left a torn stripe in a region whose bit was clear).
#[test]
fn a_discard_sets_its_bit_before_the_members_discard() {
    let (mut a, mut mem) = with_bitmap(Level::Raid5, 4);
    // Stripe 4 (member sectors 512..640, bitmap chunk 1): 3 data chunks of 128 sectors.
    let (sector, sectors) = (4 * 3 * 128, 3 * 128);
    a.submit_discard(ReqId(1), Sector(sector), sectors);
    let done = run(&mut a, &mut mem);
    assert!(done.iter().all(|(_, r, _)| r.is_ok()));
    let first_discard = mem.log.iter().position(|io| io.op == MemberOp::Discard).expect("one");
    let pages = mem.log[..first_discard].iter().filter(|io| io.area == IoArea::Bitmap).count();
    assert_eq!(pages, 4, "a page write per member before any discard");
    assert!((0..4).all(|m| bits(&mem, m) == 0b10), "bit 1 set everywhere");
    assert_eq!(a.write_intent_dirty_chunks(), vec![1]);
}

/// A write whose pre-reads were in flight when a tick asked to clear its chunk: when it
/// reaches the bitmap it cancels the clear and goes at once (it used to park for a
/// generation that never came: found by the simulator as a stall).
#[test]
fn a_write_that_cancels_a_pending_clear_does_not_wait_forever() {
    let (mut a, mut mem) = with_bitmap(Level::Raid5, 4);
    write(&mut a, &mut mem, 0, pattern(8, 4096));
    a.write_intent_tick();
    run(&mut a, &mut mem);
    // A one-unit write: its pre-reads go out; the chunk is not counted as written yet.
    a.submit_write(ReqId(9), Sector(8), pattern(9, 4096));
    let mut reads = Vec::new();
    while let Some(io) = a.next_io() {
        reads.push(io);
    }
    assert!(!reads.is_empty() && reads.iter().all(|io| io.op == MemberOp::Read));
    a.write_intent_tick(); // idle twice: chunk 0's clear is wanted, not yet written
    for io in &reads {
        let ok = mem.perform(&mut a, io);
        a.complete_io(io.tag, ok);
    }
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 1, "the write completes");
    assert!(done[0].1.is_ok());
    assert!((0..4).all(|m| bits(&mem, m) == 0b1), "its bit still set on the members");
}

/// A spare taking a failed member's slot gets the whole bitmap before any further write, so
/// that a restart reading its bitmap resyncs every region written (found by the simulator:
/// the rebuilt member's bitmap lacked a bit set while it was out, and a power cut later left
/// that region unsynced).
#[test]
fn a_member_coming_in_gets_the_whole_bitmap_before_more_writes() {
    let (mut a, mut mem) = with_bitmap(Level::Raid5, 4);
    write(&mut a, &mut mem, 4 * 3 * 128, pattern(10, 4096)); // chunk 1 (member sector 512)
    a.fail_member(DiskIndex(2));
    mem.bitmaps[2].fill(0); // a blank replacement
    a.start_recovery(DiskIndex(2), Sector(0));
    let from = mem.log.len();
    // Chunk 1 again: its bit is set and durable on the old members, so only the rewrite for
    // the new member can put it there.
    write(&mut a, &mut mem, 4 * 3 * 128 + 8, pattern(11, 4096));
    let first_data_write = mem.log[from..]
        .iter()
        .position(|io| io.area == IoArea::Data && io.op == MemberOp::Write)
        .expect("the write");
    let to_new = mem.log[from..from + first_data_write]
        .iter()
        .filter(|io| io.area == IoArea::Bitmap && io.member == DiskIndex(2))
        .count();
    assert!(to_new >= 1, "the new member's bitmap is written before the data");
    assert_eq!(bits(&mem, 2), 0b10, "it holds chunk 1's bit, set before it came");
}

/// A recovery's and a resync's writes set no bits (md's sync writes set none): a crash in the
/// middle of either is redone from its own record (the member's recovery offset, the resync's
/// pinned bits), and a bit per chunk passed would resync all of it besides. Before, a rebuild
/// left every chunk dirty until the array was whole and idle.
#[test]
fn a_recovery_and_a_resync_set_no_bits() {
    let (mut a, mut mem) = with_bitmap(Level::Raid5, 4);
    let member_sectors = 4 * CHUNK_SECTORS;
    // Data out of step with parity in every chunk: a resync writes parity there, no bit.
    for chunk in 0..4 {
        mem.disks[0][(chunk * CHUNK_SECTORS * 512) as usize] ^= 0xff;
    }
    a.submit_sync(ReqId(1), uraid_core::array::SyncKind::Resync, Sector(0), member_sectors);
    run(&mut a, &mut mem);
    let parity_writes = mem.log.iter().filter(|io| io.op == MemberOp::Write).count();
    assert!(parity_writes >= 4, "the resync wrote parity in each chunk");
    let after: Vec<u8> = (0..4).map(|m| bits(&mem, m)).collect();
    assert_eq!(after, [0; 4], "no bit set by the resync");
    write(&mut a, &mut mem, 4 * 3 * 128, pattern(10, 4096)); // chunk 1 (member sector 512)
    a.fail_member(DiskIndex(2));
    mem.bitmaps[2].fill(0);
    a.start_recovery(DiskIndex(2), Sector(0));
    a.submit_sync(ReqId(2), uraid_core::array::SyncKind::Recovery, Sector(0), member_sectors);
    let done = run(&mut a, &mut mem);
    assert!(done.iter().all(|(_, r, _)| r.is_ok()), "{done:?}");
    let data_writes_to_new = mem
        .log
        .iter()
        .filter(|io| {
            io.member == DiskIndex(2) && io.area == IoArea::Data && io.op == MemberOp::Write
        })
        .count();
    assert!(data_writes_to_new > 0, "the recovery wrote the new member");
    for m in 0..4 {
        assert_eq!(bits(&mem, m), 0b10, "member {m}: only the user write's chunk");
    }
    assert_eq!(read(&mut a, &mut mem, 4 * 3 * 128, 4096), pattern(10, 4096));
}
