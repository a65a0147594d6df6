//! md's replace in the simulator: a healthy member is copied to a new disk while it stays in
//! the array (`Array::start_replacement`, `SyncKind::Replace` windows), as uraid-md and
//! `uraid_io::Replacing` do it: member reads from the member, writes and discards to both,
//! copy-writes to the new disk alone. When the copy is done (and flushed) the new disk takes
//! the member's place; everything after that reads from it, so a copy that missed a write, or
//! copied a block a write had already changed, shows as a wrong read or a parity mismatch.
//!
//! - The new disk fails a write now and then: the replacement is given up, the member stays.
//! - The member fails during the copy: the new disk takes its place as a member being
//!   recovered from where the copy got to.
//! - A power cut: the copy starts over after the restart (a write in flight may have reached
//!   one disk and not the other); with the member lost after the cut, it is given up.
//!
//! Replacements are drawn from their own random stream (`replace_rng`), so that seeds without
//! one run exactly as before this existed.

use crate::member::SimMember;
use crate::report::SimFailure;
use crate::sim::{Sim, User};
use rand::Rng;
use rand::rngs::StdRng;
use uraid_core::array::{ReqId, SyncKind};
use uraid_core::{SECTOR_BYTES, Sector};

/// A copy under way.
#[expect(clippy::struct_excessive_bools, reason = "independent facts about one copy")]
pub(crate) struct Replacement {
    pub member: usize,
    pub disk: SimMember,
    /// The copy is done below this member sector.
    pub next: u64,
    pub window_out: bool,
    /// Every window is done and the flush that makes them durable has completed.
    pub copied: bool,
    /// The new disk failed a write.
    pub failed: bool,
    /// A window stopped because the member failed: no more are submitted.
    pub failed_window: bool,
}

/// When this seed starts replacements: after this many steps (None: never).
pub(crate) fn first_replacement(rng: &mut StdRng) -> Option<u64> {
    rng.random_bool(0.4).then(|| rng.random_range(50..5_000))
}

impl Sim {
    /// Each step: start a replacement when due, and end one that is over (done, given up,
    /// or overtaken by its member's failure) once no I/O of the member is in flight.
    pub(crate) fn replacement_step(&mut self) -> Result<(), SimFailure> {
        let Some(r) = &self.replacement else {
            if self.replace_at.is_some_and(|at| self.step >= at) {
                self.start_replacement()?;
            }
            return Ok(());
        };
        let m = r.member;
        let failed = self.array.failed_members().iter().any(|d| d.get() == m);
        let over = r.copied || r.failed || failed;
        if !over || r.window_out || self.inflight.iter().any(|f| f.io.member.get() == m) {
            return Ok(());
        }
        // A done copy swaps in with no request outstanding: a batch that read the old disk
        // (and found a bad sector there, which the new disk does not have) is over. The
        // runtime swaps at any time; that race is in `docs/replace.md` (a write whose read of
        // the old disk failed, with another member failing the same moment, is refused).
        if r.copied && !failed && !r.failed && !self.user.is_empty() {
            return Ok(());
        }
        let r = self.replacement.take().expect("a replacement");
        self.array.end_replacement(Self::member_index(m));
        self.replace_at = Some(self.step + self.replace_rng.random_range(200..5_000));
        if r.failed && !failed {
            self.stats.replacements_given_up += 1;
            self.note(|| format!("replacement of member {m} given up"));
        } else if r.copied && !failed {
            self.members[m] = r.disk;
            self.slot_disks[m] += 1;
            self.stats.replacements_done += 1;
            self.note(|| format!("member {m} replaced"));
        } else if !r.failed && failed {
            // uraid-md: the new disk takes the slot, in sync where the copy got to but for the
            // writes since the failure (the bitmap's bits), else rebuilt whole.
            self.members[m] = r.disk;
            self.slot_disks[m] += 1;
            self.recorded_faulty[m] = false;
            self.bitmap_recovery[m] = false;
            let ranges = self.array.take_over_replacement(Self::member_index(m), Sector(r.next));
            if ranges.is_none() {
                self.array.start_recovery(Self::member_index(m), Sector(0));
            }
            self.note(|| format!("member {m} failed: its replacement takes over, {ranges:?}"));
            self.begin_recovery(m, ranges);
            self.stats.replacements_taken_over += 1;
        }
        Ok(())
    }

