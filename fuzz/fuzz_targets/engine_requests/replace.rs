//! md's replace in the engine target: the new device as the member layer pairs it with the
//! member (uraid-io's `Replacing`), its copy in windows, and its swap into the slot.

use super::{Asked, Harness, Replacement};
use uraid_core::array::{IoArea, MemberIo, MemberOp};
use uraid_core::{DiskIndex, Level, Sector};

impl Harness {
    pub(super) fn data_disks(&self) -> u64 {
        (self.members.len() - self.max_degraded) as u64
    }

    /// Begins replacing `member` when every member is in sync and none is being replaced
    /// (uraid-md's rule): a new device full of garbage is paired with it.
    pub(super) fn start_replacement(&mut self, member: usize) {
        let m = member % self.members.len();
        let in_sync = self.array.failed_members().is_empty() && self.array.recovering().is_empty();
        if self.level == Level::Raid0 || self.replacement.is_some() || !in_sync {
            return;
        }
        self.array.start_replacement(DiskIndex(m as u16));
        self.replacement = Some(Replacement {
            member: m,
            disk: vec![0x5a; self.members[m].len()],
            ring: vec![0x5a; self.rings[m].len()],
            next: 0,
            out: false,
            copied: false,
            stopped: false,
        });
    }

    /// Submits the copy's next window (two chunks, as the simulator's), or past the end the
    /// flush that makes the copy durable.
    pub(super) fn copy_window(&mut self) {
        let Some(r) = &self.replacement else { return };
        if r.out || r.copied || r.stopped {
            return;
        }
        let end = self.size_sectors / self.data_disks();
        let asked = if r.next >= end {
            Asked::CopyFlush
        } else {
            Asked::Copy {
                member_sector: r.next,
                sectors: (self.chunk_sectors * 2).min(end - r.next),
            }
        };
        self.replacement.as_mut().expect("a replacement").out = true;
        self.submit(asked);
    }

    /// A copy window (or the closing flush) finished; `ok` false: the window stopped because
    /// the member failed.
    pub(super) fn copy_done(&mut self, asked: &Asked, ok: bool) {
        let r = self.replacement.as_mut().expect("copies only while a replacement is under way");
        r.out = false;
        match *asked {
            Asked::Copy { member_sector, sectors } if ok => {
                assert_eq!(member_sector, r.next, "windows complete in order");
                r.next += sectors;
            }
            Asked::Copy { .. } => r.stopped = true,
            _ => r.copied = true,
        }
    }

    /// Ends a replacement that is over once none of the member's I/O is in flight, as
    /// uraid-md does: a member that failed hands its slot to the new device, which is
    /// recovered whole (no bitmap here); a done copy swaps the new device in.
    pub(super) fn join(&mut self) {
        let Some(r) = &self.replacement else { return };
        let m = r.member;
        let member = DiskIndex(m as u16);
        let failed = self.array.failed_members().contains(&member);
        let busy = r.out || self.ios.iter().any(|io| io.member == member);
        if busy || !(failed || r.copied) {
            return;
        }
        let r = self.replacement.take().expect("a replacement");
        self.members[m] = r.disk;
        self.rings[m] = r.ring;
        if failed {
            if self.array.take_over_replacement(member, Sector(r.next)).is_none() {
                self.array.end_replacement(member);
                self.array.start_recovery(member, Sector(0));
            }
        } else {
            self.array.end_replacement(member);
        }
        self.settle();
    }

    /// A member I/O taken while its member was being replaced reaches the new device too
    /// (a copy write the new device alone), but for a log write the engine queued before the
    /// replacement began, which is the member's alone.
    pub(super) fn mirror(&mut self, io: &MemberIo) {
        let r = self.replacement.as_mut().expect("paired I/O completes before the swap");
        assert_eq!(r.member, io.member.get());
        if io.before_replacement {
            return;
        }
        let at = io.sector.0 as usize * 512;
        let disk = match io.area {
            IoArea::Log => &mut r.ring,
            _ => &mut r.disk,
        };
        let block = &mut disk[at..at + io.bytes()];
        match io.op {
            MemberOp::Write | MemberOp::CopyWrite => block.copy_from_slice(self.array.io_buf(io)),
            MemberOp::Discard => block.fill(0),
            MemberOp::Read | MemberOp::Flush | MemberOp::ListBad | MemberOp::ListBadReplacement => {
            }
        }
    }

    /// At the end: a replacement under way copies to the end and ends.
    pub(super) fn finish_replacement(&mut self) {
        for _ in 0..100_000 {
            if self.replacement.is_none() {
                return;
            }
            self.copy_window();
            self.drain();
            self.join();
        }
        panic!("a replacement never ended");
    }

    /// With every member in sync at the end, a check of the whole array finds no mismatch.
    pub(super) fn check_parity(&mut self) {
        let in_sync = self.array.failed_members().is_empty() && self.array.recovering().is_empty();
        if self.level == Level::Raid0 || !in_sync {
            return;
        }
        let before = self.array.mismatches().1;
        self.submit(Asked::Check);
        self.drain();
        let found = self.array.mismatches().1 - before;
        assert_eq!(found, 0, "parity inconsistent at the end: {:?}", self.array.mismatches().0);
    }
}
