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
        "{first} and {second} are both device {dev_number} of the array (md numbers each \
         device once): one is a copy of the other's superblock, or of an older one"
    )]
    SharedDevNumber { dev_number: u32, first: String, second: String },
    #[error(
        "{level} with {raid_disks} devices survives {max_degraded} missing, but slots \
         {} have no usable member{left_out}",
        slot_list(missing_slots)
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
         {resync_offset_sectors} (not clean) and slots {} are missing; parity may not match \
         the data (the write hole), use --force to start it anyway",
        slot_list(missing_slots)
    )]
    DirtyDegraded { reference: String, resync_offset_sectors: u64, missing_slots: Vec<u32> },
}

/// Slots as `[0, 3, 5]`, runs of three or more as `a-b`: a wide array missing most of its
/// members (the wrong ones given) listed 226 slots one by one.
fn slot_list(slots: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < slots.len() {
        let mut j = i;
        while j + 1 < slots.len() && slots[j + 1] == slots[j] + 1 {
            j += 1;
        }
        if j >= i + 2 {
            parts.push(format!("{}-{}", slots[i], slots[j]));
        } else {
            parts.extend(slots[i..=j].iter().map(u32::to_string));
        }
        i = j + 1;
    }
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn slot_lists_fold_runs_of_three_or_more() {
        assert_eq!(super::slot_list(&[]), "[]");
        assert_eq!(super::slot_list(&[3, 4]), "[3, 4]");
        assert_eq!(super::slot_list(&[0, 29, 30, 31, 32, 40, 41, 50]), "[0, 29-32, 40, 41, 50]");
    }
}
