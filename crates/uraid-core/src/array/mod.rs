//! The array engine, sans I/O: user requests in, member I/Os out, completions back in.
//!
//! A read inside a chunk on a healthy member goes straight to that member into the caller's
//! buffer (no copy), unless the stripe head for it holds newer data. Everything else goes
//! through stripe heads (`handle.rs`): writes are planned per head by `stripe::plan_write`
//! (full stripe, rmw or rcw by the fewest reads), degraded reads by `stripe::plan_read`; but a
//! stripe a write covers whole, with nothing else going on in it, is one batch with no head
//! (`batch_write.rs`).
//!
//! The runtime loop: `submit_*`, then repeatedly take `next_io`, perform it with the buffer from
//! `io_buf`/`io_buf_mut`, and report `complete_io`; finished requests come out of
//! `take_completed`. Nothing here blocks, sleeps or reads a clock.

mod allocation;
mod batch_write;
mod compute;
mod direct_write;
mod durability;
mod failure_record;
mod handle;
mod inflight;
pub mod io;
mod list_bad;
mod ppl;
mod readd;
mod replace;
mod sync;
mod write_back;
mod write_behind;
mod write_intent;

pub use allocation::{Extent, ReadSource, part_extents};
pub use io::{ArrayStats, IoArea, IoBuf, IoTag, MemberIo, MemberOp, ReqId};
pub use ppl::PartialParityLogConfig;
pub use sync::{MISMATCHES_KEPT, Mismatch, SyncKind};
pub use write_intent::{BITMAP_PAGE_BYTES, WriteIntentConfig};

use crate::fast_hash::{HashMap, HashSet};
use crate::geometry::Geometry;
use crate::request::{split_by_chunk, split_by_head};
use crate::stripe::{HeadId, STRIPE_CACHE_SIZE_MAX, StripeCache, StripeKey};
use crate::units::{DiskIndex, SECTOR_BYTES, Sector, StripeNumber};
use handle::{HeadState, Piece};
use std::collections::VecDeque;
use thiserror::Error;

/// One entry per member, on the stack for arrays of up to 32 members (no allocation per head
/// step on the hot path).
pub(crate) type PerMember<T> = smallvec::SmallVec<[T; 32]>;

/// Full-stripe writes that may overtake a held-back partial-stripe write before it starts
/// anyway (md's `preread_bypass_threshold`; md defaults to 1, which lets a sequential stream's
/// partial stripes start before the next request fills them).
pub const PREREAD_BYPASS_THRESHOLD: u64 = 64;

/// Read errors a member may have corrected (rebuilt from parity and rewritten) before it is
/// failed: md's max_corr_read_errors default.
pub const MAX_CORRECTED_READ_ERRORS: u32 = 20;

#[derive(Clone, Debug)]
pub struct ArrayConfig {
    pub geometry: Geometry,
    /// The stripe head unit (md's stripe_size): a power of two from 4 KiB up to the chunk.
    pub stripe_size_bytes: u64,
    /// Stripe heads in the cache (md's stripe_cache_size).
    pub stripe_cache_size: usize,
    /// Sectors of each member's data area.
    pub member_sectors: u64,
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArrayError {
    #[error(
        "request of {sectors} sectors at sector {sector} ends beyond the array's {size} sectors"
    )]
    OutOfRange { sector: u64, sectors: u64, size: u64 },
    #[error("request buffer of {bytes} bytes is not a whole number of 512-byte sectors")]
    Unaligned { bytes: usize },
    #[error("stripe_size {bytes} bytes must be a power of two from 4 KiB up to the chunk size")]
    BadStripeSize { bytes: u64 },
    #[error("stripe_cache_size must be 1 to 32768 stripe heads (md's largest is 32768)")]
    BadCacheSize,
    #[error("too many members have failed: data in this stripe cannot be read or written")]
    BeyondRedundancy,
    /// A copy to a replacement (md's replace) reached a stripe after the member being
    /// replaced failed: nothing was copied there, and the copy's progress must not pass it.
    #[error("the member being replaced has failed: the copy stops")]
    ReplacedMemberFailed,
    /// A recovery met a block it cannot rebuild (another member's block there is unreadable
    /// too) and the member being rebuilt could not list it as bad (`list_bad.rs`).
    #[error(
        "a block cannot be rebuilt (unreadable on another member too) nor listed in the bad \
         block log of the member being rebuilt (it has none, or it is full)"
    )]
    CannotListBadBlock,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    /// A whole stripe head discarded on every member.
    Discard,
    /// A sync request's work on one stripe head.
    Sync(SyncKind),
}

