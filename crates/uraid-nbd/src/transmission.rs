//! The transmission phase of one connection: this thread reads requests without waiting for
//! answers and submits them to the backend (plugged: what one socket read brought in goes as
//! one burst); the threads that complete them send the replies (`output`), in the order the
//! backend completes them (the protocol allows any order; the handle pairs them up).
//!
//! Invariants: a request is answered only from its backend completion, so a write is never
//! acknowledged before the backend finished it; every request read whole gets exactly one
//! reply (the connection ends only when its window is empty, every reply sent or, the client
//! gone, discarded: that is how it drains); a request cut short by the client gets none and
//! touches nothing. In-flight requests are bounded (`Window`) so a client cannot make the
//! server buffer without limit.
//!
//! Costs per request, kept low because they are paid at every request (`uraid bench serve`):
//! requests are read through a buffer (many headers per read syscall at high queue depths),
//! payload and reply buffers are recycled (`BufferPool`), and replies go out in batches, one
//! vectored send each, data from where it lies (`reply`). Reads and writes hold their data in
//! the segments the backend asks for (`BlockBackend::segment_bytes`: the runtime's rows, one
//! per worker), so that a request spanning rows is never cut or joined by copying: a write's
//! payload is read from the socket straight into its segments, a read's reply is sent from
//! them.

use crate::backend::{BackendError, BackendOp, BlockExtent, SegmentsOp};
use crate::output::Output;
use crate::pool::BufferPool;
use crate::reply::{Body, Reply};
use crate::server::Shared;
use crate::socket::Socket;
use crate::stats::bump;
use crate::window::Window;
use crate::wire::{self, Request};
use std::io::{self, BufReader, Read};
use std::net::Shutdown;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Why a connection's transmission ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// NBD_CMD_DISC: the soft disconnect.
    Disconnect,
    /// End of file or an error reading: the client left (maybe mid-request) or the server is
    /// shutting down.
    Closed,
    /// A request header without NBD_REQUEST_MAGIC: the stream cannot be trusted any further.
    BadMagic(u32),
}

/// Serves requests on `socket` until the client disconnects, then drains: returns once every
/// request read has been answered (or the client is gone).
pub(crate) fn transmit(
    socket: Socket,
    shared: &Arc<Shared>,
    structured: bool,
    allocation: bool,
) -> io::Result<End> {
    let window = Arc::new(Window::new(IN_FLIGHT_REQUESTS_MAX));
    let pool = Arc::new(BufferPool::default());
    socket.enlarge_send_buffer();
    let output = Arc::new(Output::new(
        socket.try_clone()?,
        structured,
        window.clone(),
        pool.clone(),
        shared.clone(),
    ));
    let backlog = {
        let output = output.clone();
        std::thread::Builder::new()
            .name("nbd-backlog".into())
            .spawn(move || output.send_backlog())?
    };
    let input = BufReader::with_capacity(INPUT_BUFFER_BYTES, socket);
    let mut reader = Reader {
        input,
        shared: shared.clone(),
        output: output.clone(),
        window,
        pool,
        after_large_payload: false,
        allocation,
    };
    let end = reader.run();
    if end != End::Closed {
        // Nothing more will be read; replies still go out on the write side.
        reader.input.get_ref().shutdown(Shutdown::Read);
    }
    // Every request read is answered (or its reply discarded, the client gone) before the
    // connection ends.
    reader.window.wait_empty();
    output.close();
    backlog.join().expect("the backlog thread does not panic");
    Ok(end)
}

/// At most this many requests answered-to-be per connection (fio and qemu use 16 to 128).
const IN_FLIGHT_REQUESTS_MAX: u64 = 256;
/// And at most this many payload bytes (write payloads, read data, the zeros of a write of
/// zeros) held for them.
const IN_FLIGHT_BYTES_MAX: u64 = 256 << 20;
/// What the connections share: each holds at most its part of this (the server's memory for
/// requests stays about this, whatever the number of connections), down to one largest
/// request. Four connections (nbdcopy's) keep `IN_FLIGHT_BYTES_MAX` each.
const SERVER_IN_FLIGHT_BYTES: u64 = 1 << 30;
const CONNECTION_IN_FLIGHT_BYTES_MIN: u64 = 32 << 20;

