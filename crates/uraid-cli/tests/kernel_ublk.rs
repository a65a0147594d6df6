//! `uraid serve --ublk` in a real kernel: the array as /dev/ublkb0 carries an ext4 file
//! system through mkfs, mount, writes, remount, reads and a clean fsck, and SIGTERM stops it
//! cleanly (exit 0, the device gone, every member's superblock clean). Before the file
//! system, a hole punched in the device (util-linux `fallocate -p`: the kernel's write of
//! zeros that may unmap) reads back as zeros and reached the array as a discard.
//!
//! Method: the host kernel has no ublk_drv, so this runs in the md VM (scripts/mdvm: qemu
//! TCG, Debian's 6.12 kernel, which has ublk_drv, ext4 and e2fsprogs in the kit). The host
//! makes a 64 MiB RAID5 (5 members of 16 MiB, internal bitmap) with `uraid create`, the VM
//! gets the `uraid` binary and its libraries through `run --add`, runs the job and prints
//! `RESULT <key> <value>` lines: every hash and status asserted here comes from the VM. After
//! the VM, the host reads the array back with `uraid assemble -o` and fscks that too, so the
//! files are on the members, not only in a cache.
//!
//! Without qemu or the kit the test prints why and passes, except under CI=true.

mod mdvm;

use mdvm::result;

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const MEMBERS: usize = 5;
/// 16 MiB of data per member after md's 1 MiB data offset: 64 MiB of array.
const MEMBER_BYTES: u64 = 17 << 20;
const ARRAY_BYTES: u64 = 64 << 20;
const VM_TIMEOUT_S: u32 = 400;
/// Files the job writes: (name, bytes), uneven sizes so that partial blocks are written.
const FILES: [(&str, u32); 3] = [("big", 6 << 20), ("small", 12_345), ("dir/odd", (1 << 20) + 123)];

#[test]
fn ext4_on_uraid_serve_ublk_in_the_kernel() {
    let Some(scripts) = mdvm::kit(&["mke2fs", "e2fsck", "mdadm"]) else { return };
    let started = Instant::now();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel_ublk");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the test directory");
    let members: Vec<PathBuf> = (0..MEMBERS).map(|i| dir.join(format!("m{i}.img"))).collect();
    for path in &members {
        File::create(path).and_then(|f| f.set_len(MEMBER_BYTES)).expect("creating a member");
    }
    let create = ["create", "-l", "5", "-n", "5", "--chunk", "64K", "--name", "ublk"];
    uraid(&[&create[..], &["--bitmap", "internal", "--assume-clean"]].concat(), &members);

    let job_path = dir.join("job.sh");
    std::fs::write(&job_path, job()).expect("writing the job");
    let results = run_vm(&scripts, &job_path, &members);

    assert_eq!(result(&results, "size_bytes"), ARRAY_BYTES.to_string(), "/dev/ublkb0's size");
    assert_eq!(result(&results, "banner_ublk"), "/dev/ublkb0", "serve --json names the device");
    assert_eq!(result(&results, "punch_rc"), "0", "fallocate -p of /dev/ublkb0");
    assert_eq!(result(&results, "punched"), result(&results, "zeros"), "the hole reads zeros");
    let beside = result(&results, "after_punch");
    assert_eq!(beside, result(&results, "pattern_after_punch"), "the MiB after the hole");
    let discards: u64 = result(&results, "engine_discards").parse().expect("a count");
    // 4 MiB of RAID5 x 5, 64 KiB chunks: 16 whole stripes of 256 KiB.
    assert!(discards >= 16, "the hole reached the array as {discards} stripe discards");
    for (name, bytes) in FILES {
        let written = result(&results, &format!("written.{name}"));
        assert_eq!(written.len(), 64, "{name}: no sha256 reported: {written:?}");
        assert_eq!(result(&results, &format!("size.{name}")), bytes.to_string(), "{name}'s size");
        assert_eq!(result(&results, &format!("read.{name}")), written, "{name} after remount");
    }
    assert_eq!(result(&results, "fsck_rc"), "0", "e2fsck -fn of /dev/ublkb0 in the VM");
    assert_eq!(result(&results, "serve_rc"), "0", "uraid serve's exit status after SIGTERM");
    assert_eq!(result(&results, "ublkb0_after_stop"), "gone", "the device outlived the server");
    for i in 0..MEMBERS {
        let state = result(&results, &format!("vd{}.state", char::from(b'a' + i as u8)));
        assert_eq!(state, "clean", "mdadm --examine of member {i}");
    }
    check_on_host(&dir, &members);
    let (w, r) = (result(&results, "dd_write_s"), result(&results, "dd_read_s"));
    eprintln!(
        "ublk: ext4 round trip verified in {:.0?}; in the VM (TCG), 32 MiB O_DIRECT through \
         /dev/ublkb0: write {w} s, read {r} s",
        started.elapsed()
    );
    std::fs::remove_dir_all(&dir).expect("removing the test directory");
}

/// The job (busybox sh -e). `uraid serve` runs in the background; the file system work
/// happens on /dev/ublkb0; SIGTERM stops it.
fn job() -> String {
    let mut job = String::from(JOB_START);
    for (name, bytes) in FILES {
        write!(
            job,
            "mkdir -p $(dirname /mnt/{name})\n\
             head -c {bytes} /dev/urandom >/mnt/{name}\n\
             r written.{name} $(sha256sum /mnt/{name} | cut -d' ' -f1)\n"
        )
        .unwrap();
    }
    job += JOB_REMOUNT;
    for (name, _) in FILES {
        write!(
            job,
            "r read.{name} $(sha256sum /mnt/{name} | cut -d' ' -f1)\n\
             r size.{name} $(stat -c %s /mnt/{name})\n"
        )
        .unwrap();
    }
    job + JOB_END
}

