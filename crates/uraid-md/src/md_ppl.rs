//! md's own partial parity log (RAID5 `mdadm --consistency-policy=ppl`; records:
//! `uraid_format::md_ppl`) at assemble, done as the kernel does it at an array's start, so
//! that such an array moves between md and uraid either way:
//!
//! * Dirty (the kernel crashed): every present member's newest log write is replayed: for
//!   each of its entries whose partial parity checks, each row's parity becomes the partial
//!   parity XOR the entry's data as the members hold it now (rows with a data block on a
//!   missing member are left alone: that block was being written). A member being rebuilt
//!   holds its data below its recovery offset, as the kernel takes it (until the eighth
//!   session of 2026-11-29 it counted as missing there, and a replay that left such rows
//!   alone could still leave the array clean, so no resync mended them). A replay that mends at
//!   least one entry with no mismatch, of an array dirty from sector 0, leaves it clean (md
//!   marks it so and does not resync); anything else resyncs as usual.
//! * Always, clean or dirty, on every present member: the area is zeroed and an empty header
//!   written (generation 0), as md does. The records have served, and a later start (the
//!   kernel's, after a crash of uraid, whose own log md does not read) must never replay
//!   them over data changed since: md finds no entries then and resyncs.
//!
//! A read or write error stops the start, as it stops md's.

use crate::ppl::ReplayTarget;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use uraid_core::{Level, SECTOR_BYTES, Sector};
use uraid_format::Superblock1;
use uraid_format::md_ppl::{EntryCoverage, HEADER_BYTES, MdPplEntry, MdPplHeader, newest_in_chain};

/// What a start did with md's PPL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MdPplStart {
    /// Entries replayed (every row with its data present rewritten).
    pub recovered_entries: u64,
    /// Entries that could not be trusted (partial parity that fails its checksum, a shape or
    /// place md would not write) and members whose area holds no valid header.
    pub mismatches: u64,
    /// Parity blocks rewritten.
    pub parity_blocks: u64,
}

impl MdPplStart {
    /// md's rule: a replay makes a dirty array clean when it was dirty from its start, mended
    /// something and met no mismatch.
    #[must_use]
    pub fn leaves_clean(&self, resync_offset: u64) -> bool {
        resync_offset == 0 && self.recovered_entries > 0 && self.mismatches == 0
    }
}

/// md's PPL area on a member with superblock `sb`, as (byte offset, bytes), with the kernel's
/// rounding (a header, then whole 4 KiB); None without one.
#[must_use]
pub fn area(sb: &Superblock1) -> Option<(u64, u64)> {
    let (offset, size) = sb.ppl()?;
    let usable = u64::from(size).checked_sub(8)? / 8 * 8;
    let start = sb.super_offset_sectors.checked_add_signed(i64::from(offset))?;
    (usable > 0).then_some((start * SECTOR_BYTES, (usable + 8) * SECTOR_BYTES))
}

/// Empties md's PPL area on `path` (zeros, then md's empty header), as md does at a start and
/// when it adds a device; `sb`: the array's superblock. Nothing without an area.
pub fn empty_area(path: &std::path::Path, sb: &Superblock1) -> io::Result<()> {
    let Some((at, bytes)) = area(sb) else { return Ok(()) };
    let mut area = vec![0u8; usize::try_from(bytes).map_err(io::Error::other)?];
    let empty = MdPplHeader {
        signature: uraid_format::md_ppl::signature(&sb.set_uuid.0),
        generation: 0,
        entries: Vec::new(),
    };
    area[..HEADER_BYTES].copy_from_slice(&empty.encode());
    let file = OpenOptions::new().write(true).open(path)?;
    file.write_all_at(&area, at)?;
    file.sync_data()
}

/// Replays md's PPL when `dirty`, then empties it on every present member (module docs) and
/// on `others` (members being rebuilt, spares: whatever their areas hold is not this run's,
/// and a later start of md's must not replay it). `sb`: the freshest superblock (md's own
/// placement is the same on every member).
pub fn start(
    target: &ReplayTarget<'_>,
    sb: &Superblock1,
    dirty: bool,
    others: &[std::path::PathBuf],
) -> io::Result<MdPplStart> {
    let Some((at, bytes)) = area(sb) else { return Ok(MdPplStart::default()) };
    if target.geometry.level() != Level::Raid5 {
        return Err(io::Error::other(format!(
            "md's partial parity log is for RAID5 only, and this array is {:?} (md will not \
             start it either)",
            target.geometry.level()
        )));
    }
    // Members in sync and being rebuilt; only the logs of those in sync are read, as md does.
    let (paths, in_sync_below) = target.replayed_members();
    let files = crate::ppl::open_members(&paths)?;
    let signature = uraid_format::md_ppl::signature(&sb.set_uuid.0);
    let mut outcome = MdPplStart::default();
    let mut area = vec![0u8; usize::try_from(bytes).map_err(io::Error::other)?];
    if dirty {
        for (slot, file) in files.iter().enumerate() {
            let Some(file) = file.as_ref().filter(|_| in_sync_below[slot].is_none()) else {
                continue;
            };
            file.read_exact_at(&mut area, at)?;
            match newest_in_chain(&area, signature) {
                None => outcome.mismatches += 1,
                Some((h_at, header)) => {
                    let replay = Replay {
                        target,
                        files: &files,
                        in_sync_below: &in_sync_below,
                        slot,
                        outcome: &mut outcome,
                    };
                    replay.header(&header, &area[h_at + HEADER_BYTES..])?;
                }
            }
        }
        // The parity written is durable before the records that mended it are emptied.
        for f in files.iter().flatten() {
            f.sync_data()?;
        }
    }
    for path in target.members.iter().flatten().chain(others) {
        empty_area(path, sb)?;
    }
    Ok(outcome)
}

