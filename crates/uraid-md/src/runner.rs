//! The sync runner thread (md's resync thread): takes queued actions one at a time, walks them
//! (`sync::walk`) and records progress in the metadata; and the monitor thread, which notices
//! members the engine failed (I/O errors) and answers as md does (`Inner::member_failed`).

use crate::array::Inner;
use crate::safe_mode::IdleWatch;
use crate::status::{MismatchAt, SyncResult};
use crate::sync::{Walked, action_name, walk};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use uraid_core::array::SyncKind;
use uraid_format::MAX_SECTOR;

/// How often recovery progress is written to the superblocks (md checkpoints too, so that a
/// restart resumes near where it stopped).
const CHECKPOINT_EVERY: Duration = Duration::from_secs(2);
/// How often the monitor looks for members the engine failed, at the latest (a failure
/// wakes it at once: writes wait for its record).
const MONITOR_EVERY: Duration = Duration::from_millis(50);
/// How often an idle sync runner looks whether the array may be marked clean.
const SAFE_MODE_TICK: Duration = Duration::from_millis(50);

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Resync these member-sector ranges (`by_bitmap`: only the bitmap's dirty regions).
    Resync {
        ranges: Vec<(u64, u64)>,
        by_bitmap: bool,
    },
    /// Rebuild the member in `slot` from its recovery offset; back by re-add, only in
    /// `ranges` (member sectors: where the bitmap says it missed writes).
    Recover {
        slot: u32,
        ranges: Option<Vec<(u64, u64)>>,
    },
    /// Copy the member of `slot` to its replacement from the replacement's offset
    /// (`replace.rs`).
    Replace {
        slot: u32,
    },
    /// Member sectors `start..end` (the whole member unless a span was asked for).
    Check {
        span: (u64, u64),
    },
    Repair {
        span: (u64, u64),
    },
}

impl Action {
    /// For messages: md's sync_action words (the Debug form lists a resync's every range).
    pub(crate) fn describe(&self) -> String {
        match self {
            Action::Resync { by_bitmap: true, .. } => {
                "a resync (of the bitmap's dirty regions)".into()
            }
            Action::Resync { .. } => "a resync".into(),
            Action::Recover { slot, ranges: None } => format!("the recovery of slot {slot}"),
            Action::Recover { slot, ranges: Some(_) } => {
                format!("the recovery of slot {slot} (re-added: the bitmap's dirty regions)")
            }
            Action::Replace { slot } => format!("the replacement of slot {slot}"),
            Action::Check { .. } => "a check".into(),
            Action::Repair { .. } => "a repair".into(),
        }
    }

    fn kind(&self) -> SyncKind {
        match self {
            Action::Resync { .. } => SyncKind::Resync,
            Action::Recover { .. } => SyncKind::Recovery,
            Action::Replace { .. } => SyncKind::Replace,
            Action::Check { .. } => SyncKind::Check,
            Action::Repair { .. } => SyncKind::Repair,
        }
    }
}

#[derive(Default)]
pub struct SyncQueue {
    pub pending: VecDeque<Action>,
    pub running: Option<Action>,
    pub last: Option<SyncResult>,
    /// Where a resync must go on (md's recovery_cp): MaxSector when none is needed.
    pub resync_cp: u64,
    /// md's "frozen": nothing is taken from the queue until thawed (`frozen.rs`).
    pub frozen: bool,
}

pub(crate) fn start_threads(inner: &Arc<Inner>) -> Vec<JoinHandle<()>> {
    let runner = {
        let inner = inner.clone();
        std::thread::Builder::new().name("uraid-sync".into()).spawn(move || run(&inner))
    };
    let monitor = {
        let inner = inner.clone();
        std::thread::Builder::new().name("uraid-monitor".into()).spawn(move || monitor(&inner))
    };
    vec![runner.expect("spawning the sync thread"), monitor.expect("spawning the monitor")]
}

fn monitor(inner: &Inner) {
    let mut seen = 0;
    while !inner.monitor_stop.load(Ordering::Acquire) {
        seen = inner.runtime.wait_for_failure(seen, MONITOR_EVERY);
        for slot in inner.runtime.failed_members() {
            inner.member_failed(slot as u32);
        }
    }
}

