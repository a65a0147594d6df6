//! RAID0 without stripe heads, as md's raid0 is: with no parity there is nothing a head adds
//! to a write but its cost (a head per `stripe_size` unit, a read for a partial block). Each
//! chunk piece of a write is one member write from the request's buffer; the partial stripes
//! of a discard are zeros written the same way (whole stripes are still discarded by heads,
//! which write no data). So no head ever holds data, and reads go to the members too: nothing
//! can be stale (a read racing a write or discard may see either side, as on any disk).
//!
//! Not while a write-intent bitmap or the partial parity log is on (their writes are ordered
//! by the heads), nor with a member failed (the heads report what cannot be done).

use super::{Array, IoArea, IoBuf, MemberIo, MemberOp, Pending};
use crate::layout::Level;
use crate::request::split_by_chunk;
use crate::units::{DiskIndex, Sector};

impl Array {
    /// Whether RAID0 I/O goes straight to the members (see the module docs).
    pub(super) fn raid0_direct(&self) -> bool {
        self.geometry.level() == Level::Raid0
            && self.write_intent.is_none()
            && self.ppl.is_none()
            && !self.failed.iter().any(|f| *f)
    }

    /// Queues request `slot`'s sectors `[sector, +sectors)` (at `buf_sector` in its buffer;
    /// zeros for a discard) as member writes, a chunk piece each (a unit each for zeros).
    pub(super) fn direct_write(
        &mut self,
        slot: usize,
        sector: Sector,
        sectors: u64,
        buf_sector: u64,
    ) {
        let (fua, zeroes) = (self.request(slot).fua, self.request(slot).zeroes);
        let step = if zeroes { self.unit_sectors } else { u64::MAX };
        for p in split_by_chunk(&self.geometry, sector, sectors).collect::<Vec<_>>() {
            let mut done = 0;
            while done < p.sectors {
                let n = (p.sectors - done).min(step);
                let offset =
                    usize::try_from((buf_sector + p.buf_sector + done) * crate::SECTOR_BYTES)
                        .expect("fits");
                let tag = self.new_tag();
                self.queue.push_back(MemberIo {
                    tag,
                    member: p.addr.disk,
                    op: MemberOp::Write,
                    sector: Sector(p.addr.member_sector.0 + done),
                    sectors: n,
                    buf: if zeroes { IoBuf::Zeros } else { IoBuf::Request { slot, offset } },
                    fua,
                    area: IoArea::Data,
                    before_replacement: false,
                });
                self.inflight.insert(
                    tag,
                    p.addr.disk,
                    Pending::DirectWrite { slot, member: p.addr.disk },
                );
                self.request_mut(slot).outstanding += 1;
                self.stats.writes_bypassed += 1;
                done += n;
            }
        }
    }

    /// A direct write completed; a failed one fails its member (RAID0 has no redundancy: the
    /// request fails).
    pub(super) fn direct_write_done(&mut self, slot: usize, member: DiskIndex, ok: bool) {
        if !ok {
            self.mark_failed(member);
            self.request_mut(slot).error = Some(super::ArrayError::BeyondRedundancy);
        }
        self.request_mut(slot).outstanding -= 1;
        self.finish_if_done(slot);
    }
}
