//! Whole-stripe batches (`batch_write`) under the partial parity log. A batch is a stream's
//! full-stripe write, so it logs what a full-stripe head would: nothing inside a durable
//! range, else a block-less range entry from its first head not inside one (the stream's
//! range ahead of it, or just its stripe when no stream runs into it). Until that entry is
//! durable the batch waits in the log's queue like a head, holding its stripe; it never falls
//! back to 4 KiB heads, whose I/Os would then land on the disks behind the stream's later
//! batches (seeks on an HDD, 16 I/Os a member per stripe on an SSD).

use super::{Array, Entries, LiveStripe, LogEntry, LogParity, Owner, Waiting};
use crate::units::{DiskIndex, StripeNumber};

/// What a batch does about the log (`Array::log_admit_batch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::array) enum BatchAdmit {
    /// Every head inside a durable range (or no log): write now.
    Now,
    /// Queued for a generation: `batch_write::release_batch` when it is durable.
    Wait,
    /// A head of the stripe has an entry of its own on the rings, which a range must not
    /// cover (the replay takes the newest): through the heads, which log their own.
    Heads,
}

impl Array {
    /// Batch `index` writing the whole of `stripe`: see `BatchAdmit`. Its heads count as
    /// written since the last reset (a later partial write's entry covers every data block)
    /// until `log_batch_done`.
    pub(in crate::array) fn log_admit_batch(
        &mut self,
        index: usize,
        stripe: StripeNumber,
    ) -> BatchAdmit {
        let Some(l) = self.ppl.as_ref() else { return BatchAdmit::Now };
        let keys: Vec<u64> = self.stripe_keys(stripe).collect();
        if keys.iter().any(|k| l.live.get(k).is_some_and(|v| !v.ranged)) {
            return BatchAdmit::Heads;
        }
        if l.ranges_usable() && keys.iter().all(|k| l.durable_range(*k)) {
            self.mark_stripe_written(stripe, &keys);
            self.ppl.as_mut().expect("checked").writing += keys.len();
            self.stats.writes_under_log_range += keys.len() as u64;
            return BatchAdmit::Now;
        }
        self.log_batch_wait(index);
        BatchAdmit::Wait
    }

    /// Queues batch `index` for the next generation with the range entries its stripe needs
    /// now (again after a reset, which retires every range).
    pub(super) fn log_batch_wait(&mut self, index: usize) {
        let stripe = self.batch_stripe(index);
        let (entries, own) = self.batch_range_entries(index, stripe);
        let keys: Vec<u64> = self.stripe_keys(stripe).collect();
        self.mark_stripe_written(stripe, &keys);
        // A one-head entry is that head's own (the replay treats it so): no range covers it,
        // and the head counts in `live`, as one with an entry of its own does.
        let modified = self.whole_stripe_modified(stripe);
        for &key in &own {
            self.mark_ranged_at(key, modified.clone());
            self.ppl.as_mut().expect("a log").live.get_mut(&key).expect("marked").ranged = false;
        }
        let l = self.ppl.as_mut().expect("a log");
        l.stripes.get_mut(&stripe.0).expect("marked").own = own;
        let ranged = entries.is_empty();
        let owner = Owner::Batch(index);
        l.waiting.push(Waiting { owner, discard: false, entries, ranged, acked: 0 });
    }

