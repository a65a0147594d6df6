//! The sans-I/O engine (`uraid_core::array::Array`) driven as the runtime drives it, on memory
//! members, with arbitrary geometry and an arbitrary sequence of requests and events.
//!
//! Requests: reads, writes (FUA or not), discards and flushes at any offset and length, in
//! range or not, whole sectors or not; events: member I/Os completed one at a time in any
//! order, some failing, members failed and spares put in their slots, members replaced (md's
//! replace: a new device paired with the member, copied in windows, swapped in when the copy
//! is done and flushed, or taking over when the member fails), plugging, the stripe cache
//! resized. Faults stay within the level's redundancy: at most `max_degraded` members ever
//! misbehave. Most redundant arrays run with the partial parity log (rings of 4 to 16
//! blocks, on members that seek or not), whose writes complete early and whose flushes
//! advance or reset the rings.
//! Invariants: no panic; a request that is not whole sectors, or leaves the array, fails with
//! that error and everything else succeeds; every read returns the bytes of the last write
//! completed over them (the model: the array as a flat `Vec`); member I/Os stay inside the
//! members; the engine never stalls with requests pending and nothing to do; at the end the
//! whole array reads back as the model. Overlapping requests are never in flight together (the
//! target completes what overlaps first): their order is the client's business, not the
//! engine's. At the end a replacement under way is finished and swapped in, the whole array
//! reads back as the model, and, with every member in sync, a check finds parity consistent.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use std::collections::{HashMap, HashSet};
use uraid_core::array::{
    Array, ArrayConfig, ArrayError, IoArea, IoTag, MemberIo, MemberOp, PartialParityLogConfig,
    ReqId, SyncKind,
};
use uraid_core::layout::LAYOUTS;
use uraid_core::ppl::LOG_HEADER_SECTORS;
use uraid_core::{DiskIndex, Geometry, Level, Sector};

#[path = "engine_requests/replace.rs"]
mod replace;

/// 128 KiB members: 4 to 32 stripes, small enough for a fast target, enough for the cache (at
/// most 16 heads) to fill up.
const MEMBER_SECTORS: u64 = 256;

#[derive(Arbitrary, Debug)]
struct Input {
    level: u8,
    layout: u8,
    disks: u8,
    chunk_shift: u8,
    unit_shift: u8,
    cache: u8,
    /// The partial parity log: off when `% 4 == 0`, else its ring's size; the top bit says
    /// the members seek.
    log: u8,
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug)]
enum Op {
    Read {
        at: At,
        bytes: u16,
    },
    Write {
        at: At,
        bytes: u16,
        fill: u8,
        fua: bool,
    },
    Discard {
        at: At,
        sectors: u16,
    },
    Flush,
    /// Completes the `pick`-th member I/O in flight; with `fail`, as an error if its member
    /// may misbehave.
    Complete {
        pick: u8,
        fail: bool,
    },
    /// Completes member I/O until the engine is idle.
    Drain,
    FailMember {
        member: u8,
    },
    /// A spare full of garbage takes a failed member's slot once its I/O has drained (as the
    /// runtime swaps devices) and is recovered from nothing: never read above its recovery
    /// offset (0), written as any member.
    Spare {
        member: u8,
    },
    /// md's replace of a member in sync (with every member in sync): a new device full of
    /// garbage is paired with it.
    Replace {
        member: u8,
    },
    /// The replacement's next copy window (`SyncKind::Replace`), or past the end the flush
    /// that makes the copy durable.
    CopyWindow,
    /// Ends a replacement that is over, with none of the member's I/O in flight: a done copy
    /// swaps the new device in; a member that failed hands its slot to the new device, which
    /// is recovered.
    Join,
    Plug,
    Unplug,
    CacheSize {
        heads: u8,
    },
}

/// An array sector: small, or counted back from `u64::MAX` (`far`).
#[derive(Arbitrary, Debug, Clone, Copy)]
struct At {
    sector: u16,
    far: bool,
}

impl At {
    fn sector(self) -> u64 {
        if self.far { u64::MAX - u64::from(self.sector) } else { u64::from(self.sector) }
    }
}

#[derive(Debug)]
enum Asked {
    Read {
        sector: u64,
        bytes: usize,
    },
    Write {
        sector: u64,
        data: Vec<u8>,
    },
    Discard {
        sector: u64,
        sectors: u64,
    },
    Flush,
    /// A replacement's copy window (member sectors).
    Copy {
        member_sector: u64,
        sectors: u64,
    },
    /// The flush that ends a replacement's copy.
    CopyFlush,
    /// A check of the whole array at the end.
    Check,
}

/// Which error a request must get, if any.
#[derive(Debug, PartialEq)]
enum Expect {
    Ok,
    Unaligned,
    OutOfRange,
    /// A copy window: done, or stopped because the member being replaced failed.
    Copied,
}

