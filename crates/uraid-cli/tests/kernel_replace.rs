//! md's replace moves with the array, both ways: a copy to a replacement that one of them
//! stopped midway (the new device holds the slot's role with md's REPLACEMENT feature and a
//! recovery offset) is taken up by the other, which finishes it, retires the old member, and
//! ends with the same contents and no parity mismatch.
//!
//! Method (md runs in the VM of DEVELOPERS.md): uraid creates a RAID5 of 4 x 24 MiB with an
//! internal bitmap, writes it whole, starts replacing member 1 with a fifth device at a
//! crawl, writes on both sides of the copy, and stops. In the VM md assembles all five, must
//! go on with the replacement, and reports the old member's and the new device's states, the
//! sha256 (uraid's) and a check's mismatch_cnt (0). The other way: md starts the replacement
//! of member 2 (sync_speed_max 100 KiB/s) and stops midway; uraid-md assembles the five, goes
//! on, and ends with md's contents, the new device in slot 2 and a check of 0 mismatches.
//!
//! Skips without the VM kit, except under CI=true.

mod md_images;
mod mdvm;

use md_images::sha256;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use uraid_md::{MdArray, MdOptions, SyncSpeed};

const MEMBER_BYTES: u64 = 24 << 20;

/// A RAID5 of 4 made by `uraid create` with an internal bitmap, and a fifth device, blank.
fn uraid_creates(name: &str) -> (PathBuf, Vec<PathBuf>) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the test directory");
    let devices: Vec<PathBuf> = (0..5).map(|i| dir.join(format!("m{i}.img"))).collect();
    for path in &devices {
        std::fs::File::create(path).and_then(|f| f.set_len(MEMBER_BYTES)).expect("a device");
    }
    let create = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["create", "--level", "5", "--raid-devices", "4", "--chunk", "64K"])
        .args(["--bitmap", "internal", "--bitmap-chunk", "1M", "--assume-clean"])
        .args(&devices[..4])
        .output()
        .expect("running uraid create");
    assert!(create.status.success(), "{}", String::from_utf8_lossy(&create.stderr));
    (dir, devices)
}

fn pattern(size: usize, seed: usize) -> Vec<u8> {
    (0..size).map(|i| (i / 4096 * 13 + i % 241 + seed) as u8).collect()
}

#[test]
fn md_goes_on_with_a_replacement_uraid_stopped_midway() {
    let Some(scripts) = mdvm::kit(&["mdadm"]) else { return };
    let (dir, devices) = uraid_creates("kernel_replace_uraid");
    let md = MdArray::assemble(&devices[..4], &MdOptions::default()).expect("uraid-md runs it");
    let rt = md.runtime().clone();
    let size = usize::try_from(rt.size_bytes()).unwrap();
    rt.write_at(0, &pattern(size, 0)).unwrap();
    // The first windows go out at once (16 MiB of each member); then the crawl holds it.
    md.set_sync_speed(SyncSpeed { min_kib: 1, max_kib: 1 });
    let said = md.replace("1", &devices[4].display().to_string()).expect("replace");
    assert!(said.contains("copy started"), "{said}");
    let moved = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        md.status().sync.is_some_and(|s| s.done_sectors > 0)
    });
    assert!(moved, "{:?}", md.status());
    // Below and above the copy's progress (array byte 60 MiB is member byte 20 MiB).
    rt.write_at(0, &pattern(1 << 20, 7)).unwrap();
    rt.write_at(60 << 20, &pattern(1 << 20, 9)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let contents = rt.read_at(0, size).unwrap();
    drop(rt);
    md.stop().expect("a stop during the copy");
    let sb = md_images::superblock(&devices[4]);
    let bits = uraid_format::feature::REPLACEMENT | uraid_format::feature::RECOVERY_OFFSET;
    assert_eq!(sb.feature_map & bits, bits, "stopped midway: {:#x}", sb.feature_map);
    assert!(sb.recovery_offset_sectors > 0, "{}", sb.recovery_offset_sectors);

    let job = "mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdc /dev/vdd /dev/vde 2>&1\n\
               cat /proc/mdstat\n\
               echo \"RESULT during $(cat /sys/block/md0/md/dev-vde/state)\"\n\
               sleep 1\n\
               mdadm --wait /dev/md0 || true\n\
               sleep 1\n\
               cat /proc/mdstat\n\
               echo \"RESULT old $(cat /sys/block/md0/md/dev-vdb/state 2>/dev/null || echo gone)\"\n\
               echo \"RESULT new $(cat /sys/block/md0/md/dev-vde/state) $(cat /sys/block/md0/md/dev-vde/slot)\"\n\
               echo \"RESULT degraded $(cat /sys/block/md0/md/degraded)\"\n\
               echo \"RESULT sha $(sha256sum /dev/md0 | cut -d' ' -f1)\"\n\
               echo check > /sys/block/md0/md/sync_action\n\
               sleep 1\n\
               mdadm --wait /dev/md0 || true\n\
               echo \"RESULT mismatch $(cat /sys/block/md0/md/mismatch_cnt)\"\n\
               mdadm --stop /dev/md0\n";
    let path = dir.join("replace.sh");
    std::fs::write(&path, job).expect("writing the job");
    let mut cmd = Command::new(scripts.join("run"));
    cmd.args(["--timeout", "300"]).arg(&path).args(&devices);
    let out = mdvm::results(&mdvm::run(&mut cmd, "md after a replacement stopped midway"));
    assert!(out["during"].contains("replacement"), "md took it as a replacement: {out:?}");
    assert!(out["old"].contains("faulty") || out["old"] == "gone", "{out:?}");
    assert_eq!(out["new"], "in_sync 1", "{out:?}");
    assert_eq!(out["degraded"], "0");
    assert_eq!(out["sha"], sha256(&contents), "with what uraid left");
    assert_eq!(out["mismatch"], "0");
}

