//! Goal: a member that cannot discard a range so that it reads back zeros (a disk with no
//! write-zeroes, a file on a filesystem that punches no holes: `MemberInfo::discard` false)
//! never gets a discard. Sent one, it fails it, and the engine fails the member: a client's
//! trim (mkfs, fstrim) failed every such member, and the array with them. The array takes
//! no discard then, saying which member is why; the frontends offer none.
//!
//! Method: RAID5 of 4 shared memory members; member 2 is a device that says it cannot
//! discard to zeros and fails every discard (EOPNOTSUPP), as the real ones do.

mod common;

use common::{KIB, config, pattern, with_workers};
use std::io;
use std::sync::Arc;
use uraid_core::Level;
use uraid_io::{IoCompletion, IoFailure, IoOp, IoRequest, Member, MemberCounters, MemberInfo};
use uraid_runtime::{MemberSource, Runtime, RuntimeError, SharedMemorySource};

const MEMBERS: usize = 4;
const MEMBER_BYTES: usize = 1 << 20;
const CHUNK_BYTES: usize = 16 * KIB;
/// Linux's EOPNOTSUPP: what a device with no way to discard to zeros answers.
const EOPNOTSUPP: i32 = 95;

/// A device that cannot discard to zeros: it says so, and fails a discard sent anyway.
struct NoZeroing {
    inner: uraid_runtime::SharedMemoryMember,
    info: MemberInfo,
    refused: Vec<IoCompletion>,
}

impl Member for NoZeroing {
    fn info(&self) -> &MemberInfo {
        &self.info
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        self.inner.counters()
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        if req.op == IoOp::Discard {
            let result = Err(IoFailure::Os { errno: EOPNOTSUPP });
            self.refused.push(IoCompletion { tag: req.tag, result });
            return;
        }
        // SAFETY: our caller's contract is the inner member's.
        unsafe { self.inner.submit(req) }
    }

    fn flush_submissions(&mut self) -> io::Result<()> {
        self.inner.flush_submissions()
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<()> {
        let had = !self.refused.is_empty();
        out.append(&mut self.refused);
        self.inner.reap(out, wait && !had)
    }

    fn in_flight(&self) -> usize {
        self.refused.len() + self.inner.in_flight()
    }
}

/// Shared memory members; those in `no_zeroing` cannot discard to zeros.
struct Source {
    inner: SharedMemorySource,
    no_zeroing: Vec<usize>,
}

impl MemberSource for Source {
    fn member_count(&self) -> usize {
        MEMBERS
    }

    fn open(&self, member: usize) -> io::Result<Box<dyn Member>> {
        let inner = self.inner.media()[member].member();
        if !self.no_zeroing.contains(&member) {
            return Ok(Box::new(inner));
        }
        let info = MemberInfo { discard: false, ..inner.info().clone() };
        Ok(Box::new(NoZeroing { inner, info, refused: Vec::new() }))
    }
}

fn started(no_zeroing: Vec<usize>) -> (Runtime, Source) {
    let cfg = with_workers(config(Level::Raid5, MEMBERS, CHUNK_BYTES, MEMBER_BYTES), 2);
    let source = Source { inner: SharedMemorySource::new(MEMBERS, MEMBER_BYTES), no_zeroing };
    (Runtime::start(&cfg, &source).unwrap(), source)
}

#[test]
fn a_member_that_cannot_discard_to_zeros_turns_discards_off() {
    let (rt, _source) = started(vec![2]);
    let data = pattern(1, 256 * KIB);
    rt.write_at(0, &data).unwrap();
    let err = rt.discard(0, 128 * KIB as u64).unwrap_err();
    assert!(matches!(&err, RuntimeError::DiscardUnsupported { member } if !member.is_empty()));
    assert!(err.to_string().contains("cannot discard a range so that it reads zeros"), "{err}");
    rt.flush().unwrap();
    assert_eq!(rt.failed_members(), Vec::<usize>::new(), "no member failed");
    assert!(rt.read_at(0, data.len()).unwrap() == data, "nothing discarded");
    assert!(rt.discard_refused_by().is_some(), "the frontends offer no trim");
}

#[test]
fn members_that_zero_take_discards_until_a_spare_that_cannot_joins() {
    let (rt, _source) = started(Vec::new());
    assert!(rt.discard_refused_by().is_none());
    rt.write_at(0, &pattern(2, 256 * KIB)).unwrap();
    rt.discard(0, 128 * KIB as u64).unwrap();
    assert!(rt.read_at(0, 128 * KIB).unwrap().iter().all(|&b| b == 0));
    // A spare that cannot discard to zeros takes slot 1: discards are off from then on.
    rt.fail_member(1);
    let spare =
        Source { inner: SharedMemorySource::new(MEMBERS, MEMBER_BYTES), no_zeroing: vec![1] };
    rt.replace_member(1, &spare).unwrap();
    rt.start_recovery(1, 0);
    assert!(matches!(rt.discard(0, 4096), Err(RuntimeError::DiscardUnsupported { .. })));
}
