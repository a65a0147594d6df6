//! Rebuild throughput on throttled members (issue 4): a RAID6 of 6 members, each a memory
//! member behind `Throttled` (a FIFO disk model on the wall clock: 200 MB/s, 100 us latency,
//! no seek, i.e. a bandwidth-bound SSD), loses member 2; a throttled spare takes its slot and
//! the lifecycle's sync process (`uraid_md::sync::walk`, the same code `MdArray` runs)
//! rebuilds it, once on an idle array and once while 4 client threads issue random 4 KiB
//! reads across the whole array. Figure: rebuild bytes per second over the spare's write
//! bandwidth (goals: 0.9 idle, 0.5 under load; md users report 10 MB/s under load).
//!
//! One worker: `Throttled` models one disk per instance, and each worker opens its own
//! instance of every member, so two workers would model two disks per member.

use super::rig::Spec;
use super::{Goal, IoBenchOptions, Row};
use anyhow::Result;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;
use uraid_core::Level;
use uraid_core::array::{ArrayConfig, SyncKind};
use uraid_io::{DiskModel, Member, RealClock, Throttled};
use uraid_md::sync::{SyncControl, walk};
use uraid_runtime::{MemberSource, Runtime, RuntimeConfig, SharedMemory};

const FAMILY: &str = "rebuild";
const BANDWIDTH: u64 = 200_000_000;
const LOAD_THREADS: u64 = 4;

fn model() -> DiskModel {
    DiskModel { bandwidth_bytes_per_s: BANDWIDTH, iops_max: 0, latency_ns: 100_000, seek_ns: 0 }
}

/// Members 0..n on shared memory, each opened behind its own disk model; `spare` in slot 2
/// once it is given.
struct ThrottledSource {
    media: Vec<SharedMemory>,
}

impl MemberSource for ThrottledSource {
    fn member_count(&self) -> usize {
        self.media.len()
    }

    fn open(&self, member: usize) -> std::io::Result<Box<dyn Member>> {
        let m = self.media[member].member();
        Ok(Box::new(Throttled::new(m, model(), RealClock::new())))
    }
}

pub fn run(opts: &IoBenchOptions) -> Result<Vec<Row>> {
    let member_bytes: u64 = if opts.small { 24 << 20 } else { 128 << 20 };
    let spec = Spec {
        level: Level::Raid6,
        members: 6,
        chunk_bytes: 64 << 10,
        stripe_size_bytes: 4096,
        member_bytes,
    };
    let mut rows = Vec::new();
    for (load, goal) in [(false, 0.9), (true, 0.5)] {
        let (ratio, note) = measure(&spec, load)?;
        let mut case = spec.case(4096, if load { LOAD_THREADS as usize } else { 0 }, "rebuild");
        case.state = if load { "rebuilding, random 4K reads" } else { "rebuilding, idle" }.into();
        let workload = if load { "rebuild_loaded" } else { "rebuild_idle" };
        let row = Row::new(
            FAMILY,
            workload,
            &case,
            "rebuild_over_spare_bw",
            ratio,
            Some(goal),
            Goal::AtLeast,
        );
        rows.push(row.note(note));
    }
    Ok(rows)
}

fn measure(spec: &Spec, load: bool) -> Result<(f64, String)> {
    let array = ArrayConfig {
        geometry: spec.geometry(),
        stripe_size_bytes: spec.stripe_size_bytes,
        stripe_cache_size: 1024,
        member_sectors: spec.member_bytes / 512,
    };
    let cfg = RuntimeConfig {
        array,
        workers: Some(1),
        data_offset_bytes: 0,
        write_intent: None,
        record_failures: false,
        write_back: true,
    };
    let size = usize::try_from(spec.member_bytes)?;
    let media = (0..spec.members).map(|i| SharedMemory::new(&format!("m{i}"), size)).collect();
    let rt = Runtime::start(&cfg, &ThrottledSource { media })?;
    rt.fail_member(2);
    let spare = ThrottledSource {
        media: (0..spec.members)
            .map(|i| SharedMemory::new(&format!("spare{i}"), if i == 2 { size } else { 0 }))
            .collect(),
    };
    rt.replace_member(2, &spare)?;
    rt.start_recovery(2, 0);
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let control = SyncControl::default();
    let member_sectors = rt.member_sectors();
    let seconds = std::thread::scope(|s| -> Result<f64> {
        if load {
            for t in 0..LOAD_THREADS {
                let (rt, stop, reads) = (&rt, &stop, &reads);
                s.spawn(move || {
                    let mut rng = super::Prng::new(t + 1);
                    let blocks = rt.size_bytes() / 4096;
                    while !stop.load(Ordering::Acquire) {
                        let at = rng.below(blocks) * 4096;
                        rt.read_at(at, 4096).expect("a random read");
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        }
        let start = Instant::now();
        let walked = walk(
            &rt,
            SyncKind::Recovery,
            &[(0, member_sectors)],
            spec.chunk_bytes / 512,
            &control,
            &mut |_, at| rt.set_recovery_offset(2, at),
        );
        let seconds = start.elapsed().as_secs_f64();
        stop.store(true, Ordering::Release);
        walked?;
        Ok(seconds)
    })?;
    let rate = spec.member_bytes as f64 / seconds;
    let read_rate = reads.load(Ordering::Relaxed) as f64 / seconds;
    let note = format!(
        "spare written at {:.0} MB/s of its {} MB/s; {:.0} random reads/s from the load",
        rate / 1e6,
        BANDWIDTH / 1_000_000,
        read_rate
    );
    Ok((rate / BANDWIDTH as f64, note))
}
