//! CPU on memory members (seed 002): RAID5 sequential reads against RAID0 on identical members
//! (goal: at most 1.2x the CPU per byte; md's copy through the stripe cache cost ~5x), and
//! sequential full-stripe writes as a fraction of the parity kernel's own speed on the same
//! block shapes (n data blocks of stripe_size); and what the write hole's log costs in CPU
//! (issue 6): 4 KiB random writes at depth 32, as `uraid bench serve`'s job, with the partial
//! parity log and without. On memory members the log's cost is CPU alone, and a server bound
//! by CPU runs at the inverse of its CPU per write, so the figure is the CPU per write without
//! the log over that with it, against the 0.90 for random writes.
//!
//! Timing: thread CPU time (`CLOCK_THREAD_CPUTIME_ID`: the driver, the memory members' copies
//! and the engine all run on this thread), contenders interleaved sample by sample in one run,
//! median per contender (as `timing.rs` does for wall time). The first pass of each contender
//! is verified; timed passes replay the same buffers (`Rig::set_timing`), and the array is
//! read back, healthy and degraded, after timing.

use super::Prng;
use super::rig::{Req, Rig, Spec};
use super::{Goal, IoBenchOptions, Row};
use crate::arena::Arena;
use anyhow::Result;
use uraid_core::array::PartialParityLogConfig;
use uraid_core::{Level, SECTOR_BYTES};

const FAMILY: &str = "cpu";
const KIB: u64 = 1024;

pub fn run(opts: &IoBenchOptions) -> Result<Vec<Row>> {
    let (bytes, samples) = if opts.small { (8 << 20, 3) } else { (64 << 20, 15) };
    let mut rows = Vec::new();
    for bs in [1 << 20, 64 * KIB] {
        rows.extend(read_rows(bytes, bs, samples)?);
    }
    rows.extend(write_rows(Level::Raid5, 8, bytes, samples)?);
    rows.extend(write_rows(Level::Raid6, 10, bytes, samples)?);
    let writes = if opts.small { 2048 } else { 8192 };
    rows.extend(log_rows(Level::Raid5, 5, bytes, writes, samples)?);
    rows.extend(log_rows(Level::Raid6, 6, bytes, writes, samples)?);
    Ok(rows)
}

/// Nanoseconds of CPU this thread has used.
#[must_use]
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through the valid pointer it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    assert_eq!(rc, 0, "CLOCK_THREAD_CPUTIME_ID is available on Linux");
    u64::try_from(ts.tv_sec).expect("positive") * 1_000_000_000
        + u64::try_from(ts.tv_nsec).expect("positive")
}

/// Median CPU ns per pass of each contender, passes interleaved.
pub fn interleaved<const K: usize>(
    samples: usize,
    mut pass: impl FnMut(usize) -> Result<()>,
) -> Result<[f64; K]> {
    let mut times: [Vec<f64>; K] = std::array::from_fn(|_| Vec::with_capacity(samples));
    for _ in 0..samples {
        for (who, t) in times.iter_mut().enumerate() {
            let start = thread_cpu_ns();
            pass(who)?;
            t.push((thread_cpu_ns() - start) as f64);
        }
    }
    Ok(times.map(|mut t| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    }))
}

fn spec(level: Level, members: usize, chunk: u64, bytes: u64) -> Spec {
    let data = members - usize::from(level.max_degraded());
    let member_bytes = bytes / data as u64;
    Spec { level, members, chunk_bytes: chunk, stripe_size_bytes: 4 * KIB, member_bytes }
}

fn sweep(size: u64, bs: u64, write: bool) -> Vec<Req> {
    (0..size)
        .step_by(bs as usize)
        .map(|at| {
            let (sector, bytes) =
                (at / SECTOR_BYTES, usize::try_from(bs.min(size - at)).expect("fits"));
            if write { Req::Write { sector, bytes } } else { Req::Read { sector, bytes } }
        })
        .collect()
}