#[expect(clippy::struct_excessive_bools, reason = "independent facts about one request")]
struct Request {
    id: ReqId,
    buf: Vec<u8>,
    sector: Sector,
    /// Member I/Os and stripe-head pieces still to finish.
    outstanding: usize,
    error: Option<ArrayError>,
    /// Forced unit access: its member writes (data and parity) go out FUA, never held back.
    fua: bool,
    /// Writes zeros without a buffer (the partial stripes of a discard).
    zeroes: bool,
    /// A FUA write whose log retirement has been asked for (see `ppl::log_flush`).
    fua_logged: bool,
    /// A write that begins where a recent write ended: part of a stream (`recent_write_ends`).
    continues_stream: bool,
    /// One that continues a write that continued another: a stream's for sure (a random write
    /// may begin where another ended by chance, two in a row hardly ever). `write_back`
    /// holds only these.
    stream_run: bool,
    /// A later write began where this one ends (while it was in flight): a stream's too
    /// (`ppl::generation::ack_when_admitted`).
    continued: bool,
    /// Pieces of it held in stripe heads by the write-back of a stream's partial stripes
    /// (`write_back`): once they are all it waits for, it is acknowledged.
    held: usize,
    /// Its acknowledgement's number, once acknowledged by the write-back (0 before): the
    /// request lives on, with no completion of its own, until its held writes complete.
    ack_seq: u64,
    /// A write, discard or flush: its success says blocks are on the members, so it waits
    /// for failures to be recorded (`failure_record`).
    acks_writes: bool,
    /// A piece of it was acknowledged once logged (`ppl::ack_logged_writes`): the write-back
    /// does not acknowledge it too (a flush would then wait for its held pieces only).
    log_acked: bool,
}

/// What a member I/O in flight was for.
#[derive(Clone, Copy, Debug)]
enum Pending {
    Direct {
        slot: usize,
        piece_sector: u64,
        sectors: u64,
        buf_sector: u64,
    },
    Head {
        head: HeadId,
        member: DiskIndex,
    },
    /// A RAID0 write from the request's buffer (`direct_write`).
    DirectWrite {
        slot: usize,
        member: DiskIndex,
    },
    Flush {
        slot: usize,
        member: DiskIndex,
    },
    /// A member write of a full-stripe batch (`batch_write`).
    Batch {
        index: usize,
        member: DiskIndex,
    },
    /// A listing in a member's bad block log, or its replacement's (`list_bad.rs`).
    /// `required`: refused, the batch fails (the block would pass for rebuilt or copied).
    ListBad {
        head: HeadId,
        required: bool,
    },
    /// A write-intent bitmap page write.
    Bitmap {
        member: DiskIndex,
    },
    /// A member flush before bitmap pages that clear bits.
    BitmapFlush {
        member: DiskIndex,
    },
    /// A partial parity log write, or a member flush of its reset; `flight` names its
    /// generation (`ppl::generation::Flight`).
    Log {
        member: DiskIndex,
        flight: u64,
    },
    /// A member flush of the log's advance number `advance` (`ppl::advance`).
    LogFlush {
        member: DiskIndex,
        advance: u64,
    },
    /// A write in place of an acknowledged batch, from a copy (`write_behind`).
    Behind {
        head: HeadId,
        member: DiskIndex,
    },
}

