//! The arithmetic of a stripe head batch: bring new data into the head and the parity up to date
//! (by the planned method), rebuild blocks of failed members, copy read data out.

use super::handle::Piece;
use super::{Array, Kind, PerMember};
use crate::geometry::DiskRole;
use crate::layout::Level;
use crate::reconstruct::reconstruct;
use crate::stripe::{HeadId, WriteMethod};

impl Array {
    pub(super) fn compute_and_write(&mut self, id: HeadId) {
        let method = self.method(id).expect("a planned write");
        match method {
            WriteMethod::FullStripe => self.stats.stripe_writes_full += 1,
            WriteMethod::ReadModifyWrite => self.stats.stripe_writes_rmw += 1,
            WriteMethod::ReconstructWrite => self.stats.stripe_writes_rcw += 1,
            WriteMethod::DegradedReconstructWrite | WriteMethod::DataOnly => {
                self.stats.stripe_writes_degraded += 1;
            }
        }
        if method == WriteMethod::DegradedReconstructWrite {
            self.rebuild_lost_blocks(id);
        }
        let pieces: Vec<Piece> =
            self.batch(id).iter().filter(|p| p.kind == Kind::Write).cloned().collect();
        if matches!(method, WriteMethod::FullStripe | WriteMethod::DataOnly) {
            self.plan_skip_copy(id, &pieces);
        }
        // The new parity is read again at once when the log computes a partial parity from
        // it (every logged write but a full stripe's, `ppl::partial_parity`): ordinary stores
        // then. Else the kernels may write it past the caches when its sources were not
        // cached (`uraid_parity::ORDINARY_STORES_BELOW`), and the partial parity read it back
        // from memory: in `uraid bench io --only cpu`'s log_cpu rows, whose request buffers
        // were made before the timed passes and cold, 94-99% of RAID5's calls did so.
        let read_again = self.ppl.is_some() && method != WriteMethod::FullStripe;
        if method == WriteMethod::ReadModifyWrite {
            self.update_parity_rmw(id, &pieces, read_again);
        } else {
            self.overlay(id, &pieces);
            if method != WriteMethod::DataOnly {
                self.compute_parity(id, read_again);
            }
        }
        self.start_writing(id);
    }

    /// md's skip_copy: a data block that the batch's last write to it covers whole goes to the
    /// member straight from that request's buffer, and parity is computed from there: no copy
    /// into the head. Not for batches that also read (they are served from the head) nor for
    /// zero writes (no buffer). Only for full-stripe writes and writes with no parity (RAID0,
    /// or the parity member lost): after a partial-stripe write the head keeps the new data, so
    /// that the next write to the stripe (a sequential writer's next request, at iodepth 1)
    /// finds it up to date instead of reading it back; with no parity to compute, a later
    /// write never needs the other blocks, and a whole block is never read back.
    fn plan_skip_copy(&mut self, id: HeadId, pieces: &[Piece]) {
        if self.batch(id).iter().any(|p| p.kind == Kind::Read) {
            return;
        }
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let mut last = vec![None; self.failed.len()];
        for p in pieces {
            for b in &p.blocks {
                last[map.data_disk[usize::from(b.data_slot)].get()] = Some((p.slot, *b));
            }
        }
        let lost = self.lost(id);
        let mut skip = Vec::new();
        for (d, last) in last.into_iter().enumerate() {
            let Some((slot, b)) = last else { continue };
            let req = self.requests[slot].as_ref().expect("a live request");
            if b.sectors == self.unit_sectors && !req.zeroes && !lost[d] {
                skip.push((crate::DiskIndex(d as u16), slot, Self::range_bytes(&b).1));
            }
        }
        self.heads.get_mut(&id).expect("an engine-held head").skip_copy = skip;
    }

    /// Where data block `d`'s new contents are: the request buffer (skip_copy) or the head.
    pub(super) fn skip_copy_source(&self, id: HeadId, d: usize) -> Option<&[u8]> {
        let &(_, slot, at) = self.heads[&id].skip_copy.iter().find(|s| s.0.get() == d)?;
        let req = self.requests[slot].as_ref().expect("a live request");
        let unit = usize::try_from(self.unit_sectors * crate::SECTOR_BYTES).expect("fits");
        Some(&req.buf[at..at + unit])
    }

