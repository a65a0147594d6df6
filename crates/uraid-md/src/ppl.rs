//! The partial parity log on md members (records and engine: `uraid_core::ppl`, the rings:
//! `uraid_runtime::LogSetup`): where it lives, and its replay at assemble after a crash.
//!
//! Where. md leaves room between its metadata (superblock, bitmap, bad block log) and the data:
//! mostly the reshape headroom mdadm reserves (about 0.1% of the device, up to 128 MiB), which
//! nothing touches outside a reshape; a reshape (the kernel's, or `uraid grow --raid-devices`,
//! on a stopped clean array whose log is empty) moves the data down into it, and the log
//! then takes the room left before the new data offset. The log takes the
//! largest free 4 KiB-aligned gap there, at most 16 MiB and at least 256 KiB (else there is no
//! log and the write hole stays open, as with md without its PPL). The gap comes from the
//! superblock alone, so every run finds the same one, and is cut into `LOG_RINGS` fixed rings.
//!
//! Replay. After a crash (the superblocks say active), before the engine starts and before any
//! resync: every ring of every member in sync (or being rebuilt: `read_log_of`) is read, only
//! the newest run's records count (the epoch: md's events at that run's assemble), and each
//! live entry's parity block is rewritten from its partial parity and the modified blocks as
//! the members hold them now (`uraid_core::ppl::replayed_parity`; a missing member's blocks as
//! `uraid_core::ppl::replay_blocks` counts them; a member being rebuilt counts below its
//! recovery offset and is missing above it). The stripe is then consistent, so a member
//! missing now, or lost later, is rebuilt right.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use uraid_core::ppl::{
    FoundEntry, RingScan, entries_by_head, entries_to_replay, heads_to_resync_of_rings,
    magic_sectors, rebuilt_data, replay_blocks, replayed_parity, resynced_parity, scan_ring,
};
use uraid_core::{DiskIndex, DiskRole, Geometry, SECTOR_BYTES, StripeNumber};
use uraid_format::Superblock1;
use uraid_io::BadBlockList;
use uraid_runtime::LogSetup;

/// Rings the area is cut into: an array with the log runs at most this many workers.
pub const LOG_RINGS: usize = 8;
pub const MAX_LOG_BYTES: u64 = 16 << 20;
pub const MIN_LOG_BYTES: u64 = 256 << 10;
const ALIGN: u64 = 4096;
/// What md reads and writes at the superblock's offset (the superblock and its roles).
const SUPERBLOCK_BYTES: u64 = 4096;

/// The log's area on every member: bytes from the device's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogArea {
    pub offset_bytes: u64,
    pub bytes: u64,
}

/// What md keeps before the data on a member, as byte ranges `[start, end)` from the device's
/// start: everything up to the end of the superblock, the bitmap (`bitmap_bytes`: its on-disk
/// size, superblock included), the bad block log and md's own PPL. None when the superblock
/// has a bitmap whose size is not known.
#[must_use]
pub fn reserved_ranges(sb: &Superblock1, bitmap_bytes: Option<u64>) -> Option<Vec<(u64, u64)>> {
    let sb_at = sb.super_offset_sectors * SECTOR_BYTES;
    let from_sb = |sectors: i64, bytes: u64| {
        let start = sb_at.checked_add_signed(sectors * 512).unwrap_or(0);
        (start, start + bytes)
    };
    let mut ranges = vec![(0, sb_at + SUPERBLOCK_BYTES)];
    if sb.has_bitmap() {
        ranges.push(from_sb(i64::from(sb.bitmap_offset_sectors), bitmap_bytes?));
    }
    if sb.bblog_size_sectors > 0 {
        let bytes = u64::from(sb.bblog_size_sectors) * SECTOR_BYTES;
        ranges.push(from_sb(i64::from(sb.bblog_offset_sectors), bytes));
    }
    if let Some((offset, size)) = sb.ppl() {
        ranges.push(from_sb(i64::from(offset), u64::from(size) * SECTOR_BYTES));
    }
    Some(ranges)
}

