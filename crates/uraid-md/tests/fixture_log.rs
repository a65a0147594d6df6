//! Arrays the Linux md driver wrote (`shared/fixtures/md`) get the partial parity log in the
//! gap md leaves before the data (after the bitmap and the bad block log, 1008 KiB there),
//! and still read back exactly (the manifest's sha256); writes with the log on, a clean stop,
//! and the contents come back on the next assemble.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use uraid_md::ppl::LogArea;
use uraid_md::{MdArray, MdOptions};

mod common;
use common::{fill, tempdir};

fn fixtures_dir() -> PathBuf {
    std::env::var("URAID_FIXTURES_DIR").map_or_else(
        |_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/md"),
        PathBuf::from,
    )
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The fixture's members, unpacked into `dir`, and its manifest.
fn unpack(name: &str, dir: &Path) -> Option<(Vec<PathBuf>, serde_json::Value)> {
    let at = fixtures_dir().join(name);
    let Ok(text) = std::fs::read_to_string(at.join("manifest.json")) else {
        assert!(std::env::var("CI").is_err(), "the md fixtures are missing in CI");
        eprintln!("skipping: no md fixtures at {}", at.display());
        return None;
    };
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut paths = Vec::new();
    for member in manifest["members"].as_array().unwrap() {
        let file = member["file"].as_str().unwrap();
        let input = std::fs::File::open(at.join(file)).unwrap();
        let mut decoder = ruzstd::decoding::StreamingDecoder::new(input).unwrap();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut decoder, &mut bytes).unwrap();
        let path = dir.join(file.trim_end_matches(".zst"));
        std::fs::write(&path, bytes).unwrap();
        paths.push(path);
    }
    Some((paths, manifest))
}

fn kernel_array_gets_the_log(name: &str) {
    let dir = tempdir(&format!("fixture-{name}"));
    let Some((paths, manifest)) = unpack(name, dir.path()) else { return };
    let options = MdOptions { workers: Some(2), ..MdOptions::default() };
    let md = MdArray::assemble(&paths, &options).unwrap();
    assert_eq!(md.info().log, Some(LogArea { offset_bytes: 16 << 10, bytes: 1008 << 10 }));
    assert_eq!(md.info().log_replayed, 0, "stopped clean by the kernel: nothing replayed");
    let rt = md.runtime().clone();
    let mut content = rt.read_at(0, rt.size_bytes() as usize).unwrap();
    let want = manifest["content"]["sha256"].as_str().unwrap();
    assert_eq!(hex(&Sha256::digest(&content)), want, "{name} reads back as the kernel wrote it");
    // Partial-stripe writes (logged), then a clean stop and a new assemble.
    for (i, at) in [4096usize, 200 << 10, 777 << 10].into_iter().enumerate() {
        let data = fill(i as u64 + 5, 4096);
        rt.write_at(at as u64, &data).unwrap();
        content[at..at + 4096].copy_from_slice(&data);
    }
    drop(rt);
    md.stop().unwrap();
    let md = MdArray::assemble(&paths, &options).unwrap();
    let got = md.runtime().read_at(0, content.len()).unwrap();
    assert!(got == content, "{name}: the writes came back");
    md.stop().unwrap();
}

#[test]
fn raid5_with_a_bitmap_from_the_kernel() {
    kernel_array_gets_the_log("r5-bitmap");
}

#[test]
fn raid6_from_the_kernel() {
    kernel_array_gets_the_log("r6-default");
}
