//! What the engine asks of its members and what it hears back. The engine never touches a
//! device: it hands out `MemberIo`s, the runtime (io_uring, memory, the simulator) performs them
//! with the buffer the engine lends (`Array::io_buf` / `io_buf_mut`) and reports completions.

use crate::stripe::HeadId;
use crate::units::{DiskIndex, Sector};

/// Identifies one member I/O until its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IoTag(pub u64);

/// A user request, as the caller named it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReqId(pub u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberOp {
    Read,
    /// With `MemberIo::fua`, durable when it completes.
    Write,
    /// Make every write the member completed before this was issued durable. No range, no
    /// buffer.
    Flush,
    /// The range reads back as zeros afterwards (parity of a discarded stripe stays
    /// consistent only so): a member that cannot discard that way must write zeros. No buffer.
    Discard,
    /// md's replace: the member's block written to the device taking its place, not to the
    /// member (`Array::start_replacement`). The member layer sends it there and completes
    /// it as written whatever happens to that device: a replacement that fails is its
    /// business (the member stays), never a reason to fail the member.
    CopyWrite,
    /// md's bad block log: list the range as holding no good data on this member, durably,
    /// without writing it (reads of it fail as known bad from then on; a write there makes it
    /// good again). A recovery lists what it cannot rebuild (`list_bad.rs`). Fails where the
    /// member keeps no log or its log is full. No buffer.
    ListBad,
    /// `ListBad` on the device replacing the member (md's replace), not on the member: a
    /// copy lists the block it can neither read nor rebuild there (`list_bad.rs`), even while
    /// that device's failed writes are not listed. Fails where it keeps no log, its log is
    /// full, or the member has no replacement.
    ListBadReplacement,
}

/// Whose memory a member I/O reads into or writes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoBuf {
    /// The user request's own buffer (a healthy read lands there with no copy).
    Request { slot: usize, offset: usize },
    /// A stripe head's block for `member`.
    Head { head: HeadId, member: DiskIndex, offset: usize },
    /// No data moves (flush, discard).
    None,
    /// Zeros (the engine's unit of zeros: at most a stripe unit).
    Zeros,
    /// The write-intent bitmap's image (`write_intent`), at this byte offset.
    Bitmap { offset: usize },
    /// A partial parity log write's buffer (`ppl`): the `slot`-th of flight `flight`'s.
    Log { flight: u64, slot: usize },
    /// A full-stripe batch's P (`parity` 0) or Q (1) (`batch_write`).
    Batch { index: usize, parity: u8 },
    /// A copy of a head's block that an acknowledged batch writes (`write_behind`).
    Behind { head: HeadId, member: DiskIndex },
}

/// Which part of the member an I/O addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoArea {
    /// The data area: `sector` counts from md's data_offset.
    #[default]
    Data,
    /// The internal write-intent bitmap: `sector` counts from the bitmap's start (md's
    /// superblock offset + bitmap_offset).
    Bitmap,
    /// The engine's partial parity log ring: `sector` counts from the ring's start (where the
    /// runtime put it; see `uraid-md`).
    Log,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemberIo {
    pub tag: IoTag,
    pub member: DiskIndex,
    pub op: MemberOp,
    /// From the start of the member's data area.
    pub sector: Sector,
    pub sectors: u64,
    pub buf: IoBuf,
    /// Forced unit access: the write is durable when it completes (a FUA user write's data
    /// and parity both go out so).
    pub fua: bool,
    pub area: IoArea,
    /// A log write queued for this member before its replacement began: it goes to the
    /// member alone, never to the device replacing it (`Array::start_replacement`).
    pub before_replacement: bool,
}

impl MemberIo {
    #[must_use]
    pub fn bytes(&self) -> usize {
        usize::try_from(self.sectors * crate::SECTOR_BYTES).expect("an I/O fits in memory")
    }
}

/// Counters the array keeps about itself (the member counters live with the members).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ArrayStats {
    /// Member reads issued straight into a user buffer (the cache bypassed).
    pub reads_bypassed: u64,
    /// Member writes issued straight from a user buffer (RAID0: no stripe head).
    pub writes_bypassed: u64,
    /// User bytes copied between user buffers and stripe head buffers.
    pub bytes_copied: u64,
    pub stripe_writes_full: u64,
    pub stripe_writes_rmw: u64,
    pub stripe_writes_rcw: u64,
    pub stripe_writes_degraded: u64,
    /// Member read errors corrected by rebuilding the block from parity and rewriting it.
    pub read_errors_corrected: u64,
    /// Stripe heads discarded whole on the members.
    pub stripe_discards: u64,
    /// Blocks copied to a replacement (md's replace).
    pub replace_copies: u64,
    /// Sectors (per member) whose parity did not match their data at a check, repair or
    /// resync: md's mismatch_cnt.
    pub mismatch_sectors: u64,
    /// Writes acknowledged once their partial parity log entries were durable, before their
    /// writes in place completed.
    pub writes_acked_when_logged: u64,
    /// Writes acknowledged when their entries were computed and queued behind other
    /// generations, before they were durable (`ppl::generation::ack_when_admitted`).
    pub writes_acked_when_admitted: u64,
    /// Whole stripes written as one batch each, with no stripe head (`stripe_writes_full`
    /// counts their heads' worth too).
    pub stripe_batches: u64,
    /// Full-stripe writes that went out inside a durable range of the log (a sequential
    /// stream's), with no log write of their own.
    pub writes_under_log_range: u64,
    /// Advances of the log (a flush or FUA write, or a ring filling up): older entries
    /// retired with the log going on, rather than by a reset that stops it.
    pub log_advances: u64,
    /// Log writes that went back to a ring's start over retired generations (no reset).
    pub log_ring_wraps: u64,
    /// Acknowledged batches whose writes in place went from copies, leaving the head free
    /// for the next batch (`write_behind`).
    pub writes_behind: u64,
    /// Writes acknowledged when a stripe head held them for its stream to fill
    /// (`write_back`), before any member I/O.
    pub writes_held_back: u64,
    /// Writes acknowledged that way that then failed (beyond the array's redundancy).
    pub held_writes_failed: u64,
    /// Sectors (per member) a recovery could not rebuild, another member's block there being
    /// unreadable too, and listed in the bad block log of the member it rebuilt
    /// (`list_bad.rs`): their data is lost, and reads of them fail.
    pub sectors_listed_bad: u64,
}
