//! Reshaping an array: md's reshape with a new data offset, forwards to more members, backwards
//! to fewer, either way to another layout or chunk size of the same level, or several of these
//! at once.
//!
//! The array keeps its addresses. Forwards, array sector `a` below the reshape position lives
//! where the new geometry puts it, at the new data offset; at and above it, where the old
//! geometry put it, at the old offset. Backwards (md's `reshape_backwards`) the position starts
//! at the new array's end and comes down: at and above it is the new shape, below it the old.
//! Each step copies a window of new stripes: their data chunks read from the old places (zeros
//! past the old array's end: md zeroes the room the reshape adds), their parity computed,
//! every chunk written at the new place. Then the caller makes the writes durable and records
//! the new position (md's `reshape_position`) in the superblocks. Fewer members hold less:
//! what lay past the new array's end is not copied (md has the array's size cut first).
//!
//! Why no backup file: forwards, the new offset is lower than the old on every member, by at
//! least a chunk (old and new, when the chunk changes), and the new geometry packs at least
//! as much data in a member's rows, so the new place of any array sector is below its old
//! place; a window ends where its writes would reach the old place of data not yet copied.
//! Backwards it is the mirror: the new offset higher by as much, the new geometry packing at
//! most as much, a window starting where its writes clear the old places of everything below
//! the position (`next_window`). A crash in the middle of a window leaves its sources intact,
//! and copying it again from the recorded position gives the same result. The property test
//! in `tests/reshape.rs` crashes copies at random writes, tears the write in flight and goes
//! on from the last recorded position.
//!
//! A member lost in the middle (`with_missing`, within the level's redundancy, as md goes on
//! with a degraded reshape) is never read or written: its old chunks are rebuilt from their
//! old rows, which the same window rule keeps intact from the position on.

use crate::geometry::{DiskRole, Geometry};
use crate::reconstruct::reconstruct;
use crate::units::{DiskIndex, SECTOR_BYTES, Sector, StripeNumber};
use std::ops::Range;
use thiserror::Error;

mod batch;
pub use batch::{MemberRead, MemberWrite};

/// Why a reshape cannot be laid out.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReshapeError {
    #[error(
        "a reshape here keeps the level and changes the members, the layout or the chunk \
         ({old} -> {new})"
    )]
    NotAGrow { old: String, new: String },
    #[error(
        "the new shape holds {new_sectors} sectors of the {old_sectors} the array holds: each \
         member's {component_sectors} sectors are not a whole number of the new chunks"
    )]
    Shrinks { old_sectors: u64, new_sectors: u64, component_sectors: u64 },
    #[error("{what}: {found} offsets given for {expected} members")]
    Offsets { what: &'static str, found: usize, expected: usize },
    #[error(
        "member {disk}: the new data offset {new_sectors} must be at least {gap_sectors} \
         sectors (a chunk, or the old and the new chunk when it changes) {direction} the old \
         {old_sectors}"
    )]
    NoRoom {
        disk: usize,
        old_sectors: u64,
        new_sectors: u64,
        gap_sectors: u64,
        /// "below" forwards, "above" backwards (fewer members).
        direction: &'static str,
    },
    #[error("reshape position {position} is not a whole number of the new stripes' {stripe}")]
    Position { position: u64, stripe: u64 },
    #[error("slots {slots:?} missing: {level} goes on with at most {max} missing")]
    TooManyMissing { slots: Vec<usize>, level: String, max: usize },
}

/// One array's reshape: the old and new shape and where each member's data is before and
/// after. Members keep their slots; the added ones take the slots past the old count.
#[derive(Clone, Debug)]
pub struct Reshape {
    old: Geometry,
    new: Geometry,
    /// Sectors of each member the array uses (md's component size): the reshape keeps it.
    component_sectors: u64,
    /// Data offsets in sectors from the device's start, by slot: the old members' before.
    old_offsets: Vec<u64>,
    /// And every member's after.
    new_offsets: Vec<u64>,
    /// Slots with no member (lost in the middle of the reshape): never read, never
    /// written; their old chunks are rebuilt from the rest of their old row. As many as the
    /// old or the new shape has, the more.
    missing: Vec<bool>,
    /// md's `reshape_backwards`: fewer members, or the same moving up.
    backwards: bool,
}

/// Member I/O for the copy: whole byte ranges from a device's start.
pub trait ReshapeIo {
    type Error;
    fn read(&mut self, disk: DiskIndex, at_bytes: u64, buf: &mut [u8]) -> Result<(), Self::Error>;
    fn write(&mut self, disk: DiskIndex, at_bytes: u64, buf: &[u8]) -> Result<(), Self::Error>;

