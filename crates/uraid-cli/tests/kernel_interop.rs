//! Kernel interop: arrays move both ways between uraid and the real Linux md driver.
//!
//! Goal: an array uraid creates and writes is one md assembles, reads byte for byte, and finds
//! consistent (check: mismatch_cnt 0), healthy and degraded; an array md creates and writes is
//! one uraid assembles and reads byte for byte, healthy and degraded; an array uraid creates
//! with a slot `missing` is one md runs degraded and clean, then rebuilds a disk added into.
//!
//! Method: the host kernel has no md, so md runs in a small qemu VM (TCG) booting Debian's 6.12
//! kernel, built by `scripts/mdvm/build-kit` and run by `scripts/mdvm/run`; the member files
//! are its virtio disks (/dev/vda, /dev/vdb, ... in order). The VM runs a job script and
//! prints `RESULT <key> <value>` lines, which are the only source of what md saw: every
//! sha256 and mismatch count asserted here comes from the VM's console.
//!
//! Without qemu or the kernel kit the tests print why and pass, except under CI=true, where
//! CI has installed them and a missing kit is a failure.

mod mdvm;

use mdvm::result;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use uraid_core::array::ArrayConfig;
use uraid_core::{Geometry, Layout};
use uraid_format::assemble::{AssembleOptions, AssemblyPlan, Candidate, plan};
use uraid_io::FileOptions;
use uraid_md::{MdArray, MdOptions};
use uraid_runtime::{FileSource, Runtime, RuntimeConfig};

const MEMBER_BYTES: u64 = 24 << 20;
/// md's unit for sizes and offsets, and the smallest write either side can make.
const SECTOR: u64 = 512;
/// Seconds a VM may run: each job takes well under a minute under TCG on 2 cores.
const VM_TIMEOUT_S: u32 = 300;

/// The arrays both directions use: RAID6 on 6 members (4 data disks, 256 KiB rows) and RAID5
/// with an internal bitmap on 4 members (3 data disks: 192 KiB rows, so rows do not line up
/// with powers of two).
struct Shape {
    name: &'static str,
    level: u8,
    members: usize,
    bitmap: bool,
    /// Members a degraded assemble leaves out (RAID6 loses two, so Q is needed).
    left_out: &'static [usize],
}

const R6: Shape = Shape { name: "r6", level: 6, members: 6, bitmap: false, left_out: &[2, 4] };
const R5: Shape = Shape { name: "r5", level: 5, members: 4, bitmap: true, left_out: &[1] };
/// Created by uraid with slot 1 `missing` (mdadm's way to move a disk's data into a new
/// array, then add the disk): written degraded, then rebuilt by md onto a disk it is given.
const R5_MISSING: Shape =
    Shape { name: "r5m", level: 5, members: 4, bitmap: false, left_out: &[1] };

