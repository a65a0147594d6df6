//! One hardware queue of the device: a thread with its own io_uring that owns every tag of
//! the queue. Each tag is, in turn, fetching (a FETCH or COMMIT_AND_FETCH command waits in the
//! driver for the next request), in the backend (the request runs, its completion comes back
//! through the inbox), or aborted (the device is going away).
//!
//! The driver accepts a queue's commands only from the thread that sent its first fetch, so
//! backend completions, which arrive on the backend's threads, are handed to the queue thread
//! through `Inbox` and an eventfd the ring reads.

use crate::UblkError;
use crate::map::Mapping;
use crate::sys::{self, IoDesc};
use io_uring::{IoUring, opcode, types};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, PoisonError};
use uraid_nbd::{BackendError, BackendOp, BlockBackend};

/// The eventfd read's user_data; tags are below 4096.
const EVENT: u64 = u64::MAX;

pub struct QueueSetup {
    pub q_id: u16,
    pub depth: u16,
    pub buf_bytes: usize,
    pub cdev: Arc<File>,
    pub backend: Arc<dyn BlockBackend>,
    pub encoded: bool,
    pub stopping: Arc<AtomicBool>,
}

/// Requests a queue served, by kind, and those that failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub discards: u64,
    pub write_zeroes: u64,
    pub errors: u64,
}

struct Done {
    tag: u16,
    result: Result<Vec<u8>, BackendError>,
}

/// Backend completions on their way to the queue thread.
pub struct Inbox {
    done: Mutex<Vec<Done>>,
    eventfd: File,
}

impl Inbox {
    fn new() -> std::io::Result<Inbox> {
        // SAFETY: eventfd has no memory arguments; the descriptor it returns is ours alone.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh, open descriptor nobody else owns.
        let eventfd = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(Inbox { done: Mutex::new(Vec::new()), eventfd })
    }

    fn post(&self, done: Done) {
        self.done.lock().unwrap_or_else(PoisonError::into_inner).push(done);
        self.wake();
    }

    /// Makes the queue thread look at its inbox and at the stop flag.
    pub fn wake(&self) {
        // An eventfd write fails only when the counter would overflow, which it cannot: the
        // queue thread reads (resets) it after every wake-up.
        let _ = std::io::Write::write(&mut &self.eventfd, &1u64.to_ne_bytes());
    }
}

#[derive(Clone, Copy)]
enum Tag {
    Fetching,
    /// In the backend; the commit result on success (bytes for reads and writes).
    Busy {
        op: u8,
        bytes: u32,
    },
    Aborted,
}

struct Queue {
    s: QueueSetup,
    ring: IoUring,
    descs: Mapping,
    bufs: Mapping,
    inbox: Arc<Inbox>,
    event_buf: Box<[u8; 8]>,
    tags: Vec<Tag>,
    in_flight: usize,
    fetching: usize,
    stats: QueueStats,
}

/// Starts queue `s.q_id`'s thread; `ready` gets `Ok` once every tag's fetch is with the
/// driver (START_DEV waits for that), or why the queue could not start.
pub fn spawn(
    s: QueueSetup,
    ready: SyncSender<Result<Arc<Inbox>, UblkError>>,
) -> std::io::Result<std::thread::JoinHandle<QueueStats>> {
    let name = format!("ublk-q{}", s.q_id);
    std::thread::Builder::new().name(name).spawn(move || match Queue::new(s) {
        Err(e) => {
            let _ = ready.send(Err(e));
            QueueStats::default()
        }
        Ok(mut q) => {
            let started = q.fetch_all();
            let ok = started.is_ok();
            let _ = ready.send(started.map(|()| Arc::clone(&q.inbox)));
            if ok {
                q.serve();
            }
            q.stats
        }
    })
}

impl Queue {
    fn new(s: QueueSetup) -> Result<Queue, UblkError> {
        let io = |what| move |source| UblkError::Io { what, source };
        let page = page_bytes();
        let descs = Mapping::device(
            &s.cdev,
            sys::io_desc_len(s.depth, page),
            sys::io_desc_offset(s.q_id, page),
        )
        .map_err(io("mapping the queue's request descriptors"))?;
        let bufs = Mapping::anonymous(usize::from(s.depth) * s.buf_bytes)
            .map_err(io("allocating the queue's buffers"))?;
        let entries = (u32::from(s.depth) + 1).next_power_of_two();
        let ring = IoUring::new(entries).map_err(io("creating a queue io_uring"))?;
        let inbox = Arc::new(Inbox::new().map_err(io("creating an eventfd"))?);
        let depth = usize::from(s.depth);
        Ok(Queue {
            s,
            ring,
            descs,
            bufs,
            inbox,
            event_buf: Box::new([0; 8]),
            tags: vec![Tag::Fetching; depth],
            in_flight: 0,
            fetching: 0,
            stats: QueueStats::default(),
        })
    }

