//! `MdArray`: an md v1.2 array assembled from its members and running, as the Linux md driver
//! runs one: metadata kept current (`meta`), a background sync process (`runner`), member
//! failures noticed and answered (`ops`), and a clean stop.
//!
//! Start: md's assembly rules (`uraid_format::assemble::plan`), then the array is marked
//! active (events + 1, resync_offset 0) before the first write; md's safe mode marks it clean
//! while no write comes, and active again before the next (`crate::safe_mode`). What must be
//! synced is queued: recovery of members found part-rebuilt (from their recorded recovery offsets),
//! then a resync if the array was not stopped cleanly: only the regions whose bitmap bit is
//! set when the array has a trustworthy bitmap, else from the recorded resync offset to the
//! end. A clean stop writes the resync position (MaxSector when there is nothing left) and
//! clears the bitmap.

use crate::log_start;
use crate::members::{MemberFaults, SlotSource, core_level, read_candidate_to_assemble};
use crate::meta::{Device, Metadata, Role};
use crate::runner::{Action, SyncQueue};
use crate::sync::{SyncControl, SyncSpeed};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use thiserror::Error;
use uraid_core::array::{ArrayConfig, WriteIntentConfig};
use uraid_core::{Geometry, Layout};
use uraid_format::assemble::{AssembleError, AssembleOptions, AssemblyPlan};
use uraid_format::{
    BITMAP_SUPER_BYTES, BitmapSuper, Level, MAX_SECTOR, Superblock1, Uuid, WriteIntentBitmap,
};
use uraid_io::rotational::rotational;
use uraid_io::{FileOptions, same_file_message, same_file_twice};
use uraid_runtime::{LogSetup, Runtime, RuntimeConfig, RuntimeError, WriteIntentSetup};

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MdError {
    #[error("assembly refused: {0}")]
    Assemble(#[from] AssembleError),
    #[error("{path}: {message}")]
    Member { path: String, message: String },
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("the array's geometry: {0}")]
    Geometry(String),
}

/// How to run an array.
#[derive(Clone, Debug)]
pub struct MdOptions {
    /// Start a dirty degraded array (mdadm --force).
    pub force: bool,
    /// How a crash is recovered from (mdadm's --consistency-policy).
    pub consistency_policy: ConsistencyPolicy,
    /// Assemble the array with this UUID (default: the first member's).
    pub uuid: Option<Uuid>,
    /// md's stripe_size and stripe_cache_size (None: `stripe_cache::default_stripe_cache_size`,
    /// 1024 heads within 64 MiB).
    pub stripe_size_bytes: u64,
    pub stripe_cache_size: Option<usize>,
    pub workers: Option<usize>,
    pub speed: SyncSpeed,
    pub file_options: FileOptions,
    /// Faults injected under every member device (tests and drills; see `MemberFaults`).
    pub member_faults: Option<MemberFaults>,
    /// Hold a sequential stream's partial stripes, acknowledged, until the stream fills them
    /// (the runtime's `write_back`; `uraid serve --no-write-back` turns it off).
    pub write_back: bool,
    /// md's safe_mode_delay: after this long with no write the superblocks say clean until
    /// the next write (`crate::safe_mode`). None: active from start to stop.
    pub safe_mode_delay: Option<std::time::Duration>,
    /// How messages name the array (serve's `--name`); None: its superblock's name.
    pub label: Option<String>,
    /// md's read-only mode (`mdadm --assemble --readonly`): nothing is ever written to a
    /// member. Members are opened read-only; no superblock, bitmap, log or bad block log is
    /// written; no resync, rebuild, log replay or replacement runs; the verbs that change the
    /// array are refused. For looking at an array before deciding what to do with it.
    pub read_only: bool,
}

impl Default for MdOptions {
    fn default() -> MdOptions {
        MdOptions {
            force: false,
            consistency_policy: ConsistencyPolicy::Ppl,
            uuid: None,
            stripe_size_bytes: 4096,
            stripe_cache_size: None,
            workers: None,
            speed: SyncSpeed::default(),
            file_options: FileOptions { ring_entries: 128, ..FileOptions::default() },
            member_faults: None,
            write_back: true,
            safe_mode_delay: Some(crate::safe_mode::SAFE_MODE_DELAY),
            label: None,
            read_only: false,
        }
    }
}

/// mdadm's consistency policies that uraid runs: with `Ppl` (the default) the partial
/// parity log closes the write hole; with `Resync` it stays open, as md leaves it by default,
/// and a crash is recovered by resync alone (by the bitmap when the array has one). A log an
/// earlier run left after a crash is replayed either way: it protects what that run wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConsistencyPolicy {
    #[default]
    Ppl,
    Resync,
}

