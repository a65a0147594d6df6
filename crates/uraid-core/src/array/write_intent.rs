//! md's internal write-intent bitmap, in the engine: before a stripe head writes, the bit of
//! the region it writes is set on every member's bitmap and durable (a FUA page write); bits
//! are cleared lazily, once their region has had no write for two ticks of the runtime's
//! clock, and never while the array is degraded (md keeps them so that a member re-added
//! later is resynced only where it missed writes). After a crash, only regions whose bit is
//! set can have data and parity out of step: resync covers those alone.
//!
//! Updates go out in generations: the bits wanted since the last one are applied to the
//! in-memory image and its changed pages written to every live member; heads that waited for
//! a bit start writing when every page write of the generation has completed. The image is
//! lent to the page writes, so it is changed only between generations.

use super::handle::Phase;
use super::{Array, IoArea, IoBuf, Kind, MemberIo, MemberOp, Pending, SyncKind};
use crate::buffer::BlockBuf;
use crate::stripe::HeadId;
use crate::units::{DiskIndex, SECTOR_BYTES, Sector};
use std::collections::{BTreeSet, HashMap};

/// md writes its bitmap a page at a time.
pub const BITMAP_PAGE_BYTES: usize = 4096;

/// The bitmap as the runtime found it on the members.
#[derive(Clone, Debug)]
pub struct WriteIntentConfig {
    /// The whole bitmap region as stored on each member (md's 256-byte bitmap superblock,
    /// then the bits, bit `c % 8` of byte `c / 8` for chunk `c`), padded to whole pages. The
    /// engine changes only bits; the superblock is the lifecycle layer's.
    pub image: Vec<u8>,
    /// Where bit 0 is in `image` (256 for md's internal bitmap).
    pub bits_offset: usize,
    /// Member sectors per bit (md's bitmap chunksize / 512).
    pub chunk_sectors: u64,
    /// Bits in use (md's `chunks`).
    pub chunks: u64,
}

pub(super) struct WriteIntent {
    image: BlockBuf,
    bits_offset: usize,
    chunk_sectors: u64,
    chunks: u64,
    /// Bits as the members hold them (the last generation that completed).
    on_disk: Vec<bool>,
    /// Head writes in flight per chunk: a chunk with any is never cleared.
    writing: HashMap<u64, u32>,
    /// Set chunks that had no write at the last tick: cleared at the next one.
    idle_at_last_tick: BTreeSet<u64>,
    want_set: BTreeSet<u64>,
    want_clear: BTreeSet<u64>,
    /// Heads waiting for their bits: retried whenever a generation completes.
    waiters: Vec<HeadId>,
    /// The generation in flight: page writes outstanding, and the bits it changes.
    in_flight: Option<(usize, Vec<(u64, bool)>)>,
    /// Chunks that still need a resync (set when the array was assembled after a crash):
    /// never cleared until `write_intent_resynced` says their resync is done.
    pinned: BTreeSet<u64>,
    /// A new bitmap superblock from the lifecycle layer, written with the next generation.
    header: Option<Vec<u8>>,
    /// A generation that clears bits first flushes every member (md's PREFLUSH on bitmap
    /// writes): the pages it then writes.
    pages_after_flush: Option<BTreeSet<usize>>,
    /// A member came in (a spare being recovered): the next generation writes the whole
    /// bitmap to every live member, and no write goes out until it has (md writes all pages
    /// to a hot-added member too). Otherwise the new member's bitmap would miss bits set
    /// before it came, and a restart reading it would resync too little.
    rewrite_all: bool,
    pub(super) page_writes: u64,
}

