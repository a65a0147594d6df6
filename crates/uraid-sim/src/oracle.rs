//! What every read may return: a model of the array's contents as the history of the writes
//! to each sector, with when each was submitted and acknowledged, and what a power cut may
//! keep. Data is self-describing (`pattern`): a sector read back names the write that put it
//! there, so a read is checked without keeping a copy of the array.
//!
//! The workload never has two overlapping writes in flight (as a file system would not), so
//! the order of acknowledged writes to a sector is well defined.

use std::collections::HashMap;
use uraid_core::SECTOR_BYTES;

const SECTOR: usize = SECTOR_BYTES as usize;

/// The contents write `id` puts in array sector `sector` (id 0: zeros, never written or
/// discarded).
pub fn pattern(id: u64, sector: u64, out: &mut [u8]) {
    if id == 0 {
        out.fill(0);
        return;
    }
    let mut x = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ sector.rotate_left(29);
    for (i, word) in out.chunks_mut(8).enumerate() {
        let v = match i {
            0 => id,
            1 => sector,
            _ => {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            }
        };
        word.copy_from_slice(&v.to_le_bytes());
    }
}

/// The write whose contents `data` (one sector, read from array sector `sector`) holds, or
/// None when it is no write's (corrupt, misplaced or torn).
pub fn decode(sector: u64, data: &[u8]) -> Option<u64> {
    if data.iter().all(|&b| b == 0) {
        return Some(0);
    }
    let id = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
    let mut want = [0u8; SECTOR];
    pattern(id, sector, &mut want);
    (data == want).then_some(id)
}

/// A sector's contents after a restart when they are no write's (a block that was being
/// written, on a member lost across a power cut): any read of it is accepted until a write.
pub const UNKNOWN: u64 = u64::MAX;

#[derive(Clone, Copy, Debug)]
struct Entry {
    id: u64,
    submitted: u64,
    completed: Option<u64>,
    fua: bool,
}

#[derive(Default)]
pub struct Oracle {
    /// Per sector: the write it held when its history began (0 = zeros).
    base: Vec<u64>,
    /// Per sector, after a restart that read nothing back: the writes it may hold (the base
    /// is not known until a read pins it); empty once known.
    base_choices: Vec<Vec<u64>>,
    /// Per sector: later writes in submission order.
    history: Vec<Vec<Entry>>,
    /// Sectors whose base is `UNKNOWN`, as first read since the restart with no write
    /// between: they may hold anything, but the same thing at every read until written (a
    /// disk whose sector changes under the reader is wrong, whatever it held).
    unknown_read: HashMap<u64, Vec<u8>>,
    /// How many times such a sector was read again and compared.
    pub unknown_rereads: u64,
    now: u64,
    /// Writes completed before this time are durable (the latest completed flush was
    /// submitted then).
    durable_before: u64,
}

/// What a read saw when it was submitted.
#[derive(Clone, Copy, Debug)]
pub struct ReadWatch {
    pub sector: u64,
    pub sectors: u64,
    submitted: u64,
}

impl Oracle {
    pub fn new(sectors: u64) -> Oracle {
        let n = usize::try_from(sectors).expect("small arrays");
        Oracle {
            base: vec![0; n],
            base_choices: vec![Vec::new(); n],
            history: vec![Vec::new(); n],
            ..Oracle::default()
        }
    }

    fn tick(&mut self) -> u64 {
        self.now += 1;
        self.now
    }

    fn range(sector: u64, sectors: u64) -> std::ops::Range<usize> {
        sector as usize..(sector + sectors) as usize
    }

    /// Whether a write is in flight anywhere in the range.
    pub fn write_in_flight(&self, sector: u64, sectors: u64) -> bool {
        self.history[Self::range(sector, sectors)]
            .iter()
            .any(|h| h.last().is_some_and(|e| e.completed.is_none()))
    }

    pub fn write_submitted(&mut self, id: u64, sector: u64, sectors: u64, fua: bool) {
        let t = self.tick();
        for h in &mut self.history[Self::range(sector, sectors)] {
            h.push(Entry { id, submitted: t, completed: None, fua });
        }
    }