/// The largest 4 KiB-aligned gap before `data_offset_bytes` that no range covers, capped at
/// `MAX_LOG_BYTES` (from its start); None when it is under `MIN_LOG_BYTES`.
#[must_use]
pub fn free_area(reserved: &[(u64, u64)], data_offset_bytes: u64) -> Option<LogArea> {
    let mut ranges = reserved.to_vec();
    ranges.push((data_offset_bytes, u64::MAX));
    ranges.sort_unstable();
    let mut best: Option<LogArea> = None;
    let mut free_from = 0u64;
    for &(start, end) in &ranges {
        let (lo, hi) =
            (free_from.next_multiple_of(ALIGN), start.min(data_offset_bytes) / ALIGN * ALIGN);
        if hi > lo && best.is_none_or(|b| hi - lo > b.bytes) {
            best = Some(LogArea { offset_bytes: lo, bytes: hi - lo });
        }
        free_from = free_from.max(end);
    }
    best.filter(|b| b.bytes >= MIN_LOG_BYTES)
        .map(|b| LogArea { bytes: b.bytes.min(MAX_LOG_BYTES), ..b })
}

/// The log's area on a member with this superblock (see `reserved_ranges`).
#[must_use]
pub fn log_area(sb: &Superblock1, bitmap_bytes: Option<u64>) -> Option<LogArea> {
    free_area(&reserved_ranges(sb, bitmap_bytes)?, sb.data_offset_sectors * SECTOR_BYTES)
}

/// Whether `area` is free on a member with this superblock too (members written by other
/// tools may place their bad block logs elsewhere).
#[must_use]
pub fn area_free_on(area: LogArea, sb: &Superblock1, bitmap_bytes: Option<u64>) -> bool {
    let end = area.offset_bytes + area.bytes;
    reserved_ranges(sb, bitmap_bytes).is_some_and(|r| {
        r.iter().all(|&(s, e)| e <= area.offset_bytes || s >= end)
            && sb.data_offset_sectors * SECTOR_BYTES >= end
    })
}

/// Where the array's data is and who holds it, for a replay.
pub struct ReplayTarget<'a> {
    pub geometry: &'a Geometry,
    pub member_sectors: u64,
    pub data_offset_bytes: u64,
    /// Per slot: the member in sync there, or None (missing, or still being rebuilt).
    pub members: &'a [Option<PathBuf>],
    /// Per slot: a member being rebuilt, in sync below this member sector (its recovery
    /// offset). uraid's replay counts its blocks there as any member's and mends its parity
    /// blocks there; above, it is missing. md's own PPL replay leaves it out.
    pub rebuilding: &'a [Option<(PathBuf, u64)>],
    /// Per slot (or empty): the member's bad block list, where a data block the replay can
    /// neither read nor write back is listed, so that reads go around it from the start.
    pub bad_blocks: &'a [Option<Arc<BadBlockList>>],
}

/// What the rings hold: per ring, a scan of each member read, of the newest run only.
pub struct FoundLog {
    rings: Vec<Vec<RingScan>>,
    /// The newest run's epoch, when some ring holds a record of this array: the run that
    /// stopped last had the log (a clean stop clears it, see `clear_log`).
    pub epoch: Option<u64>,
}

pub(crate) fn open_members(members: &[Option<PathBuf>]) -> io::Result<Vec<Option<File>>> {
    members
        .iter()
        .map(|p| p.as_ref().map(|p| OpenOptions::new().read(true).write(true).open(p)).transpose())
        .collect()
}

/// Reads every ring of every member in `members` (per slot; None: not in sync). `events`:
/// md's events before this assemble (no run of this array logged a later epoch).
pub fn read_log(
    setup: &LogSetup,
    members: &[Option<PathBuf>],
    events: u64,
) -> io::Result<FoundLog> {
    read_rings(setup, members, &[], events)
}

/// `read_log` of what `target` replays: the members in sync and those being rebuilt. The
/// engine logs to a member being rebuilt where it is in sync, so its rings count (entries
/// only there were lost to the replay until the eighth session of 2026-11-29: the
/// simulator's seed 40000497); but a ring of one that holds no header of the newest run was
/// not written since the member joined (the reset that follows a join had not reached it),
/// and the generations before, which went to the device it replaced, would count as
/// incomplete there and be dropped (seed 40000773): such a ring is left out. A ring with
/// a header counts for every generation of the run: the engine keeps log writes queued
/// before a replacement began off the new device (`MemberIo::before_replacement`), and
/// starts no generation while the reset that follows a join is under way, so whatever the
/// new device holds was logged after it joined.
pub fn read_log_of(
    setup: &LogSetup,
    target: &ReplayTarget<'_>,
    events: u64,
) -> io::Result<FoundLog> {
    let (paths, in_sync_below) = target.replayed_members();
    let rebuilding: Vec<bool> = in_sync_below.iter().map(Option::is_some).collect();
    read_rings(setup, &paths, &rebuilding, events)
}

