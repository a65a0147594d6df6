//! The partial parity log's on-disk records and arithmetic (the engine side is
//! `array::ppl`). Modelled on md's PPL (Documentation/driver-api/md/raid5-ppl.rst): before a
//! partial-stripe write changes data and parity in place, the parity of the data blocks it
//! does *not* change (the partial parity) is made durable in a log on the parity member (or, for
//! a write at depth 1, on members the write leaves idle: `array::ppl::placement`). After
//! a crash, parity = partial parity + the modified blocks as they are on the members, whatever
//! part of the write reached them: the stripe is consistent again, so a member lost after the
//! crash is rebuilt right. md's PPL covers RAID5 only and excludes the write-intent bitmap; this
//! log also covers RAID6 (the partial Q goes to the Q member's log) and lives beside md's
//! bitmap in the space md leaves before the data (see `uraid-md`), so arrays still move to the
//! kernel unchanged (it ignores the log and keeps md's own behaviour).
//!
//! A log write ("generation") to one member is a header, then the partial parity blocks of
//! its entries in entry order. The header takes the whole sectors its entries need (one for
//! up to six entries, at most eight; 4 KiB always before version 4): on a disk whose
//! bandwidth is the limit every log byte is paid for, and a generation at depth 1 carries one
//! entry. Little endian throughout:
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `URAIDPPL` |
//! | 8..12 | version (5; 4 before a RAID6 head's Q entry could be on a data member's ring, 3
//!   before headers took only the sectors they need, 2 before entries could be on any ring, 1
//!   before rings wrapped) |
//! | 12..16 | crc32c of the header (its whole sectors) with this field zero |
//! | 16..32 | array UUID |
//! | 32..40 | epoch: md's events when the array was assembled (orders runs) |
//! | 40..48 | generation (orders log writes within a run) |
//! | 48..56 | tail: generations below it (in this epoch) are retired |
//! | 56..60 | unit sectors (stripe_size / 512) |
//! | 60..64 | entry count |
//! | 64..96 | the members this generation writes to (a bit each): it is complete only if
//!   each of them holds it, and only a complete one can have let writes start |
//! | 96.. | entries, 64 bytes each |
//!
//! An entry: member sector of the stripe head (u64), flags (u32: bit 0 Q, else P; bit 1 a
//! block follows; bit 2 sector masks follow; bit 3 a range), crc32c of its block (u32), a
//! 256-bit mask of the members whose data blocks the writes may have changed (32 bytes),
//! crc32c of its sector masks (u32), the stripe heads a range covers (u32), 8 reserved
//! bytes. After the header, per entry in order: its block (unit bytes), then, when some
//! member's block is changed only in part, the changed sectors of each masked member in
//! member order (unit sectors / 8 bytes each, bit `s % 8` of byte `s / 8` for sector `s`),
//! padded to whole sectors. Partial blocks need it: the sectors of a
//! block a write does not touch were not being written, and a replay must keep them in the
//! partial parity even when that member is lost.
//!
//! A range entry (block-less) covers `span` stripe heads from its sector on: full-stripe
//! writes of a sequential stream inside it go out with no log write of their own (the
//! engine logs the range ahead of the stream). A replay cannot know which of its heads were
//! written, so it resyncs each (`resynced_parity`): the parity is recomputed from the data
//! when every member is there, and trusted where a member is lost (the lost block is rebuilt
//! from it: right for a head nobody wrote, whatever for one being written).

use crate::geometry::StripeMap;
use crate::layout::Level;
use crate::units::DiskIndex;

mod replay;
pub use replay::{entries_by_head, rebuilt_data, replay_blocks};

pub const LOG_MAGIC: [u8; 8] = *b"URAIDPPL";
/// 2: rings may wrap (a version 1 reader, walking from the ring's start, would miss live
/// generations, so it must not take these for its own). 3: an entry may be on any member's
/// ring, not only its parity member's (a version 2 reader skipped such entries as misplaced).
/// 4: a header takes only the sectors its entries need (before, always 4 KiB; a version 3
/// reader would look for the first block 4 KiB on). 5: a RAID6 head's Q entry may be on the
/// ring of a data member its union writes whole, and a replay missing one of a head's entries
/// takes a lost block in the union from the parity without one (`replay_blocks`; a version 4
/// reader would take it from P and leave a torn Q wrong). 6: an engine serving every n-th
/// stripe logs its stream's ranges over the stripes between, which other rings' entries
/// mend (`heads_to_resync_of_rings`; a version 5 reader would also resync them from the
/// range). Older logs are read as before.
pub const LOG_VERSION: u32 = 6;
const OLDEST_LOG_VERSION: u32 = 1;
/// Bytes of the largest header (every header before version 4).
pub const LOG_HEADER_BYTES: usize = 4096;
/// Sectors of the largest header: what the engine reserves when it does not yet know how
/// many entries a header will hold.
pub const LOG_HEADER_SECTORS: u64 = (LOG_HEADER_BYTES / 512) as u64;
const ENTRY_BYTES: usize = 64;
const ENTRIES_AT: usize = 96;
/// Entries one header holds.
pub const MAX_LOG_ENTRIES: usize = (LOG_HEADER_BYTES - ENTRIES_AT) / ENTRY_BYTES;
const FLAG_Q: u32 = 1;

/// Sectors of a header with `entries` entries (version 4 on): whole sectors, at least one.
#[must_use]
pub fn header_sectors(entries: usize) -> u64 {
    (ENTRIES_AT + entries * ENTRY_BYTES).div_ceil(512) as u64
}
const FLAG_BLOCK: u32 = 2;
const FLAG_MASKS: u32 = 4;
const FLAG_RANGE: u32 = 8;

/// The sectors of one member's block a write changes: bit `s % 64` of word `s / 64`. Inline
/// up to 64 KiB blocks (two words): the engine builds and copies several per partial-stripe
/// write, and as `Vec`s their allocations were a visible part of a logged random write's CPU.
pub type SectorMask = smallvec::SmallVec<[u64; 2]>;

/// A mask of `unit_sectors` sectors, all set.
#[must_use]
pub fn full_mask(unit_sectors: u64) -> SectorMask {
    let mut m = smallvec::smallvec![u64::MAX; unit_sectors.div_ceil(64) as usize];
    if !unit_sectors.is_multiple_of(64) {
        *m.last_mut().expect("a word") = (1u64 << (unit_sectors % 64)) - 1;
    }
    m
}