#[test]
fn uraid_arrays_assemble_in_linux_md() {
    let Some(scripts) = mdvm::kit(&[]) else { return };
    let started = Instant::now();
    let dir = test_dir("uraid_to_md");
    let mut disks = Vec::new();
    let mut expected = BTreeMap::new();
    for (shape, seed) in [(&R6, 6), (&R5, 5)] {
        let members = member_files(&dir, shape.name, shape.members);
        uraid_create(shape, &members);
        let contents = if shape.bitmap {
            write_through_md_array(&members, seed)
        } else {
            write_through_runtime(&members, seed)
        };
        expected.insert(shape.name, (sha256(&contents), contents.len() as u64));
        disks.extend(members);
    }
    let mut job = String::from(JOB_PRELUDE);
    let mut first = 0;
    for shape in [&R6, &R5] {
        let all: Vec<usize> = (first..first + shape.members).collect();
        let kept: Vec<usize> =
            all.iter().copied().filter(|i| !left_out(shape, first, *i)).collect();
        writeln!(job, "verify {} 1 {}", shape.name, devices(&all)).unwrap();
        writeln!(job, "verify {}-degraded 0 {}", shape.name, devices(&kept)).unwrap();
        first += shape.members;
    }
    // The array created with a slot missing: its three members, then a blank disk to add.
    let (present, blank) = create_with_missing(&dir);
    let contents = write_through_md_array(&present, 7);
    expected.insert(R5_MISSING.name, (sha256(&contents), contents.len() as u64));
    let kept: Vec<usize> = (first..first + present.len()).collect();
    let spare = device(first + present.len());
    writeln!(job, "verify_add {} {spare} {}", R5_MISSING.name, devices(&kept)).unwrap();
    disks.extend(present);
    disks.push(blank);
    let results = run_vm(&scripts, &job, &disks);
    for shape in [&R6, &R5] {
        let (sha, size) = &expected[shape.name];
        check_healthy(&results, shape, sha, *size);
        check_degraded(&results, shape, sha);
    }
    check_rebuilt(&results, &expected[R5_MISSING.name].0);
    eprintln!("uraid -> md: the three arrays verified in {:.0?}", started.elapsed());
    std::fs::remove_dir_all(&dir).expect("removing the test directory");
}

#[test]
fn linux_md_arrays_assemble_in_uraid() {
    let Some(scripts) = mdvm::kit(&[]) else { return };
    let started = Instant::now();
    let dir = test_dir("md_to_uraid");
    // The data md writes comes from this disk, so the host knows what md was given.
    let source_path = dir.join("source.img");
    let source = pattern(0x5eed, SOURCE_BYTES as usize);
    std::fs::write(&source_path, &source).expect("writing the source disk");
    let mut disks = Vec::new();
    let mut job = String::from(JOB_PRELUDE);
    let source_device = device(R6.members + R5.members);
    let mut overlays = BTreeMap::new();
    for (shape, seed) in [(&R6, 60), (&R5, 50)] {
        let members = member_files(&dir, shape.name, shape.members);
        let first: usize = disks.iter().map(Vec::len).sum();
        let all: Vec<usize> = (first..first + shape.members).collect();
        overlays.insert(shape.name, overlay_plan(seed));
        job += &md_create_and_write(shape, &devices(&all), &source_device, &overlays[shape.name]);
        writeln!(job, "verify {} 1 {}", shape.name, devices(&all)).unwrap();
        disks.push(members);
    }
    let mut attached: Vec<PathBuf> = disks.concat();
    attached.push(source_path);
    let results = run_vm(&scripts, &job, &attached);
    for (shape, members) in [&R6, &R5].into_iter().zip(&disks) {
        let size = parse_u64(&results, &format!("{}.size_bytes", shape.name));
        let wanted = expected_contents(&source, size, &overlays[shape.name]);
        let sha = sha256(&wanted);
        check_md_wrote(&results, shape, &sha);
        check_uraid_reads(&dir, shape, members, size, &sha);
    }
    eprintln!("md -> uraid: both arrays verified in {:.0?}", started.elapsed());
    std::fs::remove_dir_all(&dir).expect("removing the test directory");
}