pub struct Array {
    geometry: Geometry,
    unit_sectors: u64,
    size_sectors: u64,
    cache: StripeCache,
    heads: HashMap<HeadId, HeadState>,
    failed: Vec<bool>,
    requests: Vec<Option<Request>>,
    free_slots: Vec<usize>,
    inflight: inflight::InFlight,
    queue: VecDeque<MemberIo>,
    /// Stripe-head work waiting for a free head.
    waiting: VecDeque<(StripeKey, Piece)>,
    /// How many waiting pieces each key has.
    waiting_keys: HashMap<StripeKey, u32>,
    done: Vec<(ReqId, Result<(), ArrayError>, Vec<u8>)>,
    /// The submitter has more requests coming (see `plug`).
    plugged: bool,
    /// Heads whose partial-stripe writes are held back (see `handle::Phase::Delayed`).
    delayed: Vec<HeadId>,
    /// Those of them whose writes look random (`start_delayed_random`), and heads that have
    /// since left the list (dropped there).
    delayed_random: Vec<HeadId>,
    /// Heads with pieces not yet handled (see `handle::handle_or_defer`).
    deferred: Vec<HeadId>,
    deferred_ids: HashSet<HeadId>,
    /// While `handle_deferred` runs: whether other I/O was busy when it began.
    busy_before_settle: Option<handle::Busy>,
    /// Where the last few writes ended: a write that begins at one continues a stream, whose
    /// partial stripes the next writes are likely to fill (`handle::random_writes`); with
    /// the slot of the request that ended there and whether it continued one itself.
    recent_write_ends: VecDeque<(u64, usize, bool)>,
    /// Stripes from one this engine serves to its next (`set_stream_stride`; 1: every one).
    stream_stride: u64,
    /// Full-stripe writes started so far: the clock delayed heads are overtaken by.
    full_stripe_writes: u64,
    /// Member I/O queued or in flight that no request waits for: writes in place of batches
    /// already acknowledged, and the log writes of an advance's tail that carries no entries
    /// while no flush waits for it (`ppl`).
    background_ios: usize,
    /// Spare block copies for `write_behind`.
    behind_pool: Vec<crate::buffer::BlockBuf>,
    /// Read errors corrected per member (see `MAX_CORRECTED_READ_ERRORS`).
    read_errors: Vec<u32>,
    /// While `complete_io_known_bad` runs: the failure is a read of a range the member's bad
    /// block log names, which counts against no error budget.
    known_bad: bool,
    /// Per member: `Some(offset)` while it is being recovered (in sync below `offset` member
    /// sectors only).
    recovery_offset: Vec<Option<u64>>,
    /// Per member being recovered: ends (member sectors) of heads above its recovery offset
    /// that recovery has already rebuilt (see `sync::in_sync`).
    recovered: Vec<std::collections::BTreeSet<u64>>,
    /// Per member back by re-add: the member-sector ranges where it missed writes (`readd`).
    stale: Vec<Option<Vec<(u64, u64)>>>,
    /// Members being replaced (md's replace, `replace.rs`): `SyncKind::Replace` copies them.
    replacing: Vec<bool>,
    /// Where check/repair/resync found parity mismatches (the first `MISMATCHES_KEPT`).
    mismatches: Vec<Mismatch>,
    /// A stripe unit of zeros: the source of the zero writes of partial-stripe discards.
    zeros: Box<[u8]>,
    stats: ArrayStats,
    write_intent: Option<write_intent::WriteIntent>,
    ppl: Option<ppl::PartialParityLog>,
    batches: batch_write::Batches,
    failure_record: failure_record::FailureRecord,
    write_back: write_back::WriteBack,
}

impl ArrayConfig {
    /// What `Array::new` refuses, checked alone: a caller can refuse bad options before it
    /// writes anything (md's superblocks say "active" once an array starts).
    pub fn check(&self) -> Result<(), ArrayError> {
        let unit_sectors = self.stripe_size_bytes / SECTOR_BYTES;
        let ok = self.stripe_size_bytes.is_power_of_two()
            && self.stripe_size_bytes >= 4096
            && unit_sectors <= self.geometry.chunk_sectors();
        if !ok {
            return Err(ArrayError::BadStripeSize { bytes: self.stripe_size_bytes });
        }
        if !(1..=STRIPE_CACHE_SIZE_MAX).contains(&self.stripe_cache_size) {
            return Err(ArrayError::BadCacheSize);
        }
        Ok(())
    }
}

