//! What a run reports: its counters (summed over seeds) and, when it breaks, the seed, the
//! step and what went wrong.

use serde::Serialize;
use std::fmt;

#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct SimStats {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub discards: u64,
    /// Out-of-range requests refused as they must be.
    pub refused: u64,
    /// Sectors whose contents a read returned and the oracle accepted.
    pub sectors_verified: u64,
    /// Block status answers checked (one before each read, of its range), and the sectors
    /// they called zeros, each one the oracle allowed to read as zeros.
    pub status_checks: u64,
    pub status_zero_sectors: u64,
    pub member_ios: u64,
    pub power_cuts: u64,
    /// Power cuts with members lost (before the cut and not yet rebuilt, or pulled right
    /// after it): the write hole's case.
    pub power_cuts_degraded: u64,
    /// Members pulled right after a power cut, before the restart.
    pub lost_after_cut: u64,
    /// Power cuts drawn right after a flush's (or FUA write's) acknowledgement
    /// (`faults::cut_after_flush`).
    pub cuts_after_flush: u64,
    /// Parity blocks rewritten from the partial parity log at restarts.
    pub log_replays: u64,
    /// Writes the engine acknowledged once logged, before their writes in place.
    pub acked_when_logged: u64,
    /// Writes it acknowledged when queued for a generation, before their entries were durable.
    pub acked_when_admitted: u64,
    /// Writes it acknowledged when a stripe head held them for their stream to fill.
    pub held_back: u64,
    /// Full-stripe writes that went out under a range of the log (no entry of their own),
    /// and parity blocks the replay rewrote resyncing ranges.
    pub writes_under_range: u64,
    /// Log advances: flushes (or rings filling up) that retired the log's entries without a
    /// reset; and log writes that went back to a ring's start over retired ones.
    pub log_advances: u64,
    pub log_ring_wraps: u64,
    /// Acknowledged batches written in place from copies while their head went on.
    pub writes_behind: u64,
    /// Whole stripes written as one batch (no stripe heads).
    pub stripe_batches: u64,
    pub range_resyncs: u64,
    /// Member sectors resynced after power cuts, and what a full resync would have covered.
    pub resync_sectors: u64,
    pub resync_capacity: u64,
    pub members_pulled: u64,
    pub write_errors: u64,
    pub bad_sectors: u64,
    pub slowdowns: u64,
    pub spares_rebuilt: u64,
    /// Of those, members back by re-add (the old disk, rebuilt where its bits are set).
    pub readds: u64,
    /// Member sectors those re-adds rebuilt (of `readds` times the member's size).
    pub readd_sectors: u64,
    /// Spares and re-adds started while another member's recovery was under way (RAID6).
    pub recoveries_overlapped: u64,
    /// Power cuts during a recovery (its member then goes on from its last checkpoint).
    pub cuts_during_recovery: u64,
    /// Of those, cuts during a re-add's recovery (resumed where bits are set), and cuts with
    /// a second recovery queued behind the one under way.
    pub cuts_during_readd: u64,
    pub cuts_with_recovery_queued: u64,
    /// Power cuts while a member in the array had latent bad sectors, and while one had
    /// sectors in its bad block log (since the fifth session of 2026-12-05; before, a cut
    /// waited for every such sector to be rewritten).
    pub cuts_with_bad_sectors: u64,
    pub cuts_with_listed_sectors: u64,
    /// Restarts after a cut that read nothing back (the others read the whole array and,
    /// with every member there, check parity).
    pub restarts_unread: u64,
    /// Reads of a sector the cut left unknown (may hold anything) that found it as the first
    /// read since the restart had, no write between.
    pub unknown_rereads: u64,
    /// Data blocks a replay counted lost and wrote back, their member there but the block
    /// unreadable (a latent bad sector).
    pub blocks_written_back: u64,
    pub checks: u64,
    pub io_count_checks: u64,
    /// Member failures the metadata recorded (each after writes waited for it), and power
    /// cuts that came while a failure was not yet recorded.
    pub failures_recorded: u64,
    pub cuts_before_record: u64,
    /// Write errors listed in a member's bad block log (the member kept), and reads that
    /// went around listed sectors.
    pub writes_listed: u64,
    pub known_bad_reads: u64,
    /// md's replace: copies started, done (the new disk took the member's place), given up
    /// (the new disk failed, or the member was lost at a power cut), taken over (the member
    /// failed and the new disk went on as a recovery), and started over after a power cut.
    pub replacements: u64,
    pub replacements_done: u64,
    pub replacements_given_up: u64,
    pub replacements_taken_over: u64,
    pub replacements_restarted: u64,
    /// Log writes the engine had queued for a member when its replacement began (the
    /// member's alone), and those of them submitted once the new disk held the slot
    /// (written nowhere).
    pub log_writes_before_replacement: u64,
    pub log_writes_for_replaced_members: u64,
    /// md's safe mode: clean marks (a flush with nothing outstanding, then no write), and
    /// power cuts while clean (a restart with no replay and no resync).
    pub clean_marks: u64,
    pub cuts_while_clean: u64,
}

