//! `uraid-sim`: runs seeds of the deterministic simulator and prints what they survived.
//!
//! Examples: `uraid-sim --seeds 100000` (the long run), `uraid-sim --seed 1234` (replay one).

use clap::Parser;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uraid_sim::{SimFailure, SimStats, run_seed};

/// mimalloc, as the `uraid` binary uses (see its main.rs): the engine allocates buffers of a
/// few KiB per request, which glibc's malloc serves slowly.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "uraid-sim", about = "Run uraid's engine under the deterministic fault simulator")]
struct Args {
    /// How many seeds to run, from --start.
    #[arg(long, default_value_t = 1000)]
    seeds: u64,
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Replay this one seed (prints its configuration and counters).
    #[arg(long)]
    seed: Option<u64>,
    /// With --seed: print every event touching this array sector.
    #[arg(long, value_name = "SECTOR")]
    watch: Option<u64>,
    /// No faults: only the workload, reordering and slow members.
    #[arg(long)]
    no_faults: bool,
    /// Threads (default: one per core). Seeds do not depend on it.
    #[arg(long)]
    threads: Option<usize>,
    /// The summary as one JSON object.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let faults = !args.no_faults;
    if let Some(seed) = args.seed {
        println!("{}", uraid_sim::SimConfig::from_seed(seed, faults).summary());
        let outcome = match args.watch {
            Some(sector) => uraid_sim::replay_watching(seed, faults, sector),
            None => run_seed(seed, faults),
        };
        return match outcome {
            Ok((stats, digest)) => {
                println!("seed {seed}: ok, digest {digest:016x}");
                println!("{}", serde_json::to_string_pretty(&stats).expect("serializable"));
                ExitCode::SUCCESS
            }
            Err(f) => {
                eprintln!("{f}");
                ExitCode::FAILURE
            }
        };
    }
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let started = Instant::now();
    let (total, failure) = run_many(args.start, args.seeds, threads, faults);
    let secs = started.elapsed().as_secs_f64();
    if let Some(f) = failure {
        eprintln!("{f}");
        eprintln!(
            "replay: cargo run --release -p uraid-sim -- --seed {}{}",
            f.seed,
            if faults { "" } else { " --no-faults" }
        );
        return ExitCode::FAILURE;
    }
    print_summary(&total, args.seeds, secs, args.json);
    ExitCode::SUCCESS
}