impl Array {
    pub fn new(cfg: ArrayConfig) -> Result<Array, ArrayError> {
        cfg.check()?;
        let g = cfg.geometry;
        let unit_sectors = cfg.stripe_size_bytes / SECTOR_BYTES;
        let unit_bytes = usize::try_from(cfg.stripe_size_bytes).expect("a unit fits in memory");
        Ok(Array {
            size_sectors: g.array_sectors(cfg.member_sectors),
            cache: StripeCache::new(cfg.stripe_cache_size, g.raid_disks(), unit_bytes),
            failed: vec![false; g.raid_disks()],
            read_errors: vec![0; g.raid_disks()],
            known_bad: false,
            recovery_offset: vec![None; g.raid_disks()],
            recovered: vec![std::collections::BTreeSet::new(); g.raid_disks()],
            stale: vec![None; g.raid_disks()],
            replacing: vec![false; g.raid_disks()],
            mismatches: Vec::new(),
            geometry: g,
            unit_sectors,
            heads: HashMap::default(),
            requests: Vec::new(),
            free_slots: Vec::new(),
            inflight: inflight::InFlight::default(),
            queue: VecDeque::new(),
            waiting: VecDeque::new(),
            waiting_keys: HashMap::default(),
            done: Vec::new(),
            plugged: false,
            delayed: Vec::new(),
            delayed_random: Vec::new(),
            deferred: Vec::new(),
            deferred_ids: HashSet::default(),
            busy_before_settle: None,
            recent_write_ends: VecDeque::new(),
            stream_stride: 1,
            full_stripe_writes: 0,
            background_ios: 0,
            behind_pool: Vec::new(),
            zeros: vec![0u8; unit_bytes].into_boxed_slice(),
            stats: ArrayStats::default(),
            write_intent: None,
            ppl: None,
            batches: batch_write::Batches::default(),
            failure_record: failure_record::FailureRecord::default(),
            write_back: write_back::WriteBack::default(),
        })
    }

    #[must_use]
    pub fn size_sectors(&self) -> u64 {
        self.size_sectors
    }

    #[must_use]
    pub fn stats(&self) -> ArrayStats {
        self.stats
    }

    #[must_use]
    pub fn cache(&self) -> &StripeCache {
        &self.cache
    }

    /// Changes md's stripe_cache_size while running: growing takes effect at once (waiting
    /// requests start), shrinking frees idle heads now and busy ones as they finish. Memory is
    /// bounded by it: `heads * members * stripe_size` bytes of blocks.
    pub fn set_stripe_cache_size(&mut self, heads: usize) -> Result<(), ArrayError> {
        if !(1..=STRIPE_CACHE_SIZE_MAX).contains(&heads) {
            return Err(ArrayError::BadCacheSize);
        }
        self.cache.resize(heads);
        self.start_waiting();
        Ok(())
    }

    /// Marks a member failed: it gets no more I/O and its blocks are rebuilt from parity.
    pub fn fail_member(&mut self, member: DiskIndex) {
        self.mark_failed(member);
    }

    #[must_use]
    pub fn failed_members(&self) -> Vec<DiskIndex> {
        (0..self.failed.len()).filter(|&m| self.failed[m]).map(|m| DiskIndex(m as u16)).collect()
    }

    /// Reads `buf.len()` bytes from array sector `sector` into `buf`.
    pub fn submit_read(&mut self, id: ReqId, sector: Sector, buf: Vec<u8>) {
        let Some(slot) = self.admit(id, sector, buf) else { return };
        let sectors = self.request_sectors(slot);
        let pieces: Vec<_> = split_by_chunk(&self.geometry, sector, sectors).collect();
        let raid0_direct = self.raid0_direct();
        for p in pieces {
            let routed = !raid0_direct
                && (self.head_for_newer_data(p.addr.stripe, p.addr.member_sector.0, p.sectors)
                    || self.stripe_missing_data(p.addr.stripe));
            if routed {
                self.add_head_pieces(
                    slot,
                    Kind::Read,
                    p.buf_sector,
                    sector.0 + p.buf_sector,
                    p.sectors,
                );
            } else {
                self.direct_read(slot, p.addr.disk, p.addr.member_sector, p.sectors, p.buf_sector);
            }
        }
        self.request_mut(slot).outstanding -= 1;
        self.finish_if_done(slot);
        self.start_delayed_when_idle();
    }

    /// Writes `buf` at array sector `sector`.
    pub fn submit_write(&mut self, id: ReqId, sector: Sector, buf: Vec<u8>) {
        self.write_request(id, sector, buf, false);
    }

    fn write_request(&mut self, id: ReqId, sector: Sector, buf: Vec<u8>, fua: bool) {
        let Some(slot) = self.admit(id, sector, buf) else { return };
        self.request_mut(slot).fua = fua;
        self.request_mut(slot).acks_writes = true;
        let sectors = self.request_sectors(slot);
        self.note_write_end(slot, sector.0, sectors);
        if self.raid0_direct() {
            self.direct_write(slot, sector, sectors, 0);
        } else {
            self.write_by_stripes(slot, sector.0, sectors);
        }
        // After its pieces joined the heads: the heads it fills go whole.
        self.age_held_writes(sectors);
        self.request_mut(slot).outstanding -= 1;
        self.finish_if_done(slot);
        self.start_delayed_when_idle();
    }

