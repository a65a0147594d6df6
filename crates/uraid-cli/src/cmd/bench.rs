//! `uraid bench`: figures printed as ratios measured in one run, never timed tests.

use clap::{Args, Subcommand};

#[derive(Args)]
#[command(
    about = "Measure uraid against its baselines (ISA-L, RAID0) in one run",
    long_about = "Measure uraid against its baselines, as ratios taken in one run (this machine \
is shared and noisy: never compare figures from different runs). Each family prints one row per \
figure beside its goal; --json prints one JSON object per line.",
    after_help = "Examples:\n  uraid bench parity --json\n  uraid bench io --only rebuild"
)]
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
        /// Only these families: random_write, seq_write, read, throughput, cpu, workers,
        /// rebuild, bitmap, ppl.
        #[arg(long = "only", value_name = "FAMILY")]
        only: Vec<String>,
        /// Smaller working sets (what the tests run; a smoke run, not the published figures).
        #[arg(long)]
        quick: bool,
    },
    /// The NBD server vs `nbdkit memory`: fio's nbd engine on uraid RAID0 and RAID5.
    ///
    /// 1 MiB sequential read and write at iodepth 16, 4 KiB random read and write at iodepth
    /// 32, 4 KiB sequential writes at iodepth 16, on 1 GiB exports over Unix sockets (memory
    /// members); ratios to nbdkit, each beside its goal. Needs fio (with its nbd engine) and
    /// nbdkit.
    ///
    /// Example: uraid bench serve --json --runtime 10
    Serve {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// 64 MiB exports, one round of 1 s per job (a smoke run, not a measurement).
        #[arg(long)]
        quick: bool,
        /// Seconds per measurement [default: 5; 1 with --quick].
        #[arg(long, value_name = "SECS")]
        runtime: Option<f64>,
        /// Rounds of every job on every target; rows keep the best [default: 3; 1 with --quick].
        #[arg(long)]
        rounds: Option<usize>,
        /// Only these jobs: seq_read, seq_write, rand_read, rand_write, seq_write_4k.
        #[arg(long = "only", value_name = "JOB")]
        only: Vec<String>,
        /// Only these uraid targets: raid0, raid5, raid5-log (RAID5 with the write hole's
        /// log); nbdkit, the baseline, always runs.
        #[arg(long = "target", value_name = "TARGET")]
        target: Vec<String>,
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
        BenchWhat::Serve { json, quick, runtime, rounds, ref only, ref target } => {
            let opts = uraid_bench::serve::ServeBenchOptions {
                json,
                quick,
                runtime_s: runtime,
                rounds,
                only: only.clone(),
                targets: target.clone(),
            };
            uraid_bench::serve::run(&opts, &mut std::io::stdout().lock())
        }
    }
}
