//! The background sync process: resync, recovery, check and repair all walk member sectors in
//! windows through `Runtime::sync`, which locks only the stripe heads of a window while user
//! I/O goes on around it.
//!
//! Speed (md's sync_speed_min / sync_speed_max, KiB/s of each member): above max the walk
//! sleeps; when the array is idle it keeps `WINDOWS_IN_FLIGHT` windows going to take the spare
//! bandwidth; when user I/O arrived since the last window and the walk is above min, it keeps
//! one window in flight, so that user requests queue behind at most one window's member I/O.
//! md instead stops at min when the array is busy (its users see 10 MB/s rebuilds under
//! load); here min is a floor, not a ceiling, and a busy array still rebuilds at the rate one
//! window at a time allows.
//!
//! Progress is the contiguous prefix of finished windows: everything below `done` is synced,
//! which is what a recovery offset or resync checkpoint may record.

use crate::status::SyncStatus;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};
use uraid_core::array::SyncKind;
use uraid_runtime::{Runtime, RuntimeError};

/// Windows in flight while the array is idle.
pub const WINDOWS_IN_FLIGHT: usize = 4;
/// Member sectors per window (4 MiB of each member), rounded up to whole chunks. Measured on
/// throttled members (`uraid bench io --only rebuild`): 256 KiB windows rebuilt at 0.50 of
/// the spare's bandwidth (idle), 1 MiB at 0.82, 4 MiB at 0.93: each window's reads and
/// writes must be long enough to overlap the next one's.
pub const WINDOW_SECTORS: u64 = 8192;
/// md's defaults: 1000 KiB/s and 200000 KiB/s.
pub const DEFAULT_SPEED_MIN_KIB: u64 = 1000;
pub const DEFAULT_SPEED_MAX_KIB: u64 = 200_000;
/// How far back the speed is measured.
const SPEED_SPAN: Duration = Duration::from_secs(2);

/// md's sync_speed_min and sync_speed_max.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncSpeed {
    pub min_kib: u64,
    pub max_kib: u64,
}

impl Default for SyncSpeed {
    fn default() -> SyncSpeed {
        SyncSpeed { min_kib: DEFAULT_SPEED_MIN_KIB, max_kib: DEFAULT_SPEED_MAX_KIB }
    }
}

/// What the array and the walk share: the stop flag, the speed limits, the status shown.
#[derive(Default)]
pub struct SyncControl {
    /// The array is stopping: the walk ends after its windows in flight.
    pub stop: AtomicBool,
    /// The running action is abandoned (its target failed); the next one may run.
    pub abort: AtomicBool,
    pub speed: Mutex<SyncSpeed>,
    pub status: Mutex<Option<SyncStatus>>,
}

impl SyncControl {
    #[must_use]
    pub fn speed(&self) -> SyncSpeed {
        *self.speed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[must_use]
    pub fn status(&self) -> Option<SyncStatus> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn set_status(&self, status: Option<SyncStatus>) {
        *self.status.lock().unwrap_or_else(PoisonError::into_inner) = status;
    }
}

/// How a walk ended.
#[derive(Debug)]
pub enum Walked {
    /// Every range was synced.
    Done { sectors: u64, seconds: f64 },
    /// Stopped on request; everything below `done` (as in `on_progress`) is synced.
    Interrupted { sectors: u64, seconds: f64 },
}

/// The md name of an action.
#[must_use]
pub fn action_name(kind: SyncKind) -> &'static str {
    match kind {
        SyncKind::Resync => "resync",
        SyncKind::Recovery => "recover",
        // md shows a replacement's copy as a recovery too.
        SyncKind::Replace => "replace",
        SyncKind::Check => "check",
        SyncKind::Repair => "repair",
    }
}

/// Why a walk stopped: the runtime's error, and the window of member sectors where a sync
/// request met it, so that an operator learns where the array could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{error}{}", where_text(*.member_sectors))]
pub struct WalkError {
    pub error: RuntimeError,
    pub member_sectors: Option<(u64, u64)>,
}

