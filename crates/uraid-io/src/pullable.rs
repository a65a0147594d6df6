//! A member that another thread can pull, as a disk is pulled from its bay: from then on every
//! I/O sent to it fails (those already on it complete). For tests and drills of the lifecycle
//! under load (`Faulty` fails I/O too, but is set up by whoever owns it, before it is boxed
//! into a worker).

use crate::counters::MemberCounters;
use crate::member::{IoCompletion, IoFailure, IoRequest, Member, MemberInfo};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub struct Pullable<M: Member + ?Sized> {
    inner: Box<M>,
    pulled: Arc<AtomicBool>,
    /// Sent after the pull: failed at the next reap.
    failed: Vec<u64>,
}

impl<M: Member + ?Sized> Pullable<M> {
    /// `inner`, pulled once `pulled` is set (by anyone holding a clone).
    #[must_use]
    pub fn new(inner: Box<M>, pulled: Arc<AtomicBool>) -> Pullable<M> {
        Pullable { inner, pulled, failed: Vec::new() }
    }
}

impl<M: Member + ?Sized> Member for Pullable<M> {
    fn info(&self) -> &MemberInfo {
        self.inner.info()
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        self.inner.counters()
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        if self.pulled.load(Ordering::Acquire) {
            self.failed.push(req.tag);
        } else {
            // SAFETY: our caller's contract is the inner member's.
            unsafe { self.inner.submit(req) }
        }
    }

    fn flush_submissions(&mut self) -> io::Result<()> {
        self.inner.flush_submissions()
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<()> {
        let pulled = |tag| IoCompletion { tag, result: Err(IoFailure::Injected("pulled")) };
        let none = self.failed.is_empty();
        out.extend(self.failed.drain(..).map(pulled));
        self.inner.reap(out, wait && none)
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.failed.len()
    }

    fn allocated(&self, span: std::ops::Range<u64>) -> Option<Vec<std::ops::Range<u64>>> {
        if self.pulled.load(Ordering::Acquire) {
            return None;
        }
        self.inner.allocated(span)
    }

    fn list_bad(&mut self, span: std::ops::Range<u64>) -> bool {
        !self.pulled.load(Ordering::Acquire) && self.inner.list_bad(span)
    }

    fn list_unproducible(&mut self, span: std::ops::Range<u64>) -> bool {
        !self.pulled.load(Ordering::Acquire) && self.inner.list_unproducible(span)
    }

    fn list_bad_replacement(&mut self, span: std::ops::Range<u64>) -> bool {
        !self.pulled.load(Ordering::Acquire) && self.inner.list_bad_replacement(span)
    }

    fn next_due_ns(&self) -> Option<u64> {
        if self.failed.is_empty() { self.inner.next_due_ns() } else { Some(0) }
    }
}
