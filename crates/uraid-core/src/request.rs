//! Cutting an array request into the pieces the engine works on: per chunk (a healthy read goes
//! straight from the member into the caller's buffer, piece by piece) and per stripe head (the
//! `stripe_size` units that writes and degraded reads go through).
//!
//! Requests are in sectors; every piece says where it lies on its member and where in the
//! request's buffer, so no piece needs a copy to find its bytes.

use crate::geometry::{ChunkAddress, Geometry};
use crate::stripe::{Cover, StripeKey};
use crate::units::Sector;
use std::collections::BTreeMap;

/// The part of a request inside one chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkPiece {
    pub addr: ChunkAddress,
    pub sectors: u64,
    /// Sectors from the start of the request's buffer.
    pub buf_sector: u64,
}

/// Splits `sectors` sectors from array sector `start` at chunk boundaries, in array order.
pub fn split_by_chunk(
    g: &Geometry,
    start: Sector,
    sectors: u64,
) -> impl Iterator<Item = ChunkPiece> + '_ {
    let chunk = g.chunk_sectors();
    let mut done = 0;
    std::iter::from_fn(move || {
        if done == sectors {
            return None;
        }
        let at = start.0 + done;
        let in_chunk = (chunk - at % chunk).min(sectors - done);
        let piece =
            ChunkPiece { addr: g.map_sector(Sector(at)), sectors: in_chunk, buf_sector: done };
        done += in_chunk;
        Some(piece)
    })
}

/// The part of a request inside one member block of one stripe head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRange {
    pub data_slot: u16,
    /// Sectors from the start of the block (the unit).
    pub first: u64,
    pub sectors: u64,
    pub buf_sector: u64,
}

/// A request's work on one stripe head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadWork {
    pub key: StripeKey,
    /// In data slot order.
    pub blocks: Vec<BlockRange>,
}

impl HeadWork {
    /// How much of data slot `slot`'s block the request covers.
    #[must_use]
    pub fn cover(&self, slot: u16, unit_sectors: u64) -> Cover {
        match self.blocks.iter().find(|b| b.data_slot == slot) {
            None => Cover::None,
            Some(b) if b.sectors == unit_sectors => Cover::Full,
            Some(_) => Cover::Partial,
        }
    }
}

/// Groups a request's sectors by stripe head, `unit_sectors` (the array's stripe_size) per
/// member block, in key order.
#[must_use]
pub fn split_by_head(
    g: &Geometry,
    unit_sectors: u64,
    start: Sector,
    sectors: u64,
) -> Vec<HeadWork> {
    assert!(
        unit_sectors.is_power_of_two() && unit_sectors <= g.chunk_sectors(),
        "stripe_size is a power of two up to the chunk size"
    );
    let chunk = g.chunk_sectors();
    let mut heads: BTreeMap<StripeKey, Vec<BlockRange>> = BTreeMap::new();
    for piece in split_by_chunk(g, start, sectors) {
        let mut done = 0;
        while done < piece.sectors {
            let in_chunk = (piece.addr.member_sector.0 + done) % chunk;
            let unit = in_chunk / unit_sectors;
            let first = in_chunk % unit_sectors;
            let len = (unit_sectors - first).min(piece.sectors - done);
            let key = StripeKey {
                stripe: piece.addr.stripe,
                unit: u32::try_from(unit).expect("units per chunk fit u32"),
            };
            let range = BlockRange {
                data_slot: piece.addr.data_slot,
                first,
                sectors: len,
                buf_sector: piece.buf_sector + done,
            };
            heads.entry(key).or_default().push(range);
            done += len;
        }
    }
    heads
        .into_iter()
        .map(|(key, mut blocks)| {
            blocks.sort_by_key(|b| b.data_slot);
            HeadWork { key, blocks }
        })
        .collect()
}