fn where_text(member_sectors: Option<(u64, u64)>) -> String {
    member_sectors.map_or_else(String::new, |(a, b)| format!(" (member sectors {a}-{b})"))
}

/// The first row of chunks in member sectors `from..to` (a window that failed) that fails
/// again on its own: where an operator looks, not the whole window. Each row is synced
/// again, which is harmless (a block rebuilt or parity rewritten twice is the same block).
/// The whole window when none fails again.
fn narrow(rt: &Runtime, kind: SyncKind, from: u64, to: u64, chunk_sectors: u64) -> (u64, u64) {
    for row in (from..to).step_by(usize::try_from(chunk_sectors.max(1)).unwrap_or(usize::MAX)) {
        let end = (row + chunk_sectors).min(to);
        let (tx, rx) = mpsc::channel();
        rt.sync(kind, row, end - row, move |c| {
            let _ = tx.send(c.result.is_err());
        });
        if rx.recv().unwrap_or(false) {
            return (row, end);
        }
    }
    (from, to)
}

/// Syncs `ranges` (member sectors `(start, len)`, in order) with `kind`. `on_progress(range
/// index, sector)` is called as the finished prefix grows: every range before that index is
/// done, and the range itself up to `sector`. `member_sectors` sizes the windows' rounding.
#[allow(clippy::too_many_lines)] // one loop (issue, wait, account): split, its state would spread
pub fn walk(
    rt: &Runtime,
    kind: SyncKind,
    ranges: &[(u64, u64)],
    chunk_sectors: u64,
    control: &SyncControl,
    on_progress: &mut dyn FnMut(usize, u64),
) -> Result<Walked, WalkError> {
    let window = WINDOW_SECTORS.next_multiple_of(chunk_sectors);
    let windows = cut(ranges, window);
    let total: u64 = ranges.iter().map(|r| r.1).sum();
    let start = Instant::now();
    let (tx, rx) = mpsc::channel::<(usize, Result<(), RuntimeError>)>();
    let mut finished = vec![false; windows.len()];
    let mut next = 0;
    let mut prefix = 0; // windows [0, prefix) finished
    let mut in_flight = 0;
    let mut done_sectors = 0u64;
    let mut meter = SpeedMeter::new(start);
    let mut last_user = rt.user_requests();
    let mut throttled;
    let mut error = None;
    let publish = |done: u64, speed: u64, throttled: bool| {
        let left = total - done;
        control.set_status(Some(SyncStatus {
            action: action_name(kind).to_owned(),
            done_sectors: done,
            total_sectors: total,
            speed_kib: speed,
            eta_seconds: (speed > 0).then(|| left / 2 / speed),
            throttled,
        }));
    };
    publish(0, 0, false);
    loop {
        let stopping = control.stop.load(Ordering::Acquire)
            || control.abort.load(Ordering::Acquire)
            || error.is_some();
        let speed = meter.kib_per_second(Instant::now());
        let limits = control.speed();
        let user = rt.user_requests();
        let busy = user != last_user;
        last_user = user;
        let limit =
            if busy && speed > limits.min_kib { 1 } else { ceiling_windows(limits, window) };
        throttled = busy && speed > limits.min_kib;
        if !stopping && next < windows.len() && in_flight < limit {
            let (at, n, _) = windows[next];
            if meter.within(Instant::now(), limits.max_kib, n) {
                let tx = tx.clone();
                let index = next;
                rt.sync(kind, at, n, move |c| {
                    let _ = tx.send((index, c.result));
                });
                meter.submitted(n);
                next += 1;
                in_flight += 1;
                continue;
            }
            // Over the ceiling with it: let a window finish first, or wait (the speed shown
            // falls meanwhile, as md's does).
            if in_flight == 0 {
                std::thread::sleep(Duration::from_millis(10));
                publish(done_sectors, meter.kib_per_second(Instant::now()), throttled);
                continue;
            }
        }
        if in_flight == 0 {
            break;
        }
        let Ok((index, result)) = rx.recv() else {
            return Err(WalkError { error: RuntimeError::Gone, member_sectors: None });
        };
        in_flight -= 1;
        if let Err(e) = result {
            let (at, n, _) = windows[index];
            error.get_or_insert(WalkError { error: e, member_sectors: Some((at, at + n)) });
        }
        finished[index] = true;
        meter.add(Instant::now(), windows[index].1);
        let before = prefix;
        while prefix < windows.len() && finished[prefix] {
            done_sectors += windows[prefix].1;
            prefix += 1;
        }
        if prefix > before && error.is_none() {
            let (at, n, range) = windows[prefix - 1];
            on_progress(range, at + n);
            publish(done_sectors, meter.kib_per_second(Instant::now()), throttled);
        }
    }
    control.set_status(None);
    if let Some(mut e) = error {
        e.member_sectors = e.member_sectors.map(|(a, b)| narrow(rt, kind, a, b, chunk_sectors));
        return Err(e);
    }
    let seconds = start.elapsed().as_secs_f64();
    if prefix < windows.len() {
        return Ok(Walked::Interrupted { sectors: done_sectors, seconds });
    }
    Ok(Walked::Done { sectors: total, seconds })
}

