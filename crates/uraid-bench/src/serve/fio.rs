//! fio with its nbd engine (libnbd): the four jobs of issue 5 section 4 and a 4 KiB stream, run
//! as a child process with `--output-format=json`, and what we read back from its report.
//!
//! Every target gets the same command line but for the URI: same seed for random offsets
//! (fio's `randrepeat` default), same region (the whole export), same runtime.

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use std::process::Command;

/// One fio workload.
#[derive(Clone, Copy, Debug)]
pub struct Job {
    pub name: &'static str,
    /// fio's `rw=`.
    pub rw: &'static str,
    pub bs_bytes: u64,
    pub iodepth: usize,
}

impl Job {
    #[must_use]
    pub fn is_read(&self) -> bool {
        self.rw.contains("read")
    }

    #[must_use]
    pub fn is_sequential(&self) -> bool {
        !self.rw.starts_with("rand")
    }
}

/// Issue 5 section 4's jobs: 1 MiB sequential at iodepth 16, 4 KiB random at iodepth 32; and
/// (since the eighth session of 2026-11-28) `fio --rw=write --bs=4k --iodepth=16`, a stream of
/// partial-stripe writes, which the write-back holds until the stream fills their stripes.
pub const JOBS: [Job; 5] = [
    Job { name: "seq_read", rw: "read", bs_bytes: 1 << 20, iodepth: 16 },
    Job { name: "seq_write", rw: "write", bs_bytes: 1 << 20, iodepth: 16 },
    Job { name: "rand_read", rw: "randread", bs_bytes: 4 << 10, iodepth: 32 },
    Job { name: "rand_write", rw: "randwrite", bs_bytes: 4 << 10, iodepth: 32 },
    Job { name: "seq_write_4k", rw: "write", bs_bytes: 4 << 10, iodepth: 16 },
];

/// How long each measurement runs.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub runtime_ms: u64,
    /// Run before measuring (connection set-up, first requests), not counted.
    pub ramp_ms: u64,
}

/// What one fio run measured (the job's direction only).
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    pub bytes_per_s: f64,
    pub iops: f64,
    pub lat_mean_ns: f64,
    pub lat_p99_ns: f64,
}

/// Why fio cannot run here, if it cannot.
#[must_use]
pub fn missing() -> Option<String> {
    match Command::new("fio").arg("--enghelp=nbd").output() {
        Err(e) => Some(format!("fio is not installed ({e})")),
        Ok(o) if !o.status.success() => Some("this fio has no nbd engine".into()),
        Ok(_) => None,
    }
}

/// Writes the whole export once (1 MiB sequential), so reads hit written data everywhere.
pub fn prefill(uri: &str, size_bytes: u64) -> Result<()> {
    let mut cmd = base(uri, "prefill", size_bytes);
    cmd.args(["--rw=write", "--bs=1M", "--iodepth=16"]);
    let report = run_fio(&mut cmd)?;
    let written = report["jobs"][0]["write"]["io_bytes"].as_u64().unwrap_or(0);
    ensure!(written == size_bytes, "prefill wrote {written} of {size_bytes} bytes through {uri}");
    Ok(())
}

/// Runs `job` on the whole export for `timing`.
pub fn measure(uri: &str, job: &Job, size_bytes: u64, timing: Timing) -> Result<Measured> {
    let mut cmd = base(uri, job.name, size_bytes);
    cmd.arg(format!("--rw={}", job.rw))
        .arg(format!("--bs={}", job.bs_bytes))
        .arg(format!("--iodepth={}", job.iodepth))
        .arg("--time_based")
        .arg(format!("--runtime={}ms", timing.runtime_ms))
        // fio's bookkeeping of which blocks it visited costs it CPU and measures nothing here.
        .arg("--norandommap");
    if timing.ramp_ms > 0 {
        cmd.arg(format!("--ramp_time={}ms", timing.ramp_ms));
    }
    let report = run_fio(&mut cmd)?;
    parse(&report, job).with_context(|| format!("fio's report for {} on {uri}", job.name))
}

fn base(uri: &str, name: &str, size_bytes: u64) -> Command {
    let mut cmd = Command::new("fio");
    cmd.arg(format!("--name={name}"))
        .arg("--ioengine=nbd")
        .arg(format!("--uri={uri}"))
        .arg(format!("--size={size_bytes}"))
        .arg("--output-format=json");
    cmd
}

fn run_fio(cmd: &mut Command) -> Result<Value> {
    let out = cmd.output().context("running fio")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!("fio failed ({}): {stderr}{stdout}", out.status);
    }
    // The nbd engine prints "fio: connected to NBD server" before the report.
    let at = stdout.find("\n{").map_or(0, |i| i + 1);
    serde_json::from_str(&stdout[at..]).with_context(|| format!("fio's JSON: {stdout}"))
}

fn parse(report: &Value, job: &Job) -> Result<Measured> {
    let j = &report["jobs"][0];
    let error = j["error"].as_i64().unwrap_or(-1);
    ensure!(error == 0, "fio's job reported error {error}");
    let dir = &j[if job.is_read() { "read" } else { "write" }];
    let num = |v: &Value, what: &str| v.as_f64().with_context(|| format!("no {what}"));
    let m = Measured {
        bytes_per_s: num(&dir["bw_bytes"], "bw_bytes")?,
        iops: num(&dir["iops"], "iops")?,
        lat_mean_ns: num(&dir["lat_ns"]["mean"], "lat_ns.mean")?,
        lat_p99_ns: num(&dir["clat_ns"]["percentile"]["99.000000"], "clat p99")?,
    };
    ensure!(m.iops > 0.0, "no {} completed", job.rw);
    Ok(m)
}