impl SimStats {
    pub fn add(&mut self, o: &SimStats) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.flushes += o.flushes;
        self.discards += o.discards;
        self.refused += o.refused;
        self.sectors_verified += o.sectors_verified;
        self.status_checks += o.status_checks;
        self.status_zero_sectors += o.status_zero_sectors;
        self.member_ios += o.member_ios;
        self.power_cuts += o.power_cuts;
        self.power_cuts_degraded += o.power_cuts_degraded;
        self.lost_after_cut += o.lost_after_cut;
        self.cuts_after_flush += o.cuts_after_flush;
        self.log_replays += o.log_replays;
        self.acked_when_logged += o.acked_when_logged;
        self.acked_when_admitted += o.acked_when_admitted;
        self.held_back += o.held_back;
        self.writes_under_range += o.writes_under_range;
        self.log_advances += o.log_advances;
        self.log_ring_wraps += o.log_ring_wraps;
        self.writes_behind += o.writes_behind;
        self.stripe_batches += o.stripe_batches;
        self.range_resyncs += o.range_resyncs;
        self.resync_sectors += o.resync_sectors;
        self.resync_capacity += o.resync_capacity;
        self.members_pulled += o.members_pulled;
        self.write_errors += o.write_errors;
        self.bad_sectors += o.bad_sectors;
        self.slowdowns += o.slowdowns;
        self.spares_rebuilt += o.spares_rebuilt;
        self.readds += o.readds;
        self.readd_sectors += o.readd_sectors;
        self.recoveries_overlapped += o.recoveries_overlapped;
        self.cuts_during_recovery += o.cuts_during_recovery;
        self.cuts_during_readd += o.cuts_during_readd;
        self.cuts_with_recovery_queued += o.cuts_with_recovery_queued;
        self.cuts_with_bad_sectors += o.cuts_with_bad_sectors;
        self.cuts_with_listed_sectors += o.cuts_with_listed_sectors;
        self.restarts_unread += o.restarts_unread;
        self.unknown_rereads += o.unknown_rereads;
        self.blocks_written_back += o.blocks_written_back;
        self.checks += o.checks;
        self.io_count_checks += o.io_count_checks;
        self.failures_recorded += o.failures_recorded;
        self.cuts_before_record += o.cuts_before_record;
        self.writes_listed += o.writes_listed;
        self.known_bad_reads += o.known_bad_reads;
        self.replacements += o.replacements;
        self.replacements_done += o.replacements_done;
        self.replacements_given_up += o.replacements_given_up;
        self.replacements_taken_over += o.replacements_taken_over;
        self.replacements_restarted += o.replacements_restarted;
        self.log_writes_before_replacement += o.log_writes_before_replacement;
        self.log_writes_for_replaced_members += o.log_writes_for_replaced_members;
        self.clean_marks += o.clean_marks;
        self.cuts_while_clean += o.cuts_while_clean;
    }

    /// Faults injected: members pulled, write errors, latent bad sectors, power cuts.
    #[must_use]
    pub fn faults(&self) -> u64 {
        self.members_pulled + self.write_errors + self.bad_sectors + self.power_cuts
    }
}

#[derive(Clone, Debug)]
pub struct SimFailure {
    pub seed: u64,
    pub step: u64,
    pub message: String,
}

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seed {} failed at step {}: {}", self.seed, self.step, self.message)
    }
}

impl std::error::Error for SimFailure {}
