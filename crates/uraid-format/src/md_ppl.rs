//! md's Partial Parity Log (PPL, RAID5 only; `mdadm --consistency-policy=ppl`) as a codec: the
//! records the kernel leaves in the PPL area of each member (superblock `ppl()`), so that an
//! array md ran with its PPL and crashed is replayed before uraid runs it (uraid-md), as md
//! would at its next start. Facts from md_p.h (`struct ppl_header`) and raid5-ppl.c, checked
//! against logs the kernel wrote (a crash under a VM's writes, `crates/uraid-cli/tests`).
//!
//! A log write is a 4 KiB header, then the partial parity of its entries in entry order.
//! Little endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..512 | reserved, 0xff |
//! | 512..516 | signature: crc32c of the array UUID's 16 bytes |
//! | 516..520 | padding, 0 |
//! | 520..528 | generation: orders the log writes of one member |
//! | 528..532 | entry count (at most [`MAX_ENTRIES`]) |
//! | 532..536 | crc32c of the 4 KiB header with this field zero |
//! | 536.. | entries, 24 bytes each |
//!
//! An entry: data_sector (u64; the array sector, in 512-byte units, of the first data the
//! logged writes changed), pp_size (u32, bytes of partial parity after the header; 0 for
//! full-stripe writes: the parity is recomputed from the data), data_size (u32, bytes of array
//! data the entry covers, in stripe order), parity_disk (u32, the member slot holding P), and
//! crc32c of the entry's partial parity. Every crc32c here is the standard CRC-32C (init and
//! final xor 0xffffffff), which is md's `~crc32c_le(~0, ...)`.
//!
//! With `feature::MULTIPLE_PPLS` the area is a ring of such log writes, each 4 KiB-aligned;
//! without, every write goes to the area's start. Either way md finds a member's newest one
//! by following headers from the area's start ([`newest_in_chain`]).

/// Bytes of a header.
pub const HEADER_BYTES: usize = 4096;
const RESERVED_BYTES: usize = 512;
const ENTRIES_AT: usize = RESERVED_BYTES + 24;
const ENTRY_BYTES: usize = 24;
/// Entries one header holds (md's PPL_HDR_MAX_ENTRIES).
pub const MAX_ENTRIES: usize = (HEADER_BYTES - ENTRIES_AT) / ENTRY_BYTES;

/// One logged write, as md describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MdPplEntry {
    /// Array sector (512 B) of the first data the write changed.
    pub data_sector: u64,
    /// Bytes of partial parity stored for the entry (0: none, a full-stripe write).
    pub pp_size: u32,
    /// Bytes of array data the entry covers.
    pub data_size: u32,
    /// Slot of the member holding the parity the entry mends.
    pub parity_disk: u32,
    /// crc32c of the entry's partial parity.
    pub checksum: u32,
}

/// A PPL header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MdPplHeader {
    pub signature: u32,
    pub generation: u64,
    pub entries: Vec<MdPplEntry>,
}

/// The standard CRC-32C (the checksum of every md PPL record).
#[must_use]
pub fn crc32c(b: &[u8]) -> u32 {
    // crc-fast gives a CRC of any width in a u64; this one's 32 bits are the low ones.
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, b) as u32
}

/// md's signature of an array: crc32c of its UUID.
#[must_use]
pub fn signature(uuid: &[u8; 16]) -> u32 {
    crc32c(uuid)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl MdPplHeader {
    /// The header in `b` (its first 4 KiB), or None: too short, a checksum that fails (torn,
    /// never written, or not a header), or more entries than a header holds.
    #[must_use]
    pub fn decode(b: &[u8]) -> Option<MdPplHeader> {
        let b = b.get(..HEADER_BYTES)?;
        let mut copy = b.to_vec();
        copy[RESERVED_BYTES + 20..RESERVED_BYTES + 24].fill(0);
        if crc32c(&copy) != u32_at(b, RESERVED_BYTES + 20) {
            return None;
        }
        let count = u32_at(b, RESERVED_BYTES + 16) as usize;
        if count > MAX_ENTRIES {
            return None;
        }
        let entries = (0..count)
            .map(|i| {
                let at = ENTRIES_AT + i * ENTRY_BYTES;
                MdPplEntry {
                    data_sector: u64_at(b, at),
                    pp_size: u32_at(b, at + 8),
                    data_size: u32_at(b, at + 12),
                    parity_disk: u32_at(b, at + 16),
                    checksum: u32_at(b, at + 20),
                }
            })
            .collect();
        Some(MdPplHeader {
            signature: u32_at(b, RESERVED_BYTES),
            generation: u64_at(b, RESERVED_BYTES + 8),
            entries,
        })
    }

    /// The 4 KiB header as md writes it, checksummed.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        assert!(self.entries.len() <= MAX_ENTRIES, "a header holds {MAX_ENTRIES} entries");
        let mut b = vec![0u8; HEADER_BYTES];
        b[..RESERVED_BYTES].fill(0xff);
        let put32 =
            |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put32(&mut b, RESERVED_BYTES, self.signature);
        b[RESERVED_BYTES + 8..RESERVED_BYTES + 16].copy_from_slice(&self.generation.to_le_bytes());
        put32(&mut b, RESERVED_BYTES + 16, self.entries.len() as u32);
        for (i, e) in self.entries.iter().enumerate() {
            let at = ENTRIES_AT + i * ENTRY_BYTES;
            b[at..at + 8].copy_from_slice(&e.data_sector.to_le_bytes());
            put32(&mut b, at + 8, e.pp_size);
            put32(&mut b, at + 12, e.data_size);
            put32(&mut b, at + 16, e.parity_disk);
            put32(&mut b, at + 20, e.checksum);
        }
        let crc = crc32c(&b);
        put32(&mut b, RESERVED_BYTES + 20, crc);
        b
    }

    /// Bytes of partial parity after the header.
    #[must_use]
    pub fn pp_bytes(&self) -> u64 {
        self.entries.iter().map(|e| u64::from(e.pp_size)).sum()
    }
}

