//! `uraid create`, checked by mdadm and by `uraid assemble`.
//!
//! Goal: what create writes is an md v1.2 array that mdadm reads as asked for, and that
//! uraid assembles back. Method: create on sparse files made like `truncate -s` makes them;
//! run `mdadm --examine` on each member (skipped, with the reason printed, without mdadm);
//! then assemble with `-o` and compare the contents (all zeros) whole and degraded.

mod md_common;

use md_common::{scratch, text, uraid};
use std::path::{Path, PathBuf};
use std::process::Command;

const MEMBER_BYTES: u64 = 16 << 20;

fn members(case: &str, count: usize) -> Vec<PathBuf> {
    let dir = scratch(&format!("create-{case}"));
    (0..count)
        .map(|i| {
            let path = dir.join(format!("m{i}.img"));
            let file = std::fs::File::create(&path).unwrap();
            file.set_len(MEMBER_BYTES).unwrap();
            path
        })
        .collect()
}

fn create(extra: &[&str], members: &[PathBuf]) {
    let mut args: Vec<PathBuf> = ["create"].iter().chain(extra).map(PathBuf::from).collect();
    args.extend(members.iter().cloned());
    let output = uraid(&args);
    assert!(output.status.success(), "create {extra:?}: {}", text(&output.stderr));
}

