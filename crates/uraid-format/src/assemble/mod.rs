//! md v1.2 assembly as a pure decision: which of the candidate devices form the array, in
//! which slots, which are left out and why, or why the array must not be started at all.
//!
//! Input: per candidate device its name, size and the 4 KiB read at byte 4096 (or the read
//! error). Output: an [`AssemblyPlan`] or an [`AssembleError`] naming the member and the
//! reason. No I/O happens here, so a refusal has written nothing by construction.
//!
//! md's rules, in the order they are applied (facts from md's `super_1_validate` and
//! raid5.c's `raid5_run`, and mdadm's Assemble.c):
//! 1. Every candidate must hold a valid superblock (checksum and fields, see `validate.rs`)
//!    read at v1.2's place (super_offset 8).
//! 2. The array is the given UUID, or the first candidate's; a candidate of another array is
//!    refused (it was named explicitly, so it is a mistake, not something to skip).
//! 3. The freshest event count wins. Members with fewer events missed updates: they are left
//!    out as stale (rebuild targets, never data sources). Fresh members must agree on the
//!    geometry. With a bitmap md can re-add a slightly stale member and resync only what the
//!    bitmap marks; this plan leaves it out like any stale member.
//! 4. Every member must hold data_offset + component size.
//! 5. One fresh member per slot; spares and faulty members are listed apart. A member with a
//!    recovery offset holds its slot but is not in sync, so it counts as missing.
//! 6. At most `max_degraded` slots missing (1 for RAID4/5, 2 for RAID6), after rule 7.
//! 7. With `force_stale` (mdadm --force), when more slots are missing than that, the
//!    freshest stale members are brought back until the array can run (`force_stale`).
//! 8. Dirty (resync_offset not MaxSector) and degraded is refused unless forced: parity may
//!    not match the data, and a missing member's blocks computed from it would be garbage (md:
//!    "cannot start dirty degraded array"). md lifts this for an array with its PPL, which it
//!    replays first; this plan writes nothing and replays nothing, so it does not: the caller
//!    that replays a log (uraid-md, md's PPL or uraid's own) lifts it.
//!
//! Not handled (refused as unsupported): an active reshape, a write journal, clustered md,
//! levels other than 4, 5 and 6, and two members holding one slot (md's replacement).

mod checks;
mod error;
#[cfg(test)]
mod tests;

pub use error::AssembleError;

use checks::{check_consistent, check_redundancy, check_size, check_supported, decode_all};

use crate::dev_roles::DevRole;
use crate::feature;
use crate::level::Level;
use crate::other_metadata::OtherMetadata;
use crate::superblock::{MAX_SECTOR, Superblock1};
use crate::uuid::Uuid;

/// One device offered for assembly.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// How the device is named in messages (its path).
    pub name: String,
    pub size_bytes: u64,
    /// The 4 KiB superblock area at byte 4096, or why it could not be read.
    pub superblock_area: Result<Vec<u8>, String>,
    /// Another format's metadata found on the device (`OtherMetadata::places`): named when
    /// the area holds no v1.2 superblock.
    pub other_metadata: Option<OtherMetadata>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct AssembleOptions {
    /// Assemble this array; `None`: the array of the first candidate.
    pub uuid: Option<Uuid>,
    /// Start a dirty degraded array anyway (mdadm --force, md's start_dirty_degraded).
    pub force: bool,
    /// The other half of mdadm --force: when too few members are fresh, bring back the
    /// freshest stale ones until the array can run (`force_stale`).
    pub force_stale: bool,
    /// Plan an array in the middle of a reshape (for `uraid grow --continue`): refused
    /// otherwise, since uraid serves no array with two geometries.
    pub take_reshape: bool,
}

/// A candidate placed by the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedMember {
    /// Index into the candidates given to [`plan`].
    pub candidate: usize,
    pub name: String,
    pub dev_number: u32,
    pub device_uuid: Uuid,
    /// The role its own superblock gives it.
    pub role: DevRole,
    pub events: u64,
    #[doc(alias = "data_offset")]
    pub data_offset_sectors: u64,
    /// `Some` when the member is partly rebuilt: in sync below this member sector only.
    #[doc(alias = "recovery_offset")]
    pub recovery_offset_sectors: Option<u64>,
    /// `Some(events)`: stale with that event count, brought back by `force_stale` (mdadm's
    /// "forcing event count in ... from N up to M"); its superblock and bitmap are not the
    /// array's, and its blocks written since it dropped out are old.
    pub forced_from_events: Option<u64>,
}

