//! Errors of the geometry layer. Each names the md rule that refuses the combination.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GeometryError {
    #[error("unknown RAID level {0:?}: uraid knows 0, 4, 5 and 6")]
    UnknownLevel(String),
    #[error("unknown layout {0:?}: see `uraid build --help` for md's layout names")]
    UnknownLayout(String),
    #[error("layout {layout} is not valid for RAID{level}: {rule}")]
    LayoutNotForLevel { level: u8, layout: &'static str, rule: &'static str },
    #[error("RAID{level} needs at least {min} members, got {got}")]
    TooFewMembers { level: u8, min: u16, got: usize },
    #[error("at most {max} members, got {got}: {rule}")]
    TooManyMembers { max: u16, got: usize, rule: &'static str },
    #[error("chunk size {bytes} bytes must be a power of two (md's rule)")]
    ChunkNotPowerOfTwo { bytes: u64 },
    #[error("chunk size {bytes} bytes is out of range {min}..={max} (md needs at least a page)")]
    ChunkOutOfRange { bytes: u64, min: u64, max: u64 },
}