fn mdadm() -> Option<PathBuf> {
    ["/sbin/mdadm", "/usr/sbin/mdadm", "/usr/bin/mdadm"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
}

fn field(report: &str, key: &str) -> String {
    report
        .lines()
        .find_map(|line| line.split_once(" : ").filter(|(k, _)| k.trim() == key))
        .map_or_else(|| panic!("mdadm did not print {key:?}:\n{report}"), |(_, v)| v.trim().into())
}

fn check_with_mdadm(mdadm: &Path, members: &[PathBuf], expect: &[(&str, &str)]) {
    for (index, member) in members.iter().enumerate() {
        let output = Command::new(mdadm).arg("--examine").arg(member).output().unwrap();
        let report = text(&output.stdout);
        assert!(output.status.success(), "mdadm --examine: {report}{}", text(&output.stderr));
        for (key, value) in expect {
            assert!(field(&report, key).starts_with(value), "{key}: {report}");
        }
        assert_eq!(field(&report, "Device Role"), format!("Active device {index}"));
        assert!(field(&report, "Checksum").ends_with("- correct"), "{report}");
    }
}

#[test]
fn mdadm_examines_what_create_wrote() {
    let Some(mdadm) = mdadm() else {
        println!("skipped: mdadm is not installed (looked in /sbin, /usr/sbin, /usr/bin)");
        return;
    };
    let raid6 = members("mdadm-r6", 5);
    create(&["-l", "6", "-n", "5", "-c", "64K", "-N", "r6t", "-b", "internal"], &raid6);
    // 16 MiB members, 1 MiB data offset: 15 MiB per member on 3 data members, 46080 KiB.
    let expect = [
        ("Raid Level", "raid6"),
        ("Layout", "left-symmetric"),
        ("Chunk Size", "64K"),
        ("Raid Devices", "5"),
        ("Name", "r6t"),
        ("State", "active"),
        ("Internal Bitmap", "8 sectors from superblock"),
        ("Array Size", "46080 KiB"),
    ];
    check_with_mdadm(&mdadm, &raid6, &expect);
    let raid5 = members("mdadm-r5", 4);
    create(&["-l", "5", "-n", "4", "-p", "parity-first", "-c", "128K", "--assume-clean"], &raid5);
    let expect = [
        ("Raid Level", "raid5"),
        ("Layout", "parity-first"),
        ("Chunk Size", "128K"),
        ("Raid Devices", "4"),
        ("State", "clean"),
        ("Array Size", "46080 KiB"),
    ];
    check_with_mdadm(&mdadm, &raid5, &expect);
}

fn assemble_zeros(members: &[PathBuf], extra: &[&str]) -> Result<u64, String> {
    let out = members[0].with_file_name("array.out");
    let mut args: Vec<PathBuf> = vec!["assemble".into(), "-o".into(), out.clone()];
    args.extend(extra.iter().map(PathBuf::from));
    args.extend(members.iter().cloned());
    let output = uraid(&args);
    if !output.status.success() {
        return Err(text(&output.stderr));
    }
    let bytes = std::fs::read(&out).unwrap();
    assert!(bytes.iter().all(|b| *b == 0), "an all-zero array reads back zeros");
    // Written sparse: its zeros are holes of the output file.
    let allocated = std::os::unix::fs::MetadataExt::blocks(&std::fs::metadata(&out).unwrap());
    assert!(allocated * 512 < 1 << 20, "{} of {} bytes allocated", allocated * 512, bytes.len());
    Ok(bytes.len() as u64)
}

#[test]
fn created_arrays_assemble_whole_and_degraded() {
    // Zero members with --assume-clean: parity of zeros is zeros, so degraded reads are zeros.
    let raid5 = members("roundtrip-r5", 4);
    create(&["-l", "5", "-n", "4", "-c", "64K", "--assume-clean"], &raid5);
    // mdadm's data offset for 16 MiB members is 1 MiB: 15 MiB per member, 3 data members.
    let array_bytes = 3 * (15 << 20);
    assert_eq!(assemble_zeros(&raid5, &[]), Ok(array_bytes));
    assert_eq!(assemble_zeros(&raid5[1..], &[]), Ok(array_bytes));
    let raid6 = members("roundtrip-r6", 6);
    create(&["-l", "6", "-n", "6", "-c", "32K", "-b", "internal", "--assume-clean"], &raid6);
    assert_eq!(assemble_zeros(&raid6[..4], &[]), Ok(4 * (15 << 20)));
    // Without --assume-clean the array needs a resync: whole it assembles, degraded it is
    // md's "cannot start dirty degraded array" unless forced.
    let dirty = members("roundtrip-dirty", 4);
    create(&["-l", "4", "-n", "4", "-c", "64K"], &dirty);
    assert_eq!(assemble_zeros(&dirty, &[]), Ok(array_bytes));
    let err = assemble_zeros(&dirty[..3], &[]).unwrap_err();
    assert!(err.contains("cannot start dirty degraded array"), "{err}");
    assert!(err.contains("slots [3]"), "{err}");
    assert_eq!(assemble_zeros(&dirty[..3], &["--force"]), Ok(array_bytes));
}

#[test]
fn create_refuses_before_writing_anything() {
    let raid5 = members("refuse", 4);
    let run = |extra: &[&str], members: &[PathBuf]| {
        let mut args: Vec<PathBuf> = ["create"].iter().chain(extra).map(PathBuf::from).collect();
        args.extend(members.iter().cloned());
        let output = uraid(&args);
        assert!(!output.status.success(), "create {extra:?} should fail");
        text(&output.stderr)
    };
    let err = run(&["-l", "5", "-n", "5"], &raid5);
    assert!(err.contains("--raid-devices 5 but 4 members given"), "{err}");
    let err = run(&["-l", "6", "-n", "4", "-c", "64K", "-z", "1T"], &raid5);
    assert!(err.contains("exceeds"), "{err}");
    let err = run(&["-l", "5", "-n", "4", "-N", &"n".repeat(32)], &raid5);
    assert!(err.contains("--name: 32 bytes, at most 31"), "{err}");
    // A data offset over the superblock (the "built superblock does not validate" once, and
    // 5K was taken: the 4 KiB superblock area create writes covered the data's first 3 KiB), or
    // not 4 KiB aligned.
    for offset in ["0", "4K", "5K"] {
        let err = run(&["-l", "5", "-n", "4", "--data-offset", offset], &raid5);
        assert!(err.contains("would overlap the md superblock") && err.contains("8K"), "{err}");
    }
    let err = run(&["-l", "5", "-n", "4", "--data-offset", "9K"], &raid5);
    assert!(err.contains("not a multiple of 4K"), "{err}");
    // One file as two members, by its name twice or by a link to it.
    let twice = [raid5[0].clone(), raid5[1].clone(), raid5[1].clone(), raid5[3].clone()];
    let err = run(&["-l", "5", "-n", "4"], &twice);
    assert!(err.contains("m1.img is given twice"), "{err}");
    let link = raid5[0].with_file_name("link-to-m2");
    let _ = std::fs::remove_file(&link); // left by an earlier run
    std::os::unix::fs::symlink(&raid5[2], &link).unwrap();
    let err =
        run(&["-l", "5", "-n", "4"], &[raid5[0].clone(), raid5[1].clone(), raid5[2].clone(), link]);
    assert!(err.contains("m2.img and") && err.contains("are the same file"), "{err}");
    for member in &raid5 {
        let bytes = std::fs::read(member).unwrap();
        assert!(bytes.iter().all(|b| *b == 0), "a refused create wrote to {}", member.display());
    }
    create(&["-l", "5", "-n", "4", "-c", "64K"], &raid5);
    let err = run(&["-l", "5", "-n", "4", "-c", "64K"], &raid5);
    assert!(err.contains("m0.img already holds an md superblock"), "{err}");
    create(&["-l", "5", "-n", "4", "-c", "64K", "--force"], &raid5);
}

#[test]
fn create_json_reports_the_array_and_bitmap_chunk_is_checked() {
    let m = members("json", 4);
    let mut args: Vec<PathBuf> = ["create", "--json", "-l", "5", "-n", "4", "--chunk", "64K"]
        .iter()
        .chain(&["--bitmap", "internal", "--bitmap-chunk", "1M", "--assume-clean"])
        .map(PathBuf::from)
        .collect();
    args.extend(m.iter().cloned());
    let output = uraid(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["level"], 5);
    assert_eq!(report["layout"], "left-symmetric");
    assert_eq!(report["chunk_bytes"], 65536);
    assert_eq!(report["bitmap_chunk_bytes"], 1 << 20);
    assert_eq!(report["clean"], true);
    // Below 4K, not a power of two, or bits that do not fit mdadm's bitmap room (4 KiB of
    // room on these members: 30720 bits, and 256 MiB members at 4K need 65536): refused.
    for (chunk, member_mib) in [("2K", 16), ("3M", 16), ("4K", 256)] {
        let m = members(&format!("json-{chunk}"), 4);
        for path in &m {
            std::fs::File::options()
                .write(true)
                .open(path)
                .unwrap()
                .set_len(member_mib << 20)
                .unwrap();
        }
        let mut args: Vec<PathBuf> = ["create", "-l", "5", "-n", "4", "--bitmap", "internal"]
            .iter()
            .chain(&["--bitmap-chunk", chunk])
            .map(PathBuf::from)
            .collect();
        args.extend(m.iter().cloned());
        let output = uraid(&args);
        assert!(!output.status.success(), "--bitmap-chunk {chunk} accepted");
        assert!(text(&output.stderr).contains("--bitmap-chunk"), "{}", text(&output.stderr));
    }
}

/// A member being rebuilt: `uraid examine` prints its recovery offset where mdadm does, with
/// the same value.
#[test]
fn examine_prints_a_rebuilding_member_s_recovery_offset_as_mdadm_does() {
    let raid5 = members("recovery-offset", 3);
    create(&["-l", "5", "-n", "3", "-c", "64K", "--assume-clean"], &raid5);
    let mut area = vec![0u8; 4096];
    std::os::unix::fs::FileExt::read_exact_at(
        &std::fs::File::open(&raid5[2]).unwrap(),
        &mut area,
        4096,
    )
    .unwrap();
    let mut sb = uraid_format::Superblock1::decode(&area).unwrap();
    sb.feature_map |= uraid_format::feature::RECOVERY_OFFSET;
    sb.recovery_offset_sectors = 6144;
    sb.seal();
    let file = std::fs::OpenOptions::new().write(true).open(&raid5[2]).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &sb.encode(), 4096).unwrap();
    let ours = text(&uraid(&["examine".into(), raid5[2].clone()]).stdout);
    let lines: Vec<&str> = ours.lines().map(str::trim).collect();
    let at = lines.iter().position(|l| l.starts_with("Recovery Offset")).expect(&ours);
    assert_eq!(lines[at], "Recovery Offset : 6144 sectors", "{ours}");
    assert!(lines[at - 1].starts_with("Super Offset"), "{ours}");
    assert!(lines[at + 1].starts_with("State"), "{ours}");
    if let Some(mdadm) = mdadm() {
        let output = Command::new(mdadm).arg("--examine").arg(&raid5[2]).output().unwrap();
        assert_eq!(field(&text(&output.stdout), "Recovery Offset"), "6144 sectors");
    }
}