    fn start_replacement(&mut self) -> Result<(), SimFailure> {
        if !self.lost_members().is_empty() || self.recovery.is_some() {
            return Ok(());
        }
        // As the runtime's worker takes it: between turns, after a turn reaped some
        // completions and the generations they let start were queued at its end. Half the
        // time it waits for a turn that leaves a log write queued, and replaces its member.
        self.reap_burst = true;
        let (burst, aim) =
            (self.replace_rng.random_range(0..=8), self.replace_rng.random_bool(0.5));
        for _ in 0..burst {
            if self.inflight.is_empty() || (aim && self.queued_log_member().is_some()) {
                break;
            }
            self.complete_one()?;
            self.collect()?;
        }
        self.collect()?;
        self.reap_burst = false;
        let lost = self.lost_members();
        let healthy: Vec<usize> = (0..self.members.len()).filter(|m| !lost.contains(m)).collect();
        if !lost.is_empty() || self.recovery.is_some() || healthy.is_empty() {
            return Ok(());
        }
        let aimed = self.queued_log_member().filter(|m| aim && healthy.contains(m));
        let m = match aimed {
            Some(m) => m,
            None => healthy[self.replace_rng.random_range(0..healthy.len())],
        };
        // Half the aimed ones meet faults in the log's reset for the join: the member fails
        // (its replacement takes over) and the power goes, before or after its headers.
        if aimed.is_some() && self.cfg.faults && self.replace_rng.random_bool(0.5) {
            let pull = self.step + self.replace_rng.random_range(1..20);
            self.join_pull_at = Some(pull);
            self.join_cut_at = Some(pull + self.replace_rng.random_range(1..40));
        }
        // The old disk's I/Os in flight go on through the pair (`Replacing` takes them over).
        let seed = self.replace_rng.random::<u8>() | 1;
        let data_bytes = (self.cfg.member_sectors * SECTOR_BYTES) as usize;
        let image = self.members[m].bitmap_image();
        let mut disk = SimMember::new(
            data_bytes,
            |i| (i as u8).wrapping_mul(seed),
            &image,
            self.cfg.log_bytes(),
        );
        disk.bad_block_log = self.cfg.bad_block_logs;
        // What the engine queued before now is for the disk of now (its log writes).
        self.slot_disk_at_replacement[m] = self.slot_disks[m];
        self.array.start_replacement(Self::member_index(m));
        self.stats.replacements += 1;
        self.note(|| format!("member {m} is being replaced"));
        self.replacement = Some(Replacement {
            member: m,
            disk,
            next: 0,
            window_out: false,
            copied: false,
            failed: false,
            failed_window: false,
        });
        self.replace_at = None;
        Ok(())
    }

    /// The faults `start_replacement` aimed at a join, when due: the member being replaced
    /// is pulled (if the array can lose it), then the power is cut (if it may be).
    pub(crate) fn join_faults(&mut self) -> Result<(), SimFailure> {
        if self.join_pull_at.is_some_and(|at| self.step >= at) {
            self.join_pull_at = None;
            // Within parity, with every member that has latent errors (as `fault`).
            let room =
                self.lost_members().len() + 1 + self.bad_members().len() <= self.max_degraded();
            match &self.replacement {
                Some(r) if room && !self.members[r.member].pulled => {
                    let m = r.member;
                    self.members[m].pulled = true;
                    self.array.fail_member(Self::member_index(m));
                    self.stats.members_pulled += 1;
                    self.note(|| format!("member {m} pulled as its replacement joins"));
                }
                _ => {}
            }
        }
        if self.join_cut_at.is_some_and(|at| self.step >= at) {
            self.join_cut_at = None;
            if self.may_cut() {
                self.power_cut()?;
            }
        }
        Ok(())
    }

    /// A member with a log write the engine has queued, if any (the first).
    fn queued_log_member(&self) -> Option<usize> {
        self.array.members_with_queued_log_writes().first().map(|m| m.get())
    }