/// md's replace under way: the new device, as the member layer pairs it with the member.
struct Replacement {
    member: usize,
    disk: Vec<u8>,
    ring: Vec<u8>,
    /// Member sector the copy has reached, and whether a window (or the closing flush) is
    /// out.
    next: u64,
    out: bool,
    /// The closing flush completed: the copy is durable.
    copied: bool,
    /// A window stopped because the member failed.
    stopped: bool,
}

struct Harness {
    array: Array,
    members: Vec<Vec<u8>>,
    /// Each member's log ring (`IoArea::Log`), when the log is on.
    rings: Vec<Vec<u8>>,
    model: Vec<u8>,
    size_sectors: u64,
    /// Member I/Os taken from `next_io`, not yet completed.
    ios: Vec<MemberIo>,
    /// Requests submitted, not yet completed, with the result they must have.
    asked: HashMap<u64, (Asked, Expect)>,
    next_id: u64,
    /// Members that may fail I/Os (at most `max_degraded` of them).
    faulty: Vec<bool>,
    max_degraded: usize,
    level: Level,
    chunk_sectors: u64,
    replacement: Option<Replacement>,
    /// Tags of member I/Os taken while their member was being replaced: the member layer sends
    /// those to both devices (uraid-io's `Replacing`), others to the member alone.
    paired: HashSet<IoTag>,
}

fuzz_target!(|input: Input| {
    let Some(mut h) = Harness::new(&input) else { return };
    for op in &input.ops {
        h.step(op);
    }
    h.drain();
    h.finish_replacement();
    let all = h.size_sectors * 512;
    let whole = h.submit(Asked::Read { sector: 0, bytes: all as usize });
    h.drain();
    assert!(!h.asked.contains_key(&whole), "the final read completed");
    h.check_parity();
});

