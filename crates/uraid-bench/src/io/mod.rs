//! `uraid bench io`: the member I/O each request class costs, measured on memory members so that
//! counts are exact, each figure beside its goal or theoretical minimum and md's figure (Linux
//! 6.12 on virtio disks, from issue 3 and the seeds), plus throughput on modelled disks in
//! simulated time and CPU per byte on memory members.
//!
//! Every workload reads back and verifies what it wrote, healthy and after members fail
//! (`rig.rs`). One row per figure; `--json` prints one JSON object per line.
//!
//! Families (one file each): `random_write` (seed 001, seed 004), `seq_write` (seed 003),
//! `read` (seed 000 counts, degraded random reads), `throughput` (seed 000 on modelled HDDs),
//! `cpu` (seed 002, parity share of full-stripe writes, worker scaling), `bitmap` (the
//! write-intent bitmap's cost on 4 KiB random writes).

mod bitmap;
pub mod cpu;
mod ppl;
pub mod random_write;
pub mod read;
mod rebuild;
pub mod recording;
pub mod rig;
pub mod seq_write;
pub mod throughput;
pub mod workers;

use anyhow::Result;
use serde::Serialize;
use std::io::Write;

pub struct IoBenchOptions {
    pub json: bool,
    /// Run only the families (or rows whose workload) named here; all when empty.
    pub only: Vec<String>,
    /// Smaller working sets: what the tests run (a smoke run, not the published figures).
    pub small: bool,
}

/// How a figure is judged against its goal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Goal {
    /// Lower is better; the goal is met at or below it.
    #[serde(rename = "<=")]
    AtMost,
    /// Higher is better; the goal is met at or above it.
    #[serde(rename = ">=")]
    AtLeast,
}

/// The array and workload a row was measured on.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Case {
    pub level: u8,
    pub members: usize,
    pub chunk_bytes: u64,
    pub stripe_size_bytes: u64,
    pub bs_bytes: u64,
    pub iodepth: usize,
    /// "healthy", or which members failed.
    pub state: String,
    pub pattern: &'static str,
}

/// One measured figure.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub family: &'static str,
    pub workload: &'static str,
    #[serde(flatten)]
    pub case: Case,
    pub figure: &'static str,
    pub value: f64,
    pub goal: Option<f64>,
    pub goal_is: Goal,
    /// The theoretical minimum where it is not the goal (e.g. without a journal).
    pub minimum: Option<f64>,
    /// md's figure for the same workload, where issue 3 or a seed gives one.
    pub md: Option<f64>,
    /// value / goal (value / minimum when there is no goal); absent when that is zero.
    pub ratio: Option<f64>,
    pub meets_goal: Option<bool>,
    pub note: Option<String>,
}

impl Row {
    /// A row judged against `goal` (tolerance 1e-9: counts are exact ratios of integers).
    #[must_use]
    pub fn new(
        family: &'static str,
        workload: &'static str,
        case: &Case,
        figure: &'static str,
        value: f64,
        goal: Option<f64>,
        goal_is: Goal,
    ) -> Row {
        let meets_goal = goal.map(|g| match goal_is {
            Goal::AtMost => value <= g + 1e-9,
            Goal::AtLeast => value >= g - 1e-9,
        });
        let mut row = Row {
            family,
            workload,
            case: case.clone(),
            figure,
            value,
            goal,
            goal_is,
            minimum: None,
            md: None,
            ratio: None,
            meets_goal,
            note: None,
        };
        row.ratio = ratio(value, goal);
        row
    }

    #[must_use]
    pub fn md(mut self, md: Option<f64>) -> Row {
        self.md = md;
        self
    }

    #[must_use]
    pub fn minimum(mut self, minimum: f64) -> Row {
        self.minimum = Some(minimum);
        if self.goal.is_none() {
            self.ratio = ratio(self.value, Some(minimum));
        }
        self
    }

    #[must_use]
    pub fn note(mut self, note: impl Into<String>) -> Row {
        self.note = Some(note.into());
        self
    }
}