/// What assembling the candidates gives: md's view of the array, and where every candidate went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssemblyPlan {
    pub uuid: Uuid,
    pub name: String,
    pub level: Level,
    /// md's layout number.
    pub layout: u32,
    pub chunk_sectors: u32,
    pub raid_disks: u32,
    /// Component size: sectors of each member used by the array.
    #[doc(alias = "size")]
    pub size_sectors: u64,
    /// The freshest event count, which the plan's members all have.
    pub events: u64,
    #[doc(alias = "resync_offset")]
    pub resync_offset_sectors: u64,
    pub feature_map: u32,
    /// Members in slot order; `None` where no usable member holds the slot.
    pub slots: Vec<Option<PlannedMember>>,
    /// Left out: fewer events than the freshest. Rebuild targets, not data sources.
    pub stale: Vec<PlannedMember>,
    pub spares: Vec<PlannedMember>,
    /// Fresh devices replacing the member of their slot (md's replace: the slot's role with
    /// the REPLACEMENT feature), copied up to their recovery offset.
    pub replacements: Vec<PlannedMember>,
    /// Fresh members whose superblock marks them faulty.
    pub faulty: Vec<PlannedMember>,
    /// Started dirty and degraded because `force` was given.
    pub forced: bool,
}

impl AssemblyPlan {
    /// Whether the array was in sync when last stopped.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.resync_offset_sectors == MAX_SECTOR
    }

    #[must_use]
    pub fn has_bitmap(&self) -> bool {
        self.feature_map & feature::BITMAP_OFFSET != 0
    }

    /// Whether `force_stale` could bring stale members back: some are stale, and a fresh
    /// member holds a slot.
    #[must_use]
    pub fn can_force(&self) -> bool {
        let forcible = self.stale.iter().any(|m| m.recovery_offset_sectors.is_none());
        forcible && self.fresh_members().next().is_some()
    }

    /// Members brought back from stale by `force_stale`.
    pub fn forced_members(&self) -> impl Iterator<Item = &PlannedMember> + Clone {
        self.slots.iter().flatten().filter(|m| m.forced_from_events.is_some())
    }

    /// The members whose superblock is the array's (not brought back by force), in slot
    /// order: where the array's superblock and bitmap are read.
    pub fn fresh_members(&self) -> impl Iterator<Item = &PlannedMember> + Clone {
        self.slots.iter().flatten().filter(|m| m.forced_from_events.is_none())
    }

    /// Slots without an in-sync member: empty, or held by a member still being recovered.
    #[must_use]
    pub fn missing_slots(&self) -> Vec<u32> {
        let not_in_sync = |slot: &Option<PlannedMember>| {
            slot.as_ref().is_none_or(|member| member.recovery_offset_sectors.is_some())
        };
        (0..self.raid_disks).filter(|&slot| not_in_sync(&self.slots[slot as usize])).collect()
    }

    /// md's `max_degraded`: parity members of the level.
    #[must_use]
    pub fn max_degraded(&self) -> u32 {
        self.level.max_degraded()
    }

    #[must_use]
    pub fn data_disks(&self) -> u32 {
        self.raid_disks - self.max_degraded()
    }

    /// Array sectors: whole chunks of the component size on every data member.
    #[must_use]
    pub fn array_sectors(&self) -> u64 {
        let chunk = u64::from(self.chunk_sectors);
        self.size_sectors / chunk * chunk * u64::from(self.data_disks())
    }
}

/// Decides the assembly of `candidates`; see the module comment for the rules.
pub fn plan(
    candidates: &[Candidate],
    options: &AssembleOptions,
) -> Result<AssemblyPlan, AssembleError> {
    if candidates.is_empty() {
        return Err(AssembleError::NoMembers);
    }
    let superblocks = decode_all(candidates)?;
    let uuid = options.uuid.unwrap_or(superblocks[0].set_uuid);
    for (candidate, superblock) in candidates.iter().zip(&superblocks) {
        if superblock.set_uuid != uuid {
            let (member, member_uuid) = (candidate.name.clone(), superblock.set_uuid);
            return Err(AssembleError::ForeignMember { member, member_uuid, array_uuid: uuid });
        }
    }
    // The first candidate with the highest event count is the reference, as in mdadm.
    let events = superblocks.iter().map(|sb| sb.events).max().expect("non-empty");
    let reference = superblocks.iter().position(|sb| sb.events == events).expect("max exists");
    let reference_name = &candidates[reference].name;
    for (candidate, superblock) in candidates.iter().zip(&superblocks) {
        // A stale member's own reshape is over for the array (it was left out of it).
        let take_reshape = options.take_reshape || superblock.events < events;
        check_supported(&candidate.name, superblock, take_reshape)?;
    }
    for (candidate, superblock) in candidates.iter().zip(&superblocks) {
        check_size(candidate, superblock, &superblocks[reference])?;
        if superblock.events == events {
            check_consistent(&candidate.name, superblock, reference_name, &superblocks[reference])?;
        }
    }
    let mut plan = empty_plan(&superblocks[reference]);
    place_members(candidates, &superblocks, &mut plan)?;
    if options.force_stale {
        force_stale(&mut plan);
    }
    check_redundancy(&plan)?;
    let missing_slots = plan.missing_slots();
    if !plan.is_clean() && !missing_slots.is_empty() {
        if !options.force {
            return Err(AssembleError::DirtyDegraded {
                reference: reference_name.clone(),
                resync_offset_sectors: plan.resync_offset_sectors,
                missing_slots,
            });
        }
        plan.forced = true;
    }
    Ok(plan)
}

