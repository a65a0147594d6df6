//! Completions delivered in batches: a worker hands back every request a turn finished, then
//! runs what the callbacks deferred to the end of that batch (`after_completions`). An NBD
//! connection defers the sending of its replies this way, so that a turn that answers 20 of
//! its requests writes them to the socket in one system call, from the worker itself, with no
//! other thread to wake.
//!
//! On a thread that is not delivering completions (a request refused before it reached a
//! worker, a backend that completes inline), deferred work runs at once.

use std::cell::{Cell, RefCell};

type Deferred = Box<dyn FnOnce()>;

thread_local! {
    /// What runs once the batch this thread delivers is delivered.
    static DEFERRED: RefCell<Vec<Deferred>> = const { RefCell::new(Vec::new()) };
    /// Whether this thread delivers a batch. A flag without a destructor, read first, so that
    /// threads that never deliver one (an NBD connection's) never touch `DEFERRED`, whose
    /// destructor registration would outlive them on a thread that never ends (libFuzzer's
    /// leak check reported it).
    static DELIVERING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` once the batch of completions this thread is delivering has been delivered, or
/// at once when it delivers none.
pub fn after_completions(f: impl FnOnce() + 'static) {
    if DELIVERING.get() {
        DEFERRED.with_borrow_mut(|d| d.push(Box::new(f)));
    } else {
        f();
    }
}

/// Delivers a batch: runs `deliver` (which calls the requests' callbacks), then what they
/// deferred, in the order they deferred it. Work deferred by deferred work runs at once.
pub(crate) fn deliver_batch(deliver: impl FnOnce()) {
    assert!(!DELIVERING.replace(true), "batches do not nest");
    deliver();
    DELIVERING.set(false);
    for f in DEFERRED.with_borrow_mut(std::mem::take) {
        f();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn deferred_work_runs_after_the_batch_and_at_once_outside_one() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let l = log.clone();
        after_completions(move || l.borrow_mut().push("outside"));
        assert_eq!(*log.borrow(), ["outside"], "no batch: at once");
        let l = log.clone();
        deliver_batch(|| {
            let (l1, l2) = (l.clone(), l.clone());
            after_completions(move || {
                l1.borrow_mut().push("deferred");
                let l3 = l1.clone();
                after_completions(move || l3.borrow_mut().push("nested"));
            });
            l2.borrow_mut().push("callback");
        });
        assert_eq!(*log.borrow(), ["outside", "callback", "deferred", "nested"]);
    }
}
