//! The transmission phase of one connection: this thread reads requests without waiting for
//! answers and submits each to the backend; a writer thread sends the replies in the order the
//! backend completes them (the protocol allows any order; the handle pairs them up).
//!
//! Invariants: a request is answered only from its backend completion, so a write is never
//! acknowledged before the backend finished it; every request read whole gets exactly one
//! reply (the writer ends only when every completion has sent its reply, which is also how a
//! connection drains); a request cut short by the client gets none and touches nothing.
//! In-flight requests are bounded (`Window`) so a client cannot make the server buffer without
//! limit.
//!
//! Costs per request, kept low because they are paid at every request (`uraid bench serve`):
//! requests are read through a buffer (many headers per read syscall at high queue depths),
//! payload and reply buffers are recycled (`BufferPool`), and a large reply goes out as one
//! vectored write of its header and data, not a small write then a large one (`reply`). Reads
//! and writes hold their data in the segments the backend asks for (`BlockBackend::
//! segment_bytes`: the runtime's rows, one per worker), so that a request spanning rows is
//! never cut or joined by copying: a write's payload is read from the socket straight into its
//! segments, a read's reply is sent from them.

use crate::backend::{BackendError, BackendOp, SegmentsOp};
use crate::pool::BufferPool;
use crate::reply::{Body, Reply, encode};
use crate::server::Shared;
use crate::socket::Socket;
use crate::stats::bump;
use crate::window::Window;
use crate::wire::{self, Request};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};

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
pub(crate) fn transmit(socket: Socket, shared: &Arc<Shared>, structured: bool) -> io::Result<End> {
    let window = Arc::new(Window::new(IN_FLIGHT_REQUESTS_MAX, IN_FLIGHT_BYTES_MAX));
    let pool = Arc::new(BufferPool::default());
    let (tx, rx) = mpsc::channel();
    let output = socket.try_clone()?;
    let writer = {
        let (window, shared, pool) = (window.clone(), shared.clone(), pool.clone());
        std::thread::Builder::new()
            .name("nbd-writer".into())
            .spawn(move || write_replies(output, &rx, structured, &window, &shared, &pool))?
    };
    let input = BufReader::with_capacity(INPUT_BUFFER_BYTES, socket);
    let mut reader = Reader { input, shared: shared.clone(), tx, window, pool };
    let end = reader.run();
    if end != End::Closed {
        // Nothing more will be read; replies still go out on the write side.
        reader.input.get_ref().shutdown(Shutdown::Read);
    }
    drop(reader);
    writer.join().expect("the reply writer does not panic");
    Ok(end)
}

/// At most this many requests answered-to-be per connection (fio and qemu use 16 to 128).
const IN_FLIGHT_REQUESTS_MAX: u64 = 256;
/// And at most this many payload bytes (write payloads and read data) held for them.
const IN_FLIGHT_BYTES_MAX: u64 = 256 << 20;
/// Read-ahead of the request stream: 32 pipelined 4 KiB writes and their headers, or a few
/// hundred read requests, per read syscall. Larger payloads bypass it.
const INPUT_BUFFER_BYTES: usize = 128 << 10;

struct Reader {
    input: BufReader<Socket>,
    shared: Arc<Shared>,
    tx: Sender<Reply>,
    window: Arc<Window>,
    pool: Arc<BufferPool>,
}

