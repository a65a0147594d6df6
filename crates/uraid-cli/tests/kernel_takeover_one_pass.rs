//! `uraid grow --level 6 --layout left-symmetric` (mdadm's one-pass RAID5 -> RAID6: taken
//! over and restriped, the restripe building Q as it goes) against the kernel. Two copies of
//! one small array (RAID5 of 3 x 9 MiB members using 8 MiB of each, 64 KiB chunks, a 4
//! KiB-chunk bitmap, 16 MiB of a pattern written through uraid, a spare): uraid takes the
//! first over in one pass, and stops the second's restripe after two windows, as a crash
//! would. In the VM md must assemble the first as its own, whole (RAID6 left-symmetric, no
//! member to rebuild, the data, a check with no mismatch), and take up the second where uraid
//! left it: finish the restripe, build what is left of Q, and end the same. Skips without the
//! VM kit, except under CI=true.

mod mdvm;
mod serve_common;
mod stopped_common;

use serve_common::tempdir;
use stopped_common::{ArrayCopy, add_spares, sha256, small_array_sized};

const JOB: &str = r"
seen() {
  r $1_shape $(md level) $(md raid_disks) $(md layout) $(md degraded) $(cat /sys/block/md0/size)
  read_and_check $1
}
mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1
r one_sync $(md sync_action) $(md degraded)
seen one
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vde /dev/vdf /dev/vdg /dev/vdh 2>&1
for i in 1 2 3; do mdadm --wait /dev/md0 || true; sleep 1; done
cat /proc/mdstat
r cut_after $(md reshape_position) $(md sync_action)
seen cut
mdadm --stop /dev/md0 2>&1
";

fn copy(case: &str) -> ArrayCopy {
    let dir = tempdir(case);
    let options = ["--chunk", "64K", "--bitmap", "internal", "--bitmap-chunk", "4K"];
    let (mut members, data) = small_array_sized(&dir, "ko", ("5", 3), 9, &options);
    members.extend(add_spares(&dir, "ko", &members, 1));
    ArrayCopy { dir, members, data }
}

#[test]
fn md_takes_uraids_one_pass_raid6_as_its_own() {
    let Some(scripts) = mdvm::kit(&["mdadm"]) else { return };
    let copies: Vec<ArrayCopy> =
        ["a", "b"].into_iter().map(|c| copy(&format!("kone-{c}"))).collect();
    let one_pass = ["--level", "6", "-p", "left-symmetric"];
    let said = copies[0].grow(&one_pass, None);
    assert!(said.contains("becomes Q, built by the restripe"), "{said}");
    let said = copies[1].grow(&one_pass, Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");

    let disks = copies.iter().flat_map(|c| &c.members);
    let (console, md) = mdvm::run_job(&scripts, (&copies[0].dir, "one-pass"), JOB, disks, 300);
    let data = sha256(&copies[0].data);
    assert_eq!(mdvm::result(&md, "one_sync"), "idle 0", "nothing to rebuild: {console}");
    assert_eq!(mdvm::result(&md, "cut_after"), "none idle", "md finished it: {console}");
    // RAID6 left-symmetric (md's 2) of four, none missing, 16 MiB.
    for who in ["one", "cut"] {
        let shape = mdvm::result(&md, &format!("{who}_shape"));
        assert_eq!(shape, "raid6 4 2 0 32768", "{who}: {console}");
        assert_eq!(mdvm::result(&md, &format!("{who}_data")), data, "{who}'s data in md");
        assert_eq!(mdvm::result(&md, &format!("{who}_mismatches")), "0", "{who}'s parity");
    }
    for c in copies {
        std::fs::remove_dir_all(&c.dir).expect("removing the test directory");
    }
}