/// Sets sectors `[first, +sectors)` in `mask`, a word at a time (every logged write adds its
/// blocks: a 4 KiB block of 512-byte sectors took 370 instructions a bit at a time).
fn set_sectors(mask: &mut [u64], first: u64, sectors: u64) {
    let (mut s, end) = (first, first + sectors);
    while s < end {
        let bit = s % 64;
        let n = (end - s).min(64 - bit);
        let bits = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << bit };
        mask[(s / 64) as usize] |= bits;
        s += n;
    }
}

/// Whether `mask` is `full_mask(unit_sectors)`, without building that (asked for each entry
/// of each log write).
pub(crate) fn is_full(mask: &[u64], unit_sectors: u64) -> bool {
    let words = unit_sectors.div_ceil(64) as usize;
    let last = match unit_sectors % 64 {
        0 => u64::MAX,
        bits => (1u64 << bits) - 1,
    };
    mask.len() == words
        && mask
            .split_last()
            .is_some_and(|(l, rest)| *l == last && rest.iter().all(|w| *w == u64::MAX))
}

fn mask_has(mask: &[u64], sector: usize) -> bool {
    mask[sector / 64] & (1 << (sector % 64)) != 0
}

/// Which parity an entry restores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogParity {
    P,
    Q,
}

/// One stripe head's record in a generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    /// The head's first sector on every member (data area).
    pub member_sector: u64,
    pub parity: LogParity,
    /// Data members whose blocks may differ from the partial parity's view, with the sectors
    /// that may (ascending by member).
    pub modified: Vec<(usize, SectorMask)>,
    /// crc32c of the partial parity block; None: no block, the parity is recomputed from all
    /// the data (every data block was being written).
    pub block_crc: Option<u32>,
    /// Stripe heads covered from `member_sector` on: 1, or a range (block-less, every data
    /// block modified) whose heads a replay resyncs (see the module docs).
    pub span: u32,
}

impl LogEntry {
    #[must_use]
    pub fn mask(&self, member: usize) -> Option<&[u64]> {
        self.modified.iter().find(|m| m.0 == member).map(|m| &m.1[..])
    }

    /// Adds sectors `[first, +sectors)` of `member`'s block.
    pub fn add(&mut self, member: usize, first: u64, sectors: u64, unit_sectors: u64) {
        let at = match self.modified.binary_search_by_key(&member, |m| m.0) {
            Ok(at) => at,
            Err(at) => {
                let words = unit_sectors.div_ceil(64) as usize;
                self.modified.insert(at, (member, smallvec::smallvec![0; words]));
                at
            }
        };
        set_sectors(&mut self.modified[at].1, first, sectors);
    }

    /// Sectors the entry takes after its header: its block and sector masks.
    #[must_use]
    pub fn stored_sectors(&self, unit_sectors: u64) -> u64 {
        // The mask area's size (`mask_area`) without building it.
        let masks = if self.whole_blocks(unit_sectors) {
            0
        } else {
            (self.modified.len() as u64 * (unit_sectors / 8)).div_ceil(512)
        };
        u64::from(self.block_crc.is_some()) * unit_sectors + masks
    }

    /// Whether every block in the union is changed whole (no mask area is stored).
    fn whole_blocks(&self, unit_sectors: u64) -> bool {
        self.modified.iter().all(|m| is_full(&m.1, unit_sectors))
    }

    /// The sector masks as stored after the block, when some block is changed only in part.
    fn mask_area(&self, unit_sectors: u64) -> Option<Vec<u8>> {
        if self.whole_blocks(unit_sectors) {
            return None;
        }
        let per = (unit_sectors / 8) as usize;
        let mut out = Vec::with_capacity(self.modified.len() * per);
        for (_, mask) in &self.modified {
            let bytes: Vec<u8> = mask.iter().flat_map(|w| w.to_le_bytes()).collect();
            out.extend_from_slice(&bytes[..per]);
        }
        out.resize(out.len().next_multiple_of(512), 0);
        Some(out)
    }
}

/// A generation's header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogHeader {
    pub uuid: [u8; 16],
    pub epoch: u64,
    pub generation: u64,
    pub tail: u64,
    pub unit_sectors: u32,
    /// The members this generation is written to (bit per member).
    pub members: [u8; 32],
    pub entries: Vec<LogEntry>,
}

/// What a header says of an entry's sector masks (read with the ring).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MaskInfo {
    crc: u32,
    members: usize,
}

