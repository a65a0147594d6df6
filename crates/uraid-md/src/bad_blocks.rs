//! Each member's md bad block log, kept while the array runs: the list the runtime's member
//! instances share (`uraid_io::BadBlockList`), and the writer that makes a listing durable
//! before the failed write it lists completes (md blocks such a write on its superblock update
//! the same way).
//!
//! The writer puts the list in the log area and, when the list gains its first entries (or
//! loses its last), flips md's BAD_BLOCKS feature bit in the device's last superblock and
//! writes that again: md reads the log only when the bit is set. The superblock comes from
//! the device's `SuperblockSlot`, which `Metadata::write` fills under the same lock, so the
//! two writers never put an older superblock over a newer one, and a listing needs no commit
//! (which would wait for the metadata lock from a worker thread).

use crate::members::SUPERBLOCK_OFFSET_BYTES;
use crate::meta::Metadata;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use uraid_format::{BadRange, Superblock1, encode_bad_blocks, feature};
use uraid_io::{BadBlockList, PersistBadBlocks};

/// A device's last superblock written, and whether its bad block list has entries.
#[derive(Default)]
pub(crate) struct SuperblockSlot(Mutex<SlotState>);

#[derive(Default)]
pub(crate) struct SlotState {
    pub last: Option<Superblock1>,
    /// md's feature bit: the log holds entries.
    pub listed: bool,
}

impl SuperblockSlot {
    pub(crate) fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Metadata {
    /// Gives every device that lacks one its bad block list (those whose superblock has a
    /// place for md's log): the entries its log holds, and failed data writes added from now
    /// on, each made durable before the write completes.
    pub fn attach_bad_blocks(&mut self) -> io::Result<()> {
        let roles = self.dev_roles();
        let data_from = self.base().data_offset_sectors * 512;
        for i in 0..self.devices.len() {
            if self.devices[i].bad_blocks.is_some() {
                continue;
            }
            // Where its log is (`bad_block_log` answers only with the feature bit set).
            let mut sb = self.superblock_for(&self.devices[i], &roles, false);
            sb.feature_map |= feature::BAD_BLOCKS;
            let Some((at, sectors)) = sb.bad_block_log() else { continue };
            let d = &self.devices[i];
            if self.bitmap.as_ref().is_some_and(|b| sb.bad_block_log_in_bitmap(b)) {
                // No list then, as on a member without a log: a failed data write fails it.
                let listed =
                    d.own.as_ref().is_some_and(|own| own.feature_map & feature::BAD_BLOCKS != 0);
                let entries = if listed { "; the bad blocks it lists are not trusted" } else { "" };
                say!(
                    "uraid: {}: its bad block log lies inside the bitmap (created so by uraid \
                     before 7269acd): the log is not used{entries}",
                    d.path.display()
                );
                continue;
            }
            // Only a device's own superblock says what its log holds (a new spare: nothing).
            let found = match &d.own {
                Some(_) => crate::members::known_bad_bytes(&d.path)?,
                None => Vec::new(),
            };
            d.sb_slot.lock().listed = !found.is_empty();
            if self.read_only {
                // Read around, never written: a failed write fails the member instead.
                self.devices[i].bad_blocks = Some(BadBlockList::fixed(found));
                continue;
            }
            // A descriptor of its own, not a clone of the locked one: the runtime's instances
            // may hold the list a moment after the device is removed, and must not keep it
            // locked (`Device::open`).
            let file = OpenOptions::new().write(true).open(&d.path)?;
            let log = LogWriter { file, at: at * 512, sectors, shift: sb.bblog_shift };
            let persist = log.persist(d.sb_slot.clone());
            self.devices[i].bad_blocks = Some(BadBlockList::recording(found, data_from, persist));
        }
        Ok(())
    }
}

/// Where a device's log is.
struct LogWriter {
    file: File,
    /// Byte offset and size (sectors) of the log area.
    at: u64,
    sectors: u16,
    shift: u8,
}

impl LogWriter {
    fn persist(self, slot: Arc<SuperblockSlot>) -> PersistBadBlocks {
        Box::new(move |ranges| {
            self.write_log(ranges)?;
            let mut state = slot.lock();
            let listed = !ranges.is_empty();
            if state.listed == listed {
                return Ok(());
            }
            if let Some(sb) = state.last.as_mut() {
                let mut flipped = sb.clone();
                flipped.feature_map &= !feature::BAD_BLOCKS;
                if listed {
                    flipped.feature_map |= feature::BAD_BLOCKS;
                }
                flipped.seal();
                self.file.write_all_at(&flipped.encode(), SUPERBLOCK_OFFSET_BYTES)?;
                self.file.sync_data()?;
                *sb = flipped;
            }
            state.listed = listed;
            Ok(())
        })
    }

    /// The list (device bytes) as md's log, synced.
    fn write_log(&self, ranges: &[std::ops::Range<u64>]) -> io::Result<()> {
        let ranges: Vec<BadRange> = ranges
            .iter()
            .map(|r| BadRange {
                start_sector: r.start / 512,
                sectors: (r.end - r.start).div_ceil(512),
            })
            .collect();
        let log = encode_bad_blocks(&ranges, self.shift, usize::from(self.sectors) * 512)
            .map_err(io::Error::other)?;
        self.file.write_all_at(&log, self.at)?;
        self.file.sync_data()
    }
}
