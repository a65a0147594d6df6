//! Goal: a member brought back (a spare put in its slot and its recovery started) gets only
//! what is planned for the new device, and stays back. Two ways it went wrong, each a test:
//! - a read the engine planned while the member was in sync, still queued when the spare took
//!   the slot, read the spare's blank blocks as good data;
//! - a write to the old device that failed late, after the runtime cleared the member's
//!   failure, was published as news and failed the member again once back (a CI run of
//!   kernel_readd: a bitmap write to the member missing at assemble failed after the re-add).
//!
//! Method: RAID5 of 4 shared memory members on two workers; member 1's first devices hold
//! every read (or every write) until a gate opens and then fail it. A request on member 1's
//! chunk waits on it; the test puts a spare in slot 1 and starts its recovery (both return at
//! once), then opens the gate. The request must end with the right data; after a flush no
//! member may be failed, in the runtime or in an engine; the recovery must rebuild the spare,
//! which then serves the array with member 0 failed.

mod common;

use common::{KIB, assert_same, config, with_workers};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uraid_core::Level;
use uraid_core::array::SyncKind;
use uraid_io::{IoCompletion, IoFailure, IoOp, IoRequest, Member, MemberCounters, MemberInfo};
use uraid_runtime::{MemberSource, Runtime, SharedMemory, SharedMemorySource};

const MEMBERS: usize = 4;
const MEMBER_BYTES: usize = 1 << 20;
const CHUNK_BYTES: usize = 16 * KIB;

/// Shared by the test and the gated devices.
#[derive(Default)]
struct Gate {
    /// Writes are held (else reads); the other kind goes to the media.
    writes: bool,
    open: AtomicBool,
    /// I/Os held so far.
    held: AtomicUsize,
}

/// A device whose reads (or writes) all wait for the gate, then fail without touching the
/// media.
struct Gated {
    inner: uraid_runtime::SharedMemoryMember,
    gate: Arc<Gate>,
    held: Vec<u64>,
}

impl Member for Gated {
    fn info(&self) -> &MemberInfo {
        self.inner.info()
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        self.inner.counters()
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        if matches!(req.op, IoOp::Write { .. }) != self.gate.writes {
            // SAFETY: our caller's contract is the inner member's.
            return unsafe { self.inner.submit(req) };
        }
        self.held.push(req.tag);
        self.gate.held.fetch_add(1, Ordering::AcqRel);
    }

    fn flush_submissions(&mut self) -> io::Result<()> {
        self.inner.flush_submissions()
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<()> {
        let before = out.len();
        self.inner.reap(out, false)?;
        while wait && out.len() == before && !self.gate.open.load(Ordering::Acquire) {
            if self.held.is_empty() {
                return self.inner.reap(out, true);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if self.gate.open.load(Ordering::Acquire) {
            let failed = |tag| IoCompletion { tag, result: Err(IoFailure::Injected("gated")) };
            out.extend(self.held.drain(..).map(failed));
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.held.len() + self.inner.in_flight()
    }
}

/// Shared memory members; member 1's (each worker's instance) are gated.
struct GatedSource {
    inner: SharedMemorySource,
    gate: Arc<Gate>,
}

impl MemberSource for GatedSource {
    fn member_count(&self) -> usize {
        MEMBERS
    }

    fn open(&self, member: usize) -> io::Result<Box<dyn Member>> {
        let media = self.inner.media()[member].member();
        if member != 1 {
            return Ok(Box::new(media));
        }
        Ok(Box::new(Gated { inner: media, gate: self.gate.clone(), held: Vec::new() }))
    }
}

/// The new device for slot 1.
struct Spare(SharedMemory);

impl MemberSource for Spare {
    fn member_count(&self) -> usize {
        MEMBERS
    }

    fn open(&self, _member: usize) -> io::Result<Box<dyn Member>> {
        Ok(Box::new(self.0.member()))
    }
}

#[test]
fn a_read_planned_before_the_swap_does_not_read_the_spare() {
    spare_in_slot_1_while_member_1_holds(false);
}

#[test]
fn a_late_write_error_of_the_replaced_device_does_not_fail_the_member_again() {
    spare_in_slot_1_while_member_1_holds(true);
}

/// The method of the module docs; `writes`: member 1 holds writes (else reads).
fn spare_in_slot_1_while_member_1_holds(writes: bool) {
    let cfg = with_workers(config(Level::Raid5, MEMBERS, CHUNK_BYTES, MEMBER_BYTES), 2);
    let inner = SharedMemorySource::new(MEMBERS, MEMBER_BYTES);
    // Written before the gated runtime starts: member 1's media holds its blocks, parity too.
    let setup = Runtime::start(&cfg, &inner).unwrap();
    let size = setup.size_bytes() as usize;
    let mut data = common::pattern(5, size);
    setup.write_at(0, &data).unwrap();
    setup.shutdown().unwrap();
    let gate = Arc::new(Gate { writes, ..Gate::default() });
    let source = GatedSource { inner, gate: gate.clone() };
    let rt = Runtime::start(&cfg, &source).unwrap();

    // Left-symmetric: array chunk 1 is member 1's in stripe 0.
    let at = CHUNK_BYTES;
    let block = common::pattern(6, 4096);
    let answer = Mutex::new(None);
    std::thread::scope(|s| {
        s.spawn(|| {
            let done = if writes {
                rt.write_at(at as u64, &block).map(|()| block.clone())
            } else {
                rt.read_at(at as u64, block.len())
            };
            *answer.lock().unwrap() = Some(done);
        });
        while gate.held.load(Ordering::Acquire) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        rt.fail_member(1);
        rt.replace_member(1, &Spare(SharedMemory::new("spare", MEMBER_BYTES))).unwrap();
        rt.start_recovery(1, 0);
        gate.open.store(true, Ordering::Release);
    });
    let got = answer.lock().unwrap().take().unwrap().expect("done without member 1");
    if writes {
        data[at..at + block.len()].copy_from_slice(&block);
    }
    assert_same(&got, &data[at..at + block.len()], "the request on the old device");
    // A flush passes through every worker: each has taken its turns since.
    rt.flush().unwrap();
    assert_eq!(rt.failed_members(), Vec::<usize>::new(), "member 1 is back");
    assert_eq!(rt.worker_failed_members(), vec![Vec::<usize>::new(); 2], "in every engine");

    let member_sectors = rt.member_sectors();
    rt.sync_wait(SyncKind::Recovery, 0, member_sectors).unwrap();
    rt.set_recovery_offset(1, member_sectors);
    rt.fail_member(0);
    rt.flush().unwrap();
    assert_same(&rt.read_at(0, size).unwrap(), &data, "served with the spare in slot 1");
}