    /// Copies the new data into the head's blocks (marking them up to date and dirty).
    fn overlay(&mut self, id: HeadId, pieces: &[Piece]) {
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let skipped: Vec<usize> = self.heads[&id].skip_copy.iter().map(|s| s.0.get()).collect();
        let lost = self.lost(id);
        let head = self.cache.head_mut(id);
        for p in pieces {
            let req = self.requests[p.slot].as_ref().expect("a live request");
            for b in &p.blocks {
                let (range, at) = Self::range_bytes(b);
                let d = map.data_disk[usize::from(b.data_slot)].get();
                if skipped.contains(&d) {
                    head.devs[d].dirty = true;
                    continue;
                }
                let new = if req.zeroes { &self.zeros[..range.len()] } else { &req.buf[at..] };
                head.buffers[d][range.clone()].copy_from_slice(&new[..range.len()]);
                head.devs[d].dirty = !lost[d];
                self.stats.bytes_copied += range.len() as u64;
            }
        }
        for p in pieces {
            for b in &p.blocks {
                let d = map.data_disk[usize::from(b.data_slot)].get();
                // Wholly written, or partly written over contents the plan read: current now
                // (a skip_copy block's current contents are in the request buffer instead).
                head.devs[d].uptodate = !skipped.contains(&d);
            }
        }
    }

    /// P (and Q) from all the data blocks of the head; with ordinary stores if `read_again`.
    fn compute_parity(&mut self, id: HeadId, read_again: bool) {
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let p_idx = map.p_disk.expect("RAID4/5/6 have P").get();
        let q_idx = map.q_disk.map(crate::DiskIndex::get);
        let head = self.cache.head_mut(id);
        let mut p = std::mem::take(&mut head.buffers[p_idx]);
        let mut q = q_idx.map(|q| std::mem::take(&mut head.buffers[q]));
        let head = self.cache.head(id);
        let source = |d: crate::DiskIndex| {
            self.skip_copy_source(id, d.get()).unwrap_or(&head.buffers[d.get()])
        };
        if let Some(q) = q.as_mut() {
            let data: PerMember<Option<&[u8]>> =
                map.syndrome.iter().map(|d| d.map(source)).collect();
            let gen_syndrome = if read_again {
                uraid_parity::gen_syndrome_cached
            } else {
                uraid_parity::gen_syndrome
            };
            gen_syndrome(&mut p, q, &data);
        } else {
            let data: PerMember<&[u8]> = map.data_disk.iter().map(|&d| source(d)).collect();
            let xor_gen =
                if read_again { uraid_parity::xor_gen_cached } else { uraid_parity::xor_gen };
            xor_gen(&mut p, &data);
        }
        let lost = self.lost(id);
        let head = self.cache.head_mut(id);
        if let (Some(q_idx), Some(q)) = (q_idx, q) {
            head.buffers[q_idx] = q;
            head.devs[q_idx].uptodate = true;
            head.devs[q_idx].dirty = !lost[q_idx];
        }
        head.buffers[p_idx] = p;
        head.devs[p_idx].uptodate = true;
        head.devs[p_idx].dirty = !lost[p_idx];
    }

