//! The runtime's share of md's lifecycle: sync work (resync, check, repair, recovery) routed to
//! the workers that own each row, members coming back or changing instance, and what the
//! workers found (mismatches, bitmap bits). The policy (which window next, how fast, what the
//! superblocks say) is the lifecycle layer's (`uraid-md`); this only carries it out.
//!
//! Ordering: every message to a worker goes down its one channel, so a sync window sent after
//! `start_recovery` is planned with the member already recovering, on every worker.

use crate::request::{self, Callback, Completed, Parent, PieceOp};
use crate::runtime::Runtime;
use crate::worker::Msg;
use crate::{RuntimeError, source::MemberSource};
use std::sync::PoisonError;
use std::sync::mpsc;
use uraid_core::Sector;
use uraid_core::array::{ArrayError, Mismatch, SyncKind};

impl Runtime {
    /// Sectors of each member's data area.
    #[must_use]
    pub fn member_sectors(&self) -> u64 {
        self.member_sectors
    }

    /// Runs `kind` over member sectors `[member_sector, +sectors)` (widened to whole stripe
    /// units); `done` is called when every row's share has finished. User I/O continues: each
    /// stripe head serialises the sync with writes to it.
    pub fn sync(
        &self,
        kind: SyncKind,
        member_sector: u64,
        sectors: u64,
        done: impl FnOnce(Completed) + Send + 'static,
    ) {
        let done: Callback = Box::new(done);
        let end = member_sector.checked_add(sectors);
        if sectors == 0 || end.is_none_or(|end| end > self.member_sectors) {
            let size = self.member_sectors;
            let e = ArrayError::OutOfRange { sector: member_sector, sectors, size };
            return done(Completed::whole(Err(e.into()), Vec::new()));
        }
        // A member-sector row (one chunk of each member) is an array row: same workers.
        let spans = request::split(member_sector, sectors, self.chunk_sectors, self.workers());
        let parent = Parent::new(spans.len(), done, self.copied.clone());
        for (i, s) in spans.iter().enumerate() {
            let op = PieceOp::Sync { kind, sectors: s.sectors };
            self.send(s.worker, op, Sector(s.sector), Vec::new(), i, &parent);
        }
    }

