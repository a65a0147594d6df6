//! md's replace in the engine (`Array::start_replacement`, `SyncKind::Replace`): a member's
//! blocks copied to the device replacing it, one member read per block, and where that read
//! fails the block rebuilt from the rest; user writes meanwhile reach both devices through the
//! member layer (`Mem::replacements` plays it), and the member stays in the array.

mod common;

use common::*;
use uraid_core::array::{
    Array, ArrayError, IoArea, MemberIo, MemberOp, ReqId, SyncKind, WriteIntentConfig,
};
use uraid_core::{DiskIndex, Level, Sector};

const CHUNK: u64 = 16 << 10;

#[test]
fn a_copy_reads_only_the_member_and_rebuilds_what_it_cannot_read() {
    for level in [Level::Raid5, Level::Raid6] {
        let disks = 6;
        let mut a = array(level, disks, CHUNK, 4096);
        let mut mem = Mem::new(disks);
        let bytes = (a.size_sectors() * 512) as usize;
        let data = pattern(1, bytes);
        write(&mut a, &mut mem, 0, data.clone());
        let member_sectors = MEMBER_SECTORS;
        mem.replacements[2] = Some(vec![0u8; mem.disks[2].len()]);
        a.start_replacement(DiskIndex(2));
        // Two sectors of member 2 it cannot read: rebuilt from the others for the copy.
        mem.bad_reads.insert((2, 64));
        mem.bad_reads.insert((2, 1000));
        let before = mem.total();
        let reads_before: Vec<u64> = mem.counts.iter().map(|c| c.reads).collect();
        a.submit_sync(ReqId(1), SyncKind::Replace, Sector(0), member_sectors / 2);
        // A write in the middle of the copy goes to both devices.
        a.submit_write(ReqId(2), Sector(8), pattern(2, 8192));
        let done = run(&mut a, &mut mem);
        assert!(done.iter().all(|d| d.1.is_ok()), "{level:?}: {done:?}");
        a.submit_sync(ReqId(3), SyncKind::Replace, Sector(member_sectors / 2), member_sectors / 2);
        run(&mut a, &mut mem);
        let copies = mem.log.iter().filter(|io| io.op == MemberOp::CopyWrite).count() as u64;
        assert_eq!(copies, member_sectors / 8, "{level:?}: every 4 KiB block copied once");
        // Only member 2 is read, but for the two 4 KiB blocks it could not give.
        for (m, c) in mem.counts.iter().enumerate() {
            let reads = c.reads - reads_before[m];
            let want = if m == 2 { member_sectors / 8 } else { 2 };
            assert!(reads <= want + 4, "{level:?} member {m}: {reads} reads, want ~{want}");
        }
        assert!(mem.total().reads > before.reads);
        let mut model = data.clone();
        model[8 * 512..8 * 512 + 8192].copy_from_slice(&pattern(2, 8192));
        assert!(read(&mut a, &mut mem, 0, bytes) == model, "{level:?}: the member serves");
        // The replacement now holds exactly what the member should: swap it in and read the
        // array with another member failed.
        a.end_replacement(DiskIndex(2));
        let new = mem.replacements[2].take().unwrap();
        let mut swapped = Mem::new(disks);
        swapped.disks.clone_from(&mem.disks);
        swapped.disks[2] = new;
        let mut b = array(level, disks, CHUNK, 4096);
        b.fail_member(DiskIndex(4));
        assert!(read(&mut b, &mut swapped, 0, bytes) == model, "{level:?}: the copy is right");
    }
}

#[test]
fn a_member_not_being_replaced_gets_no_copy() {
    let mut a = array(Level::Raid5, 4, CHUNK, 4096);
    let mut mem = Mem::new(4);
    write(&mut a, &mut mem, 0, pattern(3, 64 << 10));
    a.submit_sync(ReqId(1), SyncKind::Replace, Sector(0), 256);
    let done = run(&mut a, &mut mem);
    assert!(done[0].1.is_ok());
    assert!(mem.log.iter().all(|io| io.op != MemberOp::CopyWrite));
    a.start_replacement(DiskIndex(1));
    a.end_replacement(DiskIndex(1));
    a.submit_sync(ReqId(2), SyncKind::Replace, Sector(0), 256);
    run(&mut a, &mut mem);
    assert!(mem.log.iter().all(|io| io.op != MemberOp::CopyWrite), "ended: no copies");
}

