//! md's replace (`mdadm --replace X --with Y`): Y is copied from X while X stays in the array,
//! so the array keeps its redundancy; when the copy is done Y takes X's slot and X is marked
//! faulty, to be removed. In the superblocks Y holds X's role with md's REPLACEMENT feature
//! and its copy's progress as a recovery offset, so a restart (the kernel's too) goes on.
//!
//! - Y fails, or its superblock cannot be written: the replacement is given up, Y is marked
//!   faulty, X stays.
//! - X fails during the copy: Y takes the slot as a member being recovered; it is in sync
//!   below where the copy got to except where bitmap bits are set (without a bitmap it is
//!   rebuilt whole), and a recovery rebuilds the rest.
//! - A degraded array is refused: md would put Y into the empty slot instead, which `add` does.

use crate::array::{Inner, MdError};
use crate::members::SlotSource;
use crate::meta::{Metadata, Role};
use crate::runner::Action;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use uraid_io::ReplacementMode;

impl Inner {
    /// md's --replace with --with.
    pub fn replace(&self, member: &str, with: &str, force: bool) -> Result<String, MdError> {
        self.info.refuse_if_read_only("replace a member")?;
        let refuse = |m: String| MdError::Member { path: with.to_owned(), message: m };
        let mut meta = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        let size = self.check_joining(&meta, with)?;
        self.refuse_foreign_member(with, force)?;
        let slot = self.replaceable(&meta, member)?;
        let mut d = self.open_joining(&meta, with, size, Role::Replacement(slot))?;
        crate::ops::erase_other_metadata(with)?;
        d.recovery_offset = Some(0);
        meta.devices.push(d);
        let i = meta.devices.len() - 1;
        // Its list, for when it holds the slot (`add` attaches one the same way).
        if let Err(e) = meta.attach_bad_blocks() {
            meta.devices.remove(i);
            return Err(refuse(format!("its bad block log: {e}")));
        }
        // Its superblock first: the runtime's instances of it check that they open a member.
        self.commit_locked(&mut meta);
        if let Err(e) = self.start_replacing(&mut meta, i, slot) {
            meta.devices.remove(i);
            self.commit_locked(&mut meta);
            return Err(refuse(format!("cannot open for the array: {e}")));
        }
        Ok(format!("replacing {member} (slot {slot}) with {with}: copy started"))
    }

    /// Replacements found at assemble go on (`open_devices` decided from where).
    pub(crate) fn resume_replacements(&self) -> Result<(), MdError> {
        let mut meta = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        for i in 0..meta.devices.len() {
            if let Role::Replacement(slot) = meta.devices[i].role {
                self.start_replacing(&mut meta, i, slot)?;
            }
        }
        Ok(())
    }

    /// md's --replace with no --with: a hot spare of the array's takes the member's place
    /// (md waits for one; uraid refuses when there is none).
    pub fn replace_from_spare(&self, member: &str) -> Result<String, MdError> {
        self.info.refuse_if_read_only("replace a member")?;
        let mut meta = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = self.replaceable(&meta, member)?;
        let Some(i) = meta.devices.iter().position(|d| d.role == Role::Spare) else {
            return Err(MdError::Refused(format!(
                "no spare to replace {member} with: add one first, or give --with"
            )));
        };
        let spare = meta.devices[i].path.display().to_string();
        meta.devices[i].role = Role::Replacement(slot);
        meta.devices[i].recovery_offset = Some(0);
        self.commit_locked(&mut meta);
        if let Err(e) = self.start_replacing(&mut meta, i, slot) {
            meta.devices[i].role = Role::Spare;
            meta.devices[i].recovery_offset = None;
            self.commit_locked(&mut meta);
            return Err(MdError::Member { path: spare, message: format!("cannot open: {e}") });
        }
        Ok(format!("replacing {member} (slot {slot}) with the spare {spare}: copy started"))
    }