    /// Read-modify-write: fold each written range's old ^ new into the surviving parity, then
    /// take the new data into the block. Only the written ranges change. With ordinary stores
    /// if `read_again` (RAID6's pq_update always stores ordinarily).
    fn update_parity_rmw(&mut self, id: HeadId, pieces: &[Piece], read_again: bool) {
        let xor_acc = if read_again { uraid_parity::xor_acc_cached } else { uraid_parity::xor_acc };
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let level = self.geometry.level();
        let lost = self.lost(id);
        let skipped: Vec<usize> = self.heads[&id].skip_copy.iter().map(|s| s.0.get()).collect();
        let head = self.cache.head_mut(id);
        let p_idx = map.p_disk.expect("RAID4/5/6 have P").get();
        let q_idx = map.q_disk.map(crate::DiskIndex::get);
        let (p_live, q_live) = (!lost[p_idx], q_idx.is_some_and(|q| !lost[q]));
        let mut p = std::mem::take(&mut head.buffers[p_idx]);
        let mut q = q_idx.map(|q| std::mem::take(&mut head.buffers[q]));
        for piece in pieces {
            let req = self.requests[piece.slot].as_ref().expect("a live request");
            for b in &piece.blocks {
                let (r, at) = Self::range_bytes(b);
                let new =
                    if req.zeroes { &self.zeros[..r.len()] } else { &req.buf[at..at + r.len()] };
                let d = map.data_disk[usize::from(b.data_slot)];
                let DiskRole::Data { syndrome_slot, .. } = map.roles[d.get()] else {
                    unreachable!("data_disk holds data")
                };
                let old = &mut head.buffers[d.get()][r.clone()];
                match (level, q.as_mut()) {
                    (Level::Raid6, Some(q)) if p_live && q_live => {
                        uraid_parity::pq_update(
                            &mut p[r.clone()],
                            &mut q[r.clone()],
                            usize::from(syndrome_slot),
                            old,
                            new,
                        );
                    }
                    (Level::Raid6, Some(q)) => {
                        if p_live {
                            xor_acc(&mut p[r.clone()], &[old, new]);
                        } else {
                            let c = uraid_parity::gf::exp2(usize::from(syndrome_slot));
                            uraid_parity::mul_const_acc(&mut q[r.clone()], old, c);
                            uraid_parity::mul_const_acc(&mut q[r.clone()], new, c);
                        }
                    }
                    _ => xor_acc(&mut p[r.clone()], &[old, new]),
                }
                head.devs[d.get()].dirty = true;
                if skipped.contains(&d.get()) {
                    // Written from the request buffer; the head's copy goes stale.
                    head.devs[d.get()].uptodate = false;
                } else {
                    old.copy_from_slice(new);
                    self.stats.bytes_copied += r.len() as u64;
                }
            }
        }
        head.buffers[p_idx] = p;
        head.devs[p_idx].dirty = p_live;
        if let (Some(qi), Some(qb)) = (q_idx, q) {
            head.buffers[qi] = qb;
            head.devs[qi].dirty = q_live;
        }
    }

    /// Rebuilds the blocks of failed members from the rest of the head.
    pub(super) fn rebuild_lost_blocks(&mut self, id: HeadId) {
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let level = self.geometry.level();
        let lost = self.lost(id);
        let head = self.cache.head_mut(id);
        let mut blocks: Vec<&mut [u8]> = head.buffers.iter_mut().map(|b| &mut **b).collect();
        if reconstruct(level, map, &mut blocks, &lost).is_ok() {
            for (m, lost) in lost.iter().enumerate() {
                if *lost {
                    head.devs[m].uptodate = true;
                }
            }
        }
    }

    /// After the reads a degraded read planned: rebuild wanted blocks of failed members.
    pub(super) fn rebuild_failed(&mut self, id: HeadId) {
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let head = self.cache.head(id);
        let lost = self.lost(id);
        let needed =
            self.batch(id).iter().filter(|p| p.kind == Kind::Read).flat_map(|p| &p.blocks).any(
                |b| {
                    let d = map.data_disk[usize::from(b.data_slot)].get();
                    lost[d] && !head.devs[d].uptodate
                },
            );
        if needed {
            self.rebuild_lost_blocks(id);
        }
    }

    /// Copies the batch's read ranges from the head into the requests' buffers.
    pub(super) fn copy_out_reads(&mut self, id: HeadId) {
        let map = self.geometry.stripe_map(self.cache.head(id).key.stripe);
        let head = self.cache.head(id);
        let pieces = &self.heads[&id].batch;
        for p in pieces.iter().filter(|p| p.kind == Kind::Read) {
            let req = self.requests[p.slot].as_mut().expect("a live request");
            for b in &p.blocks {
                let (r, at) = Self::range_bytes(b);
                let d = map.data_disk[usize::from(b.data_slot)].get();
                req.buf[at..at + r.len()].copy_from_slice(&head.buffers[d][r.clone()]);
                self.stats.bytes_copied += r.len() as u64;
            }
        }
    }
}