#[test]
fn uraid_goes_on_with_a_replacement_md_stopped_midway() {
    let Some(scripts) = mdvm::kit(&["mdadm"]) else { return };
    let (dir, devices) = uraid_creates("kernel_replace_md");
    let md = MdArray::assemble(&devices[..4], &MdOptions::default()).expect("uraid-md runs it");
    let size = usize::try_from(md.runtime().size_bytes()).unwrap();
    md.runtime().write_at(0, &pattern(size, 3)).unwrap();
    md.stop().expect("a clean stop");

    let job = "mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1\n\
               echo 100 > /sys/block/md0/md/sync_speed_max\n\
               echo 1 > /sys/block/md0/md/sync_speed_min\n\
               mdadm /dev/md0 --add /dev/vde 2>&1\n\
               mdadm /dev/md0 --replace /dev/vdc --with /dev/vde 2>&1\n\
               dd if=/dev/urandom of=/dev/md0 bs=1M count=1 seek=20 oflag=direct 2>/dev/null\n\
               sleep 4\n\
               cat /proc/mdstat\n\
               echo \"RESULT during $(cat /sys/block/md0/md/dev-vde/state)\"\n\
               echo \"RESULT sha $(sha256sum /dev/md0 | cut -d' ' -f1)\"\n\
               mdadm --stop /dev/md0\n";
    let path = dir.join("replace.sh");
    std::fs::write(&path, job).expect("writing the job");
    let mut cmd = Command::new(scripts.join("run"));
    cmd.args(["--timeout", "300"]).arg(&path).args(&devices);
    let out = mdvm::results(&mdvm::run(&mut cmd, "md replacing a member"));
    assert!(out["during"].contains("replacement"), "{out:?}");
    let sb = md_images::superblock(&devices[4]);
    let bits = uraid_format::feature::REPLACEMENT | uraid_format::feature::RECOVERY_OFFSET;
    assert_eq!(sb.feature_map & bits, bits, "md stopped midway: {:#x}", sb.feature_map);

    let array = MdArray::assemble(&devices, &MdOptions::default()).expect("uraid-md runs it");
    let result = array.wait_sync_idle(Duration::from_secs(120)).expect("the copy went on");
    assert_eq!((result.action.as_str(), result.outcome.as_str()), ("replace", "done"));
    let st = array.status();
    let new = st.members.iter().find(|m| m.path == devices[4].display().to_string()).unwrap();
    assert_eq!((new.slot, new.state.as_str()), (Some(2), "active sync"), "{st:?}");
    assert_eq!(sha256(&array.runtime().read_at(0, size).unwrap()), out["sha"], "md's contents");
    array.remove(&devices[2].display().to_string()).expect("the old member goes");
    array.scrub(false).unwrap();
    let check = array.wait_sync_idle(Duration::from_secs(120)).expect("a check");
    assert_eq!(check.mismatch_sectors, 0, "{check:?}");
    array.stop().expect("a clean stop");
}