fn read_rings(
    setup: &LogSetup,
    members: &[Option<PathBuf>],
    rebuilding: &[bool],
    events: u64,
) -> io::Result<FoundLog> {
    let files = open_members(members)?;
    let mut rings: Vec<Vec<RingScan>> = vec![Vec::new(); setup.rings];
    let mut bytes = vec![0u8; usize::try_from(setup.ring_bytes()).expect("a ring fits")];
    for (ring, scans) in rings.iter_mut().enumerate() {
        for (m, file) in files.iter().enumerate() {
            let Some(file) = file else { continue };
            if let Err(e) = file.read_exact_at(&mut bytes, setup.ring_offset_bytes(ring)) {
                say!("uraid: member {m}: reading log ring {ring}: {e} (left out of the replay)");
                continue;
            }
            scans.push(scan_ring(&bytes, setup.uuid, DiskIndex(m as u16)));
        }
    }
    // Only the newest run's records: a ring that run did not use holds an older run's.
    let epoch = rings
        .iter()
        .flatten()
        .flat_map(|s| &s.headers)
        .map(|h| h.0)
        .filter(|&epoch| epoch <= events)
        .max();
    for s in rings.iter_mut().flatten() {
        s.headers.retain(|h| Some(h.0) == epoch);
        s.entries.retain(|e| Some(e.epoch) == epoch);
    }
    let joined = |s: &RingScan| {
        !rebuilding.get(s.member.get()).copied().unwrap_or(false) || !s.headers.is_empty()
    };
    for scans in &mut rings {
        scans.retain(joined);
    }
    Ok(FoundLog { rings, epoch })
}

impl ReplayTarget<'_> {
    /// Per slot, the member a replay opens (in sync, or being rebuilt) and, for one being
    /// rebuilt, the member sector it is in sync below. Until the eighth session of 2026-11-29
    /// a member being rebuilt was missing to the replay everywhere: a torn stripe below its
    /// recovery offset had its parity rewritten as if the member's block were lost, while the
    /// member kept (and served) its own, and with another member missing no resync set that
    /// right (the simulator's seed 40000047, once it cut the power during recoveries).
    pub(crate) fn replayed_members(&self) -> (Vec<Option<PathBuf>>, Vec<Option<u64>>) {
        let rebuilding = |s: usize| self.rebuilding.get(s).and_then(Option::as_ref);
        (0..self.members.len())
            .map(|s| match (&self.members[s], rebuilding(s)) {
                (Some(p), _) => (Some(p.clone()), None),
                (None, Some((p, below))) => (Some(p.clone()), Some(*below)),
                (None, None) => (None, None),
            })
            .unzip()
    }
}

impl FoundLog {
    /// Whether `replay` would take anything: a live entry or a range's heads.
    #[must_use]
    pub fn holds_live_records(&self) -> bool {
        self.rings.iter().any(|scans| !entries_to_replay(scans).is_empty())
            || !heads_to_resync_of_rings(&self.rings).is_empty()
    }

