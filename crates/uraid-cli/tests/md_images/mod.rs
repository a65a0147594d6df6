//! What the kernel tests on md's own logs share (`kernel_ppl.rs`, `kernel_badblocks.rs`):
//! a member's superblock, and the array's contents as `uraid assemble -o` reads them.
#![allow(dead_code)]

use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use uraid_format::Superblock1;

/// The v1.2 superblock of the member file `path`.
pub fn superblock(path: &Path) -> Superblock1 {
    let mut b = vec![0u8; 4096];
    File::open(path).and_then(|f| f.read_exact_at(&mut b, 4096)).expect("reading a superblock");
    Superblock1::decode(&b).expect("md's superblock")
}

/// The array's contents as `uraid assemble -o` (with `extra` options) reads them from
/// `members`, through a file in `dir`.
pub fn read_with_uraid(dir: &Path, members: &[PathBuf], extra: &[&str]) -> Vec<u8> {
    let out = dir.join("contents.img");
    let o = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["assemble", "-o", out.to_str().expect("UTF-8")])
        .args(extra)
        .args(members)
        .output()
        .expect("running uraid");
    assert!(o.status.success(), "uraid assemble: {}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&out).expect("uraid's output");
    std::fs::remove_file(&out).expect("removing it");
    bytes
}

pub fn sha256(data: &[u8]) -> String {
    Sha256::digest(data).iter().fold(String::new(), |mut s, b| {
        write!(s, "{b:02x}").unwrap();
        s
    })
}
