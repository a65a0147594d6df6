//! md's safe mode as uraid-md runs it (`uraid_md::safe_mode`, the second session of
//! 2026-12-06): with no request outstanding and no sync action under way, a flush, after
//! which the metadata says clean until the next write or sync action; a power cut then
//! restarts with no replay and no resync (`restart`), and the array must still read back
//! whole, with parity consistent, and survive the loss of a member right after the cut.

use crate::report::SimFailure;
use crate::sim::{Sim, User};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uraid_core::array::ReqId;

/// Whether the metadata says clean, and the random stream that draws the marks (apart, so
/// that the rest of a seed's draws stay as they were until a mark fires).
pub(crate) struct SafeMode {
    clean: bool,
    pub(crate) rng: StdRng,
}

impl SafeMode {
    pub(crate) fn new(seed: u64) -> SafeMode {
        SafeMode { clean: false, rng: StdRng::seed_from_u64(seed ^ 0x5afe_0000_c1ea_0005) }
    }
}

impl Sim {
    /// Now and then when the workload pauses: the array goes clean, and sometimes the power
    /// goes at once (a cut drawn at random steps would rarely find it clean: the next write
    /// marks it active).
    pub(crate) fn safe_mode_step(&mut self) -> Result<(), SimFailure> {
        let syncing = self.recovery.is_some()
            || !self.recovery_queue.is_empty()
            || self.readd.is_some()
            || self.replacement.is_some();
        if self.safe_mode.clean || syncing {
            return Ok(());
        }
        self.run_until_idle()?;
        let id = self.next_id;
        self.next_id += 1;
        let t = self.oracle.flush_submitted();
        self.user.insert(id, User::SafeModeFlush(t));
        self.array.submit_flush(ReqId(id));
        self.run_until_idle()?;
        self.safe_mode.clean = true;
        self.stats.clean_marks += 1;
        self.note(|| "safe mode: the metadata says clean".into());
        if self.cfg.faults && self.may_cut() && self.safe_mode.rng.random_bool(0.3) {
            self.power_cut()?;
        }
        Ok(())
    }

    /// A write, discard or sync request is about to go to the engine: uraid-md has the
    /// superblocks say active first.
    pub(crate) fn mark_active(&mut self) {
        self.safe_mode.clean = false;
    }

    /// At a power cut: whether the metadata said clean (then uraid-md neither replays nor
    /// resyncs: everything was durable and consistent at the mark, nothing written since).
    /// The restart marks it active again.
    pub(crate) fn take_clean_mark(&mut self) -> bool {
        let clean = std::mem::take(&mut self.safe_mode.clean);
        if clean {
            self.stats.cuts_while_clean += 1;
            self.note(|| "the metadata says clean: no replay, no resync".into());
        }
        clean
    }
}
