//! What a running array reports (`status::ArrayStatus`), and `MdArray`'s public verbs, which
//! hand over to `ops`.

use crate::array::{Inner, MdArray, MdError};
use crate::control::ScrubSpan;
use crate::meta::Role;
use crate::status::{ArrayStatus, MemberStatus, SyncResult};
use crate::sync::SyncSpeed;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

impl Inner {
    pub(crate) fn status(&self) -> ArrayStatus {
        let info = &self.info;
        let meta = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        let members = member_statuses(info, &meta);
        let in_sync = members.iter().filter(|m| m.state == "active sync").count() as u32;
        let degraded = in_sync < info.raid_disks;
        let failed = info.beyond_redundancy((info.raid_disks - in_sync) as usize);
        let q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        let sync = self.control.status();
        // Read-only, the superblocks stay as found: clean or not, they say it.
        let clean =
            if info.read_only { meta.is_clean() } else { self.runtime.safe_mode().is_clean() };
        let mut state = if clean { "clean" } else { "active" }.to_owned();
        // mdadm's Detail: FAILED in place of degraded when not enough are left.
        if failed {
            state.push_str(", FAILED");
        } else if degraded {
            state.push_str(", degraded");
        }
        if q.frozen {
            // md's sync_action "frozen": what waits starts when thawed.
            state.push_str(", frozen");
        } else if let Some(s) = &sync {
            state.push_str(match s.action.as_str() {
                // md shows a replacement's copy as a recovery (it said "repairing").
                "recover" | "replace" => ", recovering",
                "resync" => ", resyncing",
                "check" => ", checking",
                _ => ", repairing",
            });
        } else if !q.pending.is_empty() || q.running.is_some() {
            // Queued, or taken from the queue and not walking yet: `uraid wait` must not
            // take that moment for the end.
            state.push_str(", sync pending");
        } else if info.read_only && !meta.is_clean() {
            // md's "resync=PENDING": a dirty array run read-only is resynced when writable.
            state.push_str(", resync pending");
        }
        if info.read_only {
            state.push_str(", read-only");
        }
        let (dirty, _) = self.runtime.write_intent_state();
        let speed = self.control.speed();
        ArrayStatus {
            name: info.label.clone(),
            md_name: info.name.clone(),
            uuid: info.uuid.to_string(),
            level: u32::try_from(info.level.to_md()).unwrap_or(0),
            layout: crate::members::layout_name(info.level, info.layout),
            chunk_bytes: info.chunk_sectors * 512,
            raid_disks: info.raid_disks,
            array_size_bytes: self.runtime.size_bytes(),
            component_size_bytes: info.member_sectors * 512,
            events: meta.events,
            state,
            degraded,
            bitmap: meta.bitmap.is_some(),
            bitmap_dirty_chunks: dirty.len() as u64 + info.dirty_chunks_found,
            bitmap_chunk_bytes: info.bitmap_chunk_bytes.unwrap_or(0),
            members,
            sync,
            last_sync: q.last.clone(),
            mismatch_sectors: self.runtime.mismatches().1,
            sync_speed_min_kib: speed.min_kib,
            sync_speed_max_kib: speed.max_kib,
            log_bytes: info.log.map_or(0, |l| l.bytes),
            log_replayed: info.log_replayed,
            log_off: info.log_off,
            log_missing: info.log_missing.clone().unwrap_or_default(),
            read_only: info.read_only,
            frozen: q.frozen,
            // Read-only, nothing is discarded anyway (members opened read-only say they can't).
            discard_off_by: (self.runtime.discard_refused_by())
                .filter(|_| !info.read_only)
                .unwrap_or_default(),
            consistency_policy: consistency_policy(info, &meta).into(),
        }
    }

    /// The running array's counters as `uraid stats` prints them: the engines' and their
    /// stripe caches' (summed over the workers) and each slot's device's, or "missing".
    pub(crate) fn stats_report(&self) -> uraid_io::StatsReport {
        let stats = self.runtime.stats();
        let failed = self.runtime.failed_members();
        let meta = self.meta.lock().unwrap_or_else(PoisonError::into_inner);
        let names: Vec<String> = (0..self.info.raid_disks)
            .map(|slot| match meta.devices.iter().find(|d| d.role == Role::Slot(slot)) {
                Some(d) => d.path.display().to_string(),
                None => "missing".into(),
            })
            .collect();
        let failed: Vec<bool> = (0..names.len()).map(|m| failed.contains(&m)).collect();
        uraid_io::StatsReport::of(stats.array, stats.cache, &names, &failed, &stats.members)
    }

    /// Whether the sync process has nothing running or queued.
    pub(crate) fn sync_idle(&self) -> bool {
        let q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        q.running.is_none() && q.pending.is_empty()
    }
}

