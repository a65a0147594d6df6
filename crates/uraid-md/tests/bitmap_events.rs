//! md's events_cleared, which decides whether a device that left the array may come back by
//! re-add (resynced only where bitmap bits are set; mdadm --re-add, or the kernel's own
//! assemble): md advances it whenever it clears bits, which it does only while the array is
//! whole. uraid advanced it only at a clean stop, so after a crash an array that had been made
//! whole again (bits cleared since) still let the kernel re-add a device that left before, on
//! the bits alone: the writes it missed whose bits were cleared would never reach it. Now
//! every commit of a whole array carries it; while degraded it stays put, so that a device that
//! just left may still be re-added.

use std::path::Path;
use std::time::Duration;
use uraid_format::{BitmapSuper, Superblock1};
use uraid_md::{MdArray, MdOptions};

mod common;
use common::{MEMBER_BYTES, fill, make_array, superblock, tempdir, wait_for};

/// The bitmap superblock on `path` (an internal bitmap, after the md superblock).
fn bitmap(path: &Path) -> BitmapSuper {
    let sb: Superblock1 = superblock(path);
    let bytes = std::fs::read(path).unwrap();
    let at = usize::try_from(4096 + i64::from(sb.bitmap_offset_sectors) * 512).unwrap();
    BitmapSuper::decode(&bytes[at..at + 256]).unwrap()
}

#[test]
fn events_cleared_follows_the_array_being_whole() {
    let dir = tempdir("events-cleared");
    let paths = make_array(dir.path(), 6, Some(64 << 10));
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    let rt = md.runtime().clone();
    // Started whole: the engine may clear bits from now on.
    let events = superblock(&paths[0]).events;
    assert_eq!(bitmap(&paths[0]).events_cleared, events, "whole at the start");

    rt.fail_member(2);
    assert!(wait_for(|| md.status().members.iter().any(|m| m.state == "faulty")));
    let left_at = superblock(&paths[2]).events;
    md.remove(&paths[2].display().to_string()).unwrap();
    rt.write_at(0, &fill(7, 1 << 20)).unwrap();
    rt.flush().unwrap();
    // Degraded: the failure and the removal were committed, events_cleared stayed.
    let sb = superblock(&paths[0]);
    assert!(sb.events > left_at + 1, "{} vs {left_at}", sb.events);
    let cleared = bitmap(&paths[0]).events_cleared;
    assert!(cleared <= left_at, "events_cleared {cleared}, the device left at {left_at}");

    let spare = dir.path().join("spare.img");
    std::fs::File::create(&spare).unwrap().set_len(MEMBER_BYTES).unwrap();
    md.add(&spare.display().to_string()).unwrap();
    let result = md.wait_sync_idle(Duration::from_secs(120)).expect("a recovery ran");
    assert_eq!(result.outcome, "done", "{result:?}");
    // Whole again: a device that left before may no longer come back on the bits.
    let (sb, cleared) = (superblock(&paths[0]), bitmap(&paths[0]).events_cleared);
    assert_eq!(cleared, sb.events, "recorded with the recovery's end");
    assert!(cleared > left_at);
    drop(rt);
    md.stop().unwrap();
}

/// One member's bitmap copy corrupt (its magic overwritten): the array starts from the next
/// member's copy, and writes the first one whole again. md refuses the array there; every
/// member in sync holds the same image, so one bad copy costs nothing. All corrupt: refused,
/// naming the first.
#[test]
fn a_corrupt_bitmap_copy_is_passed_over_for_the_next_member_s() {
    let dir = tempdir("bitmap-corrupt-copy");
    let paths = make_array(dir.path(), 4, Some(64 << 10));
    let at =
        4096 + u64::try_from(i64::from(superblock(&paths[0]).bitmap_offset_sectors) * 512).unwrap();
    let spoil = |p: &Path| common::write_member(p, at, b"XXXX");
    spoil(&paths[0]);
    let md = MdArray::assemble(&paths, &MdOptions::default()).unwrap();
    md.runtime().write_at(0, &fill(3, 1 << 20)).unwrap();
    md.stop().unwrap();
    assert_eq!(bitmap(&paths[0]).events_cleared, bitmap(&paths[1]).events_cleared);
    assert_eq!(bitmap(&paths[0]).encode(), bitmap(&paths[1]).encode());
    for p in &paths {
        spoil(p);
    }
    let err = MdArray::assemble(&paths, &MdOptions::default()).err().expect("no usable bitmap");
    let text = err.to_string();
    assert!(text.contains("m0.img") && text.contains("bitmap magic"), "{text}");
}