/// Members of different sizes: the component is the smallest's, and create says how much of
/// each larger one goes unused (mdadm asks before going on past 1%).
#[test]
fn create_says_what_larger_members_leave_unused() {
    let mut three = members("sizes", 3);
    let bigger = three[2].with_file_name("bigger.img");
    std::fs::File::create(&bigger).unwrap().set_len(MEMBER_BYTES + (8 << 20)).unwrap();
    three[2] = bigger.clone();
    let mut args: Vec<PathBuf> =
        ["create", "-l", "5", "-n", "3", "--assume-clean"].iter().map(PathBuf::from).collect();
    args.extend(three.iter().cloned());
    let output = uraid(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let said = text(&output.stderr);
    let warning = format!("{} exceeds the component size by 8 MiB, unused", bigger.display());
    assert!(said.contains(&warning), "{said}");
    assert_eq!(said.matches("exceeds the component size").count(), 1, "{said}");
}

/// `examine --badblocks` prints a member's bad block log as `mdadm --examine-badblocks`
/// does, line for line, and beneath each entry the array bytes it holds (or the parity).
#[test]
fn examine_badblocks_lists_what_mdadm_lists_and_where_in_the_array() {
    use std::os::unix::fs::FileExt;
    let raid5 = members("badblocks", 4);
    create(&["-l", "5", "-n", "4", "-c", "64K", "--assume-clean"], &raid5);
    let read_sb = |path: &Path| {
        let mut area = vec![0u8; 4096];
        std::fs::File::open(path).unwrap().read_exact_at(&mut area, 4096).unwrap();
        uraid_format::Superblock1::decode(&area).unwrap()
    };
    let before = text(&uraid(&["examine".into(), "--badblocks".into(), raid5[1].clone()]).stdout);
    assert_eq!(before, format!("Bad-blocks list is empty in {}\n", raid5[1].display()));
    // Member 1 lists 16 sectors across its first two chunks, and 8 of its third (P).
    let mut sb = read_sb(&raid5[1]);
    let data = sb.data_offset_sectors;
    let ranges = [
        uraid_format::BadRange { start_sector: data + 120, sectors: 16 },
        uraid_format::BadRange { start_sector: data + 256, sectors: 8 },
    ];
    let log = uraid_format::encode_bad_blocks(&ranges, sb.bblog_shift, 4096).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&raid5[1]).unwrap();
    let at = sb.super_offset_sectors.checked_add_signed(i64::from(sb.bblog_offset_sectors));
    let at = at.unwrap() * 512;
    file.write_all_at(&log, at).unwrap();
    sb.feature_map |= uraid_format::feature::BAD_BLOCKS;
    sb.seal();
    file.write_all_at(&sb.encode(), 4096).unwrap();
    let out = uraid(&["examine".into(), "--badblocks".into(), raid5[1].clone()]);
    let ours = text(&out.stdout);
    assert!(out.status.success(), "{ours}{}", text(&out.stderr));
    // Left-symmetric RAID5 of 4, 64 KiB chunks: member 1 holds array chunk 1 in stripe 0,
    // chunk 5 in stripe 1 and P in stripe 2.
    let want = format!(
        "Bad-blocks on {}:\n{:>20} for 16 sectors\n{:24}data: array bytes {}-{}\n{:24}data: \
         array bytes {}-{}\n{:>20} for 8 sectors\n{:24}P of stripe 2\n",
        raid5[1].display(),
        data + 120,
        "",
        (128 + 120) * 512,
        256 * 512,
        "",
        5 * 128 * 512,
        (5 * 128 + 8) * 512,
        data + 256,
        "",
    );
    assert_eq!(ours, want);
    if let Some(mdadm) = mdadm() {
        let output = Command::new(mdadm).arg("--examine-badblocks").arg(&raid5[1]).output();
        let theirs = text(&output.unwrap().stdout);
        let ours_mdadm: Vec<&str> =
            ours.lines().filter(|l| !l.starts_with(&" ".repeat(24))).collect();
        let theirs: Vec<&str> = theirs.lines().collect();
        assert_eq!(ours_mdadm, theirs, "mdadm's lines");
    }
}

