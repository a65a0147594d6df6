//! What the metadata verbs (examine, create, assemble) share: reading a member's v1.2
//! superblock area without writing anything, and naming md's numbers the way mdadm does.

use anyhow::{Context, bail};
use std::fs::File;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;
use uraid_format::assemble::Candidate;

pub use uraid_md::members::{
    SUPERBLOCK_AREA_BYTES, SUPERBLOCK_OFFSET_BYTES, core_level, device_size_bytes, layout_name,
};

/// Opens `path` read-only and reads its size and superblock area. Errors become the
/// candidate's read error, so that assembly refuses naming the member.
pub fn read_candidate(path: &str) -> Candidate {
    uraid_md::members::read_candidate(Path::new(path))
}

/// `read_candidate` with md's PPL bit put back where uraid took it off while the array was
/// active (`uraid_md::meta::restore_md_ppl`): what assembly plans from.
pub fn read_candidate_to_assemble(path: &str) -> Candidate {
    uraid_md::members::read_candidate_to_assemble(Path::new(path))
}

/// A chunk as mdadm prints it: "64K".
pub fn chunk_text(chunk_sectors: u32) -> String {
    format!("{}K", chunk_sectors / 2)
}

/// Opened for writing, with every claim a running array holds checked: uraid's member lock,
/// and O_EXCL on a block device (the kernel's: mounted, an md member, another exclusive open).
/// `held`: what to do about a running uraid array that holds it, for the refusal.
pub fn open_exclusive(path: &Path, held: &str) -> anyhow::Result<File> {
    let metadata = std::fs::metadata(path)?;
    uraid_io::check_member_kind(&metadata)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true);
    if metadata.file_type().is_block_device() {
        options.custom_flags(libc::O_EXCL);
    }
    let file = options.open(path).map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) => anyhow::anyhow!("in use (mounted, or a member of a running array)"),
        _ => anyhow::Error::new(e),
    })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => bail!("held by a running uraid array: {held}"),
        Err(std::fs::TryLockError::Error(e)) => Err(e).context("locking"),
    }
}
