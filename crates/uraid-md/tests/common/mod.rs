//! Helpers shared by the lifecycle tests: arrays on sparse files, data patterns, temp dirs.

#![allow(dead_code)] // each test file uses its own subset

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use uraid_format::create::{NewArray, NewMember, build_superblock};
use uraid_format::{BitmapSuper, DevRole, Level, Superblock1, Uuid};

pub const MEMBER_BYTES: u64 = 24 << 20;
pub const DATA_OFFSET_SECTORS: u64 = 2048;
pub const CHUNK_SECTORS: u32 = 128;

/// `n` members of a RAID6 (assume-clean, zeroed) in `dir`; with `bitmap_chunk_bytes`, an
/// internal write-intent bitmap of that chunk size.
pub fn make_array(dir: &Path, n: usize, bitmap_chunk_bytes: Option<u32>) -> Vec<PathBuf> {
    make_array_at(dir, Level::Raid6, n, bitmap_chunk_bytes)
}

/// `make_array` at any `level` (md's left-symmetric layout), creating `dir` if need be.
pub fn make_array_at(
    dir: &Path,
    level: Level,
    n: usize,
    bitmap_chunk_bytes: Option<u32>,
) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    let paths: Vec<PathBuf> = (0..n).map(|i| dir.join(format!("m{i}.img"))).collect();
    let size_sectors = (MEMBER_BYTES / 512 - DATA_OFFSET_SECTORS) / u64::from(CHUNK_SECTORS)
        * u64::from(CHUNK_SECTORS);
    let array = NewArray {
        set_uuid: Uuid([7; 16]),
        name: "lifecycle",
        level,
        layout: 2,
        chunk_sectors: CHUNK_SECTORS,
        raid_disks: n as u32,
        size_sectors,
        data_offset_sectors: DATA_OFFSET_SECTORS,
        ctime_seconds: 1,
        utime_seconds: 1,
        events: 1,
        clean: true,
        internal_bitmap: bitmap_chunk_bytes.is_some(),
    };
    let roles: Vec<DevRole> = (0..n as u16).map(DevRole::Active).collect();
    for (i, p) in paths.iter().enumerate() {
        let f = std::fs::File::create(p).unwrap();
        f.set_len(MEMBER_BYTES).unwrap();
        let member = NewMember {
            dev_number: i as u32,
            device_uuid: Uuid([i as u8 + 1; 16]),
            device_sectors: MEMBER_BYTES / 512,
            dev_roles: &roles,
        };
        let sb = build_superblock(&array, &member).unwrap();
        f.write_all_at(&sb.encode(), 4096).unwrap();
        if let Some(chunk) = bitmap_chunk_bytes {
            let bitmap = BitmapSuper::new_internal(array.set_uuid, size_sectors, chunk);
            let at = 4096 + u64::try_from(sb.bitmap_offset_sectors).unwrap() * 512;
            f.write_all_at(&bitmap.encode(), at).unwrap();
        }
    }
    paths
}

pub fn superblock(path: &Path) -> Superblock1 {
    let bytes = std::fs::read(path).unwrap();
    Superblock1::decode(&bytes[4096..8192]).unwrap()
}

pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

pub fn fill(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    (0..len).map(|_| r.next() as u8).collect()
}

pub fn wait_for(mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..500 {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

pub struct TempDir(PathBuf);
impl TempDir {
    pub fn path(&self) -> &Path {
        &self.0
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
pub fn tempdir(tag: &str) -> TempDir {
    let p = std::env::temp_dir().join(format!("uraid-md-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&p).unwrap();
    TempDir(p)
}

/// Names the first differing 4 KiB block and how many differ, instead of dumping both.
pub fn assert_same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len());
    let bad: Vec<usize> = (0..got.len() / 4096)
        .filter(|b| got[b * 4096..(b + 1) * 4096] != want[b * 4096..(b + 1) * 4096])
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: {} blocks of 4 KiB differ, first at byte {}",
        bad.len(),
        bad[0] * 4096
    );
}

/// mdadm, when installed (CI installs it), reads the rebuilt member as md would.
pub fn examine_with_mdadm(member: &Path) {
    let Ok(out) = std::process::Command::new("mdadm").arg("--examine").arg(member).output() else {
        eprintln!("skipping mdadm --examine: mdadm is not installed");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "mdadm --examine failed: {text}");
    for want in [
        "Raid Level : raid6",
        "Raid Devices : 6",
        "State : clean",
        "Device Role : Active device 2",
        "Array State : AAAAAA",
    ] {
        assert!(text.contains(want), "mdadm --examine lacks {want:?}:\n{text}");
    }
}

pub const SECOND: Duration = Duration::from_secs(1);

/// Fails members `a` and `b` of `md` (as the engine does), waits for the monitor to mark them
/// faulty, and checks the whole array still reads `model`: every other member holds right
/// blocks (a RAID6 has no redundancy left to hide a wrong one).
pub fn reads_with_two_failed(md: &uraid_md::MdArray, a: usize, b: usize, model: &[u8], what: &str) {
    let rt = md.runtime();
    rt.fail_member(a);
    rt.fail_member(b);
    assert!(wait_for(|| md.status().members.iter().filter(|m| m.state == "faulty").count() == 2));
    assert_same(&rt.read_at(0, model.len()).unwrap(), model, what);
}

/// `len` bytes of the file at `path` from byte `at`.
pub fn read_member(path: &Path, at: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    std::fs::File::open(path).unwrap().read_exact_at(&mut b, at).unwrap();
    b
}

pub fn write_member(path: &Path, at: u64, data: &[u8]) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(data, at).unwrap();
}

/// Copies of the files at `from` in `dir` (a crash image, when the array is running).
pub fn copy_all(from: &[PathBuf], dir: &Path) -> Vec<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    from.iter()
        .map(|p| {
            let to = dir.join(p.file_name().unwrap());
            std::fs::copy(p, &to).unwrap();
            to
        })
        .collect()
}

/// Marks the member at `path` as being rebuilt (md's recovery offset in its superblock), in
/// sync below member sector `at`: a crash image taken mid-recovery.
pub fn mark_recovering(path: &Path, at: u64) {
    let mut sb = superblock(path);
    sb.feature_map |= uraid_format::feature::RECOVERY_OFFSET;
    sb.recovery_offset_sectors = at;
    sb.seal();
    write_member(path, 4096, &sb.encode());
}