/// Shell functions every job uses (busybox sh, run with -e by the VM's /init).
const JOB_PRELUDE: &str = r#"
r() { echo "RESULT $*"; }
# md's sync thread may take a moment to start: look only after a second.
wait_idle() {
    sleep 1
    while [ "$(cat /sys/block/md0/md/sync_action)" != idle ]; do sleep 1; done
}
# verify NAME CHECK DEVICE...: assemble, report what md reads (and, if CHECK is 1, what a
# check finds), print mdadm --detail, stop.
verify() {
    name=$1 check=$2
    shift 2
    mdadm --assemble --run /dev/md0 "$@"
    md=/sys/block/md0/md
    r $name.sync_action_at_start $(cat $md/sync_action)
    r $name.resync_start $(cat $md/resync_start)
    # Read the members, not pages cached by an earlier job step.
    echo 3 >/proc/sys/vm/drop_caches
    r $name.size_bytes $(blockdev --getsize64 /dev/md0)
    r $name.sha256 $(sha256sum /dev/md0 | cut -d' ' -f1)
    if [ "$check" = 1 ]; then
        echo check >$md/sync_action
        wait_idle
        r $name.last_sync_action $(cat $md/last_sync_action)
        r $name.mismatch_cnt $(cat $md/mismatch_cnt)
    fi
    mdadm --detail /dev/md0 | sed "s/^/$name.detail /"
    mdadm --stop /dev/md0
}
# verify_add NAME SPARE DEVICE...: assemble degraded, report what md reads, add SPARE and let
# md rebuild onto it, then report what a check finds and what md reads.
verify_add() {
    name=$1 spare=$2
    shift 2
    mdadm --assemble --run /dev/md0 "$@"
    md=/sys/block/md0/md
    r $name.sync_action_at_start $(cat $md/sync_action)
    echo 3 >/proc/sys/vm/drop_caches
    r $name.sha256_degraded $(sha256sum /dev/md0 | cut -d' ' -f1)
    mdadm --detail /dev/md0 | sed "s/^/$name-degraded.detail /"
    mdadm /dev/md0 --add "$spare"
    while [ "$(cat $md/degraded)" != 0 ] || [ "$(cat $md/sync_action)" != idle ]; do sleep 1; done
    r $name.rebuilt_action $(cat $md/last_sync_action)
    echo check >$md/sync_action
    wait_idle
    r $name.last_sync_action $(cat $md/last_sync_action)
    r $name.mismatch_cnt $(cat $md/mismatch_cnt)
    echo 3 >/proc/sys/vm/drop_caches
    r $name.sha256 $(sha256sum /dev/md0 | cut -d' ' -f1)
    mdadm --detail /dev/md0 | sed "s/^/$name.detail /"
    mdadm --stop /dev/md0
}
"#;

/// The source disk of the md -> uraid test: larger than either array, so that overlays can
/// copy from anywhere in it.
const SOURCE_BYTES: u64 = 128 << 20;
/// Overlays land in the first 60 MiB, which both arrays have (69 and 92 MiB).
const OVERLAY_AREA_BYTES: u64 = 60 << 20;

/// One dd after the full copy: `sectors` from source sector `from` to array sector `to`.
struct Overlay {
    from: u64,
    to: u64,
    sectors: u64,
}

/// Sub-stripe writes over data md has written, so md's own rmw/rcw paths make the parity uraid
/// then reads degraded.
fn overlay_plan(seed: u64) -> Vec<Overlay> {
    let mut rng = Rng(seed);
    (0..40)
        .map(|_| {
            let sectors = rng.below(300) + 1;
            let from = rng.below(SOURCE_BYTES / SECTOR - sectors);
            let to = rng.below(OVERLAY_AREA_BYTES / SECTOR - sectors);
            Overlay { from, to, sectors }
        })
        .collect()
}

/// The job lines that make `shape` with mdadm, fill it from the source disk and stop it.
fn md_create_and_write(shape: &Shape, members: &str, source: &str, overlays: &[Overlay]) -> String {
    let (name, level, n) = (shape.name, shape.level, shape.members);
    // RAID6 goes through md's initial resync; RAID5 starts clean on zeroed members and gets
    // an internal bitmap, which md keeps while it writes.
    let extra = if shape.bitmap { "--bitmap=internal --assume-clean" } else { "" };
    let mut job = format!(
        "mdadm --create /dev/md0 --run --metadata=1.2 --level={level} --raid-devices={n} \
         --chunk=64 --name={name} {extra} {members}\n\
         wait_idle\n\
         r {name}.created_resync_start $(cat /sys/block/md0/md/resync_start)\n\
         size=$(blockdev --getsize64 /dev/md0)\n\
         dd if={source} of=/dev/md0 bs=64k count=$((size / 65536)) conv=notrunc 2>/dev/null\n"
    );
    for o in overlays {
        writeln!(
            job,
            "dd if={source} of=/dev/md0 bs=512 skip={} seek={} count={} conv=notrunc \
             2>/dev/null",
            o.from, o.to, o.sectors
        )
        .unwrap();
    }
    job + "sync\nmdadm --stop /dev/md0\n"
}

