//! The partial parity log at assemble (`ppl` has the area and the replay): whether the array
//! gets one, md's "cannot start dirty degraded array" lifted when the crashed run kept it,
//! and the replay before the engine starts.

use crate::array::{MdError, freshest_superblock, geometry_of, read_bitmap};
use crate::md_ppl::MdPplStart;
use crate::meta::{Metadata, Role};
use crate::ppl::{self, LogArea, ReplayTarget};
use crate::{ArrayInfo, MdOptions};
use std::path::PathBuf;
use std::sync::Arc;
use uraid_format::assemble::{AssembleError, AssembleOptions, AssemblyPlan, Candidate, plan};
use uraid_format::{BitmapSuper, MAX_SECTOR, Superblock1};
use uraid_io::BadBlockList;

/// Each slot's member in sync (None: empty, or still being rebuilt): what the runtime opens,
/// and what a replay reads and writes.
pub(crate) fn slot_paths(plan: &AssemblyPlan) -> Vec<Option<PathBuf>> {
    let missing = plan.missing_slots();
    plan.slots
        .iter()
        .enumerate()
        .map(|(s, m)| {
            m.as_ref().filter(|_| !missing.contains(&(s as u32))).map(|m| PathBuf::from(&m.name))
        })
        .collect()
}

/// Each slot's member, in sync or being recovered (None: empty): what the runtime opens. A
/// member being recovered is written by its recovery and by writes, and read below its
/// checkpoint (opened as an empty slot instead, a restart during a recovery failed it at the
/// first write: found with the re-add's resume test).
pub(crate) fn runtime_paths(plan: &AssemblyPlan) -> Vec<Option<PathBuf>> {
    plan.slots.iter().map(|m| m.as_ref().map(|m| PathBuf::from(&m.name))).collect()
}

/// The log's area, when there is room for it on every member in a slot and its rings hold
/// the engine's stripe heads (`stripe_size_bytes`); else why not, in words for detail.
pub(crate) fn array_log_area(
    plan: &AssemblyPlan,
    candidates: &[Candidate],
    base: &Superblock1,
    bitmap: Option<&BitmapSuper>,
    stripe_size_bytes: u64,
) -> Result<LogArea, String> {
    let no_room = || {
        format!(
            "no room for the partial parity log before the data: it needs {} KiB",
            ppl::MIN_LOG_BYTES / 1024
        )
    };
    let bitmap_bytes = bitmap.map(|b| b.reserved_bytes() as u64);
    let area = ppl::log_area(base, bitmap_bytes).ok_or_else(no_room)?;
    let free_everywhere = plan.slots.iter().flatten().all(|m| {
        let sb = candidates[m.candidate].superblock_area.as_ref().ok();
        sb.and_then(|a| Superblock1::decode(a).ok())
            .is_some_and(|sb| ppl::area_free_on(area, &sb, bitmap_bytes))
    });
    if !free_everywhere {
        return Err(no_room());
    }
    let setup = ppl::log_setup(area, base.set_uuid.0, base.events);
    if setup.fits(stripe_size_bytes / 512) {
        return Ok(area);
    }
    // The area is there but its rings are cut for small stripe heads (md's data offset of
    // 1 MiB on small members): name the stripe_size that keeps the log.
    let fitting = (12..30).map(|s| 1u64 << s).take_while(|&b| setup.fits(b / 512)).last();
    Err(format!(
        "the partial parity log's rings ({} KiB each) cannot hold stripe heads of {} KiB{}",
        setup.ring_bytes() / 1024,
        stripe_size_bytes / 1024,
        fitting.map_or(String::new(), |b| format!(": use --stripe-size {}K or less", b / 1024))
    ))
}

/// Says once when the array has no log, why, and why that matters.
pub(crate) fn announce(name: &str, area: &Result<LogArea, String>) -> Option<LogArea> {
    if let Err(why) = area {
        say!(
            "uraid: {name}: {why}: the write hole stays open (a crash followed by the loss of \
             a member may corrupt the stripes being written)"
        );
    }
    area.as_ref().ok().copied()
}