    /// Records where request `slot`'s write ends, and whether it continues a recent one.
    fn note_write_end(&mut self, slot: usize, sector: u64, sectors: u64) {
        const STREAMS: usize = 32;
        let stripe = self.geometry.stripe_data_sectors();
        // A write that begins this engine's next stripe continues one that ended the last.
        let skipped = (self.stream_stride - 1) * stripe;
        let strided = (skipped > 0 && sector.is_multiple_of(stripe))
            .then(|| sector.checked_sub(skipped))
            .flatten();
        let continued =
            self.recent_write_ends.iter().position(|e| e.0 == sector || Some(e.0) == strided);
        self.request_mut(slot).continues_stream = continued.is_some();
        if let Some(i) = continued {
            let (end, earlier, run) = self.recent_write_ends.remove(i).expect("found");
            self.request_mut(slot).stream_run = run;
            // Its slot may hold another request by now: only one that ends there counts.
            let live = self.requests.get(earlier).is_some_and(Option::is_some);
            if live && self.request(earlier).sector.0 + self.request_sectors(earlier) == end {
                self.request_mut(earlier).continued = true;
            }
        } else if self.recent_write_ends.len() == STREAMS {
            self.recent_write_ends.pop_front();
        }
        self.recent_write_ends.push_back((sector + sectors, slot, continued.is_some()));
    }

    /// Queues request `slot`'s write of `[sector, +sectors)`: the stripes it covers whole as
    /// batches where they may be (`batch_write`), the rest on their stripe heads.
    fn write_by_stripes(&mut self, slot: usize, sector: u64, sectors: u64) {
        let stripe_sectors = self.geometry.stripe_data_sectors();
        let end = sector + sectors;
        // The start of what is not yet queued.
        let mut heads_from = sector;
        let mut whole = sector.div_ceil(stripe_sectors) * stripe_sectors;
        while whole + stripe_sectors <= end {
            if self.try_batch_write(slot, StripeNumber(whole / stripe_sectors)) {
                self.add_write_pieces(slot, heads_from, whole);
                heads_from = whole + stripe_sectors;
            }
            whole += stripe_sectors;
        }
        self.add_write_pieces(slot, heads_from, end);
    }

    /// Queues request `slot`'s write of array sectors `[from, to)` on their stripe heads.
    fn add_write_pieces(&mut self, slot: usize, from: u64, to: u64) {
        if from < to {
            let buf_sector = from - self.request(slot).sector.0;
            self.add_head_pieces(slot, Kind::Write, buf_sector, from, to - from);
        }
    }

    /// Announces a batch of submissions (the block layer's plugging): until `unplug`,
    /// partial-stripe writes that would need pre-reads are held back even when nothing else is
    /// in flight, so that consecutive writes in the batch can fill their stripes and go out as
    /// full-stripe writes with no reads. (While other I/O is in flight they are held anyway.)
    pub fn plug(&mut self) {
        self.plugged = true;
    }

    /// Ends the batch: held-back writes start if nothing else is in flight.
    pub fn unplug(&mut self) {
        self.plugged = false;
        self.start_delayed_when_idle();
    }

    /// Starts held-back writes once nothing else is in flight. When requests wait for a free
    /// stripe head and nothing is in flight to free one, held heads must not pin the pool: the
    /// oldest starts (the newest is the likeliest to be filled by the requests waiting). While
    /// I/O is in flight, its completions free heads and the held ones stay held.
    fn start_delayed_when_idle(&mut self) {
        // Writes in place of acknowledged batches (`ppl::ack_logged_writes`) hold no client
        // back: they do not keep held writes waiting either.
        let nothing_in_flight = self.inflight.len() <= self.background_ios
            && self.deferred.is_empty()
            && !self.log_holds_batches();
        if nothing_in_flight && !self.plugged {
            self.start_delayed();
        } else if nothing_in_flight && !self.waiting.is_empty() {
            // Held heads too (`write_back`): a request must not wait on them for a head.
            if self.delayed.is_empty() {
                self.release_oldest_held();
            }
            self.start_oldest_delayed();
        } else if !self.delayed_random.is_empty() && !self.others_busy().random {
            self.start_delayed_random();
        }
    }