/// What md should hold: the source's first `size` bytes with the overlays applied in order.
fn expected_contents(source: &[u8], size: u64, overlays: &[Overlay]) -> Vec<u8> {
    assert!(size >= OVERLAY_AREA_BYTES, "the array ({size} bytes) is smaller than planned");
    let mut contents = source[..size as usize].to_vec();
    for o in overlays {
        let (from, to, len) = ((o.from * SECTOR) as usize, (o.to * SECTOR) as usize, o.sectors);
        let len = (len * SECTOR) as usize;
        contents[to..to + len].copy_from_slice(&source[from..from + len]);
    }
    contents
}

/// Writes a pattern over the whole array through uraid's runtime and returns the contents.
/// Three passes, so that every write path runs: small writes onto the zeroed array, the whole
/// array front to back in uneven pieces (full rows, partial rows, pieces starting and ending
/// mid-chunk), then overwrites of written data (rmw and rcw over real data, some crossing chunk
/// and row boundaries). uraid reads it all back before md is asked to.
fn write_pattern(rt: &Runtime, seed: u64) -> Vec<u8> {
    let size = rt.size_bytes();
    let mut model = vec![0u8; size as usize];
    let mut rng = Rng(seed);
    for _ in 0..32 {
        let sectors = rng.below(24) + 1;
        let at = rng.below(size / SECTOR - sectors) * SECTOR;
        write(rt, &mut model, at, &pattern(rng.next(), (sectors * SECTOR) as usize));
    }
    let whole = pattern(rng.next(), size as usize);
    let pieces: [u64; 7] = [
        1 << 20,
        3 * SECTOR,
        255 * SECTOR,
        64 << 10,
        17 * SECTOR,
        256 << 10,
        (768 << 10) + 5 * SECTOR,
    ];
    let mut at = 0;
    for piece in pieces.iter().cycle() {
        if at == size {
            break;
        }
        let len = (*piece).min(size - at);
        write(rt, &mut model, at, &whole[at as usize..(at + len) as usize]);
        at += len;
    }
    for _ in 0..200 {
        let sectors = rng.below(520) + 1;
        let at = rng.below(size / SECTOR - sectors) * SECTOR;
        write(rt, &mut model, at, &pattern(rng.next(), (sectors * SECTOR) as usize));
    }
    rt.flush().expect("uraid flushes the array");
    for at in (0..size).step_by(1 << 20) {
        let len = (1u64 << 20).min(size - at);
        let got = rt.read_at(at, len as usize).expect("uraid reads the array back");
        assert!(
            got == model[at as usize..(at + len) as usize],
            "uraid reads back other data at {at}"
        );
    }
    model
}

fn write(rt: &Runtime, model: &mut [u8], at: u64, data: &[u8]) {
    rt.write_at(at, data)
        .unwrap_or_else(|e| panic!("uraid write of {} bytes at {at}: {e}", data.len()));
    model[at as usize..at as usize + data.len()].copy_from_slice(data);
}