/// What does not change while the array runs.
#[derive(Clone, Debug)]
pub struct ArrayInfo {
    pub name: String,
    pub uuid: Uuid,
    pub level: Level,
    pub layout: u32,
    pub chunk_sectors: u64,
    pub raid_disks: u32,
    pub member_sectors: u64,
    pub data_offset_sectors: u64,
    pub max_degraded: u32,
    pub data_disks: u32,
    pub bitmap_chunk_bytes: Option<u64>,
    /// Where the partial parity log is on every member; None: no room, or turned off
    /// (`log_off`): the write hole open.
    pub log: Option<crate::ppl::LogArea>,
    /// The log was turned off (`ConsistencyPolicy::Resync`).
    pub log_off: bool,
    /// Why the array has no log though its policy asks for one (no room, or rings too small
    /// for the stripe_size), as detail says it.
    pub log_missing: Option<String>,
    /// Parity blocks the log's replay rewrote at assemble (after a crash), md's PPL's
    /// included.
    pub log_replayed: u64,
    /// What the start did with md's own PPL, when the array has one (RAID5 arrays mdadm
    /// created with `--consistency-policy=ppl`).
    pub md_ppl: Option<crate::md_ppl::MdPplStart>,
    /// Devices given but not assembled, with why: stale (fewer events than the freshest: a
    /// rebuild target once added again) or marked faulty. md leaves them out quietly; an
    /// operator wants to hear it.
    pub left_out: Vec<String>,
    /// Started dirty and degraded by `force`: the stripes being written at the crash may
    /// hold parity that does not match, and data rebuilt from it may be wrong.
    pub forced: bool,
    /// Stale devices `force` brought back so that the array could run (mdadm's "forcing
    /// event count"), with the event count each had.
    pub forced_in: Vec<String>,
    /// How messages name the array (`MdOptions::label`).
    pub label: String,
    /// Run read-only (`MdOptions::read_only`).
    pub read_only: bool,
    /// Read-only (the engine has no bitmap then): the bits set on the members at assemble.
    pub dirty_chunks_found: u64,
}

impl ArrayInfo {
    /// Whether `failed` members are more than the level survives (mdadm's FAILED): writes
    /// fail then, some after reaching part of their stripe.
    pub(crate) fn beyond_redundancy(&self, failed: usize) -> bool {
        failed > self.max_degraded as usize
    }

    /// Refuses `verb` on a read-only array, as md refuses changes to one.
    pub(crate) fn refuse_if_read_only(&self, verb: &str) -> Result<(), MdError> {
        if self.read_only {
            return Err(MdError::Refused(format!(
                "cannot {verb}: the array runs read-only and writes nothing to its members \
                 (stop it and serve it without --read-only first)"
            )));
        }
        Ok(())
    }
}

pub(crate) struct Inner {
    pub runtime: Arc<Runtime>,
    pub meta: Mutex<Metadata>,
    pub info: ArrayInfo,
    pub control: SyncControl,
    pub queue: Mutex<SyncQueue>,
    pub wake: Condvar,
    pub shutdown: AtomicBool,
    /// Stops the monitor, which outlives the sync runner at a stop (see `MdArray::stop`).
    pub monitor_stop: AtomicBool,
    pub file_options: FileOptions,
    pub member_faults: Option<MemberFaults>,
    /// Replacements under way, by slot (`replace.rs`).
    pub replacements: Mutex<std::collections::HashMap<u32, Arc<uraid_io::ReplacementControl>>>,
    pub safe_mode_delay: Option<std::time::Duration>,
}

/// One file or device given twice (by name, `..`, a link) would be two members writing the same
/// blocks.
fn refuse_same_file_twice(paths: &[PathBuf]) -> Result<(), MdError> {
    match same_file_twice(paths) {
        Some((i, j)) => {
            let name = |k: usize| paths[k].display().to_string();
            Err(MdError::Refused(same_file_message(&name(i), &name(j))))
        }
        None => Ok(()),
    }
}

impl MdOptions {
    /// mdadm's --force is both halves of the plan's: a dirty degraded start, and stale
    /// members brought back when too few are fresh.
    fn assemble_options(&self) -> AssembleOptions {
        AssembleOptions {
            uuid: self.uuid,
            force: self.force,
            force_stale: self.force,
            ..Default::default()
        }
    }
}

/// A running md array.
pub struct MdArray {
    pub(crate) inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
}