#[test]
fn a_copy_stops_where_the_member_failed() {
    let mut a = array(Level::Raid5, 4, CHUNK, 4096);
    let mut mem = Mem::new(4);
    write(&mut a, &mut mem, 0, pattern(4, 64 << 10));
    mem.replacements[1] = Some(vec![0u8; mem.disks[1].len()]);
    a.start_replacement(DiskIndex(1));
    a.submit_sync(ReqId(1), SyncKind::Replace, Sector(0), 64);
    assert!(run(&mut a, &mut mem)[0].1.is_ok());
    a.fail_member(DiskIndex(1));
    // Nothing can be copied past here: the window says so rather than pass for done.
    a.submit_sync(ReqId(2), SyncKind::Replace, Sector(64), 64);
    let done = run(&mut a, &mut mem);
    assert_eq!(done[0].1, Err(ArrayError::ReplacedMemberFailed));
}

#[test]
fn a_replacement_taking_over_is_stale_where_bits_are_set_and_above_the_copy() {
    let mut a = array(Level::Raid6, 6, CHUNK, 4096);
    a.enable_write_intent(&WriteIntentConfig {
        image: vec![0u8; 4096],
        bits_offset: 256,
        chunk_sectors: 256,
        chunks: 8,
    });
    let mut mem = Mem::new(6);
    mem.replacements[3] = Some(vec![0u8; mem.disks[3].len()]);
    a.start_replacement(DiskIndex(3));
    a.submit_sync(ReqId(1), SyncKind::Replace, Sector(0), 1024);
    run(&mut a, &mut mem);
    a.fail_member(DiskIndex(3));
    // Written while the member is failed and its replacement not yet in its place: member
    // sector 300 is in bitmap chunk 1 (4 data members a stripe of 16 KiB chunks).
    write(&mut a, &mut mem, 4 * 300, pattern(5, 4096));
    let ranges = a.take_over_replacement(DiskIndex(3), Sector(1024)).expect("a bitmap");
    assert!(ranges.contains(&(256, 256)), "the chunk written meanwhile: {ranges:?}");
    assert_eq!(ranges.last(), Some(&(1024, MEMBER_SECTORS - 1024)), "above the copy");
    assert!(!ranges.iter().any(|&(s, n)| s < 256 && s + n > 0), "chunk 0 is in sync");
    assert!(a.replacing().is_empty());
}

/// An array with the log, its first reset done, and a partial write to stripe 0 whose reads
/// have completed: its generation's log writes are queued (started at the end of the turn,
/// as a worker's turn ends), not yet taken.
fn with_a_log_write_queued(level: Level, disks: usize, uuid: u8, hold: bool) -> (Array, Mem) {
    let mut a = with_log(array(level, disks, CHUNK, 4096), [uuid; 16], false);
    if hold {
        a.hold_writes_until_failures_recorded();
    }
    let mut mem = Mem::new(disks);
    write(&mut a, &mut mem, 1024, pattern(0, 4096));
    a.submit_write(ReqId(1), Sector(0), pattern(1, 4096));
    let reads = drain(&mut a);
    assert!(reads.iter().all(|io| io.op == MemberOp::Read), "{reads:?}");
    complete(&mut a, &mut mem, reads);
    assert!(finished(&mut a).is_empty(), "the write waits for its log writes");
    (a, mem)
}

/// Runs the engine until it is idle; returns every member I/O it handed out.
fn run_all(a: &mut Array, mem: &mut Mem) -> Vec<MemberIo> {
    let mut all = Vec::new();
    while a.busy() {
        let ios = drain(a);
        all.extend(ios.iter().copied());
        complete(a, mem, ios);
    }
    all
}

