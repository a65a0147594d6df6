//! Memory members and helpers shared by the engine's integration tests.
#![allow(dead_code)]

use std::collections::HashSet;
use uraid_core::array::{
    Array, ArrayConfig, ArrayError, IoArea, MemberIo, MemberOp, PartialParityLogConfig, ReqId,
    SyncKind,
};
use uraid_core::{DiskIndex, Geometry, Level, Sector};

pub const MEMBER_SECTORS: u64 = 2048; // 1 MiB members
/// The chunk most tests use.
pub const CHUNK_64K: u64 = 64 << 10;

#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

pub struct Mem {
    pub disks: Vec<Vec<u8>>,
    /// What each member holds on stable storage (flushes and FUA writes reach it).
    pub durable: Vec<Vec<u8>>,
    pub counts: Vec<Counts>,
    /// Member reads that fail (member, sector) until the sector is written.
    pub bad_reads: HashSet<(u16, u64)>,
    /// Member writes that fail (member, sector).
    pub bad_writes: HashSet<(u16, u64)>,
    /// Sectors listed in members' bad block logs (`MemberOp::ListBad`), in order.
    pub listed: Vec<(u16, u64)>,
    /// Sectors the logs list now: reads of them fail as known bad (`uraid_io::KnownBad`)
    /// until written.
    pub known_bad: HashSet<(u16, u64)>,
    /// Members whose bad block log refuses listings (none, or full).
    pub no_bad_block_log: HashSet<u16>,
    /// Every member I/O performed, in order.
    pub log: Vec<MemberIo>,
    /// Each member's write-intent bitmap area (written durably: bitmap writes are FUA).
    pub bitmaps: Vec<Vec<u8>>,
    /// Each member's partial parity log ring (`LOG_RING_SECTORS`; log writes are FUA).
    pub rings: Vec<Vec<u8>>,
    /// A device replacing the member (md's replace), as the member layer pairs them: it gets
    /// the member's data writes and copy-writes alone.
    pub replacements: Vec<Option<Vec<u8>>>,
    /// Sectors listed in replacements' bad block logs (`MemberOp::ListBadReplacement`):
    /// (member replaced, sector), in order.
    pub replacement_listed: Vec<(u16, u64)>,
    /// Members whose replacement's bad block log refuses listings.
    pub replacement_without_log: HashSet<u16>,
}

/// Sectors of each member's log ring (`Mem::rings`).
pub const LOG_RING_SECTORS: u64 = 512;

impl Mem {
    pub fn new(members: usize) -> Mem {
        Mem {
            disks: vec![vec![0u8; (MEMBER_SECTORS * 512) as usize]; members],
            durable: vec![vec![0u8; (MEMBER_SECTORS * 512) as usize]; members],
            counts: vec![Counts::default(); members],
            bad_reads: HashSet::new(),
            bad_writes: HashSet::new(),
            listed: Vec::new(),
            known_bad: HashSet::new(),
            no_bad_block_log: HashSet::new(),
            log: Vec::new(),
            bitmaps: vec![vec![0u8; 8192]; members],
            rings: vec![vec![0u8; (LOG_RING_SECTORS * 512) as usize]; members],
            replacements: vec![None; members],
            replacement_listed: Vec::new(),
            replacement_without_log: HashSet::new(),
        }
    }

    /// Every member's log ring as a replay would scan it (`uuid`: the array's).
    pub fn scans(&self, uuid: [u8; 16]) -> Vec<uraid_core::ppl::RingScan> {
        let ring =
            |(m, r): (usize, &Vec<u8>)| uraid_core::ppl::scan_ring(r, uuid, DiskIndex(m as u16));
        self.rings.iter().enumerate().map(ring).collect()
    }

    pub fn total(&self) -> Counts {
        self.counts.iter().fold(Counts::default(), |a, c| Counts {
            reads: a.reads + c.reads,
            writes: a.writes + c.writes,
            read_bytes: a.read_bytes + c.read_bytes,
            write_bytes: a.write_bytes + c.write_bytes,
        })
    }

