//! FLUSH, FUA and discard: what makes acknowledged data durable, and what frees space without
//! leaving parity inconsistent.
//!
//! A user write completes only when its data and parity member writes have completed, so a flush
//! needs little bookkeeping of its own: it pushes held-back writes out (md's delayed list must not
//! sit on data the user wants durable) and sends a flush to every member; the members then make
//! durable everything they completed before it. Two kinds of write complete sooner, and a flush
//! waits for them first: a stream's writes held in their heads (`write_back`), and with the log,
//! writes acknowledged once logged (`ppl::log_flush`). A FUA write sends its data and parity writes
//! FUA and is never held back.
//!
//! Discard: stripes covered whole are discarded on every member (data, P and Q), through their
//! stripe heads so that writes and reads of the same stripes stay ordered and no cached copy
//! outlives it; a member must read a discarded range back as zeros, which keeps P and Q (both
//! zero for zero data) consistent. The partial stripes at either end are written with zeros
//! through the normal write path (rmw or rcw), so parity is never left stale.

use super::{Array, ArrayError, Kind, Pending, ReqId};
use crate::units::{DiskIndex, Sector};

impl Array {
    /// Completes when every write completed before it is durable on the members. Writes held
    /// back for stripe filling start at once.
    pub fn submit_flush(&mut self, id: ReqId) {
        let Some(slot) = self.admit_range(id, Sector(0), 0, Vec::new()) else { return };
        self.request_mut(slot).acks_writes = true;
        self.release_held_writes();
        self.start_delayed();
        if !self.flush_waits_for_held(slot) && !self.log_flush(slot) {
            self.queue_request_flushes(slot);
        }
        self.request_mut(slot).outstanding -= 1;
        self.finish_if_done(slot);
    }

    /// A flush to every live member for request `slot`.
    fn queue_request_flushes(&mut self, slot: usize) {
        for m in 0..self.failed.len() {
            if self.failed[m] {
                continue;
            }
            let member = DiskIndex(m as u16);
            self.queue_member_flush(member, Pending::Flush { slot, member });
            self.request_mut(slot).outstanding += 1;
        }
    }

    /// A flush (or FUA write) the log let go with nothing to wait for: a flush flushes the
    /// members as usual, a FUA write (durable once written) completes.
    pub(super) fn flush_request_members(&mut self, slot: usize) {
        if !self.request(slot).fua {
            self.queue_request_flushes(slot);
        }
        self.finish_if_done(slot);
    }

    /// A write that is durable, data and parity, when it completes.
    pub fn submit_write_fua(&mut self, id: ReqId, sector: Sector, buf: Vec<u8>) {
        self.write_request(id, sector, buf, true);
    }

    /// Discards `[sector, +sectors)`: afterwards it reads back as zeros.
    pub fn submit_discard(&mut self, id: ReqId, sector: Sector, sectors: u64) {
        let Some(slot) = self.admit_range(id, sector, sectors, Vec::new()) else { return };
        self.request_mut(slot).zeroes = true;
        self.request_mut(slot).acks_writes = true;
        let stripe = self.geometry.stripe_data_sectors();
        let end = sector.0 + sectors;
        let whole_from = sector.0.div_ceil(stripe) * stripe;
        let whole_to = end / stripe * stripe;
        // The partial stripes: zeros written (straight to the members on RAID0).
        let zeros = |a: &mut Self, from: u64, to: u64| {
            if a.raid0_direct() {
                a.direct_write(slot, Sector(from), to - from, 0);
            } else {
                a.add_head_pieces(slot, Kind::Write, 0, from, to - from);
            }
        };
        if whole_from < whole_to {
            zeros(self, sector.0, whole_from);
            self.add_head_pieces(slot, Kind::Discard, 0, whole_from, whole_to - whole_from);
            zeros(self, whole_to, end);
        } else {
            zeros(self, sector.0, end);
        }
        self.request_mut(slot).outstanding -= 1;
        self.finish_if_done(slot);
        self.start_delayed_when_idle();
    }

    /// A member flush finished. A member that cannot flush may have lost completed writes:
    /// it fails, and the flush fails only if that takes the array beyond its redundancy.
    pub(super) fn flush_done(&mut self, slot: usize, member: DiskIndex, ok: bool) {
        if !ok {
            self.mark_failed(member);
            if self.beyond_redundancy() {
                self.request_mut(slot).error.get_or_insert(ArrayError::BeyondRedundancy);
            }
        }
        self.request_mut(slot).outstanding -= 1;
        self.finish_if_done(slot);
    }
}