impl WriteIntent {
    pub(super) fn new(cfg: &WriteIntentConfig) -> WriteIntent {
        let len = cfg.image.len().next_multiple_of(BITMAP_PAGE_BYTES);
        assert!(cfg.bits_offset as u64 * 8 + cfg.chunks <= len as u64 * 8, "bits fit the image");
        assert!(cfg.chunk_sectors > 0, "a bitmap chunk has sectors");
        let mut image = BlockBuf::zeroed(len);
        image[..cfg.image.len()].copy_from_slice(&cfg.image);
        let mut wi = WriteIntent {
            image,
            bits_offset: cfg.bits_offset,
            chunk_sectors: cfg.chunk_sectors,
            chunks: cfg.chunks,
            on_disk: Vec::new(),
            writing: HashMap::new(),
            idle_at_last_tick: BTreeSet::new(),
            want_set: BTreeSet::new(),
            want_clear: BTreeSet::new(),
            waiters: Vec::new(),
            in_flight: None,
            pinned: BTreeSet::new(),
            header: None,
            pages_after_flush: None,
            rewrite_all: false,
            page_writes: 0,
        };
        // Bits found set were being written at a crash: they stay until resynced.
        wi.pinned = (0..cfg.chunks).filter(|&c| wi.bit(c)).collect();
        // The image came from one member. A generation torn by the crash may have set bits
        // on it alone, and writes to those chunks (on the word of bits it alone holds) would
        // be lost to a re-add after it fails: the first generation rewrites the image to every
        // member, as md writes the pages it loaded with bits set (seed 31084478).
        wi.on_disk = vec![false; cfg.chunks as usize];
        wi.rewrite_all = !wi.pinned.is_empty();
        wi
    }

    fn bit(&self, chunk: u64) -> bool {
        let at = self.bits_offset + (chunk / 8) as usize;
        self.image[at] & (1 << (chunk % 8)) != 0
    }

    fn set_bit(&mut self, chunk: u64, on: bool) {
        let at = self.bits_offset + (chunk / 8) as usize;
        if on {
            self.image[at] |= 1 << (chunk % 8);
        } else {
            self.image[at] &= !(1 << (chunk % 8));
        }
    }

    fn page_of(&self, chunk: u64) -> usize {
        (self.bits_offset + (chunk / 8) as usize) / BITMAP_PAGE_BYTES
    }

    /// Chunks covering member sectors `[sector, +sectors)`.
    pub(super) fn chunks_of(&self, sector: u64, sectors: u64) -> std::ops::RangeInclusive<u64> {
        let last = (sector + sectors - 1) / self.chunk_sectors;
        (sector / self.chunk_sectors)..=last.min(self.chunks - 1)
    }

    /// Whether writes to `chunk` may go out now: its bit is set on the members and no
    /// generation in flight or wanted clears it.
    fn ready(&self, chunk: u64) -> bool {
        self.on_disk[chunk as usize] && self.bit(chunk) && !self.want_clear.contains(&chunk)
    }

    /// Asks for `chunk`'s bit: a clear not yet applied is dropped; a set is needed unless the
    /// image has the bit already (durable, or being written by the generation in flight,
    /// whose completion retries the waiters).
    fn want(&mut self, chunk: u64) {
        self.want_clear.remove(&chunk);
        if !self.bit(chunk) {
            self.want_set.insert(chunk);
        }
    }

    /// A member joins: write the whole bitmap to every live member before any more writes
    /// (see `rewrite_all`).
    pub(super) fn rewrite_for_new_member(&mut self) {
        self.rewrite_all = true;
        self.on_disk.fill(false);
    }

    pub(super) fn chunk_sectors(&self) -> u64 {
        self.chunk_sectors
    }

    /// Chunks a member that left missed writes in: bits set in the image or wanted by heads
    /// that have planned their writes (ascending).
    pub(super) fn stale_chunks(&self) -> Vec<u64> {
        let mut chunks: BTreeSet<u64> = self.dirty_chunks().into_iter().collect();
        chunks.extend(self.want_set.iter().copied());
        chunks.into_iter().collect()
    }

