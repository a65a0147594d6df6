//! `uraid grow` against the kernel's own grow. Two identical arrays (one UUID, RAID5 of
//! 3 x 24 MiB members using 8 MiB of each, a bitmap of 4 KiB chunks, members zero but for
//! what the larger disks held past the old size): md grows the first (`mdadm --grow --size=max`)
//! and uraid the second, stopped. In the VM, md resyncs and checks the first, then assembles
//! the second: it must take uraid's sizes and bitmap as it made its own (component size,
//! bitmap chunk), resync the new space by uraid's superblocks and find no mismatch after; the
//! old space reads back as it was. Back on the host, uraid assembles the array md grew at the
//! size md gave it, and `uraid examine --bitmap` prints what `mdadm -X` prints of the
//! second's bitmap. A third array gets a bitmap from uraid: md must find it where and as it
//! adds its own (8 sectors past the superblock, a 64 MiB chunk, which md's own --grow
//! --bitmap=internal then gives too), and uraid removes the one md added. That third array
//! also gets a new UUID and name from `uraid assemble --update`, and its bad block log taken
//! away and given back (`no-bbl`, `bbl`): md must assemble it under them, its bitmap (whose
//! UUID md checks against the array's) loaded, the log where mdadm's own `--update=bbl` puts
//! one on the first array. A fourth array is shrunk by uraid (`--size 3M --shrink`) and the
//! first, after all the above, by md itself (`mdadm --grow --size=3072`): md must assemble
//! uraid's at that size, clean, its bitmap's chunk kept, and find no mismatch; uraid then
//! shrinks the second as md shrank the first (both grown to 16 KiB bitmap chunks), and its
//! bitmap must be what md's shrink left. Skips without the VM kit, except under CI=true.

mod mdvm;

use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const JOB: &str = r#"
r() { echo "RESULT $*"; }
md() { cat /sys/block/md0/md/$1; }
check() {
  mdadm --wait /dev/md0 || true
  echo check > /sys/block/md0/md/sync_action
  mdadm --wait /dev/md0 || true
  r $1_mismatches $(md mismatch_cnt)
  r $1_old_space $(head -c ${2:-16777216} /dev/md0 | sha256sum | cut -d' ' -f1)
}
mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdc 2>&1
mdadm --grow /dev/md0 --size=max 2>&1
r md_size $(md component_size) $(md bitmap/chunksize)
check md
mdadm --stop /dev/md0 2>&1
bbl() {
  mdadm --examine $1 | sed -n "s/.*Bad Block Log : \([0-9]*\) .* offset \([0-9]*\).*/\1@\2/p"
}
mdadm --assemble /dev/md0 --update=no-bbl /dev/vda /dev/vdb /dev/vdc 2>&1
mdadm --stop /dev/md0 2>&1
r md_no_bbl x$(bbl /dev/vda)
mdadm --assemble /dev/md0 --update=bbl /dev/vda /dev/vdb /dev/vdc 2>&1
mdadm --stop /dev/md0 2>&1
r md_bbl $(bbl /dev/vda)
mdadm --assemble /dev/md0 --run /dev/vdd /dev/vde /dev/vdf 2>&1
r uraid_size $(md component_size) $(md bitmap/chunksize)
r uraid_resync_start $(md resync_start)
check uraid
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vdg /dev/vdh /dev/vdi 2>&1
r uraid_bitmap $(md bitmap/location) $(md bitmap/chunksize)
detail() { mdadm --detail /dev/md0 | sed -n "s/^ *$1 : \([^ ]*\).*/\1/p"; }
r updated $(detail UUID) $(detail Name)
r uraid_bbl $(bbl /dev/vdg)
mdadm --grow /dev/md0 --bitmap=none 2>&1
mdadm --grow /dev/md0 --bitmap=internal 2>&1
r md_bitmap $(md bitmap/location) $(md bitmap/chunksize)
check bitmap
mdadm --stop /dev/md0 2>&1
mdadm --examine-bitmap /dev/vdd | sed 's/^/XBITMAP/'
mdadm --assemble /dev/md0 --run /dev/vdj /dev/vdk /dev/vdl 2>&1
r uraid_shrunk $(md component_size) $(md bitmap/chunksize) $(md resync_start) $(md array_state)
check shrunk 6291456
mdadm --stop /dev/md0 2>&1
mdadm --assemble /dev/md0 --run /dev/vda /dev/vdb /dev/vdc 2>&1
mdadm --grow /dev/md0 --size=3072 2>&1
r md_shrunk $(md component_size) $(md bitmap/chunksize)
mdadm --stop /dev/md0 2>&1
mdadm --examine-bitmap /dev/vda | sed 's/^/SBITMAP/'
"#;

