//! md's re-add moves with the array, both ways: a member uraid failed and removed goes back
//! into its slot by the kernel's `mdadm --re-add` (which md refuses unless the member's event
//! count is at least the bitmap's events_cleared and its slot is free), and a member md failed
//! and removed goes back by uraid's `add`, rebuilt where md's bitmap has bits set.
//!
//! Method (md runs in the VM of DEVELOPERS.md): uraid creates a RAID5 of 4 x 24 MiB with an
//! internal bitmap, writes it whole and stops; runs it again, fails and removes member 2,
//! writes 1 MiB and stops, degraded. In the VM md assembles the other three, re-adds member 2
//! (the test fails if md refuses), waits for the recovery, reports the sha256 (it must be the
//! one uraid left) and a check's mismatch_cnt (0); then fails and removes member 1, writes
//! 1 MiB and reports the sha256 again. On the host uraid-md assembles the three md left, and
//! `add` of member 1 must say "re-added"; after its recovery the contents are md's, and a
//! check finds no mismatch.
//!
//! A second test stops a re-add of uraid's midway (RECOVERY_BITMAP in the member's superblock)
//! and md assembles the array with it, goes on recovering it, and ends with uraid's contents.
//!
//! Skips without the VM kit, except under CI=true.

mod md_images;
mod mdvm;

use md_images::sha256;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use uraid_md::{MdArray, MdOptions};

const MEMBERS: usize = 4;
const MEMBER_BYTES: u64 = 24 << 20;

#[test]
fn members_removed_by_either_come_back_by_re_add_with_the_other() {
    let Some(scripts) = mdvm::kit(&["mdadm"]) else { return };
    let (dir, members) = uraid_creates("kernel_readd", "64M");

    let uraid_left = uraid_removes_member_2(&members);
    let job = "mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdd 2>&1\n\
               if mdadm /dev/md0 --re-add /dev/vdc 2>&1; then echo \"RESULT readd yes\"; \
               else echo \"RESULT readd no\"; fi\n\
               sleep 1\n\
               mdadm --wait /dev/md0 || true\n\
               cat /proc/mdstat\n\
               echo \"RESULT sha $(sha256sum /dev/md0 | cut -d' ' -f1)\"\n\
               echo check > /sys/block/md0/md/sync_action\n\
               sleep 1\n\
               mdadm --wait /dev/md0 || true\n\
               echo \"RESULT mismatch $(cat /sys/block/md0/md/mismatch_cnt)\"\n\
               mdadm /dev/md0 --fail /dev/vdb 2>&1\n\
               mdadm /dev/md0 --remove /dev/vdb 2>&1\n\
               dd if=/dev/urandom of=/dev/md0 bs=1M count=1 seek=40 oflag=direct 2>/dev/null\n\
               echo \"RESULT sha2 $(sha256sum /dev/md0 | cut -d' ' -f1)\"\n\
               mdadm --stop /dev/md0\n";
    let path = dir.join("readd.sh");
    std::fs::write(&path, job).expect("writing the job");
    let mut cmd = Command::new(scripts.join("run"));
    cmd.args(["--timeout", "300"]).arg(&path).args(&members);
    let md = mdvm::results(&mdvm::run(&mut cmd, "md re-add"));
    assert_eq!(md["readd"], "yes", "md re-adds the member uraid removed");
    assert_eq!(md["sha"], sha256(&uraid_left), "with what uraid left");
    assert_eq!(md["mismatch"], "0");

    // md left member 1 out: uraid takes it back by re-add.
    let three: Vec<PathBuf> = [0, 2, 3].iter().map(|&i| members[i].clone()).collect();
    let array = MdArray::assemble(&three, &MdOptions::default()).expect("uraid-md runs it");
    let said = array.add(&members[1].display().to_string()).expect("add");
    assert!(said.starts_with("re-added"), "{said}");
    let recovery = array.wait_sync_idle(Duration::from_secs(120)).expect("a recovery");
    assert_eq!(recovery.outcome, "done", "{recovery:?}");
    let size = usize::try_from(array.runtime().size_bytes()).unwrap();
    assert_eq!(sha256(&array.runtime().read_at(0, size).unwrap()), md["sha2"], "md's contents");
    array.scrub(false).unwrap();
    let check = array.wait_sync_idle(Duration::from_secs(120)).expect("a check");
    assert_eq!(check.mismatch_sectors, 0, "{check:?}");
    array.stop().expect("a clean stop");
}

/// uraid-md writes the array whole and stops (every bit clear); runs it again, fails and
/// removes member 2, writes 1 MiB at 8 MiB and stops degraded. Returns the contents.
fn uraid_removes_member_2(members: &[PathBuf]) -> Vec<u8> {
    let md = written_then_without_member_2(members);
    let size = usize::try_from(md.runtime().size_bytes()).unwrap();
    let second: Vec<u8> = (0..1usize << 20).map(|i| (i % 239) as u8 ^ 0x5a).collect();
    md.runtime().write_at(8 << 20, &second).unwrap();
    let contents = md.runtime().read_at(0, size).unwrap();
    md.stop().expect("a degraded stop");
    contents
}

