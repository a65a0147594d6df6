//! What md's internal write-intent bitmap costs 4 KiB random writes (issue 4: md users report
//! up to 100x loss with small bitmap chunks; the goal is under 10%).
//!
//! Arrays: RAID5 of 4 and RAID6 of 6, chunk 64 KiB, each member a memory member behind
//! `Throttled` on one simulated clock, so every figure is deterministic and the member I/O
//! counts are exact: a bandwidth-bound SSD (200 MB/s, 100 us per I/O overlapping others, no
//! seek, as the rebuild family models), then a 7200 rpm HDD (rows `hdd_bm_*`, a quarter of the
//! writes), where a bitmap page write costs a seek. The bitmap lives on each member after its
//! data area (the model charges the same seek wherever it is).
//!
//! Method: fill the array, then for iodepth 16 (as the random_write rows) and 1, perform the
//! same random 4 KiB writes (uniform over the array) on a fresh engine without a bitmap and
//! with one per bitmap chunk size (4 KiB, 64 KiB, 1 MiB, and 64 MiB, md's default for big
//! arrays). Each bitmap starts with every bit clear, as after md's daemon cleared an idle
//! array: every write to a region not written since must set its bit, durably on every
//! member, before its stripe writes. Figures: bitmap member writes per 1000 user writes
//! (counted on the members), and the with/without ratio of simulated IOPS (goal >= 0.9).
//! After each bitmap run the members' bitmaps are read back: every written region's bit set.
//! At iodepth 1 on HDDs with small bitmap chunks nearly every write needs its own page write,
//! and with one write at a time there is nothing to batch: the members touched do 3 seeks
//! instead of 2 (md pays the same), so those rows miss by physics, not by code.
//!
//! Workers: an array with a bitmap runs one worker (the runtime forces it), and the rig above
//! is one engine, so both sides of the ratio run one worker. The `bitmap_4k_cpu` rows say
//! what the forced worker costs on memory members (CPU-bound, wall clock, so no goal: a noisy
//! machine would flip it): the bitmap with its one worker over no bitmap with one worker, and
//! over no bitmap with the default workers.

use super::rig::{Modelled, Req, Rig, Spec};
use super::{Goal, IoBenchOptions, Prng, Row};
use anyhow::{Result, ensure};
use std::sync::mpsc;
use std::time::Instant;
use uraid_core::array::{ArrayConfig, BITMAP_PAGE_BYTES, WriteIntentConfig};
use uraid_core::{Level, SECTOR_BYTES};
use uraid_io::{Clock, DiskModel, IoOp, ManualClock, MediaAccess};
use uraid_runtime::{Op, Runtime, RuntimeConfig, SharedMemorySource, WriteIntentSetup};

const FAMILY: &str = "bitmap";
const KIB: u64 = 1024;
const BS: u64 = 4 * KIB;
/// md's bitmap superblock: the bits start after it.
const BITS_OFFSET: usize = 256;
/// Bitmap chunk sizes.
const CHUNKS: [u64; 4] = [4 * KIB, 64 * KIB, 1 << 20, 64 << 20];

