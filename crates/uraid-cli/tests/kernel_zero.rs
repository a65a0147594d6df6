//! `uraid zero-superblock` against the kernel: a member of an array md runs is refused (the
//! block device's O_EXCL open, which md's claim on its members fails), and once md has
//! stopped the array the member's superblock goes, so that mdadm finds none and md assembles
//! the array without it.
//!
//! Method (md runs in the VM of DEVELOPERS.md): uraid creates a RAID5 of 4 x 24 MiB; in the
//! VM md assembles it, `uraid zero-superblock /dev/vdb` runs (it must fail, saying the device
//! is in use), md stops it, the same command runs again (it must succeed), `mdadm --examine`
//! must find no superblock on /dev/vdb, and md must assemble the other three, degraded. On
//! the host the other members still hold md superblocks. Skips without the VM kit, except
//! under CI=true.

mod mdvm;

use std::path::{Path, PathBuf};
use std::process::Command;

const JOB: &str = r#"
r() { echo "RESULT $*"; }
export LD_LIBRARY_PATH=/job
mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1
r assembled $(cat /sys/block/md0/md/raid_disks)
if /job/uraid zero-superblock /dev/vdb >/tmp/busy.out 2>/tmp/busy.err; then r busy_rc 0;
else r busy_rc $?; fi
r busy_err $(head -1 /tmp/busy.err)
mdadm --stop /dev/md0 2>&1
if /job/uraid zero-superblock /dev/vdb >/tmp/zero.out 2>&1; then r zero_rc 0; else r zero_rc $?; fi
cat /tmp/zero.out
if mdadm --examine /dev/vdb >/tmp/examine.out 2>&1; then r examine_rc 0; else r examine_rc $?; fi
cat /tmp/examine.out
mdadm --assemble /dev/md0 --run /dev/vda /dev/vdc /dev/vdd 2>&1
r degraded $(cat /sys/block/md0/md/degraded)
mdadm --stop /dev/md0 2>&1
"#;

#[test]
fn md_holds_its_member_against_zero_superblock_until_it_stops() {
    let Some(scripts) = mdvm::kit(&["mdadm"]) else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel_zero");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the test directory");
    let members: Vec<PathBuf> = (0..4).map(|i| dir.join(format!("m{i}.img"))).collect();
    for path in &members {
        let file = std::fs::File::create(path).expect("creating a member");
        file.set_len(24 << 20).expect("sizing a member");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["create", "-l", "5", "-n", "4", "--chunk", "64K", "--assume-clean"])
        .args(&members)
        .output()
        .expect("running uraid create");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let job = dir.join("zero.sh");
    std::fs::write(&job, JOB).expect("writing the job");
    let mut cmd = Command::new(scripts.join("run"));
    cmd.args(["--timeout", "300"]);
    for file in mdvm::binary_and_libraries(Path::new(env!("CARGO_BIN_EXE_uraid"))) {
        cmd.arg("--add").arg(file);
    }
    cmd.arg(&job).args(&members);
    let md = mdvm::results(&mdvm::run(&mut cmd, "zero-superblock"));
    assert_eq!(mdvm::result(&md, "assembled"), "4", "md assembled uraid's array");
    assert_eq!(mdvm::result(&md, "busy_rc"), "1", "zero-superblock of a member md runs");
    let busy = mdvm::result(&md, "busy_err");
    assert!(busy.contains("/dev/vdb: in use"), "the refusal says why: {busy}");
    assert_eq!(mdvm::result(&md, "zero_rc"), "0", "zero-superblock once md stopped");
    assert_ne!(mdvm::result(&md, "examine_rc"), "0", "mdadm still finds a superblock");
    assert_eq!(mdvm::result(&md, "degraded"), "1", "md assembles the other three");
    assert!(read(&members[1])[4096..8192].iter().all(|&b| b == 0), "the superblock's 4 KiB");
    // md wrote the others' superblocks (events) while it ran them: they must still be md's.
    for i in [0, 2, 3] {
        let out = Command::new("mdadm").arg("--examine").arg(&members[i]).output().expect("mdadm");
        assert!(out.status.success(), "member {i} lost its superblock");
    }
    std::fs::remove_dir_all(&dir).expect("removing the test directory");
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("reading a member")
}
