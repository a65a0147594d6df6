//! md's verbs on a running array, and its answers to member failures: fail, remove, add (a
//! hot spare), replace (check, repair and idle are `scrub.rs`'s); a failed member is marked
//! faulty in every superblock and a spare, if there is one, takes its slot and is rebuilt at
//! once.
//!
//! Every change goes through `commit`: events + 1, the bitmap superblock handed to the engine
//! (written with its next page generation), then every attached member's superblock.

use crate::array::{Inner, MdError};
use crate::members::{SlotSource, device_size_bytes};
use crate::meta::{Device, Role};
use crate::runner::Action;
use std::path::Path;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use uraid_format::Superblock1;
use uraid_format::Uuid;
use uraid_io::FileIdentity;
use uraid_runtime::{MemberSet, RuntimeError};

impl Inner {
    pub(crate) fn meta(&self) -> std::sync::MutexGuard<'_, crate::meta::Metadata> {
        self.meta.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes the metadata (events + 1); a member whose superblock cannot be written is
    /// failed, as md fails a member it cannot update.
    pub(crate) fn commit(&self) {
        let mut meta = self.meta();
        self.commit_locked(&mut meta);
    }

    pub(crate) fn commit_locked(&self, meta: &mut crate::meta::Metadata) {
        meta.events += 1;
        // The engine clears bits only while no member is failed or being recovered: this
        // commit is durable before it clears any (`Metadata::bitmap_cleared`).
        if !meta.degraded() && self.runtime.failed_members().is_empty() {
            meta.bitmap_cleared();
        }
        if let Some(header) = meta.bitmap_header().filter(|_| !meta.read_only) {
            self.runtime.set_bitmap_header(header[..uraid_format::BITMAP_SUPER_BYTES].to_vec());
        }
        for (i, err) in meta.write() {
            match meta.devices[i].role {
                Role::Slot(slot) => {
                    let why = || format!("its superblock could not be written: {err}");
                    self.runtime.note_failure_reason(slot as usize, why);
                    self.runtime.fail_member(slot as usize);
                }
                // md gives a replacement up when it cannot write its superblock.
                Role::Replacement(slot) => self.replacement_given_up(meta, slot),
                Role::Spare | Role::Faulty => {}
            }
        }
        self.record_failures(meta);
    }

    /// Tells the runtime which failed slots the superblocks now record: those no device
    /// holds any more. Writes held since a failure are acknowledged then (md's
    /// MD_SB_CHANGE_PENDING): before, a crash would bring the failed member back in sync,
    /// its blocks stale. Called with the metadata locked, after it is written, so that a
    /// spare taking the slot meanwhile (which clears the slot's bits) cannot be outrun.
    pub(crate) fn record_failures(&self, meta: &crate::meta::Metadata) {
        let recorded = self
            .runtime
            .failed_members()
            .into_iter()
            .filter(|&slot| !meta.devices.iter().any(|d| d.role == Role::Slot(slot as u32)));
        self.runtime.failures_recorded(MemberSet::of(recorded));
    }

    pub(crate) fn note_recovery(&self, slot: u32, sector: u64) {
        let mut meta = self.meta();
        if let Some(d) = meta.devices.iter_mut().find(|d| d.role == Role::Slot(slot)) {
            d.recovery_offset = Some(sector);
        }
    }

    pub(crate) fn recovery_done(&self, slot: u32) {
        let mut meta = self.meta();
        if let Some(d) = meta.devices.iter_mut().find(|d| d.role == Role::Slot(slot)) {
            d.recovery_offset = None;
            d.bitmap_recovery = false;
        }
        self.commit_locked(&mut meta);
    }