    /// Chunks whose bit is set in the image.
    pub(super) fn dirty_chunks(&self) -> Vec<u64> {
        (0..self.chunks).filter(|&c| self.bit(c)).collect()
    }
}

impl Array {
    /// Turns on md's write-intent bitmap (see `write_intent`). Bitmap page writes are member
    /// I/Os with `IoArea::Bitmap`: `sector` then counts from the bitmap's start.
    pub fn enable_write_intent(&mut self, cfg: &WriteIntentConfig) {
        let member_sectors = self.size_sectors / self.geometry.data_disks() as u64;
        assert!(cfg.chunks * cfg.chunk_sectors >= member_sectors, "the bitmap covers the members");
        self.write_intent = Some(WriteIntent::new(cfg));
    }

    /// Bitmap chunks whose bit is set now (in memory; on the members once the page writes in
    /// flight complete): after a crash, the regions a resync must cover.
    #[must_use]
    pub fn write_intent_dirty_chunks(&self) -> Vec<u64> {
        self.write_intent.as_ref().map(WriteIntent::dirty_chunks).unwrap_or_default()
    }

    /// Chunks found set at `enable_write_intent` whose resync has not been reported done.
    #[must_use]
    pub fn write_intent_unsynced_chunks(&self) -> Vec<u64> {
        self.write_intent.as_ref().map(|wi| wi.pinned.iter().copied().collect()).unwrap_or_default()
    }

    /// The resync of member sectors `[sector, +sectors)` is done: the bits of the chunks it
    /// covers whole may be cleared again (lazily, as any other).
    pub fn write_intent_resynced(&mut self, sector: Sector, sectors: u64) {
        let Some(wi) = self.write_intent.as_mut() else { return };
        let first = sector.0.div_ceil(wi.chunk_sectors);
        let end = (sector.0 + sectors) / wi.chunk_sectors;
        let member_sectors = self.size_sectors / self.geometry.data_disks() as u64;
        // The last chunk may extend past the members: covering up to their end is whole.
        let end = if sector.0 + sectors >= member_sectors { wi.chunks } else { end };
        for c in first..end {
            wi.pinned.remove(&c);
        }
    }

    /// Replaces the bitmap superblock (the first `bits_offset` bytes of the image, which the
    /// lifecycle layer owns: events, state) and writes it to every live member with the next
    /// generation.
    pub fn write_intent_set_header(&mut self, header: &[u8]) {
        let Some(wi) = self.write_intent.as_mut() else { return };
        assert_eq!(header.len(), wi.bits_offset, "the header is what precedes the bits");
        wi.header = Some(header.to_vec());
    }

    /// The bitmap's bookkeeping in words, for a stall report (the simulator's).
    #[doc(hidden)]
    #[must_use]
    pub fn write_intent_debug(&self) -> Option<String> {
        let wi = self.write_intent.as_ref()?;
        let not_on_disk: Vec<u64> =
            (0..wi.chunks).filter(|&c| wi.bit(c) != wi.on_disk[c as usize]).collect();
        let waiters: Vec<String> = wi
            .waiters
            .iter()
            .map(|id| {
                let st = self.heads.get(id);
                let range = st.map(|_| self.head_member_range(*id));
                let first = st.and_then(|st| st.batch.first().map(|p| p.kind));
                format!("{id:?} {:?} {range:?} {first:?}", st.map(|st| st.phase))
            })
            .collect();
        Some(format!(
            "waiters {waiters:?}, want_set {:?}, want_clear {:?}, in_flight {:?}, image differs \
             from disk at {not_on_disk:?}, writing {:?}",
            wi.want_set,
            wi.want_clear,
            wi.in_flight.as_ref().map(|(n, c)| (n, c.len())),
            wi.writing
        ))
    }

    /// Bitmap page writes so far (each to every live member).
    #[must_use]
    pub fn write_intent_page_writes(&self) -> u64 {
        self.write_intent.as_ref().map_or(0, |wi| wi.page_writes)
    }

