//! md's replace in the engine (`Array::start_replacement`, `SyncKind::Replace`): a member's
//! blocks copied to the device replacing it, one member read per block, and where that read
//! fails the block rebuilt from the rest; user writes meanwhile reach both devices through the
//! member layer (`Mem::replacements` plays it), and the member stays in the array.

mod common;

use common::*;
use uraid_core::array::{MemberOp, ReqId, SyncKind};
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
