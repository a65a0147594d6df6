//! `uraid bench parity`: uraid's parity kernels against Intel ISA-L, both timed in one run on
//! the same buffers, cache-resident (one stripe reused) and streaming (a working set far larger
//! than the caches, walked stripe by stripe). Outputs are checked against each other and against
//! the scalar reference before anything is timed.
//!
//! Figures are GB/s of data (data blocks x block size per second; for `pq_rmw` the one updated
//! block). Streaming rows also carry a memory-bus reference: the same stripes with the op's
//! input blocks read one after another and its outputs written, no arithmetic, timed in the
//! same interleaved run (see docs/parity-bench.md).

use crate::arena::{Arena, StripeBufs};
use crate::isal::Isal;
use crate::timing::Timing;
use anyhow::{Result, ensure};
use serde::Serialize;
use std::io::Write;
use uraid_parity::{Backend, Block, gf};

pub struct ParityBenchOptions {
    pub quick: bool,
    pub json: bool,
    /// Run only the rows whose op or mode is named here (all rows when empty).
    pub only: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Op {
    Xor,
    Pq,
    PqRmw,
    #[serde(rename = "recov_2data")]
    Recov2Data,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Cache,
    Stream,
}

#[derive(Serialize)]
struct Row {
    op: Op,
    mode: Mode,
    data_blocks: usize,
    block_bytes: usize,
    uraid_gbps: f64,
    isal_gbps: f64,
    ratio: f64,
    backend: &'static str,
    goal: String,
    meets_goal: bool,
    /// The reference kernel (the same bytes read and written, no arithmetic) on the same
    /// stripes: the memory bus's limit in streaming rows, the caches' in cache rows.
    bound_gbps: f64,
    bound_fraction: f64,
    /// The machine's single-core sequential memory read rate, measured in this run.
    mem_read_gbps: f64,
    /// P+Q in cache: the faster XOR (uraid's or ISA-L's) of the same blocks in this run, and
    /// whether the goal (twice ISA-L's P+Q) lies above it. P+Q reads what XOR reads and
    /// writes one block more: such a goal asks for a P+Q faster than either side's XOR.
    #[serde(skip_serializing_if = "Option::is_none")]
    xor_gbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    goal_above_xor: Option<bool>,
}

/// The machine's memory bus, measured on the streaming arena.
#[derive(Clone, Copy, Serialize)]
struct MemoryRates {
    read_gbps: f64,
    write_gbps: f64,
}

pub fn run(opts: &ParityBenchOptions, out: &mut dyn Write) -> Result<()> {
    let isal = Isal::load()?;
    let timing = Timing::new(opts.quick);
    let stream_bytes = if opts.quick { 32 << 20 } else { 512 << 20 };
    let backend = uraid_parity::backend();
    let mut rows = Vec::new();
    let mut warm = Arena::new(8, 4096, 0, 1);
    let warm_stripe = &mut warm.stripes()[0];
    let warm_for = std::time::Duration::from_millis(if opts.quick { 10 } else { 500 });
    Timing::warm_up(warm_for, || {
        uraid_parity::gen_syndrome(warm_stripe.p, warm_stripe.q, &warm_stripe.present);
    });
    let memory = measure_memory(stream_bytes, timing);
    if opts.json {
        let line = serde_json::json!({"op": "memory", "mode": "stream", "backend": backend.name(),
            "mem_read_gbps": round(memory.read_gbps), "mem_write_gbps": round(memory.write_gbps)});
        writeln!(out, "{line}")?;
    } else {
        writeln!(out, "parity kernels: uraid ({}) vs ISA-L, GB/s of data", backend.name())?;
        writeln!(
            out,
            "memory bus: read {:.1} GB/s, write {:.1} GB/s",
            memory.read_gbps, memory.write_gbps
        )?;
        writeln!(
            out,
            "{:<11} {:<6} {:>4} {:>8} {:>8} {:>8} {:>6}  {:<26} of the reference",
            "op", "mode", "n", "block", "uraid", "isa-l", "ratio", "goal"
        )?;
    }
    for (op, mode, n, len) in cases(opts.quick) {
        let wanted = [name(op), name(mode)];
        if !opts.only.is_empty() && !opts.only.iter().any(|o| wanted.contains(o)) {
            continue;
        }
        let bytes = if mode == Mode::Stream { stream_bytes } else { 0 };
        let mut arena = Arena::new(n, len, bytes, (n * len) as u64);
        let mut row = measure(op, mode, &mut arena, &isal, backend, timing)?;
        row.mem_read_gbps = round(memory.read_gbps);
        compare_with_xor(&mut row, &rows);
        print_row(out, &row, opts.json)?;
        rows.push(row);
    }
    let met = rows.iter().filter(|r| r.meets_goal).count();
    let above = rows.iter().filter(|r| !r.meets_goal && r.goal_above_xor == Some(true)).count();
    if opts.json {
        let line = serde_json::json!({"op": "summary", "rows": rows.len(), "meet_goal": met,
            "missed_above_xor": above});
        writeln!(out, "{line}")?;
    } else {
        writeln!(
            out,
            "{met} of {} rows meet their goal; {above} of the misses ask P+Q for more than XOR \
             of the same blocks reached",
            rows.len()
        )?;
    }
    Ok(())
}

/// For P+Q in cache: the XOR rows of the same blocks measured earlier in this run (`cases`
/// puts XOR first), and whether twice ISA-L's P+Q is above the faster of them.
fn compare_with_xor(row: &mut Row, rows: &[Row]) {
    if (row.op, row.mode) != (Op::Pq, Mode::Cache) {
        return;
    }
    let Some(xor) = rows.iter().find(|r| {
        (r.op, r.mode, r.data_blocks, r.block_bytes)
            == (Op::Xor, Mode::Cache, row.data_blocks, row.block_bytes)
    }) else {
        return;
    };
    let xor_gbps = xor.uraid_gbps.max(xor.isal_gbps);
    row.xor_gbps = Some(xor_gbps);
    row.goal_above_xor = Some(IN_CACHE_GOAL * row.isal_gbps > xor_gbps);
}

fn cases(quick: bool) -> Vec<(Op, Mode, usize, usize)> {
    let widths: &[usize] = if quick { &[4, 16] } else { &[4, 8, 16] };
    let sizes: &[usize] = if quick { &[4096, 65536] } else { &[4096, 65536, 1 << 20] };
    let mut cases = Vec::new();
    for op in [Op::Xor, Op::Pq] {
        for mode in [Mode::Cache, Mode::Stream] {
            for &n in widths {
                for &len in sizes {
                    cases.push((op, mode, n, len));
                }
            }
        }
    }
    cases.extend([(Op::PqRmw, Mode::Cache, 8, 4096), (Op::PqRmw, Mode::Cache, 8, 65536)]);
    for &n in widths {
        for &len in &sizes[..2] {
            cases.push((Op::Recov2Data, Mode::Cache, n, len));
        }
    }
    cases.push((Op::Recov2Data, Mode::Stream, 8, 65536));
    cases
}

fn measure(
    op: Op,
    mode: Mode,
    arena: &mut Arena,
    isal: &Isal,
    backend: Backend,
    timing: Timing,
) -> Result<Row> {
    let (n, len) = (arena.data_blocks, arena.block_bytes);
    let mut stripes = arena.stripes();
    for s in &mut stripes {
        backend.gen_syndrome(s.p, s.q, &present(&s.data));
    }
    let kernels = Kernels::new(op, isal, n)?;
    kernels.verify(&mut stripes[0])?;
    let count = if mode == Mode::Cache { 1 } else { stripes.len() };
    let mut failure = None;
    let [uraid, isa, touch] = timing.compare(|who, i| {
        if let Err(e) = kernels.run(who, &mut stripes[i % count]) {
            failure.get_or_insert(e);
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let data_bytes = if op == Op::PqRmw { len } else { n * len } as f64;
    let (uraid_gbps, isal_gbps) = (data_bytes / uraid / 1e9, data_bytes / isa / 1e9);
    let ratio = uraid_gbps / isal_gbps;
    let bound_gbps = data_bytes / touch / 1e9;
    let bound_fraction = uraid_gbps / bound_gbps;
    let (goal, meets_goal) = goal(op, mode, ratio, bound_fraction);
    Ok(Row {
        op,
        mode,
        data_blocks: n,
        block_bytes: len,
        uraid_gbps: round(uraid_gbps),
        isal_gbps: round(isal_gbps),
        ratio: round(ratio),
        backend: backend.name(),
        goal,
        meets_goal,
        bound_gbps: round(bound_gbps),
        bound_fraction: round(bound_fraction),
        mem_read_gbps: 0.0,
        xor_gbps: None,
        goal_above_xor: None,
    })
}

/// How many times ISA-L's speed P+Q and recovery in cache must reach (the goal).
const IN_CACHE_GOAL: f64 = 2.0;

/// The goals: never slower than ISA-L; P+Q and recovery in cache at least twice as
/// fast; streaming at 90% of what the memory bus allows (the reference kernel).
fn goal(op: Op, mode: Mode, ratio: f64, bound_fraction: f64) -> (String, bool) {
    match mode {
        Mode::Stream => {
            ("ratio >= 1.0, bound >= 90%".into(), ratio >= 1.0 && bound_fraction >= 0.9)
        }
        Mode::Cache if matches!(op, Op::Pq | Op::Recov2Data) => {
            (format!("ratio >= {IN_CACHE_GOAL:.1}"), ratio >= IN_CACHE_GOAL)
        }
        Mode::Cache => ("ratio >= 1.0".into(), ratio >= 1.0),
    }
}

/// Pieces in which the reference writes: `xor_gen` of no sources writes zeros, with ordinary
/// stores in calls this small.
const REF_STORE_CHUNK: usize = uraid_parity::ORDINARY_STORES_BELOW / 2;

fn measure_memory(bytes: usize, timing: Timing) -> MemoryRates {
    let mut arena = Arena::new(1, 1 << 20, bytes, 7);
    let buf = arena.as_mut_slice();
    let gb = buf.len() as f64 / 1e9;
    let (mut read, mut write) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..timing.samples.max(3) {
        let start = std::time::Instant::now();
        std::hint::black_box(read_all(buf));
        read = read.min(start.elapsed().as_secs_f64());
        // Ordinary stores, as the kernels do (so a written line is also read for ownership);
        // `fill` may use non-temporal stores and would flatter the bus.
        let start = std::time::Instant::now();
        for chunk in buf.chunks_mut(REF_STORE_CHUNK) {
            uraid_parity::xor_gen(chunk, &[]);
        }
        std::hint::black_box(&buf[..]);
        write = write.min(start.elapsed().as_secs_f64());
    }
    MemoryRates { read_gbps: gb / read, write_gbps: gb / write }
}

/// Reads every byte: XOR-folds 64-byte lines into eight 64-bit lanes, which the compiler turns
/// into vector loads (AVX2 where the CPU has it, so that the reference is not load-bound in cache).
fn read_all(buf: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above.
        return unsafe { read_all_avx2(buf) };
    }
    read_all_lanes(buf)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn read_all_avx2(buf: &[u8]) -> u64 {
    read_all_lanes(buf)
}

#[inline(always)]
fn read_all_lanes(buf: &[u8]) -> u64 {
    let mut lanes = [0u64; 8];
    for line in buf.chunks_exact(64) {
        for (lane, word) in lanes.iter_mut().zip(line.chunks_exact(8)) {
            *lane ^= u64::from_le_bytes(word.try_into().expect("8 bytes"));
        }
    }
    lanes.iter().fold(0, |x, l| x ^ l)
}

fn present<'a>(data: &[&'a [u8]]) -> Vec<Option<&'a [u8]>> {
    data.iter().map(|d| Some(*d)).collect()
}

/// One op as each contender runs it, with what it needs prepared up front (tables, views).
struct Kernels<'a> {
    op: Op,
    isal: &'a Isal,
    /// ISA-L tables: `[1, 2^1]` for the rmw update; the 2 x n recovery matrix.
    tables: Vec<u8>,
    /// The rmw slot and the two lost slots of recovery.
    slot: usize,
    lost: (usize, usize),
}