    /// Sends a FETCH for every tag and arms the inbox; the driver refuses bad fetches at
    /// once, so any completion here is an error.
    fn fetch_all(&mut self) -> Result<(), UblkError> {
        for tag in 0..self.s.depth {
            self.push_io(sys::IO_FETCH_REQ, tag, 0);
        }
        self.arm_inbox();
        self.ring.submit().map_err(|source| UblkError::Io { what: "sending fetches", source })?;
        if let Some(cqe) = self.ring.completion().next() {
            let source = std::io::Error::from_raw_os_error(-cqe.result());
            return Err(UblkError::Io { what: "the driver refused a fetch", source });
        }
        Ok(())
    }

    fn serve(&mut self) {
        loop {
            let stopping = self.s.stopping.load(Ordering::SeqCst);
            if self.in_flight == 0 && (self.fetching == 0 || stopping) {
                return;
            }
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
                Err(e) => panic!("ublk queue {}: io_uring_enter failed: {e}", self.s.q_id),
            }
            let cqes: Vec<(u64, i32)> =
                self.ring.completion().map(|c| (c.user_data(), c.result())).collect();
            for (user_data, result) in cqes {
                if user_data == EVENT {
                    self.commit_done();
                    self.arm_inbox();
                } else {
                    self.fetched(user_data as u16, result);
                }
            }
        }
    }

    fn fetched(&mut self, tag: u16, result: i32) {
        self.fetching -= 1;
        match result {
            sys::IO_RES_OK => self.dispatch(tag),
            sys::IO_RES_ABORT => self.tags[usize::from(tag)] = Tag::Aborted,
            err => {
                // Our command was malformed: the tag is lost, which the block layer will see
                // as a request that never completes. Say so loudly.
                say!("ublk queue {}: tag {tag}: the driver refused a command: {err}", self.s.q_id);
                self.tags[usize::from(tag)] = Tag::Aborted;
            }
        }
    }

    /// Starts the request the driver put in `tag`'s descriptor.
    fn dispatch(&mut self, tag: u16) {
        let d = self.desc(tag);
        // A flush carries no range (its start sector may be anything).
        let offset_bytes = d.start_sector.checked_mul(512);
        let bytes = d.nr_sectors.checked_mul(512).filter(|&b| b as usize <= self.s.buf_bytes);
        let fua = d.flags & sys::IO_F_FUA != 0;
        let op = match (d.op, offset_bytes, bytes) {
            (sys::OP_FLUSH, _, _) => BackendOp::Flush,
            (sys::OP_READ, Some(offset_bytes), Some(len_bytes)) => {
                BackendOp::Read { offset_bytes, len_bytes }
            }
            (sys::OP_WRITE, Some(offset_bytes), Some(len)) => {
                let buf = self.buf(tag)[..len as usize].to_vec();
                BackendOp::Write { offset_bytes, buf, fua }
            }
            (sys::OP_DISCARD, Some(offset_bytes), _) => {
                BackendOp::Discard { offset_bytes, len_bytes: u64::from(d.nr_sectors) * 512 }
            }
            // Zeros that may be unmapped, where the backend's discard reads back as zeros: a
            // discard (a hole punched in the device, `fallocate -p`, then frees what sparse
            // members hold; BLKZEROOUT asks for NOUNMAP and writes zeros). With FUA, written:
            // a discard is not made durable on its own.
            (sys::OP_WRITE_ZEROES, Some(offset_bytes), Some(len))
                if d.flags & (sys::IO_F_NOUNMAP | sys::IO_F_FUA) == 0
                    && self.s.backend.discard_zeroes() =>
            {
                BackendOp::Discard { offset_bytes, len_bytes: u64::from(len) }
            }
            (sys::OP_WRITE_ZEROES, Some(offset_bytes), Some(len)) => {
                BackendOp::Write { offset_bytes, buf: vec![0; len as usize], fua }
            }
            (op, _, _) => {
                // Beyond what we told the driver (max_sectors) or an operation we did not
                // advertise: refuse it rather than guess.
                self.stats.errors += 1;
                let errno = if op > sys::OP_WRITE_ZEROES { libc::EOPNOTSUPP } else { libc::EINVAL };
                return self.push_io(sys::IO_COMMIT_AND_FETCH_REQ, tag, -errno);
            }
        };
        let bytes = bytes.unwrap_or(0);
        self.tags[usize::from(tag)] = Tag::Busy { op: d.op, bytes };
        self.in_flight += 1;
        let inbox = Arc::clone(&self.inbox);
        self.s.backend.submit(op, Box::new(move |result| inbox.post(Done { tag, result })));
    }

    /// Commits every request the backend finished, fetching the tag's next one.
    fn commit_done(&mut self) {
        let done =
            std::mem::take(&mut *self.inbox.done.lock().unwrap_or_else(PoisonError::into_inner));
        for Done { tag, result } in done {
            let Tag::Busy { op, bytes } = self.tags[usize::from(tag)] else {
                panic!("ublk queue {}: a completion for idle tag {tag}", self.s.q_id);
            };
            self.in_flight -= 1;
            // Requests are at most max_io_bytes (a few MiB): the count fits.
            let done_bytes = i32::try_from(bytes).expect("request bytes fit the result");
            let res = match result {
                Ok(data) if op == sys::OP_READ => {
                    if data.len() == bytes as usize {
                        self.buf(tag)[..data.len()].copy_from_slice(&data);
                        done_bytes
                    } else {
                        -libc::EIO
                    }
                }
                Ok(_) if op == sys::OP_WRITE => done_bytes,
                Ok(_) => 0,
                Err(e) => -crate::errno(&e),
            };
            self.count(op, res < 0);
            self.push_io(sys::IO_COMMIT_AND_FETCH_REQ, tag, res);
        }
    }

    fn count(&mut self, op: u8, failed: bool) {
        let s = &mut self.stats;
        match op {
            sys::OP_READ => s.reads += 1,
            sys::OP_WRITE => s.writes += 1,
            sys::OP_FLUSH => s.flushes += 1,
            sys::OP_DISCARD => s.discards += 1,
            _ => s.write_zeroes += 1,
        }
        s.errors += u64::from(failed);
    }

    fn push_io(&mut self, nr: u8, tag: u16, result: i32) {
        let addr = self.buf(tag).as_ptr() as u64;
        let cmd = sys::io_cmd(self.s.q_id, tag, result, addr);
        let sqe = opcode::UringCmd16::new(
            types::Fd(self.s.cdev.as_raw_fd()),
            sys::opcode(nr, 16, self.s.encoded),
        )
        .cmd(cmd)
        .build()
        .user_data(u64::from(tag));
        self.tags[usize::from(tag)] = Tag::Fetching;
        self.fetching += 1;
        self.push(&sqe);
    }

    fn arm_inbox(&mut self) {
        let fd = types::Fd(self.inbox.eventfd.as_raw_fd());
        let sqe = opcode::Read::new(fd, self.event_buf.as_mut_ptr(), 8).build().user_data(EVENT);
        self.push(&sqe);
    }

    fn push(&mut self, sqe: &io_uring::squeue::Entry) {
        // SAFETY: every buffer a command names outlives it: tag buffers and the eventfd
        // buffer live as long as the queue, and the queue thread returns only when no
        // command that writes memory is in flight (pending fetches write no memory of
        // ours until they complete, and the ring is dropped first, cancelling them).
        // The ring has room for one entry per tag plus the inbox read, and each has at most
        // one entry outstanding.
        unsafe { self.ring.submission().push(sqe) }.expect("queue ring sized for every tag");
    }

    fn desc(&self, tag: u16) -> IoDesc {
        let at = usize::from(tag) * sys::IO_DESC_BYTES;
        IoDesc::decode(&self.descs.read_array(at))
    }

    fn buf(&mut self, tag: u16) -> &mut [u8] {
        let at = usize::from(tag) * self.s.buf_bytes;
        &mut self.bufs.bytes_mut()[at..at + self.s.buf_bytes]
    }
}

fn page_bytes() -> usize {
    // SAFETY: sysconf reads a constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).unwrap_or(4096)
}
