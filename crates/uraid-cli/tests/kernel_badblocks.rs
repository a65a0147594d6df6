//! md's bad block log moves with the array: ranges md knows hold no good data are read around
//! by uraid as md reads around them.
//!
//! Method (md runs in the VM of DEVELOPERS.md): mdadm creates a RAID5 of 4 x 24 MiB, fills it
//! and reports its sha256; then bad blocks are added through md's sysfs (`dev-vdb/bad_blocks`
//! and `dev-vdc/bad_blocks`, in different stripes, one of them a parity block or not as the
//! layout has it) and the array is stopped, which writes them into each member's log
//! (`mdadm --examine-badblocks` shows them). On the host those ranges are overwritten with
//! garbage (what a member holds where a write failed). Then:
//! * `uraid assemble -o` reads the sha256 md reported; with the log's feature bit cleared (a
//!   uraid that ignored the log) it does not: the test can fail;
//! * uraid-md runs the array, reads it whole (the same contents; no member failed: reads of
//!   known bad blocks count against no member; the data blocks are rewritten from parity,
//!   which makes them good), stops it: their entries have left the logs, as md drops an
//!   entry it has rewritten; the parity block's stays;
//! * uraid-md runs it again with member 1's writes to 64 KiB failing (`MemberFaults`), and
//!   rewrites the whole array: member 1 stays, the range is listed in its log (and the
//!   parity block's entry, rewritten, leaves it);
//! * md assembles what uraid left: it lists uraid's entry (sysfs `bad_blocks`), reads the
//!   second contents' sha256 (around the stale range), and a check finds `mismatch_cnt` 0.
//!
//! Skips without the VM kit, except under CI=true.

mod md_images;
mod mdvm;

use md_images::{read_with_uraid, sha256, superblock};

use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use uraid_format::feature;
use uraid_md::members::MemberFaults;
use uraid_md::{MdArray, MdOptions};

const MEMBERS: usize = 4;
const MEMBER_BYTES: u64 = 24 << 20;
/// Data sectors (from the data offset) md is told are bad: (member, sector, sectors).
const BAD: [(usize, u64, u64); 3] = [(1, 2048, 8), (2, 6000, 16), (1, 30_000, 3)];

#[test]
fn md_bad_blocks_are_read_around_by_uraid_as_by_md() {
    let Some(scripts) = mdvm::kit(&["mdadm"]) else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel_badblocks");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the test directory");
    let members: Vec<PathBuf> = (0..MEMBERS).map(|i| dir.join(format!("m{i}.img"))).collect();
    for path in &members {
        File::create(path).and_then(|f| f.set_len(MEMBER_BYTES)).expect("a member file");
    }
    let job = create_job();
    let sha = run(&scripts, &dir, "create.sh", &job, &members)["sha"].clone();

    let sb = superblock(&members[1]);
    assert_ne!(sb.feature_map & feature::BAD_BLOCKS, 0, "md wrote its list on the stop");
    examine_says_bad_blocks_present(&members[1]);
    for (m, sector, len) in BAD {
        let at = (sb.data_offset_sectors + sector) * 512;
        let garbage = vec![0xa5; (len * 512) as usize];
        File::options().write(true).open(&members[m]).unwrap().write_all_at(&garbage, at).unwrap();
    }
    let expected = read_with_uraid(&dir, &members, &[]);
    assert_eq!(sha256(&expected), sha, "uraid reads around md's bad blocks");
    let blind = copies(&dir, "blind", &members);
    for path in &blind {
        let mut sb = superblock(path);
        sb.feature_map &= !feature::BAD_BLOCKS;
        sb.seal();
        File::options().write(true).open(path).unwrap().write_all_at(&sb.encode(), 4096).unwrap();
    }
    assert_ne!(
        sha256(&read_with_uraid(&dir, &blind, &[])),
        sha,
        "a reader blind to the log reads garbage"
    );

    let md = MdArray::assemble(&members, &MdOptions { workers: Some(2), ..MdOptions::default() })
        .expect("uraid-md runs the array");
    let size = md.runtime().size_bytes();
    let contents = md.runtime().read_at(0, usize::try_from(size).unwrap()).unwrap();
    assert!(contents == expected, "the runtime reads around them too");
    let status = md.status();
    assert!(status.members.iter().all(|m| m.state == "active sync"), "{:?}", status.members);
    md.stop().expect("a clean stop");
    // The read rebuilt the listed data blocks and rewrote them (md's read-error correction),
    // which made them good: the stop wrote the logs without them, as md clears an entry it
    // has rewritten. The range on a parity block (member 1's, by the layout), which reads
    // never touch, stays listed. (That each member keeps its own list is
    // `uraid-md/tests/per_member.rs`'s.)
    let data_offset = superblock(&members[1]).data_offset_sectors;
    let parity_range = (data_offset + 30_000) * 512..(data_offset + 30_003) * 512;
    for (i, path) in members.iter().enumerate() {
        let left = uraid_md::members::known_bad_bytes(path).unwrap();
        let want = if i == 1 { vec![parity_range.clone()] } else { Vec::new() };
        assert_eq!(left, want, "member {i}'s list after the rewrites");
        let listed = superblock(path).feature_map & feature::BAD_BLOCKS != 0;
        assert_eq!(listed, i == 1, "member {i}'s bad block bit");
    }

    let (second, listed_at) = uraid_lists_a_write_error(&members);
    let job = "mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1\n\
               echo \"RESULT listed $(tr '\\n' ' ' < /sys/block/md0/md/dev-vdb/bad_blocks)\"\n\
               echo \"RESULT sha $(sha256sum /dev/md0 | cut -d' ' -f1)\"\n\
               echo check > /sys/block/md0/md/sync_action\n\
               sleep 1\n\
               mdadm --wait /dev/md0 || true\n\
               echo \"RESULT mismatch $(cat /sys/block/md0/md/mismatch_cnt)\"\n\
               mdadm --stop /dev/md0\n";
    let after = run(&scripts, &dir, "after.sh", job, &members);
    // Only uraid's entry: the whole rewrite mended the parity block's too.
    assert_eq!(after["listed"], format!("{listed_at} 128"), "md lists uraid's entry");
    assert_eq!(after["sha"], sha256(&second), "md reads what uraid left, around its entry");
    assert_eq!(after["mismatch"], "0", "and finds parity consistent");
}