    /// The runtime's clock for lazy clearing (md's bitmap daemon, every few seconds): chunks
    /// with no write since the previous tick are cleared, unless the array is degraded.
    pub fn write_intent_tick(&mut self) {
        let degraded =
            self.failed.iter().any(|&f| f) || self.recovery_offset.iter().any(Option::is_some);
        let Some(wi) = self.write_intent.as_mut() else { return };
        let idle: BTreeSet<u64> = (0..wi.chunks)
            .filter(|&c| wi.bit(c) && !wi.writing.contains_key(&c) && !wi.pinned.contains(&c))
            .collect();
        if !degraded {
            for &c in idle.intersection(&wi.idle_at_last_tick) {
                if !wi.want_set.contains(&c) {
                    wi.want_clear.insert(c);
                }
            }
        }
        wi.idle_at_last_tick = idle;
    }

    /// When a head plans writes to `[sector, +sectors)` (before its pre-reads): asks for the
    /// bits now, so that the bitmap update overlaps the reads (md sets bits as writes arrive).
    pub(super) fn write_intent_prepare(&mut self, sector: u64, sectors: u64) {
        let Some(wi) = self.write_intent.as_mut() else { return };
        for c in wi.chunks_of(sector, sectors) {
            wi.want(c);
        }
    }

    /// Whether bitmap work is waiting to start (the engine is busy until it is done).
    pub(super) fn write_intent_busy(&self) -> bool {
        self.write_intent.as_ref().is_some_and(|wi| {
            !wi.waiters.is_empty()
                || !wi.want_set.is_empty()
                || wi.in_flight.is_some()
                || wi.header.is_some()
                || wi.rewrite_all
        })
    }

    /// Whether head `id`'s writes set write-intent bits (and are counted against clearing
    /// them). A resync's or a recovery's writes set none, as md's sync writes: a crash in the
    /// middle of one leaves nothing out of step that its own restart does not redo (a resync
    /// goes on from its pinned bits or offset, a recovery from the member's recovery offset).
    /// They used to: every chunk a rebuild passed stayed dirty until the array was whole and
    /// idle for two ticks, and a crash meanwhile resynced all of it besides the recovery.
    /// Repair keeps them (its parity writes change what a later degraded read computes).
    pub(super) fn writes_set_bits(&self, id: HeadId) -> bool {
        let first = self.batch(id).first().map(|p| p.kind);
        !matches!(first, Some(Kind::Sync(SyncKind::Resync | SyncKind::Recovery)))
    }

    /// Before head `id` writes member sectors `[sector, +sectors)`: true if it may go now (its
    /// chunks are counted as written); false if it waits for a bitmap generation (the head is
    /// parked in `Phase::BitmapWait` and `start_writing` is called again for it).
    pub(super) fn write_intent_admit(&mut self, id: HeadId, sector: u64, sectors: u64) -> bool {
        if self.write_intent_try(sector, sectors) {
            return true;
        }
        self.write_intent.as_mut().expect("only a bitmap refuses").waiters.push(id);
        self.state(id).phase = Phase::BitmapWait;
        false
    }

    /// Whether writes to member sectors `[sector, +sectors)` may go now: true if their chunks
    /// are ready (now counted as written); false if not (their bits are asked for; a head
    /// then waits for them, a batch goes through its heads instead).
    pub(super) fn write_intent_try(&mut self, sector: u64, sectors: u64) -> bool {
        let Some(wi) = self.write_intent.as_mut() else { return true };
        let chunks = wi.chunks_of(sector, sectors);
        // Wanting a chunk cancels a clear not yet applied, which may make it ready at once:
        // parking then would wait for a generation that never comes (found by the simulator).
        for c in chunks.clone() {
            wi.want(c);
        }
        if !chunks.clone().all(|c| wi.ready(c)) {
            return false;
        }
        for c in chunks {
            *wi.writing.entry(c).or_default() += 1;
        }
        true
    }

