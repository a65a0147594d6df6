//! Shared fixture access for the integration tests: where the md fixtures live, their
//! manifests, and the metadata head of each member image.
//!
//! Only the first [`HEAD_BYTES`] of a member are decompressed: the v1.2 superblock (4 KiB in),
//! the bitmap (8 sectors after it) and the bad block log all sit in the first 16 KiB, far below
//! the 1 MiB data offset.

#![allow(dead_code)] // Each test binary uses a different subset of these helpers.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;

use serde_json::Value;

/// Bytes of each member image the metadata tests need.
pub const HEAD_BYTES: usize = 64 * 1024;
/// v1.2: the superblock is 8 sectors into the member.
pub const SUPERBLOCK_OFFSET_BYTES: usize = 4096;
/// The superblock area md reserves (and reads) at that offset.
pub const SUPERBLOCK_AREA_BYTES: usize = 4096;

/// `URAID_FIXTURES_DIR`, or `shared/fixtures/md` next to the checkout.
pub fn fixtures_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("URAID_FIXTURES_DIR") {
        return PathBuf::from(dir);
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures/md"))
}

/// One fixture: its name, parsed manifest and directory.
pub struct Fixture {
    pub name: String,
    pub manifest: Value,
    pub dir: PathBuf,
}

/// Every fixture directory that has a manifest, sorted by name. Panics when there is none:
/// a test that silently checks nothing would pass for the wrong reason.
pub fn fixtures() -> Vec<Fixture> {
    let dir = fixtures_dir();
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("fixtures dir {}: {error}", dir.display()));
    let mut fixtures: Vec<Fixture> = entries
        .map(|entry| entry.expect("readable fixtures dir").path())
        .filter(|path| path.join("manifest.json").is_file())
        .map(|path| {
            let text = std::fs::read_to_string(path.join("manifest.json")).expect("manifest");
            Fixture {
                name: path.file_name().unwrap().to_string_lossy().into_owned(),
                manifest: serde_json::from_str(&text).expect("manifest is JSON"),
                dir: path,
            }
        })
        .collect();
    fixtures.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(!fixtures.is_empty(), "no fixtures under {}", dir.display());
    fixtures
}

/// Finds one fixture by name.
pub fn fixture(name: &str) -> Fixture {
    fixtures().into_iter().find(|fixture| fixture.name == name).expect("fixture exists")
}

impl Fixture {
    /// The manifest's member entries.
    pub fn members(&self) -> &Vec<Value> {
        self.manifest["members"].as_array().expect("members array")
    }

    /// The first [`HEAD_BYTES`] of a member image, decompressed.
    pub fn member_head(&self, member: &Value) -> Vec<u8> {
        let file_name = member["file"].as_str().expect("member file");
        let file = File::open(self.dir.join(file_name)).expect("member image");
        let mut decoder = ruzstd::decoding::StreamingDecoder::new(file).expect("zstd frame");
        let mut head = vec![0u8; HEAD_BYTES];
        decoder.read_exact(&mut head).expect("member image holds the metadata head");
        head
    }

    /// The 4 KiB superblock area of a member.
    pub fn superblock_area(&self, member: &Value) -> Vec<u8> {
        let head = self.member_head(member);
        head[SUPERBLOCK_OFFSET_BYTES..SUPERBLOCK_OFFSET_BYTES + SUPERBLOCK_AREA_BYTES].to_vec()
    }
}

/// A manifest number field as u64.
pub fn num(value: &Value, key: &str) -> u64 {
    value[key].as_u64().unwrap_or_else(|| panic!("manifest field {key} is a number"))
}

/// A manifest string field.
pub fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or_else(|| panic!("manifest field {key} is a string"))
}