/// The RAID6 case: the runtime alone, on a FileSource, set up from the assembly plan as
/// `uraid assemble -o` does; the superblocks stay as `uraid create --assume-clean` wrote them.
fn write_through_runtime(members: &[PathBuf], seed: u64) -> Vec<u8> {
    let plan = assembly_plan(members);
    let level = match plan.level {
        uraid_format::Level::Raid5 => uraid_core::Level::Raid5,
        uraid_format::Level::Raid6 => uraid_core::Level::Raid6,
        other => panic!("the test makes RAID5 and RAID6 arrays, not {other:?}"),
    };
    let layout = Layout::from_md(level, plan.layout).expect("md layout");
    let chunk_bytes = u64::from(plan.chunk_sectors) * SECTOR;
    let geometry = Geometry::new(level, layout, plan.raid_disks as usize, chunk_bytes).unwrap();
    let data_offset_sectors = plan.slots[0].as_ref().expect("slot 0").data_offset_sectors;
    let config = RuntimeConfig {
        array: ArrayConfig {
            geometry,
            stripe_size_bytes: 4096,
            stripe_cache_size: 256,
            member_sectors: plan.size_sectors,
        },
        workers: Some(2),
        data_offset_bytes: data_offset_sectors * SECTOR,
        write_intent: None,
        record_failures: false,
        write_back: true,
    };
    let options = FileOptions { ring_entries: 64, ..FileOptions::default() };
    let source = FileSource::new(members.to_vec(), options);
    let rt = Runtime::start(&config, &source).expect("the runtime starts on the new array");
    let contents = write_pattern(&rt, seed);
    rt.shutdown().expect("the runtime shuts down");
    contents
}

/// The RAID5 + bitmap case: the md lifecycle (uraid-md) runs the array, so the superblocks
/// (events, clean state) and the bitmap md reads are the ones uraid keeps up to date.
fn write_through_md_array(members: &[PathBuf], seed: u64) -> Vec<u8> {
    let options = MdOptions { workers: Some(2), ..MdOptions::default() };
    let md = MdArray::assemble(members, &options).expect("uraid-md assembles the new array");
    let contents = write_pattern(md.runtime(), seed);
    md.stop().expect("uraid-md stops the array clean");
    contents
}

fn assembly_plan(members: &[PathBuf]) -> AssemblyPlan {
    let candidates: Vec<Candidate> =
        members.iter().map(|p| uraid_md::members::read_candidate(p)).collect();
    let plan = plan(&candidates, &AssembleOptions::default()).expect("the members assemble");
    assert!(plan.missing_slots().is_empty(), "a new array has every member");
    assert!(plan.is_clean(), "created with --assume-clean");
    plan
}

/// What md reported about an array it made and wrote, expected to hold `sha`.
fn check_md_wrote(results: &Results, shape: &Shape, sha: &str) {
    let n = shape.name;
    let created = result(results, &format!("{n}.created_resync_start"));
    assert_eq!(created, "none", "{n}: md's initial resync did not finish");
    assert_eq!(result(results, &format!("{n}.sha256")), sha, "{n}: md read back other data");
    check_md_consistent(results, n);
    if shape.bitmap {
        assert_eq!(detail(results, n, "Intent Bitmap"), "Internal", "{n}: md made no bitmap");
    }
}

/// `uraid assemble -o` reads `sha` from md's members, healthy and degraded.
fn check_uraid_reads(dir: &Path, shape: &Shape, members: &[PathBuf], size: u64, sha: &str) {
    let n = shape.name;
    let healthy = uraid_assemble(dir, members);
    assert_eq!(healthy.len() as u64, size, "{n}: uraid's array size differs from md's");
    assert_eq!(sha256(&healthy), sha, "{n}: uraid reads other data than md");
    let kept: Vec<PathBuf> = (0..shape.members)
        .filter(|i| !shape.left_out.contains(i))
        .map(|i| members[i].clone())
        .collect();
    let degraded = uraid_assemble(dir, &kept);
    assert_eq!(sha256(&degraded), sha, "{n}: uraid reads other data degraded");
    eprintln!("md -> uraid: {n} sha256 {sha} (md, uraid, uraid with {} members)", kept.len());
}

