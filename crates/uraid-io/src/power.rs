//! The volatile write cache of a `Faulty` member: what a power cut would lose.
//!
//! Model: a write is volatile from submission until it is durable: when it completes if it was
//! FUA, or when a Flush submitted after it completed has completed. For every 512-byte sector a
//! volatile write touched, `sectors` keeps the contents a power cut falls back to (the last
//! durable contents). A write still in flight at the cut is torn: a seeded random prefix of its
//! sectors lands, the rest falls back.

use std::collections::BTreeMap;

const SECTOR: usize = 512;

struct Write {
    offset_bytes: u64,
    /// A copy of the data, taken at submission (a write's buffer may be read then).
    data: Vec<u8>,
    fua: bool,
    completed: bool,
}

struct SectorState {
    durable: Vec<u8>,
    /// The last write submitted to this sector.
    last_seq: u64,
}

#[derive(Default)]
pub(crate) struct VolatileCache {
    writes: BTreeMap<u64, Write>,
    sectors: BTreeMap<u64, SectorState>,
    tag_seq: BTreeMap<u64, u64>,
    /// Flush tag -> the completed volatile writes it makes durable.
    flushes: BTreeMap<u64, Vec<u64>>,
    next_seq: u64,
}

/// What a power cut did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PowerCutReport {
    /// Completed writes that were never made durable, now undone.
    pub dropped_writes: usize,
    /// Writes in flight at the cut, each torn at a sector boundary.
    pub torn_writes: usize,
    /// Sectors whose contents were put back to their durable state.
    pub sectors_restored: usize,
}

impl VolatileCache {
    /// Records a write before it goes to the device; `current` reads what a sector holds now.
    pub(crate) fn write_submitted(
        &mut self,
        tag: u64,
        offset_bytes: u64,
        data: Vec<u8>,
        fua: bool,
        mut current: impl FnMut(u64) -> Vec<u8>,
    ) {
        assert!(offset_bytes.is_multiple_of(SECTOR as u64), "a write at a sector boundary");
        assert!(data.len().is_multiple_of(SECTOR), "a write of whole sectors");
        let seq = self.next_seq;
        self.next_seq += 1;
        let first = offset_bytes / SECTOR as u64;
        for s in first..first + (data.len() / SECTOR) as u64 {
            let state = self.sectors.entry(s).or_insert_with(|| SectorState {
                durable: current(s * SECTOR as u64),
                last_seq: seq,
            });
            state.last_seq = seq;
        }
        let write = Write { offset_bytes, data, fua, completed: false };
        self.writes.insert(seq, write);
        self.tag_seq.insert(tag, seq);
    }

    pub(crate) fn flush_submitted(&mut self, tag: u64) {
        let covered = self.writes.iter().filter(|(_, w)| w.completed).map(|(&s, _)| s).collect();
        self.flushes.insert(tag, covered);
    }

    /// Notes a completion seen by the host.
    pub(crate) fn completed(&mut self, tag: u64, ok: bool) {
        if let Some(seq) = self.tag_seq.remove(&tag) {
            let write = self.writes.get_mut(&seq).expect("a recorded write");
            write.completed = true;
            if ok && write.fua {
                self.make_durable(seq);
            }
        } else if let Some(covered) = self.flushes.remove(&tag) {
            for seq in covered.into_iter().filter(|_| ok) {
                self.make_durable(seq);
            }
        }
    }

    /// A durable write's data becomes the fallback of every sector it wrote; sectors no later
    /// write touched are no longer volatile at all.
    fn make_durable(&mut self, seq: u64) {
        let Some(write) = self.writes.remove(&seq) else { return };
        let first = write.offset_bytes / SECTOR as u64;
        for (i, data) in write.data.chunks(SECTOR).enumerate() {
            let s = first + i as u64;
            let state = self.sectors.get_mut(&s).expect("a written sector is tracked");
            if state.last_seq == seq {
                self.sectors.remove(&s);
            } else {
                state.durable.copy_from_slice(data);
            }
        }
    }

    /// The media contents after a power cut, as (offset, bytes) to write in order; clears the
    /// cache. `random` picks how many sectors of each torn write land (0..=sectors).
    pub(crate) fn power_cut(
        &mut self,
        mut random: impl FnMut(u64) -> u64,
    ) -> (Vec<(u64, Vec<u8>)>, PowerCutReport) {
        let mut report = PowerCutReport::default();
        let mut plan = Vec::new();
        for (&s, state) in &self.sectors {
            plan.push((s * SECTOR as u64, state.durable.clone()));
            report.sectors_restored += 1;
        }
        for write in std::mem::take(&mut self.writes).into_values() {
            if write.completed {
                report.dropped_writes += 1;
                continue;
            }
            report.torn_writes += 1;
            let sectors = (write.data.len() / SECTOR) as u64;
            let kept = random(sectors + 1) as usize * SECTOR;
            plan.push((write.offset_bytes, write.data[..kept].to_vec()));
        }
        *self = VolatileCache { next_seq: self.next_seq, ..VolatileCache::default() };
        (plan, report)
    }
}
