//! `uraid grow --raid-devices` against the kernel's reshape, both ways. Four copies of one
//! small array (RAID5 of 3 x 24 MiB members using 8 MiB of each, a 4 KiB-chunk bitmap, 16 MiB
//! of a pattern written through uraid, one spare added): uraid reshapes the first onto four
//! members; the second it stops after two windows, as a crash would; the third and fourth
//! md reshapes itself, the fourth slowed and stopped midway. In the VM md must assemble the
//! first as its own (four members, the data, a check with no mismatch), take up the second's
//! reshape where uraid left it and finish it (the same), and move the third's data where
//! uraid moves it (the data offset mdadm chooses). Back on the host uraid reads the array md
//! reshaped and finishes the one md left midway: the data, zeros after it, a clean check.
//! Skips without the VM kit, except under CI=true.

mod mdvm;
mod serve_common;
mod stopped_common;

use serve_common::tempdir;
use stopped_common::{ArrayCopy, MIB, add_spares, serve_and_check, sha256, small_array_with};

const JOB: &str = r#"
seen() { r $1_disks $(md raid_disks) $(cat /sys/block/md0/size); read_and_check $1; }
mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1
seen uraid
mdadm --stop /dev/md0 2>&1
r cut_left_at $(mdadm --examine /dev/vde | sed -n "s/^ *Reshape pos'n : \([0-9]*\).*/\1/p")
mdadm --assemble /dev/md0 --run /dev/vde /dev/vdf /dev/vdg /dev/vdh 2>&1
mdadm --wait /dev/md0 || true
r cut_after $(md reshape_position) $(md sync_action)
seen cut
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdi /dev/vdj /dev/vdk /dev/vdl 2>&1
mdadm --grow /dev/md0 --raid-devices=4 2>&1
mdadm --wait /dev/md0 || true
r md_offset $(cat /sys/block/md0/md/dev-vdi/offset) $(md reshape_position)
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdm /dev/vdn /dev/vdo /dev/vdp 2>&1
echo 100 > /sys/block/md0/md/sync_speed_min
echo 100 > /sys/block/md0/md/sync_speed_max
mdadm --grow /dev/md0 --raid-devices=4 2>&1
sleep 3
r md_cut $(md reshape_position) $(md raid_disks) $(md sync_action)
cat /proc/mdstat
mdadm --stop /dev/md0 2>&1
r tight_new_offset $(mdadm --examine /dev/vdq | sed -n "s/^ *New Offset : \([0-9]*\).*/\1/p")
mdadm --assemble /dev/md0 --run /dev/vdq /dev/vdr /dev/vds /dev/vdt 2>&1
mdadm --wait /dev/md0 || true
r tight_after $(md reshape_position) $(md sync_action)
seen tight
mdadm --stop /dev/md0 2>&1
"#;

/// One copy, its spare the last member.
fn copy(case: &str) -> ArrayCopy {
    let bitmap = ["--bitmap", "internal", "--bitmap-chunk", "4K"];
    let dir = tempdir(case);
    let (mut members, data) = match case {
        // Too little room for mdadm's move (768 sectors for 128 KiB chunks): one chunk.
        "kreshape-e" => {
            let options = [&bitmap[..], &["--data-offset", "256K"]].concat();
            small_array_with(&dir, "kr", "128K", &options)
        }
        _ => small_array_with(&dir, "kr", "64K", &bitmap),
    };
    members.extend(add_spares(&dir, "kr", &members, 1));
    ArrayCopy { dir, members, data }
}

/// Serves the copy as four members: the data, zeros to 24 MiB, a check with no mismatch.
fn reads_right(c: &ArrayCopy) {
    serve_and_check(&c.dir, "kr", &c.members, (&c.data, 24 * MIB), |_| ());
}

#[test]
fn md_and_uraid_take_up_each_others_reshapes() {
    let Some(scripts) = mdvm::kit(&["mdadm"]) else { return };
    let copies: Vec<ArrayCopy> =
        ["a", "b", "c", "d", "e"].into_iter().map(|c| copy(&format!("kreshape-{c}"))).collect();
    let said = copies[0].grow(&["-n", "4"], None);
    assert!(said.contains("data offset 2048 -> 1664 sectors"), "{said}");
    let said = copies[1].grow(&["-n", "4"], Some(2));
    assert!(said.contains("stopped after 2 windows"), "{said}");
    let said = copies[4].grow(&["-n", "4"], Some(1));
    assert!(said.contains("stopped after 1 windows"), "{said}");

    let disks = copies.iter().flat_map(|c| &c.members);
    let (console, md) = mdvm::run_job(&scripts, (&copies[0].dir, "reshape"), JOB, disks, 900);
    let data = sha256(&copies[0].data);
    // 24 MiB: three data members of 8 MiB.
    for who in ["uraid", "cut", "tight"] {
        assert_eq!(mdvm::result(&md, &format!("{who}_disks")), "4 49152", "{who}: {console}");
        assert_eq!(mdvm::result(&md, &format!("{who}_data")), data, "{who}'s data in md");
        assert_eq!(mdvm::result(&md, &format!("{who}_mismatches")), "0", "{who}'s parity");
    }
    // uraid recorded two windows: 3 new stripes (384 sectors of room, 128-sector chunks),
    // then up to the old row of sector 3 * 384 = 1152, 4 more: 7 of 384 sectors, in KiB.
    assert_eq!(mdvm::result(&md, "cut_left_at"), "1344", "where uraid stopped: {console}");
    assert_eq!(mdvm::result(&md, "cut_after"), "none idle", "md finished it");
    // 432 sectors of room before the data at 512: a chunk's move, which md takes up too.
    assert_eq!(mdvm::result(&md, "tight_new_offset"), "256", "{console}");
    assert_eq!(mdvm::result(&md, "tight_after"), "none idle", "md finished it");
    assert_eq!(mdvm::result(&md, "md_offset"), "1664 none", "mdadm's move is uraid's");
    let md_cut = mdvm::result(&md, "md_cut");
    assert!(md_cut.ends_with(" 4 (3) reshape"), "md reshaping when stopped: {md_cut}");
    let md_cut: u64 = md_cut.split(' ').next().unwrap().parse().expect("md midway");
    assert!(md_cut < 49152, "md stopped midway: {md_cut}");
    // The array md reshaped reads right in uraid; the one md left midway uraid finishes.
    reads_right(&copies[2]);
    let said = copies[3].grow(&["--continue"], None);
    // md went on a little between the look and its stop.
    let from = said.split("from array sector ").nth(1).and_then(|r| r.split(',').next());
    let from: u64 = from.and_then(|f| f.parse().ok()).expect("where uraid took up");
    assert!((md_cut..49152).contains(&from), "from {from}, md at {md_cut} when looked: {said}");
    reads_right(&copies[3]);
    for c in copies {
        std::fs::remove_dir_all(&c.dir).expect("removing the test directory");
    }
}