    /// After head writes to `[sector, +sectors)` complete.
    pub(super) fn write_intent_done(&mut self, sector: u64, sectors: u64) {
        let Some(wi) = self.write_intent.as_mut() else { return };
        for c in wi.chunks_of(sector, sectors) {
            let n = wi.writing.get_mut(&c).expect("a counted write");
            *n -= 1;
            if *n == 0 {
                wi.writing.remove(&c);
                wi.idle_at_last_tick.remove(&c);
            }
        }
    }

    /// Applies the wanted bits and writes their pages to every live member, unless a
    /// generation is in flight (the image is lent to it). Called when the runtime asks for
    /// member I/O, so that every write of a turn shares one generation.
    pub(super) fn start_bitmap_generation(&mut self) {
        // Runs at every settle (each member I/O of a turn): nothing is allocated until there
        // is a bitmap with changes to write.
        if self.write_intent.is_none() {
            return;
        }
        // Clears a tick wanted before a member failed (or came back to be recovered) are
        // dropped: no bit clears while the array is degraded (the simulator's seed 22002492:
        // a member re-added later missed a write whose bit had been cleared so).
        let degraded =
            self.failed.iter().any(|&f| f) || self.recovery_offset.iter().any(Option::is_some);
        let wi = self.write_intent.as_mut().expect("checked");
        if degraded {
            wi.want_clear.clear();
        }
        if wi.in_flight.is_some()
            || (wi.want_set.is_empty()
                && wi.want_clear.is_empty()
                && wi.header.is_none()
                && !wi.rewrite_all)
        {
            return;
        }
        let live = self.live_members();
        let wi = self.write_intent.as_mut().expect("checked");
        let mut changes = Vec::new();
        for c in std::mem::take(&mut wi.want_set) {
            changes.push((c, true));
        }
        for c in std::mem::take(&mut wi.want_clear) {
            changes.push((c, false));
        }
        let mut pages = BTreeSet::new();
        if let Some(header) = wi.header.take() {
            wi.image[..header.len()].copy_from_slice(&header);
            pages.insert(0);
        }
        for &(c, on) in &changes {
            wi.set_bit(c, on);
            pages.insert(wi.page_of(c));
        }
        if std::mem::take(&mut wi.rewrite_all) {
            let set_now: Vec<u64> = (0..wi.chunks)
                .filter(|&c| wi.bit(c) && !changes.iter().any(|&(d, _)| d == c))
                .collect();
            changes.extend(set_now.into_iter().map(|c| (c, true)));
            pages.extend(0..wi.image.len() / BITMAP_PAGE_BYTES);
        }
        // A bit may be cleared only once the writes it covered are durable: with volatile
        // write caches, "completed" is not enough, so members flush before the clearing
        // pages go out (md sends its bitmap pages with PREFLUSH for the same reason).
        if changes.iter().any(|&(_, on)| !on) && !live.is_empty() {
            wi.in_flight = Some((live.len(), changes));
            wi.pages_after_flush = Some(pages);
            for &member in &live {
                self.queue_member_flush(member, Pending::BitmapFlush { member });
            }
            return;
        }
        wi.in_flight = Some((0, changes));
        self.write_bitmap_pages(&pages);
    }