    /// As `sync`, waiting for the answer.
    pub fn sync_wait(
        &self,
        kind: SyncKind,
        member_sector: u64,
        sectors: u64,
    ) -> Result<(), RuntimeError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.sync(kind, member_sector, sectors, move |c| {
            let _ = tx.send(c);
        });
        rx.recv().map_err(|_| RuntimeError::Gone)?.result
    }

    /// One instance of the device `source` holds at index `member` per worker.
    fn open_instances(
        &self,
        member: usize,
        source: &dyn MemberSource,
    ) -> Result<Vec<Box<dyn uraid_io::Member>>, RuntimeError> {
        let instances: Result<Vec<_>, _> = (0..self.workers())
            .map(|w| {
                source.open(member).map_err(|e| RuntimeError::Open {
                    worker: w,
                    member,
                    source: std::sync::Arc::new(e),
                })
            })
            .collect();
        let instances = instances?;
        // A spare or replacement that cannot discard to zeros turns discards off for good.
        self.note_discard(&instances);
        Ok(instances)
    }

    /// Gives `member`'s slot a new instance in every worker, opened from `source` (which
    /// holds the new device at index `member`): a spare for a failed member, or an empty
    /// stand-in after a remove. The member stays failed until `start_recovery`.
    pub fn replace_member(
        &self,
        member: usize,
        source: &dyn MemberSource,
    ) -> Result<(), RuntimeError> {
        assert!(member < self.raid_disks, "member {member} of {}", self.raid_disks);
        self.fail_member(member);
        for (w, instance) in self.open_instances(member, source)?.into_iter().enumerate() {
            // A worker gone refuses everything anyway.
            let _ = self.senders[w].send(Msg::Replace { member, instance });
        }
        Ok(())
    }

    /// md's replace: pairs `member` with the device `source` opens at index `member`, which
    /// gets every write from now on, while `SyncKind::Replace` windows copy the member to it.
    /// The member stays in the array throughout. The returned control ends it: set its mode
    /// (`New` once the copy has passed the end, `Old` to give up), then `end_replacement`.
    pub fn start_replacement(
        &self,
        member: usize,
        source: &dyn MemberSource,
    ) -> Result<std::sync::Arc<uraid_io::ReplacementControl>, RuntimeError> {
        assert!(member < self.raid_disks, "member {member} of {}", self.raid_disks);
        let instances = self.open_instances(member, source)?;
        let control = uraid_io::ReplacementControl::new();
        for (w, instance) in instances.into_iter().enumerate() {
            let control = control.clone();
            let _ = self.senders[w].send(Msg::StartReplacement { member, instance, control });
        }
        Ok(control)
    }

    /// Fails `member` in every worker's engine before returning (`fail_member` only marks it
    /// for each to adopt before its next piece). Before a replacement takes a failed member's
    /// place: the pair then sends every I/O to the new device, and an engine that had not yet
    /// adopted the failure read the new device's uncopied blocks as the member's (uraid-md's
    /// `lifecycle_chaos`, a member pulled during its copy, on two workers).
    pub fn fail_member_now(&self, member: usize) {
        self.fail_member(member);
        let answers: Vec<_> = self
            .senders
            .iter()
            .filter_map(|tx| {
                let (reply, answer) = mpsc::sync_channel(1);
                // A worker gone serves nothing.
                tx.send(Msg::Fail { member, reply }).ok().map(|()| answer)
            })
            .collect();
        for answer in answers {
            let _ = answer.recv();
        }
    }

    /// The member being replaced failed and its replacement (its control's mode set to
    /// `New`) takes its place: in sync below `front`, where the copy got to, except where the
    /// bitmap has bits set (writes made since the failure reached neither device). Returns the
    /// member-sector ranges a recovery must rebuild. Without a bitmap (or with several
    /// workers, which arrays with one never have) it is recovered whole: `start_recovery` from
    /// 0, and None.
    pub fn take_over_replacement(&self, member: usize, front: u64) -> Option<Vec<(u64, u64)>> {
        assert!(member < self.raid_disks, "member {member} of {}", self.raid_disks);
        let ranges = match &self.senders[..] {
            [tx] => {
                self.wide.revive(member, 1);
                let (reply, answer) = mpsc::sync_channel(1);
                let sent = self.send_revival(tx, member, Msg::TakeOver { member, front, reply });
                sent.then(|| answer.recv().ok().flatten()).flatten()
            }
            _ => None,
        };
        if ranges.is_none() {
            self.end_replacement(member);
            self.start_recovery(member, 0);
        }
        ranges
    }

    /// The replacement of `member` is over (its control's mode says which device stays).
    pub fn end_replacement(&self, member: usize) {
        for tx in &self.senders {
            let _ = tx.send(Msg::EndReplacement { member });
        }
    }

    /// Brings `member` back as being recovered: in sync below `offset` member sectors and
    /// rebuilt above it by `SyncKind::Recovery` windows (reads there are rebuilt from parity,
    /// writes there go to it as the rebuild passes).
    pub fn start_recovery(&self, member: usize, offset: u64) {
        assert!(member < self.raid_disks, "member {member} of {}", self.raid_disks);
        self.wide.revive(member, self.senders.len());
        for tx in &self.senders {
            self.send_revival(tx, member, Msg::StartRecovery { member, offset });
        }
    }

    /// Brings `member` back by re-add (md's `--re-add`, see `Array::start_readd`): in sync
    /// everywhere but where the write-intent bitmap has bits set, which a recovery over the
    /// returned member-sector ranges rebuilds. None when the array has no bitmap (re-add needs
    /// one; an array with a bitmap runs one worker, which keeps it) or the worker is gone:
    /// the member stays failed.
    #[must_use]
    pub fn start_readd(&self, member: usize) -> Option<Vec<(u64, u64)>> {
        assert!(member < self.raid_disks, "member {member} of {}", self.raid_disks);
        let [tx] = &self.senders[..] else { return None };
        // Cleared first (a stale mask once made reads refuse a stripe within redundancy,
        // found with two tests running at once: see `ArrayWide::revive`).
        self.wide.revive(member, 1);
        let (reply, answer) = mpsc::sync_channel(1);
        let sent = self.send_revival(tx, member, Msg::StartReAdd { member, reply });
        let ranges = sent.then(|| answer.recv().ok().flatten()).flatten();
        if ranges.is_none() {
            self.fail_member(member);
        }
        ranges
    }

    /// Sends a message that brings `member` back, counted by `ArrayWide::revive`: a worker
    /// gone takes none, and is not waited for. Whether it was sent.
    fn send_revival(&self, tx: &mpsc::Sender<Msg>, member: usize, msg: Msg) -> bool {
        let sent = tx.send(msg).is_ok();
        if !sent {
            self.wide.revived(member);
        }
        sent
    }

    /// A sync action starts: `mismatches` then lists only what it finds. Sent down the same
    /// queues as its windows, so every worker forgets before it checks.
    pub fn clear_mismatches(&self) {
        for tx in &self.senders {
            let _ = tx.send(Msg::ClearMismatches);
        }
    }

    /// Recovery progress: `member` is in sync below `offset` (at the end: everywhere).
    pub fn set_recovery_offset(&self, member: usize, offset: u64) {
        for tx in &self.senders {
            let _ = tx.send(Msg::RecoveryOffset { member, offset });
        }
    }

    /// Mismatches found by check, repair and resync (up to the engine's limit per worker),
    /// in member-sector order, and md's mismatch_cnt (sectors) over every worker.
    #[must_use]
    pub fn mismatches(&self) -> (Vec<Mismatch>, u64) {
        let mut all = Vec::new();
        let mut count = 0;
        for v in &self.views {
            let (found, n) = &*v.mismatches.lock().unwrap_or_else(PoisonError::into_inner);
            all.extend_from_slice(found);
            count += n;
        }
        all.sort_by_key(|m| m.member_sector.0);
        (all, count)
    }

    /// A new bitmap superblock (the bytes in front of the bits) for the engine to write.
    pub fn set_bitmap_header(&self, header: Vec<u8>) {
        if let Some(tx) = self.senders.first() {
            let _ = tx.send(Msg::BitmapHeader(header));
        }
    }

    /// The resync of member sectors `[sector, +sectors)` is done: the bitmap bits found set
    /// there at start may clear.
    pub fn bitmap_resynced(&self, sector: u64, sectors: u64) {
        for tx in &self.senders {
            let _ = tx.send(Msg::BitmapResynced { sector, sectors });
        }
    }

    /// Bitmap chunks set as of the last bitmap tick, and bitmap page writes so far.
    #[must_use]
    pub fn write_intent_state(&self) -> (Vec<u64>, u64) {
        let v = self.views.first().expect("a runtime has workers");
        v.write_intent.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}
