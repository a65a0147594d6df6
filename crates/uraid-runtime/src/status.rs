//! Block status (NBD's base:allocation): which parts of an array range read back as zeros
//! and which are not allocated on the members, without reading them. Each worker answers for
//! its rows from its own engine (a part with newer data in a stripe head is data, so the
//! answer is as fresh as a read would be) and its own member instances (holes of sparse
//! files, `uraid_io::Member::allocated`).

use crate::request::{self, Parent, PieceOp};
use crate::runtime::Runtime;
use crate::{Completed, RuntimeError};
use std::collections::HashMap;
use std::ops::Range;
use uraid_core::array::{Array, Extent, part_extents};
use uraid_core::{DiskIndex, Sector};
use uraid_io::Driver;

/// The most array bytes one question covers; a longer one is answered for its start (NBD
/// lets the server answer less, and clients ask again from where the answer ended). Bounds
/// the lseeks one question costs (one or two per member per row at most).
pub const STATUS_BYTES_MAX: u64 = 1 << 30;

/// Bytes an extent takes in a piece's buffer: sectors (u64) and flags.
const RECORD_BYTES: usize = 9;
const ZERO: u8 = 1;
const HOLE: u8 = 2;

impl Runtime {
    /// The status of array bytes `[offset_bytes, +len_bytes)` (at most `STATUS_BYTES_MAX` of
    /// them: the extents may cover less), as extents in order; adjacent ones differ.
    pub fn block_status(
        &self,
        offset_bytes: u64,
        len_bytes: u64,
        done: impl FnOnce(Result<Vec<Extent>, RuntimeError>) + Send + 'static,
    ) {
        let len_bytes = len_bytes.min(STATUS_BYTES_MAX);
        let (sector, sectors) = match self.check(offset_bytes, len_bytes) {
            Ok(range) if range.1 > 0 => range,
            Ok(_) => return done(Ok(Vec::new())),
            Err(e) => return done(Err(e)),
        };
        let spans = request::split(sector, sectors, self.row_sectors, self.workers());
        let callback = Box::new(move |c: Completed| {
            done(c.result.map(|()| decode(&c.segments)));
        });
        let parent = Parent::segmented(spans.len(), callback, self.copied.clone());
        for (i, s) in spans.iter().enumerate() {
            let op = PieceOp::Status { sectors: s.sectors };
            self.send(s.worker, op, Sector(s.sector), Vec::new(), i, &parent);
        }
    }

    /// `block_status`, waited for.
    pub fn status_at(
        &self,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<Vec<Extent>, RuntimeError> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.block_status(offset_bytes, len_bytes, move |r| {
            // The receiver gone means the caller stopped waiting.
            let _ = tx.send(r);
        });
        rx.recv().unwrap_or(Err(RuntimeError::Gone))
    }
}

/// A worker's answer for array sectors `[sector, +sectors)`, encoded for its piece's buffer.
pub(crate) fn piece_status(
    array: &Array,
    driver: &Driver,
    sector: Sector,
    sectors: u64,
) -> Vec<u8> {
    let parts = array.read_sources(sector, sectors);
    // Each member is asked once, for the member sectors of every part of the piece: its rows
    // are consecutive stripes, so that span is short and holds nothing else.
    let start = parts.iter().map(|p| p.member_sector.0).min().unwrap_or(0);
    let end = parts.iter().map(|p| p.member_sector.0 + p.sectors).max().unwrap_or(0);
    let span = start..end;
    let mut asked: HashMap<DiskIndex, Option<Vec<Range<u64>>>> = HashMap::new();
    let mut out = Vec::new();
    for part in &parts {
        let extents = part_extents(part, |m| {
            let ranges = asked.entry(m).or_insert_with(|| driver.allocated(m.get(), span.clone()));
            ranges.clone()
        });
        for e in extents {
            out.extend_from_slice(&e.sectors.to_le_bytes());
            out.push(if e.zero { ZERO } else { 0 } | if e.hole { HOLE } else { 0 });
        }
    }
    out
}

/// The pieces' extents joined, adjacent ones with the same flags merged.
fn decode(pieces: &[Vec<u8>]) -> Vec<Extent> {
    let mut out: Vec<Extent> = Vec::new();
    for record in pieces.iter().flat_map(|p| p.chunks_exact(RECORD_BYTES)) {
        let sectors = u64::from_le_bytes(record[..8].try_into().expect("8 bytes"));
        let (zero, hole) = (record[8] & ZERO != 0, record[8] & HOLE != 0);
        match out.last_mut() {
            Some(last) if last.zero == zero && last.hole == hole => last.sectors += sectors,
            _ => out.push(Extent { sectors, zero, hole }),
        }
    }
    out
}
