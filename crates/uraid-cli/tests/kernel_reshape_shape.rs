//! `uraid grow --layout` and `--chunk` against the kernel's reshape, both ways. Three copies
//! of one small array (RAID5 of 3 x 24 MiB members using 8 MiB of each, left-symmetric, 64
//! KiB chunks, a 4 KiB-chunk bitmap, 16 MiB of a pattern written through uraid): uraid
//! reshapes the first to left-asymmetric with 128 KiB chunks, its members with no room after
//! the data (down, forwards); the second it stops after two windows of a reshape to 32 KiB
//! chunks, as a crash would, its members with 4 MiB after the data (up, backwards, as mdadm
//! goes with more room after than before); the third md reshapes itself to the first's shape.
//! In the VM md must assemble the first as its own (its layout and chunk, the data, a check
//! with no mismatch) and take up the second's reshape backwards where uraid left it and
//! finish it (the same). Back on the host uraid serves the array md reshaped: the data, a
//! clean check. Two more copies, each with a spare, for the takeover to RAID6: uraid takes the
//! fourth over (`uraid grow --level 6`), which md must assemble and build Q for as its own
//! (left-symmetric-6, the data, no mismatch), then take back to RAID5 itself (mdadm --grow
//! --level=5), which uraid serves and checks; md takes the fifth over itself (mdadm --grow
//! --level=6 --layout=preserve), which uraid then serves and checks. A sixth copy, a RAID6
//! of 4 in left-symmetric, uraid takes to RAID5 (`uraid grow --level 5`: restriped to
//! left-symmetric-6, then Q's member a spare), which md must assemble as a RAID5 of 3 with a
//! spare, the data, no mismatch. A seventh, a RAID5, uraid takes to RAID4 (`--level 4`:
//! restriped to parity-last, then renamed), which md must assemble as RAID4 with the data and
//! no mismatch, then take back to RAID5 itself (mdadm --grow --level=5), which uraid serves
//! and checks. Skips without the VM kit, except under CI=true.

mod mdvm;
mod serve_common;
mod stopped_common;

use serve_common::{tempdir, uraid_ok};
use stopped_common::{ArrayCopy, MIB, add_spares, serve_and_check, sha256, small_array_sized};

const JOB: &str = r#"
seen() { r $1_shape $(md layout) $(md chunk_size) $(cat /sys/block/md0/size); read_and_check $1; }
mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdc 2>&1
seen uraid
mdadm --stop /dev/md0 2>&1
r cut_chunk $(mdadm --examine /dev/vdd | sed -n "s/^ *New Chunksize : \([0-9K]*\).*/\1/p")
mdadm --assemble /dev/md0 --run /dev/vdd /dev/vde /dev/vdf 2>&1
mdadm --wait /dev/md0 || true
r cut_after $(md reshape_position) $(md sync_action)
seen cut
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdg /dev/vdh /dev/vdi 2>&1
mdadm --grow /dev/md0 --layout=left-asymmetric --chunk=128 2>&1
mdadm --wait /dev/md0 || true
r md_after $(md reshape_position) $(md layout) $(md chunk_size)
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdj /dev/vdk /dev/vdl /dev/vdm 2>&1
mdadm --wait /dev/md0 || true
r six_level $(md level) $(md degraded)
seen six
mdadm --grow /dev/md0 --level=5 2>&1
r md_five $(md level) $(md layout) $(md raid_disks) $(md degraded)
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdn /dev/vdo /dev/vdp /dev/vdq 2>&1
mdadm --grow /dev/md0 --level=6 --raid-devices=4 --layout=preserve 2>&1
mdadm --wait /dev/md0 || true
r md_six $(md level) $(md layout) $(md raid_disks) $(md degraded)
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdr /dev/vds /dev/vdt /dev/vdu 2>&1
r five_level $(md level) $(md raid_disks) $(md degraded) $(cat /sys/block/md0/md/dev-vdu/slot)
seen five
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdv /dev/vdw /dev/vdx 2>&1
r four_level $(md level) $(md raid_disks) $(md degraded)
seen four
mdadm --grow /dev/md0 --level=5 2>&1
r md_four_five $(md level) $(md layout)
mdadm --stop /dev/md0 2>&1
"#;

fn copy(case: &str) -> ArrayCopy {
    let dir = tempdir(case);
    let bitmap = ["--bitmap", "internal", "--bitmap-chunk", "4K"];
    // The first with no room after the data (its new shape goes down), the second with 4 MiB
    // (up, more room than before it: md's reshape backwards, cut short within a few windows).
    let mib = match case.chars().last() {
        Some('a') => 9,
        Some('b') => 13,
        _ => 24,
    };
    let level = if case.ends_with('f') { ("6", 4) } else { ("5", 3) };
    let options = [&["--chunk", "64K"][..], &bitmap].concat();
    let (mut members, data) = small_array_sized(&dir, "ks", level, mib, &options);
    if case.ends_with(['d', 'e']) {
        members.extend(add_spares(&dir, "ks", &members, 1));
    }
    ArrayCopy { dir, members, data }
}