/// Read-ahead of the request stream: 32 pipelined 4 KiB writes and their headers, or a few
/// hundred read requests, per read syscall. Larger payloads bypass it.
const INPUT_BUFFER_BYTES: usize = 128 << 10;

/// A connection's part of the server's in-flight bytes when `connections` are open.
fn window_bytes(connections: u64) -> u64 {
    (SERVER_IN_FLIGHT_BYTES / connections.max(1))
        .clamp(CONNECTION_IN_FLIGHT_BYTES_MIN, IN_FLIGHT_BYTES_MAX)
}

struct Reader {
    input: BufReader<Socket>,
    shared: Arc<Shared>,
    output: Arc<Output>,
    window: Arc<Window>,
    pool: Arc<BufferPool>,
    /// The last request carried a payload of at least `INPUT_BUFFER_BYTES`: the next header is
    /// read alone, so that the read-ahead does not pull the next payload into the buffer only
    /// to copy it out again (large writes come in streams; small ones keep the read-ahead).
    after_large_payload: bool,
    /// The client selected base:allocation: NBD_CMD_BLOCK_STATUS is answered.
    allocation: bool,
}

impl Reader {
    /// Reads and submits requests until the client is done. Requests read from one socket
    /// read go to the backend plugged, as one burst, started before the reader next waits
    /// (for the socket, or for room in the window).
    fn run(&mut self) -> End {
        let end = self.requests();
        self.shared.backend.unplug();
        end
    }

    fn requests(&mut self) -> End {
        loop {
            let mut header = [0; wire::REQUEST_BYTES];
            if self.input.buffer().len() < header.len() {
                self.shared.backend.unplug();
            }
            let read = if self.after_large_payload && self.input.buffer().is_empty() {
                // The buffer is empty, so reading past it keeps the stream in order.
                self.input.get_mut().read_exact(&mut header)
            } else {
                self.input.read_exact(&mut header)
            };
            if read.is_err() {
                return End::Closed;
            }
            self.shared.backend.plug();
            let request = match Request::decode(&header) {
                Ok(r) => r,
                Err(magic) => return End::BadMagic(magic),
            };
            if request.command == wire::CMD_DISC {
                return End::Disconnect;
            }
            if self.request(&request).is_err() {
                return End::Closed;
            }
        }
    }

    /// Reads the payload (if any), then answers or submits the request. An `Err` means the
    /// client vanished in the middle of the payload.
    fn request(&mut self, r: &Request) -> io::Result<()> {
        if r.command == wire::CMD_BLOCK_STATUS {
            self.block_status(r);
            return Ok(());
        }
        let len = u64::from(r.len_bytes);
        let payload = if r.command == wire::CMD_WRITE { len } else { 0 };
        self.after_large_payload = payload >= INPUT_BUFFER_BYTES as u64;
        let check = check(&self.shared, r);
        if r.command == wire::CMD_WRITE && check.is_err() {
            // Consumed in small pieces, never held: the stream stays in step, memory does not
            // grow with a hostile length. (Rare: what is held goes first.)
            self.shared.backend.unplug();
            io::copy(&mut (&mut self.input).take(payload), &mut io::sink())
                .and_then(|n| if n == payload { Ok(()) } else { Err(eof()) })?;
        }
        // Zeros the client allows holes in, where the backend's discard reads back as zeros:
        // a discard, which frees what sparse members hold instead of filling it. Fast zeroing
        // (NBD_FLAG_SEND_FAST_ZERO) stays unoffered: the array discards through its stripe
        // heads at about the speed of writing, and qemu-img convert would zero a whole array
        // with it before copying.
        let zeros_by_discard = r.command == wire::CMD_WRITE_ZEROES
            && r.flags & wire::CMD_FLAG_NO_HOLE == 0
            && self.shared.backend.discard_zeroes();
        // A write of zeros holds a buffer of zeros as long as a write's payload (it went
        // uncharged: 256 of 32 MiB in flight grew one connection's server to 10 GB).
        let charge_bytes = match r.command {
            wire::CMD_READ => len,
            wire::CMD_WRITE_ZEROES if !zeros_by_discard => len,
            _ => payload,
        };
        if let Err(error) = check {
            self.acquire(0);
            bump(&self.shared.counters.errors, 1);
            let message = format!("request refused: {}", error_name(error));
            self.reply(r.handle, Body::Status { error, message }, 0);
            return Ok(());
        }
        self.acquire(charge_bytes);
        let op = match r.command {
            wire::CMD_READ => {
                let bufs = self.segments(r);
                Submission::Segments(SegmentsOp::Read { offset_bytes: r.offset_bytes, bufs })
            }
            wire::CMD_WRITE => {
                let mut bufs = self.segments(r);
                if self.input.buffer().len() < payload as usize {
                    // The payload is still on its way: what is held goes first.
                    self.shared.backend.unplug();
                }
                for buf in &mut bufs {
                    if let Err(e) = self.input.read_exact(buf) {
                        self.window.release(charge_bytes);
                        return Err(e);
                    }
                }
                let (offset_bytes, fua) = (r.offset_bytes, fua(r));
                Submission::Segments(SegmentsOp::Write { offset_bytes, bufs, fua })
            }
            wire::CMD_WRITE_ZEROES if zeros_by_discard => {
                let (offset_bytes, len_bytes) = (r.offset_bytes, len);
                Submission::Whole(BackendOp::Discard { offset_bytes, len_bytes })
            }
            wire::CMD_WRITE_ZEROES => {
                // Zeros written: the client wants them allocated (NO_HOLE), or the backend's
                // discard does not read back as zeros.
                let buf = vec![0; r.len_bytes as usize];
                Submission::Whole(BackendOp::Write {
                    offset_bytes: r.offset_bytes,
                    buf,
                    fua: fua(r),
                })
            }
            wire::CMD_FLUSH => Submission::Whole(BackendOp::Flush),
            wire::CMD_TRIM => {
                let (offset_bytes, len_bytes) = (r.offset_bytes, len);
                Submission::Whole(BackendOp::Discard { offset_bytes, len_bytes })
            }
            other => unreachable!("check() refuses command {other}"),
        };
        self.shared.count(r);
        self.submit(r, op, charge_bytes);
        Ok(())
    }