    /// Rewrites each live entry's parity block (see the module docs); returns how many.
    /// Every member written is synced before this returns.
    pub fn replay(&self, target: &ReplayTarget<'_>) -> io::Result<u64> {
        let (paths, in_sync_below) = target.replayed_members();
        let files = open_members(&paths)?;
        // Blocks md's bad block logs name hold no data: read as lost, never trusted (a range
        // resync over one would compute parity from garbage and lose the block for good).
        let known_bad: Vec<Vec<std::ops::Range<u64>>> = paths
            .iter()
            .map(|p| p.as_deref().map_or(Ok(Vec::new()), crate::members::known_bad_bytes))
            .collect::<io::Result<_>>()?;
        // A head's blocks as a replay counts them: None where the member is missing, is being
        // rebuilt above it, or cannot read it; and which of them are there but failed to read
        // (not listed as bad), whose lost blocks the replay writes back.
        let read_blocks = |sector: u64, at: u64, unit: usize| {
            let mut blocks = read_blocks(&files, at, unit);
            let mut unreadable = vec![false; blocks.len()];
            let end = sector + unit as u64 / SECTOR_BYTES;
            let per_member = blocks.iter_mut().zip(&known_bad).zip(&in_sync_below).enumerate();
            for (m, ((b, bad), below)) in per_member {
                if uraid_io::known_bad::overlaps(bad, &(at..at + unit as u64))
                    || below.is_some_and(|below| end > below)
                {
                    *b = None;
                } else {
                    unreadable[m] = b.is_none() && files[m].is_some();
                }
            }
            (blocks, unreadable)
        };
        // A head's byte offset and blocks, or None (said) past the array's end.
        let head_blocks = |sector: u64, unit_sectors: u64, what: &str| {
            if sector + unit_sectors > target.member_sectors {
                say!("uraid: {what} at sector {sector} does not fit the array; skipped");
                return None;
            }
            let unit = usize::try_from(unit_sectors * SECTOR_BYTES).expect("a unit fits");
            let at = target.data_offset_bytes + sector * SECTOR_BYTES;
            let (blocks, unreadable) = read_blocks(sector, at, unit);
            Some((at, blocks, unreadable))
        };
        let mut written = vec![false; files.len()];
        let mut replayed = 0;
        let g = target.geometry;
        for scans in &self.rings {
            let found = entries_to_replay(scans);
            for (sector, entries) in entries_by_head(&found) {
                let what = "a log entry";
                let Some((at, held, unreadable)) =
                    head_blocks(sector, entries[0].unit_sectors, what)
                else {
                    continue;
                };
                let held: Vec<Option<&[u8]>> = held.iter().map(Option::as_deref).collect();
                // A member being rebuilt above this head has no parity here to mend.
                let end = sector + entries[0].unit_sectors;
                let here: Vec<Option<&File>> = (files.iter().zip(&in_sync_below))
                    .map(|(f, below)| f.as_ref().filter(|_| below.is_none_or(|b| end <= b)))
                    .collect();
                let head = (g, sector, at);
                let files = (&here[..], &unreadable[..], target.bad_blocks);
                replayed += replay_head(head, &entries, &held, files, &mut written)?;
            }
        }
        let present: Vec<Option<&File>> = files.iter().map(Option::as_ref).collect();
        for (sector, unit_sectors) in heads_to_resync_of_rings(&self.rings) {
            let Some((at, blocks, unreadable)) =
                head_blocks(sector, unit_sectors, "a log range's head")
            else {
                continue;
            };
            let head = (g, sector, at);
            let files = (&present[..], &unreadable[..], target.bad_blocks);
            replayed += resync_range_head(head, &blocks, files, &mut written)?;
        }
        for (file, _) in files.iter().zip(&written).filter(|(_, w)| **w) {
            file.as_ref().expect("written members are open").sync_data()?;
        }
        Ok(replayed)
    }
}

/// A head of a log range (`blocks` as read): its parity resynced from the data where that
/// changes it (most heads of a range were never torn), and a block its member could not read
/// written back (`files`: present members; `unreadable`: those that failed to read it);
/// returns how many parity blocks it wrote.
fn resync_range_head(
    (g, sector, at): (&Geometry, u64, u64),
    blocks: &[Option<Vec<u8>>],
    (files, unreadable, lists): Members<'_>,
    written: &mut [bool],
) -> io::Result<u64> {
    let map = g.stripe_map(StripeNumber(sector / g.chunk_sectors()));
    let mut blocks: Vec<Option<&[u8]>> = blocks.iter().map(Option::as_deref).collect();
    let writes = resynced_parity(g.level(), map, &blocks);
    let mut replayed = 0;
    for (m, block) in writes.iter().filter(|(m, b)| blocks[m.get()] != Some(&b[..])) {
        let file = files[m.get()].expect("a present member");
        file.write_all_at(block, at)?;
        written[m.get()] = true;
        replayed += 1;
    }
    for (m, block) in &writes {
        blocks[m.get()] = Some(block);
    }
    // Rebuilding is only for a member that failed to read: a missing one is not written.
    if unreadable.contains(&true) {
        let rebuilt = rebuilt_data(g.level(), map, &blocks);
        write_back(sector, at, rebuilt, (files, unreadable, lists), written);
    }
    Ok(replayed)
}

