//! The copy of whole new stripes a batch at a time: each old member's chunks of the batch read
//! in runs of whole chunks (one read per run of rows, its parity rows skipped; whole rows when
//! a slot is missing, to rebuild it), every new member's chunks written as one range. A
//! member's I/O is then large and sequential, and the members' can run at once
//! (`ReshapeIo::read_all`, `write_all`): read a piece of a chunk at a time, one member after
//! another, the copy waited for every disk in turn and an HDD sought between its old and new
//! rows for every piece.
//!
//! The order within a window does not matter: its writes never reach the old rows of
//! anything from the position on (`next_window`), so a batch's sources are intact whatever
//! the batches before it wrote.

use super::{Reshape, ReshapeIo};
use crate::buffer::BlockBuf;
use crate::geometry::DiskRole;
use crate::reconstruct::reconstruct;
use crate::units::{DiskIndex, SECTOR_BYTES, Sector, StripeNumber};
use std::ops::Range;

/// A read of a batch: `buf.len()` bytes of `disk` from `at_bytes` (from the device's start).
pub struct MemberRead<'a> {
    pub disk: DiskIndex,
    pub at_bytes: u64,
    pub buf: &'a mut [u8],
}

/// A write of a batch: `buf` to `disk` at `at_bytes`.
pub struct MemberWrite<'a> {
    pub disk: DiskIndex,
    pub at_bytes: u64,
    pub buf: &'a [u8],
}

/// The buffers of a window's batches, kept from one batch to the next (fresh ones cost a
/// page fault a page each time), page-aligned: a runtime may take them to the members with
/// O_DIRECT (every read and write of a batch starts a chunk from a data offset).
#[derive(Default)]
pub(super) struct BatchBuffers {
    /// The old members' rows, by old slot.
    old: Vec<BlockBuf>,
    /// The new members' chunks, by new slot.
    new: Vec<BlockBuf>,
}

/// `buffers[..count]`, each `bytes` long (their contents as they were: every byte the copy
/// uses is read or written first).
fn sized(buffers: &mut Vec<BlockBuf>, count: usize, bytes: usize) -> &mut [BlockBuf] {
    buffers.resize_with(count, BlockBuf::default);
    for b in buffers.iter_mut() {
        b.resize_any(bytes);
    }
    buffers
}

impl Reshape {
    /// Copies the new stripes `stripes`.
    pub(super) fn copy_batch<I: ReshapeIo>(
        &self,
        io: &mut I,
        stripes: Range<u64>,
        buffers: &mut BatchBuffers,
    ) -> Result<(), I::Error> {
        let new = &self.new;
        let nsd = new.stripe_data_sectors();
        let start = stripes.start * nsd;
        // The old array's sectors in the batch (past its end the new stripes hold zeros).
        let sectors = start..(stripes.end * nsd).min(self.old_array_sectors());
        let old_data = OldData::read(self, io, sectors, &mut buffers.old)?;
        let chunk_bytes = (new.chunk_sectors() * SECTOR_BYTES) as usize;
        let member_bytes = (stripes.end - stripes.start) as usize * chunk_bytes;
        let members = sized(&mut buffers.new, new.raid_disks(), member_bytes);
        let mut chunks: Vec<_> = members.iter_mut().map(|m| m.chunks_mut(chunk_bytes)).collect();
        let mut lost = vec![false; new.raid_disks()];
        for stripe in stripes.clone() {
            let map = new.stripe_map(StripeNumber(stripe));
            let mut views: Vec<&mut [u8]> =
                chunks.iter_mut().map(|c| c.next().expect("a chunk a stripe")).collect();
            for (disk, role) in map.roles.iter().enumerate() {
                lost[disk] = true;
                if let DiskRole::Data { slot, .. } = *role {
                    let chunk_number = stripe * new.data_disks() as u64 + u64::from(slot);
                    old_data.copy_to(self, chunk_number * new.chunk_sectors(), views[disk]);
                    lost[disk] = false;
                }
            }
            reconstruct(new.level(), map, &mut views, &lost)
                .expect("only P and Q are computed, within any level's redundancy");
        }
        let at = |disk: usize| self.new_offsets[disk] + stripes.start * new.chunk_sectors();
        let writes: Vec<MemberWrite<'_>> = members
            .iter()
            .enumerate()
            .filter(|&(disk, _)| !self.missing[disk])
            .map(|(disk, buf)| MemberWrite {
                disk: DiskIndex(disk as u16),
                at_bytes: at(disk) * SECTOR_BYTES,
                buf,
            })
            .collect();
        io.write_all(&writes)
    }
}