    /// Room in the window for a request of `bytes`; what is held is started first if the
    /// reader has to wait (it may be what frees the room).
    fn acquire(&self, bytes: u64) {
        let backend = &self.shared.backend;
        let connections = self.shared.counters.connections_active.load(Ordering::Relaxed);
        self.window.acquire_or(bytes, window_bytes(connections), || backend.unplug());
    }

    /// Pool buffers for a read's data or a write's payload, cut as the backend asks.
    fn segments(&self, r: &Request) -> Vec<Vec<u8>> {
        let lens = self.shared.backend.segment_bytes(r.offset_bytes, r.len_bytes);
        assert_eq!(lens.iter().sum::<usize>(), r.len_bytes as usize, "segments cover it");
        lens.into_iter().map(|n| self.pool.take(n)).collect()
    }

    fn submit(&self, r: &Request, op: Submission, charge_bytes: u64) {
        let (out, shared, handle) = (self.output.clone(), self.shared.clone(), r.handle);
        let (read, offset_bytes) = (r.command == wire::CMD_READ, r.offset_bytes);
        // A trim (or a write of zeros done as a discard) with FUA: the discard, then a flush,
        // then the reply.
        let flush_after = matches!(op, Submission::Whole(BackendOp::Discard { .. })) && fua(r);
        if r.len_bytes == 0 && r.command != wire::CMD_FLUSH {
            // Nothing to do, and the runtime wants at least a sector.
            let body = if read { Body::Data { offset_bytes, data: Vec::new() } } else { ok() };
            return out.push(Reply { handle, body, charge_bytes });
        }
        let (backend, pool) = (self.shared.backend.clone(), self.pool.clone());
        let read_at = read.then_some(offset_bytes);
        let op = match op {
            Submission::Segments(op) => {
                let done = move |result: Result<(), BackendError>, segments: Vec<Vec<u8>>| {
                    if result.is_err() {
                        // A failed read's buffers carry no reply: the next requests' buffers.
                        pool.give_all(segments);
                        let result = result.map(|()| Vec::new());
                        return answer(&out, &shared, &pool, handle, result, read_at, charge_bytes);
                    }
                    let result = result.map(|()| segments);
                    answer(&out, &shared, &pool, handle, result, read_at, charge_bytes);
                };
                return self.shared.backend.submit_segments(op, Box::new(done));
            }
            Submission::Whole(op) => op,
        };
        self.shared.backend.submit(
            op,
            Box::new(move |result| {
                if flush_after && result.is_ok() {
                    let done = move |r: Result<Vec<u8>, _>| {
                        let r = r.map(|b| vec![b]);
                        answer(&out, &shared, &pool, handle, r, None, charge_bytes);
                    };
                    return backend.submit(BackendOp::Flush, Box::new(done));
                }
                let result = result.map(|b| vec![b]);
                answer(&out, &shared, &pool, handle, result, read_at, charge_bytes);
            }),
        );
    }

