//! md's v1.2 superblocks kept current while an array runs: what md_update_sb does. Every
//! change of array state (started, member failed, removed, spare added, recovery checkpoint
//! or end, resync checkpoint, clean stop) bumps the event counter and rewrites the superblock
//! of every attached member, each with its own dev_number, device UUID and recovery offset.
//!
//! md's rules kept here: roles are rebuilt from the attached devices (a removed or absent
//! device's entry becomes "spare/unused", a failed one stays "faulty" until removed); the
//! array is "active" (resync_offset 0) while it runs and "clean" (MaxSector) only after a
//! clean stop or a finished resync, or while safe mode finds it idle (`crate::safe_mode`); a
//! bitmap's superblock carries the same event count and is written before the md superblocks
//! (so a bitmap is never older than its array: md would distrust it and resync everything).

use crate::bad_blocks::SuperblockSlot;
use crate::members::SUPERBLOCK_OFFSET_BYTES;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use uraid_format::{BitmapSuper, DevRole, MAX_SECTOR, Superblock1, Uuid, feature};
use uraid_io::{BadBlockList, FileIdentity};

/// What a device is to the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Holds this slot (in sync, or being recovered when `recovery_offset` is set).
    Slot(u32),
    Spare,
    /// Replacing the member of this slot (md's replace: the slot's role in the superblocks,
    /// with the REPLACEMENT feature); copied up to `recovery_offset`.
    Replacement(u32),
    /// Failed and not yet removed.
    Faulty,
}

/// One attached device: its superblock is kept current.
pub struct Device {
    pub path: PathBuf,
    pub dev_number: u32,
    pub device_uuid: Uuid,
    pub role: Role,
    /// Being recovered: in sync below this member sector.
    pub recovery_offset: Option<u64>,
    /// Being recovered after a re-add: above `recovery_offset`, only where bitmap bits are set
    /// (md's RECOVERY_BITMAP feature, so that a restart, the kernel's too, resumes so).
    pub bitmap_recovery: bool,
    pub data_size_sectors: u64,
    /// For a failed member: the slot it held (emptied when it is removed).
    pub former_slot: Option<u32>,
    /// Its own superblock as found at open, for the fields md keeps per device (its bad block
    /// log, devflags), which are never taken from another member's. None: no superblock of
    /// this device yet (a new spare).
    pub(crate) own: Option<Superblock1>,
    /// Its bad block list, shared with the runtime's instances of it, which add the ranges of
    /// failed writes (`Metadata::attach_bad_blocks`). None: no place for md's log.
    pub bad_blocks: Option<Arc<BadBlockList>>,
    /// Its last superblock, shared with the writer of its bad block log (`bad_blocks.rs`).
    pub(crate) sb_slot: Arc<SuperblockSlot>,
    file: File,
}

impl Device {
    /// Opens `path` to keep its superblock; `data_size_sectors` from its own superblock or, for
    /// a new spare, from its size. The open file holds an exclusive lock for as long as the
    /// device belongs to the array (md holds its block devices open exclusively for the same
    /// reason): another array, or `uraid create`, must not write its superblock or take it as a
    /// spare. It is released when the device is removed, so that it may be added again.
    pub fn open(
        path: &Path,
        dev_number: u32,
        device_uuid: Uuid,
        role: Role,
        data_size_sectors: u64,
    ) -> io::Result<Device> {
        Device::open_with(path, dev_number, device_uuid, role, data_size_sectors, false)
    }

    /// `open`, read-only when `read_only` (an array that writes nothing: `Metadata::read_only`).
    pub fn open_with(
        path: &Path,
        dev_number: u32,
        device_uuid: Uuid,
        role: Role,
        data_size_sectors: u64,
        read_only: bool,
    ) -> io::Result<Device> {
        let file = OpenOptions::new().read(true).write(!read_only).open(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(io::Error::other("in use: another uraid serve holds it"));
            }
            Err(TryLockError::Error(e)) => return Err(e),
        }
        let mut area = vec![0u8; 4096];
        let own =
            file.read_exact_at(&mut area, 4096).ok().and_then(|()| Superblock1::decode(&area).ok());
        let own = own.filter(|sb| sb.device_uuid == device_uuid);
        Ok(Device {
            path: path.to_owned(),
            dev_number,
            device_uuid,
            role,
            recovery_offset: None,
            bitmap_recovery: false,
            data_size_sectors,
            former_slot: None,
            own,
            bad_blocks: None,
            sb_slot: Arc::default(),
            file,
        })
    }

    /// Whether this device is the file or block device `id` names, by whatever path.
    #[must_use]
    pub fn is(&self, id: FileIdentity) -> bool {
        FileIdentity::of_file(&self.file).is_ok_and(|own| own == id)
    }
}