/// Runs seeds on `threads` threads; the totals, and the first failure (which stops the run).
fn run_many(
    start: u64,
    seeds: u64,
    threads: usize,
    faults: bool,
) -> (SimStats, Option<SimFailure>) {
    let next = Arc::new(AtomicU64::new(start));
    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(Mutex::new(SimStats::default()));
    let failure = Arc::new(Mutex::new(None::<SimFailure>));
    let done = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (next, stop, total, failure, done) =
                (next.clone(), stop.clone(), total.clone(), failure.clone(), done.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= start + seeds {
                        break;
                    }
                    // A panic in the engine is a failure of its seed, reported as one.
                    let outcome = std::panic::catch_unwind(|| run_seed(seed, faults))
                        .unwrap_or_else(|p| {
                            let message = p
                                .downcast_ref::<&str>()
                                .map(ToString::to_string)
                                .or_else(|| p.downcast_ref::<String>().cloned())
                                .unwrap_or_default();
                            Err(SimFailure {
                                seed,
                                step: 0,
                                message: format!("panicked: {message}"),
                            })
                        });
                    match outcome {
                        Ok((stats, _)) => total.lock().expect("no panics").add(&stats),
                        Err(f) => {
                            stop.store(true, Ordering::Relaxed);
                            let mut first = failure.lock().expect("no panics");
                            if first.as_ref().is_none_or(|g| f.seed < g.seed) {
                                *first = Some(f);
                            }
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut reported = Instant::now();
    while workers.iter().any(|w| !w.is_finished()) {
        std::thread::sleep(Duration::from_millis(200));
        if reported.elapsed() >= Duration::from_secs(30) {
            reported = Instant::now();
            eprintln!("uraid-sim: {} of {seeds} seeds", done.load(Ordering::Relaxed));
        }
    }
    for w in workers {
        w.join().expect("a seed panicked");
    }
    let total = *total.lock().expect("no panics");
    let failure = failure.lock().expect("no panics").take();
    (total, failure)
}

fn print_summary(t: &SimStats, seeds: u64, secs: f64, json: bool) {
    let resync_share = if t.resync_capacity == 0 {
        0.0
    } else {
        t.resync_sectors as f64 / t.resync_capacity as f64
    };
    if json {
        return print_json(t, seeds, secs);
    }
    println!("uraid-sim: {seeds} seeds passed in {secs:.1} s");
    println!(
        "  requests: {} reads, {} writes, {} flushes, {} discards, {} refused (out of range)",
        t.reads, t.writes, t.flushes, t.discards, t.refused
    );
    println!(
        "  sectors verified by reads: {}; block status: {} answers, {} sectors called zeros \
         (each allowed); member I/Os: {}",
        t.sectors_verified, t.status_checks, t.status_zero_sectors, t.member_ios
    );
    println!(
        "  faults injected: {} ({} members pulled, {} write errors, {} latent bad sectors, {} \
         power cuts), {} slowdowns",
        t.faults(),
        t.members_pulled,
        t.write_errors,
        t.bad_sectors,
        t.power_cuts,
        t.slowdowns
    );
    println!(
        "  power cuts survived: {} ({} of them right after a flush or FUA write; {} during \
         a recovery, {} of them a re-add's, {} with another queued; {} beside latent bad \
         sectors, {} beside listed ones; {} restarts read nothing back; {} reads of sectors a \
         cut left unknown found them unchanged; resync covered {:.1}% of what a full resync \
         would)",
        t.power_cuts,
        t.cuts_after_flush,
        t.cuts_during_recovery,
        t.cuts_during_readd,
        t.cuts_with_recovery_queued,
        t.cuts_with_bad_sectors,
        t.cuts_with_listed_sectors,
        t.restarts_unread,
        t.unknown_rereads,
        100.0 * resync_share
    );
    println!(
        "  write hole: {} power cuts with members lost ({} pulled right after the cut); {} \
         parity blocks replayed from the partial parity log ({} resyncing ranges; {} data \
         blocks it could not read written back); {} writes \
         acknowledged once logged and {} before, when queued for a generation; {} full-stripe \
         writes under a range; {} log advances (flushes and filling rings retiring the log \
         with no reset); {} ring wraps; {} batches written behind; {} writes acknowledged \
         when held for their stream to fill the stripe",
        t.power_cuts_degraded,
        t.lost_after_cut,
        t.log_replays,
        t.range_resyncs,
        t.blocks_written_back,
        t.acked_when_logged,
        t.acked_when_admitted,
        t.writes_under_range,
        t.log_advances,
        t.log_ring_wraps,
        t.writes_behind,
        t.held_back
    );
    print_lifecycle(t);
}

/// The counters as one JSON object, with the seeds, the time and the faults' total.
fn print_json(t: &SimStats, seeds: u64, secs: f64) {
    let mut v = serde_json::to_value(t).expect("serializable");
    v["seeds"] = seeds.into();
    v["seconds"] = secs.into();
    v["faults"] = t.faults().into();
    println!("{v}");
}

/// The summary's lines on spares, re-adds, replacements and safe mode.
fn print_lifecycle(t: &SimStats) {
    println!(
        "  safe mode: {} clean marks (a flush with nothing outstanding), {} power cuts while \
         clean (restarted with no replay and no resync)",
        t.clean_marks, t.cuts_while_clean
    );
    println!(
        "  spares rebuilt: {} ({} of them re-added, {} member sectors rebuilt, {} started while \
         another member's recovery was under way); checks with 0 mismatches: {}; lone writes \
         at md's minimum I/O: {}; whole stripes written as batches: {}",
        t.spares_rebuilt,
        t.readds,
        t.readd_sectors,
        t.recoveries_overlapped,
        t.checks,
        t.io_count_checks,
        t.stripe_batches
    );
    println!(
        "  members replaced (md's replace, the member in service during the copy): {} started, \
         {} done, {} given up, {} taken over by the new disk when the member failed, {} copies \
         started over after a power cut; {} log writes queued before a replacement began (the \
         member's alone), {} of them written nowhere (the new disk held the slot by then)",
        t.replacements,
        t.replacements_done,
        t.replacements_given_up,
        t.replacements_taken_over,
        t.replacements_restarted,
        t.log_writes_before_replacement,
        t.log_writes_for_replaced_members
    );
}