    /// The next member I/O to perform. While a member failure waits to be recorded, writes
    /// wait (`failure_record`).
    pub fn next_io(&mut self) -> Option<MemberIo> {
        self.settle();
        if self.has_unrecorded_failures() {
            return self.next_io_but_writes();
        }
        self.queue.pop_front()
    }

    /// The bytes a member write sends.
    #[must_use]
    pub fn io_buf(&self, io: &MemberIo) -> &[u8] {
        let len = io.bytes();
        match io.buf {
            IoBuf::Request { slot, offset } => &self.request(slot).buf[offset..offset + len],
            IoBuf::Head { head, member, offset } => {
                &self.cache.head(head).buffers[member.get()][offset..offset + len]
            }
            IoBuf::None => &[],
            IoBuf::Zeros => &self.zeros[..len],
            IoBuf::Bitmap { offset } => self.bitmap_buf(offset, len),
            IoBuf::Log { flight, slot } => &self.log_buf(flight, slot)[..len],
            IoBuf::Batch { index, parity } => &self.batch_parity_buf(index, parity)[..len],
            IoBuf::Behind { head, member } => &self.behind_buf(head, member)[..len],
        }
    }

    /// The memory a member read fills.
    pub fn io_buf_mut(&mut self, io: &MemberIo) -> &mut [u8] {
        let len = io.bytes();
        match io.buf {
            IoBuf::Request { slot, offset } => {
                &mut self.request_mut(slot).buf[offset..offset + len]
            }
            IoBuf::Head { head, member, offset } => {
                &mut self.cache.head_mut(head).buffers[member.get()][offset..offset + len]
            }
            IoBuf::None
            | IoBuf::Zeros
            | IoBuf::Bitmap { .. }
            | IoBuf::Log { .. }
            | IoBuf::Batch { .. }
            | IoBuf::Behind { .. } => {
                assert_ne!(io.op, MemberOp::Read, "engine-owned buffers are written, never read");
                &mut []
            }
        }
    }

    /// Reports a member I/O done (`ok`) or failed; a failure fails the member.
    pub fn complete_io(&mut self, tag: IoTag, ok: bool) {
        let pending = self.inflight.remove(tag).expect("completion of an I/O in flight");
        match pending {
            Pending::Direct { slot, piece_sector, sectors, buf_sector } => {
                if !ok {
                    // md's read-error path: read the piece again through its stripe heads;
                    // where it fails again the block is rebuilt from parity and rewritten.
                    let member = self.geometry.map_sector(Sector(piece_sector)).disk;
                    self.note_read_error(member);
                    self.add_head_pieces(slot, Kind::Read, buf_sector, piece_sector, sectors);
                }
                self.request_mut(slot).outstanding -= 1;
                self.finish_if_done(slot);
            }
            Pending::Head { head, member } => self.head_io_done(head, member, ok),
            Pending::Behind { head, member } => self.behind_io_done(head, member, ok),
            Pending::DirectWrite { slot, member } => self.direct_write_done(slot, member, ok),
            Pending::Flush { slot, member } => self.flush_done(slot, member, ok),
            Pending::Batch { index, member } => self.batch_write_done(index, member, ok),
            Pending::ListBad { head, required } => self.list_bad_done(head, required, ok),
            Pending::Bitmap { member } => self.bitmap_write_done(member, ok),
            Pending::BitmapFlush { member } => self.bitmap_flush_done(member, ok),
            Pending::Log { member, flight } => self.log_io_done(member, flight, ok),
            Pending::LogFlush { member, advance } => {
                self.log_advance_flush_done(member, advance, ok);
            }
        }
        self.start_delayed_when_idle();
    }

    /// Handles the pieces queued since the last turn, then held-back writes if that left
    /// nothing in flight.
    fn settle(&mut self) {
        loop {
            self.handle_deferred();
            self.start_bitmap_generation();
            self.start_log_generation();
            self.start_delayed_when_idle();
            if self.deferred.is_empty() {
                return;
            }
        }
    }

    /// Requests finished since the last call, with their buffers.
    pub fn take_completed(&mut self) -> Vec<(ReqId, Result<(), ArrayError>, Vec<u8>)> {
        self.settle();
        std::mem::take(&mut self.done)
    }