/// mdadm's `missing`: an array created with empty slots (migrating a disk's data into a new
/// array, say). As mdadm: as many as the level survives, marked clean (md cannot resync a
/// degraded array; rebuilds make the parity), the slots empty in every member's table; RAID6
/// with one missing gets one present member as a spare instead, rebuilt at the first start,
/// so that it does not start dirty and degraded. Before the fifth session of 2026-12-06
/// `missing` was taken for a file name.
#[test]
fn create_with_missing_members_as_mdadm_does() {
    let raid5 = members("missing-r5", 4);
    let mut args: Vec<PathBuf> =
        ["create", "-l", "5", "-n", "4", "-c", "64K"].iter().map(PathBuf::from).collect();
    args.extend([raid5[0].clone(), "missing".into(), raid5[2].clone(), raid5[3].clone()]);
    let output = uraid(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("degraded: missing members are rebuilt"));
    let present = [raid5[0].clone(), raid5[2].clone(), raid5[3].clone()];
    assert_eq!(assemble_zeros(&present, &[]), Ok(3 * (15 << 20)), "clean: no --force");
    if let Some(mdadm) = mdadm() {
        let out = Command::new(&mdadm).arg("--examine").arg(&raid5[2]).output().unwrap();
        let report = text(&out.stdout);
        assert_eq!(field(&report, "State"), "clean", "{report}");
        assert!(field(&report, "Array State").starts_with("A.AA "), "{report}");
        assert_eq!(field(&report, "Device Role"), "Active device 2");
    }

    let raid6 = members("missing-r6", 5);
    let mut args: Vec<PathBuf> =
        ["create", "-l", "6", "-n", "5", "-c", "64K"].iter().map(PathBuf::from).collect();
    args.extend(
        raid6.iter().enumerate().map(
            |(i, p)| {
                if i == 2 { PathBuf::from("missing") } else { p.clone() }
            },
        ),
    );
    let output = uraid(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("m4.img is a spare"), "{}", text(&output.stderr));
    if let Some(mdadm) = mdadm() {
        let out = Command::new(&mdadm).arg("--examine").arg(&raid6[4]).output().unwrap();
        let report = text(&out.stdout);
        assert_eq!(field(&report, "Device Role"), "spare", "{report}");
        assert!(field(&report, "Array State").starts_with("AA.A. "), "{report}");
    }
    let plan = uraid(&[
        "assemble".into(),
        raid6[0].clone(),
        raid6[1].clone(),
        raid6[3].clone(),
        raid6[4].clone(),
    ]);
    assert!(plan.status.success(), "{}", text(&plan.stderr));

    // More missing than the level survives, or all of them: refused, nothing written.
    let more = members("missing-more", 3);
    let before: Vec<Vec<u8>> = more.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let args: Vec<PathBuf> = ["create", "-l", "5", "-n", "3", "-c", "64K"]
        .iter()
        .map(PathBuf::from)
        .chain([more[0].clone(), "missing".into(), "missing".into()])
        .collect();
    let output = uraid(&args);
    assert!(!output.status.success());
    assert!(text(&output.stderr).contains("2 members missing, but the level survives 1"));
    assert!(more.iter().map(|p| std::fs::read(p).unwrap()).collect::<Vec<_>>() == before);
}

