//! Writes in place of an acknowledged batch from copies, so the head can take its next batch.
//!
//! With the partial parity log a partial-stripe write is acknowledged once its entries are
//! durable, before its writes in place (`ppl::ack_logged_writes`), so a writer's next request
//! can reach the head while they are still in flight. A 4 KiB sequential writer at depth 16
//! does this on every chunk: the next data member's 16 writes land on the 16 heads the last
//! 16 are writing. Written from the head's own buffers, those writes lock the parity block,
//! and the next batch waited for them before it could read, compute and log: three member
//! steps in turn where the array with the hole left open takes two (read, write).
//!
//! So an acknowledged batch's writes go from copies of its blocks (`Behind`), the head is free
//! at once, and the next batch reads, computes and logs beside them. Its entries' union holds
//! every sector written since the last flush, the earlier batch's too (`ppl`), so whatever
//! part of the earlier writes a power cut lets land, a replay of the newer entry makes the
//! stripe consistent. What still waits: the next batch's own writes in place, until the copies'
//! writes complete (`Phase::BehindWait`: two writes of one block never overlap on a member,
//! where their order is not kept), and any batch that is not a write (a sync reads every
//! member, a discard drops what the head holds). The earlier batch's log record moves here
//! (`ppl::log_behind`), so an advance still drains its writes before it retires the entries.
//! The price is one copy of each block written, counted in `bytes_copied`, so only a batch
//! whose next one is coming pays it: a stream's (one that is not random,
//! `Array::random_writes`), or one with a batch queued behind it already. A random batch's
//! writes go from the head's buffers, and a later batch there waits for them (`log_cpu` in
//! `uraid bench io --only cpu`: the copies were about a sixth of what the log added to a
//! random write's CPU).

use super::handle::Phase;
use super::{Array, IoArea, IoBuf, MemberIo, MemberOp, Pending};
use crate::buffer::BlockBuf;
use crate::stripe::HeadId;
use crate::units::{DiskIndex, Sector};

/// An acknowledged batch's writes in place, in flight from copies of its blocks.
pub(super) struct Behind {
    bufs: Vec<(DiskIndex, BlockBuf)>,
    outstanding: usize,
}

impl Behind {
    pub(super) fn writes(&self, member: DiskIndex) -> bool {
        self.bufs.iter().any(|(m, _)| *m == member)
    }
}

impl Array {
    /// Writes `writes` of head `id`'s acknowledged batch from copies; the batch is done.
    pub(super) fn write_behind(&mut self, id: HeadId, writes: &[DiskIndex]) {
        let head = self.cache.head_mut(id);
        let mut bufs = Vec::with_capacity(writes.len());
        for &m in writes {
            let src = &head.buffers[m.get()];
            let mut copy = self.behind_pool.pop().unwrap_or_else(|| BlockBuf::zeroed(src.len()));
            copy.copy_from_slice(src);
            self.stats.bytes_copied += src.len() as u64;
            bufs.push((m, copy));
            // The copy carries what the member lacks; the head is held until it is written.
            head.devs[m.get()].dirty = false;
        }
        self.log_behind(id);
        let sector = Sector(self.head_member_range(id).0);
        for &member in writes {
            let tag = self.new_tag();
            self.queue.push_back(MemberIo {
                tag,
                member,
                op: MemberOp::Write,
                sector,
                sectors: self.unit_sectors,
                buf: IoBuf::Behind { head: id, member },
                fua: false,
                area: IoArea::Data,
                before_replacement: false,
            });
            self.inflight.insert(tag, member, Pending::Behind { head: id, member });
        }
        self.background_ios += writes.len();
        self.stats.writes_behind += 1;
        let st = self.state(id);
        st.behind = Some(Behind { bufs, outstanding: writes.len() });
        st.writes_done = true;
    }

    /// The copy a write-behind sends.
    pub(super) fn behind_buf(&self, id: HeadId, member: DiskIndex) -> &[u8] {
        let b = self.heads[&id].behind.as_ref().expect("a write-behind in flight");
        &b.bufs.iter().find(|(m, _)| *m == member).expect("a member it writes").1
    }

    /// One write-behind completed.
    pub(super) fn behind_io_done(&mut self, id: HeadId, member: DiskIndex, ok: bool) {
        self.background_ios -= 1;
        if !ok {
            self.mark_failed(member);
        }
        let b = self.state(id).behind.as_mut().expect("a write-behind in flight");
        b.outstanding -= 1;
        if b.outstanding > 0 {
            return;
        }
        let b = self.state(id).behind.take().expect("checked");
        self.behind_pool.extend(b.bufs.into_iter().map(|(_, buf)| buf));
        let (sector, sectors) = self.head_member_range(id);
        self.write_intent_done(sector, sectors);
        self.log_behind_done(id);
        if self.state(id).phase == Phase::BehindWait {
            self.state(id).phase = Phase::Idle;
            self.start_writing(id);
        }
        self.handle(id);
    }

    /// Whether head `id`'s earlier batch still writes in place from copies.
    pub(super) fn writing_behind(&self, id: HeadId) -> bool {
        self.heads[&id].behind.is_some()
    }
}
