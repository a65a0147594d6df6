//! Goal: writes with no parity to compute (RAID0, or a RAID5 whose parity member is lost: the
//! DataOnly method) send whole blocks straight from the request buffer (md's skip_copy), and a
//! later partial write of such a block reads the member, not the head's stale copy (RAID0
//! writes bypass the heads altogether: one member write per chunk piece, no read). Method:
//! whole-chunk writes on RAID0 x 4 and on RAID5 x 4 with P's member failed, checked by
//! `bytes_copied` and member I/O counts, then 1-sector overwrites and a full read-back.

mod common;

use common::*;
use uraid_core::{DiskIndex, Level};

fn whole_then_partial(level: Level, disks: usize, fail: Option<u16>, bytes: usize) {
    let mut a = array(level, disks, 64 << 10, 4096);
    if let Some(m) = fail {
        a.fail_member(DiskIndex(m));
    }
    let mut mem = Mem::new(disks);
    let mut data = pattern(3, bytes);
    write(&mut a, &mut mem, 0, data.clone());
    assert_eq!(a.stats().bytes_copied, 0, "{level:?}: whole blocks go from the request");
    assert_eq!(mem.total().reads, 0, "{level:?}: whole blocks read nothing");
    // One sector inside blocks just written: the head's copy is stale, the block is read.
    for sector in [1u64, 129, 377] {
        let upd = pattern(sector, 512);
        let at = (sector * 512) as usize;
        data[at..at + 512].copy_from_slice(&upd);
        write(&mut a, &mut mem, sector, upd);
    }
    if level == Level::Raid0 {
        // md's raid0: every chunk piece one member write, a sector written as a sector.
        let chunks = (bytes / (64 << 10)) as u64;
        assert_eq!(a.stats().writes_bypassed, chunks + 3, "no stripe heads");
        assert_eq!(mem.total().reads, 0, "a partial block is written without a read");
    }
    assert_eq!(read(&mut a, &mut mem, 0, bytes), data, "{level:?}: read back");
}

#[test]
fn raid0_whole_block_writes_copy_nothing() {
    whole_then_partial(Level::Raid0, 4, None, 3 << 20);
}

#[test]
fn raid5_without_parity_member_whole_block_writes_copy_nothing() {
    // Member 3 holds P of stripe 0 (left-symmetric): its writes are DataOnly (in stripes where
    // member 3 holds data they are degraded writes, which compute parity).
    whole_then_partial(Level::Raid5, 4, Some(3), 3 * (64 << 10));
}

/// A RAID0 member write that fails fails the request (and the member: nothing else can be
/// written there); the other members' writes still complete, nothing hangs.
#[test]
fn raid0_direct_write_error_fails_the_request() {
    let mut a = array(Level::Raid0, 4, 64 << 10, 4096);
    let mut mem = Mem::new(4);
    // Array sector 128 is the first of chunk 1, on member 1 at member sector 0.
    mem.bad_writes.insert((1, 0));
    a.submit_write(uraid_core::array::ReqId(1), uraid_core::Sector(0), pattern(5, 4 << 16));
    let done = run(&mut a, &mut mem);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].1, Err(uraid_core::array::ArrayError::BeyondRedundancy));
    assert_eq!(a.failed_members(), vec![DiskIndex(1)]);
    assert_eq!(mem.total().writes, 4, "one member write per chunk, the failed one too");
}

/// RAID0 discards: the partial stripes are zeros written straight to the members (no read),
/// the whole stripe between is discarded; reads see zeros there and the data elsewhere.
#[test]
fn raid0_discard_writes_zeros_at_its_ends_without_reads() {
    let mut a = array(Level::Raid0, 4, 64 << 10, 4096);
    let mut mem = Mem::new(4);
    let bytes = 3 * 4 * (64 << 10);
    let mut data = pattern(9, bytes);
    write(&mut a, &mut mem, 0, data.clone());
    // From 1 sector into stripe 0 to 7 sectors into stripe 2 (a stripe is 512 sectors).
    let (from, to) = (1u64, 2 * 512 + 7);
    a.submit_discard(uraid_core::array::ReqId(7), uraid_core::Sector(from), to - from);
    for (_, r, _) in run(&mut a, &mut mem) {
        r.unwrap();
    }
    data[from as usize * 512..to as usize * 512].fill(0);
    assert_eq!(mem.total().reads, 0, "no read for the partial stripes");
    assert_eq!(read(&mut a, &mut mem, 0, bytes), data, "zeros in the range, data around it");
}