/// A stripe head's entries (all at once: `replay_blocks`) given its blocks as `held`: each
/// entry's parity block written at byte `at` of its parity member, if present; returns how
/// many.
fn replay_head(
    (g, sector, at): (&Geometry, u64, u64),
    entries: &[&FoundEntry],
    held: &[Option<&[u8]>],
    (files, unreadable, lists): Members<'_>,
    written: &mut [bool],
) -> io::Result<u64> {
    let map = g.stripe_map(StripeNumber(sector / g.chunk_sectors()));
    let blocks = replay_blocks(g.level(), map, entries, held);
    let data: Vec<Option<&[u8]>> = blocks.iter().map(Option::as_deref).collect();
    let slot = |m: usize| match map.roles[m] {
        DiskRole::Data { syndrome_slot, .. } => usize::from(syndrome_slot),
        _ => 0,
    };
    let unit = usize::try_from(entries[0].unit_sectors * SECTOR_BYTES).expect("a unit fits");
    let mut replayed = 0;
    for found in entries {
        // The parity member, whichever ring held the entry; missing, there is no parity to
        // mend.
        let Some(member) = found.parity_member(map).map(DiskIndex::get) else { continue };
        let Some(file) = files[member] else { continue };
        let block = found.block.as_deref().unwrap_or(&[]);
        file.write_all_at(&replayed_parity(&found.entry, block, unit, &data, slot), at)?;
        written[member] = true;
        replayed += 1;
    }
    let rebuilt = map
        .data_disk
        .iter()
        .filter(|d| unreadable[d.get()])
        .filter_map(|&d| blocks[d.get()].clone().map(|b| (d, b)))
        .collect();
    write_back(sector, at, rebuilt, (files, unreadable, lists), written);
    Ok(replayed)
}

/// A head's members as the replay writes them: per slot, the member's file where present
/// (and in sync there), whether it failed to read the head's block, and its bad block list
/// (`ReplayTarget::bad_blocks`).
type Members<'a> = (&'a [Option<&'a File>], &'a [bool], &'a [Option<Arc<BadBlockList>>]);

/// Writes back the data blocks a head's replay counted lost (`rebuilt`) where the member is
/// there but could not read its block (a latent bad sector: the write remaps it), so that
/// the sectors a cut tore beside the bad one do not stay on the disk disagreeing with parity
/// (the simulator, since the fifth session of 2026-12-05; `uraid_core::ppl::rebuilt_data`).
/// A block that cannot be written either is listed in the member's bad block log, as the
/// engine lists a failed data write: reads then rebuild it from parity, which the replay
/// made agree with the block as it counted it. Without a log to take it, it stays as it was,
/// read around by the engine, whose own rewrite then fails the member: no reason to refuse
/// the assemble here.
fn write_back(
    sector: u64,
    at: u64,
    rebuilt: Vec<(DiskIndex, Vec<u8>)>,
    (files, unreadable, lists): Members<'_>,
    written: &mut [bool],
) {
    for (d, block) in rebuilt.into_iter().filter(|(d, _)| unreadable[d.get()]) {
        let Some(file) = files[d.get()] else { continue };
        let m = d.get();
        let Err(e) = file.write_all_at(&block, at) else {
            say!(
                "uraid: member {m} could not read its block at sector {sector}: written back \
                 from parity"
            );
            written[m] = true;
            continue;
        };
        let span = at..at + block.len() as u64;
        let listed =
            lists.get(m).and_then(Option::as_ref).is_some_and(|l| l.list_failed_write(&span));
        let then = if listed { "listed in its bad block log" } else { "left as it was" };
        say!(
            "uraid: member {m} could not read its block at sector {sector}, nor write it back \
             ({e}): {then}"
        );
    }
}

/// Every member's `unit` bytes at `at`: None where the member is missing or the read fails (a
/// block that cannot be read counts as lost, as a missing member's).
fn read_blocks(files: &[Option<File>], at: u64, unit: usize) -> Vec<Option<Vec<u8>>> {
    files
        .iter()
        .map(|f| {
            let mut b = vec![0u8; unit];
            f.as_ref()?.read_exact_at(&mut b, at).ok().map(|()| b)
        })
        .collect()
}

/// Zeroes the first sector of every header on every ring of `members` (after a clean stop,
/// or a replay: nothing is left to replay), so that a later crash of a run without the log
/// (the kernel's) is never taken for one this log covers. Rings wrap, so headers may be
/// anywhere on them: each ring is read, and only the sectors that begin like a header are
/// written (`uraid_core::ppl::magic_sectors`); a ring that cannot be read is zeroed whole
/// (a write replaces a bad sector where a read fails).
pub fn clear_log<'a>(setup: &LogSetup, members: impl Iterator<Item = &'a Path>) -> io::Result<()> {
    let zeros = [0u8; SECTOR_BYTES as usize];
    let mut bytes = vec![0u8; usize::try_from(setup.ring_bytes()).expect("a ring fits")];
    for path in members {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        for ring in 0..setup.rings {
            let start = setup.ring_offset_bytes(ring);
            if file.read_exact_at(&mut bytes, start).is_err() {
                bytes.fill(0);
                file.write_all_at(&bytes, start)?;
                continue;
            }
            for at in magic_sectors(&bytes) {
                file.write_all_at(&zeros, start + at as u64)?;
            }
        }
        file.sync_data()?;
    }
    Ok(())
}