/// md's assembly rules, except that a dirty degraded array starts without --force when the
/// run that stopped last kept the log: its replay makes the stripes it was writing
/// consistent, which is what md's refusal is about (the kernel lifts it for its own PPL too).
pub(crate) fn plan_with_log(
    candidates: &[Candidate],
    opts: &AssembleOptions,
    options: &MdOptions,
) -> Result<AssemblyPlan, MdError> {
    if options.read_only {
        // Nothing is replayed read-only: md's rule stands (a dirty degraded start needs
        // --force, and data rebuilt from parity may then be wrong).
        return Ok(plan(candidates, opts)?);
    }
    // With --force given, the plan says "forced" for a dirty degraded start all the same: the
    // log decides whether that start needed it (and so whether to warn of wrong parity).
    let (refused, mut forced) = match plan(candidates, opts) {
        Ok(plan) if !plan.forced => return Ok(plan),
        Ok(plan) => (None, plan),
        Err(e @ AssembleError::DirtyDegraded { .. }) => {
            (Some(e), plan(candidates, &AssembleOptions { force: true, ..*opts })?)
        }
        Err(e) => return Err(e.into()),
    };
    if log_mends_crash(&forced, candidates, options)? {
        forced.forced = false;
        return Ok(forced);
    }
    match refused {
        Some(e) => Err(e.into()),
        None => Ok(forced),
    }
}

/// Whether the start's log replay makes the stripes being written at the crash consistent:
/// md's own PPL on RAID5, or uraid's log when the run that stopped last kept it.
fn log_mends_crash(
    plan: &AssemblyPlan,
    candidates: &[Candidate],
    options: &MdOptions,
) -> Result<bool, MdError> {
    let base = freshest_superblock(plan, candidates)?;
    // md starts a dirty degraded array with its own PPL too: the replay mends it first.
    if crate::md_ppl::area(&base).is_some() && base.level == uraid_format::Level::Raid5 {
        return Ok(true);
    }
    let (bitmap, _) = read_bitmap(plan, &base)?;
    let Ok(area) =
        array_log_area(plan, candidates, &base, bitmap.as_ref(), options.stripe_size_bytes)
    else {
        return Ok(false);
    };
    let setup = ppl::log_setup(area, base.set_uuid.0, base.events);
    let found = ppl::read_log(&setup, &slot_paths(plan), base.events)
        .map_err(|e| MdError::Refused(format!("reading the partial parity log: {e}")))?;
    // A log the kernel's run since has made stale mends nothing (see `replay_at_assemble`).
    Ok(found.epoch.is_some() && crate::meta::uraid_wrote_last(&base))
}

