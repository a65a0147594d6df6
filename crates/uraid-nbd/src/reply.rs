//! A connection's replies and their encoding on the wire (simple or structured). Replies go
//! out in batches: every header (and error message) of a batch in one buffer, each read's
//! data from its own segments where it lies, all of it in vectored sends (no copy of the
//! data in user space). A batch remembers how much of it was sent, so one that the socket
//! would not take whole can be finished by another thread (see `output`).

use crate::socket::Socket;
use crate::wire;
use socket2::SockRef;
use std::io::{self, IoSlice};
use std::ops::Range;

/// One reply. `charge_bytes` is returned to the window once it is sent.
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
    /// Block status descriptors for base:allocation: (length, flags) each (structured only).
    BlockStatus { extents: Vec<(u32, u32)> },
}

/// Replies encoded for the wire, and how far their sending got.
pub(crate) struct Batch {
    replies: Vec<Reply>,
    /// Headers, offsets, error codes and messages, in wire order.
    head: Vec<u8>,
    /// The batch's bytes in wire order: pieces of `head` and reads' data segments.
    parts: Vec<Part>,
    len: usize,
    sent: usize,
}

enum Part {
    Head(Range<usize>),
    /// Segment `segment` of reply `reply`'s data.
    Data {
        reply: usize,
        segment: usize,
    },
}

/// At most this many pieces per send (Linux's IOV_MAX is 1024).
const SLICES_MAX: usize = 512;

impl Batch {
    pub fn new(replies: Vec<Reply>, structured: bool) -> Batch {
        let mut b =
            Batch { replies: Vec::new(), head: Vec::new(), parts: Vec::new(), len: 0, sent: 0 };
        for (i, r) in replies.iter().enumerate() {
            b.encode(i, r, structured);
        }
        b.replies = replies;
        b
    }

    fn encode(&mut self, index: usize, reply: &Reply, structured: bool) {
        let handle = reply.handle;
        match (&reply.body, structured) {
            (Body::Data { data, .. }, false) => {
                self.put(&wire::simple_reply(0, handle));
                self.put_data(index, data);
            }
            (Body::Data { data, .. }, true) if data.is_empty() => {
                let done = wire::REPLY_FLAG_DONE;
                self.put(&wire::structured_reply(done, wire::REPLY_TYPE_NONE, handle, 0));
            }
            (Body::Data { offset_bytes, data }, true) => {
                let bytes = data.iter().map(Vec::len).sum::<usize>();
                let len = u32::try_from(bytes + 8).expect("reads are at most the block maximum");
                let kind = wire::REPLY_TYPE_OFFSET_DATA;
                self.put(&wire::structured_reply(wire::REPLY_FLAG_DONE, kind, handle, len));
                self.put(&offset_bytes.to_be_bytes());
                self.put_data(index, data);
            }
            (Body::Status { error, .. }, false) => self.put(&wire::simple_reply(*error, handle)),
            (Body::Status { error: 0, .. }, true) => self.put(&wire::simple_reply(0, handle)),
            (Body::BlockStatus { extents }, true) => {
                let len = u32::try_from(4 + 8 * extents.len()).expect("extents are capped");
                let kind = wire::REPLY_TYPE_BLOCK_STATUS;
                self.put(&wire::structured_reply(wire::REPLY_FLAG_DONE, kind, handle, len));
                self.put(&wire::CONTEXT_ALLOCATION_ID.to_be_bytes());
                for (len, flags) in extents {
                    self.put(&len.to_be_bytes());
                    self.put(&flags.to_be_bytes());
                }
            }
            // Never built: block status needs a metadata context, which needs structured
            // replies. Said as the protocol's error, not as a reply the client cannot parse.
            (Body::BlockStatus { .. }, false) => {
                self.put(&wire::simple_reply(wire::EINVAL, handle));
            }
            (Body::Status { error, message }, true) => {
                let message = &message.as_bytes()[..message.len().min(wire::STRING_BYTES_MAX)];
                let len = 6 + message.len() as u32;
                let kind = wire::REPLY_TYPE_ERROR;
                self.put(&wire::structured_reply(wire::REPLY_FLAG_DONE, kind, handle, len));
                self.put(&error.to_be_bytes());
                self.put(&(message.len() as u16).to_be_bytes());
                self.put(message);
            }
        }
    }