/// Seed 002: RAID5 of 8 and RAID0 of 8 memory members, chunk 64 KiB, sequential reads of `bs`.
pub fn read_cpu(bytes: u64, bs: u64, samples: usize) -> Result<[f64; 2]> {
    let mut rigs = [
        Rig::memory(&spec(Level::Raid5, 8, 64 * KIB, bytes))?,
        Rig::memory(&spec(Level::Raid0, 8, 64 * KIB, bytes))?,
    ];
    for rig in &mut rigs {
        rig.fill()?;
        rig.set_timing(true);
        let reqs = sweep(rig.size_bytes(), bs, false);
        rig.run(reqs, 8)?; // checked against the model; later passes replay it
    }
    let per_pass = interleaved::<2>(samples, |who| {
        let rig = &mut rigs[who];
        rig.run(sweep(rig.size_bytes(), bs, false), 8)
    })?;
    let mut per_byte = [0.0; 2];
    for (i, rig) in rigs.iter_mut().enumerate() {
        per_byte[i] = per_pass[i] / rig.size_bytes() as f64;
        rig.set_timing(false);
        rig.verify_with_failures()?;
    }
    Ok(per_byte)
}

fn read_rows(bytes: u64, bs: u64, samples: usize) -> Result<Vec<Row>> {
    let [raid5, raid0] = read_cpu(bytes, bs, samples)?;
    let mut case = spec(Level::Raid5, 8, 64 * KIB, bytes).case(bs, 8, "sequential");
    "healthy, vs RAID0 of 8".clone_into(&mut case.state);
    let note = format!(
        "thread CPU, median of {samples} interleaved passes: RAID5 {raid5:.3} ns/byte, RAID0 \
         {raid0:.3}"
    );
    Ok(vec![
        Row::new(
            FAMILY,
            "read_cpu",
            &case,
            "raid5_over_raid0_cpu_per_byte",
            raid5 / raid0,
            Some(1.2),
            Goal::AtMost,
        )
        .md(Some(5.0))
        .note(note),
    ])
}

/// Full-stripe sequential writes of one stripe per request, against the parity kernel (xor for
/// RAID5, P+Q for RAID6) over the same bytes in the engine's block shape.
pub fn write_cpu(level: Level, members: usize, bytes: u64, samples: usize) -> Result<[f64; 2]> {
    let spec = spec(level, members, 128 * KIB, bytes);
    let mut rig = Rig::memory(&spec)?;
    rig.set_timing(true);
    let bs = spec.stripe_bytes();
    rig.run(sweep(rig.size_bytes(), bs, true), 4)?;
    let n = spec.data_disks();
    let mut arena = Arena::new(n, spec.stripe_size_bytes as usize, rig.size_bytes() as usize, 3);
    let per_pass = interleaved::<2>(samples, |who| {
        if who == 0 {
            return rig.run(sweep(rig.size_bytes(), bs, true), 4);
        }
        for s in arena.stripes() {
            if level == Level::Raid6 {
                uraid_parity::gen_syndrome(s.p, s.q, &s.present);
            } else {
                uraid_parity::xor_gen(s.p, &s.data);
            }
        }
        Ok(())
    })?;
    let user = rig.size_bytes() as f64;
    let kernel = (arena.stripes * n * arena.block_bytes) as f64;
    rig.set_timing(false);
    rig.verify_with_failures()?;
    Ok([user / per_pass[0], kernel / per_pass[1]])
}

fn write_rows(level: Level, members: usize, bytes: u64, samples: usize) -> Result<Vec<Row>> {
    let [write, kernel] = write_cpu(level, members, bytes, samples)?;
    let spec = spec(level, members, 128 * KIB, bytes);
    let case = spec.case(spec.stripe_bytes(), 4, "sequential full stripes");
    let kernel_name = if level == Level::Raid6 { "gen_syndrome" } else { "xor_gen" };
    let note = format!(
        "GB/s of CPU: writes {:.2}, {kernel_name} on {} x 4 KiB {:.2}",
        write,
        spec.data_disks(),
        kernel
    );
    Ok(vec![
        Row::new(
            FAMILY,
            "write_cpu",
            &case,
            "write_over_parity_kernel",
            write / kernel,
            None,
            Goal::AtLeast,
        )
        .note(note),
    ])
}