    /// Performs `io` and reports it to the engine: a read of a listed sector as known bad.
    pub fn complete(&mut self, array: &mut Array, io: &MemberIo) {
        let covers = |&(bm, bs): &(u16, u64)| {
            bm == io.member.0 && (io.sector.0..io.sector.0 + io.sectors).contains(&bs)
        };
        if io.op == MemberOp::Read && io.area == IoArea::Data && self.known_bad.iter().any(covers) {
            self.log.push(*io);
            array.complete_io_known_bad(io.tag);
        } else {
            let ok = self.perform(array, io);
            array.complete_io(io.tag, ok);
        }
    }

    pub fn perform(&mut self, array: &mut Array, io: &MemberIo) -> bool {
        let m = io.member.get();
        let at = (io.sector.0 * 512) as usize;
        let len = io.bytes();
        self.log.push(*io);
        if io.area == IoArea::Bitmap {
            assert_eq!(io.op, MemberOp::Write, "the engine only writes the bitmap");
            assert!(io.fua, "bitmap pages are durable before the writes they cover");
            self.bitmaps[m][at..at + len].copy_from_slice(array.io_buf(io));
            return true;
        }
        if io.area == IoArea::Log {
            assert_eq!(io.op, MemberOp::Write, "the engine only writes the log");
            assert!(io.fua, "log writes are durable before the writes they cover");
            self.rings[m][at..at + len].copy_from_slice(array.io_buf(io));
            return true;
        }
        match io.op {
            MemberOp::Read => {
                self.counts[m].reads += 1;
                self.counts[m].read_bytes += len as u64;
                let bad = |&(bm, bs): &(u16, u64)| {
                    bm == io.member.0 && (io.sector.0..io.sector.0 + io.sectors).contains(&bs)
                };
                if self.bad_reads.iter().any(bad) {
                    return false;
                }
                array.io_buf_mut(io).copy_from_slice(&self.disks[m][at..at + len]);
            }
            MemberOp::Write => {
                self.counts[m].writes += 1;
                self.counts[m].write_bytes += len as u64;
                if self.bad_writes.contains(&(io.member.0, io.sector.0)) {
                    return false;
                }
                let kept = |&(bm, bs): &(u16, u64)| {
                    bm != io.member.0 || bs < io.sector.0 || bs >= io.sector.0 + io.sectors
                };
                self.bad_reads.retain(kept);
                self.known_bad.retain(kept);
                self.disks[m][at..at + len].copy_from_slice(array.io_buf(io));
                if let Some(r) = self.replacements[m].as_mut() {
                    r[at..at + len].copy_from_slice(array.io_buf(io));
                }
                if io.fua {
                    self.durable[m][at..at + len].copy_from_slice(array.io_buf(io));
                }
            }
            MemberOp::Flush => self.durable[m].clone_from(&self.disks[m]),
            MemberOp::Discard => {
                self.disks[m][at..at + len].fill(0);
                if let Some(r) = self.replacements[m].as_mut() {
                    r[at..at + len].fill(0);
                }
            }
            MemberOp::CopyWrite => {
                let r = self.replacements[m].as_mut().expect("a copy-write goes to a replacement");
                r[at..at + len].copy_from_slice(array.io_buf(io));
            }
            MemberOp::ListBad | MemberOp::ListBadReplacement => return self.list(io),
        }
        true
    }

    /// A listing in the member's bad block log, or its replacement's.
    fn list(&mut self, io: &MemberIo) -> bool {
        let (m, sectors) = (io.member.0, io.sector.0..io.sector.0 + io.sectors);
        if io.op == MemberOp::ListBadReplacement {
            if self.replacements[usize::from(m)].is_none()
                || self.replacement_without_log.contains(&m)
            {
                return false;
            }
            self.replacement_listed.extend(sectors.map(|s| (m, s)));
            return true;
        }
        if self.no_bad_block_log.contains(&m) {
            return false;
        }
        for s in sectors {
            self.listed.push((m, s));
            self.known_bad.insert((m, s));
        }
        true
    }
}