impl Reader {
    fn run(&mut self) -> End {
        loop {
            let mut header = [0; wire::REQUEST_BYTES];
            if self.input.read_exact(&mut header).is_err() {
                return End::Closed;
            }
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
        let len = u64::from(r.len_bytes);
        let payload = if r.command == wire::CMD_WRITE { len } else { 0 };
        let check = check(&self.shared, r);
        if r.command == wire::CMD_WRITE && check.is_err() {
            // Consumed in small pieces, never held: the stream stays in step, memory does not
            // grow with a hostile length.
            io::copy(&mut (&mut self.input).take(payload), &mut io::sink())
                .and_then(|n| if n == payload { Ok(()) } else { Err(eof()) })?;
        }
        let charge_bytes = if r.command == wire::CMD_READ { len } else { payload };
        if let Err(error) = check {
            self.window.acquire(0);
            bump(&self.shared.counters.errors, 1);
            let message = format!("request refused: {}", error_name(error));
            self.reply(r.handle, Body::Status { error, message }, 0);
            return Ok(());
        }
        self.window.acquire(charge_bytes);
        let op = match r.command {
            wire::CMD_READ => {
                let bufs = self.segments(r);
                Submission::Segments(SegmentsOp::Read { offset_bytes: r.offset_bytes, bufs })
            }
            wire::CMD_WRITE => {
                let mut bufs = self.segments(r);
                for buf in &mut bufs {
                    if let Err(e) = self.input.read_exact(buf) {
                        self.window.release(charge_bytes);
                        return Err(e);
                    }
                }
                let (offset_bytes, fua) = (r.offset_bytes, fua(r));
                Submission::Segments(SegmentsOp::Write { offset_bytes, bufs, fua })
            }
            wire::CMD_WRITE_ZEROES => {
                // Zeros written, not discarded: a trim need not read back as zeros everywhere.
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

    /// Pool buffers for a read's data or a write's payload, cut as the backend asks.
    fn segments(&self, r: &Request) -> Vec<Vec<u8>> {
        let lens = self.shared.backend.segment_bytes(r.offset_bytes, r.len_bytes);
        assert_eq!(lens.iter().sum::<usize>(), r.len_bytes as usize, "segments cover it");
        lens.into_iter().map(|n| self.pool.take(n)).collect()
    }

    fn submit(&self, r: &Request, op: Submission, charge_bytes: u64) {
        let (tx, shared, handle) = (self.tx.clone(), self.shared.clone(), r.handle);
        let (read, offset_bytes) = (r.command == wire::CMD_READ, r.offset_bytes);
        // A trim with FUA: the discard, then a flush, then the reply.
        let flush_after = r.command == wire::CMD_TRIM && fua(r);
        if r.len_bytes == 0 && r.command != wire::CMD_FLUSH {
            // Nothing to do, and the runtime wants at least a sector.
            let body = if read { Body::Data { offset_bytes, data: Vec::new() } } else { ok() };
            return send(&tx, Reply { handle, body, charge_bytes });
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
                        return answer(&tx, &shared, &pool, handle, result, read_at, charge_bytes);
                    }
                    let result = result.map(|()| segments);
                    answer(&tx, &shared, &pool, handle, result, read_at, charge_bytes);
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
                        answer(&tx, &shared, &pool, handle, r, None, charge_bytes);
                    };
                    return backend.submit(BackendOp::Flush, Box::new(done));
                }
                let result = result.map(|b| vec![b]);
                answer(&tx, &shared, &pool, handle, result, read_at, charge_bytes);
            }),
        );
    }

    fn reply(&self, handle: u64, body: Body, charge_bytes: u64) {
        send(&self.tx, Reply { handle, body, charge_bytes });
    }
}

/// What goes to the backend: reads and writes in segments, the rest whole.
enum Submission {
    Segments(SegmentsOp),
    Whole(BackendOp),
}

/// Turns a backend completion into the reply (`read_at`: the request was a read at that
/// offset). `result` holds the request's buffers (a read's data), when there are any.
fn answer(
    tx: &Sender<Reply>,
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
    send(tx, Reply { handle, body, charge_bytes });
}

/// The one place backend errors become NBD error values.
fn nbd_error(e: &BackendError) -> u32 {
    match e {
        BackendError::OutOfRange { .. } | BackendError::Unaligned { .. } => wire::EINVAL,
        _ => wire::EIO,
    }
}

fn send(tx: &Sender<Reply>, reply: Reply) {
    // The writer outlives every sender (it ends when they are all gone): this cannot fail.
    tx.send(reply).expect("the reply writer is running");
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
        _ => "error",
    }
}

/// Writes replies as they arrive, flushing when none is waiting. After a write error (the
/// client is gone) it keeps taking replies, to free their window and let the reader finish.
fn write_replies(
    output: Socket,
    rx: &Receiver<Reply>,
    structured: bool,
    window: &Window,
    shared: &Shared,
    pool: &BufferPool,
) {
    let shutdown = output.try_clone().ok();
    let mut out = BufWriter::with_capacity(256 << 10, output);
    let mut broken = false;
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(reply) = next {
            if !broken {
                broken = encode(&mut out, &reply, structured).is_err();
            }
            if let Body::Data { data, .. } = reply.body {
                let bytes = data.iter().map(Vec::len).sum::<usize>();
                bump(&shared.counters.read_bytes, bytes as u64);
                pool.give_all(data);
            }
            window.release(reply.charge_bytes);
            next = rx.try_recv().ok();
        }
        if !broken {
            broken = out.flush().is_err();
        }
        if broken && let Some(s) = &shutdown {
            // Wake the reader: with no way to answer, reading more is pointless.
            s.shutdown(Shutdown::Both);
        }
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