fn run(inner: &Inner) {
    let mut idle = IdleWatch::new(inner.safe_mode_delay);
    loop {
        let action = {
            let mut q = inner.queue.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if inner.shutdown.load(Ordering::Acquire) {
                    return;
                }
                if !q.frozen
                    && let Some(a) = q.pending.pop_front()
                {
                    q.running = Some(a.clone());
                    // Cleared under the queue's lock: a stop asked for once this action shows
                    // as running (idle, a failed member) must not be lost.
                    inner.control.abort.store(false, Ordering::Release);
                    break a;
                }
                // Idle: md's safe mode, off the queue's lock (it flushes and writes).
                if let Some(seen) = idle.due(inner, q.resync_cp == MAX_SECTOR) {
                    drop(q);
                    if !inner.mark_clean_if_idle(seen) {
                        idle.tried();
                    }
                    q = inner.queue.lock().unwrap_or_else(PoisonError::into_inner);
                    continue;
                }
                q = inner
                    .wake
                    .wait_timeout(q, SAFE_MODE_TICK)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        };
        let (result, reached) = run_action(inner, &action);
        // md logs an interrupted sync in the kernel's log; a failed one says where here.
        if result.outcome.starts_with("failed") {
            say!("uraid: {}: {} {}", inner.info.label, result.action, result.outcome);
        }
        if result.listed_bad_sectors > 0 {
            let what = crate::status::listed_bad_text(result.listed_bad_sectors, &result.action);
            say!("uraid: {}: {} {}: {what}", inner.info.label, result.action, result.outcome);
        }
        let mut q = inner.queue.lock().unwrap_or_else(PoisonError::into_inner);
        q.running = None;
        if q.frozen
            && result.outcome == "interrupted"
            && let Some(resumed) = crate::frozen::resumed(&action, reached)
        {
            q.pending.push_front(resumed);
        }
        q.last = Some(result);
    }
}

/// The member-sector ranges `action` covers.
fn ranges_of(inner: &Inner, action: &Action) -> Vec<(u64, u64)> {
    let end = inner.info.member_sectors;
    match action {
        Action::Resync { ranges, .. } | Action::Recover { ranges: Some(ranges), .. } => {
            ranges.clone()
        }
        Action::Recover { slot, ranges: None } => {
            let meta = inner.meta.lock().unwrap_or_else(PoisonError::into_inner);
            let from = meta.devices.iter().find(|d| d.role == crate::meta::Role::Slot(*slot));
            match from.and_then(|d| d.recovery_offset) {
                Some(at) => vec![(at, end - at)],
                None => Vec::new(),
            }
        }
        Action::Replace { slot } => {
            let meta = inner.meta.lock().unwrap_or_else(PoisonError::into_inner);
            let to = meta.devices.iter().find(|d| d.role == crate::meta::Role::Replacement(*slot));
            match to.and_then(|d| d.recovery_offset) {
                Some(at) if at < end => vec![(at, end - at)],
                Some(_) => vec![(end, 0)],
                None => Vec::new(),
            }
        }
        // Within the members already (`Inner::scrub_span`).
        Action::Check { span: (from, to) } | Action::Repair { span: (from, to) } => {
            vec![(*from, to - from)]
        }
    }
}

/// Runs `action`; what it did, and the last place it reached (range, sector), for a frozen
/// array to go on from.
fn run_action(inner: &Inner, action: &Action) -> (SyncResult, Option<(usize, u64)>) {
    let rt = &inner.runtime;
    // Sync writes (parity, rebuilt blocks) go to an array its superblocks say is active.
    rt.safe_mode().ensure_active();
    let ranges = ranges_of(inner, action);
    let mismatches_before = rt.mismatches().1;
    let listed_before = rt.stats().array.sectors_listed_bad;
    rt.clear_mismatches();
    let mut last_checkpoint = Instant::now();
    let mut reached = None;
    let mut on_progress = |range: usize, sector: u64| {
        reached = Some((range, sector));
        match action {
            Action::Recover { slot, .. } => {
                rt.set_recovery_offset(*slot as usize, sector);
                inner.note_recovery(*slot, sector);
                // The superblocks may say "rebuilt up to here" only once the rebuilt blocks are
                // durable on the new member (found by the simulator: a power cut after the
                // record, before a flush, left garbage below the recorded offset).
                if last_checkpoint.elapsed() >= CHECKPOINT_EVERY && rt.flush().is_ok() {
                    last_checkpoint = Instant::now();
                    inner.commit();
                }
            }
            Action::Resync { ranges, .. } => note_resync(inner, ranges, range, sector),
            Action::Replace { slot } => {
                if inner.replacement_failed(*slot) {
                    inner.control.abort.store(true, Ordering::Release);
                    return;
                }
                inner.note_replace(*slot, sector);
                // As for a recovery: recorded only once the copied blocks are durable.
                if last_checkpoint.elapsed() >= CHECKPOINT_EVERY && rt.flush().is_ok() {
                    last_checkpoint = Instant::now();
                    inner.commit();
                }
            }
            Action::Check { .. } | Action::Repair { .. } => {}
        }
    };
    let walked = walk(
        rt,
        action.kind(),
        &ranges,
        inner.info.chunk_sectors,
        &inner.control,
        &mut on_progress,
    );
    let (outcome, sectors, seconds) = match walked {
        Ok(Walked::Done { sectors, seconds }) => ("done".to_owned(), sectors, seconds),
        Ok(Walked::Interrupted { sectors, seconds }) => {
            ("interrupted".to_owned(), sectors, seconds)
        }
        Err(e) => (failed_outcome(inner, &e), 0, 0.0),
    };
    let outcome = finish(inner, action, outcome);
    let (found, count) = rt.mismatches();
    let mismatch_sectors = count - mismatches_before;
    let result = SyncResult {
        action: action_name(action.kind()).to_owned(),
        outcome,
        sectors,
        from_sector: match action {
            Action::Check { span } | Action::Repair { span } => span.0,
            _ => 0,
        },
        array_bytes: sectors * 512 * u64::from(inner.info.data_disks),
        seconds,
        mismatch_sectors,
        mismatches: if mismatch_sectors == 0 { Vec::new() } else { mismatch_list(&found) },
        listed_bad_sectors: rt.stats().array.sectors_listed_bad - listed_before,
    };
    (result, reached)
}

