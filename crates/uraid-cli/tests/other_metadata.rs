//! Devices holding RAID metadata uraid does not assemble (md 0.90, 1.0, 1.1, DDF).
//!
//! Goal: such a device is never called blank: `examine` and `assemble` name the format and
//! the member, nothing is written; `create` refuses it without --force (mdadm asks first),
//! and with --force erases the old magic so that no tool finds two arrays on the device,
//! except where an --assume-clean array's data would change (left, and said). Method: one
//! member of each format, written by mdadm and Linux md (tests/data/other-metadata).

mod md_common;

use md_common::{file_sha256, scratch, text, uraid};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// (file, the words uraid names it with, the byte its magic starts at in the image).
const FORMATS: [(&str, &str, u64); 4] = [
    ("md-1.0", "md metadata 1.0", 8 * 1024 * 1024 - 8192),
    ("md-0.90", "md metadata 0.90", 8 * 1024 * 1024 - 65536),
    ("md-1.1", "md metadata 1.1", 0),
    ("ddf", "DDF firmware RAID metadata", 200 * 1024 * 1024 - 512),
];

/// Unpacks `name` into a scratch directory of `case` as `copies` files.
fn members(case: &str, name: &str, copies: usize) -> Vec<PathBuf> {
    let dir = scratch(&format!("other-metadata-{case}-{name}"));
    let packed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/other-metadata")
        .join(format!("{name}.img.zst"));
    let mut decoder =
        ruzstd::decoding::StreamingDecoder::new(std::fs::File::open(packed).unwrap()).unwrap();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut decoder, &mut bytes).unwrap();
    (0..copies)
        .map(|i| {
            // Sparse, as the images are: DDF's is 200 MiB of mostly zeros.
            let path = dir.join(format!("m{i}.img"));
            let file = std::fs::File::create(&path).unwrap();
            file.set_len(bytes.len() as u64).unwrap();
            for (n, block) in bytes.chunks(4096).enumerate() {
                if block.iter().any(|&b| b != 0) {
                    file.write_all_at(block, n as u64 * 4096).unwrap();
                }
            }
            path
        })
        .collect()
}

fn magic_at(path: &Path, at: u64) -> [u8; 4] {
    let mut b = [0u8; 4];
    std::fs::File::open(path).unwrap().read_exact_at(&mut b, at).unwrap();
    b
}

#[test]
fn examine_and_assemble_name_the_format_and_write_nothing() {
    for (name, words, _) in FORMATS {
        let m = members("read", name, 1);
        let before = file_sha256(&m[0]);
        let out = uraid(["examine".as_ref(), m[0].as_os_str()]);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{name}: examine succeeded");
        assert!(stderr.contains(words) && stderr.contains("v1.2 only"), "{name}: {stderr}");

        let target = m[0].with_file_name("out.img");
        let out = uraid(["assemble".as_ref(), "-o".as_ref(), target.as_os_str(), m[0].as_os_str()]);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{name}: assembled");
        assert!(stderr.contains(&m[0].display().to_string()), "{name}: {stderr}");
        assert!(stderr.contains(words), "{name}: {stderr}");
        assert!(!target.exists(), "{name}: wrote an output");
        assert_eq!(file_sha256(&m[0]), before, "{name}: the member changed");
    }
}

#[test]
fn create_over_it_needs_force_and_then_erases_the_old_magic() {
    for (name, words, at) in FORMATS {
        let m = members("create", name, 3);
        let before: Vec<String> = m.iter().map(|p| file_sha256(p)).collect();
        let old = magic_at(&m[0], at);
        let create = |extra: &[&str]| {
            let mut args: Vec<&std::ffi::OsStr> =
                ["create", "-l", "5", "-n", "3", "--chunk", "64K"].map(AsRef::as_ref).to_vec();
            args.extend(extra.iter().map(std::ffi::OsStr::new));
            args.extend(m.iter().map(|p| p.as_os_str()));
            uraid(args)
        };

        let out = create(&[]);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{name}: created without --force");
        assert!(stderr.contains(words) && stderr.contains("--force"), "{name}: {stderr}");
        let after: Vec<String> = m.iter().map(|p| file_sha256(p)).collect();
        assert_eq!(before, after, "{name}: a refused create wrote");

        // --assume-clean: a magic inside the new data area stays (zeroing it would make the
        // data disagree with parity); md 1.1's, before the data, goes.
        let out = create(&["--force", "--assume-clean"]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let in_data = at >= 2048 * 512;
        assert_eq!(magic_at(&m[0], at) == old, in_data, "{name}: {}", text(&out.stderr));
        if in_data {
            assert!(text(&out.stderr).contains("left in place"), "{name}");
        }

        let out = create(&["--force"]);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{name}: {stderr}");
        for p in &m {
            assert_eq!(magic_at(p, at), [0; 4], "{name}: {} keeps the old magic", p.display());
        }
        assert!(!in_data || stderr.contains("erased the old"), "{name}: {stderr}");
        let out = uraid(["examine".as_ref(), m[0].as_os_str()]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("Version : 1.2"), "{name}");
    }
}

#[test]
fn zero_superblock_erases_each_format_and_then_nothing_names_it() {
    for (name, words, at) in FORMATS {
        let m = members("zero", name, 1);
        let out = uraid(["zero-superblock".as_ref(), m[0].as_os_str()]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        assert!(
            stdout.contains(words) && stdout.contains(&format!("byte {at}")),
            "{name}: {stdout}"
        );
        assert_eq!(magic_at(&m[0], at), [0; 4], "{name}: the magic is still there");
        // Nothing left for uraid, mdadm or a second zeroing to find.
        let out = uraid(["examine".as_ref(), m[0].as_os_str()]);
        assert!(!text(&out.stderr).contains(words), "{name}: {}", text(&out.stderr));
        let mdadm = std::process::Command::new("mdadm").arg("--examine").arg(&m[0]).output();
        let mdadm = mdadm.expect("mdadm (the CI installs it)");
        assert!(!mdadm.status.success(), "{name}: mdadm still finds {}", text(&mdadm.stdout));
        let out = uraid(["zero-superblock".as_ref(), m[0].as_os_str()]);
        assert_eq!(out.status.code(), Some(1), "{name}: zeroed twice");
        assert!(text(&out.stderr).contains("nothing zeroed"), "{name}");
    }
}
