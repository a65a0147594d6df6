//! The in-flight window of one connection: how many requests, and how many payload bytes,
//! have been read but not yet answered (the bytes' limit is given at each acquire: the
//! connection's share of the server's, which moves as connections come and go). The reader
//! waits at the window's edge, which pushes back on the client through TCP instead of
//! buffering without bound.

use std::sync::{Condvar, Mutex, PoisonError};

#[derive(Default)]
struct State {
    requests: u64,
    bytes: u64,
    /// The reader waits for room (a release must wake it).
    waiting: bool,
}

pub(crate) struct Window {
    requests_max: u64,
    state: Mutex<State>,
    freed: Condvar,
}

impl Window {
    pub fn new(requests_max: u64) -> Window {
        assert!(requests_max > 0, "a window holds at least one request");
        Window { requests_max, state: Mutex::default(), freed: Condvar::new() }
    }

    /// Waits for room for one more request of `bytes` within `bytes_max` in flight, calling
    /// `before_wait` (once, unlocked) first if it has to wait: the reader starts the requests
    /// it holds, which may be what frees the room. A request larger than the whole window
    /// still goes through when nothing else is in flight, so no request waits forever.
    pub fn acquire_or(&self, bytes: u64, bytes_max: u64, before_wait: impl FnOnce()) {
        let full = |s: &State| {
            s.requests > 0 && (s.requests >= self.requests_max || s.bytes + bytes > bytes_max)
        };
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if full(&s) {
            drop(s);
            before_wait();
            s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            while full(&s) {
                s.waiting = true;
                s = self.freed.wait(s).unwrap_or_else(PoisonError::into_inner);
            }
        }
        s.requests += 1;
        s.bytes += bytes;
    }

    /// Waits until nothing is in flight.
    pub fn wait_empty(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while s.requests > 0 {
            s.waiting = true;
            s = self.freed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }

    pub fn release(&self, bytes: u64) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        assert!(s.requests > 0, "released a request that was never acquired");
        assert!(s.bytes >= bytes, "released {bytes} bytes of {} in flight", s.bytes);
        s.requests -= 1;
        s.bytes -= bytes;
        // The condvar's wake is a syscall even with nobody waiting: paid only when the reader
        // waits (the window is rarely full).
        if std::mem::take(&mut s.waiting) {
            self.freed.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_full_window_waits_for_a_release() {
        let w = Arc::new(Window::new(2));
        w.acquire_or(60, 100, || {});
        w.acquire_or(0, 100, || {});
        let (tx, rx) = std::sync::mpsc::channel();
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            w2.acquire_or(50, 100, || {});
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "two in flight: waits");
        w.release(0);
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "60 + 50 > 100: waits");
        w.release(60);
        rx.recv_timeout(Duration::from_secs(5)).expect("room after the releases");
        t.join().unwrap();
        w.release(50);
        w.acquire_or(1000, 100, || {});
        w.release(1000);
        // A tighter limit for one acquire: 60 in flight, 30 more fit 100 but not 80.
        w.acquire_or(60, 100, || {});
        w.acquire_or(30, 100, || {});
        w.release(30);
        let (tx, rx) = std::sync::mpsc::channel();
        let w3 = w.clone();
        let t = std::thread::spawn(move || {
            w3.acquire_or(30, 80, || {});
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "60 + 30 > 80: waits");
        w.release(60);
        rx.recv_timeout(Duration::from_secs(5)).expect("room after the release");
        t.join().unwrap();
    }
}