/// The standard CRC-32C of `b` (every checksum of the log's records).
#[must_use]
pub fn crc32c(b: &[u8]) -> u32 {
    // crc-fast gives a CRC of any width in a u64; this one's 32 bits are the low ones.
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, b) as u32
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl LogHeader {
    /// The whole generation: the header, then each entry's block (`blocks`, in entry order)
    /// and sector masks.
    #[must_use]
    pub fn encode_generation(&self, blocks: &[Option<Vec<u8>>]) -> Vec<u8> {
        let mut out = vec![0u8; usize::try_from(self.sectors()).expect("fits") * 512];
        self.encode_generation_into(blocks, &mut out);
        out
    }

    /// `encode_generation` into `out`, `sectors()` long and of any contents (every byte is
    /// written: the header's sectors are zeroed, blocks and padded masks fill the rest): the
    /// engine encodes straight into the log write's buffer, used again, with no allocation,
    /// copy or zeroing of the whole generation first.
    pub fn encode_generation_into(&self, blocks: &[Option<Vec<u8>>], out: &mut [u8]) {
        let mut at = header_sectors(self.entries.len()) as usize * 512;
        let masks = self.mask_areas();
        out[..at].fill(0);
        self.encode_into(&mut out[..at], &masks);
        let unit_bytes = self.unit_sectors as usize * 512;
        for (b, mask) in blocks.iter().zip(&masks) {
            assert!(b.as_ref().is_none_or(|b| b.len() == unit_bytes), "a block is one unit");
            for part in [b.as_deref(), mask.as_deref()].into_iter().flatten() {
                out[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
        }
        assert_eq!(at, out.len(), "sectors() is what the generation takes");
    }

    /// The header (`header_sectors` of its entries), checksummed.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; header_sectors(self.entries.len()) as usize * 512];
        self.encode_into(&mut b, &self.mask_areas());
        b
    }

    /// Each entry's mask area (`LogEntry::mask_area`), in entry order.
    fn mask_areas(&self) -> Vec<Option<Vec<u8>>> {
        self.entries.iter().map(|e| e.mask_area(u64::from(self.unit_sectors))).collect()
    }

    /// `encode` into `b`, zeroed and `header_sectors` long, with the entries' `masks`.
    fn encode_into(&self, b: &mut [u8], masks: &[Option<Vec<u8>>]) {
        assert!(self.entries.len() <= MAX_LOG_ENTRIES, "a header holds {MAX_LOG_ENTRIES}");
        b[0..8].copy_from_slice(&LOG_MAGIC);
        b[8..12].copy_from_slice(&LOG_VERSION.to_le_bytes());
        b[16..32].copy_from_slice(&self.uuid);
        b[32..40].copy_from_slice(&self.epoch.to_le_bytes());
        b[40..48].copy_from_slice(&self.generation.to_le_bytes());
        b[48..56].copy_from_slice(&self.tail.to_le_bytes());
        b[56..60].copy_from_slice(&self.unit_sectors.to_le_bytes());
        b[60..64].copy_from_slice(&(self.entries.len() as u32).to_le_bytes());
        b[64..96].copy_from_slice(&self.members);
        for (i, (e, masks)) in self.entries.iter().zip(masks).enumerate() {
            let at = ENTRIES_AT + i * ENTRY_BYTES;
            let flags = u32::from(e.parity == LogParity::Q)
                | if e.block_crc.is_some() { FLAG_BLOCK } else { 0 }
                | if masks.is_some() { FLAG_MASKS } else { 0 }
                | if e.span > 1 { FLAG_RANGE } else { 0 };
            b[at..at + 8].copy_from_slice(&e.member_sector.to_le_bytes());
            b[at + 8..at + 12].copy_from_slice(&flags.to_le_bytes());
            b[at + 12..at + 16].copy_from_slice(&e.block_crc.unwrap_or(0).to_le_bytes());
            for (m, _) in &e.modified {
                b[at + 16 + m / 8] |= 1 << (m % 8);
            }
            let mask_crc = masks.as_deref().map_or(0, crc32c);
            b[at + 48..at + 52].copy_from_slice(&mask_crc.to_le_bytes());
            if e.span > 1 {
                b[at + 52..at + 56].copy_from_slice(&e.span.to_le_bytes());
            }
        }
        let crc = crc32c(b);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
    }

    /// A header, or None for anything else (no magic, another version, a torn or stale
    /// write: the checksum fails). Entries with sector masks come back with full masks: the
    /// masks are read from the ring after the blocks (`scan_ring`).
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<LogHeader> {
        Self::decode_with_masks(b).map(|(h, _, _)| h)
    }

    /// The header, what it says of its entries' sector masks, and its length in bytes.
    fn decode_with_masks(b: &[u8]) -> Option<(LogHeader, Vec<Option<MaskInfo>>, usize)> {
        if b.len() < 512
            || b[0..8] != LOG_MAGIC
            || !(OLDEST_LOG_VERSION..=LOG_VERSION).contains(&u32_at(b, 8))
        {
            return None;
        }
        // The count is read before the checksum is known to hold: bounded first, it only
        // says how many sectors the checksum covers.
        let count = u32_at(b, 60) as usize;
        if count > MAX_LOG_ENTRIES {
            return None;
        }
        let len =
            if u32_at(b, 8) >= 4 { header_sectors(count) as usize * 512 } else { LOG_HEADER_BYTES };
        if b.len() < len {
            return None;
        }
        let mut copy = b[..len].to_vec();
        copy[12..16].fill(0);
        if crc32c(&copy) != u32_at(b, 12) {
            return None;
        }
        let unit_sectors = u32_at(b, 56);
        if unit_sectors < 8 || !unit_sectors.is_power_of_two() {
            return None;
        }
        let mut masks = Vec::with_capacity(count);
        let entries = (0..count)
            .map(|i| {
                let at = ENTRIES_AT + i * ENTRY_BYTES;
                let flags = u32_at(b, at + 8);
                let modified: Vec<(usize, SectorMask)> = (0..256)
                    .filter(|m| b[at + 16 + m / 8] & (1 << (m % 8)) != 0)
                    .map(|m| (m, full_mask(u64::from(unit_sectors))))
                    .collect();
                masks.push(
                    (flags & FLAG_MASKS != 0)
                        .then(|| MaskInfo { crc: u32_at(b, at + 48), members: modified.len() }),
                );
                LogEntry {
                    member_sector: u64_at(b, at),
                    parity: if flags & FLAG_Q != 0 { LogParity::Q } else { LogParity::P },
                    modified,
                    block_crc: (flags & FLAG_BLOCK != 0).then(|| u32_at(b, at + 12)),
                    span: if flags & FLAG_RANGE != 0 { u32_at(b, at + 52) } else { 1 },
                }
            })
            .collect::<Vec<LogEntry>>();
        // A range is block-less; a span of 0 is nobody's.
        if entries.iter().any(|e| e.span == 0 || (e.span > 1 && e.block_crc.is_some())) {
            return None;
        }
        let header = LogHeader {
            uuid: b[16..32].try_into().expect("16 bytes"),
            epoch: u64_at(b, 32),
            generation: u64_at(b, 40),
            tail: u64_at(b, 48),
            unit_sectors,
            members: b[64..96].try_into().expect("32 bytes"),
            entries,
        };
        Some((header, masks, len))
    }

    /// Sectors the generation occupies as this version writes it: the header, its blocks
    /// and sector masks.
    #[must_use]
    pub fn sectors(&self) -> u64 {
        let unit = u64::from(self.unit_sectors);
        header_sectors(self.entries.len())
            + self.entries.iter().map(|e| e.stored_sectors(unit)).sum::<u64>()
    }
}

/// An entry found in a member's log, with its block (if it has one and the block's checksum
/// holds).
#[derive(Clone, Debug)]
pub struct FoundEntry {
    pub epoch: u64,
    pub generation: u64,
    pub unit_sectors: u64,
    pub member: DiskIndex,
    pub entry: LogEntry,
    pub block: Option<Vec<u8>>,
}

impl FoundEntry {
    /// The member whose parity block the entry mends (any member's ring may hold an entry:
    /// see `uraid_core::array`'s log placement).
    #[must_use]
    pub fn parity_member(&self, map: &StripeMap) -> Option<DiskIndex> {
        match self.entry.parity {
            LogParity::P => map.p_disk,
            LogParity::Q => map.q_disk,
        }
    }
}

/// What one member's ring holds.
#[derive(Clone, Debug)]
pub struct RingScan {
    pub member: DiskIndex,
    pub entries: Vec<FoundEntry>,
    /// Every header found: (epoch, generation, tail, members written).
    pub headers: Vec<(u64, u64, u64, [u8; 32])>,
}

/// Reads one member's log ring (`ring`: its bytes): its headers, and their entries with
/// blocks. The ring is circular (a generation goes back to its start when it does not fit
/// before the end, over retired ones), so there is no first header to walk from: a header is
/// looked for at every sector. Older generations found intact are retired (below the tail),
/// and a live one is never overwritten. A block that only looks like a header needs this
/// array's UUID and a valid checksum (as the blocks after the end of a walk would, before).
#[must_use]
pub fn scan_ring(ring: &[u8], uuid: [u8; 16], member: DiskIndex) -> RingScan {
    let mut scan = RingScan { member, entries: Vec::new(), headers: Vec::new() };
    for (at, h, masks, len) in ring_headers(ring, uuid) {
        let unit = h.unit_sectors as usize * 512;
        let mut block_at = at + len;
        for (e, mask) in h.entries.iter().zip(masks) {
            let mut block = match e.block_crc {
                Some(crc) if block_at + unit <= ring.len() => {
                    let b = &ring[block_at..block_at + unit];
                    block_at += unit;
                    (crc32c(b) == crc).then(|| b.to_vec())
                }
                Some(_) => None,
                None => Some(Vec::new()),
            };
            let mut entry = e.clone();
            if let Some(info) = mask {
                let per = h.unit_sectors as usize / 8;
                let len = (info.members * per).next_multiple_of(512);
                let area = ring.get(block_at..block_at + len);
                block_at += len;
                match area.filter(|a| crc32c(a) == info.crc) {
                    Some(area) => {
                        for (i, (_, m)) in entry.modified.iter_mut().enumerate() {
                            let bytes = &area[i * per..(i + 1) * per];
                            m.fill(0);
                            for (s, byte) in bytes.iter().enumerate() {
                                m[s / 8] |= u64::from(*byte) << ((s % 8) * 8);
                            }
                        }
                    }
                    None => block = None, // torn: as a torn block
                }
            }
            let (epoch, generation) = (h.epoch, h.generation);
            let unit_sectors = u64::from(h.unit_sectors);
            scan.entries.push(FoundEntry { epoch, generation, unit_sectors, member, entry, block });
        }
        scan.headers.push((h.epoch, h.generation, h.tail, h.members));
    }
    scan
}

/// The sectors of `ring` that begin with the log's magic (byte offsets, ascending): what a
/// clean stop or a replay zeroes, so that nothing on the ring is taken for a log to replay.
/// Not only the headers found whole: a header torn by a power cut may be made whole again
/// by zeroing a block it overlaps (an empty header is mostly zeros: simulator seed 2944),
/// and without its first sector no header can be.
#[must_use]
pub fn magic_sectors(ring: &[u8]) -> Vec<usize> {
    (0..ring.len() / 512 * 512).step_by(512).filter(|&at| ring[at..at + 8] == LOG_MAGIC).collect()
}

/// The headers of array `uuid` on `ring`, at any sector (see `scan_ring`): the sectors that
/// begin with the magic and decode whole (a header cut off by the ring's end does not).
fn ring_headers(
    ring: &[u8],
    uuid: [u8; 16],
) -> impl Iterator<Item = (usize, LogHeader, Vec<Option<MaskInfo>>, usize)> + '_ {
    magic_sectors(ring).into_iter().filter_map(move |at| {
        let (h, masks, len) =
            LogHeader::decode_with_masks(&ring[at..]).filter(|(h, _, _)| h.uuid == uuid)?;
        Some((at, h, masks, len))
    })
}