/// A resync's progress: done below `sector` in `ranges[range]`. The first unfinished range
/// decides where a restart goes on (md's recovery_cp).
fn note_resync(inner: &Inner, ranges: &[(u64, u64)], range: usize, sector: u64) {
    let mut q = inner.queue.lock().unwrap_or_else(PoisonError::into_inner);
    let (start, len) = ranges[range];
    q.resync_cp = if sector == start + len {
        inner.runtime.bitmap_resynced(start, len);
        ranges.get(range + 1).map_or(MAX_SECTOR, |r| r.0)
    } else {
        sector
    };
}

/// A failed action's outcome, with where: an operator rewrites what cannot be read there (it
/// reads as errors), and a rebuild then gets past it. A member row of chunks is a run of the
/// array's bytes.
fn failed_outcome(inner: &Inner, e: &crate::sync::WalkError) -> String {
    let d = u64::from(inner.info.data_disks) * 512;
    let place = e.member_sectors.map_or_else(String::new, |(a, b)| {
        format!(" (member sectors {a}-{b}, array bytes {}-{})", a * d, b * d)
    });
    format!("failed: {}{place}", e.error)
}

/// What an action's end records: parity made durable after a resync, a recovery's or a
/// replacement's end in the superblocks (or its progress, when it stopped short). Returns
/// the outcome to report: a replacement given up here did not end "done", whatever the walk
/// found (its windows may all have been under way before the new device's failure showed).
fn finish(inner: &Inner, action: &Action, outcome: String) -> String {
    let rt = &inner.runtime;
    let end = inner.info.member_sectors;
    if let Action::Resync { .. } = action {
        // A stripe torn by the crash is settled only once its rewritten parity is durable:
        // a second crash before that, with a member lost, would find it torn again.
        // A failed flush fails its member (the runtime reports it like any member error).
        let _ = rt.flush();
    }
    if let Action::Recover { slot, .. } = action {
        if outcome == "done" && rt.flush().is_ok() {
            // Recorded first: the engine, told the array is whole, may clear bitmap bits,
            // which the superblocks' events_cleared must already cover.
            inner.recovery_done(*slot);
            rt.set_recovery_offset(*slot as usize, end);
        } else {
            inner.commit();
        }
    }
    if let Action::Replace { slot } = action {
        let given_up = if inner.replacement_failed(*slot) {
            let mut meta = inner.meta.lock().unwrap_or_else(PoisonError::into_inner);
            inner.replacement_given_up(&mut meta, *slot);
            inner.commit_locked(&mut meta);
            true
        } else if outcome == "done" && rt.flush().is_ok() {
            !inner.replacement_done(*slot)
        } else {
            inner.commit();
            false
        };
        if given_up {
            return "failed: the new device failed; the replacement is given up".to_owned();
        }
    }
    outcome
}

/// Where this action found mismatches (the engine keeps the first ones of each action).
fn mismatch_list(found: &[uraid_core::array::Mismatch]) -> Vec<MismatchAt> {
    let slot_of = |m: Option<uraid_core::DiskIndex>| m.map(|d| u32::from(d.0));
    found
        .iter()
        .map(|m| MismatchAt {
            member_sector: m.member_sector.0,
            sectors: m.sectors,
            slot: slot_of(m.member),
        })
        .collect()
}
