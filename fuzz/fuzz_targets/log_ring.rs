//! The partial parity log's rings as a replay reads them after a crash: headers found at any
//! sector (rings wrap), their entries, blocks and sector masks, then the choice of what to
//! replay and resync, and the parity a replay would write.
//!
//! Random bytes never carry a header's checksum, so the input builds generations with the
//! real encoder (fields, entries, masks and blocks from the fuzzer), places them anywhere on
//! up to four members' rings (overlapping, cut off at the ring's end), then damages bytes.
//! Invariants: no panic; every entry chosen for replay is from the newest run, at or above
//! its tail, with its block when it has one; zeroing the sectors `magic_sectors` names leaves
//! no header to find.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use uraid_core::DiskIndex;
use uraid_core::ppl::{
    LogEntry, LogHeader, LogParity, MAX_LOG_ENTRIES, entries_to_replay, heads_to_resync,
    magic_sectors, replayed_parity, scan_ring,
};

const UUID: [u8; 16] = [7; 16];

#[derive(Arbitrary, Debug)]
struct Entry {
    sector: u16,
    q: bool,
    span: u8,
    /// (member, first sector, sectors) written.
    modified: Vec<(u8, u8, u8)>,
    block: Option<u8>,
}

#[derive(Arbitrary, Debug)]
struct Generation {
    ring: u8,
    at_sector: u16,
    epoch: u8,
    generation: u8,
    tail: u8,
    /// Unit sectors: 8 << (this % 4).
    unit: u8,
    members: [u8; 4],
    other_array: bool,
    entries: Vec<Entry>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    ring_sectors: u16,
    generations: Vec<Generation>,
    /// (ring, byte, xor) damage after placing.
    flips: Vec<(u8, u16, u8)>,
}

fn encode(g: &Generation) -> Vec<u8> {
    let unit = 8u64 << (g.unit % 4);
    let mut entries = Vec::new();
    let mut blocks = Vec::new();
    for e in g.entries.iter().take(MAX_LOG_ENTRIES) {
        let mut entry = LogEntry {
            member_sector: u64::from(e.sector) * 8,
            parity: if e.q { LogParity::Q } else { LogParity::P },
            modified: Vec::new(),
            block_crc: None,
            span: u32::from(e.span.max(1)),
        };
        for &(m, first, sectors) in e.modified.iter().take(8) {
            let first = u64::from(first) % unit;
            let sectors = (u64::from(sectors) % (unit - first)).max(1);
            entry.add(usize::from(m % 16), first, sectors, unit);
        }
        let block = e.block.filter(|_| entry.span == 1).map(|b| vec![b; unit as usize * 512]);
        entry.block_crc = block.as_ref().map(|b| crc32c::crc32c(b));
        entries.push(entry);
        blocks.push(block);
    }
    let mut members = [0u8; 32];
    members[..4].copy_from_slice(&g.members);
    let header = LogHeader {
        uuid: if g.other_array { [8; 16] } else { UUID },
        epoch: u64::from(g.epoch % 4),
        generation: u64::from(g.generation),
        tail: u64::from(g.tail),
        unit_sectors: unit as u32,
        members,
        entries,
    };
    header.encode_generation(&blocks)
}

fuzz_target!(|input: Input| {
    let sectors = usize::from(input.ring_sectors % 512).max(8);
    let mut rings = vec![vec![0u8; sectors * 512]; 4];
    for g in input.generations.iter().take(16) {
        let bytes = encode(g);
        let ring = &mut rings[usize::from(g.ring % 4)];
        let at = (usize::from(g.at_sector) % sectors) * 512;
        let len = bytes.len().min(ring.len() - at);
        ring[at..at + len].copy_from_slice(&bytes[..len]);
    }
    for &(r, at, x) in &input.flips {
        let ring = &mut rings[usize::from(r % 4)];
        let at = usize::from(at) % ring.len();
        ring[at] ^= x;
    }
    let scans: Vec<_> =
        rings.iter().enumerate().map(|(m, r)| scan_ring(r, UUID, DiskIndex(m as u16))).collect();
    let newest = scans.iter().flat_map(|s| &s.headers).map(|h| (h.0, h.1, h.2)).max();
    for e in entries_to_replay(&scans) {
        let (epoch, _, tail) = newest.expect("an entry comes with a header");
        assert_eq!(e.epoch, epoch, "only the newest run's entries");
        assert!(e.generation >= tail, "nothing below the tail");
        assert!(e.block.is_some(), "a torn block is never replayed");
        let unit = (e.unit_sectors * 512) as usize;
        let data = vec![vec![3u8; unit]; 16];
        let data: Vec<Option<&[u8]>> = data.iter().map(|d| Some(&d[..])).collect();
        let block = e.block.as_deref().unwrap_or(&[]);
        let parity = replayed_parity(&e.entry, block, unit, &data, |m| m);
        assert_eq!(parity.len(), unit);
    }
    let _ = heads_to_resync(&scans);
    for ring in &mut rings {
        for at in magic_sectors(ring) {
            ring[at..at + 512].fill(0);
        }
        assert!(scan_ring(ring, UUID, DiskIndex(0)).headers.is_empty(), "cleared");
    }
});