const JOB_START: &str = r#"
r() { echo "RESULT $*"; }
now() { cut -d' ' -f1 /proc/uptime; }
modprobe ublk_drv
modprobe ext4
export LD_LIBRARY_PATH=/job
/job/uraid serve --ublk --no-tcp --json /dev/vda /dev/vdb /dev/vdc /dev/vdd /dev/vde \
    >/tmp/serve.out 2>/tmp/serve.err &
srv=$!
i=0
while ! [ -e /dev/ublkb0 ] && [ $i -lt 600 ]; do
    kill -0 $srv || { cat /tmp/serve.err; exit 1; }
    sleep 0.1
    i=$((i + 1))
done
# The banner follows the device's creation.
while ! [ -s /tmp/serve.out ] && [ $i -lt 600 ]; do
    sleep 0.1
    i=$((i + 1))
done
sed 's/^/serve.out /' /tmp/serve.out
r banner_ublk $(sed -n 's/.*"ublk":"\([^"]*\)".*/\1/p' /tmp/serve.out)
r size_bytes $(blockdev --getsize64 /dev/ublkb0)
dd if=/dev/urandom of=/tmp/pattern bs=1M count=32 2>/dev/null
t0=$(now)
dd if=/tmp/pattern of=/dev/ublkb0 bs=1M oflag=direct 2>/dev/null
t1=$(now)
dd if=/dev/ublkb0 of=/dev/null bs=1M count=32 iflag=direct 2>/dev/null
t2=$(now)
r dd_write_s $(echo "$t0 $t1" | awk '{ print $2 - $1 }')
r dd_read_s $(echo "$t1 $t2" | awk '{ print $2 - $1 }')
rc=0
/job/fallocate -p -o 1048576 -l 4194304 /dev/ublkb0 || rc=$?
r punch_rc $rc
sha() { sha256sum | cut -d' ' -f1; }
r punched $(dd if=/dev/ublkb0 bs=1M skip=1 count=4 iflag=direct 2>/dev/null | sha)
r zeros $(head -c 4194304 /dev/zero | sha)
r after_punch $(dd if=/dev/ublkb0 bs=1M skip=5 count=1 iflag=direct 2>/dev/null | sha)
r pattern_after_punch $(dd if=/tmp/pattern bs=1M skip=5 count=1 2>/dev/null | sha)
r engine_discards $(/job/uraid stats ublk | sed -n 's/.* discards \([0-9]*\) .*/\1/p')
mkfs.ext4 -q /dev/ublkb0
mkdir -p /mnt
mount -t ext4 /dev/ublkb0 /mnt
"#;

/// Unmount, forget every cached page, mount again: the reads come from the array.
const JOB_REMOUNT: &str = r"
sync
umount /mnt
echo 3 >/proc/sys/vm/drop_caches
mount -t ext4 /dev/ublkb0 /mnt
";

const JOB_END: &str = r"
umount /mnt
rc=0
e2fsck -fn /dev/ublkb0 || rc=$?
r fsck_rc $rc
kill -TERM $srv
rc=0
wait $srv || rc=$?
r serve_rc $rc
sed 's/^/serve.err /' /tmp/serve.err
if [ -e /dev/ublkb0 ]; then r ublkb0_after_stop present; else r ublkb0_after_stop gone; fi
for d in vda vdb vdc vdd vde; do
    r $d.state $(mdadm --examine /dev/$d | sed -n 's/^ *State : //p')
done
";

/// The host's own look: the members assemble clean, and the array they hold is an ext4 file
/// system that the host's e2fsck (when installed) finds clean.
fn check_on_host(dir: &Path, members: &[PathBuf]) {
    let image = dir.join("array.img");
    let mut args = vec!["assemble".to_owned(), "-o".to_owned()];
    args.push(image.to_str().expect("a UTF-8 path").to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    uraid(&args, members);
    let bytes = std::fs::metadata(&image).expect("uraid assemble -o wrote the array").len();
    assert_eq!(bytes, ARRAY_BYTES, "the array uraid assembles on the host");
    match Command::new("e2fsck").args(["-fn"]).arg(&image).output() {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "host e2fsck of the array ({}):\n{text}", out.status);
            eprintln!("ublk: host e2fsck -fn of the assembled array: clean");
        }
        Err(e) => eprintln!("ublk: no host e2fsck ({e}): the VM's fsck stands alone"),
    }
}

fn uraid(args: &[&str], files: &[PathBuf]) {
    let out = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(args)
        .args(files)
        .output()
        .expect("running uraid");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "uraid {args:?} failed ({}): {stderr}", out.status);
}

/// `uraid` and its libraries, and util-linux's `fallocate` for `fallocate -p` (busybox's
/// only allocates; it loads only libc).
fn vm_files() -> Vec<PathBuf> {
    let fallocate = ["/usr/bin/fallocate", "/bin/fallocate"].map(PathBuf::from);
    let fallocate = fallocate.into_iter().find(|p| p.exists()).expect("util-linux's fallocate");
    let mut files = mdvm::binary_and_libraries(Path::new(env!("CARGO_BIN_EXE_uraid")));
    files.push(fallocate);
    files
}

fn run_vm(scripts: &Path, job: &Path, disks: &[PathBuf]) -> mdvm::Results {
    let mut cmd = Command::new(scripts.join("run"));
    cmd.args(["--timeout", &VM_TIMEOUT_S.to_string()]);
    for file in vm_files() {
        cmd.arg("--add").arg(file);
    }
    cmd.arg(job).args(disks);
    mdvm::results(&mdvm::run(&mut cmd, "ublk"))
}