    /// Answers NBD_CMD_BLOCK_STATUS: refused (EINVAL) unless base:allocation was selected
    /// and the range is valid; else the backend's extents, at most `STATUS_EXTENTS_MAX` of
    /// them (the client asks again from where they end), one with NBD_CMD_FLAG_REQ_ONE.
    fn block_status(&self, r: &Request) {
        let (offset_bytes, len_bytes) = (r.offset_bytes, u64::from(r.len_bytes));
        let min = u64::from(self.shared.export.block_bytes_min);
        let valid = self.allocation
            && r.flags & !(wire::CMD_FLAG_REQ_ONE | wire::CMD_FLAG_FUA) == 0
            && len_bytes > 0
            && offset_bytes
                .checked_add(len_bytes)
                .is_some_and(|e| e <= self.shared.export.size_bytes)
            && offset_bytes.is_multiple_of(min)
            && len_bytes.is_multiple_of(min);
        self.acquire(if valid { STATUS_REPLY_BYTES_MAX } else { 0 });
        if !valid {
            bump(&self.shared.counters.errors, 1);
            let message = if self.allocation {
                "request refused: EINVAL: bad flags, range, alignment or length".to_string()
            } else {
                "request refused: EINVAL: no metadata context was selected".to_string()
            };
            let body = Body::Status { error: wire::EINVAL, message };
            return self.reply(r.handle, body, 0);
        }
        self.shared.count(r);
        let (out, shared, handle) = (self.output.clone(), self.shared.clone(), r.handle);
        let one = r.flags & wire::CMD_FLAG_REQ_ONE != 0;
        let done = move |result: Result<Vec<BlockExtent>, BackendError>| {
            let body = match result {
                Ok(extents) => Body::BlockStatus { extents: descriptors(&extents, len_bytes, one) },
                Err(e) => {
                    bump(&shared.counters.errors, 1);
                    Body::Status { error: nbd_error(&e), message: e.to_string() }
                }
            };
            out.push(Reply { handle, body, charge_bytes: STATUS_REPLY_BYTES_MAX });
        };
        self.shared.backend.block_status(offset_bytes, len_bytes, Box::new(done));
    }

    fn reply(&self, handle: u64, body: Body, charge_bytes: u64) {
        self.output.push(Reply { handle, body, charge_bytes });
    }
}

/// The most descriptors one block status reply carries (the protocol asks for at most 2^20;
/// this keeps a reply within 128 KiB), and what a reply is charged to the window.
const STATUS_EXTENTS_MAX: usize = 16 << 10;
const STATUS_REPLY_BYTES_MAX: u64 = 4 + 8 * STATUS_EXTENTS_MAX as u64;

/// The wire's descriptors for `extents` of a request of `len_bytes`: lengths fit in 32 bits
/// (the request's own does), empty ones dropped, at most `STATUS_EXTENTS_MAX` (one with
/// `one`), none beyond the request. A backend that answered nothing is answered as data.
fn descriptors(extents: &[BlockExtent], len_bytes: u64, one: bool) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut covered = 0;
    for e in extents.iter().filter(|e| e.len_bytes > 0) {
        let len = e.len_bytes.min(len_bytes - covered);
        let flags =
            if e.zero { wire::STATE_ZERO } else { 0 } | if e.hole { wire::STATE_HOLE } else { 0 };
        out.push((u32::try_from(len).expect("within the request's length"), flags));
        covered += len;
        if covered == len_bytes || out.len() == STATUS_EXTENTS_MAX || one {
            break;
        }
    }
    if out.is_empty() {
        out.push((u32::try_from(len_bytes).expect("a request's length"), 0));
    }
    out
}

/// What goes to the backend: reads and writes in segments, the rest whole.
enum Submission {
    Segments(SegmentsOp),
    Whole(BackendOp),
}