    /// Reports a read that failed because the member's bad block log names its range (the
    /// runtime's `KnownBad` members never send it), or one its old device failed after a
    /// replacement took its slot: handled as a read error (the blocks are rebuilt from parity
    /// and rewritten) without counting against the member, as md reads around its bad blocks
    /// without failing the device.
    pub fn complete_io_known_bad(&mut self, tag: IoTag) {
        self.known_bad = true;
        self.complete_io(tag, false);
        self.known_bad = false;
    }

    /// Counts a read error on `member`; past `MAX_CORRECTED_READ_ERRORS` the member fails.
    /// Not while the array is degraded to its limit (see `list_bad.rs`).
    fn note_read_error(&mut self, member: DiskIndex) {
        if self.known_bad || self.degraded_to_limit() {
            return;
        }
        let errors = &mut self.read_errors[member.get()];
        *errors += 1;
        if *errors > MAX_CORRECTED_READ_ERRORS {
            self.mark_failed(member);
        }
    }

    /// The members not failed, ascending.
    fn live_members(&self) -> Vec<DiskIndex> {
        (0..self.failed.len()).filter(|&m| !self.failed[m]).map(|m| DiskIndex(m as u16)).collect()
    }

    /// Queues a flush of `member`'s volatile write cache, for `pending`.
    fn queue_member_flush(&mut self, member: DiskIndex, pending: Pending) {
        let tag = self.new_tag();
        self.queue.push_back(MemberIo {
            tag,
            member,
            op: MemberOp::Flush,
            sector: Sector(0),
            sectors: 0,
            buf: IoBuf::None,
            fua: false,
            area: IoArea::Data,
            before_replacement: false,
        });
        self.inflight.insert(tag, member, pending);
    }

    /// Members with a log write queued (built, not yet taken by `next_io`): a simulator
    /// begins replacements where the runtime's worker can, with such writes waiting.
    #[doc(hidden)]
    #[must_use]
    pub fn members_with_queued_log_writes(&self) -> Vec<DiskIndex> {
        let log = self.queue.iter().filter(|io| io.area == IoArea::Log && io.op == MemberOp::Write);
        let mut members: Vec<DiskIndex> = log.map(|io| io.member).collect();
        members.sort_unstable();
        members.dedup();
        members
    }

    /// Whether member I/O is queued or in flight.
    #[must_use]
    pub fn busy(&self) -> bool {
        !self.queue.is_empty()
            || !self.inflight.is_empty()
            || !self.delayed.is_empty()
            || !self.deferred.is_empty()
            || self.write_intent_busy()
            || self.log_busy()
    }

    fn admit(&mut self, id: ReqId, sector: Sector, buf: Vec<u8>) -> Option<usize> {
        if !(buf.len() as u64).is_multiple_of(SECTOR_BYTES) {
            self.done.push((id, Err(ArrayError::Unaligned { bytes: buf.len() }), buf));
            return None;
        }
        let sectors = (buf.len() as u64) / SECTOR_BYTES;
        self.admit_range(id, sector, sectors, buf)
    }

    /// Takes a request slot for `[sector, +sectors)`, or completes the request with an error
    /// if the range leaves the array.
    fn admit_range(
        &mut self,
        id: ReqId,
        sector: Sector,
        sectors: u64,
        buf: Vec<u8>,
    ) -> Option<usize> {
        if sector.0.checked_add(sectors).is_none_or(|end| end > self.size_sectors) {
            let e = ArrayError::OutOfRange { sector: sector.0, sectors, size: self.size_sectors };
            self.done.push((id, Err(e), buf));
            return None;
        }
        // One count for the submission itself, so that pieces finishing while it is still
        // being split cannot complete the request early.
        let req = Request {
            id,
            buf,
            sector,
            outstanding: 1,
            error: None,
            fua: false,
            zeroes: false,
            fua_logged: false,
            continues_stream: false,
            continued: false,
            stream_run: false,
            held: 0,
            ack_seq: 0,
            acks_writes: false,
            log_acked: false,
        };
        let slot = self.free_slots.pop().unwrap_or(self.requests.len());
        if slot == self.requests.len() {
            self.requests.push(None);
        }
        self.requests[slot] = Some(req);
        Some(slot)
    }

    fn request_sectors(&self, slot: usize) -> u64 {
        self.request(slot).buf.len() as u64 / SECTOR_BYTES
    }

    fn request(&self, slot: usize) -> &Request {
        self.requests[slot].as_ref().expect("a live request")
    }

