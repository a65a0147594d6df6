//! Full-stripe writes in batches (md's stripe batching: raid5.c's `batch_head`). A write that
//! covers every data chunk of a stripe needs no reads and no cached blocks: its parity comes
//! from the request's buffer alone. Through stripe heads it would still cost a head per
//! `stripe_size` unit (64 for a MiB at 4 KiB) and a member I/O per unit and member; md chains
//! such heads so that one handles them all. Here the whole stripe is one batch: parity computed
//! once over the chunk, one member write per member (data straight from the request's buffer,
//! P and Q from a pooled buffer), no head taken.
//!
//! Only where nothing else is going on in the stripe: every member healthy and in sync there,
//! no head of the stripe held or waited for (cached idle heads are dropped: their blocks
//! would go stale) and its write-intent bits durable. Otherwise the write goes through the
//! heads as before, which set bits, so that the stream's next stripes batch. With the partial
//! parity log, a batch outside a durable range first logs its range and waits for it
//! (`ppl::batch`). While a batch is held or in flight no head of its stripe starts
//! (`start_piece` waits for it), so a later write or a degraded read of the stripe never sees
//! it half written.

use super::ppl::BatchAdmit;
use super::{Array, ArrayError, IoArea, IoBuf, MemberIo, MemberOp, Pending, PerMember};
use crate::buffer::BlockBuf;
use crate::geometry::DiskRole;
use crate::layout::Level;
use crate::stripe::StripeKey;
use crate::units::{DiskIndex, SECTOR_BYTES, StripeNumber};

/// Parity buffers kept for reuse (each a chunk): enough for a queue of batches in flight.
const PARITY_BUFFERS_KEPT: usize = 32;

pub(super) struct BatchWrite {
    slot: usize,
    stripe: StripeNumber,
    /// Member writes in flight (none while it waits for the log).
    outstanding: usize,
    /// P, then Q on RAID6.
    parity: Vec<BlockBuf>,
}

/// The batches in flight, by index (`Pending::Batch`, `IoBuf::Batch`).
#[derive(Default)]
pub(super) struct Batches {
    slots: Vec<Option<BatchWrite>>,
    free_slots: Vec<usize>,
    /// Stripes with a batch in flight.
    stripes: crate::fast_hash::HashMap<u64, usize>,
    spare_parity: Vec<BlockBuf>,
}

impl Batches {
    pub(super) fn writing(&self, stripe: StripeNumber) -> bool {
        !self.stripes.is_empty() && self.stripes.contains_key(&stripe.0)
    }
}

impl Array {
    /// Writes request `slot`'s whole stripe `stripe` as one batch if nothing else is going on
    /// there (now, or once the log holds its range); false if it must go through the heads.
    pub(super) fn try_batch_write(&mut self, slot: usize, stripe: StripeNumber) -> bool {
        if !self.batch_allowed(slot, stripe) {
            return false;
        }
        let chunk = self.geometry.chunk_sectors();
        let start = stripe.0 * chunk;
        if !self.write_intent_try(start, chunk) {
            return false;
        }
        let index = self.batches.free_slots.pop().unwrap_or(self.batches.slots.len());
        if index == self.batches.slots.len() {
            self.batches.slots.push(None);
        }
        // Parity is filled in below; the log may look the batch's stripe up meanwhile.
        let parity = Vec::new();
        self.batches.slots[index] = Some(BatchWrite { slot, stripe, outstanding: 0, parity });
        let admit = self.log_admit_batch(index, stripe);
        if admit == BatchAdmit::Heads {
            self.batches.slots[index] = None;
            self.batches.free_slots.push(index);
            self.write_intent_done(start, chunk);
            return false;
        }
        for unit in 0..self.units_per_chunk() {
            let forgotten = self.cache.forget(StripeKey { stripe, unit });
            debug_assert!(forgotten, "checked: no head of the stripe is held");
        }
        let parity = self.batch_parity(slot, stripe);
        let heads = self.units_per_chunk();
        self.stats.stripe_writes_full += u64::from(heads);
        self.stats.stripe_batches += 1;
        self.full_stripe_writes += u64::from(heads);
        let batch = self.batches.slots[index].as_mut().expect("just made");
        batch.parity = parity;
        self.batches.stripes.insert(stripe.0, index);
        self.request_mut(slot).outstanding += 1;
        if admit == BatchAdmit::Now {
            self.release_batch(index);
        }
        self.start_overtaken();
        true
    }

