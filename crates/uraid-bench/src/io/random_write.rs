//! Random writes inside one chunk (seed 001) and the stripe-head unit (seed 004).
//!
//! Seed 001: RAID6 updating one chunk should read old data, P and Q and write the three back,
//! at any width (Linux 3.12 read 3, 4, 5, 6 blocks at 6..9 members; md 6.12 reads 3). RAID5
//! reads and writes 2. At iodepth 16 they should still be 3 + 3 whole 64 KiB member I/Os (md
//! 6.12: ~21 read I/Os per user write, the same bytes cut into 4 KiB pieces). Seed 004: a 4 KiB
//! write moves 4 KiB per member I/O with a 4 KiB stripe_size, 64 KiB with a 64 KiB one.
//!
//! Method: fill the array, start a fresh engine (nothing cached), write to random chunks of
//! distinct stripes that are never neighbours on a member (so that no stripe is cached and no
//! two writes' member I/Os could be merged into one), and count what the members received.
//! Then read everything back, healthy and with members failed.

use super::rig::{Req, Rig, Spec};
use super::{Case, Goal, IoBenchOptions, Prng, Row};
use anyhow::Result;
use uraid_core::Level;
use uraid_core::SECTOR_BYTES;

const FAMILY: &str = "random_write";
const KIB: u64 = 1024;

/// One random-write case: request size and queue depth.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub bs_bytes: u64,
    pub iodepth: usize,
}

/// What the members received per user write.
#[derive(Clone, Copy, Debug, Default)]
pub struct PerWrite {
    pub reads: f64,
    pub writes: f64,
    pub bytes_moved: f64,
    /// Member I/Os of exactly the request size, as a fraction of all member I/Os.
    pub whole_fraction: f64,
}

pub fn run(opts: &IoBenchOptions) -> Result<Vec<Row>> {
    let writes = if opts.small { 16 } else { 48 };
    let mut rows = Vec::new();
    let shapes = [
        Shape { bs_bytes: 64 * KIB, iodepth: 1 },
        Shape { bs_bytes: 4 * KIB, iodepth: 1 },
        Shape { bs_bytes: 64 * KIB, iodepth: 16 },
    ];
    for members in 6..=10 {
        let spec = spec(Level::Raid6, members, 4 * KIB, &shapes, writes);
        for (shape, per) in shapes.iter().zip(measure(&spec, &shapes, writes)?) {
            rows.extend(rmw_rows(&spec, *shape, per));
        }
    }
    let raid5 = &shapes[..2];
    let spec = spec(Level::Raid5, 6, 4 * KIB, raid5, writes);
    for (shape, per) in raid5.iter().zip(measure(&spec, raid5, writes)?) {
        rows.extend(rmw_rows(&spec, *shape, per));
    }
    rows.extend(stripe_size_rows(writes)?);
    Ok(rows)
}

/// An array with room for `writes` writes per shape, each in its own stripe with a gap after.
#[must_use]
pub fn spec(
    level: Level,
    members: usize,
    stripe_size: u64,
    shapes: &[Shape],
    writes: usize,
) -> Spec {
    let stripes = 2 * (writes * shapes.len()) as u64;
    Spec {
        level,
        members,
        chunk_bytes: 64 * KIB,
        stripe_size_bytes: stripe_size,
        member_bytes: stripes * 64 * KIB,
    }
}

/// Runs each shape's writes on one filled array; verifies it healthy and degraded at the end.
pub fn measure(spec: &Spec, shapes: &[Shape], writes: usize) -> Result<Vec<PerWrite>> {
    let mut rig = Rig::memory(spec)?;
    rig.fill()?;
    let stripes = spec.member_bytes / spec.chunk_bytes;
    let mut rng = Prng::new(spec.members as u64 * 1000 + spec.stripe_size_bytes);
    // Even stripes only: no two writes touch neighbouring chunks on a member.
    let mut free: Vec<u64> = (0..stripes).step_by(2).collect();
    rng.shuffle(&mut free);
    let mut out = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        let mine = &free[i * writes..(i + 1) * writes];
        let reqs: Vec<Req> =
            mine.iter().map(|&s| write_in_chunk(spec, s, shape.bs_bytes, &mut rng)).collect();
        rig.fresh_engine()?;
        rig.take_logs();
        let before = rig.counters();
        rig.run(reqs, shape.iodepth)?;
        let after = rig.counters();
        let logs = rig.take_logs();
        let all: Vec<_> = logs.iter().flatten().collect();
        let whole = all.iter().filter(|io| io.len_bytes as u64 == shape.bs_bytes).count();
        let n = writes as f64;
        out.push(PerWrite {
            reads: (after.read_ios - before.read_ios) as f64 / n,
            writes: (after.write_ios - before.write_ios) as f64 / n,
            bytes_moved: ((after.read_bytes - before.read_bytes)
                + (after.write_bytes - before.write_bytes)) as f64
                / n,
            whole_fraction: whole as f64 / all.len().max(1) as f64,
        });
    }
    rig.verify_with_failures()?;
    Ok(out)
}