    /// Every read of a batch (no two overlap): in any order, or at once.
    fn read_all(&mut self, reads: &mut [MemberRead<'_>]) -> Result<(), Self::Error> {
        reads.iter_mut().try_for_each(|r| self.read(r.disk, r.at_bytes, r.buf))
    }

    /// Every write of a batch (no two overlap): in any order, or at once.
    fn write_all(&mut self, writes: &[MemberWrite<'_>]) -> Result<(), Self::Error> {
        writes.iter().try_for_each(|w| self.write(w.disk, w.at_bytes, w.buf))
    }
}

impl Reshape {
    pub fn new(
        old: Geometry,
        new: Geometry,
        component_sectors: u64,
        old_offsets: Vec<u64>,
        new_offsets: Vec<u64>,
    ) -> Result<Reshape, ReshapeError> {
        let same_shape = old.layout() == new.layout() && old.chunk_sectors() == new.chunk_sectors();
        let changes = new.raid_disks() != old.raid_disks() || !same_shape;
        if old.level() != new.level() || !changes {
            let shape = |g: &Geometry| {
                format!(
                    "raid{} {:?} {} x {}K",
                    g.level().number(),
                    g.layout(),
                    g.raid_disks(),
                    g.chunk_bytes() >> 10
                )
            };
            return Err(ReshapeError::NotAGrow { old: shape(&old), new: shape(&new) });
        }
        for (what, offsets, expected) in [
            ("old data offsets", &old_offsets, old.raid_disks()),
            ("new data offsets", &new_offsets, new.raid_disks()),
        ] {
            if offsets.len() != expected {
                return Err(ReshapeError::Offsets { what, found: offsets.len(), expected });
            }
        }
        let (old_sectors, new_sectors) =
            (old.array_sectors(component_sectors), new.array_sectors(component_sectors));
        // Fewer members drop the array's end by design; anything else must keep it all.
        let fewer = new.raid_disks() < old.raid_disks();
        if new_sectors < old_sectors && !fewer {
            return Err(ReshapeError::Shrinks { old_sectors, new_sectors, component_sectors });
        }
        // Fewer members go backwards, more forwards, the same as the offsets say.
        let backwards =
            fewer || (new.raid_disks() == old.raid_disks() && new_offsets[0] > old_offsets[0]);
        let gap_sectors = Self::gap_sectors(&old, &new);
        for (disk, (&old_sectors, &new_sectors)) in old_offsets.iter().zip(&new_offsets).enumerate()
        {
            let (low, high, direction) = if backwards {
                (old_sectors, new_sectors, "above")
            } else {
                (new_sectors, old_sectors, "below")
            };
            if low.saturating_add(gap_sectors) > high {
                return Err(ReshapeError::NoRoom {
                    disk,
                    old_sectors,
                    new_sectors,
                    gap_sectors,
                    direction,
                });
            }
        }
        let missing = vec![false; new.raid_disks().max(old.raid_disks())];
        Ok(Reshape { old, new, component_sectors, old_offsets, new_offsets, missing, backwards })
    }

    /// How far below the old data offset the new one must be at least, so that every window
    /// holds a new stripe (`next_window`): a chunk; the old and the new chunk when it changes
    /// (the old rows then end up to an old chunk short of the new ones).
    #[must_use]
    pub fn gap_sectors(old: &Geometry, new: &Geometry) -> u64 {
        let (old_chunk, new_chunk) = (old.chunk_sectors(), new.chunk_sectors());
        if old_chunk == new_chunk { new_chunk } else { old_chunk + new_chunk }
    }

    /// The same reshape with these slots missing (a member lost in the middle of it), as md
    /// goes on with a degraded reshape: within the level's redundancy.
    pub fn with_missing(mut self, slots: &[usize]) -> Result<Reshape, ReshapeError> {
        let in_range = slots.iter().all(|&s| s < self.missing.len());
        if !in_range || slots.len() > self.new.max_degraded() {
            let (level, max) =
                (format!("raid{}", self.new.level().number()), self.new.max_degraded());
            return Err(ReshapeError::TooManyMissing { slots: slots.to_vec(), level, max });
        }
        for &slot in slots {
            self.missing[slot] = true;
        }
        Ok(self)
    }

    #[must_use]
    pub fn old_geometry(&self) -> &Geometry {
        &self.old
    }

    #[must_use]
    pub fn new_geometry(&self) -> &Geometry {
        &self.new
    }

    /// Array sectors before the reshape (the data it moves).
    #[must_use]
    pub fn old_array_sectors(&self) -> u64 {
        self.old.array_sectors(self.component_sectors)
    }

    /// Array sectors after it.
    #[must_use]
    pub fn new_array_sectors(&self) -> u64 {
        self.new.array_sectors(self.component_sectors)
    }

    /// md's `reshape_backwards`: the position comes down from the new array's end.
    #[must_use]
    pub fn is_backwards(&self) -> bool {
        self.backwards
    }

    /// The position before anything is copied: the array's start forwards, the new array's
    /// end backwards.
    #[must_use]
    pub fn start_position(&self) -> u64 {
        if self.backwards { self.new_array_sectors() } else { 0 }
    }

    /// The position once everything is copied.
    #[must_use]
    pub fn end_position(&self) -> u64 {
        if self.backwards { 0 } else { self.new_array_sectors() }
    }

    /// Refuses a recorded position the copy cannot have left (md's progress is in whole new
    /// stripes, either way).
    pub fn check_position(&self, position: u64) -> Result<(), ReshapeError> {
        let stripe = self.new.stripe_data_sectors();
        if position.is_multiple_of(stripe) && position <= self.new_array_sectors() {
            return Ok(());
        }
        Err(ReshapeError::Position { position, stripe })
    }

    /// The new stripes the next step copies from `position` (array sectors, whole new
    /// stripes), at most `max_stripes`; `None` when the reshape is done. Forwards, its writes
    /// end at or below the old place of every array sector not yet copied, on every old
    /// member; backwards they start at or above it.
    #[must_use]
    pub fn next_window(&self, position: u64, max_stripes: u64) -> Option<Range<u64>> {
        if self.backwards {
            return self.next_window_down(position, max_stripes);
        }
        let total = self.new.stripes(self.component_sectors);
        let first = position / self.new.stripe_data_sectors();
        if first >= total {
            return None;
        }
        let mut last = total.min(first + max_stripes.max(1));
        if position < self.old_array_sectors() {
            let (old_chunk, new_chunk) = (self.old.chunk_sectors(), self.new.chunk_sectors());
            // Sectors from `position` on sit at old chunk rows from this one on.
            let old_row = position / self.old.stripe_data_sectors();
            for (&old, &new) in self.old_offsets.iter().zip(&self.new_offsets) {
                // New rows [first, last) end at new + last * new_chunk, at or below
                // old + old_row * old_chunk.
                let bound = (old - new + old_row * old_chunk) / new_chunk;
                last = last.min(bound);
            }
        }
        // Never an empty window (a loop copying nothing for ever): `gap_sectors`.
        assert!(last > first, "Reshape::new keeps the gap between the offsets");
        Some(first..last)
    }

    /// `next_window` backwards: the new stripes below `position`.
    fn next_window_down(&self, position: u64, max_stripes: u64) -> Option<Range<u64>> {
        let last = position / self.new.stripe_data_sectors();
        if last == 0 {
            return None;
        }
        let mut first = last.saturating_sub(max_stripes.max(1));
        let (old_chunk, new_chunk) = (self.old.chunk_sectors(), self.new.chunk_sectors());
        // Sectors below `position` sit at old chunk rows below this one.
        let old_rows =
            position.min(self.old_array_sectors()).div_ceil(self.old.stripe_data_sectors());
        for (&old, &new) in self.old_offsets.iter().zip(&self.new_offsets) {
            // New rows [first, last) start at new + first * new_chunk, at or above
            // old + old_rows * old_chunk.
            first = first.max((old + old_rows * old_chunk).saturating_sub(new).div_ceil(new_chunk));
        }
        // Never an empty window: the gap, and fewer data members pack no more in a row.
        assert!(last > first, "Reshape::new keeps the gap between the offsets");
        Some(first..last)
    }

    /// Copies the new stripes `window` (from `next_window`) and returns the position after
    /// them (before them, backwards). Whole new stripes go in batches of at most
    /// `batch_bytes` of array data (`batch.rs`). Stripes, or old rows, larger than that go a
    /// piece at a time, `unit_bytes` bounding the memory: each chunk in pieces of at most
    /// that many bytes (a power of two of at least 512 dividing both chunks, or the smaller
    /// chunk: a piece of a new chunk then lies within one old chunk).
    pub fn copy_window<I: ReshapeIo>(
        &self,
        io: &mut I,
        window: Range<u64>,
        unit_bytes: u64,
        batch_bytes: u64,
    ) -> Result<u64, I::Error> {
        let done = if self.backwards { window.start } else { window.end };
        // A batch holds its old rows whole (every old member's chunk): those must fit too.
        let old_row_bytes = self.old.chunk_sectors() * self.old.raid_disks() as u64 * SECTOR_BYTES;
        let per_batch = if old_row_bytes <= batch_bytes {
            batch_bytes / (self.new.stripe_data_sectors() * SECTOR_BYTES)
        } else {
            0
        };
        if per_batch > 0 {
            let (mut first, mut buffers) = (window.start, batch::BatchBuffers::default());
            while first < window.end {
                let end = window.end.min(first + per_batch);
                self.copy_batch(io, first..end, &mut buffers)?;
                first = end;
            }
            return Ok(done * self.new.stripe_data_sectors());
        }
        let chunk_bytes = self.new.chunk_bytes();
        let old_chunk_bytes = self.old.chunk_bytes();
        let unit = if chunk_bytes.is_multiple_of(unit_bytes)
            && old_chunk_bytes.is_multiple_of(unit_bytes)
        {
            unit_bytes
        } else {
            chunk_bytes.min(old_chunk_bytes)
        };
        let mut blocks = vec![vec![0u8; unit as usize]; self.new.raid_disks()];
        let mut old_row = OldRow::new(self.old.raid_disks(), unit);
        for stripe in window.clone() {
            for start in (0..chunk_bytes).step_by(unit as usize) {
                self.copy_unit(io, StripeNumber(stripe), start, &mut blocks, &mut old_row)?;
            }
        }
        Ok(done * self.new.stripe_data_sectors())
    }

    /// Bytes `[start, start + unit)` of every chunk of one new stripe.
    fn copy_unit<I: ReshapeIo>(
        &self,
        io: &mut I,
        stripe: StripeNumber,
        start: u64,
        blocks: &mut [Vec<u8>],
        old_row: &mut OldRow,
    ) -> Result<(), I::Error> {
        let map = self.new.stripe_map(stripe);
        let chunk = self.new.chunk_sectors();
        let old_end = self.old_array_sectors();
        let mut lost = vec![false; blocks.len()];
        for (disk, role) in map.roles.iter().enumerate() {
            let DiskRole::Data { slot, .. } = *role else {
                lost[disk] = true;
                continue;
            };
            let chunk_number = stripe.0 * self.new.data_disks() as u64 + u64::from(slot);
            // The piece lies within one old chunk (`copy_window`), or wholly past the old end.
            let array_sector = chunk_number * chunk + start / SECTOR_BYTES;
            if array_sector >= old_end {
                blocks[disk].fill(0);
                continue;
            }
            let from = self.old.map_sector(Sector(array_sector));
            if self.missing[from.disk.get()] {
                let in_chunk = from.member_sector.0 - from.stripe.0 * self.old.chunk_sectors();
                let unit = self.rebuilt_old(io, old_row, from.stripe, in_chunk * SECTOR_BYTES)?;
                blocks[disk].copy_from_slice(&unit[from.disk.get()]);
                continue;
            }
            let at = (self.old_offsets[from.disk.get()] + from.member_sector.0) * SECTOR_BYTES;
            io.read(from.disk, at, &mut blocks[disk])?;
        }
        let mut views: Vec<&mut [u8]> = blocks.iter_mut().map(Vec::as_mut_slice).collect();
        reconstruct(self.new.level(), map, &mut views, &lost)
            .expect("only P and Q are computed, within any level's redundancy");
        for (disk, block) in blocks.iter().enumerate().filter(|(d, _)| !self.missing[*d]) {
            let at = (self.new_offsets[disk] + stripe.0 * chunk) * SECTOR_BYTES;
            io.write(DiskIndex(disk as u16), at + start, block)?;
        }
        Ok(())
    }

    /// Bytes `[start, start + unit)` of every member's chunk in old row `stripe`, the missing
    /// ones rebuilt. The window rule keeps every old row at or after the position intact, so
    /// the row of any sector still to copy reads as it was.
    fn rebuilt_old<'r, I: ReshapeIo>(
        &self,
        io: &mut I,
        row: &'r mut OldRow,
        stripe: StripeNumber,
        start: u64,
    ) -> Result<&'r [Vec<u8>], I::Error> {
        if row.holds != Some((stripe.0, start)) {
            row.holds = None;
            let chunk = self.old.chunk_sectors();
            let lost = &self.missing[..self.old.raid_disks()];
            for (disk, block) in row.blocks.iter_mut().enumerate().filter(|(d, _)| !lost[*d]) {
                let at = (self.old_offsets[disk] + stripe.0 * chunk) * SECTOR_BYTES;
                io.read(DiskIndex(disk as u16), at + start, block)?;
            }
            let mut views: Vec<&mut [u8]> = row.blocks.iter_mut().map(Vec::as_mut_slice).collect();
            reconstruct(self.old.level(), self.old.stripe_map(stripe), &mut views, lost)
                .expect("with_missing keeps within the redundancy");
            row.holds = Some((stripe.0, start));
        }
        Ok(&row.blocks)
    }
}

/// The old row last rebuilt (a row's lost chunks are asked for one by one).
struct OldRow {
    blocks: Vec<Vec<u8>>,
    /// Its stripe and the offset in the chunk.
    holds: Option<(u64, u64)>,
}

impl OldRow {
    fn new(old_disks: usize, unit: u64) -> OldRow {
        OldRow { blocks: vec![vec![0u8; unit as usize]; old_disks], holds: None }
    }
}
