//! A simulated member: what reads see now, what would survive a power cut, latent bad
//! sectors, and a pulled state. The data area, the bitmap area and the partial parity log's
//! ring are one byte space (in that order), since all are just sectors to a disk.
//!
//! Durability follows a disk with a volatile write cache: a completed write is visible at once
//! but durable only after a FLUSH issued after it completed, or at once with FUA. A power cut
//! keeps or loses each sector of every non-durable write independently (torn writes included).

use rand::Rng;
use rand::rngs::StdRng;
use std::collections::BTreeSet;
use uraid_core::SECTOR_BYTES;
use uraid_core::array::IoArea;

const SECTOR: usize = SECTOR_BYTES as usize;

struct Volatile {
    seq: u64,
    offset: usize,
    data: Vec<u8>,
}

pub struct SimMember {
    current: Vec<u8>,
    durable: Vec<u8>,
    volatile: Vec<Volatile>,
    next_seq: u64,
    data_bytes: usize,
    bitmap_bytes: usize,
    /// Data-area sectors that fail to read until rewritten.
    pub bad_sectors: BTreeSet<u64>,
    /// Bad sectors rewritten by writes still in the volatile cache: they read fine (from the
    /// cache), but a power cut that loses the write leaves them bad (a disk remaps a
    /// pending sector when the write reaches the medium).
    remaps_pending: BTreeSet<u64>,
    /// Every I/O fails (the disk was pulled).
    pub pulled: bool,
    /// The next write fails (and md then fails the member, or lists the range).
    pub fail_next_write: bool,
    /// md's bad block log: a data write that fails is listed (durably at once) and counts as
    /// done; reads of listed sectors fail as known bad (`uraid_io::KnownBad`).
    pub bad_block_log: bool,
    /// Listed data sectors reads go around; a write that lands makes them good again.
    pub listed: BTreeSet<u64>,
    /// What the log on the disk holds: it only grows while the array runs.
    listed_durable: BTreeSet<u64>,
    /// Relative chance of being the next to complete (a slow member is rarely picked).
    pub speed: u32,
}

impl SimMember {
    /// A member whose data area reads `fill` (zeros for a new array, garbage for a spare that
    /// must be rebuilt), whose bitmap area is `bitmap`, and with a log ring of `log_bytes`
    /// (reading `fill` too).
    pub fn new(
        data_bytes: usize,
        fill: impl Fn(usize) -> u8,
        bitmap: &[u8],
        log_bytes: usize,
    ) -> SimMember {
        let mut current: Vec<u8> = (0..data_bytes).map(&fill).collect();
        current.extend_from_slice(bitmap);
        current.extend((0..log_bytes).map(fill));
        SimMember {
            bitmap_bytes: bitmap.len(),
            durable: current.clone(),
            current,
            volatile: Vec::new(),
            next_seq: 0,
            data_bytes,
            bad_sectors: BTreeSet::new(),
            remaps_pending: BTreeSet::new(),
            pulled: false,
            fail_next_write: false,
            bad_block_log: false,
            listed: BTreeSet::new(),
            listed_durable: BTreeSet::new(),
            speed: 8,
        }
    }

    /// Where an area's sector is in the byte space.
    pub fn offset(&self, area: IoArea, sector: u64) -> usize {
        let at = usize::try_from(sector).expect("small members") * SECTOR;
        match area {
            IoArea::Data => at,
            IoArea::Bitmap => self.data_bytes + at,
            IoArea::Log => self.data_bytes + self.bitmap_bytes + at,
        }
    }

    pub fn read(&self, offset: usize, buf: &mut [u8]) -> bool {
        let bad = offset < self.data_bytes
            && self.bad_sectors.range(sectors(offset, buf.len())).next().is_some();
        if self.pulled || bad {
            return false;
        }
        buf.copy_from_slice(&self.current[offset..offset + buf.len()]);
        true
    }

    pub fn write(&mut self, offset: usize, data: &[u8], fua: bool) -> bool {
        if self.pulled {
            return false;
        }
        let written = sectors(offset, data.len());
        if std::mem::take(&mut self.fail_next_write) {
            if self.bad_block_log && offset < self.data_bytes {
                self.listed.extend(written.clone());
                self.listed_durable.extend(written);
                return true;
            }
            return false;
        }
        self.current[offset..offset + data.len()].copy_from_slice(data);
        if offset < self.data_bytes {
            self.listed.retain(|s| !written.contains(s));
            // Written sectors are remapped by the disk: they read fine again (for good once
            // the write is durable).
            let remapped: Vec<u64> = self.bad_sectors.range(written.clone()).copied().collect();
            self.bad_sectors.retain(|s| !written.contains(s));
            if !fua {
                self.remaps_pending.extend(remapped);
            }
        }
        if fua {
            self.durable[offset..offset + data.len()].copy_from_slice(data);
            self.remaps_pending.retain(|s| !written.contains(s));
            // Older cached writes to these sectors are superseded: a later flush or power cut
            // must not bring them back over the FUA data.
            self.drop_volatile(offset, offset + data.len());
        } else {
            self.volatile.push(Volatile { seq: self.next_seq, offset, data: data.to_vec() });
            self.next_seq += 1;
        }
        true
    }

    /// Removes bytes `[start, end)` from the cached writes (splitting those it cuts).
    fn drop_volatile(&mut self, start: usize, end: usize) {
        let mut kept = Vec::with_capacity(self.volatile.len());
        for v in std::mem::take(&mut self.volatile) {
            let v_end = v.offset + v.data.len();
            if v_end <= start || v.offset >= end {
                kept.push(v);
                continue;
            }
            if v.offset < start {
                let data = v.data[..start - v.offset].to_vec();
                kept.push(Volatile { seq: v.seq, offset: v.offset, data });
            }
            if v_end > end {
                let data = v.data[end - v.offset..].to_vec();
                kept.push(Volatile { seq: v.seq, offset: end, data });
            }
        }
        self.volatile = kept;
    }

