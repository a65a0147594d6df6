//! md's sync_action verbs for a scrub: "check" and "repair" (of the whole array, or of part of
//! each member: md's sync_min and sync_max) and "idle" (a running check or repair stopped,
//! a frozen array thawed: `frozen.rs`).

use crate::array::{Inner, MdError};
use crate::control::ScrubSpan;
use crate::runner::Action;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

impl Inner {
    /// Queues check or repair (md's sync_action), refused while one is queued or running;
    /// `span`: only those member sectors (md's sync_min and sync_max), out to whole chunks.
    pub fn start_scrub(&self, repair: bool, span: Option<ScrubSpan>) -> Result<String, MdError> {
        self.info.refuse_if_read_only(if repair { "repair" } else { "check" })?;
        // md runs it and skips every stripe, then reports 0 mismatches: nothing was compared.
        let missing = self.runtime.failed_members().len();
        if missing >= self.info.max_degraded as usize {
            return Err(MdError::Refused(format!(
                "{missing} member(s) missing, as many as {} survives: no parity is left to \
                 compare (a RAID6 missing one still checks its other parity); rebuild first",
                self.info.level
            )));
        }
        let span = self.scrub_span(span)?;
        let action = if repair { Action::Repair { span } } else { Action::Check { span } };
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if q.running.is_some() || !q.pending.is_empty() {
            let busy = q.running.as_ref().or(q.pending.front()).map(Action::describe);
            return Err(MdError::Refused(format!(
                "the array is busy with {}",
                busy.unwrap_or_default()
            )));
        }
        // Every action asked for thaws a frozen array, as md's action_store does.
        self.thaw(&mut q);
        q.pending.push_back(action);
        self.wake.notify_all();
        let what = if repair { "repair" } else { "check" };
        Ok(match span {
            (0, end) if end == self.info.member_sectors => format!("{what} started"),
            (from, to) => format!("{what} started on member sectors {from}-{to}"),
        })
    }

    /// The member sectors a scrub covers: `span` out to whole chunks (md wants sync_min and
    /// sync_max on chunk boundaries), within the members; all of them without one.
    fn scrub_span(&self, span: Option<ScrubSpan>) -> Result<(u64, u64), MdError> {
        let end = self.info.member_sectors;
        let Some(ScrubSpan { from_sectors, to_sectors }) = span else { return Ok((0, end)) };
        let chunk = self.info.chunk_sectors;
        let from = from_sectors / chunk * chunk;
        let to = to_sectors.div_ceil(chunk).saturating_mul(chunk).min(end);
        if from >= to {
            return Err(MdError::Refused(format!(
                "member sectors {from_sectors}-{to_sectors}: nothing of the {end} sectors a \
                 member holds (the span is out to whole chunks of {chunk})"
            )));
        }
        Ok((from, to))
    }

    /// md's sync_action "idle" for a check or repair: the running one stops where it is (its
    /// result says interrupted, with what it covered) and a queued one is dropped. A resync,
    /// recovery or replacement is refused: md starts one again at once, and stopping it would
    /// only leave the array longer without the redundancy it restores. A frozen array is
    /// thawed instead (md's "idle" clears "frozen"), and what waits starts.
    pub fn stop_scrub(&self) -> Result<String, MdError> {
        let scrub = |a: &Action| matches!(a, Action::Check { .. } | Action::Repair { .. });
        let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if self.thaw(&mut q) {
            let waiting: Vec<String> = q.pending.iter().map(Action::describe).collect();
            return Ok(if waiting.is_empty() {
                "thawed: nothing waits".into()
            } else {
                format!("thawed: {} starts", waiting.join(", then "))
            });
        }
        let queued = q.pending.len();
        q.pending.retain(|a| !scrub(a));
        let dropped = queued - q.pending.len();
        match &q.running {
            Some(running) if scrub(running) => {
                // Under the queue's lock: the runner clears the flag only as it takes the
                // next action from the queue.
                self.control.abort.store(true, Ordering::Release);
                Ok(format!("stopping {}", running.describe()))
            }
            _ if dropped > 0 => Ok("dropped the queued check or repair".into()),
            Some(other) => Err(not_scrub(other, "running")),
            None => match q.pending.front() {
                Some(queued) => Err(not_scrub(queued, "queued")),
                None => Ok("idle already: no check or repair is running".into()),
            },
        }
    }
}

/// Why idle leaves `action` (`running` or `queued`) alone.
fn not_scrub(action: &Action, state: &str) -> MdError {
    MdError::Refused(format!(
        "{} is {state}: idle stops only a check or a repair (md starts a resync or recovery \
         again at once)",
        action.describe()
    ))
}