/// A member's newest log write, as md finds it at a start: the chain of headers from the
/// area's start, each followed by its partial parity, while each is valid (checksum and this
/// array's `signature`) and no older than the one before; the last of the chain, with its byte
/// offset in `area` (the member's whole PPL area). None: the area's first header is not
/// valid (md counts that as a mismatch). The kernel zeroes the area at every start, and only
/// the newest write can describe stripe writes still under way (md submits a member's next
/// log write once the previous one's stripes are written), so the chain's end is all there is
/// to replay. (md, when the chain runs into the area's end, reads that header's partial
/// parity from the next offset instead; this reads it from the header's own.)
#[must_use]
pub fn newest_in_chain(area: &[u8], signature: u32) -> Option<(usize, MdPplHeader)> {
    let mut newest: Option<(usize, MdPplHeader)> = None;
    let mut at = 0usize;
    while at + HEADER_BYTES <= area.len() {
        let Some(h) = MdPplHeader::decode(&area[at..]).filter(|h| h.signature == signature) else {
            break;
        };
        if newest.as_ref().is_some_and(|(_, n)| n.generation > h.generation) {
            break;
        }
        let next =
            usize::try_from(h.pp_bytes()).ok().and_then(|pp| (at + HEADER_BYTES).checked_add(pp));
        newest = Some((at, h));
        match next {
            Some(next) => at = next,
            None => break,
        }
    }
    newest
}

/// The array sectors one entry covers, md's way (raid5-ppl.c's recovery): `data_disks`
/// consecutive data chunks (`count`) of `strip` sectors each from `first`, the sectors at or
/// beyond `last` excluded. An entry is m rows of n data chunks, all in one stripe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryCoverage {
    pub first: u64,
    pub count: u64,
    pub strip: u64,
    pub last: u64,
}

impl EntryCoverage {
    /// The coverage of `e` in an array of `data_disks` data members and `chunk_sectors`
    /// chunks, or None when its sizes make no such shape (not whole sectors, no data, more
    /// chunks than the stripe has): a log md would not write.
    #[must_use]
    pub fn of(e: &MdPplEntry, chunk_sectors: u64, data_disks: u64) -> Option<EntryCoverage> {
        let (pp, data) = (u64::from(e.pp_size), u64::from(e.data_size));
        if data == 0 || data % 512 != 0 || pp % 512 != 0 || chunk_sectors == 0 {
            return None;
        }
        let first = e.data_sector;
        let (count, strip) = if pp / 512 < chunk_sectors {
            if pp > 0 {
                (data.checked_div(pp).filter(|_| data % pp == 0)?, pp / 512)
            } else {
                (data_disks, (data / 512).checked_div(data_disks)?)
            }
        } else {
            (data_disks, chunk_sectors)
        };
        if count == 0 || count > data_disks || strip == 0 {
            return None;
        }
        // Checked: the fields are the log's, and a crafted one must not wrap around.
        let last = if pp / 512 < chunk_sectors {
            (count - 1).checked_mul(chunk_sectors)?.checked_add(strip)?.checked_add(first)?
        } else {
            first.checked_add(data / 512)?
        };
        Some(EntryCoverage { first, count, strip, last })
    }

    /// Per row offset `i` in `[0, strip)`: the array sectors of the entry's data there.
    pub fn sectors_at(&self, i: u64, chunk_sectors: u64) -> impl Iterator<Item = u64> + '_ {
        (0..self.count)
            .filter_map(move |d| {
                self.first.checked_add(i)?.checked_add(d.checked_mul(chunk_sectors)?)
            })
            .filter(|&r| r < self.last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_round_trips_and_a_flipped_bit_fails_its_checksum() {
        let h = MdPplHeader {
            signature: signature(&[7; 16]),
            generation: 912,
            entries: vec![MdPplEntry {
                data_sector: 90_360,
                pp_size: 4096,
                data_size: 4096,
                parity_disk: 0,
                checksum: 0x98f9_4189,
            }],
        };
        let mut b = h.encode();
        assert_eq!(MdPplHeader::decode(&b), Some(h.clone()));
        assert!(b[..512].iter().all(|&x| x == 0xff));
        b[600] ^= 1;
        assert_eq!(MdPplHeader::decode(&b), None);
        assert_eq!(MAX_ENTRIES, 148);
    }
}
