//! uraid's deterministic simulator: the engine (`uraid_core::array::Array`, which does no
//! I/O) driven from one seed with simulated members, no threads and no clock. The seed picks
//! the array (level, layout, members, chunk, stripe_size, cache, bitmap), the workload
//! (aligned and unaligned, partial and full-stripe reads, writes, FUA writes, flushes,
//! discards, plugging), the order member I/Os complete in (slow members), and the faults
//! (read and write errors, latent bad sectors, pulled members, power cuts that lose
//! unflushed writes and tear in-flight ones, restarts with resync, spares rebuilt).
//!
//! Checked after every step: every read returns the last acknowledged write or one in
//! flight (`oracle`); after a power cut, restart and resync, everything flushed reads back;
//! parity is consistent after resync, during I/O and at the end; a write alone on an idle
//! array costs md's minimum member I/O; the engine never changes a write buffer in flight;
//! nothing stalls. A failing seed replays with `uraid-sim --seed N`.
//!
//! - `config`: the seed's array and workload. - `member`: a simulated disk with a volatile
//!   cache. - `oracle`: what reads may return. - `sim`: the loop. - `faults`: faults, rebuild,
//!   power cuts, I/O counts, the final verification. - `report`: counters and failures.

mod config;
mod faults;
mod member;
mod oracle;
mod replace;
mod report;
mod restart;
mod safe_mode;
mod sim;

pub use config::{Sabotage, SimConfig};
pub use report::{SimFailure, SimStats};
pub use sim::Sim;

/// Replays one seed, printing every event that touches array sector `watch`.
pub fn replay_watching(seed: u64, faults: bool, watch: u64) -> Result<(SimStats, u64), SimFailure> {
    let mut sim = Sim::new(SimConfig::from_seed(seed, faults));
    sim.watch(watch);
    sim.run()
}

/// Runs one seed; its counters and the digest of every event (the same on every run).
pub fn run_seed(seed: u64, faults: bool) -> Result<(SimStats, u64), SimFailure> {
    let cfg = SimConfig::from_seed(seed, faults);
    let summary = cfg.summary();
    Sim::new(cfg).run().map_err(|mut f| {
        f.message = format!("{} [{summary}]", f.message);
        f
    })
}
