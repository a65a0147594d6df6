//! Following a running array's sync action to its end, for `check --wait`, `repair --wait`
//! and `status --watch`: status polled every 250 ms, an indicatif bar with md's own rate and
//! ETA when stdout is a terminal, nothing but the result in a pipe.
//!
//! The end of an action is seen as a new `last_sync` (one not equal to the one before the
//! watch began) while the action no longer runs: the array may clear its running action a
//! moment before it publishes the result, so an old result is not taken at once.

use crate::cmd::control_client::status_of;
use anyhow::{Context, bail};
use indicatif::{HumanBytes, HumanDuration, ProgressBar, ProgressStyle};
use std::fmt::Write as _;
use std::time::{Duration, Instant};
use uraid_md::status::{ArrayStatus, SyncResult, SyncStatus, mismatch_lines, sync_result_summary};

const POLL: Duration = Duration::from_millis(250);
/// How long an action may take to appear when nothing else runs on the array.
const START_WAIT: Duration = Duration::from_secs(10);
/// How long a finished action may take to publish its result.
const RESULT_WAIT: Duration = Duration::from_secs(2);

/// One array's action being followed.
pub struct Follow {
    pub name: String,
    pub action: String,
    /// `last_sync` before the action began.
    pub before: Option<SyncResult>,
}

impl Follow {
    /// Polls until the action ends and returns what it did. `bar` is drawn or hidden by the
    /// caller; this only moves it.
    pub fn run(&self, bar: &ProgressBar) -> anyhow::Result<SyncResult> {
        let mut seen = false;
        // Since when no action at all has run: a check queued behind a recovery waits.
        let mut idle_since = Instant::now();
        loop {
            let s = status_of(&self.name)?;
            if let Some(sync) = s.sync.as_ref().filter(|sync| sync.action == self.action) {
                show(bar, sync);
                seen = true;
            }
            if let Some(result) = self.finished(&s) {
                bar.finish_and_clear();
                return Ok(result.clone());
            }
            if s.sync.is_some() {
                idle_since = Instant::now();
            }
            let (name, action) = (&self.name, &self.action);
            if seen && idle_since.elapsed() > RESULT_WAIT {
                // A result identical to the one before (same figures, same seconds) is still
                // this run's once the action has been gone this long.
                let last = s.last_sync.filter(|last| last.action == self.action);
                bar.finish_and_clear();
                return last.with_context(|| {
                    format!("{name}: the {action} ended without reporting a result")
                });
            }
            if !seen && idle_since.elapsed() > START_WAIT {
                bail!("{name}: no {action} started within {} s", START_WAIT.as_secs());
            }
            std::thread::sleep(POLL);
        }
    }

    fn finished<'a>(&self, s: &'a ArrayStatus) -> Option<&'a SyncResult> {
        let running = s.sync.as_ref().is_some_and(|sync| sync.action == self.action);
        let last = s.last_sync.as_ref()?;
        (!running && Some(last) != self.before.as_ref()).then_some(last)
    }
}

/// A bar for one array's action: bytes per member, md's speed and ETA in the message. It
/// says it waits until the action shows up (a check may queue behind a recovery).
pub fn bar_for(name: &str, action: &str, draw: bool) -> ProgressBar {
    if !draw {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    bar.set_style(style("{prefix}: waiting for it to start"));
    bar.set_prefix(format!("{name} {action}"));
    bar
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).expect("the template is valid").progress_chars("=> ")
}

fn show(bar: &ProgressBar, sync: &SyncStatus) {
    if bar.length() == Some(0) {
        bar.set_style(style("{prefix} [{wide_bar}] {percent:>3}% {msg}"));
    }
    bar.set_length(sync.total_sectors * 512);
    bar.set_position(sync.done_sectors * 512);
    let eta = sync.eta_seconds.map_or_else(
        || "ETA unknown".to_owned(),
        |s| format!("{} left", HumanDuration(Duration::from_secs(s))),
    );
    let throttled = if sync.throttled { " (yielding to I/O)" } else { "" };
    bar.set_message(format!("{}/s, {eta}{throttled}", HumanBytes(sync.speed_kib * 1024)));
}

/// Mismatches a text result lists: a check of an array never resynced (created
/// --assume-clean over old contents) listed all of the 1024 kept, a screen's worth many times.
const MISMATCH_LINES_SHOWN: usize = 16;

/// The result as text: the summary line, then a line per mismatch found (the first
/// `MISMATCH_LINES_SHOWN`, and how many more).
pub fn result_text(name: &str, result: &SyncResult) -> String {
    let mut text = format!("{name}: {}\n", sync_result_summary(result));
    let lines = mismatch_lines(result);
    for line in lines.iter().take(MISMATCH_LINES_SHOWN) {
        let _ = writeln!(text, "  mismatch at {line}");
    }
    if lines.len() > MISMATCH_LINES_SHOWN {
        let more = lines.len() - MISMATCH_LINES_SHOWN;
        let _ = writeln!(text, "  and {more} more (--json lists every one the array kept)");
    }
    if result.mismatch_sectors > 0 && result.mismatches.is_empty() {
        text.push_str("  (where: not recorded)\n");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use uraid_md::status::MismatchAt;

    #[test]
    fn a_long_list_of_mismatches_is_cut_with_a_count() {
        let mismatches: Vec<MismatchAt> =
            (0..40).map(|i| MismatchAt { member_sector: i * 8, sectors: 8, slot: None }).collect();
        let result = SyncResult { mismatch_sectors: 320, mismatches, ..SyncResult::default() };
        let text = result_text("md0", &result);
        assert_eq!(text.lines().filter(|l| l.starts_with("  mismatch at")).count(), 16);
        assert!(
            text.ends_with("  and 24 more (--json lists every one the array kept)\n"),
            "{text}"
        );
    }
}