impl MdArray {
    /// Assembles the array `paths` form (any order) and starts it.
    pub fn assemble(paths: &[PathBuf], options: &MdOptions) -> Result<MdArray, MdError> {
        refuse_same_file_twice(paths)?;
        let candidates: Vec<_> = paths.iter().map(|p| read_candidate_to_assemble(p)).collect();
        let opts = options.assemble_options();
        let plan = log_start::plan_with_log(&candidates, &opts, options)?;
        let base = freshest_superblock(&plan, &candidates)?;
        let (bitmap, image) = read_bitmap(&plan, &base)?;
        let mut info = array_info(&plan, bitmap.as_ref(), options.label.as_deref())?;
        info.read_only = options.read_only;
        // Options the engine refuses are refused before anything is written or said.
        let array = array_config(&info, options)?;
        array.check().map_err(|e| MdError::Refused(e.to_string()))?;
        refuse_a_cache_past_memory(&array, mem_available_bytes())?;
        let area = log_start::array_log_area(
            &plan,
            &candidates,
            &base,
            bitmap.as_ref(),
            options.stripe_size_bytes,
        );
        info.log_off = options.consistency_policy == ConsistencyPolicy::Resync;
        if !info.log_off && !info.read_only {
            info.log = log_start::announce(&info.label, &area);
            info.log_missing = area.clone().err();
        }
        let devices = open_devices(&plan, &candidates, info.read_only)?;
        let bitmap_stale = bitmap.as_ref().is_some_and(|b| b.is_stale(base.events));
        let meta_bitmap_usable = bitmap.is_some() && !bitmap_stale;
        let mut meta = Metadata::new(base.clone(), devices, bitmap);
        meta.read_only = info.read_only;
        // Each device's bad block list, read now: a log md would refuse is refused before
        // anything is written (md's PPL start, below, writes).
        meta.attach_bad_blocks()
            .map_err(|e| MdError::Refused(format!("its bad block log: {e}")))?;
        if !info.read_only {
            info.md_ppl = log_start::md_ppl_at_assemble(&info, &plan, &base, &mut meta)?;
        }
        info.log_replayed = info.md_ppl.map_or(0, |m| m.parity_blocks);
        let queue = sync_queue(&mut info, &plan, &meta, image.as_deref(), area.ok(), bitmap_stale)?;
        let read_only_files = FileOptions { read_only: info.read_only, ..options.file_options };
        let options = &MdOptions { file_options: read_only_files, ..options.clone() };
        let runtime = if info.read_only {
            start_read_only(&mut info, &meta, array, &plan, image.as_deref(), options)?
        } else {
            mark_active_and_start(&mut meta, &info, array, &plan, image, options)?
        };
        let info_read_only = info.read_only;
        let inner = Arc::new(Inner {
            runtime: Arc::new(runtime),
            meta: Mutex::new(meta),
            info,
            control: SyncControl::default(),
            queue: Mutex::new(queue),
            wake: Condvar::new(),
            shutdown: AtomicBool::new(false),
            monitor_stop: AtomicBool::new(false),
            file_options: options.file_options,
            member_faults: options.member_faults.clone(),
            replacements: Mutex::default(),
            // Read-only, nothing marks the superblocks active or clean.
            safe_mode_delay: options.safe_mode_delay.filter(|_| !info_read_only),
        });
        crate::safe_mode::install(&inner);
        *inner.control.speed.lock().unwrap_or_else(PoisonError::into_inner) = options.speed;
        inner.start_slots(&plan, meta_bitmap_usable);
        if !info_read_only {
            inner.resume_replacements()?;
        }
        let threads = crate::runner::start_threads(&inner);
        // Spares found at assemble fill empty slots at once, as md does.
        inner.start_rebuilds();
        Ok(MdArray { inner, threads })
    }