/// mdadm's forced assembly (Assemble.c, `force_array`): while more slots are missing than
/// the level survives, the freshest stale member whose own superblock gives it an empty
/// slot, fully in sync when it dropped out, joins the array, with every stale member of the
/// same event count. After a failure beyond the redundancy (a controller, a cable, a full
/// file system failing member after member) the members that failed last hold every write
/// that was acknowledged: writes failed once the array had failed.
fn force_stale(plan: &mut AssemblyPlan) {
    // The array's superblock and bitmap are read from a member in a slot that was fresh;
    // when the freshest superblocks are only spares' or faulty members', nothing is forced.
    if !plan.can_force() {
        return;
    }
    let eligible = |plan: &AssemblyPlan, m: &PlannedMember| match m.role {
        DevRole::Active(slot) => {
            plan.slots.get(usize::from(slot)).is_some_and(Option::is_none)
                && m.recovery_offset_sectors.is_none()
                && m.events > 0
        }
        _ => false,
    };
    while plan.missing_slots().len() as u32 > plan.max_degraded() {
        let newest = plan.stale.iter().filter(|m| eligible(plan, m)).map(|m| m.events).max();
        let Some(events) = newest else { return };
        let mut i = 0;
        while i < plan.stale.len() {
            if plan.stale[i].events == events && eligible(plan, &plan.stale[i]) {
                let mut member = plan.stale.remove(i);
                let DevRole::Active(slot) = member.role else { unreachable!("eligible") };
                member.forced_from_events = Some(member.events);
                member.events = plan.events;
                plan.slots[usize::from(slot)] = Some(member);
            } else {
                i += 1;
            }
        }
    }
}

fn empty_plan(reference: &Superblock1) -> AssemblyPlan {
    AssemblyPlan {
        uuid: reference.set_uuid,
        name: reference.name(),
        level: reference.level,
        layout: reference.layout,
        chunk_sectors: reference.chunk_sectors,
        raid_disks: reference.raid_disks,
        size_sectors: reference.size_sectors,
        events: reference.events,
        resync_offset_sectors: reference.resync_offset_sectors,
        feature_map: reference.feature_map,
        // A reshape to fewer members still holds the slots it removes (planned only to go on
        // with it: `take_reshape`).
        slots: vec![None; reference.slot_count() as usize],
        stale: Vec::new(),
        spares: Vec::new(),
        replacements: Vec::new(),
        faulty: Vec::new(),
        forced: false,
    }
}

fn place_members(
    candidates: &[Candidate],
    superblocks: &[Superblock1],
    plan: &mut AssemblyPlan,
) -> Result<(), AssembleError> {
    for (index, (candidate, sb)) in candidates.iter().zip(superblocks).enumerate() {
        let recovering = sb.feature_map & feature::RECOVERY_OFFSET != 0;
        let member = PlannedMember {
            candidate: index,
            name: candidate.name.clone(),
            dev_number: sb.dev_number,
            device_uuid: sb.device_uuid,
            role: sb.role(),
            events: sb.events,
            data_offset_sectors: sb.data_offset_sectors,
            recovery_offset_sectors: recovering.then_some(sb.recovery_offset_sectors),
            forced_from_events: None,
        };
        if sb.events < plan.events {
            plan.stale.push(member);
            continue;
        }
        match member.role {
            DevRole::Active(_) if sb.feature_map & feature::REPLACEMENT != 0 => {
                plan.replacements.push(member);
            }
            DevRole::Active(slot) => {
                // Within its own slots (`Superblock1::validate`), not always the reference's.
                let slots = plan.slots.len();
                let Some(held) = plan.slots.get_mut(usize::from(slot)) else {
                    let reason = format!("its role is slot {slot}, past the array's {slots} slots");
                    return Err(AssembleError::Unsupported { member: member.name, reason });
                };
                if let Some(first) = held {
                    let (first, second) = (first.name.clone(), member.name);
                    return Err(AssembleError::DuplicateRole { slot: slot.into(), first, second });
                }
                *held = Some(member);
            }
            DevRole::Spare => plan.spares.push(member),
            DevRole::Faulty => plan.faulty.push(member),
            DevRole::Journal => {
                let reason = "a write journal member (not supported)".to_owned();
                return Err(AssembleError::Unsupported { member: member.name, reason });
            }
        }
    }
    refuse_shared_dev_numbers(plan)
}

/// md numbers each device of an array once (`dev_number`, its index in the role table): two
/// fresh candidates with one number (a spare and a member, or two spares) would take one
/// role between them at the next superblock write (found by the superblock fuzz target: a
/// takeover made both of two such spares Q).
fn refuse_shared_dev_numbers(plan: &AssemblyPlan) -> Result<(), AssembleError> {
    let fresh = plan.slots.iter().flatten().chain(&plan.spares).chain(&plan.replacements);
    let mut seen: Vec<&PlannedMember> = Vec::new();
    for m in fresh {
        if let Some(first) = seen.iter().find(|s| s.dev_number == m.dev_number) {
            let (first, second) = (first.name.clone(), m.name.clone());
            return Err(AssembleError::SharedDevNumber { dev_number: m.dev_number, first, second });
        }
        seen.push(m);
    }
    Ok(())
}
