//! A member in memory: I/Os are queued at submit and performed, in submission order, when
//! reaped; a vectored I/O is copied segment by segment. Exact, deterministic, and the inner
//! device of most tests.
//!
//! The bytes live in a `Medium`: a `Vec<u8>` owned by the member (`MemoryMember::new`), or one
//! shared by several members, as the runtime's workers each open their own member (own queue
//! and counters) on one shared medium, the way each opens its own ring on a file.
//!
//! Discard zeroes the range (what a device that guarantees zeroes after TRIM returns). Flush has
//! nothing to do: memory is as durable as this model gets; `Faulty` adds volatility on top.

use crate::counters::MemberCounters;
use crate::member::{IoCompletion, IoOp, IoRequest, MediaAccess, Member, MemberInfo};
use std::io;
use std::sync::Arc;

/// The bytes behind a `MemoryMember`. Ranges are checked against `size_bytes` before they get here.
pub trait Medium: Send {
    fn size_bytes(&self) -> usize;
    fn read(&self, at: usize, dst: &mut [u8]);
    fn write(&mut self, at: usize, src: &[u8]);
    fn zero(&mut self, at: usize, len: usize);
}

impl Medium for Vec<u8> {
    fn size_bytes(&self) -> usize {
        self.len()
    }

    fn read(&self, at: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self[at..at + dst.len()]);
    }

    fn write(&mut self, at: usize, src: &[u8]) {
        self[at..at + src.len()].copy_from_slice(src);
    }

    fn zero(&mut self, at: usize, len: usize) {
        self[at..at + len].fill(0);
    }
}

pub struct MemoryMember<D: Medium = Vec<u8>> {
    info: MemberInfo,
    data: D,
    queued: Vec<IoRequest>,
    counters: Arc<MemberCounters>,
}

impl MemoryMember {
    /// A member with its own zeroed medium of `size_bytes`.
    #[must_use]
    pub fn new(name: &str, size_bytes: usize) -> MemoryMember {
        MemoryMember::on(name, vec![0u8; size_bytes])
    }

    /// The whole medium, for inspection.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }
}

impl<D: Medium> MemoryMember<D> {
    /// A member on `medium`, with its own queue and counters.
    #[must_use]
    pub fn on(name: &str, medium: D) -> MemoryMember<D> {
        let info = MemberInfo {
            name: name.to_owned(),
            size_bytes: medium.size_bytes() as u64,
            logical_block_bytes: 512,
            rotational: false,
            discard: true,
        };
        MemoryMember { info, data: medium, queued: Vec::new(), counters: Arc::default() }
    }

    #[must_use]
    pub fn medium(&self) -> &D {
        &self.data
    }

    fn perform(&mut self, req: &IoRequest) {
        let mut at = usize::try_from(req.offset_bytes).expect("a memory offset fits in usize");
        match req.op {
            IoOp::Read => {
                // SAFETY: `req` was submitted and is being reaped now, so the submit contract
                // holds, and this is the only slice of its segments alive.
                for seg in unsafe { req.data_mut() } {
                    self.data.read(at, seg);
                    at += seg.len();
                }
            }
            IoOp::Write { .. } => {
                // SAFETY: as above (a write's segments are only read).
                for seg in unsafe { req.data() } {
                    self.data.write(at, seg);
                    at += seg.len();
                }
            }
            IoOp::Discard => self.data.zero(at, req.len_bytes),
            IoOp::Flush => {}
        }
    }
}

impl<D: Medium> Member for MemoryMember<D> {
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

impl<D: Medium> MediaAccess for MemoryMember<D> {
    fn read_media(&self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<()> {
        let at = self.media_range(offset_bytes, buf.len())?;
        self.data.read(at, buf);
        Ok(())
    }

    fn write_media(&mut self, offset_bytes: u64, data: &[u8]) -> io::Result<()> {
        let at = self.media_range(offset_bytes, data.len())?;
        self.data.write(at, data);
        Ok(())
    }
}

impl<D: Medium> MemoryMember<D> {
    /// Where `[offset, +len)` starts, if it lies inside the medium.
    fn media_range(&self, offset_bytes: u64, len: usize) -> io::Result<usize> {
        let at = usize::try_from(offset_bytes).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        if at.checked_add(len).is_none_or(|end| end > self.data.size_bytes()) {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(at)
    }
}
