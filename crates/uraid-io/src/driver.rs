//! The driver loop: runs a sans-IO `Array` against its members on one thread.
//!
//! Each turn pulls every member I/O the engine has ready, submits them all, hands each member's
//! batch to the device at once (`flush_submissions`), then reaps what has finished and reports it
//! with `complete_io`. It blocks only when nothing has finished and nothing new can be submitted.
//!
//! Buffer contract (what makes `Member::submit` sound here): a member I/O's buffer is memory the
//! engine owns, lent through `Array::io_buf` / `io_buf_mut`: a user request's `Vec<u8>` or a stripe
//! head's `Box<[u8]>` block. The engine keeps that allocation alive and at a fixed address, and
//! does not read or write the lent range, from the moment it hands out the `MemberIo` until the
//! driver reports it with `complete_io` (the request is not completed, the head is not released
//! or resized away while it has I/O in flight). Moving or growing the containers (`Vec<Request>`,
//! the head pool) moves the `Vec`/`Box` headers, never their heap buffers. So the driver takes the
//! pointer right after `next_io` and must report every I/O exactly once, which it does by reaping
//! until nothing is in flight before returning, on an error path too (`drain`).

use crate::counters::CountersSnapshot;
use crate::member::{BufPtr, IoCompletion, IoOp, IoRequest, Member};
use std::io;
use thiserror::Error;
use uraid_core::SECTOR_BYTES;
use uraid_core::array::{Array, IoTag, MemberIo, MemberOp};

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DriverError {
    #[error("member {member} ({name}): {source}")]
    Member {
        member: usize,
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("the engine is busy but has no member I/O to perform and none in flight (plugged?)")]
    Stalled,
}

pub struct Driver<M: Member + ?Sized = dyn Member> {
    members: Vec<Box<M>>,
    /// Where each member's data area starts (md's data_offset), the same on every member.
    data_offset_bytes: u64,
    /// Members with submissions not yet handed to the device.
    unflushed: Vec<bool>,
    in_flight: usize,
    reaped: Vec<IoCompletion>,
}

impl<M: Member + ?Sized> Driver<M> {
    #[must_use]
    pub fn new(members: Vec<Box<M>>) -> Driver<M> {
        assert!(!members.is_empty(), "an array has members");
        let unflushed = vec![false; members.len()];
        Driver { members, data_offset_bytes: 0, unflushed, in_flight: 0, reaped: Vec::new() }
    }

    /// Sets md's data_offset: engine sector 0 is this byte offset on every member.
    #[must_use]
    pub fn with_data_offset_bytes(mut self, bytes: u64) -> Driver<M> {
        assert!(bytes.is_multiple_of(SECTOR_BYTES), "data_offset {bytes} is whole sectors");
        self.data_offset_bytes = bytes;
        self
    }

    #[must_use]
    pub fn members(&self) -> &[Box<M>] {
        &self.members
    }

    pub fn member_mut(&mut self, member: usize) -> &mut M {
        assert_eq!(self.in_flight, 0, "members change only while nothing is in flight");
        &mut self.members[member]
    }

    /// Every member's counters, in member order.
    #[must_use]
    pub fn counters(&self) -> Vec<CountersSnapshot> {
        self.members.iter().map(|m| m.counters().snapshot()).collect()
    }

    /// The sum over all members.
    #[must_use]
    pub fn counters_total(&self) -> CountersSnapshot {
        self.counters().into_iter().fold(CountersSnapshot::default(), CountersSnapshot::sum)
    }

    /// Performs member I/O until the engine is idle. Finished requests stay in the engine for
    /// `take_completed`.
    pub fn run_until_idle(&mut self, array: &mut Array) -> Result<(), DriverError> {
        let result = self.run_loop(array);
        if result.is_err() {
            self.drain(array);
        }
        result
    }

    fn run_loop(&mut self, array: &mut Array) -> Result<(), DriverError> {
        loop {
            let submitted = self.submit_ready(array);
            self.flush_submissions()?;
            if self.in_flight == 0 {
                if !array.busy() {
                    return Ok(());
                }
                if submitted == 0 {
                    return Err(DriverError::Stalled);
                }
            }
            // Wait only when there is nothing new to submit: new submissions first keep the
            // members' queues full.
            self.reap(array, submitted == 0)?;
        }
    }

    /// One turn, for a runtime that accepts new requests between turns: submits what the engine
    /// has ready, hands it to the devices and reports what has finished. With `wait`, blocks
    /// until something finishes if nothing new was submitted and I/O is in flight. On an error
    /// every I/O in flight is reaped first (the buffer contract), as in `run_until_idle`.
    pub fn turn(&mut self, array: &mut Array, wait: bool) -> Result<(), DriverError> {
        let result = self.turn_inner(array, wait);
        if result.is_err() {
            self.drain(array);
        }
        result
    }

