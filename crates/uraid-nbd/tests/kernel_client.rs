//! The Linux kernel's NBD client on a uraid array: ext4 made, filled, read back and checked.
//!
//! Goal: a real kernel (Debian's 6.12, nbd.ko driven by Debian's nbd-client) can use uraid as
//! a disk: mkfs.ext4, mount, files written, unmount, reconnect, files read back identical, a
//! clean `e2fsck -fn`; and what it wrote really is on the member files, in uraid's layout.
//!
//! Method: a RAID6 runtime on 6 member files serves NBD on 127.0.0.1 in this process; the VM
//! of `scripts/mdvm` (qemu TCG, user networking) reaches it at 10.0.2.2, first over two
//! connections (multi-conn), then over one. The files' bytes are
//! made here and travel into the VM with the job, so every check compares against bytes the
//! test knows: the guest's sha256s after a reconnect (reads that went over the wire), then, on
//! the host, a fresh runtime on the same member files reads the whole array into an image that
//! host `e2fsck -fn` must find clean and from which `debugfs` dumps every file byte for byte.
//! A parity check over the array finds no mismatch.
//!
//! Without qemu, the kit or nbd-client the test prints why and passes, except under CI=true,
//! where CI has installed them and their absence is a failure.

// The VM kit helpers uraid-cli's kernel tests use (one copy for both crates).
#[path = "../../uraid-cli/tests/mdvm/mod.rs"]
mod mdvm;

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;
use uraid_core::array::{ArrayConfig, SyncKind};
use uraid_core::{Geometry, Level};
use uraid_io::FileOptions;
use uraid_nbd::{BlockBackend, ListenAddr, Server, ServerConfig};
use uraid_runtime::{FileSource, Runtime, RuntimeConfig};

const MEMBERS: usize = 6;
/// 6 x 24 MiB RAID6: a 96 MiB array, small enough for mkfs and fsck under TCG.
const MEMBER_BYTES: u64 = 24 << 20;
const CHUNK_BYTES: u64 = 64 << 10;
/// Seconds the VM may run; the job takes about a minute under TCG on 2 cores.
const VM_TIMEOUT_S: u32 = 400;
/// Files of mixed sizes (about 4.6 MiB): empty, sub-block, block edges, multi-extent.
const FILES: &[(&str, usize)] = &[
    ("empty", 0),
    ("one", 1),
    ("almost-block", 4095),
    ("block", 4096),
    ("odd", 65_537),
    ("chunk-row", 256 << 10),
    ("mib-plus", (1 << 20) + 3),
    ("three-mib", 3 << 20),
];