/// Windows in flight while idle: `WINDOWS_IN_FLIGHT`, but no more than the ceiling allows in
/// one speed span (at least one). Before the first window completes the speed is not known,
/// and a low ceiling would otherwise let the first 16 MiB go at once: a whole recovery of a
/// small member at 256 KiB/s finished before a stop that was meant to find it midway
/// (uraid-md's `a_hand_over_stopped_midway_is_rebuilt_whole_above_its_checkpoint`, about
/// one run in three).
fn ceiling_windows(limits: SyncSpeed, window_sectors: u64) -> usize {
    let span_kib = limits.max_kib.saturating_mul(SPEED_SPAN.as_secs());
    let windows = span_kib / (window_sectors / 2).max(1);
    usize::try_from(windows).unwrap_or(usize::MAX).clamp(1, WINDOWS_IN_FLIGHT)
}

/// Windows of at most `window` sectors, aligned to multiples of it, within each range:
/// `(start, len, range index)`.
fn cut(ranges: &[(u64, u64)], window: u64) -> Vec<(u64, u64, usize)> {
    let mut out = Vec::new();
    for (i, &(start, len)) in ranges.iter().enumerate() {
        let end = start + len;
        let mut at = start;
        while at < end {
            let next = ((at / window + 1) * window).min(end);
            out.push((at, next - at, i));
            at = next;
        }
    }
    out
}

/// The walk's speed as md measures it (its resync marks): the member sectors finished since
/// a mark at least `SPEED_SPAN` old (or the walk's start), over the time since that mark.
/// Until the fourth session of 2026-12-06 it summed the windows finished in the span and
/// divided by the time since the first of them finished, which counted that window's work
/// without its time: two windows in the span read as twice the speed (a rebuild held to
/// 5120K/sec showed "speed=10060K/sec"). And the ceiling was checked against what had
/// finished, so the windows let go at once overshot it (that rebuild ran at 7.8 MB/s): a
/// window now goes only if it keeps the work since the mark, in flight included, within it.
struct SpeedMeter {
    /// (when, member sectors finished by then), oldest first; the first is the mark.
    marks: VecDeque<(Instant, u64)>,
    done: u64,
    in_flight: u64,
}

impl SpeedMeter {
    fn new(start: Instant) -> SpeedMeter {
        SpeedMeter { marks: VecDeque::from([(start, 0)]), done: 0, in_flight: 0 }
    }

    /// A window of `sectors` went out.
    fn submitted(&mut self, sectors: u64) {
        self.in_flight += sectors;
    }

    /// Whether a window of `sectors` may go out at `now` under a ceiling of `max_kib`: the
    /// first always does (a ceiling below one window in a span would never start).
    #[allow(clippy::cast_precision_loss)] // sectors and KiB/s are far below 2^52
    fn within(&self, now: Instant, max_kib: u64, sectors: u64) -> bool {
        let (since, at_mark) = self.marks[0];
        let ahead = self.done + self.in_flight + sectors - at_mark;
        let allowed = max_kib as f64 * 2.0 * now.duration_since(since).as_secs_f64();
        (self.done == 0 && self.in_flight == 0) || ahead as f64 <= allowed
    }

