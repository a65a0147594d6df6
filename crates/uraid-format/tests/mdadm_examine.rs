//! Goal: mdadm accepts the superblocks `create::build_superblock` builds.
//!
//! Method: build the 4 superblocks of a RAID5 left-symmetric array with 64 KiB chunks,
//! write each 4 KiB into a sparse 64 MiB temp file (v1.2: at byte 4096), run
//! `mdadm --examine` on every file and check what it reports, including "Checksum : ... -
//! correct". A second run adds an internal bitmap. Skipped, with the reason printed, when
//! mdadm is not installed. Only regular files are touched; no md device is created.

use std::fs::{self, File};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use uraid_format::create::{
    NewArray, NewMember, build_bitmap, build_superblock, default_data_offset_sectors,
};
use uraid_format::{DevRole, Level, Uuid, WriteIntentBitmap};

const MEMBER_BYTES: u64 = 64 << 20;
const MEMBERS: u32 = 4;
const CHUNK_SECTORS: u32 = 128;

fn mdadm() -> Option<PathBuf> {
    ["/sbin/mdadm", "/usr/sbin/mdadm", "/usr/bin/mdadm"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
}

fn new_array(name: &str, internal_bitmap: bool) -> NewArray<'_> {
    let device_sectors = MEMBER_BYTES / 512;
    let data_offset_sectors = default_data_offset_sectors(device_sectors, CHUNK_SECTORS);
    let chunk = u64::from(CHUNK_SECTORS);
    NewArray {
        set_uuid: "0123abcd:4567ef01:89abcdef:02468ace".parse().unwrap(),
        name,
        level: Level::Raid5,
        layout: 2, // left-symmetric
        chunk_sectors: CHUNK_SECTORS,
        raid_disks: MEMBERS,
        size_sectors: (device_sectors - data_offset_sectors) / chunk * chunk,
        data_offset_sectors,
        ctime_seconds: 1_700_000_000,
        utime_seconds: 1_700_000_100,
        events: 1,
        clean: true,
        internal_bitmap,
    }
}

/// Writes member `index` of `array` into a fresh sparse file under `dir`.
fn write_member(dir: &Path, array: &NewArray<'_>, index: u32) -> PathBuf {
    let roles: Vec<DevRole> = (0..MEMBERS as u16).map(DevRole::Active).collect();
    let member = NewMember {
        dev_number: index,
        device_uuid: Uuid([0x10 + index as u8; 16]),
        device_sectors: MEMBER_BYTES / 512,
        dev_roles: &roles,
    };
    let superblock = build_superblock(array, &member).unwrap();
    let path = dir.join(format!("member-{index}.img"));
    let mut file = File::create(&path).unwrap();
    file.set_len(MEMBER_BYTES).unwrap();
    file.seek(SeekFrom::Start(4096)).unwrap();
    file.write_all(&superblock.encode()).unwrap();
    if array.internal_bitmap {
        let bitmap = build_bitmap(array);
        let offset = 4096 + u64::try_from(superblock.bitmap_offset_sectors).unwrap() * 512;
        file.seek(SeekFrom::Start(offset)).unwrap();
        file.write_all(&bitmap.encode()).unwrap();
        file.write_all(WriteIntentBitmap::new_all_dirty(&bitmap).encode()).unwrap();
    }
    path
}

fn examine(mdadm: &Path, path: &Path) -> String {
    let output = Command::new(mdadm).arg("--examine").arg(path).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "mdadm --examine failed: {stdout}{stderr}");
    stdout
}

/// The value mdadm prints after "<key> : ", trimmed.
fn field<'a>(report: &'a str, key: &str) -> &'a str {
    report
        .lines()
        .find_map(|line| line.trim_start().strip_prefix(key)?.trim_start().strip_prefix(':'))
        .map_or_else(|| panic!("mdadm did not print {key:?}:\n{report}"), str::trim)
}

fn run_examine_case(internal_bitmap: bool) {
    let Some(mdadm) = mdadm() else {
        println!("skipped: mdadm is not installed (looked in /sbin, /usr/sbin, /usr/bin)");
        return;
    };
    let dir = std::env::temp_dir()
        .join(format!("uraid-format-examine-{}-{internal_bitmap}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let array = new_array("uraid-test", internal_bitmap);
    for index in 0..MEMBERS {
        let report = examine(&mdadm, &write_member(&dir, &array, index));
        assert_eq!(field(&report, "Raid Level"), "raid5");
        assert_eq!(field(&report, "Layout"), "left-symmetric");
        assert_eq!(field(&report, "Chunk Size"), "64K");
        assert_eq!(field(&report, "Raid Devices"), "4");
        assert_eq!(field(&report, "Name"), "uraid-test");
        assert_eq!(field(&report, "Array UUID"), "0123abcd:4567ef01:89abcdef:02468ace");
        // 3 data members of 129024 sectors: 193536 KiB.
        assert!(field(&report, "Array Size").starts_with("193536 KiB"));
        assert_eq!(field(&report, "Data Offset"), "2048 sectors");
        assert_eq!(field(&report, "Super Offset"), "8 sectors");
        assert_eq!(field(&report, "State"), "clean");
        assert!(field(&report, "Checksum").ends_with("- correct"), "{report}");
        assert_eq!(field(&report, "Device Role"), format!("Active device {index}"));
        assert!(field(&report, "Array State").starts_with("AAAA "));
        if internal_bitmap {
            assert_eq!(field(&report, "Internal Bitmap"), "8 sectors from superblock");
        }
    }
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mdadm_examines_a_built_raid5() {
    run_examine_case(false);
}

#[test]
fn mdadm_examines_a_built_raid5_with_internal_bitmap() {
    run_examine_case(true);
}
