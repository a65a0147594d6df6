//! Goal: writes with no parity to compute (RAID0, or a RAID5 whose parity member is lost: the
//! DataOnly method) send whole blocks straight from the request buffer (md's skip_copy), and a
//! later partial write of such a block reads the member, not the head's stale copy. Method:
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