/// From the scans of the members present: the entries to replay. Only the newest epoch's
/// generations at or above its newest tail count (older ones are retired), and only complete
/// ones: a generation some present member it was written to does not hold (or holds torn)
/// never let its writes start. Per stripe head, the newest such generation is replayed, all
/// its entries (P's and Q's together: from different generations they would disagree about a
/// lost block). Ranges are left to `heads_to_resync`.
#[must_use]
pub fn entries_to_replay(scans: &[RingScan]) -> Vec<FoundEntry> {
    let live = LiveEntries::new(scans);
    // A block-less entry for a write that did not cover its stripe is the engine's "could
    // not log this one" (see uraid-core's array::ppl): the head is left as it is.
    let unprotected = |e: &FoundEntry| {
        e.entry.block_crc.is_none()
            && !e.entry.modified.iter().all(|(_, m)| is_full(m, e.unit_sectors))
    };
    // One entry may be on two or three rings (copies on idle members, `placement`): once.
    let mut seen = std::collections::HashSet::new();
    live.entries
        .iter()
        .filter(|e| e.entry.span == 1 && live.newest(e.entry.member_sector) == Some(e.generation))
        .filter(|e| !unprotected(e))
        .filter(|e| seen.insert((e.generation, e.entry.member_sector, e.entry.parity)))
        .map(|e| (*e).clone())
        .collect()
}

/// The stripe heads (first member sector, sectors tall) that live ranges cover and no newer
/// entry does (nor an entry of the head's own in the range's generation: it is replayed),
/// ascending: each is resynced (`resynced_parity`). A range is on the rings of
/// its first head's P and Q members: wherever one is lost, the other holds it (RAID6), or
/// the array has no redundancy left to mend (RAID5).
#[must_use]
pub fn heads_to_resync(scans: &[RingScan]) -> Vec<(u64, u64)> {
    let live = LiveEntries::new(scans);
    let mut heads = std::collections::BTreeSet::new();
    for e in live.entries.iter().filter(|e| e.entry.span > 1) {
        for sector in range_heads(e) {
            let own = live.own.get(&sector).is_some_and(|g| *g >= e.generation);
            if live.newest(sector) == Some(e.generation) && !own {
                heads.insert((sector, e.unit_sectors));
            }
        }
    }
    heads.into_iter().collect()
}

/// `heads_to_resync` of every ring of a run (`rings`: per ring, its scans; one ring per
/// engine), leaving out heads with a live entry of their own on another ring. An engine
/// serves every n-th stripe (the runtime's workers), and its stream's range runs over the
/// stripes between, which the other engines serve: a range says nothing of those, and their
/// own entries (whose generations cannot be compared with another ring's) are what mends
/// them. Heads nobody wrote in such a range are consistent, so its resync writes nothing.
#[must_use]
pub fn heads_to_resync_of_rings(rings: &[Vec<RingScan>]) -> Vec<(u64, u64)> {
    let own: Vec<std::collections::HashSet<u64>> = rings
        .iter()
        .map(|scans| entries_to_replay(scans).iter().map(|e| e.entry.member_sector).collect())
        .collect();
    let mut heads = std::collections::BTreeSet::new();
    for (r, scans) in rings.iter().enumerate() {
        let elsewhere =
            |sector: u64| own.iter().enumerate().any(|(o, set)| o != r && set.contains(&sector));
        heads.extend(heads_to_resync(scans).into_iter().filter(|(s, _)| !elsewhere(*s)));
    }
    heads.into_iter().collect()
}