    /// Queues batch `index`'s member writes: data straight from the request's buffer, P and Q
    /// from the batch's. A member that failed while the batch waited for the log is left out
    /// (the others make the stripe whole: parity is over all the new data).
    pub(super) fn release_batch(&mut self, index: usize) {
        let batch = self.batches.slots[index].as_ref().expect("a batch held");
        let (slot, stripe) = (batch.slot, batch.stripe);
        let chunk = self.geometry.chunk_sectors();
        let start = stripe.0 * chunk;
        let buf_offset = self.batch_buf_offset(slot, stripe);
        let chunk_bytes = usize::try_from(chunk * SECTOR_BYTES).expect("a chunk fits");
        let bufs: PerMember<IoBuf> = self
            .geometry
            .stripe_map(stripe)
            .roles
            .iter()
            .map(|role| match *role {
                DiskRole::Data { slot: data_slot, .. } => IoBuf::Request {
                    slot,
                    offset: buf_offset + usize::from(data_slot) * chunk_bytes,
                },
                DiskRole::P => IoBuf::Batch { index, parity: 0 },
                DiskRole::Q => IoBuf::Batch { index, parity: 1 },
            })
            .collect();
        let fua = self.request(slot).fua;
        let mut outstanding = 0;
        for (m, buf) in bufs.into_iter().enumerate() {
            if self.failed[m] {
                continue;
            }
            let member = DiskIndex(m as u16);
            let tag = self.new_tag();
            self.queue.push_back(MemberIo {
                tag,
                member,
                op: MemberOp::Write,
                sector: crate::Sector(start),
                sectors: chunk,
                buf,
                fua,
                area: IoArea::Data,
                before_replacement: false,
            });
            self.inflight.insert(tag, member, Pending::Batch { index, member });
            outstanding += 1;
        }
        self.batches.slots[index].as_mut().expect("a batch held").outstanding = outstanding;
        if self.beyond_redundancy() {
            self.request_mut(slot).error.get_or_insert(ArrayError::BeyondRedundancy);
        }
        if outstanding == 0 {
            self.batch_finished(index);
        }
    }

    /// Where `stripe`'s data starts in request `slot`'s buffer.
    fn batch_buf_offset(&self, slot: usize, stripe: StripeNumber) -> usize {
        let array_sector = stripe.0 * self.geometry.stripe_data_sectors();
        let from = array_sector - self.request(slot).sector.0;
        usize::try_from(from * SECTOR_BYTES).expect("fits")
    }

    /// The stripe batch `index` writes.
    pub(super) fn batch_stripe(&self, index: usize) -> StripeNumber {
        self.batches.slots[index].as_ref().expect("a batch held").stripe
    }

    fn units_per_chunk(&self) -> u32 {
        u32::try_from(self.geometry.chunk_sectors() / self.unit_sectors).expect("fits")
    }

    /// Whether stripe `stripe` may be written as one batch now (see the module docs; the
    /// bitmap and the log are asked last, as they count the write when they agree).
    fn batch_allowed(&self, slot: usize, stripe: StripeNumber) -> bool {
        let chunk = self.geometry.chunk_sectors();
        let (start, end) = (stripe.0 * chunk, (stripe.0 + 1) * chunk);
        self.geometry.level() != Level::Raid0
            && !self.request(slot).zeroes
            && !self.batches.writing(stripe)
            && (0..self.failed.len()).all(|m| self.in_sync_range(m, start, end))
            && (0..self.units_per_chunk()).all(|unit| {
                let key = StripeKey { stripe, unit };
                self.held_head(key).is_none() && !self.waiting_keys.contains_key(&key)
            })
    }