/// What one member's rings hold (for `uraid examine`): where the area is, and the records of
/// this array found there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberLog {
    pub area: LogArea,
    /// Generation headers of this array, entries they list, and the newest run's epoch.
    pub headers: usize,
    pub entries: usize,
    pub newest_epoch: Option<u64>,
    /// Of those, the newest run's at or above their ring's newest tail (the rings wrap:
    /// retired headers may be found whole). An upper bound: an advance writes its tail to
    /// only some members' rings, and the array's replay takes the newest tail of any.
    pub live_headers: usize,
    pub live_entries: usize,
}

/// Reads the log area of the member at `path` whose superblock is `sb` (its bitmap's size read
/// from the member itself). None: no room for a log there.
pub fn examine_member(path: &Path, sb: &Superblock1) -> io::Result<Option<MemberLog>> {
    let file = File::open(path)?;
    let bitmap_bytes = if sb.has_bitmap() {
        let at = sb
            .bitmap_at_bytes()
            .ok_or_else(|| io::Error::other("bitmap offset before the device start"))?;
        let mut head = vec![0u8; uraid_format::BITMAP_SUPER_BYTES];
        file.read_exact_at(&mut head, at)?;
        let bitmap = uraid_format::BitmapSuper::decode_for(&head, sb).map_err(io::Error::other)?;
        Some(bitmap.reserved_bytes() as u64)
    } else {
        None
    };
    let Some(area) = log_area(sb, bitmap_bytes) else { return Ok(None) };
    let setup = log_setup(area, sb.set_uuid.0, sb.events);
    let mut bytes = vec![0u8; usize::try_from(setup.ring_bytes()).expect("a ring fits")];
    let mut log = MemberLog {
        area,
        headers: 0,
        entries: 0,
        newest_epoch: None,
        live_headers: 0,
        live_entries: 0,
    };
    let mut scans = Vec::new();
    for ring in 0..setup.rings {
        file.read_exact_at(&mut bytes, setup.ring_offset_bytes(ring))?;
        let scan = scan_ring(&bytes, setup.uuid, DiskIndex(0));
        log.headers += scan.headers.len();
        log.entries += scan.entries.len();
        log.newest_epoch = log.newest_epoch.max(scan.headers.iter().map(|h| h.0).max());
        scans.push(scan);
    }
    for scan in &scans {
        let Some((epoch, _, tail)) = scan.headers.iter().map(|h| (h.0, h.1, h.2)).max() else {
            continue;
        };
        let live = |e: u64, g: u64| Some(e) == log.newest_epoch && e == epoch && g >= tail;
        log.live_headers += scan.headers.iter().filter(|h| live(h.0, h.1)).count();
        log.live_entries += scan.entries.iter().filter(|e| live(e.epoch, e.generation)).count();
    }
    Ok(Some(log))
}