/// Log writes the engine queued before a replacement began are the member's alone
/// (`MemberIo::before_replacement`): the new device's ring must not hold a generation from
/// before it joined, which a replay would take for a witness of the older ones. A runtime
/// takes the queue between turns, so generations started by a turn's last completions are
/// still queued when the replacement begins.
#[test]
fn log_writes_queued_before_a_replacement_began_are_the_member_s_alone() {
    // Stripe 0 of RAID5 x5 has P on member 4.
    let (mut a, mut mem) = with_a_log_write_queued(Level::Raid5, 5, 3, false);
    a.start_replacement(DiskIndex(4));
    let queued = drain(&mut a);
    let log: Vec<_> = queued.iter().filter(|io| io.area == IoArea::Log).collect();
    assert!(log.iter().any(|io| io.member == DiskIndex(4)), "P's partial parity: {log:?}");
    for io in &log {
        assert_eq!(io.before_replacement, io.member == DiskIndex(4), "{io:?}");
    }
    assert!(queued.iter().all(|io| io.area == IoArea::Log || !io.before_replacement));
    complete(&mut a, &mut mem, queued);
    // What the engine queues from now on (the reset the join starts) goes to both devices.
    let later = run_all(&mut a, &mut mem);
    assert_eq!(finished(&mut a), vec![ReqId(1)]);
    let headers = later.iter().filter(|io| io.area == IoArea::Log && io.member == DiskIndex(4));
    assert!(headers.clone().count() > 0, "the reset writes the new ring: {later:?}");
    assert!(later.iter().all(|io| !io.before_replacement));
}

/// A log write held in the queue (writes wait while another member's failure is unrecorded)
/// for a member that then fails is not written to the spare taking its slot: it was for the
/// device that failed, and on the spare its generation's header would make the ring look
/// like a witness of the older generations. It completes as written, nowhere.
#[test]
fn log_writes_held_for_a_failed_member_never_reach_the_spare_in_its_slot() {
    let disks = 6;
    let (mut a, mut mem) = with_a_log_write_queued(Level::Raid6, disks, 4, true);
    let logged = a.members_with_queued_log_writes();
    let member = logged[0];
    // Another member fails, unrecorded: writes, log writes among them, are held.
    let other = (0..disks as u16).map(DiskIndex).find(|d| !logged.contains(d)).unwrap();
    a.fail_member(other);
    assert!(drain(&mut a).iter().all(|io| io.op != MemberOp::Write), "writes are held");
    // The member with the queued log write fails too, and a spare takes its slot.
    a.fail_member(member);
    a.member_device_changed(member);
    a.start_recovery(member, Sector(0));
    assert!(!a.members_with_queued_log_writes().contains(&member), "dropped");
    a.failure_recorded(other);
    a.failure_recorded(member);
    let later = run_all(&mut a, &mut mem);
    assert!(finished(&mut a).contains(&ReqId(1)));
    // What goes to the spare's ring is the join's reset: empty headers, every one at its tail.
    for io in later.iter().filter(|io| io.area == IoArea::Log && io.member == member) {
        let ring = &mem.rings[member.get()][(io.sector.0 * 512) as usize..];
        let h = uraid_core::ppl::LogHeader::decode(ring).expect("a header");
        assert!(h.entries.is_empty() && h.generation == h.tail, "{h:?}");
    }
}

/// The member being replaced fails with a log write queued before its replacement began: the
/// new device takes the slot over without it (it was the member's alone).
#[test]
fn a_take_over_drops_log_writes_queued_before_the_replacement_began() {
    let (mut a, mut mem) = with_a_log_write_queued(Level::Raid5, 5, 5, false);
    let member = a.members_with_queued_log_writes()[0];
    a.start_replacement(member);
    a.fail_member(member);
    assert!(a.take_over_replacement(member, Sector(0)).is_none(), "no bitmap");
    assert!(!a.members_with_queued_log_writes().contains(&member), "dropped");
    a.start_recovery(member, Sector(0));
    run_all(&mut a, &mut mem);
    assert!(finished(&mut a).contains(&ReqId(1)));
}

