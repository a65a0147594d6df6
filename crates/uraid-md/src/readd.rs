//! md's re-add: a device that left the array (failed, then removed) comes back into its old
//! slot and is rebuilt only where the write-intent bitmap says it missed writes, instead of
//! whole as a spare. md's rules: the device's superblock is this array's and names a slot that
//! is empty now, and its event count is not older than the bitmap's events_cleared (no bit it
//! would need has been cleared since it left: `Metadata::bitmap_cleared`). `add` tries this
//! first, as mdadm --add does for a device that was a member; anything else is a spare.

use crate::array::Inner;
use crate::members::SUPERBLOCK_OFFSET_BYTES;
use crate::meta::{Device, Metadata, Role};
use crate::runner::Action;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::PoisonError;
use uraid_format::{DevRole, Superblock1};

/// What a re-add started: the slot, and the member sectors to rebuild.
pub(crate) struct ReAdded {
    pub slot: u32,
    pub sectors: u64,
}

impl Inner {
    /// Re-adds `path` if md would (see the module docs), with the metadata locked: it takes
    /// its old slot at once (in sync but where bits are set), and the recovery of the dirty
    /// regions is queued first. None: not a device to re-add (the caller adds it as a spare).
    pub(crate) fn try_readd(&self, path: &Path, meta: &mut Metadata) -> Option<ReAdded> {
        let sb = own_superblock(path)?;
        let slot = self.readd_slot(&sb, meta)?;
        // Its old number unless another device has it now.
        let taken = meta.devices.iter().any(|d| d.dev_number == sb.dev_number);
        // Its log rings hold this run's generations from before it failed, without the ones
        // whose copy failed with it (the others' copies durable, their writes in place done):
        // a replay after a crash before the reset that follows its join would count those
        // generations torn for its lack of them and drop them, leaving their stripes torn
        // (the simulator's seed 47281415, once it cut the power during re-adds' recoveries).
        // Cleared, its rings count again once that reset writes a header there.
        if let Some(area) = self.info.log {
            let setup = crate::ppl::log_setup(area, self.info.uuid.0, meta.events);
            crate::ppl::clear_log(&setup, std::iter::once(path)).ok()?;
        }
        let number = if taken { meta.free_dev_number() } else { sb.dev_number };
        let mut d = Device::open(path, number, sb.device_uuid, Role::Spare, 0).ok()?;
        d.data_size_sectors = sb.data_size_sectors;
        meta.devices.push(d);
        let i = meta.devices.len() - 1;
        let started =
            meta.attach_bad_blocks().is_ok() && self.open_in_slot(slot, &meta.devices[i]).is_ok();
        let Some(ranges) = started.then(|| self.runtime.start_readd(slot as usize)).flatten()
        else {
            meta.devices.pop();
            return None;
        };
        let sectors = ranges.iter().map(|r| r.1).sum();
        self.recover_in_slot(meta, i, slot, Some(ranges));
        Some(ReAdded { slot, sectors })
    }

    /// The slot `sb` (a device's own superblock) may be re-added to, if md would.
    fn readd_slot(&self, sb: &Superblock1, meta: &Metadata) -> Option<u32> {
        let base = meta.base();
        let same_array = sb.set_uuid == base.set_uuid
            && (sb.level, sb.layout, sb.chunk_sectors, sb.raid_disks)
                == (base.level, base.layout, base.chunk_sectors, base.raid_disks)
            && sb.data_offset_sectors == base.data_offset_sectors
            && sb.data_size_sectors >= self.info.member_sectors;
        let DevRole::Active(slot) = sb.dev_roles.get(sb.dev_number as usize).copied()? else {
            return None;
        };
        let slot = u32::from(slot);
        let bitmap = meta.bitmap.as_ref()?;
        let empty = slot < base.raid_disks
            && !meta.devices.iter().any(|d| d.role == Role::Slot(slot))
            && self.runtime.failed_members().contains(&(slot as usize));
        let unique = !meta.devices.iter().any(|d| d.device_uuid == sb.device_uuid);
        let fresh_enough = sb.events >= bitmap.events_cleared && sb.events <= meta.events;
        (same_array && empty && unique && fresh_enough).then_some(slot)
    }
}

impl Inner {
    /// At assemble: `slot`'s recovery goes on whole from `at`. A re-add's is recorded as a
    /// whole one at once: left to the next commit, a crash before it would resume by the
    /// bitmap after all, with nothing left to replay to say why not.
    pub(crate) fn recover_whole_from(&self, slot: u32, at: u64) {
        let mut meta = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        let d = meta.devices.iter_mut().find(|d| d.role == Role::Slot(slot));
        if d.is_some_and(|d| std::mem::take(&mut d.bitmap_recovery)) {
            self.commit_locked(&mut meta);
        }
        drop(meta);
        self.runtime.start_recovery(slot as usize, at);
    }

    /// At assemble: a device md's RECOVERY_BITMAP says was being recovered after a re-add
    /// goes on so, from its checkpoint `at`: below it in sync, above it in sync but where bits
    /// are set (any write it missed since it came back left its bit set, crash included: no
    /// bit clears while a member is recovering). False: recovered whole from `at` instead.
    pub(crate) fn resume_readd(&self, slot: u32, at: u64) -> bool {
        // Held to the end: the metadata's lock is taken before the queue's.
        let meta = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        if !meta.devices.iter().any(|d| d.role == Role::Slot(slot) && d.bitmap_recovery) {
            return false;
        }
        // No bitmap: the caller recovers it whole and records that (`recover_whole_from`).
        let Some(ranges) = self.runtime.start_readd(slot as usize) else { return false };
        self.runtime.set_recovery_offset(slot as usize, at);
        let above: Vec<(u64, u64)> = ranges
            .into_iter()
            .filter(|&(s, n)| s + n > at)
            .map(|(s, n)| (s.max(at), s + n - s.max(at)))
            .collect();
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        for a in &mut q.pending {
            if let Action::Recover { slot: s, ranges } = a
                && *s == slot
            {
                *ranges = Some(above.clone());
            }
        }
        true
    }
}

/// The superblock `path` holds, if it has a valid md v1.2 one.
fn own_superblock(path: &Path) -> Option<Superblock1> {
    let f = std::fs::File::open(path).ok()?;
    let mut area = vec![0u8; 4096];
    f.read_exact_at(&mut area, SUPERBLOCK_OFFSET_BYTES).ok()?;
    Superblock1::decode(&area).ok()
}
