//! mdadm's `--assemble --update` for a stopped array's superblocks: a new name, homehost or
//! UUID, a full resync at the next start, or md's bad block log added or removed. Decided
//! here, before anything is written; the CLI writes every member's superblock (and bitmap
//! superblock) with the next event count.
//!
//! md's rules (mdadm's super1.c `update_super1`): `name` replaces set_name; `homehost`
//! replaces what comes before its ':' (mdadm's homehost prefix); `uuid` replaces set_uuid and
//! the bitmap superblock's copy, which md checks against it (a bitmap of another UUID is
//! refused); `resync` sets resync_offset to 0, so the next start resyncs everything, as md
//! then does. uraid refuses where md would leave an array it cannot use: a new UUID on an
//! array not whole and clean (a member left out keeps the old one and no longer belongs; a
//! pending log or resync is keyed to the old one) or with md's own PPL (its headers are signed
//! with the UUID); a resync on a degraded array (md would not start it: dirty and degraded).
//!
//! `bbl` gives a member without one a bad block log of 8 sectors where mdadm's puts it (after
//! the bitmap or md's PPL, else past the superblock, leaving up to 32 KiB after it), `no-bbl`
//! takes it away, and both need the array whole and clean: uraid's own write-hole log lives
//! in the largest gap md leaves before the data, which the bad block log's place changes.
//! `no-bbl` is refused while a member's log lists ranges (md's BAD_BLOCKS), as mdadm refuses
//! it; mdadm's `force-no-bbl` is not offered: a listed range holds what a failed write left,
//! which only the log keeps from being read as data.

use super::{GrowError, refuse_unless_whole_and_clean, stamp};
use crate::assemble::AssemblyPlan;
use crate::bitmap::BitmapSuper;
use crate::grow::reshape::{ReshapeProgress, RevertError, reverted};
use crate::grow::takeover::q_built_by_restripe;
use crate::superblock::Superblock1;
use crate::uuid::Uuid;

/// set_name's 32 bytes hold at most 31 and a NUL, as mdadm keeps them.
const NAME_MAX_BYTES: usize = 31;

/// One of mdadm's updates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// set_name becomes this (mdadm's `--update=name --name=N`).
    Name(String),
    /// set_name becomes `HOST:` and the name after the old prefix (mdadm's `homehost`).
    Homehost(String),
    /// set_uuid (and the bitmap's copy) becomes this (mdadm's `uuid`).
    Uuid(Uuid),
    /// A full resync at the next start (mdadm's `resync`).
    Resync,
    /// md's bad block log for members without one (mdadm's `bbl`); `bitmap_sectors`: the
    /// internal bitmap's reserved size (`BitmapSuper::reserved_bytes`), 0 without one.
    Bbl { bitmap_sectors: u64 },
    /// No bad block log (mdadm's `no-bbl`).
    NoBbl,
    /// The reshape in progress goes back (mdadm's `revert-reshape`; `reshape::reverted`).
    RevertReshape,
}

/// Why an update is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    #[error("{what} needs a whole, clean array: {why}")]
    NotWholeAndClean { what: &'static str, why: GrowError },
    #[error(
        "the array has md's partial parity log, whose headers are signed with the UUID: \
         a new UUID would leave the kernel a log of another array"
    )]
    UuidWithMdPpl,
    #[error("a resync needs every member (slots {missing_slots:?} have none): rebuild first")]
    ResyncDegraded { missing_slots: Vec<u32> },
    #[error("the name {name:?} is {len} bytes; md's set_name holds {NAME_MAX_BYTES}")]
    NameTooLong { name: String, len: usize },
    #[error("an empty name")]
    EmptyName,
    #[error("a homehost has no ':' (it ends where the name begins): {0:?}")]
    HomehostColon(String),
    #[error(
        "no room for a bad block log (8 sectors) after the superblock, bitmap or md's PPL and \
         before the data at sector {data_offset_sectors}"
    )]
    BblNoRoom { data_offset_sectors: u64 },
    #[error(
        "member {dev_number}'s bad block log lists ranges (md's BAD_BLOCKS): their sectors \
         hold what a failed write left, which only the log keeps from being read as data; \
         replace the member (uraid replace) and the log empties"
    )]
    BblListed { dev_number: u32 },
    #[error("cannot revert the reshape: {0}")]
    Revert(#[from] RevertError),
    #[error(
        "the reshape is the restripe that builds the Q member a takeover added (mdadm's one \
         pass): go on with `uraid grow --continue`, then take it back with `uraid grow --level \
         5` or restripe it with `uraid grow --layout`"
    )]
    RevertBuildsQ,
}

