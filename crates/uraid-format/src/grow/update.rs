//! mdadm's `--assemble --update` for a stopped array's superblocks: a new name, homehost or
//! UUID, or a full resync at the next start. Decided here, before anything is written; the
//! CLI writes every member's superblock (and bitmap superblock) with the next event count.
//!
//! md's rules (mdadm's super1.c `update_super1`): `name` replaces set_name; `homehost`
//! replaces what comes before its ':' (mdadm's homehost prefix); `uuid` replaces set_uuid and
//! the bitmap superblock's copy, which md checks against it (a bitmap of another UUID is
//! refused); `resync` sets resync_offset to 0, so the next start resyncs everything, as md
//! then does. uraid refuses where md would leave an array it cannot use: a new UUID on an
//! array not whole and clean (a member left out keeps the old one and no longer belongs; a
//! pending log or resync is keyed to the old one) or with md's own PPL (its headers are signed
//! with the UUID); a resync on a degraded array (md would not start it: dirty and degraded).

use super::{GrowError, refuse_unless_whole_and_clean, stamp};
use crate::assemble::AssemblyPlan;
use crate::bitmap::BitmapSuper;
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
}

/// Why an update is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    #[error("a new UUID needs {0}")]
    NotWholeAndClean(GrowError),
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
}

/// Whether `update` may be made to the array `plan` describes.
///
/// # Errors
/// See `UpdateError`.
pub fn check_update(
    plan: &AssemblyPlan,
    own: &Superblock1,
    update: &Update,
) -> Result<(), UpdateError> {
    match update {
        Update::Uuid(_) => {
            refuse_unless_whole_and_clean(plan).map_err(UpdateError::NotWholeAndClean)?;
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
        Update::Name(_) | Update::Homehost(_) => {}
    }
    new_name(own, update).map(|_| ())
}

/// A member's superblock after `update`, with the event count and time given; sealed.
///
/// # Errors
/// A name longer than set_name holds.
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
    match update {
        Update::Uuid(uuid) => sb.set_uuid = *uuid,
        Update::Resync => sb.resync_offset_sectors = 0,
        Update::Name(_) | Update::Homehost(_) => {}
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
        Update::Uuid(_) | Update::Resync => return Ok(None),
    };
    if name.len() > NAME_MAX_BYTES {
        return Err(UpdateError::NameTooLong { len: name.len(), name });
    }
    Ok(Some(name))
}

#[cfg(test)]
mod tests;
