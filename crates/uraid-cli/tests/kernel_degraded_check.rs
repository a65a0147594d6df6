//! A check of a RAID6 missing one member counts what Linux md counts.
//!
//! Goal: uraid's check of a degraded RAID6 compares the parity it has left as md's
//! handle_parity_checks6 does, so both report the same mismatches on the same array (uraid
//! skipped such stripes and said 0). Method: a RAID6 of 5 made by `uraid create`, four 4 KiB
//! blocks overwritten on two members; one copy checked by uraid-md with member 3 failed, the
//! other assembled by md in the VM without member 3 and checked there (sync_action check,
//! mismatch_cnt). Both must count 32 sectors.

mod mdvm;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use uraid_md::{MdArray, MdOptions};

const MEMBER_BYTES: u64 = 8 << 20;
const DATA_OFFSET: u64 = 1 << 20;

const JOB: &str = r#"
mdadm --assemble --run /dev/md0 /dev/vda /dev/vdb /dev/vdc /dev/vde || exit 1
echo check > /sys/block/md0/md/sync_action
sleep 1
while grep -q check /sys/block/md0/md/sync_action; do sleep 1; done
echo "RESULT degraded $(cat /sys/block/md0/md/degraded)"
echo "RESULT mismatch_cnt $(cat /sys/block/md0/md/mismatch_cnt)"
mdadm --stop /dev/md0
"#;

fn members(dir: &std::path::Path, prefix: &str) -> Vec<PathBuf> {
    (0..5).map(|i| dir.join(format!("{prefix}{i}.img"))).collect()
}

#[test]
fn a_degraded_raid6_check_counts_what_md_counts() {
    let Some(scripts) = mdvm::kit(&[]) else { return };
    let dir = std::env::temp_dir().join(format!("uraid-degraded-check-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let for_md = members(&dir, "md");
    for m in &for_md {
        File::create(m).unwrap().set_len(MEMBER_BYTES).unwrap();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["create", "-l", "6", "-n", "5", "-c", "64K", "--assume-clean"])
        .args(["--data-offset", "2048s"])
        .args(&for_md)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Three blocks of member 1 and one of member 0 no longer agree with the parity.
    let garbage = [0x5au8; 4096];
    for block in 40..43 {
        File::options()
            .write(true)
            .open(&for_md[1])
            .unwrap()
            .write_all_at(&garbage, DATA_OFFSET + block * 4096)
            .unwrap();
    }
    File::options()
        .write(true)
        .open(&for_md[0])
        .unwrap()
        .write_all_at(&garbage, DATA_OFFSET + 1000 * 4096)
        .unwrap();
    let for_uraid = members(&dir, "u");
    for (from, to) in for_md.iter().zip(&for_uraid) {
        std::fs::copy(from, to).unwrap();
    }

    let md = MdArray::assemble(&for_uraid, &MdOptions::default()).unwrap();
    md.fail(&for_uraid[3].display().to_string()).unwrap();
    md.scrub(false).unwrap();
    let r = md.wait_sync_idle(Duration::from_secs(120)).expect("the check ran");
    md.stop().unwrap();
    assert_eq!(r.outcome, "done", "{r:?}");

    let job = dir.join("job.sh");
    std::fs::write(&job, JOB).unwrap();
    let mut cmd = Command::new(scripts.join("run"));
    cmd.args(["--timeout", "300"]).arg(&job).args(&for_md);
    let results = mdvm::results(&mdvm::run(&mut cmd, "degraded check"));
    assert_eq!(mdvm::result(&results, "degraded"), "1", "md ran the array degraded");
    let md_count: u64 = mdvm::result(&results, "mismatch_cnt").parse().unwrap();
    assert_eq!(md_count, 32, "md's count of the four blocks");
    assert_eq!(r.mismatch_sectors, md_count, "uraid's check against md's: {r:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
