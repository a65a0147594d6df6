//! `uraid stats`: a running array's counters (engine, stripe cache, every member), asked over
//! its control socket; or a report saved with `--json`, read back with `--file`. (Until the
//! fourth session of 2026-12-06 it read only a file, which no running array wrote.)

use anyhow::Context;
use clap::Args;
use std::path::PathBuf;
use uraid_io::StatsReport;

#[derive(Args)]
#[command(
    about = "Print a running array's I/O counters",
    long_about = "Print a running array's counters, asked over its control socket: the \
engines' (reads that bypassed the stripe cache, bytes copied through it, stripe writes by \
method: full, rmw, rcw, degraded), the stripe caches' (size, active heads, hits, misses; summed \
over the workers), each slot's member's read and write I/Os, bytes and errors, and the NBD \
server's connections and requests. With --file, a report saved earlier with --json.",
    after_help = "Example:\n  uraid stats md0\n  uraid stats --json md0 > before.json\n  \
uraid stats --file before.json"
)]
pub struct StatsArgs {
    /// One JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Read a report saved with --json instead of asking a running array.
    #[arg(long, conflicts_with = "name")]
    file: Option<PathBuf>,
    /// The running array's name (as `uraid status` lists it).
    #[arg(required_unless_present = "file")]
    name: Option<String>,
}

pub fn run(args: &StatsArgs) -> anyhow::Result<()> {
    let report = match (&args.file, &args.name) {
        (Some(path), _) => StatsReport::read(path)
            .with_context(|| format!("reading the stats of {}", path.display()))?,
        (None, Some(name)) => crate::cmd::control_client::stats_of(name)?,
        (None, None) => unreachable!("clap requires a name or --file"),
    };
    if args.json {
        out!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    let e = &report.engine;
    let c = &report.cache;
    out!(
        "stripe cache: {} of {} heads active, {} hits, {} misses, {} waits for a head",
        c.stripe_cache_active,
        c.stripe_cache_size,
        c.hits,
        c.misses,
        c.exhausted
    );
    out!(
        "reads bypassing the cache: {}   bytes copied through it: {}",
        e.reads_bypassed,
        e.bytes_copied
    );
    out!(
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
    out!(
        "{:>4}  {:<24} {:>12} {:>14} {:>12} {:>14} {:>8}",
        "slot",
        "member",
        "reads",
        "read bytes",
        "writes",
        "write bytes",
        "errors"
    );
    // Counted per slot since the start: a slot's figures include devices it held before.
    for (slot, m) in report.members.iter().enumerate() {
        let name = if m.failed { format!("{} (failed)", m.name) } else { m.name.clone() };
        out!(
            "{slot:>4}  {name:<24} {:>12} {:>14} {:>12} {:>14} {:>8}",
            m.io.read_ios,
            m.io.read_bytes,
            m.io.write_ios,
            m.io.write_bytes,
            m.io.errors
        );
    }
    if let Some(n) = &report.nbd {
        print_nbd(n);
    }
    Ok(())
}

/// The NBD server's counters.
fn print_nbd(n: &uraid_io::stats::NbdReport) {
    let limit = n.connections_max.map_or("no limit".into(), |m| format!("limit {m}"));
    out!(
        "nbd connections: open {} ({limit})  accepted {}  turned away over the limit {}  \
         closed for protocol errors {}",
        n.connections_active,
        n.connections_accepted,
        n.connections_over_limit,
        n.connections_refused
    );
    out!(
        "nbd requests: reads {} ({} bytes)  writes {} ({} bytes)  flushes {}  trims {}  \
         write zeroes {}  block status {}  errors {}",
        n.reads,
        n.read_bytes,
        n.writes,
        n.written_bytes,
        n.flushes,
        n.trims,
        n.write_zeroes,
        n.block_status,
        n.errors
    );
}