/// The rings on `area`: `LOG_RINGS` of them, for the array `uuid`, this run's `epoch`.
#[must_use]
pub fn log_setup(area: LogArea, uuid: [u8; 16], epoch: u64) -> LogSetup {
    LogSetup {
        offset_bytes: area.offset_bytes,
        bytes: area.bytes,
        rings: LOG_RINGS,
        uuid,
        epoch,
        rotational: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ops::Range;

    const KIB: u64 = 1024;

    #[test]
    fn the_gap_after_md_metadata_and_before_the_data() {
        // The fixtures' layout (mdadm 4.2, 2 MiB members): superblock at 4 KiB, bitmap at
        // sb + 8 sectors (4 KiB), bad block log at sb + 16 sectors (4 KiB), data at 1 MiB.
        let with_bitmap = [(0, 8 * KIB), (8 * KIB, 12 * KIB), (12 * KIB, 16 * KIB)];
        let area = free_area(&with_bitmap, 1024 * KIB).unwrap();
        assert_eq!(area, LogArea { offset_bytes: 16 * KIB, bytes: 1008 * KIB });
        // Without a bitmap the bad block log sits at the same place: the same gap.
        let without = [(0, 8 * KIB), (12 * KIB, 16 * KIB)];
        assert_eq!(free_area(&without, 1024 * KIB), Some(area));
        // A bigger bitmap (64 KiB room) moves it on; a large headroom is capped at 16 MiB.
        let big = [(0, 8 * KIB), (8 * KIB, 72 * KIB), (72 * KIB, 76 * KIB)];
        let area = free_area(&big, 129 << 20).unwrap();
        assert_eq!(area, LogArea { offset_bytes: 76 * KIB, bytes: MAX_LOG_BYTES });
        // A bad block log at the end of the room (mdadm's fallback) leaves the gap before it.
        let end = [(0, 8 * KIB), (1020 * KIB, 1024 * KIB)];
        assert_eq!(
            free_area(&end, 1024 * KIB),
            Some(LogArea { offset_bytes: 8 * KIB, bytes: 1012 * KIB })
        );
        // Unaligned neighbours shrink the gap to whole 4 KiB blocks.
        let odd = [(0, 8 * KIB + 512), (600 * KIB + 512, 601 * KIB)];
        assert_eq!(
            free_area(&odd, 1024 * KIB),
            Some(LogArea { offset_bytes: 12 * KIB, bytes: 588 * KIB })
        );
        // Too little room: no log.
        assert_eq!(free_area(&with_bitmap, 256 * KIB), None);
        assert_eq!(free_area(&with_bitmap, 272 * KIB).map(|a| a.bytes), Some(256 * KIB));
    }

    #[test]
    fn a_superblocks_reserved_ranges() {
        let array = uraid_format::create::NewArray {
            set_uuid: uraid_format::Uuid([3; 16]),
            name: "t",
            level: uraid_format::Level::Raid5,
            layout: 2,
            chunk_sectors: 128,
            raid_disks: 4,
            size_sectors: 2048,
            data_offset_sectors: 2048,
            ctime_seconds: 1,
            utime_seconds: 1,
            events: 1,
            clean: true,
            internal_bitmap: true,
        };
        let roles: Vec<_> = (0..4).map(uraid_format::DevRole::Active).collect();
        let member = uraid_format::create::NewMember {
            dev_number: 0,
            device_uuid: uraid_format::Uuid([1; 16]),
            device_sectors: 4096,
            dev_roles: &roles,
        };
        let sb = uraid_format::create::build_superblock(&array, &member).unwrap();
        assert_eq!(reserved_ranges(&sb, None), None, "a bitmap of unknown size");
        let area = log_area(&sb, Some(4 * KIB)).unwrap();
        assert_eq!(area, LogArea { offset_bytes: 16 * KIB, bytes: 1008 * KIB });
        assert!(area_free_on(area, &sb, Some(4 * KIB)));
        let mut other = sb.clone();
        other.bblog_offset_sectors = 100; // inside the area
        assert!(!area_free_on(area, &other, Some(4 * KIB)));
    }

    /// RAID5 of 4, stripe 0: its blocks before a write (parity consistent), and the log entry
    /// of a write of data slot 0's whole block.
    fn d0_rewritten(map: &uraid_core::StripeMap, unit: usize) -> (Vec<Vec<u8>>, FoundEntry) {
        use uraid_core::ppl::{LogEntry, LogParity, crc32c};
        let (d0, p) = (map.data_disk[0].get(), map.p_disk.unwrap().get());
        let fill = |seed: u8| -> Vec<u8> {
            (0..unit).map(|i| (i as u8).wrapping_mul(seed) ^ seed).collect()
        };
        let mut old: Vec<Vec<u8>> = (0..4u8).map(|m| fill(m * 17 + 3)).collect();
        old[p] = vec![0; unit];
        for m in map.data_disk.iter().map(|d| d.get()) {
            let b = old[m].clone();
            old[p].iter_mut().zip(&b).for_each(|(x, y)| *x ^= y);
        }
        // d0's whole block rewritten: the partial parity is the others' xor, i.e. P ^ d0.
        let pp: Vec<u8> = old[p].iter().zip(&old[d0]).map(|(x, y)| x ^ y).collect();
        let mut entry = LogEntry {
            member_sector: 0,
            parity: LogParity::P,
            modified: Vec::new(),
            block_crc: Some(crc32c(&pp)),
            span: 1,
        };
        entry.add(d0, 0, 8, 8);
        let found = FoundEntry {
            epoch: 1,
            generation: 1,
            unit_sectors: 8,
            member: DiskIndex(p as u16),
            entry,
            block: Some(pp),
        };
        (old, found)
    }

    /// Each list a bad block log was given to make durable.
    type Persisted = Arc<std::sync::Mutex<Vec<Vec<Range<u64>>>>>;

    /// Bad block lists for `n` members (None each without `with_log`), and what each listing
    /// made durable.
    fn recording_lists(n: usize, with_log: bool) -> (Vec<Option<Arc<BadBlockList>>>, Persisted) {
        let persisted = Arc::new(std::sync::Mutex::new(Vec::new()));
        let lists = (0..n)
            .map(|_| {
                let persisted = persisted.clone();
                let persist: uraid_io::PersistBadBlocks = Box::new(move |r| {
                    persisted.lock().unwrap().push(r.to_vec());
                    Ok(())
                });
                with_log.then(|| BadBlockList::recording(Vec::new(), 0, persist))
            })
            .collect();
        (lists, persisted)
    }

    /// A torn block whose member could not read it at the replay (a latent bad sector) is
    /// written back as the replay counted it, consistent with the parity it wrote; a missing
    /// member's is not; one that cannot be written either is listed in the member's bad block
    /// log where it has one, else left, and the replay goes on.
    #[test]
    fn a_block_the_replay_could_not_read_is_written_back() {
        const UNIT: usize = 4096;
        let g = Geometry::new(
            uraid_core::Level::Raid5,
            uraid_core::Level::Raid5.default_layout(),
            4,
            65536,
        )
        .unwrap();
        let map = g.stripe_map(StripeNumber(0));
        let (d0, p) = (map.data_disk[0].get(), map.p_disk.unwrap().get());
        let (old, found) = d0_rewritten(map, UNIT);
        let cases =
            [(true, true, true), (false, true, true), (true, false, false), (true, false, true)];
        for (case, (unreadable_d0, writable_d0, with_log)) in cases.into_iter().enumerate() {
            let written_back = unreadable_d0 && writable_d0;
            let (lists, persisted) = recording_lists(4, with_log);
            let dir = std::env::temp_dir()
                .join(format!("uraid-ppl-write-back-{}-{case}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            // On the disks: d0 torn (its first half new), parity old (its write lost).
            let mut torn = old.clone();
            torn[d0][..UNIT / 2].fill(0xee);
            let files: Vec<File> = (0..4)
                .map(|m| {
                    let path = dir.join(format!("m{m}"));
                    std::fs::write(&path, &torn[m]).unwrap();
                    let writable = m != d0 || writable_d0;
                    OpenOptions::new().read(true).write(writable).open(path).unwrap()
                })
                .collect();
            let held: Vec<Option<&[u8]>> =
                (0..4).map(|m| (m != d0).then_some(&torn[m][..])).collect();
            let here: Vec<Option<&File>> = files.iter().map(Some).collect();
            let mut unreadable = [false; 4];
            unreadable[d0] = unreadable_d0;
            let mut written = vec![false; 4];
            let head = (&g, 0, 0);
            let members = (&here[..], &unreadable[..], &lists[..]);
            let replayed = replay_head(head, &[&found], &held, members, &mut written).unwrap();
            assert_eq!(replayed, 1);
            let on_disk = |m: usize| std::fs::read(dir.join(format!("m{m}"))).unwrap();
            // Inside the union the lost block comes from parity: the old contents.
            assert_eq!(on_disk(d0) == old[d0], written_back, "case {case}");
            assert_eq!(written[d0], written_back);
            assert_eq!(on_disk(p), old[p], "parity consistent with the block as counted");
            // Neither read nor written back: listed, durably, where the member has a log.
            let listed = unreadable_d0 && !writable_d0 && with_log;
            let want = if listed { vec![Range { start: 0, end: UNIT as u64 }] } else { vec![] };
            assert_eq!(lists[d0].as_ref().map(|l| l.bad()).unwrap_or_default(), want);
            assert_eq!(*persisted.lock().unwrap(), if listed { vec![want] } else { vec![] });
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
