//! A connection's replies: what the reader queues for the writer thread, and their encoding
//! on the wire (simple or structured). A read's data is sent from its segments as they are:
//! copied into the reply buffer when small, else in one vectored write with its header.

use crate::socket::Socket;
use crate::wire;
use std::io::{self, BufWriter, IoSlice, Write};

/// Replies with at least this much data skip the reply buffer (no copy into it).
const REPLY_DIRECT_BYTES: usize = 64 << 10;

/// One reply, queued for the writer. `charge_bytes` is returned to the window once sent.
pub(crate) struct Reply {
    pub handle: u64,
    pub body: Body,
    pub charge_bytes: u64,
}

pub(crate) enum Body {
    /// A read's data, in segments (at `offset_bytes`, for the structured OFFSET_DATA chunk).
    Data { offset_bytes: u64, data: Vec<Vec<u8>> },
    /// Success without data, or an error (never zero) with a message for structured replies.
    Status { error: u32, message: String },
}

/// Puts `reply` on the wire (into `out`'s buffer, or past it for large data).
pub(crate) fn encode(
    out: &mut BufWriter<Socket>,
    reply: &Reply,
    structured: bool,
) -> io::Result<()> {
    let handle = reply.handle;
    match (&reply.body, structured) {
        (Body::Data { data, .. }, false) => write_data(out, &wire::simple_reply(0, handle), data),
        (Body::Data { data, .. }, true) if data.is_empty() => {
            let done = wire::REPLY_FLAG_DONE;
            out.write_all(&wire::structured_reply(done, wire::REPLY_TYPE_NONE, handle, 0))
        }
        (Body::Data { offset_bytes, data }, true) => {
            let bytes = data.iter().map(Vec::len).sum::<usize>();
            let len = u32::try_from(bytes + 8).expect("reads are at most the block maximum");
            let kind = wire::REPLY_TYPE_OFFSET_DATA;
            let chunk = wire::structured_reply(wire::REPLY_FLAG_DONE, kind, handle, len);
            let mut head = [0; wire::STRUCTURED_REPLY_BYTES + 8];
            head[..wire::STRUCTURED_REPLY_BYTES].copy_from_slice(&chunk);
            head[wire::STRUCTURED_REPLY_BYTES..].copy_from_slice(&offset_bytes.to_be_bytes());
            write_data(out, &head, data)
        }
        (Body::Status { error, .. }, false) => out.write_all(&wire::simple_reply(*error, handle)),
        (Body::Status { error: 0, .. }, true) => out.write_all(&wire::simple_reply(0, handle)),
        (Body::Status { error, message }, true) => {
            let message = &message.as_bytes()[..message.len().min(wire::STRING_BYTES_MAX)];
            let len = 6 + message.len() as u32;
            let kind = wire::REPLY_TYPE_ERROR;
            out.write_all(&wire::structured_reply(wire::REPLY_FLAG_DONE, kind, handle, len))?;
            out.write_all(&error.to_be_bytes())?;
            out.write_all(&(message.len() as u16).to_be_bytes())?;
            out.write_all(message)
        }
    }
}

/// A reply header and its data (in segments). Small data is copied into the reply buffer
/// (many replies per syscall); large data goes straight to the socket with its header in one
/// vectored write, after what the buffer holds, so the bytes stay in order.
fn write_data(out: &mut BufWriter<Socket>, head: &[u8], data: &[Vec<u8>]) -> io::Result<()> {
    if data.iter().map(Vec::len).sum::<usize>() < REPLY_DIRECT_BYTES {
        out.write_all(head)?;
        return data.iter().try_for_each(|d| out.write_all(d));
    }
    out.flush()?;
    let mut parts = Vec::with_capacity(data.len() + 1);
    parts.push(IoSlice::new(head));
    parts.extend(data.iter().map(|d| IoSlice::new(d)));
    let mut parts = &mut parts[..];
    while !parts.is_empty() {
        match out.get_mut().write_vectored(parts) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut parts, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