/// uraid's mark in the superblocks it writes: the top 24 bits of `utime`, which v1.x keeps
/// for microseconds, set to a value no microsecond count has. md writes `utime` from its own
/// clock in seconds on every superblock update (`md_update_sb`), so the mark on the freshest
/// superblock says that uraid, not the kernel, wrote last: a log of uraid's left on the
/// members is then the last run's, not one a run of the kernel's since has made stale
/// (`uraid_wrote_last`). md refuses non-zero padding, so the mark cannot go there.
pub const RUN_MARK_USEC: u64 = 0xff_ffff;
/// The mark on a superblock uraid wrote while running an array with md's own partial parity
/// log (`feature::PPL`, or `feature::MULTIPLE_PPLS` with the second), whose bit it took off:
/// uraid runs its own log, which md does not read, so after a crash of uraid the kernel must
/// not start the array dirty and degraded as it starts a PPL array (its empty log would mend
/// no torn stripe: a lost member's blocks there would come back wrong, silently). Without the
/// bit md refuses that start ("cannot start dirty degraded array") and resyncs a whole one;
/// uraid puts the bit back at assemble (`restore_md_ppl`) and writes it again at its stop
/// (then everything is durable: md may start the array as it starts its own).
const RUN_MARK_PPL_USEC: u64 = 0xff_fffe;
const RUN_MARK_MULTIPLE_PPLS_USEC: u64 = 0xff_fffd;

/// Whether uraid wrote `sb` (see `RUN_MARK_USEC`).
#[must_use]
pub fn uraid_wrote_last(sb: &Superblock1) -> bool {
    matches!(sb.utime >> 40, RUN_MARK_USEC | RUN_MARK_PPL_USEC | RUN_MARK_MULTIPLE_PPLS_USEC)
}

/// The md PPL bit uraid took off `sb` while the array was active (see `RUN_MARK_PPL_USEC`).
#[must_use]
pub fn md_ppl_taken_off(sb: &Superblock1) -> Option<u32> {
    match sb.utime >> 40 {
        RUN_MARK_PPL_USEC => Some(feature::PPL),
        RUN_MARK_MULTIPLE_PPLS_USEC => Some(feature::MULTIPLE_PPLS),
        _ => None,
    }
}

/// Puts back the md PPL bit uraid took off `sb` while the array was active: the array as it
/// is (its areas, its start rules). True if it did.
pub fn restore_md_ppl(sb: &mut Superblock1) -> bool {
    let Some(bit) = md_ppl_taken_off(sb) else { return false };
    sb.feature_map |= bit;
    sb.seal();
    true
}

/// The array's metadata as md keeps it in memory, and the devices it is written to.
pub struct Metadata {
    /// The freshest superblock at assemble: the array-wide fields (uuid, name, level, layout,
    /// chunk, size, data offset, bitmap offset, ctime) every member shares.
    base: Superblock1,
    pub devices: Vec<Device>,
    pub events: u64,
    /// md's resync_offset (recovery_cp): MaxSector when parity is known good everywhere.
    pub resync_offset: u64,
    /// The bitmap superblock, when the array has an internal bitmap.
    pub bitmap: Option<BitmapSuper>,
    /// The engine runs (from the start's superblocks to the stop's): superblocks written
    /// meanwhile take md's PPL bit off (see `RUN_MARK_PPL_USEC`).
    pub running: bool,
    /// The array runs read-only (`MdOptions::read_only`): superblocks, bitmap and bad block
    /// logs are kept in memory only, never written.
    pub read_only: bool,
}