impl<'a> Kernels<'a> {
    fn new(op: Op, isal: &'a Isal, n: usize) -> Result<Kernels<'a>> {
        ensure!(n >= 2, "parity benchmarks need at least 2 data blocks");
        let (slot, lost) = (1, (0, 1));
        let tables = match op {
            Op::PqRmw => isal.init_tables(1, 2, &[1, gf::exp2(slot)]),
            Op::Recov2Data => isal.init_tables(n, 2, &recovery_matrix(n, lost)),
            Op::Xor | Op::Pq => Vec::new(),
        };
        Ok(Kernels { op, isal, tables, slot, lost })
    }

    /// `who` 0 is uraid, 1 is ISA-L, 2 the memory-bus reference.
    fn run(&self, who: usize, s: &mut StripeBufs<'_>) -> Result<()> {
        if who == 2 {
            self.touch(s);
            return Ok(());
        }
        match (self.op, who) {
            (Op::Xor, 0) => uraid_parity::xor_gen(s.p, &s.data),
            (Op::Xor, _) => self.isal.xor_gen(s.p, &s.data)?,
            (Op::Pq, 0) => uraid_parity::gen_syndrome(s.p, s.q, &s.present),
            (Op::Pq, _) => self.isal.pq_gen(s.p, s.q, &s.data)?,
            (Op::PqRmw, 0) => {
                uraid_parity::pq_update(s.p, s.q, self.slot, s.data[self.slot], s.scratch[0]);
            }
            (Op::PqRmw, _) => {
                let [new, _] = &s.scratch;
                let old = s.data[self.slot];
                self.isal.encode_update(1, 0, &self.tables, old, &mut [&mut *s.p, &mut *s.q])?;
                self.isal.encode_update(1, 0, &self.tables, new, &mut [&mut *s.p, &mut *s.q])?;
            }
            (Op::Recov2Data, 0) => {
                let [sx, sy] = &mut s.scratch;
                let mut data: Vec<Block<'_>> = s.data.iter().map(|d| Block::Present(d)).collect();
                data[self.lost.0] = Block::Lost(sx);
                data[self.lost.1] = Block::Lost(sy);
                uraid_parity::raid6_recover(
                    &mut data,
                    &mut Block::Present(s.p),
                    &mut Block::Present(s.q),
                );
            }
            (Op::Recov2Data, _) => {
                let mut survivors: Vec<&[u8]> = s.data.clone();
                survivors.retain(|d| {
                    !std::ptr::eq(*d, s.data[self.lost.0]) && !std::ptr::eq(*d, s.data[self.lost.1])
                });
                survivors.extend([&*s.p, &*s.q]);
                let [sx, sy] = &mut s.scratch;
                self.isal.encode(&self.tables, &survivors, &mut [&mut **sx, &mut **sy])?;
            }
        }
        Ok(())
    }

    /// The memory-bus reference: reads the op's input blocks one after another and writes its
    /// output blocks, with no arithmetic. Whatever a kernel does beyond this costs compute.
    fn touch(&self, s: &mut StripeBufs<'_>) {
        let mut sum = 0;
        let outputs: &mut [&mut [u8]] = match self.op {
            Op::Xor => {
                s.data.iter().for_each(|d| sum ^= read_all(d));
                &mut [&mut *s.p]
            }
            Op::Pq => {
                s.data.iter().for_each(|d| sum ^= read_all(d));
                &mut [&mut *s.p, &mut *s.q]
            }
            Op::PqRmw => {
                sum = read_all(s.data[self.slot])
                    ^ read_all(s.scratch[0])
                    ^ read_all(s.p)
                    ^ read_all(s.q);
                &mut [&mut *s.p, &mut *s.q]
            }
            Op::Recov2Data => {
                let skip = [self.lost.0, self.lost.1];
                s.data
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| !skip.contains(i))
                    .for_each(|(_, d)| sum ^= read_all(d));
                sum ^= read_all(s.p) ^ read_all(s.q);
                let [sx, sy] = &mut s.scratch;
                &mut [&mut **sx, &mut **sy]
            }
        };
        for out in outputs {
            // Ordinary stores (see REF_STORE_CHUNK).
            for chunk in out.chunks_mut(REF_STORE_CHUNK) {
                uraid_parity::xor_gen(chunk, &[]);
            }
        }
        std::hint::black_box(sum);
    }