fn ratio(value: f64, base: Option<f64>) -> Option<f64> {
    base.filter(|b| *b != 0.0).map(|b| value / b)
}

/// A family of workloads: its name and the function that measures its rows.
type Family = (&'static str, fn(&IoBenchOptions) -> Result<Vec<Row>>);

const FAMILIES: [Family; 9] = [
    ("random_write", random_write::run),
    ("seq_write", seq_write::run),
    ("read", read::run),
    ("throughput", throughput::run),
    ("cpu", cpu::run),
    ("workers", workers::run),
    ("rebuild", rebuild::run),
    ("bitmap", bitmap::run),
    ("ppl", ppl::run),
];

/// Runs the selected families and prints their rows as they come.
pub fn run(opts: &IoBenchOptions, out: &mut dyn Write) -> Result<()> {
    if !opts.json {
        print_header(out)?;
    }
    let (mut rows, mut met, mut missed) = (0, 0, 0);
    for (name, family) in FAMILIES {
        if !opts.only.is_empty() && !opts.only.iter().any(|o| o == name) {
            continue;
        }
        for row in family(opts)? {
            print_row(out, &row, opts.json)?;
            rows += 1;
            match row.meets_goal {
                Some(true) => met += 1,
                Some(false) => missed += 1,
                None => {}
            }
        }
    }
    if opts.json {
        let summary = serde_json::json!({"family": "summary", "rows": rows, "meet_goal": met, "miss": missed});
        writeln!(out, "{summary}")?;
    } else {
        writeln!(out, "{rows} rows: {met} meet their goal, {missed} miss")?;
    }
    Ok(())
}

fn print_header(out: &mut dyn Write) -> Result<()> {
    writeln!(out, "member I/O per request class on memory members (counts exact), throughput on")?;
    writeln!(out, "modelled HDDs in simulated time (deterministic), CPU time on memory members")?;
    writeln!(
        out,
        "{:<13} {:<26} {:<34} {:>10} {:>12} {:>8} {:>7}  {:<4}",
        "workload", "case", "figure", "value", "goal", "md", "ratio", ""
    )?;
    Ok(())
}

fn print_row(out: &mut dyn Write, row: &Row, json: bool) -> Result<()> {
    if json {
        writeln!(out, "{}", serde_json::to_string(row)?)?;
        return Ok(());
    }
    let c = &row.case;
    let mut case = format!("r{} x{} {} qd{}", c.level, c.members, size(c.bs_bytes), c.iodepth);
    if c.stripe_size_bytes != 4096 {
        case = format!("{case} su{}", size(c.stripe_size_bytes));
    }
    if c.state.contains("failed") {
        case.push_str(" deg");
    }
    let goal = match (row.goal, row.minimum) {
        (Some(g), _) => {
            format!("{} {}", if row.goal_is == Goal::AtMost { "<=" } else { ">=" }, num(g))
        }
        (None, Some(m)) => format!("min {}", num(m)),
        (None, None) => String::new(),
    };
    let md = row.md.map(num).unwrap_or_default();
    let ratio = row.ratio.map(|r| format!("{r:.2}")).unwrap_or_default();
    let mark = match row.meets_goal {
        Some(true) => "ok",
        Some(false) => "MISS",
        None => "",
    };
    writeln!(
        out,
        "{:<13} {:<26} {:<34} {:>10} {:>12} {:>8} {:>7}  {:<4}",
        row.workload,
        case,
        row.figure,
        num(row.value),
        goal,
        md,
        ratio,
        mark
    )?;
    Ok(())
}

fn num(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 && x.abs() < 1e9 {
        format!("{x:.0}")
    } else {
        format!("{x:.3}")
    }
}

fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 { format!("{}M", bytes >> 20) } else { format!("{}K", bytes >> 10) }
}

/// xorshift64*: the workloads' random positions, the same on every run.
pub struct Prng(u64);

impl Prng {
    #[must_use]
    pub fn new(seed: u64) -> Prng {
        Prng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n small: the modulo bias is below 2^-40).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "an empty range");
        self.next_u64() % n
    }

    /// Fisher-Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}
