//! md's replace at the member layer: a member and the device taking its place, as one member.
//!
//! While the copy runs (`Mode::Both`) reads go to the member, writes, flushes and discards to
//! both devices (complete when both have), and writes marked `to_replacement` (the engine's
//! `MemberOp::CopyWrite`) to the replacement alone. The engine serialises copies with user
//! writes per stripe head (`uraid_core::array` `replace.rs`); this only fans I/O out.
//!
//! The lifecycle layer ends it by switching the shared `ReplacementControl`: `Mode::New` when
//! the copy has passed the end (everything then goes to the replacement, and the member is
//! closed once its last I/O completes), or `Mode::Old` when the replacement is given up. No
//! I/O has to drain first: each request reads the mode once, when submitted.
//!
//! The member failing during the copy hands the slot to the replacement (`Mode::New` then
//! too): what the member still had in flight must not fail the new device. A write both had
//! answers as the new device did, and a read the member fails answers `IoFailure::Replaced`,
//! which the engine rebuilds from parity without counting against the member.
//!
//! A log write the engine queued for the member before the replacement began
//! (`before_replacement`) goes to the member alone, and to neither device once the
//! replacement holds the slot: the new device's log ring must hold only what the engine
//! logged after it joined (see `uraid_core::array` `replace.rs`).
//!
//! A failed replacement never fails the member: its errors are recorded in the control (the
//! lifecycle layer gives the replacement up) and the request completes with the member's
//! result; a copy-write completes as written.
//!
//! A read the member fails below where the copy has got to (`set_copied_below`) is read again
//! from the replacement, as md reads from a replacement below its recovery offset: there it
//! holds every block, copied or written to both. It matters where parity cannot answer (the
//! array degraded during the copy, the member being replaced with bad sectors, which is why
//! it is replaced). Should the replacement fail that read too, the member's error stands.

use crate::counters::MemberCounters;
use crate::member::{IoCompletion, IoFailure, IoOp, IoRequest, Member, MemberInfo};
use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

/// Where a replacing member's I/O goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Copying: reads from the member, writes to both.
    Both = 0,
    /// Done: everything to the replacement.
    New = 1,
    /// Given up: everything to the member.
    Old = 2,
}

/// What the lifecycle layer and every worker's `Replacing` share for one slot.
#[derive(Debug, Default)]
pub struct ReplacementControl {
    mode: AtomicU8,
    failed: AtomicBool,
    error: std::sync::Mutex<Option<IoFailure>>,
    /// Device bytes below which the replacement holds every block.
    copied_below: AtomicU64,
}

impl ReplacementControl {
    #[must_use]
    pub fn new() -> Arc<ReplacementControl> {
        Arc::new(ReplacementControl::default())
    }

    #[must_use]
    pub fn mode(&self) -> Mode {
        match self.mode.load(Ordering::Acquire) {
            0 => Mode::Both,
            1 => Mode::New,
            _ => Mode::Old,
        }
    }

    pub fn set_mode(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::Release);
    }

    /// The replacement holds every block below device byte `byte` (the copy's progress, its
    /// blocks written): the member's failed reads there are read from it. Never moves back.
    pub fn set_copied_below(&self, byte: u64) {
        self.copied_below.fetch_max(byte, Ordering::AcqRel);
    }

    #[must_use]
    pub fn copied_below(&self) -> u64 {
        self.copied_below.load(Ordering::Acquire)
    }

    /// Whether an I/O to the replacement failed (its first error, if so).
    #[must_use]
    pub fn failure(&self) -> Option<IoFailure> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.error.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn fail(&self, e: IoFailure) {
        let mut first = self.error.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        first.get_or_insert(e);
        self.failed.store(true, Ordering::Release);
    }
}

/// A request sent to both devices: completions still due, and each device's result.
struct Pair {
    due: u8,
    old: Result<(), IoFailure>,
    new: Result<(), IoFailure>,
}

impl Pair {
    /// The request's result: the member's, unless the replacement has taken the slot since
    /// (`Mode::New`), when the member is no longer in the array and its error (it failed: that
    /// is how a takeover comes) would fail the new device, which wrote it (found by
    /// uraid-md's `lifecycle_chaos`).
    fn result(self, mode: Mode) -> Result<(), IoFailure> {
        if mode == Mode::New { self.new } else { self.old }
    }
}

pub struct Replacing {
    info: MemberInfo,
    old: Option<Box<dyn Member>>,
    new: Option<Box<dyn Member>>,
    control: Arc<ReplacementControl>,
    pairs: HashMap<u64, Pair>,
    /// Tags sent to the replacement alone in `Mode::Both` (copy-writes): they complete as
    /// written whatever it answers.
    copies: HashSet<u64>,
    /// Reads sent to the member below the copy's progress: the replacement can answer them
    /// if the member fails them.
    rereadable: HashMap<u64, IoRequest>,
    /// Reads the member failed, sent to the replacement: the member's error, which stands if
    /// the replacement fails them too.
    reread: HashMap<u64, IoFailure>,
    ready: Vec<IoCompletion>,
    scratch: Vec<IoCompletion>,
    /// Requests taken and not yet handed back.
    outstanding: usize,
}

