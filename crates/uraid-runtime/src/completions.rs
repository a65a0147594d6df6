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
    /// `Some` while this thread delivers a batch: what runs once it is delivered.
    static DEFERRED: RefCell<Option<Vec<Deferred>>> = const { RefCell::new(None) };
    /// Whether this thread delivers a batch. A flag without a destructor, read first, so that
    /// threads that never deliver one (an NBD connection's) never touch `DEFERRED`, whose
    /// destructor registration would outlive them on a thread that never ends (libFuzzer's
    /// leak check reported it).
    static DELIVERING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` once the batch of completions this thread is delivering has been delivered, or
/// at once when it delivers none.
pub fn after_completions(f: impl FnOnce() + 'static) {
    if !DELIVERING.get() {
        return f();
    }
    let f = DEFERRED.with_borrow_mut(|d| match d {
        Some(list) => {
            list.push(Box::new(f));
            None
        }
        None => Some(f),
    });
    if let Some(f) = f {
        f();
    }
}

/// Delivers a batch: runs `deliver` (which calls the requests' callbacks), then what they
/// deferred, in the order they deferred it. Work deferred by deferred work runs at once.
pub(crate) fn deliver_batch(deliver: impl FnOnce()) {
    let outer = DEFERRED.with_borrow_mut(|d| d.replace(Vec::new()));
    assert!(outer.is_none(), "batches do not nest");
    DELIVERING.set(true);
    deliver();
    DELIVERING.set(false);
    let deferred = DEFERRED.with_borrow_mut(Option::take).expect("the batch's list");
    for f in deferred {
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