/// Runs `f` on what a replay needs: the geometry, and each slot's member in sync or being
/// rebuilt (with its recovery offset).
fn with_target<R>(
    info: &ArrayInfo,
    plan: &AssemblyPlan,
    bad_blocks: &[Option<Arc<BadBlockList>>],
    f: impl FnOnce(&ReplayTarget<'_>) -> R,
) -> Result<R, MdError> {
    let paths = slot_paths(plan);
    let rebuilding: Vec<Option<(PathBuf, u64)>> = plan
        .slots
        .iter()
        .map(|m| {
            m.as_ref().and_then(|m| Some((PathBuf::from(&m.name), m.recovery_offset_sectors?)))
        })
        .collect();
    let geometry = geometry_of(info)?;
    Ok(f(&ReplayTarget {
        geometry: &geometry,
        member_sectors: info.member_sectors,
        data_offset_bytes: info.data_offset_sectors * 512,
        members: &paths,
        rebuilding: &rebuilding,
        bad_blocks,
    }))
}

/// md's own PPL, when the array has one (`crate::md_ppl`): replayed when `meta` says dirty,
/// emptied always; a replay md would trust leaves the array clean (no resync follows).
pub(crate) fn md_ppl_at_assemble(
    info: &ArrayInfo,
    plan: &AssemblyPlan,
    base: &Superblock1,
    meta: &mut Metadata,
) -> Result<Option<MdPplStart>, MdError> {
    if crate::md_ppl::area(base).is_none() {
        return Ok(None);
    }
    let dirty = !meta.is_clean();
    // Members being rebuilt and spares are not replayed (md reads the logs of members in
    // sync), but their areas are emptied too.
    let in_sync = slot_paths(plan);
    let rebuilding = plan.slots.iter().zip(&in_sync).filter(|(_, p)| p.is_none());
    let others: Vec<PathBuf> = rebuilding
        .filter_map(|(m, _)| m.as_ref())
        .chain(&plan.spares)
        .chain(&plan.replacements)
        .map(|m| PathBuf::from(&m.name))
        .collect();
    let start = |target: &ReplayTarget<'_>| crate::md_ppl::start(target, base, dirty, &others);
    let done = with_target(info, plan, &[], start)?
        .map_err(|e| MdError::Refused(format!("md's partial parity log: {e}")))?;
    if dirty {
        let clean = done.leaves_clean(meta.resync_offset);
        say!(
            "uraid: {}: md's partial parity log: {} entries replayed ({} parity blocks), {} \
             mismatches: {}",
            info.label,
            done.recovered_entries,
            done.parity_blocks,
            done.mismatches,
            if clean { "the array is consistent" } else { "resyncing as md would" }
        );
        if clean {
            meta.set_resync_offset(MAX_SECTOR);
        }
    }
    Ok(Some(done))
}

/// Each slot's bad block list, of the device in sync there (see `slot_paths`).
fn slot_bad_blocks(plan: &AssemblyPlan, meta: &Metadata) -> Vec<Option<Arc<BadBlockList>>> {
    slot_paths(plan)
        .iter()
        .enumerate()
        .map(|(slot, path)| {
            let path = path.as_ref()?;
            let d = meta.devices.iter().find(|d| {
                d.role == Role::Slot(u32::try_from(slot).expect("a slot")) && &d.path == path
            })?;
            d.bad_blocks.clone()
        })
        .collect()
}

/// After a crash (`base`, the superblock assembled from, says active): replays the log
/// into the members in sync, before the engine starts and before any resync; a block it can
/// neither read nor write back goes in its member's bad block list (`meta`'s). Returns the
/// parity blocks rewritten.
pub(crate) fn replay_at_assemble(
    info: &ArrayInfo,
    plan: &AssemblyPlan,
    (base, meta): (&Superblock1, &Metadata),
    area: LogArea,
) -> Result<u64, MdError> {
    let setup = ppl::log_setup(area, base.set_uuid.0, base.events);
    // Replayed only when uraid wrote the superblocks last: when the kernel did (its writes
    // drop uraid's mark), the rings hold a run before the kernel's, whose writes may have made
    // their partial parity stale, and the crash to recover from is the kernel's (its resync
    // covers it). Either way the records are then cleared, so that they are never replayed
    // over data a later run (perhaps the kernel's) changed.
    let current = crate::meta::uraid_wrote_last(base);
    let replay = |target: &ReplayTarget<'_>| {
        let replayed = if current {
            ppl::read_log_of(&setup, target, base.events)?.replay(target)?
        } else {
            0
        };
        let (paths, _) = target.replayed_members();
        ppl::clear_log(&setup, paths.iter().flatten().map(PathBuf::as_path))?;
        Ok::<u64, std::io::Error>(replayed)
    };
    let replayed = with_target(info, plan, &slot_bad_blocks(plan, meta), replay)?
        .map_err(|e| MdError::Refused(format!("replaying the partial parity log: {e}")))?;
    if replayed > 0 {
        say!("uraid: {}: partial parity log: {replayed} parity blocks replayed", info.label);
    }
    Ok(replayed)
}
