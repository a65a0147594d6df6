//! What the metadata verbs (examine, create, assemble) share: reading a member's v1.2
//! superblock area without writing anything, and naming md's numbers the way mdadm does.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::Path;
use uraid_format::assemble::Candidate;
use uraid_format::{Level, V1_2_SUPER_OFFSET_SECTORS};

/// Where v1.2 metadata keeps the superblock: 4 KiB into the member.
pub const SUPERBLOCK_OFFSET_BYTES: u64 = V1_2_SUPER_OFFSET_SECTORS * 512;
/// The superblock area md reads there (the superblock plus up to 1920 roles).
pub const SUPERBLOCK_AREA_BYTES: usize = 4096;

/// Size of a file or block device, measured by seeking to its end (a block device's metadata
/// length is 0).
pub fn device_size_bytes(file: &File) -> std::io::Result<u64> {
    let mut file = file;
    file.seek(SeekFrom::End(0))
}

/// Opens `path` read-only and reads its size and superblock area. Errors become the
/// candidate's read error, so that assembly refuses naming the member.
pub fn read_candidate(path: &str) -> Candidate {
    let read = || -> std::io::Result<(u64, Vec<u8>)> {
        let file = File::open(Path::new(path))?;
        let size_bytes = device_size_bytes(&file)?;
        let mut area = vec![0u8; SUPERBLOCK_AREA_BYTES];
        file.read_exact_at(&mut area, SUPERBLOCK_OFFSET_BYTES)?;
        Ok((size_bytes, area))
    };
    match read() {
        Ok((size_bytes, area)) => {
            Candidate { name: path.to_owned(), size_bytes, superblock_area: Ok(area) }
        }
        Err(error) => {
            let size_bytes = File::open(path).and_then(|f| device_size_bytes(&f)).unwrap_or(0);
            Candidate { name: path.to_owned(), size_bytes, superblock_area: Err(error.to_string()) }
        }
    }
}

/// The engine's level for an md level uraid serves (4, 5, 6).
pub fn core_level(level: Level) -> Option<uraid_core::Level> {
    match level {
        Level::Raid4 => Some(uraid_core::Level::Raid4),
        Level::Raid5 => Some(uraid_core::Level::Raid5),
        Level::Raid6 => Some(uraid_core::Level::Raid6),
        _ => None,
    }
}

/// mdadm's name for a (level, layout number) pair, or the number when it has none.
pub fn layout_name(level: Level, layout: u32) -> String {
    core_level(level)
        .and_then(|level| uraid_core::Layout::from_md(level, layout).ok())
        .map_or_else(|| layout.to_string(), |layout| layout.name().to_owned())
}

/// A chunk as mdadm prints it: "64K".
pub fn chunk_text(chunk_sectors: u32) -> String {
    format!("{}K", chunk_sectors / 2)
}