impl Replacing {
    /// Pairs `old` (the member, perhaps with I/O in flight: its completions come through
    /// here) with `new`, the device replacing it.
    #[must_use]
    pub fn new(
        old: Box<dyn Member>,
        new: Box<dyn Member>,
        control: Arc<ReplacementControl>,
    ) -> Replacing {
        let outstanding = old.in_flight();
        Replacing {
            info: old.info().clone(),
            old: Some(old),
            new: Some(new),
            control,
            pairs: HashMap::new(),
            copies: HashSet::new(),
            rereadable: HashMap::new(),
            reread: HashMap::new(),
            ready: Vec::new(),
            scratch: Vec::new(),
            outstanding,
        }
    }

    fn complete(&mut self, tag: u64, result: Result<(), IoFailure>) {
        self.ready.push(IoCompletion { tag, result });
    }

    /// Whether a read the member failed is read again from the replacement.
    fn usable_for_reads(&self) -> bool {
        self.new.is_some() && self.control.failure().is_none() && self.control.mode() != Mode::Old
    }

    /// Sends a read the member failed to the replacement; false if it cannot take it.
    fn reread(&mut self, req: IoRequest, member_error: IoFailure) -> bool {
        if !self.usable_for_reads() {
            return false;
        }
        let tag = req.tag;
        let new = self.new.as_mut().expect("checked");
        // SAFETY: the caller's contract for this read holds until we complete it, which we
        // have not: its buffer is still ours to fill.
        unsafe { new.submit(req) };
        if let Err(e) = new.flush_submissions() {
            // It still completes (with an error) through reap.
            self.control.fail(IoFailure::Os { errno: e.raw_os_error().unwrap_or(libc::EIO) });
        }
        self.reread.insert(tag, member_error);
        true
    }

    /// Handles what one side returned.
    fn take(&mut self, from_new: bool) {
        let done = std::mem::take(&mut self.scratch);
        for c in &done {
            if from_new && c.result.is_err() {
                self.control.fail(c.result.clone().expect_err("an error"));
            }
            if from_new && let Some(member_error) = self.reread.remove(&c.tag) {
                self.complete(c.tag, c.result.clone().map_err(|_| member_error));
                continue;
            }
            if !from_new
                && let Some(req) = self.rereadable.remove(&c.tag)
                && let Err(e) = &c.result
                && self.reread(req, e.clone())
            {
                continue;
            }
            if let Some(p) = self.pairs.get_mut(&c.tag) {
                if from_new {
                    p.new.clone_from(&c.result);
                } else {
                    p.old.clone_from(&c.result);
                }
                p.due -= 1;
                if p.due == 0 {
                    let p = self.pairs.remove(&c.tag).expect("a pair");
                    let result = p.result(self.control.mode());
                    self.complete(c.tag, result);
                }
            } else if from_new && self.copies.remove(&c.tag) {
                self.complete(c.tag, Ok(()));
            } else if !from_new && c.result.is_err() && self.control.mode() == Mode::New {
                // A read sent to the member before the replacement took the slot (the member
                // failed: that is how a takeover comes). Counted as the new device's, enough
                // of them failed it (uraid-md's `lifecycle_chaos`).
                self.complete(c.tag, Err(IoFailure::Replaced));
            } else {
                self.complete(c.tag, c.result.clone());
            }
        }
        self.scratch = done;
        self.scratch.clear();
    }

    fn reap_side(&mut self, from_new: bool, wait: bool) -> io::Result<()> {
        let mut out = std::mem::take(&mut self.scratch);
        let side = if from_new { self.new.as_mut() } else { self.old.as_mut() };
        let r = match side {
            Some(m) if m.in_flight() > 0 => m.reap(&mut out, wait),
            _ => Ok(()),
        };
        self.scratch = out;
        self.take(from_new);
        r
    }

    /// Closes a side the mode no longer uses once it has nothing in flight.
    fn close_unused(&mut self) {
        let unused = match self.control.mode() {
            Mode::Both => return,
            Mode::New => &mut self.old,
            Mode::Old => &mut self.new,
        };
        if unused.as_ref().is_some_and(|m| m.in_flight() == 0) {
            *unused = None;
        }
    }

    fn in_flight_of(side: Option<&dyn Member>) -> usize {
        side.map_or(0, Member::in_flight)
    }

    fn due_of(side: Option<&dyn Member>) -> Option<u64> {
        side.and_then(Member::next_due_ns)
    }
}