    /// The running array, for I/O (frontends hold a clone and drop it before `stop`).
    #[must_use]
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.inner.runtime
    }

    #[must_use]
    pub fn info(&self) -> &ArrayInfo {
        &self.inner.info
    }

    /// Stops the array: the sync process records where it got to, every request has
    /// finished and is durable, then the superblocks say clean (or where a resync must go
    /// on) and the bitmap is cleared. Frontends must have dropped their runtime clones.
    pub fn stop(mut self) -> Result<(), MdError> {
        {
            // Under the queue's lock, as every other wake-up of the sync thread: it checks
            // `shutdown` holding the lock and then waits, so a store and notify between the
            // two went unheard, and `stop` waited for it for good (a CI run of kernel_ppl).
            let _queue = self.inner.queue.lock().unwrap_or_else(PoisonError::into_inner);
            self.inner.shutdown.store(true, Ordering::Release);
            self.inner.control.stop.store(true, Ordering::Release);
        }
        self.inner.wake.notify_all();
        let [runner, monitor] = <[JoinHandle<()>; 2]>::try_from(std::mem::take(&mut self.threads))
            .unwrap_or_else(|_| unreachable!("start_threads starts two"));
        let _ = runner.join();
        // The monitor records failures while the flush runs: a member failing now holds the
        // flush until its failure is recorded.
        let flushed = self.inner.runtime.flush();
        self.inner.monitor_stop.store(true, Ordering::Release);
        let _ = monitor.join();
        flushed?;
        let inner = Arc::try_unwrap(self.inner)
            .map_err(|_| MdError::Refused("the array is still in use".into()))?;
        let runtime = Arc::try_unwrap(inner.runtime)
            .map_err(|_| MdError::Refused("a frontend still holds the array".into()))?;
        let failed = runtime.failed_members();
        // Past its redundancy writes failed, some after reaching part of their stripe: the
        // superblocks stay dirty and the log is kept, so that the start after `--force`
        // replays it and mends those stripes' parity.
        let beyond = inner.info.beyond_redundancy(failed.len());
        runtime.shutdown()?;
        if inner.info.read_only {
            // Nothing was written: the members are left exactly as they were found.
            return Ok(());
        }
        let mut meta = inner.meta.into_inner().unwrap_or_else(PoisonError::into_inner);
        if let Some(area) = inner.info.log.filter(|_| !beyond) {
            // Everything is durable: nothing is left to replay (see `ppl::clear_log`).
            let setup = crate::ppl::log_setup(area, inner.info.uuid.0, meta.events);
            let paths = meta.devices.iter().filter(|d| d.role != Role::Faulty).map(|d| &*d.path);
            crate::ppl::clear_log(&setup, paths)
                .map_err(|e| MdError::Refused(format!("clearing the partial parity log: {e}")))?;
        }
        // Everything written is durable: the logs drop ranges rewritten since they were
        // listed, and a superblock whose list empties says it has none (md's convention).
        for d in meta.devices.iter().filter(|d| d.role != Role::Faulty) {
            if let Some(list) = &d.bad_blocks {
                list.settle().map_err(|e| {
                    MdError::Refused(format!(
                        "{}: writing its bad block log: {e}",
                        d.path.display()
                    ))
                })?;
            }
        }
        let queue = inner.queue.into_inner().unwrap_or_else(PoisonError::into_inner);
        meta.set_resync_offset(if beyond { 0 } else { queue.resync_cp });
        meta.running = false;
        meta.events += 1;
        let degraded =
            !failed.is_empty() || meta.devices.iter().any(|d| d.recovery_offset.is_some());
        if meta.is_clean() && !degraded {
            // Parity agrees everywhere: no region needs a resync after the next start.
            meta.bitmap_cleared();
            let bits = meta.bitmap.as_ref().map(|b| vec![0u8; b.bits_bytes()]);
            meta.write_bitmap(bits.as_deref())
        } else {
            meta.write_bitmap(None)
        }
        .map_err(|e| cannot_write("writing the bitmap", &e))?;
        let errors = meta.write();
        fail_on_error(&meta, errors)
    }
}

