//! md's safe mode on the superblocks (`safe_mode_delay`, 200 ms by default in md): once no
//! write has come for the delay, every acknowledged write is made durable and the superblocks
//! say clean (resync_offset MaxSector), so that a crash of an idle or read-only array needs
//! no resync; the next write waits until they say active again (`uraid_runtime::safe_mode`
//! holds the gate). Before this the array was active from its start to its stop, and a
//! crash of an array idle for hours resynced it whole (without a bitmap).
//!
//! The marks bump no event count (md rolls a dirty-clean round trip back for the same
//! reason): the bitmap's superblock must carry the array's events, and the engine writes it
//! only with its pages. A crash in the middle of writing a mark leaves members that disagree
//! on it at the same events, which is harmless either way: a clean mark is written only when
//! the array is clean, and no write goes on until every member says active.

use crate::array::Inner;
use crate::meta::Metadata;
use std::sync::Arc;
use std::time::{Duration, Instant};
use uraid_format::MAX_SECTOR;

/// md's default safe_mode_delay.
pub const SAFE_MODE_DELAY: Duration = Duration::from_millis(200);

impl Inner {
    /// The hook a write calls on a clean array: the superblocks say active before it goes on.
    pub(crate) fn mark_active(&self) {
        let mut meta = self.meta();
        meta.set_resync_offset(0);
        self.write_mark(&mut meta);
    }

    /// With no write since the runtime had counted `seen` and none in flight: flush, then
    /// mark the superblocks clean (see the module docs). Whether the array is now clean.
    pub(crate) fn mark_clean_if_idle(&self, seen: u64) -> bool {
        // Past its redundancy a write fails, perhaps after reaching some members: its
        // stripes' parity may disagree with their data, and a clean mark would have the
        // start after `--force` trust it (no log replay, no resync). md marks such an array
        // clean all the same; uraid leaves it active.
        if self.info.beyond_redundancy(self.runtime.failed_members().len()) {
            return false;
        }
        self.runtime.safe_mode().try_mark_clean(seen, || {
            // Every write acknowledged before is durable after this, parity with it (the
            // log's early acknowledgements and held partial stripes included).
            if self.runtime.flush().is_err() {
                return false;
            }
            let mut meta = self.meta();
            meta.set_resync_offset(MAX_SECTOR);
            self.write_mark(&mut meta);
            true
        })
    }

    /// Writes the superblocks at the same events; a member whose write fails is failed by a
    /// full commit, as md fails a member it cannot update.
    fn write_mark(&self, meta: &mut Metadata) {
        if !meta.write().is_empty() {
            self.commit_locked(meta);
        }
    }
}

/// Gives the runtime's gate its hook, when safe mode is on.
pub(crate) fn install(inner: &Arc<Inner>) {
    if inner.safe_mode_delay.is_none() {
        return;
    }
    // Weak: the runtime, which holds the hook, is the array's.
    let array = Arc::downgrade(inner);
    inner.runtime.safe_mode().set_mark_active(move || {
        if let Some(array) = array.upgrade() {
            array.mark_active();
        }
    });
}

/// The sync runner's view of the writes while it waits for actions: when the count has not
/// moved for the delay, the array may be marked clean.
pub(crate) struct IdleWatch {
    delay: Option<Duration>,
    seen: u64,
    since: Instant,
}

impl IdleWatch {
    pub(crate) fn new(delay: Option<Duration>) -> IdleWatch {
        IdleWatch { delay, seen: u64::MAX, since: Instant::now() }
    }

    /// The write count to mark clean at, when it is time: safe mode on, the array active, no
    /// write for the delay, and nothing to resync (`in_sync`).
    pub(crate) fn due(&mut self, inner: &Inner, in_sync: bool) -> Option<u64> {
        let delay = self.delay?;
        let safe_mode = inner.runtime.safe_mode();
        let now = safe_mode.writes_submitted();
        if now != self.seen {
            (self.seen, self.since) = (now, Instant::now());
            return None;
        }
        (in_sync && !safe_mode.is_clean() && self.since.elapsed() >= delay).then_some(now)
    }

    /// A try that did not end clean waits another delay.
    pub(crate) fn tried(&mut self) {
        self.since = Instant::now();
    }
}