/// What md reported for a healthy assemble of a uraid array.
fn check_healthy(results: &Results, shape: &Shape, sha: &str, size: u64) {
    let n = shape.name;
    assert_eq!(
        result(results, &format!("{n}.sha256")),
        sha,
        "{n}: md reads other data than uraid wrote"
    );
    assert_eq!(parse_u64(results, &format!("{n}.size_bytes")), size, "{n}: md's array size");
    // A clean array starts with nothing to do; a resync would mean md found it dirty.
    assert_eq!(result(results, &format!("{n}.sync_action_at_start")), "idle", "{n}: md resyncs");
    assert_eq!(result(results, &format!("{n}.resync_start")), "none", "{n}: md sees it dirty");
    check_md_consistent(results, n);
    assert_eq!(detail(results, n, "Raid Level"), format!("raid{}", shape.level));
    assert_eq!(detail(results, n, "Raid Devices"), shape.members.to_string());
    assert_eq!(detail(results, n, "Active Devices"), shape.members.to_string());
    assert_eq!(detail(results, n, "State"), "clean", "{n}: mdadm --detail state");
    if shape.bitmap {
        assert_eq!(detail(results, n, "Intent Bitmap"), "Internal", "{n}: md sees the bitmap");
    }
    eprintln!("uraid -> md: {n} sha256 {sha} (uraid, md), mismatch_cnt 0, state clean");
}

/// What md reported for the assemble with `shape.left_out` missing.
fn check_degraded(results: &Results, shape: &Shape, sha: &str) {
    let n = format!("{}-degraded", shape.name);
    assert_eq!(result(results, &format!("{n}.sha256")), sha, "{n}: md reads other data degraded");
    let active = shape.members - shape.left_out.len();
    assert_eq!(detail(results, &n, "Active Devices"), active.to_string());
    assert!(detail(results, &n, "State").contains("degraded"), "{n}: md should run degraded");
    eprintln!("uraid -> md: {n} sha256 {sha} (md, {active} of {} members)", shape.members);
}

/// `uraid create` of `R5_MISSING` with slot 1 `missing`: the three members given, and a
/// blank disk of the same size for md to rebuild onto.
fn create_with_missing(dir: &Path) -> (Vec<PathBuf>, PathBuf) {
    let mut files = member_files(dir, R5_MISSING.name, R5_MISSING.members);
    let blank = files.remove(1);
    let given = [files[0].to_str(), Some("missing"), files[1].to_str(), files[2].to_str()];
    let given: Vec<&str> = given.into_iter().map(|p| p.expect("a UTF-8 path")).collect();
    let args = ["create", "--level", "5", "--raid-devices", "4", "--chunk", "64K", "--name"];
    uraid(&[&args[..], &[R5_MISSING.name], &given[..]].concat(), &[]);
    (files, blank)
}

/// What md reported for `R5_MISSING`: started clean and degraded, read what uraid wrote,
/// rebuilt the disk added, and then checked the parity right and read the same.
fn check_rebuilt(results: &Results, sha: &str) {
    let n = R5_MISSING.name;
    let degraded = format!("{n}-degraded");
    assert_eq!(result(results, &format!("{n}.sync_action_at_start")), "idle", "{n}: md resyncs");
    assert_eq!(result(results, &format!("{n}.sha256_degraded")), sha, "{n}: md reads other data");
    assert_eq!(detail(results, &degraded, "State"), "clean, degraded", "{n}: mdadm --detail");
    assert_eq!(detail(results, &degraded, "Active Devices"), "3");
    assert_eq!(result(results, &format!("{n}.rebuilt_action")), "recover", "{n}: no recovery");
    check_md_consistent(results, n);
    assert_eq!(result(results, &format!("{n}.sha256")), sha, "{n}: md reads other data rebuilt");
    assert_eq!(detail(results, n, "State"), "clean", "{n}: mdadm --detail after the rebuild");
    assert_eq!(detail(results, n, "Active Devices"), "4");
    eprintln!("uraid -> md: {n} created with a slot missing: read degraded, rebuilt, checked");
}