    /// The engine failed `slot` (or a verb did): mark its device faulty, then rebuild onto
    /// a spare if there is one. If another thread got there first (the monitor wakes on the
    /// same failure a verb makes), the rebuild it starts is under way when this returns.
    pub(crate) fn member_failed(&self, slot: u32) {
        let marked = {
            let mut meta = self.meta();
            // Checked under the lock: a rebuild starting a spare in this slot clears the
            // runtime's failed bit before releasing it.
            let device = meta.devices.iter_mut().find(|d| d.role == Role::Slot(slot));
            match device {
                Some(d) if self.runtime.failed_members().contains(&(slot as usize)) => {
                    let path = d.path.clone();
                    d.role = Role::Faulty;
                    d.recovery_offset = None;
                    d.bitmap_recovery = false;
                    d.former_slot = Some(slot);
                    if let Some(recover) = self.replacement_takes_over(&mut meta, slot) {
                        // Its replacement holds the slot now: removing it must leave that.
                        for d in meta.devices.iter_mut().filter(|d| d.former_slot == Some(slot)) {
                            d.former_slot = None;
                        }
                        self.commit_locked(&mut meta);
                        let why = self.runtime.failure_reason(slot as usize);
                        let why = why.map_or_else(String::new, |why| format!(": {why}"));
                        say!(
                            "uraid: {}: disk failure on {} (slot {slot}){why}; its replacement \
                             takes its place",
                            self.info.label,
                            path.display()
                        );
                        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                        q.pending.push_front(recover);
                        self.wake.notify_all();
                        return;
                    }
                    self.commit_locked(&mut meta);
                    self.report_failure(&meta, slot, &path);
                    true
                }
                _ => false,
            }
        };
        if marked {
            let q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            if matches!(q.running, Some(Action::Recover { slot: s, .. }) if s == slot) {
                self.control.abort.store(true, Ordering::Release);
            }
        }
        // Waits for the meta lock, so for a rebuild another thread is starting.
        self.start_rebuilds();
    }

    /// md's "Disk failure on X, disabling device", with the cause (the device's failed I/O,
    /// a superblock write, a request) and what is left.
    fn report_failure(&self, meta: &crate::meta::Metadata, slot: u32, path: &std::path::Path) {
        let path = path.display();
        let why = self.runtime.failure_reason(slot as usize);
        let why = why.map_or_else(String::new, |why| format!(": {why}"));
        let in_sync = (0..self.info.raid_disks)
            .filter(|&s| {
                meta.devices.iter().any(|d| d.role == Role::Slot(s) && d.recovery_offset.is_none())
            })
            .count() as u32;
        let n = self.info.raid_disks;
        let left = if self.info.beyond_redundancy((n - in_sync) as usize) {
            format!(
                "the array has FAILED: {in_sync} of {n} devices in sync, more missing than it \
                 survives (reads of what is lost and all writes fail)"
            )
        } else {
            format!("operation continuing on {in_sync} of {n} devices")
        };
        say!("uraid: {}: disk failure on {path} (slot {slot}){why}; {left}", self.info.label);
    }

    /// Puts spares into empty slots and queues their recovery (first in the queue).
    pub(crate) fn start_rebuilds(&self) {
        if self.info.read_only {
            return;
        }
        let mut meta = self.meta();
        for slot in 0..self.info.raid_disks {
            if meta.devices.iter().any(|d| d.role == Role::Slot(slot)) {
                continue;
            }
            let Some(i) = meta.devices.iter().position(|d| d.role == Role::Spare) else { return };
            if let Err(e) = self.open_in_slot(slot, &meta.devices[i]) {
                let path = meta.devices[i].path.display();
                say!("uraid: spare {path}: cannot open for slot {slot}: {e}");
                meta.devices.remove(i);
                continue;
            }
            self.runtime.start_recovery(slot as usize, 0);
            self.recover_in_slot(&mut meta, i, slot, None);
        }
    }

    /// Gives the runtime's slot `slot` an instance of `device` (with its bad block list and
    /// any injected faults); the slot stays failed until a recovery starts.
    pub(crate) fn open_in_slot(&self, slot: u32, device: &Device) -> Result<(), RuntimeError> {
        let mut paths = vec![None; self.info.raid_disks as usize];
        paths[slot as usize] = Some(device.path.clone());
        let mut source = SlotSource::new(paths, self.file_options);
        source.faults.clone_from(&self.member_faults);
        source.bad_blocks[slot as usize].clone_from(&device.bad_blocks);
        self.runtime.replace_member(slot as usize, &source)
    }

    /// Device `i`, its recovery started in the runtime, holds `slot` from now on: recorded,
    /// and its recovery queued first (over `ranges` only after a re-add, else whole).
    pub(crate) fn recover_in_slot(
        &self,
        meta: &mut crate::meta::Metadata,
        i: usize,
        slot: u32,
        ranges: Option<Vec<(u64, u64)>>,
    ) {
        // The failed device that held the slot no longer does: removing it later must leave
        // the new member in place.
        for d in meta.devices.iter_mut().filter(|d| d.former_slot == Some(slot)) {
            d.former_slot = None;
        }
        let d = &mut meta.devices[i];
        d.role = Role::Slot(slot);
        d.recovery_offset = Some(0);
        d.bitmap_recovery = ranges.is_some();
        self.commit_locked(meta);
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        q.pending.push_front(Action::Recover { slot, ranges });
        self.wake.notify_all();
    }