/// Whether `update` may be made to the array `plan` describes (`own`: a member's superblock;
/// `check_member_update` then asks each member).
///
/// # Errors
/// See `UpdateError`.
pub fn check_update(
    plan: &AssemblyPlan,
    own: &Superblock1,
    update: &Update,
) -> Result<(), UpdateError> {
    let whole_and_clean = |what| {
        refuse_unless_whole_and_clean(plan)
            .map_err(|why| UpdateError::NotWholeAndClean { what, why })
    };
    match update {
        // Each member's own log is `check_member_update`'s.
        Update::Bbl { .. } | Update::NoBbl => whole_and_clean("a bad block log's change")?,
        Update::Uuid(_) => {
            whole_and_clean("a new UUID")?;
            if own.ppl().is_some() {
                return Err(UpdateError::UuidWithMdPpl);
            }
        }
        Update::Resync => {
            let missing_slots = plan.missing_slots();
            if !missing_slots.is_empty() {
                return Err(UpdateError::ResyncDegraded { missing_slots });
            }
        }
        Update::Name(name) | Update::Homehost(name) if name.is_empty() => {
            return Err(UpdateError::EmptyName);
        }
        Update::Homehost(host) if host.contains(':') => {
            return Err(UpdateError::HomehostColon(host.clone()));
        }
        // The restripe that builds a takeover's Q member goes on to its end: reverted, the old
        // layout would hold data on a member still being built.
        Update::RevertReshape if q_built_by_restripe(plan, restripes(own)).is_some() => {
            return Err(UpdateError::RevertBuildsQ);
        }
        // A revert asks each member's own reshape (`check_member_update`).
        Update::Name(_) | Update::Homehost(_) | Update::RevertReshape => {}
    }
    new_name(own, update).map(|_| ())
}

/// Whether `own` records a reshape that keeps the members (a restripe).
fn restripes(own: &Superblock1) -> bool {
    matches!(ReshapeProgress::of(own), Ok(Some(p)) if p.keeps_members())
}

/// What `check_update` cannot tell from one member: whether `update` may be made to this
/// member's superblock (`own`).
///
/// # Errors
/// No room for a bad block log; a bad block log listing ranges to remove.
pub fn check_member_update(own: &Superblock1, update: &Update) -> Result<(), UpdateError> {
    match update {
        Update::Bbl { bitmap_sectors } if own.bblog_size_sectors == 0 => {
            bad_block_log_place(own, *bitmap_sectors)
                .map(|_| ())
                .ok_or(UpdateError::BblNoRoom { data_offset_sectors: own.data_offset_sectors })
        }
        Update::NoBbl if own.feature_map & crate::feature::BAD_BLOCKS != 0 => {
            Err(UpdateError::BblListed { dev_number: own.dev_number })
        }
        Update::RevertReshape => reverted(own).map(|_| ()).map_err(UpdateError::Revert),
        _ => Ok(()),
    }
}