/// Serves the copy: the data, and a check with no mismatch.
fn reads_right(c: &ArrayCopy) {
    serve_and_check(&c.dir, "ks", &c.members, (&c.data, 16 * MIB), |_| ());
}

#[test]
fn md_and_uraid_take_up_each_others_shape_changes() {
    let Some(scripts) = mdvm::kit(&["mdadm"]) else { return };
    let copies: Vec<ArrayCopy> = ["a", "b", "c", "d", "e", "f", "g"]
        .into_iter()
        .map(|c| copy(&format!("kshape-{c}")))
        .collect();
    let said = copies[0].grow(&["-p", "left-asymmetric", "-c", "128K"], None);
    assert!(said.contains("left-symmetric to left-asymmetric, 64K to 128K chunks"), "{said}");
    assert!(said.contains("data offset 2048 -> 1280"), "down: {said}");
    let said = copies[1].grow(&["-c", "32K"], Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");
    let sb = stopped_common::superblock_of(&copies[1].members[0]);
    assert_eq!(sb.new_offset_sectors, 4096, "up: {said}");
    let said = copies[3].grow(&["--level", "6"], None);
    assert!(said.contains("taken over to RAID6 left-symmetric-6"), "{said}");
    let said = copies[5].grow(&["--level", "5"], None);
    assert!(said.contains("restriped from left-symmetric to left-symmetric-6"), "{said}");
    assert!(said.contains("taken over to RAID5 left-symmetric with 3 members"), "{said}");
    let said = copies[6].grow(&["--level", "4"], None);
    assert!(said.contains("restriped from left-symmetric to parity-last"), "{said}");
    assert!(said.contains("RAID5 taken over to RAID4 with 3 members"), "{said}");

    let disks = copies.iter().flat_map(|c| &c.members);
    let (console, md) = mdvm::run_job(&scripts, (&copies[0].dir, "shape"), JOB, disks, 900);
    let data = sha256(&copies[0].data);
    // md's layout numbers: left-asymmetric 0, left-symmetric 2; 16 MiB of array.
    let shapes = [
        ("uraid", "0 131072 32768"),
        ("cut", "2 32768 32768"),
        ("six", "18 65536 32768"),
        ("five", "2 65536 32768"),
        // RAID4: md's layout number 0, as its own takeover writes it.
        ("four", "0 65536 32768"),
    ];
    for (who, shape) in shapes {
        assert_eq!(mdvm::result(&md, &format!("{who}_shape")), shape, "{who}: {console}");
        assert_eq!(mdvm::result(&md, &format!("{who}_data")), data, "{who}'s data in md");
        assert_eq!(mdvm::result(&md, &format!("{who}_mismatches")), "0", "{who}'s parity");
    }
    assert_eq!(mdvm::result(&md, "cut_chunk"), "32K", "uraid's reshape in mdadm's examine");
    assert_eq!(mdvm::result(&md, "cut_after"), "none idle", "md finished it");
    assert_eq!(mdvm::result(&md, "md_after"), "none 0 131072", "md's own: {console}");
    assert_eq!(mdvm::result(&md, "six_level"), "raid6 0", "md built Q: {console}");
    assert_eq!(mdvm::result(&md, "md_six"), "raid6 18 4 0", "md's own takeover: {console}");
    assert_eq!(mdvm::result(&md, "md_five"), "raid5 2 3 0", "md's takeover back: {console}");
    assert_eq!(mdvm::result(&md, "five_level"), "raid5 3 0 none", "Q's member a spare");
    assert_eq!(mdvm::result(&md, "four_level"), "raid4 3 0", "uraid's RAID4: {console}");
    assert_eq!(mdvm::result(&md, "md_four_five"), "raid5 5", "md's RAID4 to RAID5: {console}");
    // The array md reshaped reads right in uraid, with its new shape.
    let examined = uraid_ok(&copies[2].dir, &["examine", &copies[2].members[0].to_string_lossy()]);
    assert!(examined.contains("Chunk Size : 128K"), "{examined}");
    reads_right(&copies[2]);
    // And the one md took over to RAID6.
    let examined = uraid_ok(&copies[4].dir, &["examine", &copies[4].members[3].to_string_lossy()]);
    assert!(examined.contains("left-symmetric-6"), "{examined}");
    reads_right(&copies[4]);
    // And the one md took back to RAID5, its fourth member a spare.
    let examined = uraid_ok(&copies[3].dir, &["examine", &copies[3].members[3].to_string_lossy()]);
    assert!(examined.contains("Raid Level : raid5") && examined.contains("spare"), "{examined}");
    reads_right(&copies[3]);
    // And the RAID4 md took to RAID5, parity-last.
    let examined = uraid_ok(&copies[6].dir, &["examine", &copies[6].members[0].to_string_lossy()]);
    assert!(examined.contains("Raid Level : raid5"), "{examined}");
    assert!(examined.contains("Layout : parity-last"), "{examined}");
    reads_right(&copies[6]);
    for c in copies {
        std::fs::remove_dir_all(&c.dir).expect("removing the test directory");
    }
}
