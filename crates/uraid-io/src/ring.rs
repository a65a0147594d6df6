//! A thin io_uring queue: SQEs are pushed as I/Os arrive and handed to the kernel in one
//! `io_uring_enter` per batch; completions come back as (user_data, result) pairs.
//!
//! Invariant: at most `capacity` (the SQ size) requests are in the kernel at once, so the
//! completion queue (twice the SQ size) can never overflow; further requests wait in `backlog`
//! and enter the ring as completions make room.

use io_uring::{IoUring, squeue};
use std::collections::VecDeque;
use std::io;

pub(crate) struct Ring {
    uring: IoUring,
    backlog: VecDeque<squeue::Entry>,
    /// Requests pushed to the SQ and not yet reaped.
    in_kernel: usize,
    capacity: usize,
}

impl Ring {
    /// Fails where io_uring is unavailable (old kernel, or blocked by seccomp in a sandbox).
    pub(crate) fn new(entries: u32) -> io::Result<Ring> {
        assert!(entries.is_power_of_two(), "ring entries {entries} is a power of two");
        let uring = IoUring::new(entries)?;
        let capacity = uring.params().sq_entries() as usize;
        Ok(Ring { uring, backlog: VecDeque::new(), in_kernel: 0, capacity })
    }

    /// Queues one request.
    ///
    /// # Safety
    /// Every buffer and file descriptor the entry names must stay valid until its completion is
    /// returned by `reap` (io_uring's own contract for `SubmissionQueue::push`).
    pub(crate) unsafe fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        if self.in_kernel == self.capacity {
            self.backlog.push_back(entry);
            return Ok(());
        }
        // SAFETY: the caller guarantees the entry's buffers outlive its completion.
        unsafe { self.push_sq(&entry) }
    }

    /// # Safety
    /// As for `push`.
    unsafe fn push_sq(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        // SAFETY: forwarded from the caller.
        if unsafe { self.uring.submission().push(entry) }.is_err() {
            // The SQ holds entries not yet handed to the kernel: hand them over, then retry.
            self.uring.submit()?;
            // SAFETY: as above.
            unsafe { self.uring.submission().push(entry) }.expect("the SQ has room after submit");
        }
        self.in_kernel += 1;
        Ok(())
    }

    /// Hands every queued SQE to the kernel with one system call.
    pub(crate) fn submit(&mut self) -> io::Result<()> {
        if !self.uring.submission().is_empty() {
            self.uring.submit()?;
        }
        Ok(())
    }

    /// Appends finished requests as (user_data, result: bytes or -errno).
    pub(crate) fn reap(&mut self, out: &mut Vec<(u64, i32)>, wait: bool) -> io::Result<()> {
        if wait && self.in_kernel > 0 && self.uring.completion().is_empty() {
            self.submit_and_wait()?;
        }
        let start = out.len();
        out.extend(self.uring.completion().map(|c| (c.user_data(), c.result())));
        self.in_kernel -= out.len() - start;
        self.refill()
    }

    fn submit_and_wait(&mut self) -> io::Result<()> {
        loop {
            match self.uring.submit_and_wait(1) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r.map(drop),
            }
        }
    }

    /// Moves backlogged requests into the room completions made.
    fn refill(&mut self) -> io::Result<()> {
        let mut moved = false;
        while self.in_kernel < self.capacity {
            let Some(entry) = self.backlog.pop_front() else { break };
            // SAFETY: the entry was pushed under `push`'s contract, which still holds: its
            // completion has not been reaped.
            unsafe { self.push_sq(&entry) }?;
            moved = true;
        }
        if moved { self.submit() } else { Ok(()) }
    }

    /// Requests pushed and not yet reaped, backlog included.
    pub(crate) fn pending(&self) -> usize {
        self.in_kernel + self.backlog.len()
    }
}