    /// Writes the generation's pages to every live member.
    fn write_bitmap_pages(&mut self, pages: &BTreeSet<usize>) {
        let live = self.live_members();
        let page_sectors = BITMAP_PAGE_BYTES as u64 / SECTOR_BYTES;
        let wi = self.write_intent.as_mut().expect("a bitmap");
        wi.page_writes += pages.len() as u64;
        let (outstanding, _) = wi.in_flight.as_mut().expect("a generation in flight");
        *outstanding = pages.len() * live.len();
        for &page in pages {
            for &member in &live {
                let tag = self.new_tag();
                self.queue.push_back(MemberIo {
                    tag,
                    member,
                    op: MemberOp::Write,
                    sector: Sector(page as u64 * page_sectors),
                    sectors: page_sectors,
                    buf: IoBuf::Bitmap { offset: page * BITMAP_PAGE_BYTES },
                    fua: true,
                    area: IoArea::Bitmap,
                    before_replacement: false,
                });
                self.inflight.insert(tag, member, Pending::Bitmap { member });
            }
        }
        if live.is_empty() || pages.is_empty() {
            self.bitmap_generation_done();
        }
    }

    /// A member flush before a clearing generation's pages completed.
    pub(super) fn bitmap_flush_done(&mut self, member: DiskIndex, ok: bool) {
        if !ok {
            self.mark_failed(member);
            // What that member holds of the writes the clears covered may not be durable:
            // the bits stay (a member back by re-add is rebuilt where they are set: the
            // simulator's seed 22002492 lost a flushed write so). They go out set with the
            // generation's pages: a member that joined meanwhile (`rewrite_for_new_member`)
            // counts no bit as on disk until it is written, and dropped from the generation
            // these stayed set in the image and off the disk, with nothing left to write
            // them, so heads waiting for them waited for good (seed 29059083: a replacement
            // started while a clearing generation was in flight, then a flush failed).
            let wi = self.write_intent.as_mut().expect("bitmap I/O with a bitmap");
            let (_, changes) = wi.in_flight.as_mut().expect("a generation in flight");
            let kept: Vec<u64> = changes.iter().filter(|c| !c.1).map(|c| c.0).collect();
            for c in changes.iter_mut() {
                c.1 = true;
            }
            for c in kept {
                wi.set_bit(c, true);
            }
        }
        let wi = self.write_intent.as_mut().expect("bitmap I/O with a bitmap");
        let (outstanding, _) = wi.in_flight.as_mut().expect("a generation in flight");
        *outstanding -= 1;
        if *outstanding == 0 {
            let pages = wi.pages_after_flush.take().expect("pages wait for the flush");
            self.write_bitmap_pages(&pages);
        }
    }

    /// A bitmap page write completed; a failed one fails its member (md does the same).
    pub(super) fn bitmap_write_done(&mut self, member: DiskIndex, ok: bool) {
        if !ok {
            self.mark_failed(member);
        }
        let wi = self.write_intent.as_mut().expect("bitmap I/O with a bitmap");
        let (outstanding, _) = wi.in_flight.as_mut().expect("a generation in flight");
        *outstanding -= 1;
        if *outstanding == 0 {
            self.bitmap_generation_done();
        }
    }

    fn bitmap_generation_done(&mut self) {
        let wi = self.write_intent.as_mut().expect("a bitmap");
        let (_, changes) = wi.in_flight.take().expect("a generation in flight");
        for (c, on) in changes {
            wi.on_disk[c as usize] = on;
        }
        self.wake_bitmap_waiters();
    }

    /// Every waiter tries again: those whose bits are durable write, the others park for the
    /// next generation.
    fn wake_bitmap_waiters(&mut self) {
        let wi = self.write_intent.as_mut().expect("a bitmap");
        for id in std::mem::take(&mut wi.waiters) {
            if self.heads.get(&id).is_some_and(|st| st.phase == Phase::BitmapWait) {
                self.state(id).phase = Phase::Idle;
                // A discard starts over (it has nothing computed); a write goes on writing.
                if self.batch(id).first().map(|p| p.kind) != Some(super::Kind::Discard) {
                    self.start_writing(id);
                }
                self.handle(id);
            }
        }
    }

    /// The bitmap image a bitmap page write sends.
    pub(super) fn bitmap_buf(&self, offset: usize, len: usize) -> &[u8] {
        &self.write_intent.as_ref().expect("a bitmap").image[offset..offset + len]
    }
}
