//! Shared by the metadata verb tests: the md fixtures (as in `fixtures.rs`: unpacked from
//! zstd once and checked against the manifest's image sha256), running the binary, hashing.

#![allow(dead_code)] // Each test binary uses a different subset.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fixtures_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("URAID_FIXTURES_DIR") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/md")
}

pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every fixture's (name, manifest), in index order.
pub fn fixtures() -> Vec<(String, Value)> {
    let index = read_json(&fixtures_dir().join("index.json"));
    let names: Vec<String> = index["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.len() >= 12, "expected the 12 public fixtures, found {}", names.len());
    names
        .into_iter()
        .map(|name| {
            let manifest = read_json(&fixtures_dir().join(&name).join("manifest.json"));
            (name, manifest)
        })
        .collect()
}

pub fn scratch(sub: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(sub);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Unpacks a fixture's members (once; written under a temporary name, then renamed, so that
/// tests running in parallel never see a half-written image). Returns (manifest member, path)
/// in manifest order.
pub fn unpack(name: &str, manifest: &Value) -> Vec<(Value, PathBuf)> {
    let dir = scratch(&format!("md-meta-fixtures/{name}"));
    let mut out = Vec::new();
    for member in manifest["members"].as_array().unwrap() {
        let file = member["file"].as_str().unwrap();
        let path = dir.join(file.trim_end_matches(".zst"));
        if !path.exists() {
            let input = std::fs::File::open(fixtures_dir().join(name).join(file)).unwrap();
            let mut decoder = ruzstd::decoding::StreamingDecoder::new(input).unwrap();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut decoder, &mut bytes).unwrap();
            assert_eq!(sha256(&bytes), member["image_sha256"].as_str().unwrap(), "{name}/{file}");
            let tmp = dir.join(format!("{file}.{:?}.tmp", std::thread::current().id()));
            std::fs::write(&tmp, bytes).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        }
        out.push((member.clone(), path));
    }
    out
}

pub fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().fold(String::new(), |mut s, b| {
        write!(s, "{b:02x}").unwrap();
        s
    })
}

pub fn file_sha256(path: &Path) -> String {
    sha256(&std::fs::read(path).unwrap())
}

pub fn uraid<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_uraid")).args(args).output().unwrap()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