/// Where mdadm's `--update=bbl` puts a bad block log on a v1.1 or v1.2 member, in sectors
/// from the superblock: past the bitmap (`bitmap_sectors` of it) or md's PPL where they follow
/// the superblock, else 8 sectors past the superblock's own offset, moved on 8 at a time
/// until 64 sectors past that while there is room (mdadm leaves 32 KiB for the superblock to
/// grow); `None` when the 8 sectors do not fit before the data, and on v1.0 (superblock after
/// the data: not built).
#[must_use]
pub fn bad_block_log_place(sb: &Superblock1, bitmap_sectors: u64) -> Option<i32> {
    const LOG_SECTORS: i64 = 8;
    let super_offset = i64::try_from(sb.super_offset_sectors).ok()?;
    let data = i64::try_from(sb.data_offset_sectors).ok()?;
    if super_offset >= data {
        return None;
    }
    // Past a bitmap or PPL after the superblock (one before it is not in the way), and never
    // on the superblock's own 4 KiB.
    let mut at = match sb.ppl() {
        _ if sb.has_bitmap() && sb.bitmap_offset_sectors > 0 => {
            i64::from(sb.bitmap_offset_sectors) + i64::try_from(bitmap_sectors).ok()?
        }
        Some((offset, size)) if offset > 0 => i64::from(offset) + i64::from(size),
        _ => super_offset + 8,
    }
    .max(8);
    let end = |at: i64| super_offset + at + LOG_SECTORS;
    while at < super_offset + 8 + 64 && end(at) + 8 <= data {
        at += 8;
    }
    (end(at) <= data).then(|| i32::try_from(at).ok()).flatten()
}

/// A member's superblock after `update`, with the event count and time given; sealed.
///
/// # Errors
/// A name longer than set_name holds; see also `check_member_update`.
pub fn updated_superblock(
    own: &Superblock1,
    update: &Update,
    events: u64,
    utime_seconds: u64,
) -> Result<Superblock1, UpdateError> {
    let mut sb = own.clone();
    if let Some(name) = new_name(own, update)? {
        sb.set_name = [0; 32];
        sb.set_name[..name.len()].copy_from_slice(name.as_bytes());
    }
    check_member_update(own, update)?;
    match update {
        Update::Uuid(uuid) => sb.set_uuid = *uuid,
        Update::Resync => sb.resync_offset_sectors = 0,
        Update::Bbl { bitmap_sectors } if own.bblog_size_sectors == 0 => {
            sb.bblog_offset_sectors =
                bad_block_log_place(own, *bitmap_sectors).expect("checked: there is room");
            (sb.bblog_size_sectors, sb.bblog_shift) = (8, 0);
        }
        Update::NoBbl => {
            (sb.bblog_offset_sectors, sb.bblog_size_sectors, sb.bblog_shift) = (0, 0, 0);
        }
        Update::RevertReshape => sb = reverted(own)?,
        Update::Name(_) | Update::Homehost(_) | Update::Bbl { .. } => {}
    }
    stamp(&mut sb, events, utime_seconds);
    Ok(sb)
}

/// The bitmap superblock after `update`: the new UUID, and the event count given where it
/// was as new as the array (a stale bitmap stays stale, and md then resyncs what it would).
#[must_use]
pub fn updated_bitmap(
    bitmap: &BitmapSuper,
    array_events: u64,
    update: &Update,
    events: u64,
) -> BitmapSuper {
    let mut bitmap = bitmap.clone();
    if let Update::Uuid(uuid) = update {
        bitmap.uuid = *uuid;
    }
    if !bitmap.is_stale(array_events) {
        bitmap.events = events;
    }
    bitmap
}

/// set_name after `update`, when it changes.
fn new_name(own: &Superblock1, update: &Update) -> Result<Option<String>, UpdateError> {
    let name = match update {
        Update::Name(name) => name.clone(),
        Update::Homehost(host) => {
            let old = own.name();
            let short = old.split_once(':').map_or(old.as_str(), |(_, short)| short);
            format!("{host}:{short}")
        }
        Update::Uuid(_)
        | Update::Resync
        | Update::Bbl { .. }
        | Update::NoBbl
        | Update::RevertReshape => return Ok(None),
    };
    if name.len() > NAME_MAX_BYTES {
        return Err(UpdateError::NameTooLong { len: name.len(), name });
    }
    Ok(Some(name))
}

#[cfg(test)]
mod tests;