/// The runtime's ring on big members (`uraid_runtime::log`): 2 MiB.
const LOG_RING_BYTES: u64 = 2 << 20;

/// CPU ns per write of `writes` 4 KiB random writes at depth 32 on arrays of 64 KiB chunks,
/// without the log and with it (passes interleaved), each then read back healthy and degraded;
/// and the member I/O per write of each. Each write's payload is copied as it is submitted, as
/// the NBD server receives it (`Rig::set_copy_payloads`).
pub fn log_cpu(
    level: Level,
    members: usize,
    bytes: u64,
    writes: usize,
    samples: usize,
) -> Result<([f64; 2], [String; 2])> {
    let spec = spec(level, members, 64 * KIB, bytes);
    let mut rigs = [
        Rig::memory_with_ring(&spec, LOG_RING_BYTES)?,
        Rig::memory_with_ring(&spec, LOG_RING_BYTES)?,
    ];
    let cfg = PartialParityLogConfig {
        ring_sectors: LOG_RING_BYTES / SECTOR_BYTES,
        uuid: [1; 16],
        epoch: 1,
        rotational: false,
        stride_stripes: 1,
    };
    rigs[1].array.enable_partial_parity_log(&cfg);
    let blocks = rigs[0].size_bytes() / (4 * KIB);
    let mut rng = Prng::new(members as u64);
    let reqs: Vec<Req> =
        (0..writes).map(|_| Req::Write { sector: rng.below(blocks) * 8, bytes: 4096 }).collect();
    let mut moved = [String::new(), String::new()];
    for (rig, moved) in rigs.iter_mut().zip(&mut moved) {
        rig.fill()?;
        rig.set_timing(true);
        rig.set_copy_payloads(true);
        let before = rig.counters();
        rig.run_open(reqs.iter().copied(), 32)?; // checked against the model; then replayed
        let after = rig.counters();
        let per = |n: u64| n as f64 / writes as f64;
        *moved = format!(
            "{:.2} reads, {:.2} writes ({:.2} KiB), {:.2} flushes",
            per(after.read_ios - before.read_ios),
            per(after.write_ios - before.write_ios),
            per(after.write_bytes - before.write_bytes) / 1024.0,
            per(after.flushes - before.flushes)
        );
    }
    let per_pass = interleaved::<2>(samples, |who| rigs[who].run_open(reqs.iter().copied(), 32))?;
    for rig in &mut rigs {
        rig.set_timing(false);
        rig.verify_with_failures()?;
    }
    Ok((per_pass.map(|ns| ns / writes as f64), moved))
}

fn log_rows(
    level: Level,
    members: usize,
    bytes: u64,
    writes: usize,
    samples: usize,
) -> Result<Vec<Row>> {
    let ([open, logged], [open_io, logged_io]) = log_cpu(level, members, bytes, writes, samples)?;
    let mut case = spec(level, members, 64 * KIB, bytes).case(4 * KIB, 32, "random");
    "healthy, log ring 2M".clone_into(&mut case.state);
    let note = format!(
        "thread CPU per write (with a copy of its payload, as a server receives it), median \
         of {samples} interleaved passes of {writes} writes: \
         {:.1} us with the log, {:.1} us without; member I/O per write: {logged_io} with the \
         log, {open_io} without",
        logged / 1000.0,
        open / 1000.0
    );
    Ok(vec![
        Row::new(
            FAMILY,
            "log_cpu",
            &case,
            "cpu_per_write_without_over_with_log",
            open / logged,
            Some(0.9),
            Goal::AtLeast,
        )
        .note(note),
    ])
}