/// A `bs` write at a random data chunk of `stripe`, at a random `bs`-aligned offset in it.
fn write_in_chunk(spec: &Spec, stripe: u64, bs: u64, rng: &mut Prng) -> Req {
    let slot = rng.below(spec.data_disks() as u64);
    let offset = rng.below(spec.chunk_bytes / bs) * bs;
    let at = (stripe * spec.data_disks() as u64 + slot) * spec.chunk_bytes + offset;
    Req::Write { sector: at / SECTOR_BYTES, bytes: usize::try_from(bs).expect("fits") }
}

fn rmw_rows(spec: &Spec, shape: Shape, per: PerWrite) -> Vec<Row> {
    let raid6 = spec.level == Level::Raid6;
    let goal = if raid6 { 3.0 } else { 2.0 };
    let case = spec.case(shape.bs_bytes, shape.iodepth, "random, inside one chunk");
    let workload = if raid6 { "raid6_rmw" } else { "raid5_rmw" };
    let whole64 = shape.bs_bytes == 64 * KIB;
    // md's figures: issue 3 (Linux 6.12) for 64 KiB writes; seed 001 (Linux 3.12) in the note.
    let md_reads = match (raid6 && whole64, shape.iodepth) {
        (true, 1) => Some(3.0),
        (true, _) => Some(21.0),
        (false, _) => None,
    };
    let mut reads = Row::new(
        FAMILY,
        workload,
        &case,
        "member_reads_per_write",
        per.reads,
        Some(goal),
        Goal::AtMost,
    )
    .md(md_reads);
    if raid6 && whole64 && shape.iodepth == 1 && spec.members <= 9 {
        reads = reads.note(format!("seed 001 (Linux 3.12): {} reads", spec.members - 3));
    }
    let md_writes = if raid6 && whole64 && shape.iodepth == 1 { Some(3.0) } else { None };
    vec![
        reads,
        Row::new(
            FAMILY,
            workload,
            &case,
            "member_writes_per_write",
            per.writes,
            Some(goal),
            Goal::AtMost,
        )
        .md(md_writes),
        Row::new(
            FAMILY,
            workload,
            &case,
            "member_bytes_moved_per_write",
            per.bytes_moved,
            Some(2.0 * goal * shape.bs_bytes as f64),
            Goal::AtMost,
        ),
        Row::new(
            FAMILY,
            workload,
            &case,
            "whole_bs_member_io_fraction",
            per.whole_fraction,
            Some(1.0),
            Goal::AtLeast,
        )
        .note("member I/Os of exactly the request size (contiguous 4 KiB stripe-head I/Os merged)"),
    ]
}

/// Seed 004: RAID5 of 4, 4 KiB random writes, stripe_size 4 KiB vs 64 KiB.
fn stripe_size_rows(writes: usize) -> Result<Vec<Row>> {
    let shape = [Shape { bs_bytes: 4 * KIB, iodepth: 1 }];
    let mut rows = Vec::new();
    for unit in [4 * KIB, 64 * KIB] {
        let spec = spec(Level::Raid5, 4, unit, &shape, writes);
        let per = measure(&spec, &shape, writes)?[0];
        let case: Case = spec.case(4 * KIB, 1, "random");
        // rmw: old data and P read, new data and P written, one stripe unit each.
        let minimum = 4.0 * unit as f64;
        let row = Row::new(
            FAMILY,
            "stripe_size",
            &case,
            "member_bytes_moved_per_write",
            per.bytes_moved,
            Some(minimum),
            Goal::AtMost,
        )
        .note(format!(
            "issue 3: 16 KiB with a 4 KiB stripe_size vs 256 KiB with 64 KiB; 4 x {} KiB here",
            unit / KIB
        ));
        rows.push(row);
    }
    Ok(rows)
}
