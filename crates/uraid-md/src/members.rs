//! Reading what a device says about itself (size, superblock area, bitmap) without writing,
//! and the member source the runtime opens each slot from.

use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use uraid_format::assemble::Candidate;
use uraid_io::{FileMember, FileOptions, Member, MemoryMember};
use uraid_runtime::MemberSource;

use crate::meta::SUPERBLOCK_OFFSET_BYTES;

/// The superblock area md reads (the superblock plus up to 1920 roles).
pub const SUPERBLOCK_AREA_BYTES: usize = 4096;

/// Size of a file or block device (seeking to the end works for both).
pub fn device_size_bytes(file: &File) -> io::Result<u64> {
    let mut file = file;
    file.seek(SeekFrom::End(0))
}

/// Reads `path`'s size and superblock area for assembly; errors become the candidate's read
/// error so that assembly refuses naming the member.
#[must_use]
pub fn read_candidate(path: &Path) -> Candidate {
    let name = path.display().to_string();
    let read = || -> io::Result<(u64, Vec<u8>)> {
        let file = File::open(path)?;
        let size_bytes = device_size_bytes(&file)?;
        let mut area = vec![0u8; SUPERBLOCK_AREA_BYTES];
        file.read_exact_at(&mut area, SUPERBLOCK_OFFSET_BYTES)?;
        Ok((size_bytes, area))
    };
    match read() {
        Ok((size_bytes, area)) => Candidate { name, size_bytes, superblock_area: Ok(area) },
        Err(e) => Candidate { name, size_bytes: 0, superblock_area: Err(e.to_string()) },
    }
}

/// Reads `len` bytes at `at` of `path`.
pub fn read_at(path: &Path, at: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    File::open(path)?.read_exact_at(&mut buf, at)?;
    Ok(buf)
}

/// Each slot's device, or none (an empty slot: a stand-in that is failed and gets no I/O).
pub struct SlotSource {
    pub paths: Vec<Option<PathBuf>>,
    pub options: FileOptions,
}

impl MemberSource for SlotSource {
    fn member_count(&self) -> usize {
        self.paths.len()
    }

    fn open(&self, member: usize) -> io::Result<Box<dyn Member>> {
        match &self.paths[member] {
            Some(path) => Ok(Box::new(FileMember::open(path, self.options)?)),
            None => Ok(Box::new(MemoryMember::new(&format!("missing-{member}"), 0))),
        }
    }
}