/// uraid-md writes the array whole and stops (every bit clear), then runs it again with
/// member 2 failed and removed.
fn written_then_without_member_2(members: &[PathBuf]) -> MdArray {
    let md = MdArray::assemble(members, &MdOptions::default()).expect("uraid-md runs it");
    let size = usize::try_from(md.runtime().size_bytes()).unwrap();
    let first: Vec<u8> = (0..size).map(|i| (i / 4096 * 13 + i % 241) as u8).collect();
    md.runtime().write_at(0, &first).unwrap();
    md.stop().expect("a clean stop");
    let md = MdArray::assemble(members, &MdOptions::default()).expect("uraid-md runs it");
    md.runtime().fail_member(2);
    let faulty = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        md.status().members.iter().any(|m| m.state == "faulty")
    });
    assert!(faulty, "{:?}", md.status());
    md.remove(&members[2].display().to_string()).expect("remove");
    md
}

/// A RAID5 of 4 made by `uraid create` in a fresh directory `name`, with an internal bitmap
/// of `bitmap_chunk`.
fn uraid_creates(name: &str, bitmap_chunk: &str) -> (PathBuf, Vec<PathBuf>) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the test directory");
    let members: Vec<PathBuf> = (0..MEMBERS).map(|i| dir.join(format!("m{i}.img"))).collect();
    for path in &members {
        std::fs::File::create(path).and_then(|f| f.set_len(MEMBER_BYTES)).expect("a member");
    }
    let create = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["create", "--level", "5", "--raid-devices", "4", "--chunk", "64K"])
        .args(["--bitmap", "internal", "--bitmap-chunk", bitmap_chunk, "--assume-clean"])
        .args(&members)
        .output()
        .expect("running uraid create");
    assert!(create.status.success(), "{}", String::from_utf8_lossy(&create.stderr));
    (dir, members)
}

/// A re-add uraid stopped midway (its superblock says RECOVERY_BITMAP beside the recovery
/// offset, as md writes it) is taken up by md: it assembles the array with the member, goes on
/// recovering it, and ends with uraid's contents and a check of 0 mismatches.
#[test]
fn md_goes_on_with_a_re_add_uraid_stopped_midway() {
    let Some(scripts) = mdvm::kit(&["mdadm"]) else { return };
    let (dir, members) = uraid_creates("kernel_readd_midway", "64K");
    let md = written_then_without_member_2(&members);
    let size = usize::try_from(md.runtime().size_bytes()).unwrap();
    // 4 KiB at every MiB: more recovery windows than the sync process keeps in flight.
    for i in 0..size >> 20 {
        let block: Vec<u8> = (0..4096).map(|b| (b + i * 7) as u8 ^ 0xc3).collect();
        md.runtime().write_at((i as u64) << 20, &block).unwrap();
    }
    md.set_sync_speed(uraid_md::SyncSpeed { min_kib: 1, max_kib: 1 });
    let said = md.add(&members[2].display().to_string()).expect("add");
    assert!(said.starts_with("re-added"), "{said}");
    std::thread::sleep(Duration::from_millis(300));
    let contents = md.runtime().read_at(0, size).unwrap();
    md.stop().expect("a stop during the recovery");
    let sb = md_images::superblock(&members[2]);
    let bits = uraid_format::feature::RECOVERY_OFFSET | uraid_format::feature::RECOVERY_BITMAP;
    assert_eq!(sb.feature_map & bits, bits, "stopped midway: {:#x}", sb.feature_map);

    let job = "mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1\n\
               cat /proc/mdstat\n\
               sleep 1\n\
               mdadm --wait /dev/md0 || true\n\
               cat /proc/mdstat\n\
               echo \"RESULT devices $(cat /sys/block/md0/md/raid_disks) $(cat /sys/block/md0/md/degraded)\"\n\
               echo \"RESULT sha $(sha256sum /dev/md0 | cut -d' ' -f1)\"\n\
               echo check > /sys/block/md0/md/sync_action\n\
               sleep 1\n\
               mdadm --wait /dev/md0 || true\n\
               echo \"RESULT mismatch $(cat /sys/block/md0/md/mismatch_cnt)\"\n\
               mdadm --stop /dev/md0\n";
    let path = dir.join("midway.sh");
    std::fs::write(&path, job).expect("writing the job");
    let mut cmd = Command::new(scripts.join("run"));
    cmd.args(["--timeout", "300"]).arg(&path).args(&members);
    let md = mdvm::results(&mdvm::run(&mut cmd, "md after a re-add stopped midway"));
    assert_eq!(md["devices"], "4 0", "whole again");
    assert_eq!(md["sha"], sha256(&contents), "with what uraid left");
    assert_eq!(md["mismatch"], "0");
}