/// One member's log write being replayed.
struct Replay<'a, 'o> {
    target: &'a ReplayTarget<'a>,
    files: &'a [Option<File>],
    /// Per slot, for a member being rebuilt, the member sector it is in sync below.
    in_sync_below: &'a [Option<u64>],
    /// The member whose log it is: the parity member of every stripe it names.
    slot: usize,
    outcome: &'o mut MdPplStart,
}

impl Replay<'_, '_> {
    /// Every entry of `header`; `pp`: what follows the header in the area.
    fn header(mut self, header: &MdPplHeader, pp: &[u8]) -> io::Result<()> {
        let mut pp_at = 0usize;
        for e in &header.entries {
            let len = e.pp_size as usize;
            let block = pp
                .get(pp_at..pp_at + len)
                .filter(|b| uraid_format::md_ppl::crc32c(b) == e.checksum);
            pp_at += len;
            match block {
                Some(block) if self.entry(e, block)? => self.outcome.recovered_entries += 1,
                _ => self.outcome.mismatches += 1,
            }
        }
        Ok(())
    }

    /// One entry (see the module docs); false when md would not have written it (its shape,
    /// sectors beyond the array, parity on another member), which mends nothing.
    fn entry(&mut self, e: &MdPplEntry, pp: &[u8]) -> io::Result<bool> {
        let g = self.target.geometry;
        let chunk = g.chunk_sectors();
        let Some(c) = EntryCoverage::of(e, chunk, g.data_disks() as u64) else { return Ok(false) };
        let array_sectors = g.array_sectors(self.target.member_sectors);
        let parity_here = |i: u64| {
            let a = g.map_sector(Sector(c.first + i));
            let p = g.stripe_map(a.stripe).p_disk.map(uraid_core::DiskIndex::get);
            (p == Some(self.slot) && e.parity_disk as usize == self.slot).then_some(a.member_sector)
        };
        let fits = c.last <= array_sectors && (0..c.strip).all(|i| parity_here(i).is_some());
        if !fits {
            return Ok(false);
        }
        // md reads and writes 4 KiB at a time when the entry is 4 KiB-aligned, else sectors;
        // the result is the same.
        let unit = if c.first % 8 == 0 && c.last % 8 == 0 { 8 } else { 1 };
        let bytes = (unit * SECTOR_BYTES) as usize;
        let mut acc = vec![0u8; bytes];
        let mut data = vec![0u8; bytes];
        'row: for i in (0..c.strip).step_by(unit as usize) {
            acc.fill(0);
            for r in c.sectors_at(i, chunk) {
                let a = g.map_sector(Sector(r));
                let below = self.in_sync_below[a.disk.get()];
                let Some(file) = &self.files[a.disk.get()] else { continue 'row };
                if below.is_some_and(|b| a.member_sector.0 + unit > b) {
                    continue 'row;
                }
                file.read_exact_at(&mut data, self.byte_at(a.member_sector))?;
                xor(&mut acc, &data);
            }
            if !pp.is_empty() {
                let at = (i * SECTOR_BYTES) as usize;
                xor(&mut acc, &pp[at..at + bytes]);
            }
            let parity = self.files[self.slot].as_ref().expect("the log's own member is present");
            let sector = parity_here(i).expect("checked above");
            parity.write_all_at(&acc, self.byte_at(sector))?;
            self.outcome.parity_blocks += 1;
        }
        Ok(true)
    }

    fn byte_at(&self, member_sector: Sector) -> u64 {
        self.target.data_offset_bytes + member_sector.0 * SECTOR_BYTES
    }
}

fn xor(acc: &mut [u8], b: &[u8]) {
    for (a, b) in acc.iter_mut().zip(b) {
        *a ^= b;
    }
}