/// Runs the array with member 1's writes to 64 KiB failing and rewrites it whole: the member
/// stays, the range is listed. Returns the contents written and the range's first sector.
fn uraid_lists_a_write_error(members: &[PathBuf]) -> (Vec<u8>, u64) {
    let at = superblock(&members[1]).data_offset_sectors * 512 + (8 << 20);
    let bad = at..at + (64 << 10);
    let faults = MemberFaults(Arc::new(move |slot, file| {
        let mut f = uraid_io::Faulty::new(file, 1);
        if slot == 1 {
            f.fail_writes(bad.clone());
        }
        Box::new(f) as Box<dyn uraid_io::Member>
    }));
    let options = MdOptions { member_faults: Some(faults), ..MdOptions::default() };
    let md = MdArray::assemble(members, &options).expect("uraid-md runs the array");
    let size = usize::try_from(md.runtime().size_bytes()).unwrap();
    let second: Vec<u8> = (0..size).map(|i| (i / 4096 * 7 + i % 251) as u8).collect();
    md.runtime().write_at(0, &second).unwrap();
    let m1 = &md.status().members[1];
    assert_eq!((m1.state.as_str(), m1.bad_sectors), ("active sync", 128), "{m1:?}");
    md.stop().expect("a clean stop");
    assert_ne!(superblock(&members[1]).feature_map & feature::BAD_BLOCKS, 0);
    (second, at / 512)
}

/// The first VM job: md makes and fills the array, reports its sha256, lists `BAD` as bad
/// blocks and writes the lists to the members.
fn create_job() -> String {
    let mut job = String::from(
        "mdadm --create /dev/md0 --run --level=5 --raid-devices=4 --chunk=64 --assume-clean \
         /dev/vda /dev/vdb /dev/vdc /dev/vdd 2>&1\n\
         dd if=/dev/urandom of=/dev/md0 bs=1M count=64 oflag=direct 2>/dev/null\n\
         echo \"RESULT sha $(sha256sum /dev/md0 | cut -d' ' -f1)\"\n",
    );
    for (m, sector, len) in BAD {
        let dev = format!("vd{}", char::from(b'a' + m as u8));
        let sysfs = format!("/sys/block/md0/md/dev-{dev}");
        writeln!(
            job,
            "echo \"$(( $(cat {sysfs}/offset) + {sector} )) {len}\" > {sysfs}/bad_blocks"
        )
        .unwrap();
    }
    job.push_str(
        // A write (block 0 again, as it is) makes md update its superblocks, lists included.
        "dd if=/dev/md0 of=/tmp/b0 bs=4k count=1 2>/dev/null\n\
         dd if=/tmp/b0 of=/dev/md0 bs=4k count=1 oflag=direct 2>/dev/null\n\
         cat /sys/block/md0/md/dev-vdb/bad_blocks /sys/block/md0/md/dev-vdc/bad_blocks\n\
         mdadm --stop /dev/md0\n\
         mdadm --examine-badblocks /dev/vdb /dev/vdc\n",
    );
    job
}

/// uraid examine's Bad Block Log line on `member`: bad blocks present, as mdadm says it.
fn examine_says_bad_blocks_present(member: &Path) {
    let line = |program: &str, args: &[&str]| {
        let out = Command::new(program).args(args).arg(member).output().expect("examine");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().find(|l| l.contains("Bad Block Log")).map(|l| l.trim().to_owned())
    };
    let ours = line(env!("CARGO_BIN_EXE_uraid"), &["examine"]);
    assert!(ours.as_deref().is_some_and(|l| l.ends_with("bad blocks present.")), "{ours:?}");
    if let Ok(mdadm) = which_mdadm() {
        assert_eq!(ours, line(&mdadm, &["--examine"]), "uraid examine says what mdadm says");
    }
}

fn run(scripts: &Path, dir: &Path, name: &str, job: &str, disks: &[PathBuf]) -> mdvm::Results {
    let path = dir.join(name);
    std::fs::write(&path, job).expect("writing the job");
    let mut cmd = Command::new(scripts.join("run"));
    cmd.args(["--timeout", "300"]).arg(&path).args(disks);
    mdvm::results(&mdvm::run(&mut cmd, "md bad blocks"))
}

fn copies(dir: &Path, tag: &str, members: &[PathBuf]) -> Vec<PathBuf> {
    members
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let to = dir.join(format!("{tag}-m{i}.img"));
            std::fs::copy(p, &to).expect("copying a member");
            to
        })
        .collect()
}

fn which_mdadm() -> Result<String, ()> {
    ["/sbin/mdadm", "/usr/sbin/mdadm"]
        .iter()
        .find(|p| Path::new(p).exists())
        .map(|p| (*p).to_owned())
        .ok_or(())
}
