//! Member failures are recorded before the writes that depend on them are acknowledged (md's
//! MD_SB_CHANGE_PENDING).
//!
//! Once a member fails, the writes that follow leave its blocks stale: a degraded write puts
//! the new data only in parity, and the failing write never reached the member. Until the
//! metadata says the member is faulty, a crash would bring it back as in sync after the
//! restart; its stale blocks would then be read as good, and a resync would compute parity
//! from them, losing the acknowledged data. So with `hold_writes_until_failures_recorded`,
//! writes, discards and flushes that finish while a failure is unrecorded are held; the
//! lifecycle layer (uraid-md) writes the superblocks and calls `failure_recorded`, and they
//! are acknowledged then. Reads are never held: what they return is right either way. Errors
//! are not held either: they acknowledge nothing.
//!
//! Member writes wait too, as md handles no stripe while the superblock change is pending:
//! a write planned around the failed member leaves its stripe consistent only without that
//! member, and a crash that forgets the failure brings it back. The simulator found it: a
//! log write failed on a parity member, the stripe's writes went on, and after the cut the
//! replay trusted that member's log, which had no entry for the stripe. Reads go on past the
//! waiting writes (I/O in flight completes in any order anyway, so the engine never reads
//! what a write it has not seen complete changes); a flush does not, so that it never passes
//! a write it must cover.

use super::{Array, ArrayError, MemberIo, MemberOp, ReqId};
use crate::units::DiskIndex;

/// The state of the hold (see the module docs).
#[derive(Default)]
pub(super) struct FailureRecord {
    /// Per member: failed here and not yet recorded. Empty while the hold is off.
    unrecorded: Vec<bool>,
    unrecorded_count: usize,
    held: Vec<(ReqId, Result<(), ArrayError>, Vec<u8>)>,
}

impl Array {
    /// Turns the hold on: from now on every member failure must be recorded by the caller
    /// (`failure_recorded`) before writes finished after it are acknowledged. Members already
    /// failed count as recorded (they were failed from the metadata).
    pub fn hold_writes_until_failures_recorded(&mut self) {
        self.failure_record.unrecorded = vec![false; self.failed.len()];
    }

    /// The caller's metadata now says `member` is faulty: once no failure is unrecorded, the
    /// writes held for them are acknowledged.
    pub fn failure_recorded(&mut self, member: DiskIndex) {
        let fr = &mut self.failure_record;
        if let Some(u) = fr.unrecorded.get_mut(member.get())
            && std::mem::take(u)
        {
            fr.unrecorded_count -= 1;
            if fr.unrecorded_count == 0 {
                self.done.append(&mut self.failure_record.held);
            }
        }
    }

    /// Whether a member failed here is not yet recorded (cheap: for every request).
    #[must_use]
    pub fn has_unrecorded_failures(&self) -> bool {
        self.failure_record.unrecorded_count > 0
    }

    /// The members failed here whose failure is not yet recorded.
    #[must_use]
    pub fn unrecorded_failures(&self) -> Vec<DiskIndex> {
        let u = &self.failure_record.unrecorded;
        (0..u.len()).filter(|&m| u[m]).map(|m| DiskIndex(m as u16)).collect()
    }

    /// Whether member writes wait for a failure's record: the runtime then has nothing to do
    /// but wait for it (or for new requests) once what it could issue has completed.
    #[must_use]
    pub fn writes_wait_for_record(&self) -> bool {
        self.failure_record.unrecorded_count > 0 && !self.queue.is_empty()
    }

    /// While a failure is unrecorded: the first queued read, or a flush with no write queued
    /// before it.
    pub(super) fn next_io_but_writes(&mut self) -> Option<MemberIo> {
        let mut behind_write = false;
        let at = self.queue.iter().position(|io| match io.op {
            MemberOp::Read => true,
            MemberOp::Flush => !behind_write,
            MemberOp::Write
            | MemberOp::Discard
            | MemberOp::CopyWrite
            | MemberOp::ListBad
            | MemberOp::ListBadReplacement => {
                behind_write = true;
                false
            }
        })?;
        self.queue.remove(at)
    }

    /// Requests finished but held until failures are recorded.
    #[must_use]
    pub fn held_requests(&self) -> usize {
        self.failure_record.held.len()
    }

    /// Fails `member` (no more I/O; its blocks are rebuilt from parity); with the hold on, a
    /// member not failed before is unrecorded until `failure_recorded`.
    pub(super) fn mark_failed(&mut self, member: DiskIndex) {
        let was = std::mem::replace(&mut self.failed[member.get()], true);
        let fr = &mut self.failure_record;
        if !was && let Some(u) = fr.unrecorded.get_mut(member.get()) {
            *u = true;
            fr.unrecorded_count += 1;
        }
    }

    /// A failed member comes back (recovery): nothing about it is left to record.
    pub(super) fn mark_back(&mut self, member: DiskIndex) {
        self.failed[member.get()] = false;
        self.failure_recorded(member);
    }

    /// Where a finished request goes: its caller, or the held list while a failure is
    /// unrecorded (`acks_writes`: a write, discard or flush that succeeded).
    pub(super) fn finished(
        &mut self,
        id: ReqId,
        result: Result<(), ArrayError>,
        buf: Vec<u8>,
        acks_writes: bool,
    ) {
        if acks_writes && result.is_ok() && self.failure_record.unrecorded_count > 0 {
            self.failure_record.held.push((id, result, buf));
        } else {
            self.done.push((id, result, buf));
        }
    }
}
