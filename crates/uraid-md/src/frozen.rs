//! md's sync_action "frozen": no resync, recovery, replacement, check or repair runs until the
//! array is thawed (`idle`, or a check or repair asked for, as md's action_store clears the
//! flag for every action but "frozen"). An administrator pauses a rebuild so (during the day's
//! load, or to add several spares before any starts); mdadm freezes an array around its own
//! reshapes.
//!
//! The running action stops where it is, its progress recorded as a stop records it (a
//! recovery's checkpoint in the superblocks, a resync's place in `resync_cp`), and goes back
//! to the front of the queue to go on from there when thawed; a check or repair is dropped,
//! as md drops it. What is queued meanwhile (a spare added, a member failed) waits too. Not
//! kept across a restart, as in md.

use crate::array::Inner;
use crate::runner::{Action, SyncQueue};
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

impl Inner {
    /// md's "frozen": stops the running action and starts none until thawed. What it did.
    pub(crate) fn freeze(&self) -> String {
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if q.frozen {
            return "frozen already".into();
        }
        q.frozen = true;
        match &q.running {
            Some(running) => {
                // Under the queue's lock: the runner clears the flag only as it takes the
                // next action from the queue.
                self.control.abort.store(true, Ordering::Release);
                let then = match resumed(running, None) {
                    Some(_) => "it goes on when thawed",
                    None => "dropped, as md drops it",
                };
                format!("frozen: stopping {} ({then})", running.describe())
            }
            None if q.pending.is_empty() => "frozen: nothing runs, and nothing will start".into(),
            None => format!("frozen: {} waits", q.pending.len()),
        }
    }

    /// Thaws a frozen array (md's "idle" and every other action clear the flag); whether it
    /// was frozen. The waiting actions start.
    pub(crate) fn thaw(&self, q: &mut SyncQueue) -> bool {
        let was = std::mem::replace(&mut q.frozen, false);
        if was {
            self.wake.notify_all();
        }
        was
    }
}

/// The action to go on with after `action` stopped at (`range`, `sector`) because the array
/// froze (None: it is not taken up again, a check's or repair's case). A resync goes on from
/// the last place reached. A recovery goes on from its member's recorded offset, as after a
/// restart: a re-add's recovery of the bitmap's ranges too, as a whole one from there (more
/// than it needs, but right whatever happened meanwhile: the member may have failed and a
/// spare taken its slot, which the ranges would not describe). A replacement from its new
/// device's offset.
pub(crate) fn resumed(action: &Action, reached: Option<(usize, u64)>) -> Option<Action> {
    match action {
        Action::Check { .. } | Action::Repair { .. } => None,
        Action::Resync { ranges, by_bitmap } => {
            let rest = match reached {
                None => ranges.clone(),
                Some((range, sector)) => {
                    let (start, len) = ranges[range];
                    let left = (start + len).saturating_sub(sector.max(start));
                    let here = (left > 0).then_some((start + len - left, left));
                    here.into_iter().chain(ranges[range + 1..].iter().copied()).collect()
                }
            };
            Some(Action::Resync { ranges: rest, by_bitmap: *by_bitmap })
        }
        Action::Recover { slot, .. } => Some(Action::Recover { slot: *slot, ranges: None }),
        Action::Replace { .. } => Some(action.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frozen_action_goes_on_from_where_it_stopped() {
        let resync =
            Action::Resync { ranges: vec![(0, 100), (200, 50), (400, 10)], by_bitmap: true };
        let at = |range, sector| resumed(&resync, Some((range, sector)));
        let ranges = |a: Option<Action>| match a {
            Some(Action::Resync { ranges, .. }) => ranges,
            other => panic!("{other:?}"),
        };
        assert_eq!(ranges(at(0, 40)), [(40, 60), (200, 50), (400, 10)]);
        assert_eq!(ranges(at(1, 250)), [(400, 10)], "the second range done");
        assert_eq!(ranges(at(2, 405)), [(405, 5)]);
        assert_eq!(ranges(resumed(&resync, None)), [(0, 100), (200, 50), (400, 10)]);
        let whole = Action::Recover { slot: 2, ranges: None };
        assert_eq!(resumed(&whole, Some((0, 5000))), Some(whole.clone()), "from its offset");
        let readd = Action::Recover { slot: 2, ranges: Some(vec![(8, 8), (64, 8)]) };
        assert_eq!(resumed(&readd, Some((1, 66))), Some(whole), "as after a restart");
        let replace = Action::Replace { slot: 1 };
        assert_eq!(resumed(&replace, Some((0, 9))), Some(replace.clone()));
        let check = Action::Check { span: (0, 100) };
        assert_eq!(resumed(&check, Some((0, 10))), None, "md drops a check");
        assert_eq!(resumed(&Action::Repair { span: (0, 100) }, None), None);
    }
}