    /// What a FLUSH issued now covers: every write completed so far.
    pub fn flush_mark(&self) -> u64 {
        self.next_seq
    }

    pub fn flush(&mut self, mark: u64) -> bool {
        if self.pulled {
            return false;
        }
        let (done, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.volatile).into_iter().partition(|v| v.seq < mark);
        for v in done {
            self.durable[v.offset..v.offset + v.data.len()].copy_from_slice(&v.data);
            let written = sectors(v.offset, v.data.len());
            self.remaps_pending.retain(|s| !written.contains(s));
        }
        self.volatile = later;
        true
    }

    /// A write that was in flight when the power went: any subset of its sectors lands.
    pub fn torn_write(&mut self, offset: usize, data: &[u8], rng: &mut StdRng) {
        if self.pulled {
            return;
        }
        for (i, sector) in data.chunks(SECTOR).enumerate() {
            if rng.random_bool(0.5) {
                let at = offset + i * SECTOR;
                self.durable[at..at + SECTOR].copy_from_slice(sector);
            }
        }
    }

    /// The power goes: each sector of each non-durable write survives or not; what is left is
    /// what reads see at the restart.
    pub fn power_cut(&mut self, rng: &mut StdRng) {
        for v in std::mem::take(&mut self.volatile) {
            for (i, sector) in v.data.chunks(SECTOR).enumerate() {
                if rng.random_bool(0.5) {
                    let at = v.offset + i * SECTOR;
                    self.durable[at..at + SECTOR].copy_from_slice(sector);
                    self.remaps_pending.remove(&((at / SECTOR) as u64));
                }
            }
        }
        // A rewrite that did not reach the medium left its sector pending: bad again.
        self.bad_sectors.append(&mut self.remaps_pending);
        self.listed.clone_from(&self.listed_durable);
        self.current.clone_from(&self.durable);
    }

    /// The bitmap area as it would be read at a restart.
    pub fn bitmap_image(&self) -> Vec<u8> {
        self.current[self.data_bytes..self.data_bytes + self.bitmap_bytes].to_vec()
    }

    /// Writes `data` durably at `offset` whatever the member's fault flags (a restart's
    /// replay of the log, before the engine runs).
    pub fn restore(&mut self, offset: usize, data: &[u8]) {
        self.current[offset..offset + data.len()].copy_from_slice(data);
        self.durable[offset..offset + data.len()].copy_from_slice(data);
        let written = sectors(offset, data.len());
        self.bad_sectors.retain(|s| !written.contains(s));
    }

    /// A recovery lists a data-area range it could not rebuild (`MemberOp::ListBad`): durably
    /// at once, as `write` lists a failed one. False without a log, or on a pulled disk.
    pub fn list(&mut self, offset: usize, len: usize) -> bool {
        if self.pulled || !self.bad_block_log || offset >= self.data_bytes {
            return false;
        }
        self.listed.extend(sectors(offset, len));
        self.listed_durable.extend(sectors(offset, len));
        true
    }

    /// Whether some sector is bad, or will be again if the power goes now.
    pub fn has_latent_bad_sectors(&self) -> bool {
        !self.bad_sectors.is_empty() || !self.remaps_pending.is_empty()
    }

    /// Whether some sector is listed in the bad block log.
    pub fn has_listed_sectors(&self) -> bool {
        !self.listed_durable.is_empty()
    }

    /// Whether some sector is bad or listed, or will be again if the power goes now.
    pub fn has_bad_sectors(&self) -> bool {
        // `listed` only ever holds sectors of `listed_durable`.
        !self.bad_sectors.is_empty()
            || !self.remaps_pending.is_empty()
            || !self.listed_durable.is_empty()
    }

    /// Whether a latent bad sector lies in a data-area range that the bad block log does not
    /// list: a read fails there, and a replay writes the block back (`uraid_core::ppl::
    /// rebuilt_data`).
    pub fn unreadable_unlisted(&self, offset: usize, len: usize) -> bool {
        !self.pulled
            && self.bad_sectors.range(sectors(offset, len)).next().is_some()
            && !self.is_listed(offset, len)
    }

    /// Whether a data-area range reads without errors (known bad ones included).
    pub fn readable(&self, offset: usize, len: usize) -> bool {
        !self.pulled
            && self.bad_sectors.range(sectors(offset, len)).next().is_none()
            && !self.is_listed(offset, len)
    }

    /// Whether the bad block log lists a sector of a data-area range: a read fails as known
    /// bad without reaching the disk.
    pub fn is_listed(&self, offset: usize, len: usize) -> bool {
        offset < self.data_bytes && self.listed.range(sectors(offset, len)).next().is_some()
    }

    /// The log ring as it would be read at a restart.
    pub fn log_ring(&self) -> &[u8] {
        &self.current[self.data_bytes + self.bitmap_bytes..]
    }

    /// The data area's bytes now (for the log's replay at a restart).
    pub fn data(&self, offset: usize, len: usize) -> &[u8] {
        &self.current[offset..offset + len]
    }
}

/// The sectors bytes `[offset, offset + len)` cover.
fn sectors(offset: usize, len: usize) -> std::ops::Range<u64> {
    (offset / SECTOR) as u64..((offset + len) / SECTOR) as u64
}