fn member_statuses(
    info: &crate::array::ArrayInfo,
    meta: &crate::meta::Metadata,
) -> Vec<MemberStatus> {
    let mut members = Vec::new();
    for slot in 0..info.raid_disks {
        match meta.devices.iter().find(|d| d.role == Role::Slot(slot)) {
            Some(d) => members.push(MemberStatus {
                slot: Some(slot),
                dev_number: Some(d.dev_number),
                path: d.path.display().to_string(),
                state: if d.recovery_offset.is_some() { "spare rebuilding" } else { "active sync" }
                    .into(),
                recovery_offset_sectors: d.recovery_offset,
                bad_sectors: bad_sectors(d),
            }),
            None => members.push(MemberStatus {
                slot: Some(slot),
                dev_number: None,
                path: "missing".into(),
                state: "removed".into(),
                recovery_offset_sectors: None,
                bad_sectors: 0,
            }),
        }
    }
    for d in meta.devices.iter().filter(|d| !matches!(d.role, Role::Slot(_))) {
        let (slot, state, offset) = match d.role {
            // md's --detail lists a replacement in its slot, rebuilding.
            Role::Replacement(s) => (Some(s), "replacement", d.recovery_offset),
            Role::Spare => (None, "spare", None),
            _ => (None, "faulty", None),
        };
        members.push(MemberStatus {
            slot,
            dev_number: Some(d.dev_number),
            path: d.path.display().to_string(),
            state: state.into(),
            recovery_offset_sectors: offset,
            bad_sectors: bad_sectors(d),
        });
    }
    members
}

impl MdArray {
    #[must_use]
    pub fn status(&self) -> ArrayStatus {
        self.inner.status()
    }

    /// Its counters: engine, stripe cache, members (`uraid stats`).
    #[must_use]
    pub fn stats(&self) -> uraid_io::StatsReport {
        self.inner.stats_report()
    }

    /// md's --fail (refused beyond redundancy).
    pub fn fail(&self, member: &str) -> Result<String, MdError> {
        self.inner.fail(member)
    }

    /// md's --remove (a failed member or a spare).
    pub fn remove(&self, member: &str) -> Result<String, MdError> {
        self.inner.remove(member)
    }

    /// md's --add: a hot spare, rebuilt at once into an empty slot (see `add_forced` for
    /// a device that holds a member of another array).
    pub fn add(&self, path: &str) -> Result<String, MdError> {
        self.inner.add(path, false)
    }

    /// `add` of a device that holds a member of another md array: it becomes a spare of
    /// this one (`uraid add --force`).
    pub fn add_forced(&self, path: &str) -> Result<String, MdError> {
        self.inner.add(path, true)
    }

    /// md's --replace --with: `with` is copied from `member` while it serves, then takes its
    /// slot (`replace.rs`).
    pub fn replace(&self, member: &str, with: &str) -> Result<String, MdError> {
        self.inner.replace(member, with, false)
    }

    /// `replace` onto a device that holds a member of another md array (`uraid replace
    /// --force`): that array loses it.
    pub fn replace_forced(&self, member: &str, with: &str) -> Result<String, MdError> {
        self.inner.replace(member, with, true)
    }

    /// md's --replace with no --with: one of the array's hot spares takes the member's place.
    pub fn replace_from_spare(&self, member: &str) -> Result<String, MdError> {
        self.inner.replace_from_spare(member)
    }

    /// Starts a check (`repair`: false) or a repair.
    pub fn scrub(&self, repair: bool) -> Result<String, MdError> {
        self.inner.start_scrub(repair, None)
    }

    /// `scrub` of part of each member only (md's sync_min and sync_max); None: all of it.
    pub fn scrub_span(&self, repair: bool, span: Option<ScrubSpan>) -> Result<String, MdError> {
        self.inner.start_scrub(repair, span)
    }

    /// md's sync_action "idle": stops a running check or repair (`Inner::stop_scrub`), and
    /// thaws a frozen array.
    pub fn stop_scrub(&self) -> Result<String, MdError> {
        self.inner.stop_scrub()
    }

    /// md's sync_action "frozen": stops the running action, starts none until thawed
    /// (`frozen.rs`).
    #[must_use = "it says what froze"]
    pub fn freeze(&self) -> String {
        self.inner.freeze()
    }

    pub fn set_sync_speed(&self, speed: SyncSpeed) {
        *self.inner.control.speed.lock().unwrap_or_else(PoisonError::into_inner) = speed;
    }

    /// Waits until the sync process has nothing running or queued (or `timeout` passes);
    /// returns the last finished action's result.
    pub fn wait_sync_idle(&self, timeout: Duration) -> Option<SyncResult> {
        let start = Instant::now();
        while !self.inner.sync_idle() && start.elapsed() < timeout {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.inner.queue.lock().unwrap_or_else(PoisonError::into_inner).last.clone()
    }
}

/// Sectors `d`'s bad block list names now.
fn bad_sectors(d: &crate::meta::Device) -> u64 {
    let list = d.bad_blocks.as_ref().map(|l| l.bad()).unwrap_or_default();
    list.iter().map(|r| (r.end - r.start) / 512).sum()
}

/// md's consistency policy as the superblocks record it (mdadm's word). Read-only, md's PPL
/// is not started (nor replayed): its superblock says it is there.
fn consistency_policy(info: &crate::ArrayInfo, meta: &crate::meta::Metadata) -> &'static str {
    let md_ppl =
        info.md_ppl.is_some() || (info.read_only && crate::md_ppl::area(meta.base()).is_some());
    match (md_ppl, meta.bitmap.is_some()) {
        (true, _) => "ppl",
        (false, true) => "bitmap",
        (false, false) => "resync",
    }
}
