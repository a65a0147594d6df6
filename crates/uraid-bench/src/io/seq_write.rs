//! Sequential writes that are not stripe-aligned (seed 003): RAID6 of 8, chunk 128 KiB (768 KiB
//! stripes), 1 MiB and 128 KiB writes from sector 0, at iodepth 8 and 1.
//!
//! With requests queued, consecutive writes fill each other's stripes and nothing need be read
//! (goal 0; md 6.12: 0.07 read bytes per user byte for 1 MiB, 0.59 for 128 KiB). At iodepth 1
//! each write must be durable with consistent parity before the next arrives, so its partial
//! stripes need pre-reads; `floor_iodepth1` computes the least a stripe cache can do without a
//! journal (md: 0.25 and 1.17 read, 1.50 written per user byte for 1 MiB; 1.33 is full stripes).

use super::rig::{Req, Rig, Spec};
use super::{Goal, IoBenchOptions, Row};
use anyhow::Result;
use uraid_core::{Level, SECTOR_BYTES};

const FAMILY: &str = "seq_write";
const KIB: u64 = 1024;

/// Member bytes per user byte.
#[derive(Clone, Copy, Debug, Default)]
pub struct PerByte {
    pub read: f64,
    pub written: f64,
}

#[must_use]
pub fn spec(total_bytes: u64) -> Spec {
    Spec {
        level: Level::Raid6,
        members: 8,
        chunk_bytes: 128 * KIB,
        stripe_size_bytes: 4 * KIB,
        member_bytes: total_bytes / 6,
    }
}

pub fn run(opts: &IoBenchOptions) -> Result<Vec<Row>> {
    // A multiple of both 1 MiB and the 768 KiB stripe: the run ends on a stripe boundary.
    let total = if opts.small { 6 << 20 } else { 48 << 20 };
    let spec = spec(total);
    let mut rows = Vec::new();
    // md 6.12's read bytes per user byte (issue 3): (bs, iodepth) -> figure.
    let md_read = |bs: u64, qd: usize| match (bs, qd) {
        (1_048_576, 8) => Some(0.07),
        (1_048_576, 1) => Some(0.25),
        (131_072, 1) => Some(1.17),
        (131_072, 8) => Some(0.59),
        _ => None,
    };
    for bs in [1 << 20, 128 * KIB] {
        for iodepth in [8, 1] {
            let per = measure(&spec, bs, iodepth)?;
            let case = spec.case(bs, iodepth, "sequential from sector 0, not stripe-aligned");
            let full = (spec.members as f64) / spec.data_disks() as f64;
            let (floor_read, floor_written) = floor_iodepth1(&spec, bs, total);
            let (read_goal, written_goal) =
                if iodepth == 1 { (floor_read, floor_written) } else { (0.0, full) };
            let md_written = if bs == 1 << 20 && iodepth == 1 { Some(1.5) } else { None };
            let note = if iodepth == 1 {
                "goal: the floor with every write on the members when acknowledged (earlier \
                 blocks of the stripe kept in memory); the write-back of a stream's partial \
                 stripes (held, acknowledged, until the stream fills them) goes below it"
            } else {
                "queued writes fill each other's stripes"
            };
            rows.push(
                Row::new(
                    FAMILY,
                    "seq_write",
                    &case,
                    "member_read_bytes_per_user_byte",
                    per.read,
                    Some(read_goal),
                    Goal::AtMost,
                )
                .md(md_read(bs, iodepth))
                .minimum(0.0)
                .note(note),
            );
            rows.push(
                Row::new(
                    FAMILY,
                    "seq_write",
                    &case,
                    "member_written_bytes_per_user_byte",
                    per.written,
                    Some(written_goal),
                    Goal::AtMost,
                )
                .md(md_written)
                .minimum(full),
            );
        }
    }
    Ok(rows)
}

/// Writes the array from sector 0 with `bs` requests at `iodepth`; verifies it afterwards.
pub fn measure(spec: &Spec, bs: u64, iodepth: usize) -> Result<PerByte> {
    let mut rig = Rig::memory(spec)?;
    let total = rig.size_bytes();
    let reqs = (0..total).step_by(bs as usize).map(|at| Req::Write {
        sector: at / SECTOR_BYTES,
        bytes: usize::try_from(bs.min(total - at)).expect("fits"),
    });
    let before = rig.counters();
    rig.run(reqs, iodepth)?;
    let after = rig.counters();
    rig.verify_with_failures()?;
    Ok(PerByte {
        read: (after.read_bytes - before.read_bytes) as f64 / total as f64,
        written: (after.write_bytes - before.write_bytes) as f64 / total as f64,
    })
}

/// The fewest member bytes read and written per user byte for sequential chunk-aligned writes
/// of `bs` from sector 0 at iodepth 1, without a journal: each stripe piece is written with
/// consistent parity, by the cheaper of rmw and rcw, remembering every block of the stripe
/// that earlier requests wrote (data and parity), so nothing is read twice.
///
/// Worked example, 6 data + 2 parity, 1 MiB = 8 chunks: request 1 writes stripe 0 whole (8
/// chunks written) and slots 0-1 of stripe 1 (rmw reads 2 + P + Q = 4 = rcw's 4; writes 4);
/// request 2 writes slots 2-5 of stripe 1 (rcw: slots 0-1 are in memory, reads 0; writes 6)
/// and slots 0-3 of stripe 2 (rcw reads 2; writes 6); request 3 writes slots 4-5 of stripe 2
/// (reads 0, writes 4) and stripe 3 whole (8). 6 chunks read and 36 written per 24: 0.25, 1.5.
#[must_use]
pub fn floor_iodepth1(spec: &Spec, bs: u64, total: u64) -> (f64, f64) {
    let (n, p, chunk) =
        (spec.data_disks() as u64, u64::from(spec.level.max_degraded()), spec.chunk_bytes);
    assert!(bs.is_multiple_of(chunk), "the floor model counts whole chunks");
    let (mut read, mut written) = (0, 0);
    for first in (0..total / chunk).step_by((bs / chunk) as usize) {
        let end = (first + bs / chunk).min(total / chunk);
        let mut c = first;
        while c < end {
            // Slots [a, b) of stripe c / n; slots before a were written by earlier requests.
            let (a, b) = (c % n, (end - c + c % n).min(n));
            let k = b - a;
            let rmw = k + if a == 0 { p } else { 0 };
            let rcw = n - b;
            read += if k == n { 0 } else { rmw.min(rcw) };
            written += k + p;
            c += k;
        }
    }
    let user = (total / chunk) as f64;
    (read as f64 / user, written as f64 / user)
}