impl Harness {
    fn new(input: &Input) -> Option<Harness> {
        let level =
            [Level::Raid0, Level::Raid4, Level::Raid5, Level::Raid6][input.level as usize % 4];
        let layout = if input.layout < 128 {
            level.default_layout()
        } else {
            LAYOUTS[input.layout as usize % LAYOUTS.len()].0
        };
        let disks = usize::from(level.raid_disks_min()) + usize::from(input.disks % 6);
        let chunk = 4096u64 << (input.chunk_shift % 4);
        let geometry = Geometry::new(level, layout, disks, chunk).ok()?;
        let unit = (4096u64 << (input.unit_shift % 3)).min(chunk);
        let cfg = ArrayConfig {
            geometry,
            stripe_size_bytes: unit,
            stripe_cache_size: 1 + usize::from(input.cache % 16),
            member_sectors: MEMBER_SECTORS,
        };
        let mut array = Array::new(cfg).expect("a valid configuration");
        // 4, 8 or 16 blocks (the engine wants room for a few), as the simulator's rings.
        let ring_sectors = match (level, input.log % 4) {
            (Level::Raid0, _) | (_, 0) => 0,
            (_, n) => LOG_HEADER_SECTORS + (unit / 512) * (4u64 << (n - 1)),
        };
        if ring_sectors > 0 {
            let rotational = input.log & 0x80 != 0;
            let uuid = [7; 16];
            array.enable_partial_parity_log(&PartialParityLogConfig {
                ring_sectors,
                uuid,
                epoch: 1,
                rotational,
                stride_stripes: 1,
            });
        }
        let size_sectors = array.size_sectors();
        Some(Harness {
            array,
            members: vec![vec![0; MEMBER_SECTORS as usize * 512]; disks],
            rings: vec![vec![0; ring_sectors as usize * 512]; disks],
            model: vec![0; size_sectors as usize * 512],
            size_sectors,
            ios: Vec::new(),
            asked: HashMap::new(),
            next_id: 0,
            faulty: vec![false; disks],
            max_degraded: usize::from(level.max_degraded()),
            level,
            chunk_sectors: chunk / 512,
            replacement: None,
            paired: HashSet::new(),
        })
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Read { at, bytes } => {
                self.submit(Asked::Read { sector: at.sector(), bytes: bytes.into() });
            }
            Op::Write { at, bytes, fill, fua } => {
                let id = self.next_id;
                let data = (0..usize::from(bytes))
                    .map(|i| fill ^ (i >> 9) as u8 ^ (id as u8).wrapping_mul(31))
                    .collect();
                let asked = Asked::Write { sector: at.sector(), data };
                if fua {
                    self.submit_fua(asked)
                } else {
                    self.submit(asked)
                };
            }
            Op::Discard { at, sectors } => {
                self.submit(Asked::Discard { sector: at.sector(), sectors: sectors.into() });
            }
            Op::Flush => {
                self.submit(Asked::Flush);
            }
            Op::Complete { pick, fail } => {
                if !self.ios.is_empty() {
                    let io = self.ios.swap_remove(usize::from(pick) % self.ios.len());
                    let fail = fail && self.faulty[io.member.get()];
                    self.complete(io, !fail);
                }
            }
            Op::Drain => self.drain(),
            Op::FailMember { member } => {
                let m = usize::from(member) % self.members.len();
                if self.may_misbehave(m) {
                    self.array.fail_member(DiskIndex(m as u16));
                }
            }
            Op::Spare { member } => {
                let m = usize::from(member) % self.members.len();
                let failed = self.array.failed_members().contains(&DiskIndex(m as u16));
                // A member whose replacement is under way is handed to it (`Op::Join`), as
                // uraid-md does, not to a spare.
                let replaced = self.replacement.as_ref().is_some_and(|r| r.member == m);
                if failed && !replaced && self.ios.iter().all(|io| io.member.get() != m) {
                    self.members[m].fill(0xa5);
                    self.rings[m].fill(0xa5);
                    self.array.member_device_changed(DiskIndex(m as u16));
                    self.array.start_recovery(DiskIndex(m as u16), Sector(0));
                }
            }
            Op::Replace { member } => self.start_replacement(usize::from(member)),
            Op::CopyWindow => self.copy_window(),
            Op::Join => self.join(),
            Op::Plug => self.array.plug(),
            Op::Unplug => self.array.unplug(),
            Op::CacheSize { heads } => {
                self.array.set_stripe_cache_size(1 + usize::from(heads % 16)).unwrap();
            }
        }
        self.settle();
    }

    /// Whether member `m` may fail: it already misbehaves, or redundancy is left for it.
    fn may_misbehave(&mut self, m: usize) -> bool {
        let count = self.faulty.iter().filter(|f| **f).count();
        if !self.faulty[m] && count < self.max_degraded {
            self.faulty[m] = true;
        }
        self.faulty[m]
    }

    fn submit(&mut self, asked: Asked) -> u64 {
        self.submit_as(asked, false)
    }

    fn submit_fua(&mut self, asked: Asked) -> u64 {
        self.submit_as(asked, true)
    }

    fn submit_as(&mut self, asked: Asked, fua: bool) -> u64 {
        let expect = self.expect(&asked);
        if expect == Expect::Ok && self.overlaps_in_flight(&asked) {
            self.drain();
        }
        let id = self.next_id;
        self.next_id += 1;
        let check_sectors = self.size_sectors / self.data_disks();
        let a = &mut self.array;
        match &asked {
            Asked::Read { sector, bytes } => {
                a.submit_read(ReqId(id), Sector(*sector), vec![0; *bytes])
            }
            Asked::Write { sector, data } if fua => {
                a.submit_write_fua(ReqId(id), Sector(*sector), data.clone())
            }
            Asked::Write { sector, data } => {
                a.submit_write(ReqId(id), Sector(*sector), data.clone())
            }
            Asked::Discard { sector, sectors } => {
                a.submit_discard(ReqId(id), Sector(*sector), *sectors)
            }
            Asked::Flush | Asked::CopyFlush => a.submit_flush(ReqId(id)),
            Asked::Copy { member_sector, sectors } => {
                a.submit_sync(ReqId(id), SyncKind::Replace, Sector(*member_sector), *sectors);
            }
            Asked::Check => a.submit_sync(ReqId(id), SyncKind::Check, Sector(0), check_sectors),
        }
        self.asked.insert(id, (asked, expect));
        self.settle();
        id
    }

    fn expect(&self, asked: &Asked) -> Expect {
        let bytes = match asked {
            Asked::Flush | Asked::CopyFlush | Asked::Check => return Expect::Ok,
            Asked::Copy { .. } => return Expect::Copied,
            Asked::Read { bytes, .. } => *bytes,
            Asked::Write { data, .. } => data.len(),
            Asked::Discard { .. } => 0,
        };
        if bytes % 512 != 0 {
            return Expect::Unaligned;
        }
        let (sector, sectors) = range(asked);
        match sector.checked_add(sectors) {
            Some(end) if end <= self.size_sectors => Expect::Ok,
            _ => Expect::OutOfRange,
        }
    }

    fn overlaps_in_flight(&self, asked: &Asked) -> bool {
        if !matches!(asked, Asked::Read { .. } | Asked::Write { .. } | Asked::Discard { .. }) {
            return false;
        }
        let (s, n) = range(asked);
        let changes = !matches!(asked, Asked::Read { .. });
        self.asked.values().any(|(other, expect)| {
            let (os, on) = range(other);
            let other_changes = matches!(other, Asked::Write { .. } | Asked::Discard { .. });
            *expect == Expect::Ok && (changes || other_changes) && s < os + on && os < s + n
        })
    }

    /// Takes the engine's new member I/Os, and checks the requests it finished.
    fn settle(&mut self) {
        while let Some(io) = self.array.next_io() {
            assert_ne!(io.area, IoArea::Bitmap, "no bitmap configured");
            assert!(io.member.get() < self.members.len());
            let end = match io.area {
                IoArea::Log => self.rings[0].len() as u64 / 512,
                _ => MEMBER_SECTORS,
            };
            if matches!(io.op, MemberOp::Read | MemberOp::Write | MemberOp::Discard) {
                assert!(io.sectors > 0 && io.sector.0 + io.sectors <= end, "{io:?}");
            }
            if self.replacement.as_ref().is_some_and(|r| r.member == io.member.get()) {
                self.paired.insert(io.tag);
            } else {
                assert_ne!(io.op, MemberOp::CopyWrite, "a copy write with no replacement: {io:?}");
            }
            self.ios.push(io);
        }
        for (id, result, buf) in self.array.take_completed() {
            let (asked, expect) = self.asked.remove(&id.0).expect("a request submitted once");
            self.check(asked, &expect, result, &buf);
        }
    }

    fn check(&mut self, asked: Asked, expect: &Expect, result: Result<(), ArrayError>, buf: &[u8]) {
        match (expect, &result) {
            (Expect::Copied, Ok(()) | Err(ArrayError::ReplacedMemberFailed)) => {
                return self.copy_done(&asked, result.is_ok());
            }
            (Expect::Ok, Ok(())) if matches!(asked, Asked::CopyFlush) => {
                return self.copy_done(&asked, true);
            }
            (Expect::Ok, Ok(())) => {}
            (Expect::Unaligned, Err(ArrayError::Unaligned { .. }))
            | (Expect::OutOfRange, Err(ArrayError::OutOfRange { .. })) => return,
            _ => panic!("{asked:?}: expected {expect:?}, got {result:?}"),
        }
        let (sector, sectors) = range(&asked);
        let r = sector as usize * 512..(sector + sectors) as usize * 512;
        match asked {
            Asked::Read { .. } => assert!(buf == &self.model[r], "read of {sector}+{sectors}"),
            Asked::Write { data, .. } => self.model[r].copy_from_slice(&data),
            Asked::Discard { .. } => self.model[r].fill(0),
            Asked::Flush | Asked::CopyFlush | Asked::Copy { .. } | Asked::Check => {}
        }
    }

    /// Performs a member I/O on the memory members (or not, when it fails) and reports it.
    fn complete(&mut self, io: MemberIo, ok: bool) {
        // These members keep no bad block log: a recovery's listing fails.
        let ok = ok && io.op != MemberOp::ListBad;
        let m = io.member.get();
        let at = io.sector.0 as usize * 512;
        let len = io.bytes();
        if self.paired.remove(&io.tag) {
            self.mirror(&io);
            if io.op == MemberOp::CopyWrite {
                // The new device's alone: the member is not written.
                self.array.complete_io(io.tag, true);
                return self.settle();
            }
        }
        if ok {
            let disk = match io.area {
                IoArea::Log => &mut self.rings[m],
                _ => &mut self.members[m],
            };
            match io.op {
                MemberOp::Read => {
                    let data = &disk[at..at + len];
                    self.array.io_buf_mut(&io).copy_from_slice(data);
                }
                MemberOp::Write => disk[at..at + len].copy_from_slice(self.array.io_buf(&io)),
                MemberOp::Discard => disk[at..at + len].fill(0),
                MemberOp::Flush | MemberOp::ListBad | MemberOp::ListBadReplacement => {}
                MemberOp::CopyWrite => unreachable!("copy writes are the new device's"),
            }
        }
        self.array.complete_io(io.tag, ok);
        self.settle();
    }

    /// Completes member I/O, oldest first, until nothing is left; the engine must then be idle
    /// with every request answered.
    fn drain(&mut self) {
        self.array.unplug();
        self.settle();
        while !self.ios.is_empty() {
            let io = self.ios.remove(0);
            self.complete(io, true);
        }
        assert!(self.asked.is_empty(), "stalled with requests pending: {:?}", self.asked);
        assert!(!self.array.busy(), "busy with nothing in flight");
    }
}

/// A request's array sectors (a partial sector counts whole; flushes, copies and checks have
/// none).
fn range(asked: &Asked) -> (u64, u64) {
    match asked {
        Asked::Read { sector, bytes } => (*sector, (*bytes as u64).div_ceil(512)),
        Asked::Write { sector, data } => (*sector, (data.len() as u64).div_ceil(512)),
        Asked::Discard { sector, sectors } => (*sector, *sectors),
        Asked::Flush | Asked::CopyFlush | Asked::Copy { .. } | Asked::Check => (0, 0),
    }
}