    /// P (and Q) of the stripe's data, all in the request's buffer from `buf_offset`.
    fn batch_parity(&mut self, slot: usize, stripe: StripeNumber) -> Vec<BlockBuf> {
        let buf_offset = self.batch_buf_offset(slot, stripe);
        let chunk_bytes =
            usize::try_from(self.geometry.chunk_sectors() * SECTOR_BYTES).expect("fits");
        let raid6 = self.geometry.level() == Level::Raid6;
        let mut take = || {
            self.batches
                .spare_parity
                .pop()
                .filter(|b| b.len() == chunk_bytes)
                .unwrap_or_else(|| BlockBuf::zeroed(chunk_bytes))
        };
        let mut p = take();
        let mut q = raid6.then(take);
        let map = self.geometry.stripe_map(stripe);
        let buf = &self.request(slot).buf;
        let data = |slot: usize| {
            let at = buf_offset + slot * chunk_bytes;
            &buf[at..at + chunk_bytes]
        };
        if let Some(q) = q.as_mut() {
            let sources: PerMember<Option<&[u8]>> = map
                .syndrome
                .iter()
                .map(|d| {
                    d.map(|d| match map.roles[d.get()] {
                        DiskRole::Data { slot, .. } => data(usize::from(slot)),
                        DiskRole::P | DiskRole::Q => unreachable!("the syndrome holds data"),
                    })
                })
                .collect();
            uraid_parity::gen_syndrome(&mut p, q, &sources);
        } else {
            let sources: PerMember<&[u8]> = (0..map.data_disk.len()).map(data).collect();
            uraid_parity::xor_gen(&mut p, &sources);
        }
        let mut parity = vec![p];
        parity.extend(q);
        parity
    }

    /// The bytes a batch's parity write sends.
    pub(super) fn batch_parity_buf(&self, index: usize, parity: u8) -> &[u8] {
        let batch = self.batches.slots[index].as_ref().expect("a batch in flight");
        &batch.parity[usize::from(parity)]
    }

    /// A batch's member write completed. A failed write fails its member (the stripe stays
    /// consistent: parity was computed over all the new data); the write fails only if that
    /// takes the array beyond its redundancy. When all are done, heads waiting for the
    /// stripe start.
    pub(super) fn batch_write_done(&mut self, index: usize, member: DiskIndex, ok: bool) {
        let batch = self.batches.slots[index].as_mut().expect("a batch in flight");
        let slot = batch.slot;
        batch.outstanding -= 1;
        let finished = batch.outstanding == 0;
        if !ok {
            self.mark_failed(member);
            if self.beyond_redundancy() {
                self.request_mut(slot).error.get_or_insert(ArrayError::BeyondRedundancy);
            }
        }
        if finished {
            self.batch_finished(index);
        }
    }

    /// Every member write of batch `index` is done: heads waiting for its stripe start.
    fn batch_finished(&mut self, index: usize) {
        let batch = self.batches.slots[index].take().expect("a batch in flight");
        let slot = batch.slot;
        self.batches.free_slots.push(index);
        self.batches.stripes.remove(&batch.stripe.0);
        for p in batch.parity {
            if self.batches.spare_parity.len() < PARITY_BUFFERS_KEPT {
                self.batches.spare_parity.push(p);
            }
        }
        let chunk = self.geometry.chunk_sectors();
        let start = batch.stripe.0 * chunk;
        self.write_intent_done(start, chunk);
        self.log_batch_done(batch.stripe);
        self.request_mut(slot).outstanding -= 1;
        self.finish_if_done(slot);
        self.start_waiting();
    }
}
