//! `uraid grow --raid-devices N --shrink` (fewer members, md's reshape backwards) against the
//! kernel's, both ways. Four copies of one small array (RAID5 of 4 x 24 MiB members using 8
//! MiB of each, a 4 KiB-chunk bitmap, 24 MiB of a pattern written through uraid): uraid
//! reshapes the first to three members; the second it stops after two windows, as a crash
//! would; the third and fourth md reshapes itself (`--array-size` first, as mdadm asks), the
//! fourth slowed and stopped midway, and the fifth mdadm reshapes its old way, with a backup
//! file and no move; on the sixth md changes the layout on the same members, which mdadm
//! moves up (more room after the data than before: backwards too), slowed and stopped
//! midway. In the VM md must assemble the first as its own (three members, the 16
//! MiB that fit, a check with no mismatch), take up the second's reshape where uraid left it
//! and finish it (the same), and move the third's data where uraid moves it. Back on the host
//! uraid serves the arrays md reshaped and finishes the two md left midway: the data, a clean
//! check.
//!
//! mdadm 4.2 (bookworm's, and its master) sets each member's `new_offset` before
//! `raid_disks`, and the kernel takes a higher offset only once the direction is backwards,
//! which `raid_disks` would set: its shrink without a backup file fails ("Cannot set
//! new_offset"). The job sets `reshape_direction` to backwards first, as mdadm does for RAID10,
//! so that the kernel's own reshape backwards with a new offset runs. Skips without the VM kit,
//! except under CI=true.

mod mdvm;
mod serve_common;
mod stopped_common;

use serve_common::tempdir;
use stopped_common::{ArrayCopy, MIB, serve_and_check, sha256, small_array_of};

const JOB: &str = r#"
seen() { r $1_disks $(md raid_disks) $(cat /sys/block/md0/size); read_and_check $1; }
mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1
seen uraid
r uraid_offset $(md dev-vda/offset)
mdadm --stop /dev/md0 2>&1
r cut_left_at $(mdadm --examine /dev/vde | sed -n "s/^ *Reshape pos'n : \([0-9]*\).*/\1/p")
mdadm --assemble /dev/md0 --run /dev/vde /dev/vdf /dev/vdg /dev/vdh 2>&1
mdadm --wait /dev/md0 || true
r cut_after $(md reshape_position) $(md sync_action)
seen cut
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdi /dev/vdj /dev/vdk /dev/vdl 2>&1
shrink() {
  mdadm --grow /dev/md0 --array-size=16384 2>&1
  echo backwards > /sys/block/md0/md/reshape_direction
  mdadm --grow /dev/md0 --raid-devices=3 2>&1
}
shrink
mdadm --wait /dev/md0 || true
sleep 1
r md_offset $(md dev-vdi/offset) $(md reshape_position) $(md raid_disks)
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdm /dev/vdn /dev/vdo /dev/vdp 2>&1
echo 1000 > /sys/block/md0/md/sync_speed_min
echo 1000 > /sys/block/md0/md/sync_speed_max
shrink
sleep 3
r md_cut $(md reshape_position) $(md raid_disks) $(md sync_action)
cat /proc/mdstat
# A reshape backwards stopped while it runs hangs mdadm --stop here; frozen first, it stops.
echo frozen > /sys/block/md0/md/sync_action
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdq /dev/vdr /dev/vds /dev/vdt 2>&1
# md0's settings outlive the array stopped: thawed, at the system's speed.
echo idle > /sys/block/md0/md/sync_action
echo system > /sys/block/md0/md/sync_speed_min
echo system > /sys/block/md0/md/sync_speed_max
mdadm --grow /dev/md0 --array-size=16384 2>&1
mdadm --grow /dev/md0 --raid-devices=3 --backup-file=/tmp/e.backup 2>&1
mdadm --wait /dev/md0 || true
# Its forked monitor holds sync_max until it has cleaned up: a check before then stalls.
while pidof mdadm >/dev/null; do sleep 0.5; done
echo max > /sys/block/md0/md/sync_max
sleep 1
r backup_offset $(md dev-vdq/offset) $(md reshape_position) $(md raid_disks)
seen backup
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdu /dev/vdv /dev/vdw /dev/vdx 2>&1
echo 1000 > /sys/block/md0/md/sync_speed_min
echo 1000 > /sys/block/md0/md/sync_speed_max
mdadm --grow /dev/md0 --layout=left-asymmetric 2>&1
sleep 3
r layout_cut $(md reshape_position) $(md reshape_direction) $(md layout) $(md sync_action)
echo frozen > /sys/block/md0/md/sync_action
mdadm --stop /dev/md0 2>&1
"#;