fn range_heads(e: &FoundEntry) -> impl Iterator<Item = u64> + '_ {
    (0..u64::from(e.entry.span)).map(|i| e.entry.member_sector + i * e.unit_sectors)
}

/// The entries of the newest epoch's complete generations at or above its tail, and per
/// stripe head the newest generation among them.
struct LiveEntries<'a> {
    entries: Vec<&'a FoundEntry>,
    newest: std::collections::HashMap<u64, u64>,
    /// Per head, the newest generation of an entry of its own (not a range).
    own: std::collections::HashMap<u64, u64>,
}

impl<'a> LiveEntries<'a> {
    fn new(scans: &'a [RingScan]) -> Self {
        use std::collections::{BTreeMap, BTreeSet, HashMap};
        let newest = scans
            .iter()
            .flat_map(|s| &s.headers)
            .map(|h| (h.0, h.1, h.2))
            .max()
            .map_or((0, 0), |(epoch, _, tail)| (epoch, tail));
        let present: BTreeSet<usize> = scans.iter().map(|s| s.member.get()).collect();
        let held: BTreeSet<(usize, u64, u64)> = scans
            .iter()
            .flat_map(|s| s.headers.iter().map(|h| (s.member.get(), h.0, h.1)))
            .collect();
        let mut written: BTreeMap<(u64, u64), [u8; 32]> = BTreeMap::new();
        for h in scans.iter().flat_map(|s| &s.headers) {
            written.insert((h.0, h.1), h.3);
        }
        let complete = |epoch: u64, generation: u64| {
            let mask = written.get(&(epoch, generation)).copied().unwrap_or([0; 32]);
            (0..256)
                .filter(|m| mask[m / 8] & (1 << (m % 8)) != 0)
                .all(|m| !present.contains(&m) || held.contains(&(m, epoch, generation)))
        };
        let torn: BTreeSet<(u64, u64)> = scans
            .iter()
            .flat_map(|s| &s.entries)
            .filter(|e| e.block.is_none())
            .map(|e| (e.epoch, e.generation))
            .collect();
        let entries: Vec<&FoundEntry> = scans
            .iter()
            .flat_map(|s| &s.entries)
            .filter(|e| {
                e.epoch == newest.0
                    && e.generation >= newest.1
                    && !torn.contains(&(e.epoch, e.generation))
                    && complete(e.epoch, e.generation)
            })
            .collect();
        let mut by_head: HashMap<u64, u64> = HashMap::new();
        let mut own: HashMap<u64, u64> = HashMap::new();
        for e in &entries {
            for sector in range_heads(e) {
                let g = by_head.entry(sector).or_insert(e.generation);
                *g = (*g).max(e.generation);
            }
            if e.entry.span == 1 {
                let g = own.entry(e.entry.member_sector).or_insert(e.generation);
                *g = (*g).max(e.generation);
            }
        }
        LiveEntries { entries, newest: by_head, own }
    }

    fn newest(&self, sector: u64) -> Option<u64> {
        self.newest.get(&sector).copied()
    }
}

/// A range's stripe head at a replay (`blocks`: per member, None where lost or unreadable):
/// the parity blocks to write, by member. Every member there: P (and Q) from the data. A
/// data member lost (RAID6, one): its block is rebuilt from P, which is trusted (right if
/// nobody wrote the head, and the head is consistent either way), and Q recomputed. A parity
/// member lost: the other one from the data. As many lost as the level survives: nothing
/// to mend.
#[must_use]
pub fn resynced_parity(
    level: Level,
    map: &StripeMap,
    blocks: &[Option<&[u8]>],
) -> Vec<(DiskIndex, Vec<u8>)> {
    let mut lost: Vec<bool> = blocks.iter().map(Option::is_none).collect();
    if lost.iter().filter(|l| **l).count() >= usize::from(level.max_degraded()) {
        return Vec::new();
    }
    let Some(unit) = blocks.iter().flatten().map(|b| b.len()).next() else { return Vec::new() };
    let data_lost = map.data_disk.iter().any(|d| lost[d.get()]);
    let targets: Vec<DiskIndex> =
        if data_lost { vec![map.q_disk] } else { vec![map.p_disk, map.q_disk] }
            .into_iter()
            .flatten()
            .filter(|d| !lost[d.get()])
            .collect();
    for t in &targets {
        lost[t.get()] = true;
    }
    let mut bufs: Vec<Vec<u8>> =
        blocks.iter().map(|b| b.map_or_else(|| vec![0; unit], <[u8]>::to_vec)).collect();
    let mut refs: Vec<&mut [u8]> = bufs.iter_mut().map(Vec::as_mut_slice).collect();
    crate::reconstruct::reconstruct(level, map, &mut refs, &lost).expect("within redundancy");
    targets.into_iter().map(|t| (t, std::mem::take(&mut bufs[t.get()]))).collect()
}