    fn request_mut(&mut self, slot: usize) -> &mut Request {
        self.requests[slot].as_mut().expect("a live request")
    }

    fn finish_if_done(&mut self, slot: usize) {
        let req = self.request(slot);
        if req.outstanding > 0 {
            return self.ack_if_all_held(slot);
        }
        if req.ack_seq != 0 {
            // Acknowledged by the write-back: its writes are done now.
            let req = self.requests[slot].take().expect("a live request");
            self.free_slots.push(slot);
            return self.held_request_done(req.ack_seq, req.error.is_none());
        }
        // A FUA write is durable once written; with the log, its entry must be retired too
        // (else a replay would count its blocks as being written): it completes with an
        // advance or a reset.
        if req.fua && !req.fua_logged && req.error.is_none() && !req.zeroes {
            self.request_mut(slot).fua_logged = true;
            if self.log_flush(slot) {
                return;
            }
        }
        let req = self.requests[slot].take().expect("a live request");
        self.free_slots.push(slot);
        let result = req.error.map_or(Ok(()), Err);
        debug_assert!(req.sector.0 < self.size_sectors || req.buf.is_empty());
        self.finished(req.id, result, req.buf, req.acks_writes);
    }

    fn direct_read(
        &mut self,
        slot: usize,
        member: DiskIndex,
        at: Sector,
        sectors: u64,
        buf_sector: u64,
    ) {
        let tag = self.new_tag();
        let offset = usize::try_from(buf_sector * SECTOR_BYTES).expect("fits");
        let io = MemberIo {
            tag,
            member,
            op: MemberOp::Read,
            sector: at,
            sectors,
            buf: IoBuf::Request { slot, offset },
            fua: false,
            area: IoArea::Data,
            before_replacement: false,
        };
        let piece_sector = self.request(slot).sector.0 + buf_sector;
        self.inflight.insert(
            tag,
            member,
            Pending::Direct { slot, piece_sector, sectors, buf_sector },
        );
        self.request_mut(slot).outstanding += 1;
        self.stats.reads_bypassed += 1;
        self.queue.push_back(io);
    }

    /// More members failed than the level survives.
    fn beyond_redundancy(&self) -> bool {
        self.failed.iter().filter(|f| **f).count() > self.geometry.max_degraded()
    }

    fn new_tag(&mut self) -> IoTag {
        self.inflight.new_tag()
    }

    /// Whether a data block of this stripe is on a failed member. Reads of such a stripe go
    /// through the cache even where their own member is healthy: rebuilding the missing block
    /// needs the others, and reading them into the cache once means no block is read twice
    /// (seed 000). Stripes whose failed member holds P or Q keep the direct path.
    fn stripe_missing_data(&self, stripe: crate::StripeNumber) -> bool {
        let chunk = self.geometry.chunk_sectors();
        let (start, end) = (stripe.0 * chunk, (stripe.0 + 1) * chunk);
        let map = self.geometry.stripe_map(stripe);
        map.data_disk.iter().any(|d| !self.in_sync_range(d.get(), start, end))
    }

    /// Whether a stripe head covering these member sectors has newer data than the member (or
    /// pending writes): a read must then go through it.
    fn head_for_newer_data(
        &self,
        stripe: crate::StripeNumber,
        member_sector: u64,
        sectors: u64,
    ) -> bool {
        let chunk = self.geometry.chunk_sectors();
        let first = (member_sector % chunk) / self.unit_sectors;
        let last = ((member_sector + sectors - 1) % chunk) / self.unit_sectors;
        (first..=last).any(|unit| {
            let key = StripeKey { stripe, unit: unit as u32 };
            self.held_head(key).is_some()
        })
    }

    /// Queues the request's sectors `[array_sector, +sectors)` (at `buf_sector` in its buffer)
    /// on their stripe heads.
    fn add_head_pieces(
        &mut self,
        slot: usize,
        kind: Kind,
        buf_sector: u64,
        array_sector: u64,
        sectors: u64,
    ) {
        for work in split_by_head(&self.geometry, self.unit_sectors, Sector(array_sector), sectors)
        {
            // The head's own list, shifted to the request buffer in place (no second list).
            let mut blocks = work.blocks;
            for b in &mut blocks {
                b.buf_sector += buf_sector;
            }
            self.request_mut(slot).outstanding += 1;
            self.add_piece(work.key, Piece { slot, kind, blocks, held: false });
        }
    }
}