    fn turn_inner(&mut self, array: &mut Array, wait: bool) -> Result<(), DriverError> {
        let submitted = self.submit_ready(array);
        self.flush_submissions()?;
        if self.in_flight > 0 {
            self.reap(array, wait && submitted == 0)?;
        }
        Ok(())
    }

    /// Member I/Os submitted and not yet reported to the engine.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Submits every I/O the engine has ready; returns how many.
    pub fn submit_ready(&mut self, array: &mut Array) -> usize {
        let mut count = 0;
        while let Some(io) = array.next_io() {
            self.submit(array, &io);
            count += 1;
        }
        count
    }

    fn submit(&mut self, array: &mut Array, io: &MemberIo) {
        let member = io.member.get();
        assert!(member < self.members.len(), "I/O for member {member} of {}", self.members.len());
        let (op, buf) = match io.op {
            MemberOp::Read => (IoOp::Read, BufPtr::from_mut(array.io_buf_mut(io))),
            MemberOp::Write => (IoOp::Write { fua: io.fua }, BufPtr::from_ref(array.io_buf(io))),
            MemberOp::Flush => (IoOp::Flush, BufPtr::null()),
            MemberOp::Discard => (IoOp::Discard, BufPtr::null()),
        };
        let offset_bytes =
            if io.op == MemberOp::Flush { 0 } else { self.data_offset_bytes + io.sector.bytes() };
        let req = IoRequest { tag: io.tag.0, op, offset_bytes, len_bytes: io.bytes(), buf };
        // SAFETY: the buffer is the engine's, lent for this I/O: it stays allocated, unmoved and
        // untouched until `complete_io(io.tag)`, which `reap` calls only after the member has
        // returned this I/O's completion (the contract in this module's docs).
        unsafe { self.members[member].submit(req) };
        self.unflushed[member] = true;
        self.in_flight += 1;
    }

    fn flush_submissions(&mut self) -> Result<(), DriverError> {
        for m in 0..self.members.len() {
            if std::mem::take(&mut self.unflushed[m]) {
                let r = self.members[m].flush_submissions();
                r.map_err(|source| self.member_error(m, source))?;
            }
        }
        Ok(())
    }

    /// Reaps finished I/Os from every member and reports them to the engine. With `wait` and
    /// nothing finished anywhere, blocks on the first member with I/O in flight.
    fn reap(&mut self, array: &mut Array, wait: bool) -> Result<(), DriverError> {
        let mut reaped = std::mem::take(&mut self.reaped);
        reaped.clear();
        for m in 0..self.members.len() {
            self.reap_member(m, &mut reaped, false, array)?;
        }
        if wait && self.in_flight > 0 && reaped.is_empty() {
            let m = self.member_to_wait_on();
            self.reap_member(m, &mut reaped, true, array)?;
        }
        self.reaped = reaped;
        Ok(())
    }

    /// The member with I/O in flight whose next completion is due first: on modelled clocks,
    /// waiting on any other would move time past completions that come earlier. Members that
    /// cannot tell (real devices) come first: waiting on them moves no model's time.
    fn member_to_wait_on(&self) -> usize {
        let busy = (0..self.members.len()).filter(|&m| self.members[m].in_flight() > 0);
        let m = busy.min_by_key(|&m| self.members[m].next_due_ns().unwrap_or(0));
        m.expect("a member holds the I/O in flight")
    }

    fn reap_member(
        &mut self,
        m: usize,
        reaped: &mut Vec<IoCompletion>,
        wait: bool,
        array: &mut Array,
    ) -> Result<(), DriverError> {
        if self.members[m].in_flight() == 0 {
            return Ok(());
        }
        let start = reaped.len();
        let r = self.members[m].reap(reaped, wait);
        r.map_err(|source| self.member_error(m, source))?;
        for c in &reaped[start..] {
            assert!(self.in_flight > 0, "a completion of member {m} with nothing in flight");
            self.in_flight -= 1;
            array.complete_io(IoTag(c.tag), c.result.is_ok());
        }
        Ok(())
    }

    /// After an error: waits for every I/O still in flight and reports it, so that no device
    /// writes into engine memory after this returns. A member whose reap keeps failing is given
    /// up on (its I/O is then reported failed to the engine only if it completes later).
    fn drain(&mut self, array: &mut Array) {
        let mut reaped = Vec::new();
        for m in 0..self.members.len() {
            while self.members[m].in_flight() > 0 {
                if self.reap_member(m, &mut reaped, true, array).is_err() {
                    break;
                }
            }
        }
    }

    fn member_error(&self, member: usize, source: io::Error) -> DriverError {
        DriverError::Member { member, name: self.members[member].info().name.clone(), source }
    }
}
