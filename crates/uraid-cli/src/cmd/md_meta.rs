//! What the metadata verbs (examine, create, assemble) share: reading a member's v1.2
//! superblock area without writing anything, and naming md's numbers the way mdadm does.

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
