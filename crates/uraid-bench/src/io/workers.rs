//! Worker scaling (issue 3, "several worker threads"): the multi-threaded runtime
//! (`uraid-runtime`) with 1 and with 2 workers, on the same shared memory members, RAID5 of 8
//! (chunk 128 KiB, 7 data: 896 KiB rows), sequential full-row writes then sequential full-row
//! reads, 8 requests in flight from one client thread.
//!
//! Timing: wall clock (the work runs on the worker threads, so this thread's CPU time says
//! nothing), the two runtimes' passes interleaved, median per contender, as `timing.rs` does.
//! The first pass of each is verified: every row read back equals what was written. Each
//! request is one row, so no request is cut and no byte is copied by the runtime (asserted).

use super::rig::Spec;
use super::{Goal, IoBenchOptions, Row};
use crate::arena::fill_random;
use anyhow::{Result, ensure};
use std::sync::mpsc;
use std::time::Instant;
use uraid_core::Level;
use uraid_core::array::ArrayConfig;
use uraid_runtime::{Op, Runtime, RuntimeConfig, SharedMemorySource};

const FAMILY: &str = "workers";
const KIB: u64 = 1024;
const IODEPTH: usize = 8;

pub fn run(opts: &IoBenchOptions) -> Result<Vec<Row>> {
    let (bytes, samples) = if opts.small { (7 << 20, 3) } else { (112 << 20, 9) };
    let spec = Spec {
        level: Level::Raid5,
        members: 8,
        chunk_bytes: 128 * KIB,
        stripe_size_bytes: 4 * KIB,
        member_bytes: bytes / 7,
    };
    let row = spec.stripe_bytes() as usize;
    let mut rigs = [Contender::new(&spec, 1)?, Contender::new(&spec, 2)?];
    let rows = rigs[0].rt.size_bytes() as usize / row;
    let mut data: Vec<Vec<u8>> = (0..rows)
        .map(|r| {
            let mut buf = vec![0u8; row];
            fill_random(&mut buf, r as u64);
            buf
        })
        .collect();
    for rig in &mut rigs {
        rig.pass(&mut data, true)?;
        let mut back: Vec<Vec<u8>> = (0..rows).map(|_| vec![0; row]).collect();
        rig.pass(&mut back, false)?;
        ensure!(back == data, "{} workers: rows read back differ", rig.workers);
    }
    let mut times = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
    let mut back: Vec<Vec<u8>> = (0..rows).map(|_| vec![0; row]).collect();
    for _ in 0..samples {
        for (who, rig) in rigs.iter_mut().enumerate() {
            times[who][0].push(rig.pass(&mut data, true)?);
            times[who][1].push(rig.pass(&mut back, false)?);
        }
    }
    for rig in &rigs {
        ensure!(rig.rt.stats().split_bytes_copied == 0, "one-row requests are never cut");
    }
    let user = (rows * row) as f64;
    let gbps = |t: &mut Vec<f64>| {
        t.sort_by(f64::total_cmp);
        user / t[t.len() / 2] / 1e9
    };
    let [[w1, r1], [w2, r2]] = times.map(|mut kind| kind.each_mut().map(gbps));
    Ok(vec![
        row_for(&spec, "seq_write_workers", "write_2_over_1_workers", w1, w2, samples),
        row_for(&spec, "seq_read_workers", "read_2_over_1_workers", r1, r2, samples),
    ])
}

fn row_for(
    spec: &Spec,
    workload: &'static str,
    figure: &'static str,
    one: f64,
    two: f64,
    samples: usize,
) -> Row {
    let mut case = spec.case(spec.stripe_bytes(), IODEPTH, "sequential full stripes");
    "healthy, shared memory members".clone_into(&mut case.state);
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let note = format!(
        "wall clock, median of {samples} interleaved passes, {cpus} CPUs: 1 worker {one:.2} \
         GB/s, 2 workers {two:.2} GB/s"
    );
    Row::new(FAMILY, workload, &case, figure, two / one, None, Goal::AtLeast)
        .minimum(1.0)
        .note(note)
}

/// One runtime on its own members.
struct Contender {
    rt: Runtime,
    workers: usize,
}

impl Contender {
    fn new(spec: &Spec, workers: usize) -> Result<Contender> {
        let array = ArrayConfig {
            geometry: spec.geometry(),
            stripe_size_bytes: spec.stripe_size_bytes,
            stripe_cache_size: 256,
            member_sectors: spec.member_bytes / 512,
        };
        let cfg = RuntimeConfig {
            array,
            workers: Some(workers),
            data_offset_bytes: 0,
            write_intent: None,
            record_failures: false,
            write_back: true,
        };
        let source = SharedMemorySource::new(spec.members, spec.member_bytes as usize);
        Ok(Contender { rt: Runtime::start(&cfg, &source)?, workers })
    }

    /// Writes (or reads into) `bufs[r]` at row r for every row, `IODEPTH` in flight; each
    /// buffer comes back to its slot. Returns the wall-clock seconds.
    fn pass(&mut self, bufs: &mut [Vec<u8>], write: bool) -> Result<f64> {
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        let (mut next, mut done) = (0, 0);
        while done < bufs.len() {
            while next < bufs.len() && next - done < IODEPTH {
                let buf = std::mem::take(&mut bufs[next]);
                let offset_bytes = (next * buf.len()) as u64;
                let op = if write {
                    Op::Write { offset_bytes, buf, fua: false }
                } else {
                    Op::Read { offset_bytes, buf }
                };
                self.rt.submit_tagged(op, next as u64, &tx);
                next += 1;
            }
            let (tag, c) = rx.recv()?;
            c.result?;
            bufs[usize::try_from(tag)?] = c.buf;
            done += 1;
        }
        Ok(start.elapsed().as_secs_f64())
    }
}