impl Metadata {
    #[must_use]
    pub fn new(base: Superblock1, devices: Vec<Device>, bitmap: Option<BitmapSuper>) -> Metadata {
        Metadata {
            events: base.events,
            resync_offset: base.resync_offset_sectors,
            base,
            devices,
            bitmap,
            running: false,
            read_only: false,
        }
    }

    #[must_use]
    pub fn base(&self) -> &Superblock1 {
        &self.base
    }

    /// md's dev_roles, by dev_number, from the attached devices.
    #[must_use]
    pub fn dev_roles(&self) -> Vec<DevRole> {
        let mut roles = vec![DevRole::Spare; self.base.dev_roles.len()];
        for d in &self.devices {
            let slot = d.dev_number as usize;
            if slot >= roles.len() {
                roles.resize(slot + 1, DevRole::Spare);
            }
            roles[slot] = match d.role {
                Role::Slot(s) | Role::Replacement(s) => DevRole::Active(s as u16),
                Role::Spare => DevRole::Spare,
                Role::Faulty => DevRole::Faulty,
            };
        }
        roles
    }

    /// The smallest dev_number no attached device uses (md's choice for a new device).
    #[must_use]
    pub fn free_dev_number(&self) -> u32 {
        (0..=u32::MAX)
            .find(|n| self.devices.iter().all(|d| d.dev_number != *n))
            .expect("a free number")
    }

    /// The superblock `device` gets now; `listed`: whether its bad block list (if it has one)
    /// has entries, md's feature bit.
    #[must_use]
    pub fn superblock_for(&self, device: &Device, roles: &[DevRole], listed: bool) -> Superblock1 {
        let mut sb = self.base.clone();
        sb.dev_number = device.dev_number;
        sb.device_uuid = device.device_uuid;
        sb.data_size_sectors = device.data_size_sectors;
        sb.dev_roles = roles.to_vec();
        let max_dev = sb.dev_roles.len().next_multiple_of(128).max(self.base.dev_roles.len());
        sb.dev_roles.resize(max_dev, DevRole::Spare);
        sb.events = self.events;
        sb.resync_offset_sectors = self.resync_offset;
        let mut mark = RUN_MARK_USEC;
        if self.running {
            if sb.feature_map & feature::MULTIPLE_PPLS != 0 {
                mark = RUN_MARK_MULTIPLE_PPLS_USEC;
            } else if sb.feature_map & feature::PPL != 0 {
                mark = RUN_MARK_PPL_USEC;
            }
            sb.feature_map &= !(feature::PPL | feature::MULTIPLE_PPLS);
        }
        sb.utime = (now_seconds() & ((1 << 40) - 1)) | (mark << 40);
        sb.cnt_corrected_read = 0;
        // What md keeps per device, from the device's own superblock; a new device has an
        // empty bad block list, in the place the array's members keep theirs.
        sb.feature_map &= !feature::BAD_BLOCKS;
        sb.devflags = 0;
        sb.bblog_shift = 0;
        if let Some(own) = &device.own {
            sb.feature_map |= own.feature_map & feature::BAD_BLOCKS;
            sb.devflags = own.devflags;
            sb.bblog_shift = own.bblog_shift;
            sb.bblog_size_sectors = own.bblog_size_sectors;
            sb.bblog_offset_sectors = own.bblog_offset_sectors;
        }
        if device.bad_blocks.is_some() {
            sb.feature_map &= !feature::BAD_BLOCKS;
            if listed {
                sb.feature_map |= feature::BAD_BLOCKS;
            }
        }
        sb.feature_map &= !(feature::RECOVERY_OFFSET | feature::RECOVERY_BITMAP);
        sb.feature_map &= !feature::REPLACEMENT;
        if matches!(device.role, Role::Replacement(_)) {
            sb.feature_map |= feature::REPLACEMENT;
        }
        sb.recovery_offset_sectors = 0;
        if let Some(at) = device.recovery_offset {
            sb.feature_map |= feature::RECOVERY_OFFSET;
            sb.recovery_offset_sectors = at;
            if device.bitmap_recovery {
                sb.feature_map |= feature::RECOVERY_BITMAP;
            }
        }
        sb.seal();
        sb
    }

    /// The bitmap superblock with the current event count, encoded.
    #[must_use]
    pub fn bitmap_header(&self) -> Option<Vec<u8>> {
        let mut b = self.bitmap.clone()?;
        b.events = self.events;
        Some(b.encode().to_vec())
    }