    /// Both contenders produce the right answer on this stripe (checked against the scalar
    /// reference), before anything is timed.
    fn verify(&self, s: &mut StripeBufs<'_>) -> Result<()> {
        let len = s.p.len();
        for who in 0..2 {
            let (p0, q0) = (s.p.to_vec(), s.q.to_vec());
            self.run(who, s)?;
            let (mut p, mut q) = (vec![0u8; len], vec![0u8; len]);
            let ok = match self.op {
                Op::Xor => {
                    Backend::Scalar.xor_gen(&mut p, &s.data);
                    s.p[..] == p[..]
                }
                Op::Pq => {
                    Backend::Scalar.gen_syndrome(&mut p, &mut q, &present(&s.data));
                    s.p[..] == p[..] && s.q[..] == q[..]
                }
                Op::PqRmw => {
                    let mut data = present(&s.data);
                    data[self.slot] = Some(&*s.scratch[0]);
                    Backend::Scalar.gen_syndrome(&mut p, &mut q, &data);
                    s.p[..] == p[..] && s.q[..] == q[..]
                }
                Op::Recov2Data => {
                    *s.scratch[0] == *s.data[self.lost.0] && *s.scratch[1] == *s.data[self.lost.1]
                }
            };
            ensure!(
                ok,
                "{} gave a wrong {:?} result; nothing timed",
                ["uraid", "ISA-L"][who],
                self.op
            );
            s.p.copy_from_slice(&p0);
            s.q.copy_from_slice(&q0);
        }
        Ok(())
    }
}