impl Member for Replacing {
    fn info(&self) -> &MemberInfo {
        &self.info
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        match (self.control.mode(), &self.old, &self.new) {
            (Mode::New, _, Some(new)) | (_, None, Some(new)) => new.counters(),
            (_, Some(old), _) => old.counters(),
            (_, None, None) => unreachable!("a replacing member keeps one side"),
        }
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        self.outstanding += 1;
        let mode = self.control.mode();
        let new_ok = self.new.is_some() && self.control.failure().is_none();
        let to_new = match mode {
            Mode::Both => req.op != IoOp::Read && new_ok && !req.before_replacement,
            // The member it was queued for is gone: the new device never holds it.
            Mode::New => !req.before_replacement,
            Mode::Old => false,
        };
        let to_old = mode != Mode::New && !req.to_replacement;
        let tag = req.tag;
        match (to_old, to_new) {
            (true, true) => {
                self.pairs.insert(tag, Pair { due: 2, old: Ok(()), new: Ok(()) });
                let new = self.new.as_mut().expect("a replacement");
                // SAFETY: the caller's contract covers both submissions: a Write's buffers may be
                // read by both devices, and neither writes them.
                unsafe { new.submit(req.clone()) };
                let old = self.old.as_mut().expect("the member");
                // SAFETY: as above.
                unsafe { old.submit(req) };
            }
            (false, true) => {
                if mode == Mode::Both {
                    self.copies.insert(tag);
                }
                let new = self.new.as_mut().expect("a replacement in this mode");
                // SAFETY: forwarded: our caller's contract is the replacement's.
                unsafe { new.submit(req) };
            }
            (true, false) => {
                // Here the mode is not New: `usable_for_reads` is the copy under way.
                if req.op == IoOp::Read
                    && self.usable_for_reads()
                    && req.end_bytes() <= self.control.copied_below()
                {
                    self.rereadable.insert(tag, req.clone());
                }
                let old = self.old.as_mut().expect("the member in this mode");
                // SAFETY: forwarded: our caller's contract is the member's.
                unsafe { old.submit(req) };
            }
            // A copy-write with the replacement given up or failed, or a log write queued
            // for a member that has since left the slot: nothing to write.
            (false, false) => self.complete(tag, Ok(())),
        }
    }

    fn flush_submissions(&mut self) -> io::Result<()> {
        if let Some(new) = self.new.as_mut()
            && let Err(e) = new.flush_submissions()
        {
            // Its queued I/O still completes (with errors) through reap.
            self.control.fail(IoFailure::Os { errno: e.raw_os_error().unwrap_or(libc::EIO) });
        }
        match self.old.as_mut() {
            Some(old) => old.flush_submissions(),
            None => Ok(()),
        }
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> io::Result<()> {
        self.reap_side(false, false)?;
        self.reap_side(true, false)?;
        while wait && self.ready.is_empty() && self.outstanding > 0 {
            // Block on the side due first (a modelled clock says which; else the member).
            let (o, n) =
                (Self::in_flight_of(self.old.as_deref()), Self::in_flight_of(self.new.as_deref()));
            let new_first = match (o, n) {
                (0, 0) => break,
                (0, _) => true,
                (_, 0) => false,
                _ => {
                    let (a, b) =
                        (Self::due_of(self.old.as_deref()), Self::due_of(self.new.as_deref()));
                    matches!((a, b), (Some(a), Some(b)) if b < a)
                }
            };
            self.reap_side(new_first, true)?;
            self.reap_side(!new_first, false)?;
        }
        self.outstanding -= self.ready.len();
        out.append(&mut self.ready);
        self.close_unused();
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.outstanding
    }

    /// Of the device reads go to: the member while it is copied (or kept), then the new one.
    fn allocated(&self, span: std::ops::Range<u64>) -> Option<Vec<std::ops::Range<u64>>> {
        match (self.control.mode(), &self.old, &self.new) {
            (Mode::New, _, Some(new)) | (_, None, Some(new)) => new.allocated(span),
            (_, Some(old), _) => old.allocated(span),
            (_, None, None) => None,
        }
    }

    fn list_bad(&mut self, span: std::ops::Range<u64>) -> bool {
        // The device holding the slot's data: the member until the replacement takes over.
        let side = if self.control.mode() == Mode::New { &mut self.new } else { &mut self.old };
        side.as_mut().is_some_and(|m| m.list_bad(span))
    }

    fn list_bad_replacement(&mut self, span: std::ops::Range<u64>) -> bool {
        self.new.as_mut().is_some_and(|m| m.list_unproducible(span))
    }

    fn next_due_ns(&self) -> Option<u64> {
        let due = [&self.old, &self.new].into_iter().flatten().filter(|m| m.in_flight() > 0);
        due.filter_map(|m| Member::next_due_ns(&**m)).min()
    }
}