/// A member that is no file or block device is refused by what it is: `/dev/null` was "the
/// smallest member has 0 sectors", a pipe hung `examine` (and an array's `add`, which opens the
/// same way) until a writer came. Each answer now comes at once, naming the path.
#[test]
fn members_that_are_no_file_or_device_are_refused_by_what_they_are() {
    let paths = members("kinds", 3);
    let dir = paths[0].parent().unwrap();
    let fifo = dir.join("fifo");
    let directory = dir.join("dir");
    // Left by an earlier run of the test in the same scratch directory.
    let _ = std::fs::remove_file(&fifo);
    let _ = std::fs::remove_dir(&directory);
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    std::fs::create_dir(&directory).unwrap();
    let cases = [
        (PathBuf::from("/dev/null"), "a character device"),
        (fifo.clone(), "a pipe"),
        (directory, "a directory"),
    ];
    for (odd, kind) in &cases {
        let mut args: Vec<PathBuf> = ["create", "-l", "5", "-n", "3"].map(PathBuf::from).into();
        args.extend([paths[0].clone(), odd.clone(), paths[2].clone()]);
        let output = uraid(&args);
        let err = text(&output.stderr);
        assert!(!output.status.success());
        assert!(err.contains(&odd.display().to_string()) && err.contains(kind), "{err}");
    }
    // examine opens read-only, which on a pipe waits for a writer: a watchdog ends the test
    // rather than hanging it.
    let mut child = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .arg("examine")
        .arg(&fifo)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("examine of a pipe hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    assert!(text(&output.stderr).contains("a pipe: a member is a block device"), "{output:?}");
}
