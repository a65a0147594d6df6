//! Write-back of a stream's partial stripes: acknowledged at once and held in the stripe head
//! until the stream fills the stripe, so that it goes out as a full-stripe write with no reads.
//!
//! Why: a 4 KiB sequential writer at depth 16 on 64 KiB chunks has its 16 writes in flight in
//! one chunk's column: 16 stripe heads, each given one data block. The delayed list (md's)
//! cannot help, since the writer sends nothing more until those complete; so every head was
//! written three or four times over (read-modify-write each time) and, with the log, logged
//! as often. md's raid5-cache in write-back mode holds such stripes in its cache, made durable
//! by its journal. Here they are held unwritten, like data in a disk's volatile cache: the
//! write is not durable until a flush, which is all a block device promises of a write that
//! is not FUA. A power cut loses it (and nothing else: nothing was written in place); a lost
//! member loses nothing (the head holds the data).
//!
//! Only a caller that can time a hold turns this on (`set_write_back`): the engine has no
//! clock, and a stream that stops mid-stripe must not sit in memory. The hold ends:
//! - when the stripe is whole (it is written as a full stripe);
//! - when anything but a write reaches the head (a read, a sync, a discard);
//! - at a flush (which then waits for the held writes to complete) or `release_held_writes`
//!   (the caller's timer, once no request has come for a while);
//! - once `HOLD_STRIPES` stripes' worth of writes have come since (a stream fills a stripe
//!   within one stripe's worth, a few interleaved streams within a few);
//! - when a request waits for a free head with nothing in flight (the oldest goes).
//!
//! At most half the cache is held, and only heads whose every write continues a write that
//! continued another (`Request::stream_run`): not a random write's (the next requests will
//! not fill it), a FUA write's, or a batch with a read in it.

use super::handle::Phase;
use super::{Array, Kind};
use crate::stripe::HeadId;
use std::collections::{BTreeSet, VecDeque};

/// Stripes' worth of writes after which a held head goes, filled or not.
const HOLD_STRIPES: u64 = 4;

#[derive(Default)]
pub(super) struct WriteBack {
    enabled: bool,
    /// Heads held, in the order they were first held, with `written` then. An entry is stale
    /// once its head's hold ended (the head may be held again since, for a later stripe, with
    /// an entry of its own): it releases nothing. Until the ninth session of 2026-11-28 a
    /// stale entry released its head's later hold early; once a stream had cycled through the
    /// cache, every head of it then went as a read-modify-write.
    order: VecDeque<(HeadId, u64)>,
    /// Heads held now.
    held: usize,
    /// Sectors of writes submitted so far: the clock a held head ages by.
    written: u64,
    /// Acknowledgements given so far (the last one's number).
    acks: u64,
    /// Acknowledged requests whose writes have not completed.
    unwritten: BTreeSet<u64>,
    /// Flushes waiting for the held writes acknowledged before them: (slot, last ack then).
    deferred_flushes: Vec<(usize, u64)>,
}

impl Array {
    /// Turns the write-back of a stream's partial stripes on or off (see the module docs).
    /// The caller must then call `release_held_writes` once no request has come for a while.
    pub fn set_write_back(&mut self, on: bool) {
        self.write_back.enabled = on;
        if !on {
            self.release_held_writes();
        }
    }

    /// Tells the engine it serves one stripe in every `stripes` (the runtime's workers take
    /// stripes in turn: worker `i` of `n` serves `i`, `i + n`, ...). A sequential stream then
    /// skips from the end of one of its stripes to the start of its next, and a write that
    /// does so continues the stream (`Request::continues_stream`, `stream_run`): without it
    /// each stripe began a new stream, whose first two writes were read-modify-writes (and,
    /// with the log, logged) rather than held for the stream (`uraid bench serve`,
    /// `seq_write_4k`). 1 (the default): every stripe.
    pub fn set_stream_stride(&mut self, stripes: u64) {
        self.stream_stride = stripes.max(1);
    }

    /// Whether stripe heads hold acknowledged writes that are not being written: the caller's
    /// timer should end the hold (`release_held_writes`) if no request comes.
    #[must_use]
    pub fn holds_writes_back(&self) -> bool {
        self.write_back.held > 0
    }

    /// Ends every hold: the held writes start (read-modify-write or reconstruct-write).
    pub fn release_held_writes(&mut self) {
        for (id, at) in std::mem::take(&mut self.write_back.order) {
            self.release_held(id, at);
        }
    }

