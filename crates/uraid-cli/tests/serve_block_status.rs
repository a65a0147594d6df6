//! Block status through `uraid serve` on sparse member files, with real clients: libnbd's
//! `nbdinfo --map` sees what was written as data and the rest as holes of zeros (healthy,
//! degraded, and after a write of zeros that may leave holes), `nbdcopy` copies the array to
//! a sparse file with the same bytes, and `qemu-img convert` makes a small qcow2 of it that
//! `qemu-img compare` finds identical. Skips without the tools unless CI=true.
//!
//! Before: no metadata context was offered, so clients read a whole array to find its zeros
//! (nbdcopy of an 8 GiB RAID6 of sparse files holding 300 MiB: 1.9 s; now 0.33 s).

mod serve_common;

use serve_common::*;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const MIB: u64 = 1 << 20;

fn tool(name: &str) -> bool {
    let found = Command::new(name).arg("--version").output().is_ok();
    if !found {
        let why = format!("{name} is not installed (apt-get install libnbd-bin qemu-utils)");
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true: {why}");
        eprintln!("skipped: {why}");
    }
    found
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}{}", text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
}

/// `nbdinfo --map`'s extents: (offset, length, type), type 0 data, 2 zero, 3 hole and zero.
fn map(uri: &str) -> Vec<(u64, u64, u32)> {
    run(Command::new("nbdinfo").args(["--map", uri]))
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect()
}

/// The extents of `map` that are data.
fn data(map: &[(u64, u64, u32)]) -> Vec<(u64, u64)> {
    map.iter().filter(|e| e.2 & 2 == 0).map(|e| (e.0, e.1)).collect()
}

fn allocated(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

#[test]
fn clients_see_holes_and_copy_sparse() {
    if !tool("nbdinfo") || !tool("nbdcopy") || !tool("qemu-img") {
        return;
    }
    let dir = tempdir("block-status");
    let members = member_files(&dir, 5, 48);
    let out = Command::new(BIN)
        .args(["create", "-l", "5", "-n", "5", "--chunk", "64K", "--assume-clean", "--name", "b"])
        .args(&members)
        .output()
        .unwrap();
    assert!(out.status.success(), "create: {}", text(&out.stderr));
    let served = Served::start(&dir, "b", &members);
    let uri = format!("nbd+unix:///uraid?socket={}", served.socket.display());
    let size = {
        let c = served.client();
        c.size_bytes()
    };
    let whole = map(&uri);
    if whole != vec![(0, size, 3)] {
        // A file system without SEEK_DATA (or whose members are not sparse): all data.
        eprintln!("block status: the members report no holes here: {whole:?}");
        return;
    }
    // Whole stripes (256 KiB: 4 data chunks of 64 KiB): 4 MiB at 8 MiB, 1 MiB at 30 MiB.
    let mut c = served.client();
    let (a, b) = (vec![0x55; 4 << 20], vec![0x66; 1 << 20]);
    c.write(8 * MIB, &a, false).unwrap();
    c.write(30 * MIB, &b, false).unwrap();
    c.flush().unwrap();
    let written = vec![(8 * MIB, 4 * MIB), (30 * MIB, MIB)];
    let m = map(&uri);
    assert_eq!(data(&m), written, "{m:?}");
    assert!(m.iter().all(|e| e.2 == 0 || e.2 == 3), "the rest is holes of zeros: {m:?}");
    let stats: serde_json::Value =
        serde_json::from_str(&uraid_ok(&dir, &["stats", "b", "--json"])).unwrap();
    assert!(stats["nbd"]["block_status"].as_u64() >= Some(2), "counted: {}", stats["nbd"]);

    let copy = dir.join("copy.img");
    run(Command::new("nbdcopy").arg(&uri).arg(&copy));
    let bytes = std::fs::read(&copy).unwrap();
    assert_eq!(bytes.len() as u64, size);
    assert!(bytes[(8 * MIB) as usize..(12 * MIB) as usize] == a[..], "copied data");
    assert!(bytes[(30 * MIB) as usize..(31 * MIB) as usize] == b[..], "copied data");
    let zeros = bytes.iter().enumerate().filter(|(i, _)| {
        let i = *i as u64;
        !(8 * MIB..12 * MIB).contains(&i) && !(30 * MIB..31 * MIB).contains(&i)
    });
    assert!(zeros.clone().all(|(_, b)| *b == 0), "zeros elsewhere");
    assert!(allocated(&copy) < 16 * MIB, "a sparse copy: {} bytes allocated", allocated(&copy));
    let qcow = dir.join("copy.qcow2");
    run(Command::new("qemu-img").args(["convert", "-O", "qcow2", &uri]).arg(&qcow));
    assert!(allocated(&qcow) < 16 * MIB, "a small qcow2: {} bytes", allocated(&qcow));
    let same = run(Command::new("qemu-img")
        .args(["compare", "-f", "qcow2", "-F", "raw"])
        .arg(&qcow)
        .arg(&uri));
    assert!(same.contains("identical"), "{same}");

    // Degraded: the failed member's chunks come from the others, holes only where all are.
    uraid_ok(&dir, &["fail", "b", &members[2].display().to_string()]);
    assert_eq!(data(&map(&uri)), written, "degraded");
    // A write of zeros that may leave holes (a discard of whole stripes) gives them back.
    run(Command::new("qemu-io").args(["-f", "raw", "-c", "write -z -u 8M 1M", &uri]));
    assert_eq!(data(&map(&uri)), vec![(9 * MIB, 3 * MIB), (30 * MIB, MIB)], "after zeroing");
    drop(c);
    uraid_ok(&dir, &["stop", "b"]);
    assert!(served.wait(Duration::from_secs(30)).success());

    assemble_gives_the_same_sparse(&dir, &members, size);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `assemble -o` of the stopped array (degraded: rebuilt from the others) gives the same
/// contents, written sparse.
fn assemble_gives_the_same_sparse(dir: &Path, members: &[std::path::PathBuf], size: u64) {
    let out = dir.join("assembled.img");
    let mut args = vec!["assemble".to_string(), "-o".into(), out.display().to_string()];
    args.extend(members.iter().map(|m| m.display().to_string()));
    let assembled = uraid(dir, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(assembled.status.success(), "{}", text(&assembled.stderr));
    let got = std::fs::read(&out).unwrap();
    let mut want = vec![0u8; size as usize];
    want[(9 * MIB) as usize..(12 * MIB) as usize].fill(0x55);
    want[(30 * MIB) as usize..(31 * MIB) as usize].fill(0x66);
    assert!(got == want, "the assembled contents");
    assert!(allocated(&out) < 16 * MIB, "written sparse: {} bytes", allocated(&out));
}
