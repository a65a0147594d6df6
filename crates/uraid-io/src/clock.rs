//! Time for the throttled member model, injectable so that tests are deterministic: the real
//! clock sleeps, the manual clock only moves when told to (or jumps when waited on).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub trait Clock: Send {
    /// Nanoseconds since the clock's own epoch.
    fn now_ns(&self) -> u64;
    /// Returns once `now_ns() >= deadline_ns`.
    fn sleep_until_ns(&self, deadline_ns: u64);
}

/// Wall time, from when the clock was made.
pub struct RealClock {
    epoch: Instant,
}

impl RealClock {
    #[must_use]
    pub fn new() -> RealClock {
        RealClock { epoch: Instant::now() }
    }
}

impl Default for RealClock {
    fn default() -> RealClock {
        RealClock::new()
    }
}

impl Clock for RealClock {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).expect("584 years of uptime")
    }

    fn sleep_until_ns(&self, deadline_ns: u64) {
        let now = self.now_ns();
        if deadline_ns > now {
            std::thread::sleep(Duration::from_nanos(deadline_ns - now));
        }
    }
}

/// Simulated time shared by clones: tests advance it; waiting on it jumps straight to the
/// deadline, so a driver on throttled members runs at full speed while the clock reports the
/// time the modelled disks would have taken.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    now_ns: Arc<AtomicU64>,
}

impl ManualClock {
    #[must_use]
    pub fn new() -> ManualClock {
        ManualClock::default()
    }

    pub fn advance_ns(&self, ns: u64) {
        self.now_ns.fetch_add(ns, Ordering::SeqCst);
    }

    pub fn set_ns(&self, ns: u64) {
        let old = self.now_ns.swap(ns, Ordering::SeqCst);
        assert!(ns >= old, "time runs forward: {old} ns, then {ns} ns");
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now_ns.load(Ordering::SeqCst)
    }

    fn sleep_until_ns(&self, deadline_ns: u64) {
        self.now_ns.fetch_max(deadline_ns, Ordering::SeqCst);
    }
}
