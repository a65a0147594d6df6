//! What every worker of an array shares: the members failed anywhere, those of them the
//! caller's metadata records, and the members being brought back.

use std::sync::atomic::Ordering;
use std::sync::{Condvar, Mutex, PoisonError};

use crate::member_set::{AtomicMemberSet, MemberSet};

/// State every worker shares, a bit (or a count) per member.
#[derive(Default)]
pub(crate) struct ArrayWide {
    pub failed_mask: AtomicMemberSet,
    /// The failed members the caller's metadata says are faulty (`Runtime::failures_recorded`).
    pub recorded_mask: AtomicMemberSet,
    /// How many times `failed_mask` has gained members, for `Runtime::wait_for_failure`.
    pub failure_news: Mutex<u64>,
    pub failure_news_cv: Condvar,
    /// By member: how many workers have yet to take the message that brings it back
    /// (`revive`).
    reviving: Mutex<Vec<u32>>,
    /// By member: why it failed (its device's failed I/O, or the caller's word), the first
    /// reason given since it last came back.
    reasons: Mutex<Vec<Option<String>>>,
}

impl ArrayWide {
    /// `failed_mask` gained members: wakes whoever records failures.
    pub fn announce_failure(&self) {
        *self.failure_news.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.failure_news_cv.notify_all();
    }

    /// `member` comes back (a recovery, re-add or takeover) as each of `workers` takes the
    /// message sent after this. Its failure is cleared now, not as each worker gets there: a
    /// worker applies the shared mask before every piece it plans and would fail it again
    /// from a stale one. Until the last worker has the message, a failure an engine sees of
    /// the member is its old device's (that instance drains before the message is taken) and
    /// is no news (`reviving_mask`): published, it failed the member again once back (a CI
    /// run of kernel_readd: a bitmap write to the member missing at assemble failed late).
    pub fn revive(&self, member: usize, workers: usize) {
        {
            let mut reviving = self.reviving.lock().unwrap_or_else(PoisonError::into_inner);
            if reviving.len() <= member {
                reviving.resize(member + 1, 0);
            }
            reviving[member] += u32::try_from(workers).expect("workers fit a u32");
        }
        if let Some(reason) =
            self.reasons.lock().unwrap_or_else(PoisonError::into_inner).get_mut(member)
        {
            *reason = None;
        }
        self.failed_mask.remove(member, Ordering::AcqRel);
        self.recorded_mask.remove(member, Ordering::AcqRel);
    }

    /// Keeps `why` as the reason `member` failed unless one is kept already.
    pub fn note_reason(&self, member: usize, why: impl FnOnce() -> String) {
        let mut reasons = self.reasons.lock().unwrap_or_else(PoisonError::into_inner);
        if reasons.len() <= member {
            reasons.resize(member + 1, None);
        }
        reasons[member].get_or_insert_with(why);
    }

    pub fn reason(&self, member: usize) -> Option<String> {
        let reasons = self.reasons.lock().unwrap_or_else(PoisonError::into_inner);
        reasons.get(member).cloned().flatten()
    }

    /// A worker took the message a `revive` announced (or it could not be sent).
    pub fn revived(&self, member: usize) {
        let mut reviving = self.reviving.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = reviving.get_mut(member) {
            *n = n.saturating_sub(1);
        }
    }

    /// The members some worker has yet to bring back, a bit each.
    pub fn reviving_mask(&self) -> MemberSet {
        let reviving = self.reviving.lock().unwrap_or_else(PoisonError::into_inner);
        MemberSet::of(reviving.iter().enumerate().filter(|(_, n)| **n > 0).map(|(m, _)| m))
    }
}
