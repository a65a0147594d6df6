//! md's own on-disk logs on arbitrary bytes: the PPL area (`uraid_format::md_ppl`: the
//! header decoder, the chain to a member's newest log write, an entry's coverage) and the bad
//! block log (`uraid_format::decode_bad_blocks`).
//!
//! Byte 0 steers: bit 0 seals every 4 KiB header slot's checksum (random bytes never carry
//! one), bit 1 writes this array's signature into them, so that the chain and the entries are
//! reached. Invariants: no panic; a decoded header re-encodes and decodes to itself; the
//! chain's end is a valid header of the array and its partial parity lies inside the area; a
//! coverage md's rules accept has 1..=data_disks chunks, a non-empty strip, and every sector it
//! names is at or above its first and below its last; bad block ranges are non-empty, and
//! re-encoded (merged, as uraid writes them) decode to the same sectors.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uraid_format::{BadRange, decode_bad_blocks, encode_bad_blocks};
use uraid_format::md_ppl::{EntryCoverage, HEADER_BYTES, MdPplHeader, newest_in_chain, signature};

/// The array of the seeds (`corpus/md_logs/seed-ppl-*`: the kernel's PPL areas after a crash
/// in the VM, `crates/uraid-format/tests/md_ppl.rs`), so that their chains are followed.
const UUID: [u8; 16] =
    [226, 163, 170, 141, 191, 45, 10, 206, 109, 150, 216, 65, 102, 202, 26, 183];

fuzz_target!(|data: &[u8]| {
    let Some((&steer, rest)) = data.split_first() else { return };
    let sig = signature(&UUID);
    let mut area = rest.to_vec();
    for at in (0..area.len().saturating_sub(HEADER_BYTES - 1)).step_by(HEADER_BYTES) {
        let h = &mut area[at..at + HEADER_BYTES];
        if steer & 2 != 0 {
            h[512..516].copy_from_slice(&sig.to_le_bytes());
        }
        if steer & 1 != 0 {
            h[528] %= 8; // a few entries, not 2^32
            h[529..532].fill(0);
            h[532..536].fill(0);
            let crc = crc32c::crc32c(h);
            h[532..536].copy_from_slice(&crc.to_le_bytes());
        }
        if let Some(header) = MdPplHeader::decode(h) {
            assert_eq!(MdPplHeader::decode(&header.encode()), Some(header.clone()));
        }
    }
    if let Some((at, newest)) = newest_in_chain(&area, sig) {
        assert_eq!(newest.signature, sig);
        assert!(at + HEADER_BYTES <= area.len());
        let chunk = 8u64 << (steer >> 5); // 4 KiB .. 512 KiB
        let data_disks = u64::from(steer >> 2 & 7) + 1;
        for e in &newest.entries {
            let Some(c) = EntryCoverage::of(e, chunk, data_disks) else { continue };
            assert!((1..=data_disks).contains(&c.count) && c.strip > 0, "{c:?}");
            for i in (0..c.strip).take(64) {
                for r in c.sectors_at(i, chunk) {
                    assert!(r >= c.first && r < c.last, "{c:?}: {r}");
                }
            }
        }
    }
    let shift = steer & 7;
    if let Ok(bad) = decode_bad_blocks(rest, shift) {
        assert!(bad.iter().all(|r| r.sectors > 0));
        // What uraid writes back (merged and sorted, as its lists are) decodes to the same
        // sectors, in entries md accepts.
        let mut merged: Vec<BadRange> = Vec::new();
        let mut sorted = bad;
        sorted.sort_by_key(|r| r.start_sector);
        for r in sorted {
            match merged.last_mut() {
                Some(m) if r.start_sector <= m.start_sector + m.sectors => {
                    let end = (m.start_sector + m.sectors).max(r.start_sector + r.sectors);
                    m.sectors = end - m.start_sector;
                }
                _ => merged.push(r),
            }
        }
        if let Ok(log) = encode_bad_blocks(&merged, shift, 4096) {
            let back = decode_bad_blocks(&log, shift).expect("our own log decodes");
            let sectors = |v: &[BadRange]| v.iter().map(|r| r.sectors).sum::<u64>();
            assert_eq!(sectors(&back), sectors(&merged));
            assert_eq!(back.first().map(|r| r.start_sector), merged.first().map(|r| r.start_sector));
        }
    }
});