/// md's own check of the parity of array `name` ran and found nothing to fix.
fn check_md_consistent(results: &Results, name: &str) {
    assert_eq!(
        result(results, &format!("{name}.last_sync_action")),
        "check",
        "{name}: no check ran"
    );
    assert_eq!(
        result(results, &format!("{name}.mismatch_cnt")),
        "0",
        "{name}: md's check mismatches"
    );
}

/// `RESULT` lines by key, and `mdadm --detail` fields as `<name>.detail.<field>`.
type Results = mdvm::Results;

/// Runs `job` in the VM with `disks` attached in order; returns what it reported.
fn run_vm(scripts: &Path, job: &str, disks: &[PathBuf]) -> Results {
    let job_path = disks[0].with_file_name("job.sh");
    std::fs::write(&job_path, job).expect("writing the job script");
    let mut cmd = Command::new(scripts.join("run"));
    cmd.args(["--timeout", &VM_TIMEOUT_S.to_string()]).arg(&job_path).args(disks);
    let job_output = mdvm::run(&mut cmd, "md");
    let mut results = mdvm::results(&job_output);
    for line in job_output.lines() {
        if let Some((name, rest)) = line.split_once(".detail ")
            && let Some((field, value)) = rest.split_once(" : ")
        {
            results.insert(format!("{name}.detail.{}", field.trim()), value.trim().to_string());
        }
    }
    results
}

fn parse_u64(results: &Results, key: &str) -> u64 {
    let text = result(results, key);
    text.parse().unwrap_or_else(|_| panic!("{key} is not a number: {text:?}"))
}

fn detail<'a>(results: &'a Results, name: &str, field: &str) -> &'a str {
    result(results, &format!("{name}.detail.{field}"))
}

/// The VM's name for the `index`th disk attached.
fn device(index: usize) -> String {
    assert!(index < 26, "virtio disks are vda..vdz");
    format!("/dev/vd{}", char::from(b'a' + index as u8))
}

fn devices(indexes: &[usize]) -> String {
    indexes.iter().map(|i| device(*i)).collect::<Vec<_>>().join(" ")
}

fn left_out(shape: &Shape, first: usize, index: usize) -> bool {
    shape.left_out.contains(&(index - first))
}

/// `n` sparse, zeroed member files.
fn member_files(dir: &Path, name: &str, n: usize) -> Vec<PathBuf> {
    let paths: Vec<PathBuf> = (0..n).map(|i| dir.join(format!("{name}-m{i}.img"))).collect();
    for path in &paths {
        File::create(path).and_then(|f| f.set_len(MEMBER_BYTES)).expect("creating a member");
    }
    paths
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

fn uraid_create(shape: &Shape, members: &[PathBuf]) {
    let (level, n) = (shape.level.to_string(), shape.members.to_string());
    let bitmap = if shape.bitmap { "internal" } else { "none" };
    let args = ["create", "--level", &level, "--raid-devices", &n, "--chunk", "64K"];
    let args = [&args[..], &["--name", shape.name, "--bitmap", bitmap, "--assume-clean"]].concat();
    uraid(&args, members);
}

/// The array's contents as `uraid assemble -o` reads them from `members`.
fn uraid_assemble(dir: &Path, members: &[PathBuf]) -> Vec<u8> {
    let out = dir.join("contents.img");
    uraid(&["assemble", "-o", out.to_str().expect("a UTF-8 path")], members);
    let contents = std::fs::read(&out).expect("reading uraid's output");
    std::fs::remove_file(&out).expect("removing uraid's output");
    contents
}

fn test_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel_interop").join(name);
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

/// splitmix64: the same seed gives the same bytes on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        self.next() % n
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = Rng(seed);
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        bytes.extend_from_slice(&rng.next().to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}
