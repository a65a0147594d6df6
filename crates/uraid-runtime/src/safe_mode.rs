//! md's safe mode (`safe_mode_delay`): while no write is under way an array's superblocks say
//! clean, so that a crash of an idle (or read-only) array needs no resync; a write that finds
//! the array clean first has it marked active, durably, and only then goes on.
//!
//! The runtime holds the gate, which every write, discard and zeroing passes
//! (`Runtime::submit`); the owner of the superblocks (uraid-md) does the marking: it gives the
//! hook a write calls on a clean array (`set_mark_active`), and calls `try_mark_clean` when it
//! has seen no write for the delay. A runtime nobody marks stays active: the gate then costs
//! two atomic additions a write.
//!
//! Why it is safe: `try_mark_clean` closes the gate (CLOSING) and then reads the writes in
//! flight, while a write counts itself in flight and then reads the gate, both sequentially
//! consistent: either the write sees the gate closing and waits for the owner's decision
//! under the lock, or the owner sees the write and gives up. Once the gate is closed with
//! nothing in flight, the owner's flush makes every write acknowledged before durable (the
//! write hole log's early acknowledgements and the held partial stripes included: a flush
//! waits for them), and only then may the superblocks say clean.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::SeqCst};
use std::sync::{Mutex, OnceLock, PoisonError};

const ACTIVE: u8 = 0;
const CLOSING: u8 = 1;
const CLEAN: u8 = 2;

type Hook = Box<dyn Fn() + Send + Sync>;

pub struct SafeMode {
    state: AtomicU8,
    in_flight: AtomicU64,
    submitted: AtomicU64,
    /// Held while the gate changes state (and while the owner marks the superblocks).
    lock: Mutex<()>,
    mark_active: OnceLock<Hook>,
}

impl Default for SafeMode {
    fn default() -> Self {
        SafeMode {
            state: AtomicU8::new(ACTIVE),
            in_flight: AtomicU64::new(0),
            submitted: AtomicU64::new(0),
            lock: Mutex::new(()),
            mark_active: OnceLock::new(),
        }
    }
}

impl SafeMode {
    /// A write starts: returns once the array is marked active (at once while it is).
    pub(crate) fn write_starts(&self) {
        self.submitted.fetch_add(1, SeqCst);
        self.in_flight.fetch_add(1, SeqCst);
        if self.state.load(SeqCst) == ACTIVE {
            return;
        }
        self.in_flight.fetch_sub(1, SeqCst);
        let _gate = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.make_active_locked();
        self.in_flight.fetch_add(1, SeqCst);
    }

    /// A write that `write_starts` let in has finished (acknowledged or failed).
    pub(crate) fn write_ends(&self) {
        self.in_flight.fetch_sub(1, SeqCst);
    }

    fn make_active_locked(&self) {
        if self.state.load(SeqCst) == CLEAN {
            if let Some(mark) = self.mark_active.get() {
                mark();
            }
            self.state.store(ACTIVE, SeqCst);
        }
    }

    /// The owner's hook that marks the superblocks active (durably, before it returns). Set
    /// once; a second call is ignored.
    pub fn set_mark_active(&self, hook: impl Fn() + Send + Sync + 'static) {
        let _ = self.mark_active.set(Box::new(hook));
    }

    /// Marks the array active if it is clean (before a sync action writes, say).
    pub fn ensure_active(&self) {
        let _gate = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        self.make_active_locked();
    }

    /// Writes submitted so far: the owner tells an idle array by this count not moving.
    #[must_use]
    pub fn writes_submitted(&self) -> u64 {
        self.submitted.load(SeqCst)
    }

    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.state.load(SeqCst) == CLEAN
    }

    /// If the array is active, no write was submitted since the owner saw `submitted` and
    /// none is in flight, closes the gate and calls `mark_clean`, which must make every
    /// write durable and mark the superblocks clean (false: it could not, and the array stays
    /// active). Writes that come meanwhile wait. Returns whether the array is now clean.
    pub fn try_mark_clean(&self, submitted: u64, mark_clean: impl FnOnce() -> bool) -> bool {
        let _gate = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        if self.state.load(SeqCst) != ACTIVE {
            return false;
        }
        self.state.store(CLOSING, SeqCst);
        let idle = self.in_flight.load(SeqCst) == 0 && self.submitted.load(SeqCst) == submitted;
        let clean = idle && mark_clean();
        self.state.store(if clean { CLEAN } else { ACTIVE }, SeqCst);
        clean
    }
}

