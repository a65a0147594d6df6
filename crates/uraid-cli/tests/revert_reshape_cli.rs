//! `uraid assemble --update revert-reshape`: mdadm's way back from a reshape started by
//! mistake. A reshape cut short (as a crash would) goes back from where it is: more members
//! back to fewer, backwards, the added member a spare at the end; a new layout and chunk back
//! to the old; a position off the stripes it goes back to is first copied on; a reshape that
//! moved nothing is cancelled. mdadm reads every superblock on the way, and each array serves
//! its data with every parity right; an array with no reshape is refused and left as it was.

mod serve_common;
mod stopped_common;

use serve_common::{tempdir, uraid_ok};
use std::path::{Path, PathBuf};
use stopped_common::{
    DATA_OFFSET, MIB, add_spares, examine, grow, refused, serve_and_check, small_array,
    small_array_in, strs, superblock_of,
};

fn revert(dir: &Path, members: &[PathBuf]) -> String {
    uraid_ok(dir, &[&["assemble", "--update", "revert-reshape"][..], &strs(members)].concat())
}

fn cont(dir: &Path, members: &[PathBuf]) -> String {
    uraid_ok(dir, &[&["grow", "--continue"][..], &strs(members)].concat())
}

/// RAID5 3 -> 4 cut short, reverted: 4 -> 3 from there, backwards, the data back at its old
/// offset, the added member a spare; then it all serves and checks.
#[test]
fn more_members_reverted_go_back_to_fewer() {
    let dir = tempdir("revert-grow");
    let (mut members, data) = small_array(&dir, "rg", true);
    members.extend(add_spares(&dir, "rg", &members, 1));
    let all = strs(&members);
    let said = grow(&dir, &[&["-n", "4"][..], &all].concat(), Some(3));
    assert!(said.contains("stopped after 3 windows"), "{said}");
    let at = superblock_of(&members[0]).reshape_position_sectors;
    assert!(at > 0 && at.is_multiple_of(384), "{at}");
    let said = revert(&dir, &members);
    let back = superblock_of(&members[1]);
    // On a whole number of the old stripes (256 sectors): as it was, or copied on to one.
    assert_eq!(back.reshape_position_sectors % 256, 0, "{said}");
    if !at.is_multiple_of(256) {
        assert!(said.contains(&format!("copied on from array sector {at}")), "{said}");
    }
    assert!(said.contains("the reshape goes back from array sector"), "{said}");
    assert!(said.contains("from 4 to 3 members"), "{said}");
    let examined = examine(&members[3]);
    for line in ["Raid Devices : 3", "Delta Devices : -1 (4->3)", "New Offset : 2048 sectors"] {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    assert!(examined.contains("Data Offset : 1664 sectors"), "{examined}");
    assert!(examined.contains("Device Role : Active device 3"), "until the end: {examined}");
    let done = cont(&dir, &members);
    assert!(done.contains("reshaped from 4 to 3 members"), "{done}");
    assert!(done.contains("data offset 1664 -> 2048 sectors"), "{done}");
    for m in &members[..3] {
        let examined = examine(m);
        for line in ["Raid Devices : 3", "Data Offset : 2048 sectors", "Array Size : 16384 KiB"] {
            assert!(examined.contains(line), "{line}: {examined}");
        }
        assert!(!examined.contains("Reshape") && !examined.contains("Delta"), "{examined}");
    }
    assert!(examine(&members[3]).contains("Device Role : spare"), "the added member");
    serve_and_check(&dir, "rg", &members, (&data, 16 * MIB), |_| ());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A new layout and chunk (going down: no room after the data) cut short, reverted: up again,
/// backwards, md's flag; continued, the old layout, chunk and offset. Then a reshape that
/// moved nothing (stopped before its first window) is cancelled; and an array with no
/// reshape is refused.
#[test]
fn a_new_shape_reverted_goes_back_and_one_not_begun_is_cancelled() {
    let dir = tempdir("revert-shape");
    let (members, data) = small_array_in(&dir, "rs", true, 9);
    let all = strs(&members);
    let shape = [&["-p", "left-asymmetric", "--chunk", "128K"][..], &all].concat();
    let said = grow(&dir, &shape, Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");
    let said = revert(&dir, &members);
    assert!(said.contains("left-asymmetric to left-symmetric, 128K to 64K chunks"), "{said}");
    let sb = superblock_of(&members[2]);
    assert_ne!(sb.feature_map & uraid_format::feature::RESHAPE_BACKWARDS, 0, "{said}");
    assert_eq!((sb.data_offset_sectors, sb.new_offset_sectors), (1280, 768));
    let examined = examine(&members[0]);
    for line in ["Layout : left-asymmetric", "New Layout : left-symmetric", "New Chunksize : 64K"] {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    let done = cont(&dir, &members);
    assert!(done.contains("data offset 1280 -> 2048 sectors"), "{done}");
    let examined = examine(&members[1]);
    for line in ["Layout : left-symmetric", "Chunk Size : 64K", "Data Offset : 2048 sectors"] {
        assert!(examined.contains(line), "{line}: {examined}");
    }
    assert!(!examined.contains("Reshape") && !examined.contains("New "), "{examined}");
    serve_and_check(&dir, "rs", &members, (&data, 16 * MIB), |_| ());

    let said = grow(&dir, &[&["--chunk", "32K"][..], &all].concat(), Some(0));
    assert!(said.contains("stopped after 0 windows"), "{said}");
    assert!(examine(&members[0]).contains("New Chunksize : 32K"));
    let said = revert(&dir, &members);
    assert!(said.contains("the reshape is cancelled (nothing had moved): 3 members"), "{said}");
    let sb = superblock_of(&members[0]);
    assert_eq!((sb.data_offset_sectors * 512, sb.chunk_sectors), (DATA_OFFSET, 128));
    assert!(!examine(&members[0]).contains("Reshape"));
    serve_and_check(&dir, "rs", &members, (&data, 16 * MIB), |_| ());
    let update = [&["assemble", "--update", "revert-reshape"][..], &all].concat();
    refused(&dir, &members, &update, "no reshape is in progress to revert");
    std::fs::remove_dir_all(&dir).unwrap();
}
