//! Real NBD clients against the server over a uraid array (RAID5 / RAID6 on memory members).
//! Goal: libnbd's tools, qemu and fio interoperate: sizes and block sizes as advertised, data
//! copied in comes back out byte for byte, patterns and fio's crc32c verification hold.
//! Each test skips with a printed reason when its tool is missing, and fails instead when the
//! environment says CI=true (apt: libnbd-bin qemu-utils fio).

mod common;

use common::*;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use uraid_core::Level;
use uraid_nbd::{ListenAddr, Server, ServerConfig};

/// The tool's path, or None after printing why the test skips (a panic under CI=true).
fn tool(name: &str, package: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file());
    if found.is_none() {
        let why = format!("{name} is not installed (apt-get install {package})");
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true: {why}");
        eprintln!("skipped: {why}");
    }
    found
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?} failed ({}):\n{stdout}\n{stderr}", out.status);
    stdout
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("uraid-nbd-{}-{name}", std::process::id()))
}

/// A RAID5 of 4 x 4 MiB members (12 MiB, chunk 64 KiB) served on TCP: the array, the
/// listener (serving while it lives) and the NBD URI.
fn raid5_uri() -> (Arc<uraid_runtime::Runtime>, uraid_nbd::ServerHandle, String) {
    let rt = Arc::new(runtime(Level::Raid5, 4, 64 * KIB, 4 * MIB));
    let (_server, handle, addr) = serve(rt.clone(), 3 * 64 * KIB as u32);
    (rt, handle, format!("nbd://{addr}/uraid"))
}

#[test]
fn nbdinfo_reads_size_and_block_sizes() {
    let Some(nbdinfo) = tool("nbdinfo", "libnbd-bin") else { return };
    let (rt, _h, uri) = raid5_uri();
    let json = run(Command::new(nbdinfo).arg("--json").arg(&uri));
    let field = |name: &str| {
        let at = json.find(&format!("\"{name}\"")).unwrap_or_else(|| panic!("{name} in {json}"));
        let rest = json[at..].split(':').nth(1).unwrap();
        rest.trim_start().split(|c: char| !c.is_ascii_digit()).next().unwrap().to_owned()
    };
    assert_eq!(field("export-size"), rt.size_bytes().to_string());
    assert_eq!(field("block_size_minimum"), "512");
    assert_eq!(field("block_size_preferred"), (128 * KIB).to_string(), "192 KiB stripe");
    assert_eq!(field("block_size_maximum"), (32 * MIB).to_string());
    assert!(json.contains("\"can_multi_conn\": true"), "{json}");
}

#[test]
fn nbdcopy_in_and_out_gives_the_same_bytes() {
    let Some(nbdcopy) = tool("nbdcopy", "libnbd-bin") else { return };
    let (rt, _h, uri) = raid5_uri();
    let (input, output) = (temp("copy-in"), temp("copy-out"));
    let data = pattern(42, rt.size_bytes() as usize);
    std::fs::write(&input, &data).unwrap();
    run(Command::new(&nbdcopy).arg(&input).arg(&uri));
    assert_same(&rt.read_at(0, data.len()).unwrap(), &data, "the array after nbdcopy in");
    run(Command::new(&nbdcopy).arg(&uri).arg(&output));
    assert_same(&std::fs::read(&output).unwrap(), &data, "nbdcopy out");
    let _ = (std::fs::remove_file(input), std::fs::remove_file(output));
}

#[test]
fn qemu_img_compare_and_qemu_io_patterns() {
    let Some(qemu_img) = tool("qemu-img", "qemu-utils") else { return };
    let Some(qemu_io) = tool("qemu-io", "qemu-utils") else { return };
    let rt = Arc::new(runtime(Level::Raid6, 6, 64 * KIB, 2 * MIB));
    let (_server, _h, addr) = serve(rt.clone(), 64 * KIB as u32);
    let uri = format!("nbd://{addr}/uraid");
    let image = temp("qemu.img");
    let data = pattern(7, rt.size_bytes() as usize);
    std::fs::write(&image, &data).unwrap();
    rt.write_at(0, &data).unwrap();
    run(Command::new(&qemu_img).args(["compare", "-f", "raw", "-F", "raw"]).arg(&image).arg(&uri));
    let io = |commands: &[&str]| {
        let mut cmd = Command::new(&qemu_io);
        cmd.args(["-f", "raw"]);
        for c in commands {
            cmd.args(["-c", c]);
        }
        run(cmd.arg(&uri))
    };
    io(&["write -P 0xa5 64k 1M", "write -z 2M 256k", "flush"]);
    let out = io(&["read -P 0xa5 64k 1M", "read -P 0 2M 256k"]);
    assert!(!out.contains("Pattern verification failed"), "{out}");
    let mut want = data.clone();
    want[64 * KIB..64 * KIB + MIB].fill(0xa5);
    want[2 * MIB..2 * MIB + 256 * KIB].fill(0);
    assert_same(&rt.read_at(0, want.len()).unwrap(), &want, "the array after qemu-io");
    // And a mismatch must be found: the check above is not vacuous.
    let differs = Command::new(&qemu_img)
        .args(["compare", "-f", "raw", "-F", "raw"])
        .arg(&image)
        .arg(&uri)
        .status()
        .unwrap();
    assert_eq!(differs.code(), Some(1), "qemu-img compare sees the qemu-io writes");
    let _ = std::fs::remove_file(image);
}

/// Runs fio's verified random writes at `uri`; false when fio is missing (skipped).
fn fio(uri: &str, name: &str) -> bool {
    let Some(fio) = tool("fio", "fio") else { return false };
    // No verify state files: fio would leave them in the crate's directory.
    let out = run(Command::new(fio).current_dir(std::env::temp_dir()).args([
        &format!("--name={name}"),
        "--ioengine=nbd",
        &format!("--uri={uri}"),
        "--rw=randwrite",
        "--bs=4k",
        "--size=8M",
        "--iodepth=32",
        "--verify=crc32c",
        "--do_verify=1",
        "--verify_fatal=1",
        "--randrepeat=0",
        "--verify_state_save=0",
    ]));
    // The verify phase is fio's read-back of all 8 MiB, each block checked against its crc32c.
    let read = out.lines().find(|l| l.trim_start().starts_with("read:")).unwrap_or_default();
    assert!(read.contains("(8192KiB/"), "fio verified every block it wrote:\n{out}");
    assert!(out.contains("err= 0"), "{out}");
    true
}

#[test]
fn fio_random_writes_verify_over_tcp_on_raid5() {
    let (_rt, _h, uri) = raid5_uri();
    fio(&uri, "raid5-tcp");
}

#[test]
fn fio_random_writes_verify_over_unix_on_raid6() {
    let rt = Arc::new(runtime(Level::Raid6, 6, 64 * KIB, 4 * MIB));
    let server = Server::new(rt, ServerConfig::default()).unwrap();
    let handle = server.serve_unix(temp("fio.sock")).unwrap();
    let ListenAddr::Unix(path) = handle.local_addr().clone() else { unreachable!() };
    if !fio(&format!("nbd+unix:///uraid?socket={}", path.display()), "raid6-unix") {
        return;
    }
    assert!(server.stats().writes >= 2048, "8 MiB of 4 KiB writes went through the server");
}