    pub fn write_completed(&mut self, id: u64, sector: u64, sectors: u64) {
        let t = self.tick();
        for h in &mut self.history[Self::range(sector, sectors)] {
            let e = h.iter_mut().rev().find(|e| e.id == id).expect("the write was submitted");
            e.completed = Some(t);
        }
    }

    pub fn read_submitted(&mut self, sector: u64, sectors: u64) -> ReadWatch {
        ReadWatch { sector, sectors, submitted: self.tick() }
    }

    /// Checks a completed read: each sector holds the last write acknowledged before the read
    /// was submitted, or one in flight at some time while the read was.
    pub fn read_completed(&mut self, watch: &ReadWatch, data: &[u8]) -> Result<(), String> {
        let t = self.tick();
        for (i, got) in data.chunks(SECTOR).enumerate() {
            let s = watch.sector + i as u64;
            let h = &self.history[s as usize];
            // The last write acknowledged before the read was submitted, if any since the
            // history began.
            let acked = h
                .iter()
                .filter(|e| e.completed.is_some_and(|c| c < watch.submitted))
                .max_by_key(|e| e.completed)
                .map(|e| e.id);
            let before = acked.unwrap_or(self.base[s as usize]);
            if before == UNKNOWN {
                if h.is_empty() {
                    self.unknown_read_again(s, got)?;
                }
                continue;
            }
            let Some(id) = decode(s, got) else {
                return Err(format!("array sector {s}: data no write put there"));
            };
            let overlapping = h.iter().any(|e| {
                e.id == id && e.submitted < t && e.completed.is_none_or(|c| c > watch.submitted)
            });
            // Not read since a restart that read nothing back, nor written since: any write
            // it may hold, and from now on that one.
            let choices = &mut self.base_choices[s as usize];
            if acked.is_none() && !choices.is_empty() {
                // Read from a write in flight (a discard's zeros may be a choice's too): the
                // base is still not known.
                if overlapping {
                    continue;
                }
                if choices.contains(&id) {
                    self.base[s as usize] = id;
                    choices.clear();
                    continue;
                }
                return Err(format!(
                    "array sector {s}: read write {id}, expected one of {choices:?} (not read \
                     since the restart) or one in flight"
                ));
            }
            if id != before && !overlapping {
                return Err(format!(
                    "array sector {s}: read write {id}, expected write {before} (or one in \
                     flight)"
                ));
            }
        }
        Ok(())
    }

    /// Whether every sector of the range may read as zeros now (block status said so): its
    /// last acknowledged write is zeros (a discard, or none since it held zeros), a write of
    /// zeros is in flight, or it may hold anything (a sector a power cut left unknown and not
    /// yet read otherwise). Changes nothing: a status is not a read.
    pub fn zeros_allowed(&self, sector: u64, sectors: u64) -> Result<(), String> {
        for s in sector..sector + sectors {
            let h = &self.history[s as usize];
            if h.iter().any(|e| e.id == 0 && e.completed.is_none()) {
                continue;
            }
            let acked = h.iter().filter(|e| e.completed.is_some()).max_by_key(|e| e.completed);
            let before = acked.map_or(self.base[s as usize], |e| e.id);
            let allowed = match before {
                0 => true,
                UNKNOWN => {
                    !h.is_empty()
                        || self.unknown_read.get(&s).is_none_or(|d| d.iter().all(|b| *b == 0))
                }
                _ => acked.is_none() && self.base_choices[s as usize].contains(&0),
            };
            if !allowed {
                return Err(format!("array sector {s} holds write {before}, not zeros"));
            }
        }
        Ok(())
    }