#[test]
fn kernel_nbd_client_makes_and_checks_ext4_on_raid6() {
    let Some(scripts) = mdvm::kit(&["nbd-client"]) else { return };
    let started = Instant::now();
    let dir = test_dir();
    let members: Vec<PathBuf> = (0..MEMBERS).map(|i| dir.join(format!("m{i}.img"))).collect();
    for m in &members {
        File::create(m).and_then(|f| f.set_len(MEMBER_BYTES)).expect("creating a member file");
    }
    let files: BTreeMap<&str, Vec<u8>> = FILES
        .iter()
        .enumerate()
        .map(|(i, &(name, len))| (name, bytes(i as u64 + 1, len)))
        .collect();
    let mut adds = Vec::new();
    for (name, data) in &files {
        let path = dir.join(name);
        std::fs::write(&path, data).expect("writing a file for the VM");
        adds.push(path);
    }

    let rt = Arc::new(start_runtime(&members));
    let size = rt.size_bytes();
    let server = Server::new(rt.clone() as Arc<dyn BlockBackend>, ServerConfig::default())
        .expect("the server accepts the array");
    let handle = server.serve_tcp("127.0.0.1:0").expect("listening on loopback");
    let ListenAddr::Tcp(addr) = handle.local_addr().clone() else { unreachable!() };
    let names: Vec<&str> = files.keys().copied().collect();
    let job = JOB.replace("@PORT@", &addr.port().to_string()).replace("@FILES@", &names.join(" "));
    let results = run_vm(&scripts, &dir, &job, &adds);

    // What the guest read back after reconnecting is what the test made.
    for (name, data) in &files {
        assert_eq!(results.get(&format!("{name}.sha256")), Some(&sha256(data)), "{name} in the VM");
    }
    assert_eq!(results.get("nbd0.size").map(String::as_str), Some(size.to_string().as_str()));
    let stats = handle.stats();
    eprintln!("server stats: {stats:?}");
    let file_bytes: usize = files.values().map(Vec::len).sum();
    assert!(stats.writes > 0 && stats.written_bytes >= file_bytes as u64, "{stats:?}");
    assert!(stats.flushes > 0, "the kernel flushed (sync, unmount): {stats:?}");
    assert!(stats.reads > 0, "{stats:?}");
    assert_eq!(stats.connections_transmitting, 3, "2 connections, then 1: {stats:?}");
    assert_eq!(stats.errors, 0, "{stats:?}");

    handle.shutdown();
    drop(server);
    let rt = Arc::into_inner(rt).expect("the server released the runtime");
    rt.shutdown().expect("the runtime shuts down");

    let fsck_out = check_the_array(&members, &dir, &files);
    eprintln!("kernel NBD client test took {:.0?}; host e2fsck:\n{fsck_out}", started.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The guest's side. `sh -e`: any failing command fails the job. The files arrive in /job.
const JOB: &str = r#"
r() { echo "RESULT $*"; }
# connect [CONNECTIONS]: the server advertises CAN_MULTI_CONN, so the kernel may spread
# requests over several sockets.
connect() {
    nbd-client 10.0.2.2 @PORT@ /dev/nbd0 -N uraid -t 60 -C ${1:-1}
    # netlink configures the device asynchronously: wait until it has its size.
    i=0
    while [ "$(cat /sys/block/nbd0/size)" = 0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
}
modprobe nbd
modprobe ext4
connect 2
r nbd0.size $(blockdev --getsize64 /dev/nbd0)
mkfs.ext4 -q -F /dev/nbd0
mount -t ext4 /dev/nbd0 /mnt
for f in @FILES@; do cp /job/$f /mnt/$f; done
sync
ls -l /mnt
umount /mnt
nbd-client -d /dev/nbd0
# Reconnected, with no page of the old connection left: every read crosses the wire.
echo 3 >/proc/sys/vm/drop_caches
connect
mount -t ext4 /dev/nbd0 /mnt
for f in @FILES@; do r $f.sha256 $(sha256sum /mnt/$f | cut -d' ' -f1); done
umount /mnt
e2fsck -fn /dev/nbd0
nbd-client -d /dev/nbd0
"#;

/// After the VM: a fresh runtime on the member files finds parity consistent and holds an
/// ext4 that host `e2fsck -fn` finds clean, with every file's bytes. Returns e2fsck's report.
fn check_the_array(members: &[PathBuf], dir: &Path, files: &BTreeMap<&str, Vec<u8>>) -> String {
    let rt = start_runtime(members);
    let size = rt.size_bytes();
    rt.sync_wait(SyncKind::Check, 0, rt.member_sectors()).expect("a parity check");
    assert_eq!(rt.mismatches().1, 0, "mismatch_cnt after the kernel's writes");
    let image = dir.join("array.img");
    let mut whole = Vec::with_capacity(size as usize);
    for at in (0..size).step_by(4 << 20) {
        let len = (size - at).min(4 << 20) as usize;
        whole.extend(rt.read_at(at, len).expect("reading the array"));
    }
    rt.shutdown().expect("the runtime shuts down");
    std::fs::write(&image, &whole).expect("writing the array image");
    let fsck = sbin("e2fsck").args(["-fn"]).arg(&image).output().expect("host e2fsck");
    let fsck_out = String::from_utf8_lossy(&fsck.stdout);
    assert!(fsck.status.success(), "host e2fsck -fn ({}):\n{fsck_out}", fsck.status);
    for (name, data) in files {
        let out = dir.join(format!("{name}.dumped"));
        let request = format!("dump /{name} {}", out.display());
        let debugfs = sbin("debugfs").arg("-R").arg(&request).arg(&image).output();
        assert!(debugfs.expect("host debugfs").status.success(), "debugfs {request}");
        let got = std::fs::read(&out).unwrap_or_else(|e| panic!("{name} from the array: {e}"));
        assert!(
            got == *data,
            "{name}: the array holds other bytes ({} of {})",
            got.len(),
            data.len()
        );
    }
    fsck_out.into_owned()
}

/// e2fsprogs live in /usr/sbin, which a user's PATH may lack.
fn sbin(tool: &str) -> Command {
    let path = std::env::var("PATH").unwrap_or_default();
    let mut cmd = Command::new(tool);
    cmd.env("PATH", format!("{path}:/usr/local/sbin:/usr/sbin:/sbin"));
    cmd
}

fn start_runtime(members: &[PathBuf]) -> Runtime {
    let geometry =
        Geometry::new(Level::Raid6, Level::Raid6.default_layout(), MEMBERS, CHUNK_BYTES).unwrap();
    let config = RuntimeConfig {
        array: ArrayConfig {
            geometry,
            stripe_size_bytes: 4096,
            stripe_cache_size: 256,
            member_sectors: MEMBER_BYTES / 512,
        },
        workers: Some(2),
        data_offset_bytes: 0,
        write_intent: None,
        record_failures: false,
        write_back: true,
    };
    let options = FileOptions { ring_entries: 64, ..FileOptions::default() };
    Runtime::start(&config, &FileSource::new(members.to_vec(), options)).expect("runtime starts")
}

/// Runs `job` in the VM with networking and `adds` in /job; returns its `RESULT` lines.
fn run_vm(scripts: &Path, dir: &Path, job: &str, adds: &[PathBuf]) -> mdvm::Results {
    let job_path = dir.join("job.sh");
    std::fs::write(&job_path, job).expect("writing the job script");
    let mut cmd = Command::new(scripts.join("run"));
    cmd.args(["--timeout", &VM_TIMEOUT_S.to_string(), "--net"]);
    for a in adds {
        cmd.arg("--add").arg(a);
    }
    cmd.arg(&job_path);
    mdvm::results(&mdvm::run(&mut cmd, "nbd"))
}

fn test_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel_client");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the test directory");
    dir
}

fn sha256(data: &[u8]) -> String {
    let mut hex = String::new();
    for b in Sha256::digest(data) {
        write!(hex, "{b:02x}").unwrap();
    }
    hex
}

/// splitmix64 bytes: the same seed gives the same bytes on every run.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(len);
    out
}
