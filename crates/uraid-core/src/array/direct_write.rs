//! RAID0 writes straight to the members, as md's raid0 does: with no parity there is nothing a
//! stripe head adds to a write but its cost (a head per `stripe_size` unit, a read for a
//! partial block). Each chunk piece of the request is one member write from the request's
//! buffer. Not while a write-intent bitmap or the partial parity log is on (their writes are
//! ordered by the heads), nor with a member failed (the heads report what cannot be
//! written), nor over a stripe head still holding the range (a discard in flight).

use super::{Array, IoArea, IoBuf, MemberIo, MemberOp, Pending};
use crate::layout::Level;
use crate::request::split_by_chunk;
use crate::units::{DiskIndex, Sector};

impl Array {
    /// Sends request `slot`'s write (`[sector, +sectors)`) straight to the members, if it may
    /// go that way (see the module docs); false: it goes through the stripe heads.
    pub(super) fn direct_write(&mut self, slot: usize, sector: Sector, sectors: u64) -> bool {
        if self.geometry.level() != Level::Raid0
            || self.write_intent.is_some()
            || self.ppl.is_some()
            || self.failed.iter().any(|f| *f)
        {
            return false;
        }
        let pieces: Vec<_> = split_by_chunk(&self.geometry, sector, sectors).collect();
        if pieces
            .iter()
            .any(|p| self.head_for_newer_data(p.addr.stripe, p.addr.member_sector.0, p.sectors))
        {
            return false;
        }
        let fua = self.request(slot).fua;
        for p in pieces {
            let tag = self.new_tag();
            let offset = usize::try_from(p.buf_sector * crate::SECTOR_BYTES).expect("fits");
            self.queue.push_back(MemberIo {
                tag,
                member: p.addr.disk,
                op: MemberOp::Write,
                sector: p.addr.member_sector,
                sectors: p.sectors,
                buf: IoBuf::Request { slot, offset },
                fua,
                area: IoArea::Data,
            });
            self.inflight.insert(tag, Pending::DirectWrite { slot, member: p.addr.disk });
            self.request_mut(slot).outstanding += 1;
            self.stats.writes_bypassed += 1;
        }
        true
    }

    /// A direct write completed; a failed one fails its member (RAID0 has no redundancy: the
    /// request fails).
    pub(super) fn direct_write_done(&mut self, slot: usize, member: DiskIndex, ok: bool) {
        if !ok {
            self.failed[member.get()] = true;
            self.request_mut(slot).error = Some(super::ArrayError::BeyondRedundancy);
        }
        self.request_mut(slot).outstanding -= 1;
        self.finish_if_done(slot);
    }
}
