//! `uraid bench`: figures printed as ratios measured in one run, never timed tests.

use clap::{Args, Subcommand};

#[derive(Args)]
#[command(about = "Measure uraid against its baselines (ISA-L, RAID0) in one run")]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Subcommand)]
enum BenchWhat {
    /// Parity kernels vs Intel ISA-L: xor, P+Q, RAID6 rmw update, 2-block recovery.
    ///
    /// Example: uraid bench parity --json
    Parity {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// Fewer repetitions and a smaller streaming set (a smoke run, not a measurement).
        #[arg(long)]
        quick: bool,
        /// Only rows whose op (xor, pq, pq_rmw, recov_2data) or mode (cache, stream) is named.
        #[arg(long = "only", value_name = "OP|MODE")]
        only: Vec<String>,
    },
    /// Member I/O per request class, degraded reads on modelled HDDs, CPU per byte.
    ///
    /// Counts are exact (memory members); HDD throughput is in simulated time (deterministic);
    /// each figure is printed beside its goal or minimum and md's figure.
    ///
    /// Example: uraid bench io --json --only random_write
    Io {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// Only these families: random_write, seq_write, read, throughput, cpu.
        #[arg(long = "only", value_name = "FAMILY")]
        only: Vec<String>,
        /// Smaller working sets (what the tests run; a smoke run, not the published figures).
        #[arg(long)]
        quick: bool,
    },
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    match args.what {
        BenchWhat::Parity { json, quick, ref only } => {
            let opts = uraid_bench::parity::ParityBenchOptions { quick, json, only: only.clone() };
            uraid_bench::parity::run(&opts, &mut std::io::stdout().lock())
        }
        BenchWhat::Io { json, ref only, quick } => {
            let opts = uraid_bench::io::IoBenchOptions { json, only: only.clone(), small: quick };
            uraid_bench::io::run(&opts, &mut std::io::stdout().lock())
        }
    }
}