    /// Block-less range entries (P's and Q's, on the live parity members of `stripe`) for
    /// every run of its heads that no range holds, each running on as `range_span` allows
    /// (a stream's range ahead) and at least to the stripe's end or the next range; and the
    /// heads whose entry covers them alone.
    fn batch_range_entries(&mut self, index: usize, stripe: StripeNumber) -> (Entries, Vec<u64>) {
        let unit = self.unit_sectors;
        let keys: Vec<u64> = self.stripe_keys(stripe).collect();
        let end = keys.last().expect("a stripe has heads") + unit;
        let map = self.geometry.stripe_map(stripe);
        let parities: Vec<(DiskIndex, LogParity)> =
            [(map.p_disk, LogParity::P), (map.q_disk, LogParity::Q)]
                .into_iter()
                .filter_map(|(d, p)| d.filter(|d| !self.failed[d.get()]).map(|d| (d, p)))
                .collect();
        let modified = self.whole_stripe_modified(stripe);
        let covered = |l: &super::PartialParityLog, k: u64| {
            (l.ranges_usable() && l.durable_range(k)) || l.pending_range(k)
        };
        let (mut entries, mut own) = (Vec::new(), Vec::new());
        let mut at = 0;
        while at < keys.len() {
            let key = keys[at];
            if covered(self.ppl.as_ref().expect("a log"), key) {
                at += 1;
                continue;
            }
            let span = u64::from(self.range_span(key));
            let l = self.ppl.as_ref().expect("a log");
            let next_covered =
                keys[at + 1..].iter().copied().find(|k| covered(l, *k)).unwrap_or(end);
            let stop = (key + span * unit).max(next_covered);
            let span = u32::try_from((stop - key) / unit).expect("a range's heads fit");
            for (member, parity) in &parities {
                let entry = LogEntry {
                    member_sector: key,
                    parity: *parity,
                    modified: modified.clone(),
                    block_crc: None,
                    span,
                };
                entries.push((*member, entry, None));
            }
            if span == 1 {
                own.push(key);
            } else if !parities.is_empty() {
                let l = self.ppl.as_mut().expect("a log");
                l.pending_ranges.insert(key, (stop, Owner::Batch(index)));
            }
            at = keys.partition_point(|k| *k < stop);
        }
        (entries, own)
    }

    /// The generation holding batch `index`'s entries (or the range it waited for) is
    /// durable: its heads count as written under the log, and it writes.
    pub(super) fn log_batch_released(&mut self, index: usize) {
        let heads = self.stripe_keys(self.batch_stripe(index)).count();
        self.ppl.as_mut().expect("a log").writing += heads;
        self.stats.writes_under_log_range += heads as u64;
        self.release_batch(index);
    }

    /// A batch admitted by `log_admit_batch` has written.
    pub(in crate::array) fn log_batch_done(&mut self, stripe: StripeNumber) {
        let heads = self.stripe_keys(stripe).count();
        let Some(l) = self.ppl.as_mut() else { return };
        l.writing -= heads;
        let record = l.stripes.get_mut(&stripe.0).expect("a batch's stripe is live");
        record.writing -= 1;
        for key in std::mem::take(&mut record.own) {
            l.live.get_mut(&key).expect("a batch's own head is live").writing -= 1;
        }
    }

    /// Batch of `stripe` (heads `keys`) counts as writing its stripe since everything was
    /// last durable (`LiveStripe`). Ranged records its heads have in `live` from earlier
    /// full-stripe writes (written, none in flight) fold into the stripe's.
    fn mark_stripe_written(&mut self, stripe: StripeNumber, keys: &[u64]) {
        let l = self.ppl.as_mut().expect("a log");
        let mut born = l.advances;
        if !l.live.is_empty() {
            for key in keys {
                if l.live.get(key).is_some_and(|v| v.ranged && v.writing == 0) {
                    let v = l.live.remove(key).expect("checked");
                    born = born.min(v.born);
                }
            }
        }
        let record = l
            .stripes
            .entry(stripe.0)
            .or_insert_with(|| LiveStripe { born, ..LiveStripe::default() });
        record.born = record.born.min(born);
        debug_assert_eq!(record.writing, 0, "one batch of a stripe at a time");
        record.writing += 1;
    }

    /// The first member sectors of `stripe`'s heads.
    fn stripe_keys(&self, stripe: StripeNumber) -> impl Iterator<Item = u64> + Clone + use<> {
        let chunk = self.geometry.chunk_sectors();
        let unit = usize::try_from(self.unit_sectors).expect("fits");
        (stripe.0 * chunk..(stripe.0 + 1) * chunk).step_by(unit)
    }

    pub(super) fn batch_keys(&self, index: usize) -> impl Iterator<Item = u64> + use<> {
        self.stripe_keys(self.batch_stripe(index))
    }
}