/// The member being replaced cannot read some blocks (why it is replaced) and another member
/// cannot read its blocks of the same stripes: neither copied nor rebuilt. As md's
/// `handle_failed_sync` does, they are listed on the replacement (the other unreadable blocks
/// on their own member) and the copy goes on; everything else is copied. Before, the copy
/// failed at the first such stripe (BeyondRedundancy) and the member could not be replaced.
#[test]
fn a_block_neither_readable_nor_rebuildable_is_listed_on_the_replacement() {
    for level in [Level::Raid5, Level::Raid6] {
        let disks = 5;
        let mut a = array(level, disks, CHUNK, 4096);
        let mut mem = Mem::new(disks);
        let bytes = (a.size_sectors() * 512) as usize;
        write(&mut a, &mut mem, 0, pattern(6, bytes));
        mem.replacements[1] = Some(vec![0u8; mem.disks[1].len()]);
        a.start_replacement(DiskIndex(1));
        // Member 1 cannot read 200..264 (8 blocks); RAID5: member 3 cannot read 232..296
        // (4 blocks in common); RAID6: members 3 and 4 (the same 4 blocks beyond its parity).
        let others: &[u16] = if level == Level::Raid5 { &[3] } else { &[3, 4] };
        mem.bad_reads.extend((200..264).map(|s| (1, s)));
        for &m in others {
            mem.bad_reads.extend((232..296).map(|s| (m, s)));
        }
        let window = 128;
        for at in (0..MEMBER_SECTORS).step_by(window as usize) {
            a.submit_sync(ReqId(1000 + at), SyncKind::Replace, Sector(at), window);
            let done = run(&mut a, &mut mem);
            assert!(done.iter().all(|d| d.1.is_ok()), "{level:?} at {at}: {done:?}");
        }
        let listed: Vec<(u16, u64)> = (232..264).map(|s| (1, s)).collect();
        assert_eq!(mem.replacement_listed, listed, "{level:?}: the replacement's list");
        assert_eq!(a.stats().sectors_listed_bad, 32, "{level:?}");
        for &m in others {
            let own: Vec<u64> = mem.listed.iter().filter(|l| l.0 == m).map(|l| l.1).collect();
            assert_eq!(own, (232..264).collect::<Vec<_>>(), "{level:?}: member {m}'s list");
        }
        assert!(mem.listed.iter().all(|l| l.0 != 1), "{level:?}: the leaving member lists none");
        // Every other block of member 1 was copied (read, or rebuilt from the rest).
        let new = mem.replacements[1].as_ref().unwrap();
        for s in 0..MEMBER_SECTORS {
            let at = (s * 512) as usize;
            let same = new[at..at + 512] == mem.disks[1][at..at + 512];
            let rebuilt = (200..232).contains(&s);
            assert!(same || (232..264).contains(&s) || rebuilt, "{level:?}: sector {s}");
            if !(200..264).contains(&s) {
                assert!(same, "{level:?}: sector {s} copied");
            }
        }
        assert_eq!(a.failed_members(), vec![], "{level:?}: no member failed");
    }
}

/// Where the replacement's log cannot take such a block, the copy stops there, as before
/// (md gives the replacement up: `recovery_disabled`).
#[test]
fn a_replacement_that_cannot_list_stops_the_copy_there() {
    let mut a = array(Level::Raid5, 4, CHUNK, 4096);
    let mut mem = Mem::new(4);
    let bytes = (a.size_sectors() * 512) as usize;
    write(&mut a, &mut mem, 0, pattern(7, bytes));
    mem.replacements[1] = Some(vec![0u8; mem.disks[1].len()]);
    mem.replacement_without_log.insert(1);
    a.start_replacement(DiskIndex(1));
    mem.bad_reads.extend((200..208).flat_map(|s| [(1, s), (2, s)]));
    a.submit_sync(ReqId(1), SyncKind::Replace, Sector(0), 128);
    assert!(run(&mut a, &mut mem)[0].1.is_ok());
    a.submit_sync(ReqId(2), SyncKind::Replace, Sector(128), 128);
    assert_eq!(run(&mut a, &mut mem)[0].1, Err(ArrayError::CannotListBadBlock));
    assert!(mem.replacement_listed.is_empty());
}