    /// Finds a device by path (as given, or any other path to the same file or device) or slot
    /// number.
    pub(crate) fn find(meta: &crate::meta::Metadata, member: &str) -> Result<usize, MdError> {
        let by_slot = member.parse::<u32>().ok();
        let id = FileIdentity::of_path(Path::new(member)).ok();
        meta.devices
            .iter()
            .position(|d| {
                d.path == Path::new(member)
                    || by_slot.is_some_and(|s| d.role == Role::Slot(s))
                    || id.is_some_and(|id| d.is(id))
            })
            .ok_or_else(|| MdError::Refused(format!("{member} is not a member of this array")))
    }

    /// md's --fail: refused when it would take the array beyond its redundancy.
    pub fn fail(&self, member: &str) -> Result<String, MdError> {
        self.info.refuse_if_read_only("fail a member")?;
        let slot = {
            let mut meta = self.meta();
            let i = Self::find(&meta, member)?;
            let slot = match meta.devices[i].role {
                Role::Slot(slot) => slot,
                // md's --fail of a replacement gives the replacement up; the member stays.
                Role::Replacement(slot) => {
                    self.replacement_given_up(&mut meta, slot);
                    self.commit_locked(&mut meta);
                    return Ok(format!("set {member} faulty (its replacement of slot {slot})"));
                }
                _ => return Err(MdError::Refused(format!("{member} is not active in a slot"))),
            };
            let working = (0..self.info.raid_disks)
                .filter(|s| {
                    meta.devices
                        .iter()
                        .any(|d| d.role == Role::Slot(*s) && d.recovery_offset.is_none())
                })
                .count() as u32;
            let in_sync = meta.devices[i].recovery_offset.is_none();
            if in_sync && working <= self.info.raid_disks - self.info.max_degraded {
                return Err(MdError::Refused(format!(
                    "failing {member} would leave {} of {} members: beyond the array's redundancy",
                    working - 1,
                    self.info.raid_disks
                )));
            }
            slot
        };
        self.runtime.note_failure_reason(slot as usize, || "set faulty by request".into());
        self.runtime.fail_member(slot as usize);
        self.member_failed(slot);
        Ok(format!("set {member} faulty (slot {slot})"))
    }

    /// md's --remove: only a failed member or a spare.
    pub fn remove(&self, member: &str) -> Result<String, MdError> {
        self.info.refuse_if_read_only("remove a member")?;
        let mut meta = self.meta();
        let i = Self::find(&meta, member)?;
        let d = &meta.devices[i];
        match (d.role, d.former_slot) {
            (Role::Slot(_) | Role::Replacement(_), _) => {
                return Err(MdError::Refused(format!("{member} is active: fail it first")));
            }
            (Role::Faulty, Some(slot)) => {
                // Its slot gets an empty stand-in; the old descriptors close.
                let source =
                    SlotSource::new(vec![None; self.info.raid_disks as usize], self.file_options);
                self.runtime.replace_member(slot as usize, &source)?;
            }
            _ => {}
        }
        meta.devices.remove(i);
        self.commit_locked(&mut meta);
        Ok(format!("removed {member}"))
    }

    /// md's --add: a device that left this array and may come back by re-add (`readd`) takes
    /// its old slot, rebuilt only where the bitmap says it missed writes; any other becomes
    /// a hot spare (its old contents are not used) and, if a slot is empty, is rebuilt into
    /// it at once.
    ///
    /// Refused, as mdadm refuses it, when the array has failed past its redundancy: the
    /// device may be a member `--force` needs back. And, unlike mdadm, a device holding a
    /// member of another md array is refused unless `force`: its superblock would be lost.
    pub fn add(&self, path: &str, force: bool) -> Result<String, MdError> {
        self.info.refuse_if_read_only("add a device")?;
        let refuse = |m: String| MdError::Member { path: path.to_owned(), message: m };
        {
            let mut meta = self.meta();
            if self.info.beyond_redundancy(self.runtime.failed_members().len()) {
                return Err(refuse(
                    "the array has FAILED: adding cannot rebuild it and might destroy data on \
                     this device, which may be a member it needs: stop the array and start it \
                     again with --force"
                        .into(),
                ));
            }
            let size = self.check_joining(&meta, path)?;
            if let Some(r) = self.try_readd(Path::new(path), &mut meta) {
                let mib = r.sectors / 2048;
                return Ok(format!(
                    "re-added {path} to slot {}: rebuilding the {mib} MiB the bitmap says it missed",
                    r.slot
                ));
            }
            self.refuse_foreign_member(path, force)?;
            let d = self.open_joining(&meta, path, size, Role::Spare)?;
            erase_other_metadata(path)?;
            meta.devices.push(d);
            meta.attach_bad_blocks().map_err(|e| refuse(format!("its bad block log: {e}")))?;
            self.commit_locked(&mut meta);
        }
        self.start_rebuilds();
        Ok(format!("added {path}"))
    }