    /// The slot of `member` if it may be replaced now: in sync, not failed, not already being
    /// replaced, and the array not degraded.
    fn replaceable(&self, meta: &Metadata, member: &str) -> Result<u32, MdError> {
        let i = Self::find(meta, member)?;
        let (Role::Slot(slot), None) = (meta.devices[i].role, meta.devices[i].recovery_offset)
        else {
            return Err(MdError::Refused(format!("{member} is not an in-sync member")));
        };
        if self.runtime.failed_members().contains(&(slot as usize)) {
            return Err(MdError::Refused(format!("{member} has failed: add a spare instead")));
        }
        if meta.devices.iter().any(|d| d.role == Role::Replacement(slot)) {
            return Err(MdError::Refused(format!("{member} is already being replaced")));
        }
        if let Some(empty) = (0..self.info.raid_disks)
            .find(|s| !meta.devices.iter().any(|d| d.role == Role::Slot(*s)))
        {
            return Err(MdError::Refused(format!(
                "the array is degraded (slot {empty} is empty): `add` a device to rebuild it \
                 first (md would take the new device for that slot)"
            )));
        }
        Ok(slot)
    }

    /// Pairs device `i` (its superblock written) with the member of `slot` in the runtime and
    /// queues the copy from its recovery offset (after the actions already queued: md
    /// recovers first).
    pub(crate) fn start_replacing(
        &self,
        meta: &mut Metadata,
        i: usize,
        slot: u32,
    ) -> Result<(), uraid_runtime::RuntimeError> {
        let device = &meta.devices[i];
        if let Some(list) = &device.bad_blocks {
            list.set_listing(false);
        }
        let mut paths = vec![None; self.info.raid_disks as usize];
        paths[slot as usize] = Some(device.path.clone());
        let mut source = SlotSource::new(paths, self.file_options);
        source.faults.clone_from(&self.member_faults);
        source.bad_blocks[slot as usize].clone_from(&device.bad_blocks);
        let control = self.runtime.start_replacement(slot as usize, &source)?;
        // Resumed after a stop: what it holds already (reads the member fails there come
        // from it).
        control.set_copied_below(self.copied_byte(device.recovery_offset.unwrap_or(0)));
        self.replacements.lock().unwrap_or_else(PoisonError::into_inner).insert(slot, control);
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        q.pending.push_back(Action::Replace { slot });
        self.wake.notify_all();
        Ok(())
    }

    /// The device byte of member sector `sector` (past the data offset).
    fn copied_byte(&self, sector: u64) -> u64 {
        (self.info.data_offset_sectors + sector) * 512
    }

    /// Whether the replacement of `slot` has failed (an I/O error on the new device).
    pub(crate) fn replacement_failed(&self, slot: u32) -> bool {
        let r = self.replacements.lock().unwrap_or_else(PoisonError::into_inner);
        r.get(&slot).is_some_and(|c| c.failure().is_some())
    }

    /// The copy of `slot` has got to member sector `sector` (its blocks written, not yet
    /// durable: enough to read them back).
    pub(crate) fn note_replace(&self, slot: u32, sector: u64) {
        if let Some(c) = self.replacements.lock().unwrap_or_else(PoisonError::into_inner).get(&slot)
        {
            c.set_copied_below(self.copied_byte(sector));
        }
        let mut meta = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(d) = meta.devices.iter_mut().find(|d| d.role == Role::Replacement(slot)) {
            d.recovery_offset = Some(sector);
        }
    }

