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
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    match args.what {
        BenchWhat::Parity { json, quick, ref only } => {
            let opts = uraid_bench::parity::ParityBenchOptions { quick, json, only: only.clone() };
            uraid_bench::parity::run(&opts, &mut std::io::stdout().lock())
        }
    }
}
