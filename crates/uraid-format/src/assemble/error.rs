//! Why an assembly was refused. Every variant names the member (by the name the caller gave
//! it: a path, usually) or the slots it is about, and the values seen, so that the message
//! alone says which device to look at and why.

use thiserror::Error;

use crate::error::SuperblockError;
use crate::other_metadata::OtherMetadata;
use crate::uuid::Uuid;

/// Why [`crate::assemble::plan`] refused to assemble. Nothing has been written when this is
/// returned: planning reads only the superblock bytes it was given.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AssembleError {
    #[error("no member devices given")]
    NoMembers,
    #[error("{member}: cannot read the superblock: {reason}")]
    Unreadable { member: String, reason: String },
    #[error("{member}: no valid md v1.2 superblock: {source}")]
    Corrupt {
        member: String,
        #[source]
        source: SuperblockError,
    },
    #[error(
        "{member}: no md v1.2 superblock, but {}: uraid assembles v1.2 arrays only (mdadm and \
         Linux md assemble this one)",
        found.describe()
    )]
    OtherMetadata { member: String, found: OtherMetadata },
    #[error(
        "{member}: superblock read at sector 8 says super_offset {super_offset_sectors} \
         (not v1.2 metadata, or a copy)"
    )]
    WrongSuperOffset { member: String, super_offset_sectors: u64 },
    #[error("{member}: belongs to array {member_uuid}, not {array_uuid}")]
    ForeignMember { member: String, member_uuid: Uuid, array_uuid: Uuid },
    #[error("{member}: {field} is {found} but the freshest member {reference} has {expected}")]
    Inconsistent {
        member: String,
        reference: String,
        field: &'static str,
        found: u64,
        expected: u64,
    },
    #[error("{member}: {reason}")]
    Unsupported { member: String, reason: String },
    #[error(
        "{member}: {size_bytes} bytes is too small: data_offset + component size need \
         {needed_bytes} bytes"
    )]
    TooSmall { member: String, size_bytes: u64, needed_bytes: u64 },
    #[error("{first} and {second} both claim slot {slot}")]
    DuplicateRole { slot: u32, first: String, second: String },
    #[error(
        "{level} with {raid_disks} devices survives {max_degraded} missing, but slots \
         {missing_slots:?} have no usable member{left_out}"
    )]
    TooManyMissing {
        level: String,
        raid_disks: u32,
        max_degraded: u32,
        missing_slots: Vec<u32>,
        /// ", left out: <member> (<why>), ..." or empty.
        left_out: String,
    },
    #[error(
        "cannot start dirty degraded array: {reference} says resync_offset \
         {resync_offset_sectors} (not clean) and slots {missing_slots:?} are missing; parity \
         may not match the data (the write hole), use --force to start it anyway"
    )]
    DirtyDegraded { reference: String, resync_offset_sectors: u64, missing_slots: Vec<u32> },
}