    /// A sector that may hold anything read again with no write since the restart: it must
    /// hold what it held at its first read.
    fn unknown_read_again(&mut self, s: u64, got: &[u8]) -> Result<(), String> {
        match self.unknown_read.get(&s) {
            None => {
                self.unknown_read.insert(s, got.to_vec());
                Ok(())
            }
            Some(first) if first == got => {
                self.unknown_rereads += 1;
                Ok(())
            }
            Some(first) => Err(format!(
                "array sector {s}: read {} where it read {} before, no write between (a \
                 sector the power cut left unknown)",
                describe(s, got),
                describe(s, first)
            )),
        }
    }

    pub fn flush_submitted(&mut self) -> u64 {
        self.tick()
    }

    pub fn flush_completed(&mut self, submitted: u64) {
        self.tick();
        self.durable_before = self.durable_before.max(submitted);
    }

    /// The writes each sector may hold after a power cut now: the last one that was durable
    /// (acknowledged before a completed flush was submitted, or with FUA), or any later one;
    /// with no durable one, its base (any it may be, if not yet known), or any later one.
    pub fn after_power_cut(&self) -> Vec<Vec<u64>> {
        self.history
            .iter()
            .zip(&self.base)
            .zip(&self.base_choices)
            .map(|((h, &base), choices)| {
                let durable = h
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| e.completed.is_some_and(|c| c < self.durable_before || e.fua))
                    .max_by_key(|(_, e)| e.completed);
                let (from, first) = match durable {
                    Some((i, e)) => (i + 1, vec![e.id]),
                    None if choices.is_empty() => (0, vec![base]),
                    None => (0, choices.clone()),
                };
                first.into_iter().chain(h[from..].iter().map(|e| e.id)).collect()
            })
            .collect()
    }

    /// After a restart: each sector's history begins again with what it was found to hold.
    pub fn restart(&mut self, found: &[u64]) {
        self.base.copy_from_slice(found);
        self.base_choices.iter_mut().for_each(Vec::clear);
        self.history.iter_mut().for_each(Vec::clear);
        self.unknown_read.clear();
        self.durable_before = 0;
    }

    /// After a restart that read nothing back: each sector's history begins again with any
    /// of the writes `allowed` lists for it (`UNKNOWN` among them: anything, until a write).
    pub fn restart_unread(&mut self, allowed: &[Vec<u64>]) {
        for ((base, choices), ok) in self.base.iter_mut().zip(&mut self.base_choices).zip(allowed) {
            *base = if ok.contains(&UNKNOWN) { UNKNOWN } else { ok[0] };
            choices.clear();
            if ok.len() > 1 && *base != UNKNOWN {
                choices.extend(ok);
            }
        }
        self.history.iter_mut().for_each(Vec::clear);
        self.unknown_read.clear();
        self.durable_before = 0;
    }
}

/// A sector's contents for a message: the write it holds, or garbage.
fn describe(s: u64, data: &[u8]) -> String {
    decode(s, data).map_or_else(|| "garbage".to_owned(), |id| format!("write {id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sector a cut left unknown may read as anything, then as the same until written.
    #[test]
    fn an_unknown_sector_reads_the_same_until_written() {
        let mut o = Oracle::new(2);
        o.restart_unread(&[vec![UNKNOWN], vec![0]]);
        let read = |o: &mut Oracle, data: &[u8]| {
            let w = o.read_submitted(0, 1);
            o.read_completed(&w, data)
        };
        let garbage = [7u8; SECTOR];
        assert_eq!(read(&mut o, &garbage), Ok(()));
        assert_eq!(read(&mut o, &garbage), Ok(()));
        assert_eq!(o.unknown_rereads, 1);
        let err = read(&mut o, &[0u8; SECTOR]).unwrap_err();
        assert!(err.contains("read write 0 where it read garbage before"), "{err}");
        // Once written (in flight here), no longer compared.
        o.write_submitted(9, 0, 1, false);
        assert_eq!(read(&mut o, &[0u8; SECTOR]), Ok(()));
        // A restart forgets what was read.
        o.restart_unread(&[vec![UNKNOWN], vec![0]]);
        assert_eq!(read(&mut o, &[0u8; SECTOR]), Ok(()));
    }
}