/// A modelled disk, and the workload names its rows carry per bitmap chunk size.
struct Disk {
    model: DiskModel,
    what: &'static str,
    names: [&'static str; 4],
}

const SSD: Disk = Disk {
    model: DiskModel {
        bandwidth_bytes_per_s: 200_000_000,
        iops_max: 0,
        latency_ns: 100_000,
        seek_ns: 0,
    },
    what: "200 MB/s 100 us SSD",
    names: ["bitmap_4k", "bitmap_64k", "bitmap_1m", "bitmap_64m"],
};

/// A 7200 rpm disk (`DiskModel::hdd_7200`): a bitmap page write is one more seek.
const HDD: Disk = Disk {
    model: DiskModel {
        bandwidth_bytes_per_s: 200_000_000,
        iops_max: 0,
        latency_ns: 100_000,
        seek_ns: 5_500_000,
    },
    what: "7200 rpm HDD (5.5 ms seek)",
    names: ["hdd_bm_4k", "hdd_bm_64k", "hdd_bm_1m", "hdd_bm_64m"],
};
const IODEPTHS: [usize; 2] = [16, 1];

/// One pass of the workload: simulated seconds and what the members received.
#[derive(Clone, Copy, Debug, Default)]
struct Pass {
    seconds: f64,
    bitmap_writes: u64,
    /// Data and parity member I/Os.
    array_ios: u64,
    /// Bitmap chunks the writes touched (bits that had to be set).
    bits: u64,
}

pub fn run(opts: &IoBenchOptions) -> Result<Vec<Row>> {
    let (member_bytes, writes) = if opts.small { (4 << 20, 256) } else { (32 << 20, 2000) };
    let mut rows = Vec::new();
    for (level, members) in [(Level::Raid5, 4), (Level::Raid6, 6)] {
        let spec =
            Spec { level, members, chunk_bytes: 64 * KIB, stripe_size_bytes: BS, member_bytes };
        rows.extend(modelled_rows(&spec, &SSD, writes)?);
        rows.extend(modelled_rows(&spec, &HDD, writes / 4)?);
    }
    rows.extend(worker_rows(opts)?);
    Ok(rows)
}

fn modelled_rows(spec: &Spec, disk: &Disk, writes: usize) -> Result<Vec<Row>> {
    let clock = ManualClock::new();
    let mut rig = rig(spec, disk.model, &clock)?;
    rig.fill()?;
    let mut rng = Prng::new(spec.members as u64 * 7919);
    let blocks = rig.size_bytes() / BS;
    let reqs: Vec<Req> = (0..writes)
        .map(|_| Req::Write { sector: rng.below(blocks) * BS / SECTOR_BYTES, bytes: BS as usize })
        .collect();
    let mut rows = Vec::new();
    for iodepth in IODEPTHS {
        let case = spec.case(BS, iodepth, "random, uniform over the array");
        let without = pass(&mut rig, &clock, &reqs, iodepth, None)?;
        for (chunk, workload) in CHUNKS.into_iter().zip(disk.names) {
            let with = pass(&mut rig, &clock, &reqs, iodepth, Some(chunk))?;
            let n = writes as f64;
            let per_1000 = with.bitmap_writes as f64 * 1000.0 / n;
            let note = format!(
                "{} bits set by {writes} writes, each page write to all {} members; data+parity \
                 member I/Os per write {:.3} with, {:.3} without",
                with.bits,
                spec.members,
                with.array_ios as f64 / n,
                without.array_ios as f64 / n
            );
            rows.push(
                Row::new(
                    FAMILY,
                    workload,
                    &case,
                    "bitmap_writes_per_1000_writes",
                    per_1000,
                    None,
                    Goal::AtMost,
                )
                .note(note),
            );
            let (iops_with, iops_without) = (n / with.seconds, n / without.seconds);
            let note = format!(
                "simulated {} members, 1 engine both: {iops_with:.0} IOPS with, \
                 {iops_without:.0} without",
                disk.what
            );
            rows.push(
                Row::new(
                    FAMILY,
                    workload,
                    &case,
                    "iops_with_over_without_bitmap",
                    iops_with / iops_without,
                    Some(0.9),
                    Goal::AtLeast,
                )
                .note(note),
            );
        }
    }
    rig.fresh_engine()?;
    rig.verify_with_failures()?;
    Ok(rows)
}

/// Modelled members with room for the bitmap after the data area, where the driver puts it.
fn rig(spec: &Spec, model: DiskModel, clock: &ManualClock) -> Result<Rig<Modelled>> {
    let at = spec.member_bytes;
    Rig::modelled(spec, model, clock, bitmap_bytes(spec, BS), |d| d.with_bitmap_offset_bytes(at))
}

/// Member sectors per bit and bits for `chunk`-byte bitmap chunks.
fn bits_for(spec: &Spec, chunk: u64) -> (u64, u64) {
    let chunk_sectors = chunk / SECTOR_BYTES;
    (chunk_sectors, (spec.member_bytes / SECTOR_BYTES).div_ceil(chunk_sectors))
}

/// The bitmap's size on a member, whole pages.
fn bitmap_bytes(spec: &Spec, chunk: u64) -> usize {
    let (_, chunks) = bits_for(spec, chunk);
    (BITS_OFFSET + usize::try_from(chunks.div_ceil(8)).expect("fits"))
        .next_multiple_of(BITMAP_PAGE_BYTES)
}

/// A bitmap with every bit clear (the header is the lifecycle layer's: zeros do here).
fn cold_bitmap(spec: &Spec, chunk: u64) -> WriteIntentConfig {
    let (chunk_sectors, chunks) = bits_for(spec, chunk);
    WriteIntentConfig {
        image: vec![0; bitmap_bytes(spec, chunk)],
        bits_offset: BITS_OFFSET,
        chunk_sectors,
        chunks,
    }
}

/// Runs `reqs` on a fresh engine, with a cold bitmap of `chunk`-byte chunks if given.
fn pass(
    rig: &mut Rig<Modelled>,
    clock: &ManualClock,
    reqs: &[Req],
    iodepth: usize,
    chunk: Option<u64>,
) -> Result<Pass> {
    let spec = rig.spec.clone();
    rig.fresh_engine()?;
    if let Some(chunk) = chunk {
        rig.array.enable_write_intent(&cold_bitmap(&spec, chunk));
    }
    rig.take_logs();
    let start = clock.now_ns();
    rig.run(reqs.iter().copied(), iodepth)?;
    let seconds = (clock.now_ns() - start) as f64 / 1e9;
    let logs = rig.take_logs();
    let mut out = Pass { seconds, ..Pass::default() };
    for io in logs.iter().flatten() {
        if io.offset_bytes >= spec.member_bytes {
            ensure!(matches!(io.op, IoOp::Write { fua: true }), "bitmap I/O is a FUA write");
            out.bitmap_writes += 1;
        } else {
            out.array_ios += 1;
        }
    }
    if let Some(chunk) = chunk {
        out.bits = check_bits_on_members(rig, reqs, chunk)?;
        ensure!(rig.array.write_intent_page_writes() > 0, "the writes set bits");
    }
    Ok(out)
}

/// Every member's bitmap has the bit of every region the writes touched (a write's data and
/// parity member ranges lie in the same member sectors); returns how many bits that is.
fn check_bits_on_members(rig: &Rig<Modelled>, reqs: &[Req], chunk: u64) -> Result<u64> {
    let spec = &rig.spec;
    let mut regions = std::collections::BTreeSet::new();
    for req in reqs {
        let Req::Write { sector, .. } = *req else { continue };
        let stripe = sector * SECTOR_BYTES / spec.stripe_bytes();
        let member_offset = stripe * spec.chunk_bytes + sector * SECTOR_BYTES % spec.chunk_bytes;
        regions.insert(member_offset / chunk);
    }
    let mut image = vec![0u8; bitmap_bytes(spec, chunk)];
    for (m, member) in rig.driver.members().iter().enumerate() {
        member.read_media(spec.member_bytes, &mut image)?;
        for &c in &regions {
            let byte = image[BITS_OFFSET + usize::try_from(c / 8)?];
            ensure!(byte & (1 << (c % 8)) != 0, "member {m}: bit {c} of a written region is clear");
        }
    }
    Ok(regions.len() as u64)
}

/// The forced single worker on memory members (wall clock): RAID6 of 6, 4 KiB random writes,
/// 16 in flight from one client, 4 KiB bitmap chunks (the most bits to set). Each pass starts
/// a new runtime on zeroed members, so every bitmap starts cold; passes are interleaved and
/// the median taken per contender.
fn worker_rows(opts: &IoBenchOptions) -> Result<Vec<Row>> {
    let (member_bytes, writes, samples) =
        if opts.small { (4 << 20, 2000, 3) } else { (32 << 20, 20_000, 7) };
    let spec = Spec {
        level: Level::Raid6,
        members: 6,
        chunk_bytes: 64 * KIB,
        stripe_size_bytes: BS,
        member_bytes,
    };
    // (bitmap, workers): None = the default (one per CPU).
    let contenders = [(true, Some(1)), (false, Some(1)), (false, None)];
    let mut times: [Vec<f64>; 3] = Default::default();
    let mut default_workers = 0;
    for _ in 0..samples {
        for (i, &(bitmap, workers)) in contenders.iter().enumerate() {
            let (seconds, ran) = runtime_pass(&spec, bitmap, workers, writes)?;
            times[i].push(seconds);
            if workers.is_none() {
                default_workers = ran;
            }
        }
    }
    let [with, one, default] = times.map(|mut t| {
        t.sort_by(f64::total_cmp);
        writes as f64 / t[t.len() / 2]
    });
    let mut case = spec.case(BS, 16, "random, uniform over the array");
    "healthy, shared memory members, bitmap chunk 4K".clone_into(&mut case.state);
    let note = format!(
        "wall clock, median of {samples} interleaved passes: bitmap (1 worker, forced) {with:.0} \
         IOPS; no bitmap: 1 worker {one:.0}, {default_workers} workers (default) {default:.0}"
    );
    Ok(vec![
        Row::new(
            FAMILY,
            "bitmap_4k_cpu",
            &case,
            "iops_bitmap_over_none_1_worker",
            with / one,
            None,
            Goal::AtLeast,
        )
        .note(note.clone()),
        Row::new(
            FAMILY,
            "bitmap_4k_cpu",
            &case,
            "iops_bitmap_over_none_default_wk",
            with / default,
            None,
            Goal::AtLeast,
        )
        .note(note),
    ])
}

/// One pass on a new runtime: seconds, and how many workers it ran.
fn runtime_pass(
    spec: &Spec,
    bitmap: bool,
    workers: Option<usize>,
    writes: usize,
) -> Result<(f64, usize)> {
    let write_intent = bitmap.then(|| WriteIntentSetup {
        config: cold_bitmap(spec, BS),
        offset_bytes: spec.member_bytes,
    });
    let cfg = RuntimeConfig {
        array: ArrayConfig {
            geometry: spec.geometry(),
            stripe_size_bytes: spec.stripe_size_bytes,
            stripe_cache_size: 256,
            member_sectors: spec.member_bytes / SECTOR_BYTES,
        },
        workers,
        data_offset_bytes: 0,
        write_intent,
        record_failures: false,
        write_back: true,
    };
    let size = usize::try_from(spec.member_bytes)? + bitmap_bytes(spec, BS);
    let rt = Runtime::start(&cfg, &SharedMemorySource::new(spec.members, size))?;
    let blocks = rt.size_bytes() / BS;
    let mut rng = Prng::new(17);
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    let (mut sent, mut done) = (0, 0);
    while done < writes {
        while sent < writes && sent - done < 16 {
            let offset_bytes = rng.below(blocks) * BS;
            let op = Op::Write { offset_bytes, buf: vec![sent as u8; BS as usize], fua: false };
            rt.submit_tagged(op, sent as u64, &tx);
            sent += 1;
        }
        let (_, c) = rx.recv()?;
        c.result?;
        done += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    let ran = rt.workers();
    ensure!(!bitmap || ran == 1, "an array with a bitmap runs one worker");
    rt.shutdown()?;
    Ok((seconds, ran))
}