/// The parity block an entry restores: its partial parity plus the modified sectors of the
/// data blocks as the members hold them now (`data`: per member, None where the member is
/// lost or unreadable). Lost modified sectors count as zeros: they were being written, and the
/// stripe is consistent with them reading so; every other sector of a lost block is in the
/// partial parity and reads back right. `syndrome_slot(m)` gives a data member's Q
/// coefficient exponent. A block-less entry (every data block modified) starts from zeros.
#[must_use]
pub fn replayed_parity(
    entry: &LogEntry,
    partial: &[u8],
    unit_bytes: usize,
    data: &[Option<&[u8]>],
    syndrome_slot: impl Fn(usize) -> usize,
) -> Vec<u8> {
    let mut out = if partial.is_empty() { vec![0u8; unit_bytes] } else { partial.to_vec() };
    for (m, mask) in &entry.modified {
        let Some(block) = data.get(*m).copied().flatten() else { continue };
        for (s, (o, b)) in out.chunks_mut(512).zip(block.chunks(512)).enumerate() {
            if !mask_has(mask, s) {
                continue;
            }
            match entry.parity {
                LogParity::P => uraid_parity::xor_acc(o, &[b]),
                LogParity::Q => {
                    let c = uraid_parity::gf::exp2(syndrome_slot(*m));
                    uraid_parity::mul_const_acc(o, b, c);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The crate's folding paths (by length and alignment) give the standard CRC-32C, as a
        /// bit-at-a-time loop computes it (0x82f63b78, init and final xor all ones).
        #[test]
        fn crc32c_is_the_standard_one(data in proptest::collection::vec(0u8..=255, 0..20_000), skip in 0usize..64) {
            let b = &data[skip.min(data.len())..];
            let mut crc = u32::MAX;
            for &byte in b {
                crc ^= u32::from(byte);
                for _ in 0..8 {
                    crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
                }
            }
            proptest::prop_assert_eq!(crc32c(b), !crc);
        }
    }

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    fn header(generation: u64, tail: u64, entries: Vec<LogEntry>) -> LogHeader {
        let mut members = [0; 32];
        members[0] = 0b1_1000; // members 3 and 4
        LogHeader { uuid: [7; 16], epoch: 3, generation, tail, unit_sectors: 8, members, entries }
    }

    fn entry(sector: u64, parity: LogParity, members: &[usize], block: &[u8]) -> LogEntry {
        let mut e = LogEntry {
            member_sector: sector,
            parity,
            modified: Vec::new(),
            block_crc: (!block.is_empty()).then(|| crc32c(block)),
            span: 1,
        };
        for &m in members {
            e.add(m, 0, 8, 8);
        }
        e
    }

    #[test]
    fn is_full_agrees_with_full_mask() {
        for unit in [1u64, 8, 63, 64, 65, 128, 256] {
            let full = full_mask(unit);
            assert!(is_full(&full, unit), "{unit} sectors");
            for s in [0, unit as usize - 1] {
                let mut m = full.clone();
                m[s / 64] &= !(1 << (s % 64));
                assert!(!is_full(&m, unit), "{unit} sectors without sector {s}");
            }
            let mut longer = full.clone();
            longer.push(0);
            assert!(!is_full(&longer, unit));
        }
    }

    /// Every range of a 256-sector block (four words), over masks with bits already set:
    /// the same bits as setting them one at a time.
    #[test]
    fn set_sectors_sets_exactly_the_range() {
        let before = [0x8000_0000_0000_0001u64, 0, u64::MAX << 60, 0x10];
        for first in 0..256u64 {
            for sectors in 0..=256 - first {
                let mut m = before;
                set_sectors(&mut m, first, sectors);
                let mut want = before;
                for s in first..first + sectors {
                    want[(s / 64) as usize] |= 1 << (s % 64);
                }
                assert_eq!(m, want, "sectors [{first}, +{sectors})");
            }
        }
    }

    #[test]
    fn sector_masks_round_trip_through_a_ring() {
        let block = vec![5u8; 4096];
        let mut e = entry(16, LogParity::P, &[2], &block);
        e.add(4, 1, 3, 8);
        let h = header(2, 2, vec![e.clone()]);
        let mut ring = h.encode_generation(&[Some(block.clone())]);
        assert_eq!(ring.len() as u64, h.sectors() * 512);
        ring.resize(ring.len() + 4096, 0);
        let found = scan_ring(&ring, [7; 16], DiskIndex(0)).entries;
        assert_eq!(found[0].entry, e);
        assert_eq!(found[0].entry.mask(4), Some(&[0b1110u64][..]));
        assert_eq!(found[0].block.as_deref(), Some(&block[..]));
    }

    #[test]
    fn headers_round_trip_and_reject_damage() {
        let h = header(9, 4, vec![entry(64, LogParity::Q, &[0, 255], &[1; 4096])]);
        let b = h.encode();
        assert_eq!(LogHeader::decode(&b), Some(h.clone()));
        assert_eq!((b.len(), h.sectors()), (512, 9), "one sector of header, then the block");
        for at in [0, 13, 40, 100, 511] {
            let mut bad = b.clone();
            bad[at] ^= 1;
            assert_eq!(LogHeader::decode(&bad), None, "a flip at byte {at}");
        }
        assert_eq!(LogHeader::decode(&[0u8; 4096]), None);
        assert_eq!(LogHeader::decode(&b[..511]), None, "cut off by the ring's end");
        // Seven entries take two sectors, and the checksum covers both: a header whose first
        // sector landed over an older second one (a torn write) is refused.
        let seven: Vec<LogEntry> =
            (0..7).map(|i| entry(8 * i, LogParity::P, &[1], &[1; 4096])).collect();
        let h7 = header(9, 4, seven);
        let b7 = h7.encode();
        assert_eq!(b7.len(), 1024);
        assert_eq!(LogHeader::decode(&b7), Some(h7.clone()));
        let mut torn = b7.clone();
        torn[512..].copy_from_slice(&[0x5a; 512]);
        assert_eq!(LogHeader::decode(&torn), None);
        assert_eq!(LogHeader::decode(&b7[..1023]), None);
        let most = header(9, 4, vec![entry(0, LogParity::P, &[1], &[]); MAX_LOG_ENTRIES]);
        assert_eq!(most.encode().len(), LOG_HEADER_BYTES, "the largest header");
    }

    /// A version 3 log (a 4 KiB header whatever it holds) is still read: its block is found
    /// 4 KiB after the header.
    #[test]
    fn a_version_3_header_is_read_with_its_4k() {
        let block = vec![6u8; 4096];
        let h = header(5, 5, vec![entry(8, LogParity::P, &[1], &block)]);
        let mut old = vec![0u8; LOG_HEADER_BYTES];
        old[..512].copy_from_slice(&h.encode());
        old[8..12].copy_from_slice(&3u32.to_le_bytes());
        old[12..16].fill(0);
        let crc = crc32c(&old);
        old[12..16].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(LogHeader::decode(&old), Some(h.clone()));
        let mut ring = old.clone();
        ring.extend_from_slice(&block);
        let found = scan_ring(&ring, [7; 16], DiskIndex(3)).entries;
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].block.as_deref(), Some(&block[..]));
        // Read as version 4 (one sector of header), the same bytes would not hold.
        ring[8..12].copy_from_slice(&4u32.to_le_bytes());
        assert!(scan_ring(&ring, [7; 16], DiskIndex(3)).entries.is_empty());
    }

    #[test]
    fn the_newest_live_entry_per_head_is_replayed() {
        let (a, b) = (vec![1u8; 4096], vec![2u8; 4096]);
        let mut ring =
            header(5, 5, vec![entry(0, LogParity::P, &[1], &a)]).encode_generation(&[Some(a)]);
        ring.extend(
            header(6, 5, vec![entry(0, LogParity::P, &[1, 2], &b)])
                .encode_generation(&[Some(b.clone())]),
        );
        ring.extend(header(7, 5, vec![entry(8, LogParity::P, &[2], &b)]).encode());
        ring.extend_from_slice(&[9u8; 4096]); // torn: its block never landed
        ring.resize(ring.len() + 8192, 0);
        let scan = scan_ring(&ring, [7; 16], DiskIndex(3));
        assert_eq!(scan.headers.len(), 3);
        // Member 4 is gone: its share of each generation cannot be checked.
        let live = entries_to_replay(std::slice::from_ref(&scan));
        assert_eq!(live.len(), 1, "{live:?}");
        assert_eq!(live[0].generation, 6);
        assert_eq!(live[0].block.as_deref(), Some(&b[..]));
        // Member 4 is present and lacks generations 5 and 6: they never completed, and their
        // writes never started.
        let other = header(4, 4, Vec::new()).encode();
        let scans = [scan.clone(), scan_ring(&other, [7; 16], DiskIndex(4))];
        assert!(entries_to_replay(&scans).is_empty());
        // A newer tail on another member retires them all.
        let other = header(8, 8, Vec::new()).encode();
        let scans = [scan, scan_ring(&other, [7; 16], DiskIndex(4))];
        assert!(entries_to_replay(&scans).is_empty());
        assert!(scan_ring(&ring, [8; 16], DiskIndex(3)).entries.is_empty(), "another array's log");
    }

    /// A wrapped ring: generation 8 went back to the start over a retired one (4);
    /// generations 6 and 7 lie after it, live, 7 at a sector that is not 4 KiB aligned (6's
    /// sector masks end on a sector). Every one is found, wherever it is; a retired header
    /// left whole is found and stays retired.
    #[test]
    fn a_wrapped_ring_is_read_wherever_its_generations_are() {
        let (a, b) = (vec![1u8; 4096], vec![2u8; 4096]);
        let mut partial = entry(0, LogParity::P, &[1], &a);
        partial.add(2, 1, 2, 8); // sector masks: the generation ends on a sector, not 4 KiB
        let mut ring = vec![0u8; 64 * 512];
        let old = header(4, 4, vec![entry(24, LogParity::P, &[1], &a)]);
        let old = old.encode_generation(&[Some(a.clone())]);
        ring[..old.len()].copy_from_slice(&old);
        let g6 = header(6, 5, vec![partial.clone()]).encode_generation(&[Some(a.clone())]);
        let g7 = header(7, 5, vec![entry(8, LogParity::P, &[2], &b)])
            .encode_generation(&[Some(b.clone())]);
        let g6_at = 20 * 512;
        ring[g6_at..g6_at + g6.len()].copy_from_slice(&g6);
        let g7_at = g6_at + g6.len();
        assert_ne!(g7_at % 4096, 0);
        ring[g7_at..g7_at + g7.len()].copy_from_slice(&g7);
        // Generation 8 overwrites the start (generation 4's header only, here).
        let g8 = header(8, 5, vec![entry(16, LogParity::P, &[1], &[])]).encode();
        ring[..g8.len()].copy_from_slice(&g8);
        let scan = scan_ring(&ring, [7; 16], DiskIndex(3));
        let mut gens: Vec<u64> = scan.headers.iter().map(|h| h.1).collect();
        gens.sort_unstable();
        assert_eq!(gens, vec![6, 7, 8]);
        let mut live: Vec<(u64, u64)> = entries_to_replay(std::slice::from_ref(&scan))
            .iter()
            .map(|e| (e.generation, e.entry.member_sector))
            .collect();
        live.sort_unstable();
        assert_eq!(live, vec![(6, 0), (7, 8), (8, 16)]);
        // A whole retired header elsewhere is found, and stays retired.
        ring[56 * 512..57 * 512].copy_from_slice(&header(3, 3, Vec::new()).encode());
        let scan = scan_ring(&ring, [7; 16], DiskIndex(3));
        assert_eq!(scan.headers.len(), 4);
        assert_eq!(entries_to_replay(std::slice::from_ref(&scan)).len(), 3);
        // What a clean stop zeroes: the first sector of each header.
        let magic = magic_sectors(&ring);
        assert_eq!(magic, vec![0, g6_at, g7_at, 56 * 512]);
        for at in magic {
            ring[at..at + 512].fill(0);
        }
        assert!(scan_ring(&ring, [7; 16], DiskIndex(3)).headers.is_empty());
    }

    fn range(sector: u64, span: u32) -> LogEntry {
        LogEntry { span, ..entry(sector, LogParity::P, &[0, 1, 2], &[]) }
    }

    #[test]
    fn a_range_round_trips_and_yields_to_newer_entries() {
        let h = header(5, 5, vec![range(16, 4)]);
        assert_eq!(LogHeader::decode(&h.encode()), Some(h.clone()));
        assert_eq!(h.sectors(), 1, "a range is block-less");
        let mut bad = h.encode();
        bad[96 + 52..96 + 56].fill(0); // a span of 0
        let crc = {
            let mut c = bad.clone();
            c[12..16].fill(0);
            crc32c(&c)
        };
        bad[12..16].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(LogHeader::decode(&bad), None);
        // Generation 4: an entry for head 32 (older than the range: the range wins there);
        // generation 6: one for head 24 (newer: it is replayed, and the range skips it).
        let block = vec![3u8; 4096];
        let mut ring = header(4, 4, vec![entry(32, LogParity::P, &[1], &block)])
            .encode_generation(&[Some(block.clone())]);
        // Generation 5 also holds an entry of head 40's own: it is replayed, not resynced.
        let h5 = header(5, 5, vec![range(16, 4), entry(40, LogParity::P, &[1], &block)]);
        ring.extend(h5.encode_generation(&[None, Some(block.clone())]));
        ring.extend(
            header(6, 4, vec![entry(24, LogParity::P, &[1], &block)])
                .encode_generation(&[Some(block.clone())]),
        );
        ring.resize(ring.len() + 4096, 0);
        let scans = [scan_ring(&ring, [7; 16], DiskIndex(3))];
        let entries: Vec<(u64, u64)> = entries_to_replay(&scans)
            .iter()
            .map(|e| (e.entry.member_sector, e.generation))
            .collect();
        assert_eq!(entries, vec![(40, 5), (24, 6)]);
        assert_eq!(heads_to_resync(&scans), vec![(16, 8), (32, 8)]);
    }

    #[test]
    fn a_range_leaves_out_heads_with_an_entry_on_another_ring() {
        // Ring 0: a range over heads 16-40 (an engine's stream, over the stripes between it
        // serves too). Ring 1: another engine's own entry for head 24, older by its count
        // than the range's generation (the rings' generations are not comparable).
        let block = vec![3u8; 4096];
        let mut ring0 = header(9, 9, vec![range(16, 4)]).encode_generation(&[None]);
        ring0.resize(ring0.len() + 4096, 0);
        let mut ring1 = header(2, 2, vec![entry(24, LogParity::P, &[1], &block)])
            .encode_generation(&[Some(block.clone())]);
        ring1.resize(ring1.len() + 4096, 0);
        let rings = vec![
            vec![scan_ring(&ring0, [7; 16], DiskIndex(3))],
            vec![scan_ring(&ring1, [7; 16], DiskIndex(3))],
        ];
        assert_eq!(heads_to_resync(&rings[0]), vec![(16, 8), (24, 8), (32, 8), (40, 8)]);
        let all = heads_to_resync_of_rings(&rings);
        assert_eq!(all, vec![(16, 8), (32, 8), (40, 8)], "head 24 is ring 1's to replay");
        assert_eq!(entries_to_replay(&rings[1]).len(), 1);
    }

    /// A RAID6 of 6 (4 data) at stripe 0, its blocks, and P and Q of `data`.
    fn raid6_stripe(data: &[Vec<u8>]) -> (crate::geometry::Geometry, Vec<Vec<u8>>) {
        let g =
            crate::geometry::Geometry::new(Level::Raid6, Level::Raid6.default_layout(), 6, 65536)
                .expect("valid");
        let map = g.stripe_map(crate::units::StripeNumber(0)).clone();
        let mut blocks = vec![vec![0u8; 512]; 6];
        for (slot, d) in map.data_disk.iter().enumerate() {
            blocks[d.get()].clone_from(&data[slot]);
        }
        let (mut p, mut q) = (vec![0u8; 512], vec![0u8; 512]);
        let syndrome: Vec<Option<&[u8]>> =
            map.syndrome.iter().map(|d| d.map(|d| &blocks[d.get()][..])).collect();
        uraid_parity::gen_syndrome(&mut p, &mut q, &syndrome);
        blocks[map.p_disk.expect("P").get()] = p;
        blocks[map.q_disk.expect("Q").get()] = q;
        (g, blocks)
    }

    #[test]
    fn resynced_parity_recomputes_when_all_are_there_and_trusts_p_where_one_is_lost() {
        let data: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i * 41 + 3; 512]).collect();
        let (g, good) = raid6_stripe(&data);
        let map = g.stripe_map(crate::units::StripeNumber(0));
        let (p, q) = (map.p_disk.expect("P").get(), map.q_disk.expect("Q").get());
        let d0 = map.data_disk[0].get();
        // Torn: data block 0 changed in place, P and Q not.
        let mut torn = good.clone();
        torn[d0] = vec![200u8; 512];
        let mut data2 = data.clone();
        data2[0] = vec![200u8; 512];
        let (_, want) = raid6_stripe(&data2);
        let all: Vec<Option<&[u8]>> = torn.iter().map(|b| Some(&b[..])).collect();
        let mut got = resynced_parity(Level::Raid6, map, &all);
        got.sort();
        let mut expected =
            vec![(DiskIndex(p as u16), want[p].clone()), (DiskIndex(q as u16), want[q].clone())];
        expected.sort();
        assert!(got == expected, "P and Q recomputed from the data as it is");
        // An untouched head with a data member lost: P is trusted, Q comes back as it was.
        let d1 = map.data_disk[1].get();
        let mut one_lost: Vec<Option<&[u8]>> = good.iter().map(|b| Some(&b[..])).collect();
        one_lost[d1] = None;
        assert_eq!(
            resynced_parity(Level::Raid6, map, &one_lost),
            vec![(DiskIndex(q as u16), good[q].clone())]
        );
        // Torn and a data member lost: Q is made consistent with P and the data there.
        let mut torn_lost: Vec<Option<&[u8]>> = torn.iter().map(|b| Some(&b[..])).collect();
        torn_lost[d1] = None;
        let new_q = resynced_parity(Level::Raid6, map, &torn_lost).remove(0).1;
        let mut rebuilt = torn.clone();
        rebuilt[q] = new_q;
        let mut lost = vec![false; 6];
        lost[d1] = true;
        lost[p] = true; // rebuilt from Q alone, d1 must agree with P's view
        let mut refs: Vec<&mut [u8]> = rebuilt.iter_mut().map(Vec::as_mut_slice).collect();
        crate::reconstruct::reconstruct(Level::Raid6, map, &mut refs, &lost).expect("two lost");
        assert_eq!(rebuilt[p], torn[p], "Q agrees with P about the lost block");
        // P lost: Q from the data; two lost: nothing to mend.
        let mut p_lost: Vec<Option<&[u8]>> = torn.iter().map(|b| Some(&b[..])).collect();
        p_lost[p] = None;
        assert_eq!(
            resynced_parity(Level::Raid6, map, &p_lost),
            vec![(DiskIndex(q as u16), want[q].clone())]
        );
        p_lost[d1] = None;
        assert!(resynced_parity(Level::Raid6, map, &p_lost).is_empty());
    }

    #[test]
    fn replayed_parity_makes_the_stripe_consistent() {
        // Data d0..d3; the write changed d1 and d2 (d2's new block reached its member, d1's
        // did not). Partial P and Q: over d0 and d3.
        let d: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i * 37 + 1; 512]).collect();
        let mut pp = vec![0u8; 512];
        let mut qq = vec![0u8; 512];
        for i in [0, 3] {
            uraid_parity::xor_acc(&mut pp, &[&d[i]]);
            uraid_parity::mul_const_acc(&mut qq, &d[i], uraid_parity::gf::exp2(i));
        }
        let now = [d[0].clone(), d[1].clone(), vec![99u8; 512], d[3].clone()];
        let data: Vec<Option<&[u8]>> = now.iter().map(|b| Some(&b[..])).collect();
        let mut p_entry = entry(0, LogParity::P, &[], &pp);
        p_entry.add(1, 0, 1, 8);
        p_entry.add(2, 0, 1, 8);
        let q_entry = LogEntry { parity: LogParity::Q, ..p_entry.clone() };
        let p = replayed_parity(&p_entry, &pp, 512, &data, |m| m);
        let q = replayed_parity(&q_entry, &qq, 512, &data, |m| m);
        let mut want_p = vec![0u8; 512];
        let mut want_q = vec![0u8; 512];
        let refs: Vec<Option<&[u8]>> = now.iter().map(|b| Some(&b[..])).collect();
        uraid_parity::gen_syndrome(&mut want_p, &mut want_q, &refs);
        assert_eq!((p, q), (want_p, want_q));
    }
}