/// One copy.
fn copy(case: &str) -> ArrayCopy {
    let options = ["--chunk", "64K", "--bitmap", "internal", "--bitmap-chunk", "4K"];
    let dir = tempdir(case);
    let (members, data) = small_array_of(&dir, "ks", ("5", 4), &options);
    ArrayCopy { dir, members, data }
}

/// Serves the copy as three members and a spare: the 16 MiB that fit, a check with no
/// mismatch.
fn reads_right(c: &ArrayCopy) {
    serve_and_check(&c.dir, "ks", &c.members, (&c.data[..16 << 20], 16 * MIB), |_| ());
}

#[test]
fn md_and_uraid_take_up_each_others_reshapes_to_fewer_members() {
    let Some(scripts) = mdvm::kit(&["mdadm"]) else { return };
    let copies: Vec<ArrayCopy> =
        ["a", "b", "c", "d", "e", "f"].into_iter().map(|c| copy(&format!("kshrink-{c}"))).collect();
    let said = copies[0].grow(&["-n", "3", "--shrink"], None);
    assert!(said.contains("data offset 2048 -> 2304 sectors"), "{said}");
    let said = copies[1].grow(&["-n", "3", "--shrink"], Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");

    let disks = copies.iter().flat_map(|c| &c.members);
    let (console, md) = mdvm::run_job(&scripts, (&copies[0].dir, "shrink"), JOB, disks, 300);
    let data = sha256(&copies[0].data[..16 << 20]);
    // 16 MiB: two data members of 8 MiB.
    for who in ["uraid", "cut", "backup"] {
        assert_eq!(mdvm::result(&md, &format!("{who}_disks")), "3 32768", "{who}: {console}");
        assert_eq!(mdvm::result(&md, &format!("{who}_data")), data, "{who}'s data in md");
        assert_eq!(mdvm::result(&md, &format!("{who}_mismatches")), "0", "{who}'s parity");
    }
    assert_eq!(mdvm::result(&md, "uraid_offset"), "2304", "{console}");
    let cut_left_at: u64 = mdvm::result(&md, "cut_left_at").parse().expect("a position");
    assert!(cut_left_at > 0 && cut_left_at < 16384, "uraid stopped midway (KiB): {console}");
    assert_eq!(mdvm::result(&md, "cut_after"), "none idle", "md finished it");
    assert_eq!(mdvm::result(&md, "md_offset"), "2304 none 3", "mdadm's move is uraid's");
    assert_eq!(mdvm::result(&md, "backup_offset"), "2048 none 3", "no move: {console}");
    let md_cut = mdvm::result(&md, "md_cut");
    assert!(md_cut.ends_with(" 3 (4) reshape"), "md reshaping when stopped: {md_cut}");
    let md_cut: u64 = md_cut.split(' ').next().unwrap().parse().expect("md midway");
    assert!(md_cut > 0 && md_cut < 32768, "md stopped midway: {md_cut}");
    // The array md reshaped reads right in uraid; the one md left midway uraid finishes.
    reads_right(&copies[2]);
    let said = copies[3].grow(&["--continue"], None);
    // md went on (down) a little between the look and its stop.
    let from = said.split("from array sector ").nth(1).and_then(|r| r.split(',').next());
    let from: u64 = from.and_then(|f| f.parse().ok()).expect("where uraid took up");
    assert!(from <= md_cut, "from {from}, md at {md_cut} when looked: {said}");
    reads_right(&copies[3]);
    reads_right(&copies[4]);
    // md's layout change backwards, which uraid takes up too: all 24 MiB. md had recorded no
    // position yet (still the start, whether looked at after 3 s or, slower, 12), so uraid
    // goes on from there, over what md had copied.
    let layout_cut = mdvm::result(&md, "layout_cut");
    assert!(layout_cut.ends_with(" backwards 0 (2) reshape"), "md midway: {layout_cut}");
    let layout_cut: u64 = layout_cut.split(' ').next().unwrap().parse().expect("md's position");
    let said = copies[5].grow(&["--continue"], None);
    assert!(said.contains("left-symmetric to left-asymmetric"), "{said}");
    assert!(said.contains(&format!("from array sector {layout_cut},")), "{said}");
    let f = &copies[5];
    serve_and_check(&f.dir, "ks", &f.members, (&f.data, 24 * MIB), |_| ());
    for c in copies {
        std::fs::remove_dir_all(&c.dir).expect("removing the test directory");
    }
}
