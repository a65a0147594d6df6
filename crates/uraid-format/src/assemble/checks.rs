//! The checks of an assembly, each refusing with the member it is about (see the rules in
//! `mod.rs`). They only look at the superblocks and sizes they are given.

use super::{AssembleError, AssemblyPlan, Candidate};
use crate::error::SuperblockError;
use crate::feature;
use crate::level::Level;
use crate::superblock::{Superblock1, V1_2_SUPER_OFFSET_SECTORS};

const SECTOR_BYTES: u64 = 512;

pub(super) fn decode_all(candidates: &[Candidate]) -> Result<Vec<Superblock1>, AssembleError> {
    candidates
        .iter()
        .map(|candidate| {
            let member = candidate.name.clone();
            let area = match &candidate.superblock_area {
                Ok(area) => area,
                Err(reason) => {
                    return Err(AssembleError::Unreadable { member, reason: reason.clone() });
                }
            };
            let superblock =
                Superblock1::decode(area).map_err(|source| match candidate.other_metadata {
                    Some(found) if matches!(source, SuperblockError::BadMagic { .. }) => {
                        AssembleError::OtherMetadata { member: member.clone(), found }
                    }
                    _ => AssembleError::Corrupt { member: member.clone(), source },
                })?;
            let super_offset_sectors = superblock.super_offset_sectors;
            if super_offset_sectors != V1_2_SUPER_OFFSET_SECTORS {
                return Err(AssembleError::WrongSuperOffset { member, super_offset_sectors });
            }
            Ok(superblock)
        })
        .collect()
}

/// `take_reshape`: a reshape in progress is what the caller goes on with.
pub(super) fn check_supported(
    name: &str,
    superblock: &Superblock1,
    take_reshape: bool,
) -> Result<(), AssembleError> {
    let unsupported =
        |reason: String| Err(AssembleError::Unsupported { member: name.into(), reason });
    if !matches!(superblock.level, Level::Raid4 | Level::Raid5 | Level::Raid6) {
        return unsupported(format!("level {} (uraid assembles raid4, 5 and 6)", superblock.level));
    }
    let reshaping = if take_reshape { 0 } else { feature::RESHAPE_ACTIVE };
    let features = [
        (
            reshaping,
            "a reshape is in progress (`uraid grow --continue` with the same devices goes on \
             with it, then the array assembles)",
        ),
        (feature::JOURNAL, "the array has a write journal"),
        (feature::CLUSTERED, "clustered md"),
    ];
    for (bit, what) in features {
        if superblock.feature_map & bit != 0 {
            return unsupported(format!("{what} (feature_map {:#x})", superblock.feature_map));
        }
    }
    Ok(())
}

/// Worked example (every fixture): data_offset 2048 + component 2048 sectors need 2 MiB.
pub(super) fn check_size(
    candidate: &Candidate,
    superblock: &Superblock1,
    reference: &Superblock1,
) -> Result<(), AssembleError> {
    let needed_sectors = superblock.data_offset_sectors.saturating_add(reference.size_sectors);
    let needed_bytes = needed_sectors.saturating_mul(SECTOR_BYTES);
    if candidate.size_bytes < needed_bytes {
        let (member, size_bytes) = (candidate.name.clone(), candidate.size_bytes);
        return Err(AssembleError::TooSmall { member, size_bytes, needed_bytes });
    }
    Ok(())
}

/// Fresh members must describe the same array as the reference.
pub(super) fn check_consistent(
    name: &str,
    superblock: &Superblock1,
    reference_name: &str,
    reference: &Superblock1,
) -> Result<(), AssembleError> {
    let fields: [(&'static str, u64, u64); 5] = [
        // check_supported ran first: both levels are 4, 5 or 6, so the numbers are positive.
        ("level", level_number(superblock), level_number(reference)),
        ("layout", superblock.layout.into(), reference.layout.into()),
        ("chunksize", superblock.chunk_sectors.into(), reference.chunk_sectors.into()),
        ("raid_disks", superblock.raid_disks.into(), reference.raid_disks.into()),
        ("size", superblock.size_sectors, reference.size_sectors),
    ];
    for (field, found, expected) in fields {
        if found != expected {
            let (member, reference) = (name.to_owned(), reference_name.to_owned());
            return Err(AssembleError::Inconsistent { member, reference, field, found, expected });
        }
    }
    Ok(())
}

pub(super) fn check_redundancy(plan: &AssemblyPlan) -> Result<(), AssembleError> {
    let missing_slots = plan.missing_slots();
    if missing_slots.len() as u32 <= plan.max_degraded() {
        return Ok(());
    }
    let stale = plan.stale.iter().map(|m| format!("{} (stale: events {})", m.name, m.events));
    let faulty = plan.faulty.iter().map(|m| format!("{} (faulty)", m.name));
    let left_out: Vec<String> = stale.chain(faulty).collect();
    let left_out = if left_out.is_empty() {
        String::new()
    } else {
        format!("; left out: {} (freshest events {})", left_out.join(", "), plan.events)
    };
    // What mdadm's users reach for: its --force brings the freshest stale members back.
    let left_out = if plan.can_force() && plan.forced_members().next().is_none() {
        format!(
            "{left_out}; --force starts it from the freshest stale members (mdadm --assemble \
             --force): blocks written after they dropped out would read back old"
        )
    } else {
        left_out
    };
    Err(AssembleError::TooManyMissing {
        level: plan.level.to_string(),
        raid_disks: plan.raid_disks,
        max_degraded: plan.max_degraded(),
        missing_slots,
        left_out,
    })
}

fn level_number(superblock: &Superblock1) -> u64 {
    u64::from(superblock.level.to_md().unsigned_abs())
}