    /// Appends header bytes, joined to the previous part when it is header bytes too.
    fn put(&mut self, bytes: &[u8]) {
        let start = self.head.len();
        self.head.extend_from_slice(bytes);
        self.len += bytes.len();
        if let Some(Part::Head(r)) = self.parts.last_mut() {
            r.end = self.head.len();
        } else {
            self.parts.push(Part::Head(start..self.head.len()));
        }
    }

    fn put_data(&mut self, reply: usize, data: &[Vec<u8>]) {
        for (segment, d) in data.iter().enumerate().filter(|(_, d)| !d.is_empty()) {
            self.parts.push(Part::Data { reply, segment });
            self.len += d.len();
        }
    }

    fn bytes(&self, part: &Part) -> &[u8] {
        match part {
            Part::Head(r) => &self.head[r.clone()],
            Part::Data { reply, segment } => match &self.replies[*reply].body {
                Body::Data { data, .. } => &data[*segment],
                Body::Status { .. } | Body::BlockStatus { .. } => {
                    unreachable!("data parts belong to data replies")
                }
            },
        }
    }

    /// What is left to send, as at most `SLICES_MAX` slices.
    fn unsent(&self) -> Vec<IoSlice<'_>> {
        let mut skip = self.sent;
        let mut slices = Vec::new();
        for part in &self.parts {
            let b = self.bytes(part);
            if skip >= b.len() {
                skip -= b.len();
                continue;
            }
            slices.push(IoSlice::new(&b[skip..]));
            skip = 0;
            if slices.len() == SLICES_MAX {
                break;
            }
        }
        slices
    }

    /// Sends what is left. Without `wait`, returns `Ok(false)` as soon as the socket would
    /// block (the rest stays to send); with it, blocks until all is sent.
    pub fn send(&mut self, socket: &Socket, wait: bool) -> io::Result<bool> {
        let flags = libc::MSG_NOSIGNAL | if wait { 0 } else { libc::MSG_DONTWAIT };
        while self.sent < self.len {
            let slices = self.unsent();
            match SockRef::from(socket).send_vectored_with_flags(&slices, flags) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && !wait => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    pub fn into_replies(self) -> Vec<Reply> {
        self.replies
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    fn data_reply(handle: u64, segments: &[usize]) -> Reply {
        let data = segments.iter().map(|&n| vec![handle as u8; n]).collect();
        Reply { handle, body: Body::Data { offset_bytes: 4096, data }, charge_bytes: 0 }
    }

    /// A batch larger than the socket takes at once: sent without waiting it stops part way,
    /// then finishes from where it stopped, and the bytes on the wire are the replies in order.
    #[test]
    fn a_batch_sent_in_parts_arrives_whole_and_in_order() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let socket = Socket::Unix(a);
        let status = Body::Status { error: wire::EIO, message: "bad".into() };
        let replies = vec![
            data_reply(1, &[4096, 512]),
            Reply { handle: 2, body: status, charge_bytes: 0 },
            data_reply(3, &[1 << 20, 1 << 20]),
        ];
        let mut batch = Batch::new(replies, true);
        let total = batch.len;
        assert!(!batch.send(&socket, false).unwrap(), "2 MiB do not fit in a socket buffer");
        let reader = std::thread::spawn(move || {
            let mut got = vec![0; total];
            b.read_exact(&mut got).unwrap();
            got
        });
        assert!(batch.send(&socket, true).unwrap());
        let got = reader.join().unwrap();
        let mut want = Vec::new();
        want.extend(wire::structured_reply(1, wire::REPLY_TYPE_OFFSET_DATA, 1, 4608 + 8));
        want.extend(4096u64.to_be_bytes());
        want.extend(vec![1; 4608]);
        want.extend(wire::structured_reply(1, wire::REPLY_TYPE_ERROR, 2, 9));
        want.extend(wire::EIO.to_be_bytes());
        want.extend(3u16.to_be_bytes());
        want.extend(b"bad");
        want.extend(wire::structured_reply(1, wire::REPLY_TYPE_OFFSET_DATA, 3, (2 << 20) + 8));
        want.extend(4096u64.to_be_bytes());
        want.extend(vec![3; 2 << 20]);
        assert_eq!(got.len(), want.len());
        assert!(got == want, "the wire bytes differ from the replies in order");
    }
}