    /// A window of `sectors` finished at `now`.
    fn add(&mut self, now: Instant, sectors: u64) {
        self.in_flight -= sectors;
        self.done += sectors;
        self.marks.push_back((now, self.done));
        // The mark moves up to the newest one at least a span old.
        while self.marks.len() > 1 && now.duration_since(self.marks[1].0) >= SPEED_SPAN {
            self.marks.pop_front();
        }
    }

    /// KiB/s of each member. Over a second at least, as md's (`if (!dt) dt++`): the first
    /// window, done in a few milliseconds, read as 80 GB/s under a ceiling of 2 MB/s.
    #[allow(clippy::cast_sign_loss)] // a rate is never negative
    fn kib_per_second(&self, now: Instant) -> u64 {
        let (since, at_mark) = self.marks[0];
        let seconds = now.duration_since(since).as_secs_f64().max(1.0);
        ((self.done - at_mark) as f64 / 2.0 / seconds) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::{
        SPEED_SPAN, SpeedMeter, SyncSpeed, WINDOW_SECTORS, WINDOWS_IN_FLIGHT, ceiling_windows, cut,
    };
    use std::time::{Duration, Instant};

    #[test]
    fn the_speed_is_the_work_since_a_mark_over_the_time_since_it() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut m = SpeedMeter::new(start);
        assert_eq!(m.kib_per_second(at(500)), 0);
        let mut first = SpeedMeter::new(start);
        first.submitted(8192);
        first.add(at(20), 8192);
        assert_eq!(first.kib_per_second(at(20)), 4096, "over a second at least");
        // 4 MiB windows (8192 sectors) every 800 ms: 5120 KiB/s.
        for i in 1..=10 {
            m.submitted(8192);
            m.add(at(800 * i), 8192);
            let speed = m.kib_per_second(at(800 * i));
            // (The first, at 800 ms, over a second: 4096.)
            assert!(i == 1 || (5110..=5130).contains(&speed), "window {i}: {speed}");
        }
        // Idle after: the rate falls as time passes with nothing done.
        let later = m.kib_per_second(at(8000 + 2 * SPEED_SPAN.as_millis() as u64));
        assert!(later < 2600, "{later}");
    }

    #[test]
    fn a_window_goes_only_within_the_ceiling_counting_those_in_flight() {
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        let mut m = SpeedMeter::new(start);
        assert!(m.within(start, 1024, 8192), "the first goes at once");
        m.submitted(8192);
        // 4 MiB more at 1 MiB/s: not before 8 s (the first's 4 MiB counted).
        assert!(!m.within(at(7900), 1024, 8192));
        assert!(m.within(at(8000), 1024, 8192));
        m.add(at(1000), 8192);
        assert!(!m.within(at(7900), 1024, 8192), "finished or in flight, the same");
    }

    #[test]
    fn windows_align_and_stay_in_their_ranges() {
        let w = cut(&[(100, 1000), (2048, 512)], 512);
        assert_eq!(w, vec![(100, 412, 0), (512, 512, 0), (1024, 76, 0), (2048, 512, 1)]);
    }

    #[test]
    fn a_low_ceiling_keeps_one_window_in_flight() {
        let w = WINDOW_SECTORS;
        assert_eq!(ceiling_windows(SyncSpeed::default(), w), WINDOWS_IN_FLIGHT);
        assert_eq!(ceiling_windows(SyncSpeed { min_kib: 1, max_kib: 256 }, w), 1);
        assert_eq!(ceiling_windows(SyncSpeed { min_kib: 1, max_kib: 0 }, w), 1);
        // 4 MiB windows, 2 s spans: 4 MiB/s lets two go.
        assert_eq!(ceiling_windows(SyncSpeed { min_kib: 1, max_kib: 4096 }, w), 2);
    }
}