    /// Head `id`'s batch would be delayed or started with reads: holds it instead, and
    /// acknowledges the requests it completes, if the module's rules allow. Returns whether
    /// it did.
    pub(super) fn hold_for_stream(&mut self, id: HeadId, needs_reads: bool, fua: bool) -> bool {
        let cap = self.cache.capacity() / 2;
        let st = &self.heads[&id];
        let was_held = st.held_back.is_some();
        let eligible = self.write_back.enabled
            && needs_reads
            && !fua
            && !st.hold_released
            && st.error.is_none()
            && st.queued.is_empty()
            && st.batch.iter().all(|p| {
                let r = self.request(p.slot);
                p.kind == Kind::Write && r.stream_run && !r.zeroes
            })
            && (was_held || self.write_back.held < cap);
        if !eligible {
            if was_held {
                self.state(id).held_back = None;
                self.write_back.held -= 1;
            }
            return false;
        }
        let since = self.heads[&id].delayed_since.unwrap_or(self.full_stripe_writes);
        let now = self.write_back.written;
        let st = self.state(id);
        // Held, off the delayed list: its hold's rules start it, never `start_delayed_random`.
        st.phase = Phase::Delayed { since, random: false };
        st.delayed_since = Some(since);
        if !was_held {
            st.held_back = Some(now);
            self.write_back.held += 1;
            self.write_back.order.push_back((id, now));
            // Off the delayed list (if it was delayed before): the hold's own rules end it.
            if let Some(i) = self.delayed.iter().position(|d| *d == id) {
                self.delayed.remove(i);
            }
        }
        let mut slots = Vec::new();
        for p in self.state(id).batch.iter_mut().filter(|p| !p.held) {
            p.held = true;
            slots.push(p.slot);
        }
        for slot in slots {
            self.request_mut(slot).held += 1;
            self.ack_if_all_held(slot);
        }
        true
    }

    /// Acknowledges request `slot` if every piece it still waits for is held.
    pub(super) fn ack_if_all_held(&mut self, slot: usize) {
        let r = self.request(slot);
        if r.ack_seq != 0
            || r.held == 0
            || r.held != r.outstanding
            || r.error.is_some()
            || r.log_acked
        {
            return;
        }
        let (id, buf) = (r.id, r.buf.clone());
        self.write_back.acks += 1;
        let seq = self.write_back.acks;
        self.write_back.unwritten.insert(seq);
        self.request_mut(slot).ack_seq = seq;
        self.stats.writes_held_back += 1;
        // The caller gets its buffer back; the request keeps a copy for the head.
        self.stats.bytes_copied += buf.len() as u64;
        // Nothing is on the members yet, so the acknowledgement need not wait for a failure
        // to be recorded (`failure_record`); the flush that makes it durable does.
        self.finished(id, Ok(()), buf, false);
    }

    /// A write acknowledged by the hold has completed (`ok`: without error): a flush that
    /// waited for it may go.
    pub(super) fn held_request_done(&mut self, seq: u64, ok: bool) {
        if !ok {
            // Acknowledged already: nobody to tell but the stats; reads of its sectors fail.
            self.stats.held_writes_failed += 1;
        }
        let wb = &mut self.write_back;
        wb.unwritten.remove(&seq);
        let oldest = wb.unwritten.first().copied().unwrap_or(u64::MAX);
        let (ready, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut wb.deferred_flushes).into_iter().partition(|f| f.1 < oldest);
        wb.deferred_flushes = later;
        for (slot, _) in ready {
            self.request_mut(slot).outstanding -= 1;
            if !self.log_flush(slot) {
                self.flush_request_members(slot);
            }
        }
    }

    /// A flush must wait for held writes acknowledged before it to complete (they were not on
    /// the members when it came). Returns whether it waits.
    pub(super) fn flush_waits_for_held(&mut self, slot: usize) -> bool {
        if self.write_back.unwritten.is_empty() {
            return false;
        }
        self.request_mut(slot).outstanding += 1;
        self.write_back.deferred_flushes.push((slot, self.write_back.acks));
        true
    }

    /// `sectors` more were submitted for writing: heads held longest go once
    /// `HOLD_STRIPES` stripes' worth have come since they were held.
    pub(super) fn age_held_writes(&mut self, sectors: u64) {
        let wb = &mut self.write_back;
        wb.written += sectors;
        if wb.order.is_empty() {
            return;
        }
        let limit = HOLD_STRIPES * self.geometry.stripe_data_sectors();
        while let Some(&(id, at)) = self.write_back.order.front() {
            if self.write_back.written - at <= limit {
                break;
            }
            self.write_back.order.pop_front();
            self.release_held(id, at);
        }
    }

    /// Releases the head held longest; returns whether there was one.
    pub(super) fn release_oldest_held(&mut self) -> bool {
        while let Some((id, at)) = self.write_back.order.pop_front() {
            if self.release_held(id, at) {
                return true;
            }
        }
        false
    }

    /// Ends head `id`'s hold if it is the one that began at `at`: its batch starts. Returns
    /// whether it was.
    fn release_held(&mut self, id: HeadId, at: u64) -> bool {
        let held = self.heads.get(&id).is_some_and(|st| st.held_back == Some(at));
        if !held {
            return false;
        }
        let st = self.state(id);
        st.held_back = None;
        st.hold_released = true;
        self.write_back.held -= 1;
        self.handle(id);
        true
    }
}
