//! Degraded sequential reads as a fraction of healthy ones on modelled disks (seed 000): RAID6
//! 8+2, chunk 128 KiB, ten `DiskModel::hdd_7200()` members (200 MB/s, 5.5 ms per seek, 0.1 ms
//! per I/O) on one simulated clock. Simulated time makes the figures deterministic: the same
//! on every run and every machine.
//!
//! Seed 000 measured md (Linux 4.0 with the patch) at 62% of healthy for 1 MiB reads; the goal
//! is at least 90% at every block size (9 of 10 spindles work, so 90% is also the most a
//! bandwidth-bound degraded read can reach). Queue depth: one rotation period (10 stripes,
//! 10 MiB) of requests outstanding, so every member has work queued.

use super::recording::Logged;
use super::rig::{Req, Rig, Spec};
use super::{Goal, IoBenchOptions, Row};
use anyhow::Result;
use uraid_core::{Level, SECTOR_BYTES};
use uraid_io::{Clock, DiskModel, ManualClock, MemoryMember, Throttled};

const FAMILY: &str = "throughput";
const KIB: u64 = 1024;
/// The member that fails.
const FAILED: usize = 3;

type Hdd = Throttled<MemoryMember, ManualClock>;

/// Seed 000's table (MiB/s, fio direct I/O): block size KiB, optimal, degraded with the patch.
const SEED_000: [(u64, f64, f64); 9] = [
    (4, 411.0, 850.0),
    (8, 768.0, 953.0),
    (16, 1368.0, 986.0),
    (32, 1580.0, 1004.0),
    (64, 1612.0, 1000.0),
    (128, 1636.0, 983.0),
    (256, 1635.0, 980.0),
    (512, 1624.0, 956.0),
    (1024, 1608.0, 995.0),
];

/// Simulated MiB/s of a healthy and a degraded sequential read of the whole array.
#[derive(Clone, Copy, Debug)]
pub struct Rates {
    pub healthy_mib_s: f64,
    pub degraded_mib_s: f64,
    /// Seeks per member that did I/O during the run.
    pub healthy_seeks: f64,
    pub degraded_seeks: f64,
}

pub fn run(opts: &IoBenchOptions) -> Result<Vec<Row>> {
    let periods = if opts.small { 2 } else { 4 };
    let (mut rig, clock) = rig(periods)?;
    rig.fill()?;
    let mut rows = Vec::new();
    for (bs_kib, md_healthy, md_degraded) in SEED_000 {
        if opts.small && !matches!(bs_kib, 4 | 64 | 1024) {
            continue;
        }
        let r = measure(&mut rig, &clock, bs_kib * KIB)?;
        let mut case = rig.spec.case(bs_kib * KIB, iodepth(&rig.spec, bs_kib * KIB), "sequential");
        case.state = format!("member {FAILED} failed vs healthy");
        let note = format!(
            "simulated time on modelled HDDs: deterministic; seeks per member: healthy {:.0}, \
             degraded {:.0}",
            r.healthy_seeks, r.degraded_seeks
        );
        let md_fraction = md_degraded / md_healthy;
        rows.push(
            Row::new(
                FAMILY,
                "seq_read_hdd",
                &case,
                "degraded_over_healthy",
                r.degraded_mib_s / r.healthy_mib_s,
                Some(0.9),
                Goal::AtLeast,
            )
            .md(Some((md_fraction * 100.0).round() / 100.0))
            .note(note.clone()),
        );
        rows.push(
            Row::new(
                FAMILY,
                "seq_read_hdd",
                &case,
                "healthy_mib_per_s",
                r.healthy_mib_s,
                None,
                Goal::AtLeast,
            )
            .md(Some(md_healthy))
            .note(note.clone()),
        );
        rows.push(
            Row::new(
                FAMILY,
                "seq_read_hdd",
                &case,
                "degraded_mib_per_s",
                r.degraded_mib_s,
                None,
                Goal::AtLeast,
            )
            .md(Some(md_degraded))
            .note(note),
        );
    }
    rig.verify_with_failures()?;
    Ok(rows)
}

/// `periods` rotation periods of stripes on ten modelled HDDs sharing one clock.
pub fn rig(periods: u64) -> Result<(Rig<Hdd>, ManualClock)> {
    let spec = Spec {
        level: Level::Raid6,
        members: 10,
        chunk_bytes: 128 * KIB,
        stripe_size_bytes: 4 * KIB,
        member_bytes: periods * 10 * 128 * KIB,
    };
    let clock = ManualClock::new();
    let size = usize::try_from(spec.member_bytes)?;
    let members = (0..spec.members)
        .map(|i| {
            Throttled::new(
                MemoryMember::new(&format!("hdd{i}"), size),
                DiskModel::hdd_7200(),
                clock.clone(),
            )
        })
        .collect();
    Ok((Rig::new(&spec, members)?, clock))
}

/// Requests outstanding: one rotation period's worth of data.
fn iodepth(spec: &Spec, bs: u64) -> usize {
    usize::try_from(10 * spec.stripe_bytes() / bs).expect("fits")
}

/// Reads the whole array with `bs` requests, healthy and then with member `FAILED` failed,
/// each on a fresh engine; every read is verified.
pub fn measure(rig: &mut Rig<Hdd>, clock: &ManualClock, bs: u64) -> Result<Rates> {
    let (mut rates, mut seeks) = ([0.0; 2], [0.0; 2]);
    for (i, degraded) in [false, true].into_iter().enumerate() {
        rig.fresh_engine()?;
        if degraded {
            rig.fail(FAILED);
        }
        let total = rig.size_bytes();
        let reqs = (0..total).step_by(bs as usize).map(|at| Req::Read {
            sector: at / SECTOR_BYTES,
            bytes: usize::try_from(bs.min(total - at)).expect("fits"),
        });
        let start = clock.now_ns();
        rig.take_logs();
        rig.run(reqs, iodepth(&rig.spec, bs))?;
        let seconds = (clock.now_ns() - start) as f64 / 1e9;
        let logs = rig.take_logs();
        seeks[i] = logs.iter().map(|log| seeks_in(log)).sum::<usize>() as f64
            / (logs.iter().filter(|l| !l.is_empty()).count() as f64);
        rates[i] = total as f64 / (1u64 << 20) as f64 / seconds;
    }
    Ok(Rates {
        healthy_mib_s: rates[0],
        degraded_mib_s: rates[1],
        healthy_seeks: seeks[0],
        degraded_seeks: seeks[1],
    })
}

/// I/Os that do not start where the member's previous one ended: what the model charges a
/// seek for (the model serves I/Os in submission order; it does not reorder like NCQ).
fn seeks_in(log: &[Logged]) -> usize {
    log.windows(2)
        .filter(|w| w[0].offset_bytes + w[0].len_bytes as u64 != w[1].offset_bytes)
        .count()
}