    /// Unless `force`, refuses a device about to join (`add`, `replace --with`) that holds
    /// a member of another md array (mdadm takes it without a word; that array loses it), of
    /// any metadata version or a firmware RAID's.
    pub(crate) fn refuse_foreign_member(&self, path: &str, force: bool) -> Result<(), MdError> {
        let candidate = crate::members::read_candidate_to_assemble(Path::new(path));
        if let Some(found) = candidate.other_metadata.filter(|_| !force) {
            return Err(MdError::Member {
                path: path.to_owned(),
                message: format!(
                    "holds {}: a member of another array? with --force it joins this one, and \
                     that array loses it",
                    found.describe()
                ),
            });
        }
        let sb = candidate.superblock_area.ok().and_then(|a| Superblock1::decode(&a).ok());
        match sb.filter(|sb| sb.set_uuid != self.info.uuid && !force) {
            Some(sb) => Err(MdError::Member {
                path: path.to_owned(),
                message: format!(
                    "holds a member of another md array ({}, uuid {}): with --force it joins \
                     this one, and that array loses it",
                    sb.name(),
                    sb.set_uuid
                ),
            }),
            None => Ok(()),
        }
    }
}

/// `members::erase_other_metadata` for a device joining the array with --force.
pub(crate) fn erase_other_metadata(path: &str) -> Result<(), MdError> {
    crate::members::erase_other_metadata(Path::new(path)).map(drop).map_err(|e| MdError::Member {
        path: path.to_owned(),
        message: format!("erasing the other array's metadata on it: {e}"),
    })
}

impl Inner {
    /// Checks a device about to join the array (`add`, `replace`) as md does: it opens, is
    /// no member of this array by any path, and is big enough. Returns its size in bytes.
    pub(crate) fn check_joining(
        &self,
        meta: &crate::meta::Metadata,
        path: &str,
    ) -> Result<u64, MdError> {
        let p = Path::new(path);
        let refuse = |m: String| MdError::Member { path: path.to_owned(), message: m };
        // What it is before the open: opening a pipe waits for a writer, and the array's
        // control thread with it.
        let (size, id) = uraid_io::open_member_path(p, false)
            .and_then(|f| Ok((device_size_bytes(&f)?, FileIdentity::of_file(&f)?)))
            .map_err(|e| refuse(format!("cannot open: {e}")))?;
        // By identity, not by path: `./m1` or a link to an active member, taken as a spare,
        // would get a spare's superblock and then be rebuilt over.
        if let Some(d) = meta.devices.iter().find(|d| d.path == p || d.is(id)) {
            let how = if d.path == p { String::new() } else { format!(" as {}", d.path.display()) };
            return Err(refuse(format!("already a member of this array{how}")));
        }
        let data_offset = self.info.data_offset_sectors;
        let need = data_offset + self.info.member_sectors;
        if size / 512 < need {
            return Err(refuse(format!(
                "too small: {} sectors, the array needs {need} (data offset {data_offset} + {})",
                size / 512,
                self.info.member_sectors
            )));
        }
        Ok(size)
    }

    /// Opens a device `check_joining` passed (`size` bytes) with `role` and a new device
    /// UUID, to keep its superblock.
    pub(crate) fn open_joining(
        &self,
        meta: &crate::meta::Metadata,
        path: &str,
        size: u64,
        role: Role,
    ) -> Result<Device, MdError> {
        let p = Path::new(path);
        let refuse = |m: String| MdError::Member { path: path.to_owned(), message: m };
        let dev_number = meta.free_dev_number();
        let uuid = random_uuid().map_err(|e| refuse(format!("no device UUID: {e}")))?;
        let data_size = size / 512 - self.info.data_offset_sectors;
        let d = Device::open(p, dev_number, uuid, role, data_size)
            .map_err(|e| refuse(format!("cannot open for writing: {e}")))?;
        // md empties its PPL area on a device it adds: whatever is there is not this array's
        // log, and a start of md's must never replay it.
        if self.info.md_ppl.is_some() {
            crate::md_ppl::empty_area(p, meta.base())
                .map_err(|e| refuse(format!("emptying md's PPL area: {e}")))?;
        }
        Ok(d)
    }
}

pub(crate) fn random_uuid() -> std::io::Result<Uuid> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(Uuid(bytes))
}