/// Turns a backend completion into the reply (`read_at`: the request was a read at that
/// offset). `result` holds the request's buffers (a read's data), when there are any.
fn answer(
    out: &Arc<Output>,
    shared: &Shared,
    pool: &BufferPool,
    handle: u64,
    result: Result<Vec<Vec<u8>>, BackendError>,
    read_at: Option<u64>,
    charge_bytes: u64,
) {
    let body = match (result, read_at) {
        (Ok(data), Some(offset_bytes)) => Body::Data { offset_bytes, data },
        (Ok(written), None) => {
            // A write's payload (or nothing), done with: the next requests' buffers.
            pool.give_all(written);
            ok()
        }
        (Err(e), _) => {
            bump(&shared.counters.errors, 1);
            Body::Status { error: nbd_error(&e), message: e.to_string() }
        }
    };
    out.push(Reply { handle, body, charge_bytes });
}

/// The one place backend errors become NBD error values.
fn nbd_error(e: &BackendError) -> u32 {
    match e {
        BackendError::OutOfRange { .. } | BackendError::Unaligned { .. } => wire::EINVAL,
        BackendError::NotSupported(_) => wire::ENOTSUP,
        _ => wire::EIO,
    }
}

fn ok() -> Body {
    Body::Status { error: 0, message: String::new() }
}

fn fua(r: &Request) -> bool {
    r.flags & wire::CMD_FLAG_FUA != 0
}

fn eof() -> io::Error {
    io::Error::from(io::ErrorKind::UnexpectedEof)
}

fn error_name(error: u32) -> &'static str {
    match error {
        wire::EPERM => "EPERM: the export is read-only",
        wire::EINVAL => "EINVAL: bad command, flags, range, alignment or length",
        wire::ENOSPC => "ENOSPC: write beyond the end of the export",
        wire::ENOTSUP => "ENOTSUP: the export takes no trim",
        _ => "error",
    }
}

/// The error a request gets before it reaches the backend, if any (the protocol's rules).
pub(crate) fn check(shared: &Shared, r: &Request) -> Result<(), u32> {
    let e = &shared.export;
    let writes = matches!(r.command, wire::CMD_WRITE | wire::CMD_TRIM | wire::CMD_WRITE_ZEROES);
    let flags_allowed = match r.command {
        wire::CMD_WRITE_ZEROES => wire::CMD_FLAG_FUA | wire::CMD_FLAG_NO_HOLE,
        // FUA is valid on every command (some clients set it on reads and flushes).
        _ => wire::CMD_FLAG_FUA,
    };
    let ranged = matches!(
        r.command,
        wire::CMD_READ | wire::CMD_WRITE | wire::CMD_TRIM | wire::CMD_WRITE_ZEROES
    );
    if !ranged && r.command != wire::CMD_FLUSH {
        return Err(wire::EINVAL);
    }
    if r.flags & !flags_allowed != 0 {
        return Err(wire::EINVAL);
    }
    if writes && e.transmission_flags & wire::FLAG_READ_ONLY != 0 {
        return Err(wire::EPERM);
    }
    if !ranged {
        return Ok(());
    }
    let len = u64::from(r.len_bytes);
    if r.offset_bytes.checked_add(len).is_none_or(|end| end > e.size_bytes) {
        let past_end_write = matches!(r.command, wire::CMD_WRITE | wire::CMD_WRITE_ZEROES);
        return Err(if past_end_write { wire::ENOSPC } else { wire::EINVAL });
    }
    let min = u64::from(e.block_bytes_min);
    if !r.offset_bytes.is_multiple_of(min) || !len.is_multiple_of(min) {
        return Err(wire::EINVAL);
    }
    // A trim's length is not a payload; the backend splits it (the protocol limits only the
    // commands that carry or allocate data).
    if r.command != wire::CMD_TRIM && r.len_bytes > e.block_bytes_max {
        return Err(wire::EINVAL);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_share_the_servers_in_flight_bytes() {
        assert_eq!(window_bytes(0), IN_FLIGHT_BYTES_MAX);
        assert_eq!(window_bytes(4), IN_FLIGHT_BYTES_MAX, "nbdcopy's four keep the whole window");
        assert_eq!(window_bytes(8), 128 << 20);
        assert_eq!(window_bytes(32), 32 << 20);
        assert_eq!(window_bytes(10_000), CONNECTION_IN_FLIGHT_BYTES_MIN, "one largest request");
    }
}