    /// The sync process's next copy window, or the flush that ends the copy.
    pub(crate) fn submit_replace_window(&mut self) {
        let Some(r) = &self.replacement else { return };
        if r.window_out || r.copied || r.failed || r.failed_window {
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        let next = r.next;
        if next >= self.cfg.member_sectors {
            let t = self.oracle.flush_submitted();
            self.user.insert(id, User::ReplaceFlush(t));
            self.array.submit_flush(ReqId(id));
        } else {
            let window =
                (self.cfg.chunk_bytes / SECTOR_BYTES * 2).min(self.cfg.member_sectors - next);
            let sync = User::Sync { kind: SyncKind::Replace, member_sector: next, sectors: window };
            self.user.insert(id, sync);
            self.mark_active();
            self.array.submit_sync(ReqId(id), SyncKind::Replace, Sector(next), window);
        }
        self.replacement.as_mut().expect("a replacement").window_out = true;
    }

    /// A copy window finished.
    pub(crate) fn replace_window_done(&mut self, member_sector: u64, sectors: u64) {
        if let Some(r) = self.replacement.as_mut()
            && r.window_out
            && r.next == member_sector
        {
            r.next = member_sector + sectors;
            r.window_out = false;
        }
    }

    /// A copy window stopped: the member being replaced failed (`replacement_step` hands
    /// over to the new disk from where the copy got to).
    pub(crate) fn replace_window_failed(&mut self) {
        if let Some(r) = self.replacement.as_mut() {
            r.window_out = false;
            r.failed_window = true;
        }
    }

    /// The flush after the last window completed: the copy is durable.
    pub(crate) fn replace_flushed(&mut self) {
        if let Some(r) = self.replacement.as_mut() {
            r.window_out = false;
            r.copied = true;
        }
    }

    /// A write (or discard, as zeros) that the member got, for the new disk too; None: a
    /// copy-write, which goes to the new disk alone. Returns false only for a copy-write to
    /// a member with no replacement (which would be an engine bug).
    pub(crate) fn replacement_write(
        &mut self,
        member: usize,
        offset: usize,
        data: &[u8],
        fua: bool,
    ) -> bool {
        let Some(r) = self.replacement.as_mut().filter(|r| r.member == member) else {
            return false;
        };
        if r.failed {
            return true;
        }
        // A new disk fails now and then: the replacement is given up.
        if self.replace_rng.random_bool(0.001) {
            r.failed = true;
            return true;
        }
        if !r.disk.write(offset, data, fua) {
            r.failed = true;
        }
        true
    }

    /// The new disk's flush mark when a flush of `member` is submitted.
    pub(crate) fn replacement_flush_mark(&self, member: usize) -> Option<u64> {
        let r = self.replacement.as_ref().filter(|r| r.member == member)?;
        Some(r.disk.flush_mark())
    }

    /// A flush of `member` completed: the new disk flushes what it held at submission.
    pub(crate) fn replacement_flush(&mut self, member: usize, mark: Option<u64>) {
        if let (Some(r), Some(mark)) =
            (self.replacement.as_mut().filter(|r| r.member == member && !r.failed), mark)
            && !r.disk.flush(mark)
        {
            r.failed = true;
        }
    }

    /// At a power cut: the copy starts over on the restarted engine, or is given up when
    /// the member is gone.
    pub(crate) fn replacement_after_cut(&mut self, gone: &[bool]) {
        let Some(r) = self.replacement.as_mut() else { return };
        r.disk.power_cut(&mut self.rng);
        if gone[r.member] || r.failed {
            self.replacement = None;
            self.stats.replacements_given_up += 1;
            self.replace_at = Some(self.step + 1000);
            return;
        }
        r.next = 0;
        r.window_out = false;
        r.copied = false;
        r.failed_window = false;
        let m = r.member;
        self.slot_disk_at_replacement[m] = self.slot_disks[m];
        self.array.start_replacement(Self::member_index(m));
        self.stats.replacements_restarted += 1;
    }

    /// At the end of a run: the copy under way finishes.
    pub(crate) fn finish_replacement(&mut self) -> Result<(), SimFailure> {
        self.replace_at = None;
        for _ in 0..100_000 {
            if self.replacement.is_none() {
                return Ok(());
            }
            self.submit_replace_window();
            self.run_until_idle()?;
            self.replacement_step()?;
        }
        Err(self.fail("a replacement never ended"))
    }
}