#[cfg(test)]
mod tests {
    //! Goal: the gate's rules, one by one, and under racing writers. Method: a hook that
    //! counts its calls; for the race, writers that check the gate is never clean while they
    //! are in flight, against a thread marking it clean as often as it can.

    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    fn counted() -> (Arc<SafeMode>, Arc<AtomicU64>) {
        let sm = Arc::new(SafeMode::default());
        let marks = Arc::new(AtomicU64::new(0));
        let m = marks.clone();
        sm.set_mark_active(move || {
            m.fetch_add(1, SeqCst);
        });
        (sm, marks)
    }

    #[test]
    fn idle_goes_clean_and_the_next_write_marks_active_first() {
        let (sm, marks) = counted();
        assert!(sm.try_mark_clean(0, || true));
        assert!(sm.is_clean());
        assert!(!sm.try_mark_clean(0, || panic!("clean already: not asked again")));
        sm.write_starts();
        assert_eq!(marks.load(SeqCst), 1);
        assert!(!sm.is_clean());
        sm.write_starts();
        assert_eq!(marks.load(SeqCst), 1, "marked once, not per write");
        sm.write_ends();
        sm.write_ends();
    }

    #[test]
    fn a_write_in_flight_or_one_since_keeps_it_active() {
        let (sm, _) = counted();
        sm.write_starts();
        assert!(!sm.try_mark_clean(1, || panic!("a write is in flight")));
        sm.write_ends();
        assert!(!sm.try_mark_clean(0, || panic!("a write came since the owner looked")));
        assert!(!sm.try_mark_clean(1, || false), "the owner could not flush");
        assert!(!sm.is_clean());
        assert!(sm.try_mark_clean(1, || true));
        sm.ensure_active();
        assert!(!sm.is_clean());
    }

    #[test]
    fn never_clean_while_a_write_is_in_flight() {
        // Writers write without pause but stop when asked (`pause`), so that the owner gets
        // idle moments for sure; between them it tries while they race it.
        let (sm, marks) = counted();
        let (stop, pause, paused) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let writers: Vec<_> = (0..3)
            .map(|_| {
                let (sm, stop, pause, paused) =
                    (sm.clone(), stop.clone(), pause.clone(), paused.clone());
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(SeqCst) {
                        if pause.load(SeqCst) {
                            paused.fetch_add(1, SeqCst);
                            while pause.load(SeqCst) {
                                std::hint::spin_loop();
                            }
                            paused.fetch_sub(1, SeqCst);
                        }
                        sm.write_starts();
                        assert!(!sm.is_clean(), "clean with a write in flight");
                        std::hint::spin_loop();
                        assert!(!sm.is_clean(), "clean with a write in flight");
                        sm.write_ends();
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let mut cleaned = 0;
        for round in 0..20 {
            for _ in 0..500 {
                cleaned += u32::from(sm.try_mark_clean(sm.writes_submitted(), || true));
            }
            pause.store(true, SeqCst);
            while paused.load(SeqCst) < 3 {
                // A writer that failed its check never pauses: fail here, do not wait.
                assert!(
                    !writers.iter().any(std::thread::JoinHandle::is_finished),
                    "a writer failed"
                );
                std::hint::spin_loop();
            }
            let seen = sm.writes_submitted();
            // Clean now, or already by the last try before the pause.
            cleaned += u32::from(sm.try_mark_clean(seen, || true));
            assert!(sm.is_clean(), "idle in round {round}");
            pause.store(false, SeqCst);
            // A write comes to the clean array before the next round.
            while sm.writes_submitted() == seen {
                assert!(
                    !writers.iter().any(std::thread::JoinHandle::is_finished),
                    "a writer failed"
                );
                std::hint::spin_loop();
            }
        }
        stop.store(true, SeqCst);
        let writes: u64 = writers.into_iter().map(|w| w.join().unwrap()).sum();
        assert!(writes > 0 && cleaned >= 20, "{writes} writes, {cleaned} cleans");
        // Each clean was marked active again by the first write after it.
        assert_eq!(marks.load(SeqCst), u64::from(cleaned));
    }
}