const UUID: &str = "5eed0001:00000000:00000000:00000002";
/// The third array's after `uraid assemble --update uuid=`.
const NEW_UUID: &str = "5eed0001:00000000:00000000:000000c3";

#[test]
fn md_takes_uraid_grown_array_as_it_grows_its_own() {
    let Some(scripts) = mdvm::kit(&["mdadm"]) else { return };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel_grow");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the test directory");
    let by_md = array(&dir, "a");
    let by_uraid = array(&dir, "b");
    let out = uraid(&dir, &["grow", "--size", "max"], &by_uraid);
    assert!(out.status.success(), "uraid grow: {}", String::from_utf8_lossy(&out.stderr));
    // A third: uraid takes its bitmap off and adds one where md would; md replaces it with
    // its own.
    let bitmap_added = array(&dir, "c");
    for args in [&["grow", "--bitmap", "none"][..], &["grow", "--bitmap", "internal"]] {
        let out = uraid(&dir, args, &bitmap_added);
        assert!(out.status.success(), "uraid {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // A fourth: uraid shrinks it, as md shrinks the first at the end of the job.
    let shrunk = array(&dir, "d");
    let out = uraid(&dir, &["grow", "--size", "3M", "--shrink"], &shrunk);
    assert!(out.status.success(), "uraid shrink: {}", String::from_utf8_lossy(&out.stderr));
    let words = ["no-bbl", "bbl"].map(str::to_owned);
    for word in [format!("uuid={NEW_UUID}"), "name=moved".to_owned()].into_iter().chain(words) {
        let out = uraid(&dir, &["assemble", "--update", &word], &bitmap_added);
        assert!(out.status.success(), "update {word}: {}", String::from_utf8_lossy(&out.stderr));
    }

    let job = dir.join("grow.sh");
    std::fs::write(&job, JOB).expect("writing the job");
    let mut cmd = Command::new(scripts.join("run"));
    cmd.args(["--timeout", "600"]).arg(&job).args(&by_md).args(&by_uraid).args(&bitmap_added);
    cmd.args(&shrunk);
    let console = mdvm::run(&mut cmd, "grow");
    let md = mdvm::results(&console);
    assert_eq!(mdvm::result(&md, "md_size"), "23552 16384", "md's own grow");
    assert_eq!(mdvm::result(&md, "uraid_size"), "23552 16384", "the kernel reads uraid's");
    let resync_start = mdvm::result(&md, "uraid_resync_start");
    assert!(
        resync_start.parse::<u64>().is_ok_and(|s| (16384..47104).contains(&s)),
        "md resyncs the new space only: resync_start {resync_start}"
    );
    let zeros = sha256_of_zeros(16 << 20);
    let md_bitmap = mdvm::result(&md, "md_bitmap");
    assert_eq!(md_bitmap, "+8 67108864", "where md adds a bitmap, and its chunk");
    assert_eq!(mdvm::result(&md, "uraid_bitmap"), md_bitmap, "uraid adds it there too");
    assert_eq!(mdvm::result(&md, "updated"), format!("{NEW_UUID} moved"), "md takes the update");
    // mdadm's --update=no-bbl and bbl, and uraid's: the log where mdadm puts it.
    assert_eq!(mdvm::result(&md, "md_no_bbl"), "x", "mdadm took the log away: {console}");
    assert_eq!(mdvm::result(&md, "md_bbl"), "512@80", "mdadm's own: {console}");
    assert_eq!(mdvm::result(&md, "uraid_bbl"), "512@80", "uraid's, assembled by md");
    for who in ["md", "uraid", "bitmap"] {
        assert_eq!(mdvm::result(&md, &format!("{who}_mismatches")), "0", "{who}'s grown array");
        assert_eq!(mdvm::result(&md, &format!("{who}_old_space")), zeros, "{who}'s old space");
    }
    // mdadm -X of the array uraid grew, as md left it, line for line but the file's name.
    let not_filename = |line: &&str| !line.trim_start().starts_with("Filename");
    let mdadm_x: Vec<&str> =
        console.lines().filter_map(|l| l.strip_prefix("XBITMAP")).filter(not_filename).collect();
    let out = uraid(&dir, &["examine", "--bitmap"], &by_uraid[..1]);
    let ours = String::from_utf8_lossy(&out.stdout);
    assert!(mdadm_x.len() >= 11, "mdadm -X in the VM: {console}");
    assert_eq!(ours.lines().filter(not_filename).collect::<Vec<_>>(), mdadm_x);
    shrinks_as_md_shrinks(&dir, &md, &console, &by_uraid);
    // uraid assembles what md grew and then shrank, at md's last size.
    let out = uraid(&dir, &["assemble", "--json"], &by_md);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the plan");
    assert_eq!(plan["component_size_sectors"], 6144, "{plan}");
    assert_eq!(plan["clean"], true, "md resynced it: {plan}");
    // uraid removes the bitmap md added; mdadm then finds none.
    let out = uraid(&dir, &["grow", "--bitmap", "none"], &bitmap_added);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new("mdadm").arg("--examine").arg(&bitmap_added[2]).output().unwrap();
    let examine = String::from_utf8_lossy(&out.stdout);
    assert!(examine.contains("Feature Map : 0x0"), "{examine}");
    assert!(!examine.contains("Internal Bitmap"), "{examine}");
    std::fs::remove_dir_all(&dir).expect("removing the test directory");
}

/// md took uraid's shrink of the fourth array (`uraid_shrunk`) as its own, and uraid's shrink
/// of the array it grew (`by_uraid`, resynced by md) leaves the bitmap md's shrink of the
/// first left (`SBITMAP`).
fn shrinks_as_md_shrinks(dir: &Path, md: &mdvm::Results, console: &str, by_uraid: &[PathBuf]) {
    // md takes uraid's shrink as its own: the size, the bitmap's chunk, clean.
    let shrunk_state = mdvm::result(md, "uraid_shrunk");
    assert_eq!(shrunk_state, "3072 4096 none clean", "md reads uraid's shrink: {console}");
    assert_eq!(mdvm::result(md, "shrunk_mismatches"), "0");
    assert_eq!(mdvm::result(md, "shrunk_old_space"), sha256_of_zeros(6 << 20));
    // md's own shrink keeps the 16 KiB chunk it grew to; uraid's shrink of the array it grew
    // (and md resynced) leaves the bitmap md's left, but for the event counts.
    assert_eq!(mdvm::result(md, "md_shrunk"), "3072 16384", "md's own shrink: {console}");
    let out = uraid(dir, &["grow", "--size", "3M", "--shrink"], by_uraid);
    assert!(out.status.success(), "uraid shrink: {}", String::from_utf8_lossy(&out.stderr));
    let shape = |line: &&str| {
        ["Chunksize", "Sync Size", "Bitmap :", "State"].iter().any(|k| line.contains(k))
    };
    let md_x: Vec<&str> =
        console.lines().filter_map(|l| l.strip_prefix("SBITMAP")).filter(shape).collect();
    assert_eq!(md_x.len(), 4, "mdadm -X in the VM: {console}");
    let out = uraid(dir, &["examine", "--bitmap"], &by_uraid[..1]);
    let ours = String::from_utf8_lossy(&out.stdout);
    assert_eq!(ours.lines().filter(shape).collect::<Vec<_>>(), md_x);
}

/// Three members `{prefix}0.img`...: zeros, the array created clean on their first 8 MiB,
/// and past that what the larger disks held (the same bytes for both arrays).
fn array(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let members: Vec<PathBuf> = (0..3).map(|i| dir.join(format!("{prefix}{i}.img"))).collect();
    for (i, path) in members.iter().enumerate() {
        let file = std::fs::File::create(path).expect("creating a member");
        file.set_len(24 << 20).expect("sizing a member");
        let junk: Vec<u8> = (0..15u64 << 20).map(|b| (b * 13 + i as u64 * 7 + 1) as u8).collect();
        file.write_all_at(&junk, 9 << 20).expect("filling the new space");
    }
    let mut create = vec!["create", "-l", "5", "-n", "3", "--chunk", "64K", "--size", "8M"];
    create.extend(["--bitmap", "internal", "--bitmap-chunk", "4K", "--assume-clean"]);
    create.extend(["--uuid", UUID]);
    let out = uraid(dir, &create, &members);
    assert!(out.status.success(), "uraid create: {}", String::from_utf8_lossy(&out.stderr));
    members
}

fn uraid(dir: &Path, args: &[&str], members: &[PathBuf]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(args)
        .args(members)
        .env("URAID_RUN_DIR", dir.join("run"))
        .output()
        .expect("running uraid")
}

fn sha256_of_zeros(len: usize) -> String {
    use sha2::Digest as _;
    format!("{:x}", sha2::Sha256::digest(vec![0u8; len]))
}
