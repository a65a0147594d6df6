//! `uraid stats`: a running array's counters (engine, stripe cache, every member), read from
//! the stats file its runtime publishes (`uraid_io::StatsReport::publish`).

use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use uraid_io::StatsReport;

#[derive(Args)]
#[command(
    about = "Print a running array's I/O counters",
    long_about = "Print the counters a running array publishes: the engine's (reads that \
bypassed the stripe cache, bytes copied through it, stripe writes by method: full, rmw, rcw, \
degraded), the stripe cache's (size, active heads, hits, misses) and each member's read and \
write I/Os and bytes. The runtime replaces its stats file atomically; this reads it whole.",
    after_help = "Example:\n  uraid stats --json /run/uraid/md0/stats.json"
)]
pub struct StatsArgs {
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// The stats file of the running array.
    path: PathBuf,
}

pub fn run(args: &StatsArgs) -> anyhow::Result<()> {
    let report = StatsReport::read(&args.path)
        .with_context(|| format!("reading the stats of {}", args.path.display()))?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    let e = &report.engine;
    let c = &report.cache;
    println!(
        "stripe cache: {} of {} heads active, {} hits, {} misses, {} waits for a head",
        c.stripe_cache_active, c.stripe_cache_size, c.hits, c.misses, c.exhausted
    );
    println!(
        "reads bypassing the cache: {}   bytes copied through it: {}",
        e.reads_bypassed, e.bytes_copied
    );
    println!(
        "stripe writes: full {} ({} whole stripes batched)  rmw {}  rcw {}  degraded {}   \
         discards {}   read errors corrected {}   mismatch_cnt {}",
        e.stripe_writes_full,
        e.stripe_batches,
        e.stripe_writes_rmw,
        e.stripe_writes_rcw,
        e.stripe_writes_degraded,
        e.stripe_discards,
        e.read_errors_corrected,
        e.mismatch_cnt
    );
    println!(
        "{:<24} {:>12} {:>14} {:>12} {:>14} {:>8}",
        "member", "reads", "read bytes", "writes", "write bytes", "errors"
    );
    for m in &report.members {
        let name = if m.failed { format!("{} (failed)", m.name) } else { m.name.clone() };
        println!(
            "{name:<24} {:>12} {:>14} {:>12} {:>14} {:>8}",
            m.io.read_ios, m.io.read_bytes, m.io.write_ios, m.io.write_bytes, m.io.errors
        );
    }
    Ok(())
}
