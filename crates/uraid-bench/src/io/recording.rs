//! A member wrapper that logs every I/O it is handed (after whatever merging the driver does):
//! what the counters cannot tell, which blocks were read (P, Q or data; twice or once) and how
//! large each I/O was. Everything else is forwarded unchanged.

use std::io;
use std::sync::Arc;
use uraid_io::member::{IoCompletion, IoOp, IoRequest, Member, MemberInfo};
use uraid_io::{MediaAccess, MemberCounters};

/// One I/O as the member received it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Logged {
    pub op: IoOp,
    pub offset_bytes: u64,
    pub len_bytes: usize,
}

pub struct Recording<M: Member> {
    inner: M,
    log: Vec<Logged>,
    /// Off in timing mode (`Rig::set_timing`): nothing reads that log, and a log grown by
    /// every I/O of every timed pass put reallocations and page faults into the CPU figures.
    enabled: bool,
}

impl<M: Member> Recording<M> {
    pub fn new(inner: M) -> Recording<M> {
        Recording { inner, log: Vec::new(), enabled: true }
    }

    /// Whether I/Os are logged from now on (an empty log either way).
    pub fn set_recording(&mut self, on: bool) {
        self.enabled = on;
        self.log = Vec::new();
    }

    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The I/Os received since the last call.
    pub fn take_log(&mut self) -> Vec<Logged> {
        std::mem::take(&mut self.log)
    }
}

impl<M: Member> Member for Recording<M> {
    fn info(&self) -> &MemberInfo {
        self.inner.info()
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        self.inner.counters()
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        if self.enabled {
            self.log.push(Logged {
                op: req.op,
                offset_bytes: req.offset_bytes,
                len_bytes: req.len_bytes,
            });
        }
        // SAFETY: forwarded unchanged: our caller's contract is the inner member's.
        unsafe { self.inner.submit(req) };
    }

    fn flush_submissions(&mut self) -> io::Result<()> {
        self.inner.flush_submissions()
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<()> {
        self.inner.reap(out, wait)
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }

    fn list_bad(&mut self, span: std::ops::Range<u64>) -> bool {
        self.inner.list_bad(span)
    }

    fn list_unproducible(&mut self, span: std::ops::Range<u64>) -> bool {
        self.inner.list_unproducible(span)
    }

    fn list_bad_replacement(&mut self, span: std::ops::Range<u64>) -> bool {
        self.inner.list_bad_replacement(span)
    }

    fn next_due_ns(&self) -> Option<u64> {
        self.inner.next_due_ns()
    }
}

impl<M: Member + MediaAccess> MediaAccess for Recording<M> {
    fn read_media(&self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_media(offset_bytes, buf)
    }

    fn write_media(&mut self, offset_bytes: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_media(offset_bytes, data)
    }
}
