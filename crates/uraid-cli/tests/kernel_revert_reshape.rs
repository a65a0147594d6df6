//! `uraid assemble --update revert-reshape` against the kernel's and mdadm's, both ways. Three
//! copies of one small array (RAID5 of 3 members using 8 MiB of each, 64 KiB chunks, a 4
//! KiB-chunk bitmap, 16 MiB of a pattern written through uraid). uraid grows the first to
//! four members (a spare given), stops after three windows as a crash would, and reverts it
//! (copied on to a position on the old stripes); uraid changes the second's layout and chunk
//! (its members with no room after the data: down), stops after two windows; md grows the
//! third to four members itself, slowed and stopped midway. In the VM md must assemble the
//! first and run uraid's revert to its end (three members, the data, a check with no
//! mismatch), and mdadm must revert the second (`--assemble --update=revert-reshape`), which
//! md then runs back to the old layout and chunk (the same). Back on the host uraid reverts
//! md's grow and runs it back: three members and a spare, the data, a clean check. Skips
//! without the VM kit, except under CI=true.

mod mdvm;
mod serve_common;
mod stopped_common;

use serve_common::{tempdir, uraid_ok};
use stopped_common::{ArrayCopy, MIB, add_spares, serve_and_check, sha256, small_array_sized};

const JOB: &str = r"
seen() {
  r $1_shape $(md raid_disks) $(md layout) $(md chunk_size) $(cat /sys/block/md0/size)
  read_and_check $1
}
mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1
mdadm --wait /dev/md0 || true
r uraid_after $(md reshape_position) $(md sync_action) $(md dev-vdd/slot)
seen uraid
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --update=revert-reshape --run /dev/vde /dev/vdf /dev/vdg 2>&1
mdadm --wait /dev/md0 || true
r mdadm_after $(md reshape_position) $(md sync_action)
seen mdadm
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdh /dev/vdi /dev/vdj /dev/vdk 2>&1
echo 1000 > /sys/block/md0/md/sync_speed_min
echo 1000 > /sys/block/md0/md/sync_speed_max
mdadm --grow /dev/md0 --raid-devices=4 2>&1
sleep 3
r md_cut $(md reshape_position) $(md raid_disks) $(md sync_action)
echo frozen > /sys/block/md0/md/sync_action
mdadm --stop /dev/md0 2>&1
";

/// One copy: 24 MiB members (9 for the second: no room after the data), a spare for the
/// first and third.
fn copy(case: &str) -> ArrayCopy {
    let dir = tempdir(case);
    let options = ["--chunk", "64K", "--bitmap", "internal", "--bitmap-chunk", "4K"];
    let mib = if case.ends_with('b') { 9 } else { 24 };
    let (mut members, data) = small_array_sized(&dir, "kv", ("5", 3), mib, &options);
    if !case.ends_with('b') {
        members.extend(add_spares(&dir, "kv", &members, 1));
    }
    ArrayCopy { dir, members, data }
}

fn revert(c: &ArrayCopy) -> String {
    let members = stopped_common::strs(&c.members);
    uraid_ok(&c.dir, &[&["assemble", "--update", "revert-reshape"][..], &members].concat())
}

#[test]
fn md_and_uraid_revert_each_others_reshapes() {
    let Some(scripts) = mdvm::kit(&["mdadm"]) else { return };
    let copies: Vec<ArrayCopy> =
        ["a", "b", "c"].into_iter().map(|c| copy(&format!("krevert-{c}"))).collect();
    let said = copies[0].grow(&["-n", "4"], Some(3));
    assert!(said.contains("stopped after 3 windows"), "{said}");
    let said = revert(&copies[0]);
    assert!(said.contains("the reshape goes back from array sector"), "{said}");
    let said = copies[1].grow(&["-p", "left-asymmetric", "-c", "128K"], Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");

    let disks = copies.iter().flat_map(|c| &c.members);
    let (console, md) = mdvm::run_job(&scripts, (&copies[0].dir, "revert"), JOB, disks, 300);
    let data = sha256(&copies[0].data);
    // Three members, left-symmetric (md's 2), 64 KiB chunks, 16 MiB.
    for who in ["uraid", "mdadm"] {
        let shape = mdvm::result(&md, &format!("{who}_shape"));
        assert_eq!(shape, "3 2 65536 32768", "{who}: {console}");
        assert_eq!(mdvm::result(&md, &format!("{who}_data")), data, "{who}'s data in md");
        assert_eq!(mdvm::result(&md, &format!("{who}_mismatches")), "0", "{who}'s parity");
    }
    assert_eq!(mdvm::result(&md, "uraid_after"), "none idle none", "the added one a spare");
    assert_eq!(mdvm::result(&md, "mdadm_after"), "none idle", "{console}");
    let md_cut = mdvm::result(&md, "md_cut");
    assert!(md_cut.ends_with(" 4 (3) reshape"), "md reshaping when stopped: {md_cut}");

    // md's grow, midway: uraid reverts it and runs it back.
    let said = revert(&copies[2]);
    assert!(said.contains("from 4 to 3 members"), "{said}");
    let said = copies[2].grow(&["--continue"], None);
    assert!(said.contains("reshaped from 4 to 3 members"), "{said}");
    serve_and_check(&copies[2].dir, "kv", &copies[2].members, (&copies[2].data, 16 * MIB), |_| ());
    let examined = stopped_common::examine(&copies[2].members[3]);
    assert!(examined.contains("Device Role : spare"), "{examined}");
    for c in copies {
        std::fs::remove_dir_all(&c.dir).expect("removing the test directory");
    }
}
