//! The in-flight window of one connection: how many requests, and how many payload bytes,
//! have been read but not yet answered. The reader waits at the window's edge, which pushes
//! back on the client through TCP instead of buffering without bound.

use std::sync::{Condvar, Mutex, PoisonError};

pub(crate) struct Window {
    requests_max: u64,
    bytes_max: u64,
    /// (requests, bytes) in flight.
    state: Mutex<(u64, u64)>,
    freed: Condvar,
}

impl Window {
    pub fn new(requests_max: u64, bytes_max: u64) -> Window {
        assert!(requests_max > 0, "a window holds at least one request");
        Window { requests_max, bytes_max, state: Mutex::new((0, 0)), freed: Condvar::new() }
    }

    /// Waits for room for one more request of `bytes`. A request larger than the whole
    /// window still goes through when nothing else is in flight, so no request waits forever.
    pub fn acquire(&self, bytes: u64) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while s.0 > 0 && (s.0 >= self.requests_max || s.1 + bytes > self.bytes_max) {
            s = self.freed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.0 += 1;
        s.1 += bytes;
    }

    pub fn release(&self, bytes: u64) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        assert!(s.0 > 0, "released a request that was never acquired");
        assert!(s.1 >= bytes, "released {bytes} bytes of {} in flight", s.1);
        s.0 -= 1;
        s.1 -= bytes;
        self.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_full_window_waits_for_a_release() {
        let w = Arc::new(Window::new(2, 100));
        w.acquire(60);
        w.acquire(0);
        let (tx, rx) = std::sync::mpsc::channel();
        let w2 = w.clone();
        let t = std::thread::spawn(move || {
            w2.acquire(50);
            tx.send(()).unwrap();
        });
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "two in flight: waits");
        w.release(0);
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "60 + 50 > 100: waits");
        w.release(60);
        rx.recv_timeout(Duration::from_secs(5)).expect("room after the releases");
        t.join().unwrap();
        w.release(50);
        w.acquire(1000);
        w.release(1000);
    }
}