/// The old members' chunks holding a batch's array sectors `sectors`, as read: each member's
/// old rows `rows` (its chunks outside `sectors` and its parity not read). With a slot
/// missing, the rows are read whole and its chunks rebuilt from them: the window rule keeps
/// every old row holding a sector not yet copied intact.
struct OldData<'b> {
    sectors: Range<u64>,
    rows: Range<u64>,
    members: &'b [BlockBuf],
}

impl<'b> OldData<'b> {
    fn read<I: ReshapeIo>(
        reshape: &Reshape,
        io: &mut I,
        sectors: Range<u64>,
        buffers: &'b mut Vec<BlockBuf>,
    ) -> Result<OldData<'b>, I::Error> {
        let old = &reshape.old;
        let (chunk, data_disks) = (old.chunk_sectors(), old.data_disks() as u64);
        let rows = if sectors.is_empty() {
            0..0
        } else {
            sectors.start / (chunk * data_disks)..(sectors.end - 1) / (chunk * data_disks) + 1
        };
        let row_bytes = chunk * SECTOR_BYTES;
        let members =
            sized(buffers, old.raid_disks(), ((rows.end - rows.start) * row_bytes) as usize);
        // Runs of rows whose chunk holds some of `sectors`, member by member: (first, count).
        let mut runs: Vec<Vec<(u64, u64)>> = vec![Vec::new(); old.raid_disks()];
        let lost = &reshape.missing[..old.raid_disks()];
        let degraded = lost.iter().any(|&m| m);
        if degraded && !rows.is_empty() {
            for (runs, _) in runs.iter_mut().zip(lost).filter(|(_, lost)| !**lost) {
                runs.push((rows.start, rows.end - rows.start));
            }
        } else if !sectors.is_empty() {
            for chunk_number in sectors.start / chunk..=(sectors.end - 1) / chunk {
                let row = chunk_number / data_disks;
                let slot = (chunk_number % data_disks) as usize;
                let disk = old.stripe_map(StripeNumber(row)).data_disk[slot].get();
                match runs[disk].last_mut() {
                    Some((first, count)) if *first + *count == row => *count += 1,
                    _ => runs[disk].push((row, 1)),
                }
            }
        }
        let mut reads = Vec::new();
        for (disk, member) in members.iter_mut().enumerate() {
            let (mut rest, mut base) = (&mut member[..], rows.start);
            for &(first, count) in &runs[disk] {
                let (_, tail) = rest.split_at_mut(((first - base) * row_bytes) as usize);
                let (buf, tail) = tail.split_at_mut((count * row_bytes) as usize);
                let at_bytes = (reshape.old_offsets[disk] + first * chunk) * SECTOR_BYTES;
                reads.push(MemberRead { disk: DiskIndex(disk as u16), at_bytes, buf });
                (rest, base) = (tail, first + count);
            }
        }
        io.read_all(&mut reads)?;
        if degraded {
            rebuild_rows(reshape, rows.clone(), members);
        }
        Ok(OldData { sectors, rows, members })
    }

    /// Fills `out` with the array's contents from sector `first` (zeros past the old end).
    fn copy_to(&self, reshape: &Reshape, first: u64, out: &mut [u8]) {
        let chunk = reshape.old.chunk_sectors();
        let end = first + out.len() as u64 / SECTOR_BYTES;
        let mut sector = first;
        // Past the old end (a whole number of old chunks): the room the reshape adds, zeros.
        let past = ((end.min(self.sectors.end).max(first) - first) * SECTOR_BYTES) as usize;
        out[past..].fill(0);
        while sector < end.min(self.sectors.end) {
            let from = reshape.old.map_sector(Sector(sector));
            let sectors = (chunk - from.member_sector.0 % chunk).min(end - sector);
            let src = ((from.member_sector.0 - self.rows.start * chunk) * SECTOR_BYTES) as usize;
            let dst = ((sector - first) * SECTOR_BYTES) as usize;
            let len = (sectors * SECTOR_BYTES) as usize;
            out[dst..dst + len].copy_from_slice(&self.members[from.disk.get()][src..src + len]);
            sector += sectors;
        }
    }
}

/// The missing members' chunks of old rows `rows`, rebuilt from the rest of each row.
fn rebuild_rows(reshape: &Reshape, rows: Range<u64>, members: &mut [BlockBuf]) {
    let old = &reshape.old;
    let row_bytes = (old.chunk_sectors() * SECTOR_BYTES) as usize;
    let lost = &reshape.missing[..old.raid_disks()];
    let mut chunks: Vec<_> = members.iter_mut().map(|m| m.chunks_mut(row_bytes)).collect();
    for row in rows {
        let mut views: Vec<&mut [u8]> =
            chunks.iter_mut().map(|c| c.next().expect("a chunk a row")).collect();
        reconstruct(old.level(), old.stripe_map(StripeNumber(row)), &mut views, lost)
            .expect("with_missing keeps within the redundancy");
    }
}