    /// Sets md's events_cleared to now: the bitmap may have lost bits of writes made before
    /// this event count. md advances it whenever it clears bits (only while not degraded), and
    /// takes a device back by re-add, resynced only where bits are set, only if that device's
    /// own event count is not older. Called at a clean stop (every bit cleared) and at every
    /// commit while the array is not degraded (the engine clears bits then), so that a device
    /// that left before the array was last whole is never re-added on bits cleared since.
    pub fn bitmap_cleared(&mut self) {
        let events = self.events;
        if let Some(b) = self.bitmap.as_mut() {
            b.events_cleared = events;
        }
    }

    /// Bumps the event counter and writes every attached device's superblock, each made
    /// durable. The caller has handed `bitmap_header()` to the engine first (while running)
    /// or calls `write_bitmap_header` (while stopped). A device that cannot be written is
    /// returned by index so that the caller fails it.
    #[must_use]
    pub fn commit(&mut self) -> Vec<(usize, io::Error)> {
        self.events += 1;
        self.write()
    }

    /// Writes every attached device's superblock at the current event count, all at once
    /// (md submits them together and waits for them all): one after another, a commit took
    /// a write and a sync per member in turn, and the first write after safe mode's clean
    /// mark waits for one.
    #[must_use]
    pub fn write(&self) -> Vec<(usize, io::Error)> {
        if self.read_only {
            return Vec::new();
        }
        let roles = self.dev_roles();
        // md writes no superblock to a failed member.
        let live: Vec<usize> =
            (0..self.devices.len()).filter(|&i| self.devices[i].role != Role::Faulty).collect();
        let write_one = |i: usize| -> Option<(usize, io::Error)> {
            let d = &self.devices[i];
            // Under the slot's lock: the log's writer sets the feature bit in the last
            // superblock written, and must not be overtaken by an older one.
            let mut slot = d.sb_slot.lock();
            let sb = self.superblock_for(d, &roles, slot.listed);
            let r = d
                .file
                .write_all_at(&sb.encode(), SUPERBLOCK_OFFSET_BYTES)
                .and_then(|()| d.file.sync_data());
            match r {
                Ok(()) => {
                    slot.last = Some(sb);
                    None
                }
                Err(e) => Some((i, e)),
            }
        };
        if live.len() < 2 {
            return live.into_iter().filter_map(write_one).collect();
        }
        std::thread::scope(|s| {
            let writers: Vec<_> = live.iter().map(|&i| s.spawn(move || write_one(i))).collect();
            let joined = writers.into_iter().map(|w| w.join().expect("a superblock writer"));
            joined.flatten().collect()
        })
    }

    /// Writes the bitmap straight to every attached device: its superblock, then `bits` when
    /// given (only while the engine is not running: it owns the bitmap pages then).
    pub fn write_bitmap(&self, bits: Option<&[u8]>) -> io::Result<()> {
        let Some(mut header) = self.bitmap_header().filter(|_| !self.read_only) else {
            return Ok(());
        };
        if let Some(bits) = bits {
            header.extend_from_slice(bits);
        }
        let at = self.base.bitmap_at_bytes();
        let at = at.ok_or_else(|| io::Error::other("bitmap offset before the device start"))?;
        for d in self.devices.iter().filter(|d| d.role != Role::Faulty) {
            let named =
                |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", d.path.display()));
            d.file.write_all_at(&header, at).map_err(named)?;
            d.file.sync_data().map_err(named)?;
        }
        Ok(())
    }

    /// Marks the array clean (resync_offset MaxSector) or records where a resync must go on.
    pub fn set_resync_offset(&mut self, offset: u64) {
        self.resync_offset = offset;
    }

    /// Whether some slot has no device in sync in it (failed, empty, or being recovered).
    #[must_use]
    pub fn degraded(&self) -> bool {
        let whole = |s: u32| {
            self.devices.iter().any(|d| d.role == Role::Slot(s) && d.recovery_offset.is_none())
        };
        !(0..self.base.raid_disks).all(whole)
    }

    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.resync_offset == MAX_SECTOR
    }
}

fn now_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