/// The 2 x n matrix that ISA-L's encoder needs to rebuild data blocks `x` and `y` from the
/// survivors (the other data blocks in order, then P, then Q):
/// `d_x = A P' ^ B Q'`, `d_y = P' ^ d_x`, with `B = 1/(g^x ^ g^y)`, `A = g^y B`, and P', Q'
/// expanded into per-survivor coefficients.
fn recovery_matrix(n: usize, (x, y): (usize, usize)) -> Vec<u8> {
    let b = gf::inv(gf::exp2(x) ^ gf::exp2(y));
    let a = gf::mul(gf::exp2(y), b);
    let others = (0..n).filter(|&i| i != x && i != y);
    let mut row_x: Vec<u8> = others.clone().map(|i| a ^ gf::mul(b, gf::exp2(i))).collect();
    row_x.extend([a, b]);
    let mut row_y: Vec<u8> = others.map(|i| 1 ^ a ^ gf::mul(b, gf::exp2(i))).collect();
    row_y.extend([1 ^ a, b]);
    row_x.extend(row_y);
    row_x
}

fn print_row(out: &mut dyn Write, row: &Row, json: bool) -> Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string(row)?)?;
        return Ok(());
    }
    let above = match (row.meets_goal, row.goal_above_xor, row.xor_gbps) {
        (false, Some(true), Some(xor)) => format!("; the goal is above XOR's {xor:.1}"),
        _ => String::new(),
    };
    let mem = format!("{:.0}% of {:.1}{above}", row.bound_fraction * 100.0, row.bound_gbps);
    let mark = if row.meets_goal { "ok" } else { "MISS" };
    let size = if row.block_bytes >= 1 << 20 {
        format!("{}M", row.block_bytes >> 20)
    } else {
        format!("{}K", row.block_bytes >> 10)
    };
    let (op, mode) = (name(row.op), name(row.mode));
    writeln!(
        out,
        "{:<11} {:<6} {:>4} {:>8} {:>8.1} {:>8.1} {:>6.2}  {:<26} {:<4} {mem}",
        op, mode, row.data_blocks, size, row.uraid_gbps, row.isal_gbps, row.ratio, row.goal, mark
    )?;
    Ok(())
}

/// An op's or mode's name as it appears in the JSON rows.
fn name(v: impl Serialize) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