impl Inner {
    /// The runtime learns what the plan says of each slot: empty (failed, which the
    /// superblocks already record), or being recovered from an offset (after a re-add, by md's
    /// RECOVERY_BITMAP, only where bits are set: `resume_readd`).
    fn start_slots(&self, plan: &AssemblyPlan, bitmap_usable: bool) {
        for (slot, member) in plan.slots.iter().enumerate() {
            match member {
                None => self.runtime.fail_member(slot),
                Some(m) => {
                    // A replay that rewrote parity counted a re-added member missing above
                    // its checkpoint (`ReplayTarget::rebuilding`), so it mended no parity
                    // block of the member's there and rewrote the others: where no bit is
                    // set the two then disagree, and resumed by the bitmap the member
                    // would be trusted there. Rebuilt whole above the checkpoint instead
                    // (the simulator's seed 47283071; the same rule keeps a member that
                    // left from coming back on the bits after such a replay, seed 1313).
                    let by_bitmap = bitmap_usable && self.info.log_replayed == 0;
                    if let (Some(at), true) = (m.recovery_offset_sectors, self.info.read_only) {
                        // In sync below its checkpoint, rebuilt from parity above it; the
                        // recovery itself waits for a writable start.
                        self.runtime.start_recovery(slot, at);
                    } else if let Some(at) = m.recovery_offset_sectors
                        && !(by_bitmap && self.resume_readd(slot as u32, at))
                    {
                        self.recover_whole_from(slot as u32, at);
                    }
                }
            }
        }
        self.record_failures(&self.meta.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// Every member in a slot, then the spares, opened to keep their superblocks.
fn open_devices(
    plan: &AssemblyPlan,
    candidates: &[uraid_format::assemble::Candidate],
    read_only: bool,
) -> Result<Vec<Device>, MdError> {
    let open_device =
        |name: &str, dev_number, uuid, role| open_device(name, dev_number, uuid, role, read_only);
    let mut devices = Vec::new();
    for (slot, member) in plan.slots.iter().enumerate() {
        let Some(m) = member else { continue };
        let mut d = open_device(&m.name, m.dev_number, m.device_uuid, Role::Slot(slot as u32))?;
        d.recovery_offset = m.recovery_offset_sectors;
        let bit = |sb: &uraid_format::Superblock1| {
            sb.feature_map & uraid_format::feature::RECOVERY_BITMAP != 0
        };
        d.bitmap_recovery = d.recovery_offset.is_some() && d.own.as_ref().is_some_and(bit);
        d.data_size_sectors = own_data_size(&candidates[m.candidate])?;
        devices.push(d);
    }
    for m in &plan.spares {
        let mut d = open_device(&m.name, m.dev_number, m.device_uuid, Role::Spare)?;
        d.data_size_sectors = own_data_size(&candidates[m.candidate])?;
        devices.push(d);
    }
    for m in &plan.replacements {
        let uraid_format::DevRole::Active(slot) = m.role else { continue };
        let slot = u32::from(slot);
        // It goes on only beside an in-sync member; alone it is a spare, rebuilt whole.
        let beside = plan.slots.get(slot as usize).and_then(Option::as_ref);
        let role = if beside.is_some_and(|b| b.recovery_offset_sectors.is_none()) {
            Role::Replacement(slot)
        } else {
            Role::Spare
        };
        let mut d = open_device(&m.name, m.dev_number, m.device_uuid, role)?;
        d.data_size_sectors = own_data_size(&candidates[m.candidate])?;
        if role != Role::Spare {
            // After a crash its copy starts over: writes in flight may have reached one
            // device and not the other, and parity is made to agree with the member's.
            d.recovery_offset =
                Some(if plan.is_clean() { m.recovery_offset_sectors.unwrap_or(0) } else { 0 });
        }
        devices.push(d);
    }
    Ok(devices)
}

fn open_device(
    name: &str,
    dev_number: u32,
    uuid: Uuid,
    role: Role,
    read_only: bool,
) -> Result<Device, MdError> {
    Device::open_with(Path::new(name), dev_number, uuid, role, 0, read_only).map_err(|e| {
        // A running array writes its members (superblocks, bitmap, resync) even when served
        // read-only; reading one that cannot be written is `assemble -o`'s job.
        let hint = match e.kind() {
            std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied => {
                " (a running array writes to its members; to run it without writing anything, \
                 serve it with --read-only)"
            }
            _ => "",
        };
        MdError::Member { path: name.to_owned(), message: format!("cannot open: {e}{hint}") }
    })
}

fn own_data_size(c: &uraid_format::assemble::Candidate) -> Result<u64, MdError> {
    let area = c.superblock_area.as_ref().map_err(|e| member_err(&c.name, e))?;
    let sb = Superblock1::decode(area).map_err(|e| member_err(&c.name, &e.to_string()))?;
    Ok(sb.data_size_sectors)
}

fn member_err(path: &str, message: &str) -> MdError {
    MdError::Member { path: path.to_owned(), message: message.to_owned() }
}

fn fail_on_error(meta: &Metadata, errors: Vec<(usize, std::io::Error)>) -> Result<(), MdError> {
    match errors.into_iter().next() {
        None => Ok(()),
        Some((i, e)) => {
            let path = meta.devices[i].path.display();
            Err(cannot_write(&format!("writing the superblock of {path}"), &e))
        }
    }
}

/// A write to a member refused: a device that cannot be written (read-only media, a read-only
/// mount, `blockdev --setro`) is what an operator most likely meets, so say what runs there.
fn cannot_write(what: &str, e: &std::io::Error) -> MdError {
    let hint = match e.kind() {
        std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied => {
            " (a member that cannot be written? serve --read-only runs the array writing \
             nothing to its members)"
        }
        _ => "",
    };
    MdError::Refused(format!("{what}: {e}{hint}"))
}

/// The superblock of a member with the plan's (freshest) event count.
pub(crate) fn freshest_superblock(
    plan: &AssemblyPlan,
    candidates: &[uraid_format::assemble::Candidate],
) -> Result<Superblock1, MdError> {
    // Not a member brought back by force: its superblock is older than the array's.
    let m = plan.fresh_members().next().ok_or_else(|| MdError::Refused("no member".into()))?;
    let c = &candidates[m.candidate];
    let area = c.superblock_area.as_ref().map_err(|e| member_err(&c.name, e))?;
    Superblock1::decode(area).map_err(|e| member_err(&c.name, &e.to_string()))
}

fn array_info(
    plan: &AssemblyPlan,
    bitmap: Option<&BitmapSuper>,
    label: Option<&str>,
) -> Result<ArrayInfo, MdError> {
    let offsets: Vec<u64> = plan.slots.iter().flatten().map(|m| m.data_offset_sectors).collect();
    if offsets.windows(2).any(|w| w[0] != w[1]) {
        return Err(MdError::Refused("members have different data offsets".into()));
    }
    Ok(ArrayInfo {
        name: plan.name.clone(),
        uuid: plan.uuid,
        level: plan.level,
        layout: plan.layout,
        chunk_sectors: u64::from(plan.chunk_sectors),
        raid_disks: plan.raid_disks,
        member_sectors: plan.size_sectors,
        data_offset_sectors: offsets[0],
        max_degraded: plan.max_degraded(),
        data_disks: plan.data_disks(),
        bitmap_chunk_bytes: bitmap.map(|b| u64::from(b.chunk_bytes)),
        log: None,
        log_off: false,
        log_missing: None,
        log_replayed: 0,
        md_ppl: None,
        left_out: left_out(plan),
        forced: plan.forced,
        read_only: false,
        dirty_chunks_found: 0,
        label: label.map_or_else(|| crate::status::short_name(&plan.name), str::to_owned),
        forced_in: plan
            .forced_members()
            .map(|m| {
                let events = m.forced_from_events.unwrap_or_default();
                format!(
                    "{}: event count forced from {events} up to {} (stale: blocks written \
                     since it dropped out read back old)",
                    m.name, plan.events
                )
            })
            .collect(),
    })
}

fn left_out(plan: &AssemblyPlan) -> Vec<String> {
    let stale = plan.stale.iter().map(|m| {
        format!(
            "{} (stale: events {} < {}; add it to rebuild onto it)",
            m.name, m.events, plan.events
        )
    });
    stale.chain(plan.faulty.iter().map(|m| format!("{} (marked faulty)", m.name))).collect()
}

/// The bitmap superblock and whole on-disk image (superblock + bits) of the first member in
/// sync, as md reads it (`read_sb_page` skips members not In_sync): a member being rebuilt
/// after a re-add may hold its image from before it failed, if the crash came before the
/// bitmap was rewritten to it, without the bits set while it was out; resumed by that image,
/// its recovery left those regions stale (the simulator's seed 47319918). The first member
/// when every one is being rebuilt.
pub(crate) fn read_bitmap(
    plan: &AssemblyPlan,
    base: &Superblock1,
) -> Result<(Option<BitmapSuper>, Option<Vec<u8>>), MdError> {
    if !base.has_bitmap() {
        return Ok((None, None));
    }
    // Never a member brought back by force: its bitmap lacks the bits set since it left.
    let members = plan.fresh_members();
    let mut sources: Vec<&str> =
        members.clone().filter(|m| m.recovery_offset_sectors.is_none()).map(|m| &*m.name).collect();
    if sources.is_empty() {
        sources.extend(members.take(1).map(|m| &*m.name));
    }
    // Every member in sync holds the same image: one whose copy is unreadable or corrupt is
    // passed over for the next (md gives up on the array there), and rewritten at the next
    // bitmap write.
    let mut unusable = Vec::new();
    for name in &sources {
        match read_bitmap_of(name, base) {
            Ok(found) => {
                for (bad, why) in &unusable {
                    say!("uraid: {bad}: its bitmap is unusable ({why}); {name}'s copy is used");
                }
                return Ok(found);
            }
            Err(why) => unusable.push((*name, why)),
        }
    }
    let (name, why) = unusable.swap_remove(0);
    Err(member_err(name, &why))
}

/// The bitmap superblock and whole image on the member at `name`, or why not.
fn read_bitmap_of(
    name: &str,
    base: &Superblock1,
) -> Result<(Option<BitmapSuper>, Option<Vec<u8>>), String> {
    let (bitmap, image) = crate::members::read_bitmap(Path::new(name), base)?;
    Ok((Some(bitmap), Some(image)))
}

/// What a dirty array must resync: the dirty bitmap regions, or everything from the recorded
/// resync offset.
fn resync_ranges(
    info: &ArrayInfo,
    meta: &Metadata,
    image: Option<&[u8]>,
    stale: bool,
) -> Vec<(u64, u64)> {
    let end = info.member_sectors;
    let (Some(b), Some(image), false) = (meta.bitmap.as_ref(), image, stale) else {
        let from = meta.resync_offset.min(end);
        return if from < end { vec![(from, end - from)] } else { Vec::new() };
    };
    let chunk = b.chunk_sectors();
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for c in dirty_chunks(b, image) {
        let start = c * chunk;
        let len = chunk.min(end.saturating_sub(start));
        match ranges.last_mut() {
            Some(last) if last.0 + last.1 == start => last.1 += len,
            _ => ranges.push((start, len)),
        }
    }
    ranges
}

/// The engine's geometry of the array.
pub(crate) fn geometry_of(info: &ArrayInfo) -> Result<Geometry, MdError> {
    let level = core_level(info.level).ok_or_else(|| {
        MdError::Refused(format!("uraid runs RAID 4, 5 and 6, not {}", info.level))
    })?;
    let layout =
        Layout::from_md(level, info.layout).map_err(|e| MdError::Geometry(e.to_string()))?;
    Geometry::new(level, layout, info.raid_disks as usize, info.chunk_sectors * 512)
        .map_err(|e| MdError::Geometry(e.to_string()))
}

/// Marks the array active (a crash before the clean stop is then seen at the next assemble)
/// and starts its runtime. If the runtime cannot start, the superblocks are put back as they
/// were: a failed start must not leave a clean array needing a resync (or, degraded, --force).
fn mark_active_and_start(
    meta: &mut Metadata,
    info: &ArrayInfo,
    array: ArrayConfig,
    plan: &AssemblyPlan,
    image: Option<Vec<u8>>,
    options: &MdOptions,
) -> Result<Runtime, MdError> {
    let was = meta.resync_offset;
    meta.set_resync_offset(0);
    meta.running = true;
    meta.events += 1;
    if !meta.degraded() || info.log_replayed > 0 {
        // Whole: the engine may clear bits from now on (`Metadata::bitmap_cleared`). Or a
        // replay rewrote parity with members missing, counting what they were being written
        // as zeros, and set no bit: a device that left before must not come back on the bits
        // (its own blocks there disagree with that parity; the simulator's seed 1313).
        meta.bitmap_cleared();
    }
    meta.write_bitmap(None).map_err(|e| cannot_write("writing the bitmap", &e))?;
    fail_on_error(meta, meta.write())?;
    // The replay (before) used the area whatever the policy; the engine logs only with it.
    let log = info.log.map(|a| LogSetup {
        rotational: members_rotational(plan),
        ..crate::ppl::log_setup(a, info.uuid.0, meta.events)
    });
    start_runtime(info, meta, array, plan, image, log.as_ref(), options).inspect_err(|_| {
        meta.set_resync_offset(was);
        meta.running = false;
        meta.events += 1;
        // Best effort: the start's own error is the one to report.
        let _ = meta.write_bitmap(None);
        let _ = meta.write();
    })
}

/// What the sync process starts with: the recoveries of members being rebuilt and, after a
/// crash, the log's replay (done here) and a resync of what may disagree. Read-only, nothing:
/// md too defers them (and its PPL's replay) until the array is made writable.
fn sync_queue(
    info: &mut ArrayInfo,
    plan: &AssemblyPlan,
    meta: &Metadata,
    image: Option<&[u8]>,
    area: Option<crate::ppl::LogArea>,
    bitmap_stale: bool,
) -> Result<SyncQueue, MdError> {
    let mut queue = SyncQueue { resync_cp: MAX_SECTOR, ..SyncQueue::default() };
    if info.read_only {
        return Ok(queue);
    }
    for d in &meta.devices {
        if let (Role::Slot(slot), Some(_)) = (d.role, d.recovery_offset) {
            queue.pending.push_back(Action::Recover { slot, ranges: None });
        }
    }
    if !meta.is_clean() {
        if let Some(area) = area {
            info.log_replayed +=
                log_start::replay_at_assemble(info, plan, (meta.base(), meta), area)?;
        }
        let resync = resync_ranges(info, meta, image, bitmap_stale);
        queue.resync_cp = resync.first().map_or(MAX_SECTOR, |r| r.0);
        queue.pending.push_back(Action::Resync {
            ranges: resync,
            by_bitmap: meta.bitmap.is_some() && !bitmap_stale,
        });
    }
    Ok(queue)
}

/// The bitmap chunks set in `image` (the bitmap region as read at assemble).
fn dirty_chunks(b: &BitmapSuper, image: &[u8]) -> Vec<u64> {
    let bits = WriteIntentBitmap::decode(b, &image[BITMAP_SUPER_BYTES..])
        .expect("read_bitmap reads the superblock and every bit");
    (0..bits.chunks()).filter(|&c| bits.is_dirty(c)).collect()
}

/// Starts the engine of a read-only array: no bitmap (the engine writes its pages: bits, and
/// the header with the events), no log, writes refused; the bits found set are counted for
/// status.
fn start_read_only(
    info: &mut ArrayInfo,
    meta: &Metadata,
    array: ArrayConfig,
    plan: &AssemblyPlan,
    image: Option<&[u8]>,
    options: &MdOptions,
) -> Result<Runtime, MdError> {
    if let (Some(b), Some(image)) = (&meta.bitmap, image) {
        info.dirty_chunks_found = dirty_chunks(b, image).len() as u64;
    }
    let runtime = start_runtime(info, meta, array, plan, None, None, options)?;
    runtime.set_read_only();
    Ok(runtime)
}

/// Whether every member is on a disk the kernel says seeks (the log places entries for that).
fn members_rotational(plan: &AssemblyPlan) -> bool {
    log_start::slot_paths(plan).iter().flatten().all(|p| rotational(p) == Some(true))
}

/// The stripe cache is allocated whole when the engine starts (md allocates its stripe
/// pages so too): one that cannot fit in the memory the kernel says is available is refused
/// before anything is written, not left to the OOM killer.
fn refuse_a_cache_past_memory(array: &ArrayConfig, available: Option<u64>) -> Result<(), MdError> {
    let heads = array.stripe_cache_size as u64;
    let members = array.geometry.raid_disks() as u64;
    let bytes = heads * members * array.stripe_size_bytes;
    match available {
        Some(available) if bytes > available => Err(MdError::Refused(format!(
            "stripe_cache_size {heads} needs {} MiB ({heads} heads x {members} members x {} \
             KiB), more than the {} MiB of memory available",
            bytes >> 20,
            array.stripe_size_bytes >> 10,
            available >> 20
        ))),
        _ => Ok(()),
    }
}

/// `MemAvailable` of /proc/meminfo, in bytes.
fn mem_available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

fn array_config(info: &ArrayInfo, options: &MdOptions) -> Result<ArrayConfig, MdError> {
    let stripe_cache_size = options.stripe_cache_size.unwrap_or_else(|| {
        crate::stripe_cache::default_stripe_cache_size(
            u64::from(info.raid_disks),
            info.chunk_sectors * 512,
            options.stripe_size_bytes,
        )
    });
    Ok(ArrayConfig {
        geometry: geometry_of(info)?,
        stripe_size_bytes: options.stripe_size_bytes,
        stripe_cache_size,
        member_sectors: info.member_sectors,
    })
}

fn start_runtime(
    info: &ArrayInfo,
    meta: &Metadata,
    array: ArrayConfig,
    plan: &AssemblyPlan,
    image: Option<Vec<u8>>,
    log: Option<&LogSetup>,
    options: &MdOptions,
) -> Result<Runtime, MdError> {
    let write_intent = match (&meta.bitmap, image) {
        (Some(b), Some(mut image)) => {
            let offset_bytes = meta.base().bitmap_at_bytes().expect("checked when read");
            image[..BITMAP_SUPER_BYTES].copy_from_slice(&meta.bitmap_header().expect("a bitmap"));
            Some(WriteIntentSetup {
                config: WriteIntentConfig {
                    image,
                    bits_offset: BITMAP_SUPER_BYTES,
                    chunk_sectors: b.chunk_sectors(),
                    chunks: b.chunk_count(),
                },
                offset_bytes,
            })
        }
        _ => None,
    };
    let cfg = RuntimeConfig {
        array,
        workers: options.workers,
        data_offset_bytes: info.data_offset_sectors * 512,
        write_intent,
        // md_update_sb before a degraded write is acknowledged (`Inner::record_failures`).
        record_failures: true,
        write_back: options.write_back,
    };
    let mut source = SlotSource::new(log_start::runtime_paths(plan), options.file_options);
    source.faults.clone_from(&options.member_faults);
    for d in &meta.devices {
        if let Role::Slot(slot) = d.role {
            source.bad_blocks[slot as usize].clone_from(&d.bad_blocks);
        }
    }
    Ok(Runtime::start_with_log(&cfg, log, &source)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stripe_cache_larger_than_the_memory_available_is_refused() {
        let geometry = uraid_core::Geometry::new(
            uraid_core::Level::Raid6,
            uraid_core::Layout::from_md(uraid_core::Level::Raid6, 2).unwrap(),
            16,
            512 << 10,
        )
        .unwrap();
        let array = ArrayConfig {
            geometry,
            stripe_size_bytes: 64 << 10,
            stripe_cache_size: 32768,
            member_sectors: 1 << 20,
        };
        // 32768 x 16 x 64 KiB = 32 GiB.
        let err = refuse_a_cache_past_memory(&array, Some(24 << 30)).unwrap_err().to_string();
        assert!(err.contains("needs 32768 MiB (32768 heads x 16 members x 64 KiB)"), "{err}");
        assert!(err.contains("more than the 24576 MiB"), "{err}");
        assert!(refuse_a_cache_past_memory(&array, Some(33 << 30)).is_ok());
        assert!(refuse_a_cache_past_memory(&array, None).is_ok(), "no /proc: not refused");
        assert!(mem_available_bytes().is_some_and(|b| b > 0), "this machine has /proc/meminfo");
    }
}