    /// The copy has passed the end (and is durable): the new device takes the slot, the old
    /// one is marked faulty (md's "replaced"), to be removed. False if the new device failed
    /// first: the replacement is given up instead.
    pub(crate) fn replacement_done(&self, slot: u32) -> bool {
        let mut meta = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(control) =
            self.replacements.lock().unwrap_or_else(PoisonError::into_inner).remove(&slot)
        else {
            return true;
        };
        if control.failure().is_some() {
            self.replacements.lock().unwrap_or_else(PoisonError::into_inner).insert(slot, control);
            self.replacement_given_up(&mut meta, slot);
            self.commit_locked(&mut meta);
            return false;
        }
        if self.runtime.failed_members().contains(&(slot as usize)) {
            // The member failed as the copy ended: the monitor hands over (`member_failed`),
            // which a swap here would turn into failing the new device.
            self.replacements.lock().unwrap_or_else(PoisonError::into_inner).insert(slot, control);
            return true;
        }
        Self::list_from_now_on(&meta, slot);
        control.set_mode(ReplacementMode::New);
        self.runtime.end_replacement(slot as usize);
        for d in &mut meta.devices {
            if d.role == Role::Slot(slot) {
                // Faulty with no slot: removing it leaves the new device in place.
                d.role = Role::Faulty;
                d.former_slot = None;
            } else if d.role == Role::Replacement(slot) {
                d.role = Role::Slot(slot);
                d.recovery_offset = None;
            }
        }
        self.commit_locked(&mut meta);
        true
    }

    /// The new device failed (or its superblock could not be written): it is marked faulty
    /// and the member stays. The caller commits.
    pub(crate) fn replacement_given_up(&self, meta: &mut Metadata, slot: u32) {
        let control =
            self.replacements.lock().unwrap_or_else(PoisonError::into_inner).remove(&slot);
        if let Some(c) = control {
            c.set_mode(ReplacementMode::Old);
            self.runtime.end_replacement(slot as usize);
        }
        if let Some(d) = meta.devices.iter_mut().find(|d| d.role == Role::Replacement(slot)) {
            d.role = Role::Faulty;
            d.recovery_offset = None;
            d.former_slot = None;
        }
        self.abort_if_running(&Action::Replace { slot });
    }

    /// The member of `slot` failed while being replaced: the new device takes the slot as a
    /// member being recovered. Below where the copy got to it holds everything (copied, or
    /// written to both) but the writes made since the failure, which the bitmap names; above
    /// it, nothing. Without a bitmap it is rebuilt whole. Returns the action that rebuilds
    /// it, for the caller to queue after it commits.
    pub(crate) fn replacement_takes_over(&self, meta: &mut Metadata, slot: u32) -> Option<Action> {
        let control =
            self.replacements.lock().unwrap_or_else(PoisonError::into_inner).remove(&slot)?;
        self.abort_if_running(&Action::Replace { slot });
        if control.failure().is_some() {
            self.replacements.lock().unwrap_or_else(PoisonError::into_inner).insert(slot, control);
            self.replacement_given_up(meta, slot);
            return None;
        }
        Self::list_from_now_on(meta, slot);
        // Every engine treats the member as failed before the pair sends its reads to the
        // new device (`Runtime::fail_member_now`).
        self.runtime.fail_member_now(slot as usize);
        control.set_mode(ReplacementMode::New);
        let d = meta.devices.iter_mut().find(|d| d.role == Role::Replacement(slot))?;
        let front = d.recovery_offset.unwrap_or(0);
        d.role = Role::Slot(slot);
        d.recovery_offset = Some(0);
        let ranges = self.runtime.take_over_replacement(slot as usize, front);
        // Recorded as a plain recovery, not a re-add's (md's RECOVERY_BITMAP): no bit names
        // what lies above `front`, so a start that resumed by the bitmap (ours or the
        // kernel's) would leave it as it is, and serve it. A restart rebuilds it whole above
        // the checkpoint instead (uraid-sim, seed 40002175).
        d.bitmap_recovery = false;
        Some(Action::Recover { slot, ranges })
    }

    /// The replacement of `slot` is about to hold the slot: its failed writes are listed from
    /// now on, as any member's (before its writes stop going to the old device too).
    fn list_from_now_on(meta: &Metadata, slot: u32) {
        let new = meta.devices.iter().find(|d| d.role == Role::Replacement(slot));
        if let Some(list) = new.and_then(|d| d.bad_blocks.as_ref()) {
            list.set_listing(true);
        }
    }

    fn abort_if_running(&self, action: &Action) {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        q.pending.retain(|a| a != action);
        if q.running.as_ref() == Some(action) {
            self.control.abort.store(true, Ordering::Release);
        }
    }
}