pub fn array(level: Level, disks: usize, chunk: u64, stripe_size: u64) -> Array {
    array_with_cache(level, disks, chunk, stripe_size, 256)
}

pub fn array_with_cache(
    level: Level,
    disks: usize,
    chunk: u64,
    stripe_size: u64,
    cache: usize,
) -> Array {
    let geometry = Geometry::new(level, level.default_layout(), disks, chunk).unwrap();
    let cfg = ArrayConfig {
        geometry,
        stripe_size_bytes: stripe_size,
        stripe_cache_size: cache,
        member_sectors: MEMBER_SECTORS,
    };
    Array::new(cfg).unwrap()
}

/// `a` with a partial parity log on `LOG_RING_SECTORS` rings (epoch 1).
pub fn with_log(mut a: Array, uuid: [u8; 16], rotational: bool) -> Array {
    let ring_sectors = LOG_RING_SECTORS;
    a.enable_partial_parity_log(&PartialParityLogConfig {
        ring_sectors,
        uuid,
        epoch: 1,
        rotational,
        stride_stripes: 1,
    });
    a
}

/// Runs member I/O until the engine is idle; returns the finished requests.
pub fn run(a: &mut Array, mem: &mut Mem) -> Vec<(ReqId, Result<(), ArrayError>, Vec<u8>)> {
    while let Some(io) = a.next_io() {
        mem.complete(a, &io);
    }
    assert!(!a.busy());
    a.take_completed()
}

pub fn write(a: &mut Array, mem: &mut Mem, sector: u64, data: Vec<u8>) {
    a.submit_write(ReqId(sector), Sector(sector), data);
    for (_, r, _) in run(a, mem) {
        r.unwrap();
    }
}

pub fn read(a: &mut Array, mem: &mut Mem, sector: u64, bytes: usize) -> Vec<u8> {
    a.submit_read(ReqId(sector), Sector(sector), vec![0u8; bytes]);
    let mut done = run(a, mem);
    assert_eq!(done.len(), 1);
    let (_, r, buf) = done.pop().unwrap();
    r.unwrap();
    buf
}

pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// No parity mismatch on the first `stripes` stripes of 64 KiB chunks (md's check).
pub fn assert_consistent(a: &mut Array, mem: &mut Mem, stripes: u64) {
    let before = a.mismatches().1;
    a.submit_sync(ReqId(9_000), SyncKind::Check, Sector(0), stripes * CHUNK_64K / 512);
    for (_, r, _) in run(a, mem) {
        r.unwrap();
    }
    assert_eq!(a.mismatches().1, before, "parity matches the data");
}

/// Every data block of the first `stripes` stripes, read with each member failed in turn
/// (rebuilt from parity), is `data`.
pub fn assert_rebuilds(level: Level, members: usize, mem: &mut Mem, stripes: u64, data: &[u8]) {
    for failed in 0..members {
        let mut a = array(level, members, CHUNK_64K, 4096);
        a.fail_member(DiskIndex(failed as u16));
        let bytes = usize::try_from(stripes * CHUNK_64K).unwrap()
            * (members - usize::from(level.max_degraded()));
        assert_eq!(read(&mut a, mem, 0, bytes), data, "member {failed} failed");
    }
}

/// Every member I/O the engine hands out now.
pub fn drain(a: &mut Array) -> Vec<MemberIo> {
    std::iter::from_fn(|| a.next_io()).collect()
}

/// Performs `ios` on the members and reports each done.
pub fn complete(a: &mut Array, mem: &mut Mem, ios: Vec<MemberIo>) {
    for io in ios {
        mem.complete(a, &io);
    }
}

/// The requests finished since the last call, each of which must have succeeded.
pub fn finished(a: &mut Array) -> Vec<ReqId> {
    a.take_completed().into_iter().map(|(id, r, _)| r.map(|()| id).unwrap()).collect()
}
