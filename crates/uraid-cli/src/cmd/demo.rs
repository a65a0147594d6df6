//! The demo array `uraid serve` runs with no members given: a RAID6 of six sparse files in a
//! directory (./uraid-demo by default), made on the first run and reopened on the next ones,
//! so that a fresh machine can serve something at once and a second run finds its data.

use crate::cmd::create::{self, CreateArgs};
use crate::cmd::md_meta::{SUPERBLOCK_AREA_BYTES, SUPERBLOCK_OFFSET_BYTES};
use anyhow::{Context, bail};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use uraid_format::Superblock1;

pub const DEMO_MEMBERS: usize = 6;
/// Each member's size: sparse, so only what is written takes space.
pub const DEMO_MEMBER_BYTES: u64 = 1 << 30;
pub const DEMO_NAME: &str = "demo";

/// The member files of the demo array in `dir`, created (with md v1.2 superblocks and an
/// internal bitmap) if none exists yet. Files that exist but do not all hold a superblock are
/// refused rather than overwritten: they may be someone's data.
pub fn prepare(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let paths: Vec<PathBuf> = (0..DEMO_MEMBERS).map(|i| dir.join(format!("m{i}.img"))).collect();
    let existing: Vec<&PathBuf> = paths.iter().filter(|p| p.exists()).collect();
    if !existing.is_empty() {
        for path in &paths {
            if !holds_superblock(path) {
                bail!(
                    "{} exists but {} is missing or holds no md superblock: remove the \
                     directory to make a new demo array, or serve its members explicitly",
                    dir.display(),
                    path.display()
                );
            }
        }
        say!("uraid serve: reopening the demo array in {}", dir.display());
        return Ok(paths);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for path in &paths {
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        file.set_len(DEMO_MEMBER_BYTES)?;
    }
    // Sparse files read as zeros, and zeros are consistent RAID6 parity (P = Q = 0): the
    // array is clean from the start, with no initial resync to wait for.
    let args = CreateArgs {
        level: "6".into(),
        raid_devices: DEMO_MEMBERS,
        layout: None,
        chunk: "512K".into(),
        name: DEMO_NAME.into(),
        bitmap: "internal".into(),
        bitmap_chunk: None,
        assume_clean: true,
        uuid: None,
        data_offset: None,
        size: None,
        force: false,
        json: false,
        members: paths.iter().map(|p| p.display().to_string()).collect(),
    };
    create::run(&args).context("creating the demo array")?;
    Ok(paths)
}

fn holds_superblock(path: &Path) -> bool {
    let Ok(file) = OpenOptions::new().read(true).open(path) else { return false };
    let mut area = vec![0u8; SUPERBLOCK_AREA_BYTES];
    file.read_exact_at(&mut area, SUPERBLOCK_OFFSET_BYTES).is_ok()
        && Superblock1::decode(&area).is_ok()
}
