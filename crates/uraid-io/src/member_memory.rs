//! A member backed by a `Vec<u8>`: I/Os are queued at submit and performed, in submission
//! order, when reaped; a vectored I/O is copied segment by segment. Exact, deterministic, and the inner device of most tests.
//!
//! Discard zeroes the range (what a device that guarantees zeroes after TRIM returns). Flush has
//! nothing to do: memory is as durable as this model gets; `Faulty` adds volatility on top.

use crate::counters::MemberCounters;
use crate::member::{IoCompletion, IoOp, IoRequest, MediaAccess, Member, MemberInfo};
use std::io;
use std::sync::Arc;

pub struct MemoryMember {
    info: MemberInfo,
    data: Vec<u8>,
    queued: Vec<IoRequest>,
    counters: Arc<MemberCounters>,
}

impl MemoryMember {
    #[must_use]
    pub fn new(name: &str, size_bytes: usize) -> MemoryMember {
        let info = MemberInfo {
            name: name.to_owned(),
            size_bytes: size_bytes as u64,
            logical_block_bytes: 512,
        };
        MemoryMember {
            info,
            data: vec![0u8; size_bytes],
            queued: Vec::new(),
            counters: Arc::default(),
        }
    }

    /// The whole medium, for inspection.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    fn perform(&mut self, req: &IoRequest) {
        let at = usize::try_from(req.offset_bytes).expect("a memory offset fits in usize");
        let range = at..at + req.len_bytes;
        match req.op {
            // SAFETY: `req` was submitted and is being reaped now, so the submit contract holds.
            IoOp::Read => unsafe { req.scatter(&self.data[range]) },
            IoOp::Write { .. } => {
                let mut at = range.start;
                // SAFETY: as above.
                for seg in unsafe { req.data() } {
                    self.data[at..at + seg.len()].copy_from_slice(seg);
                    at += seg.len();
                }
            }
            IoOp::Discard => self.data[range].fill(0),
            IoOp::Flush => {}
        }
    }
}

impl Member for MemoryMember {
    fn info(&self) -> &MemberInfo {
        &self.info
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        &self.counters
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        self.counters.record_submit(req.op, req.len_bytes);
        self.queued.push(req);
    }

    fn flush_submissions(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, _wait: bool) -> io::Result<()> {
        for req in std::mem::take(&mut self.queued) {
            let result = self.info.check_range(&req);
            if result.is_ok() {
                self.perform(&req);
            } else {
                self.counters.record_error();
            }
            out.push(IoCompletion { tag: req.tag, result });
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.queued.len()
    }
}

impl MediaAccess for MemoryMember {
    fn read_media(&self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<()> {
        let at = usize::try_from(offset_bytes).expect("a memory offset fits in usize");
        let src = self.data.get(at..at + buf.len()).ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write_media(&mut self, offset_bytes: u64, data: &[u8]) -> io::Result<()> {
        let at = usize::try_from(offset_bytes).expect("a memory offset fits in usize");
        let dst = self.data.get_mut(at..at + data.len()).ok_or(io::ErrorKind::UnexpectedEof)?;
        dst.copy_from_slice(data);
        Ok(())
    }
}
