//! The client's transmission phase: requests out, replies (simple or structured) in.

use super::{Client, ClientError, Reply, protocol};
use crate::wire::{self, Request, read_u16, read_u32, read_u64};
use std::io::{Read, Write};

impl Client {
    #[must_use]
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    #[must_use]
    pub fn transmission_flags(&self) -> u16 {
        self.transmission_flags
    }

    #[must_use]
    pub fn block_sizes(&self) -> super::BlockSizes {
        self.block_sizes
    }

    /// Whether the server acknowledged NBD_OPT_STRUCTURED_REPLY.
    #[must_use]
    pub fn structured(&self) -> bool {
        self.structured
    }

    pub fn read(&mut self, offset_bytes: u64, len_bytes: u32) -> Result<Vec<u8>, ClientError> {
        self.call(wire::CMD_READ, 0, offset_bytes, len_bytes, &[])
    }

    pub fn write(&mut self, offset_bytes: u64, data: &[u8], fua: bool) -> Result<(), ClientError> {
        let flags = if fua { wire::CMD_FLAG_FUA } else { 0 };
        let len = u32::try_from(data.len()).map_err(|_| protocol("write over 4 GiB".into()))?;
        self.call(wire::CMD_WRITE, flags, offset_bytes, len, data).map(drop)
    }

    pub fn flush(&mut self) -> Result<(), ClientError> {
        self.call(wire::CMD_FLUSH, 0, 0, 0, &[]).map(drop)
    }

    pub fn trim(&mut self, offset_bytes: u64, len_bytes: u32) -> Result<(), ClientError> {
        self.call(wire::CMD_TRIM, 0, offset_bytes, len_bytes, &[]).map(drop)
    }

    pub fn write_zeroes(&mut self, offset_bytes: u64, len_bytes: u32) -> Result<(), ClientError> {
        self.call(wire::CMD_WRITE_ZEROES, 0, offset_bytes, len_bytes, &[]).map(drop)
    }

    /// The id of base:allocation, when the server selected it (`connect_unix_allocation`).
    #[must_use]
    pub fn allocation_id(&self) -> Option<u32> {
        self.allocation_id
    }

    /// NBD_CMD_BLOCK_STATUS: base:allocation's descriptors from `offset_bytes`, as (length,
    /// flags) pairs; with `one`, NBD_CMD_FLAG_REQ_ONE.
    pub fn block_status(
        &mut self,
        offset_bytes: u64,
        len_bytes: u32,
        one: bool,
    ) -> Result<Vec<(u32, u32)>, ClientError> {
        let flags = if one { wire::CMD_FLAG_REQ_ONE } else { 0 };
        let raw = self.call(wire::CMD_BLOCK_STATUS, flags, offset_bytes, len_bytes, &[])?;
        let id = raw.get(..4).map(wire::be32);
        if id.is_none() || id != self.allocation_id || (raw.len() - 4) % 8 != 0 {
            return Err(protocol(format!("block status chunk of {} bytes", raw.len())));
        }
        Ok(raw[4..].chunks_exact(8).map(|d| (wire::be32(&d[..4]), wire::be32(&d[4..]))).collect())
    }

    /// NBD_CMD_DISC, the soft disconnect: the server answers what was pending, then closes.
    pub fn disconnect(mut self) -> Result<(), ClientError> {
        let r =
            Request { flags: 0, command: wire::CMD_DISC, handle: 0, offset_bytes: 0, len_bytes: 0 };
        self.stream.write_all(&r.encode())?;
        Ok(())
    }

    /// One request, then its reply; the data of a read.
    fn call(
        &mut self,
        command: u16,
        flags: u16,
        offset_bytes: u64,
        len_bytes: u32,
        payload: &[u8],
    ) -> Result<Vec<u8>, ClientError> {
        assert!(self.pending.is_empty(), "blocking calls do not mix with pipelined ones");
        let handle = self.send(command, flags, offset_bytes, len_bytes, payload)?;
        let reply = self.receive()?;
        assert_eq!(reply.handle, handle, "the only request pending");
        match reply.error {
            0 => Ok(reply.data),
            e => Err(ClientError::Nbd(e)),
        }
    }

    /// Sends a request without waiting; returns its handle. `payload` goes out after the
    /// header as it is (a write's data), whatever `len_bytes` says, so tests can lie.
    pub fn send(
        &mut self,
        command: u16,
        flags: u16,
        offset_bytes: u64,
        len_bytes: u32,
        payload: &[u8],
    ) -> Result<u64, ClientError> {
        let handle = self.next_handle;
        self.next_handle += 1;
        let r = Request { flags, command, handle, offset_bytes, len_bytes };
        self.stream.write_all(&r.encode())?;
        self.stream.write_all(payload)?;
        self.pending.insert(handle, r);
        Ok(handle)
    }

    /// The next reply, whichever request it answers.
    pub fn receive(&mut self) -> Result<Reply, ClientError> {
        let magic = read_u32(&mut self.stream)?;
        match magic {
            wire::SIMPLE_REPLY_MAGIC => self.simple_reply(),
            wire::STRUCTURED_REPLY_MAGIC if self.structured => self.structured_reply(),
            m => Err(protocol(format!("reply magic {m:#x}"))),
        }
    }

    fn take_pending(&mut self, handle: u64) -> Result<Request, ClientError> {
        self.pending
            .remove(&handle)
            .ok_or_else(|| protocol(format!("reply to unknown handle {handle}")))
    }

    fn simple_reply(&mut self) -> Result<Reply, ClientError> {
        let error = read_u32(&mut self.stream)?;
        let handle = read_u64(&mut self.stream)?;
        let r = self.take_pending(handle)?;
        if r.command == wire::CMD_READ && self.structured {
            return Err(protocol("a simple reply to a read after structured replies".into()));
        }
        let mut data = Vec::new();
        if r.command == wire::CMD_READ && error == 0 {
            data = vec![0; r.len_bytes as usize];
            self.stream.read_exact(&mut data)?;
        }
        Ok(Reply { handle, error, data })
    }

    /// Chunks until NBD_REPLY_FLAG_DONE; other requests' chunks are not expected in between
    /// (this client reads one reply at a time), and are refused if they come.
    fn structured_reply(&mut self) -> Result<Reply, ClientError> {
        let mut first = true;
        let mut error = 0;
        let mut data = Vec::new();
        let mut request = None;
        loop {
            if !first && read_u32(&mut self.stream)? != wire::STRUCTURED_REPLY_MAGIC {
                return Err(protocol("chunk magic".into()));
            }
            first = false;
            let flags = read_u16(&mut self.stream)?;
            let kind = read_u16(&mut self.stream)?;
            let handle = read_u64(&mut self.stream)?;
            let len = read_u32(&mut self.stream)? as usize;
            let r: Request = match request {
                Some(r) => r,
                None => *self
                    .pending
                    .get(&handle)
                    .ok_or_else(|| protocol(format!("handle {handle}")))?,
            };
            if r.handle != handle {
                return Err(protocol("chunks of two replies interleaved".into()));
            }
            request = Some(r);
            let mut payload = vec![0; len];
            self.stream.read_exact(&mut payload)?;
            match kind {
                wire::REPLY_TYPE_NONE => {}
                wire::REPLY_TYPE_OFFSET_DATA if len >= 8 => {
                    data.resize(r.len_bytes as usize, 0);
                    let at = wire::be64(&payload[..8]).wrapping_sub(r.offset_bytes) as usize;
                    let end = at.checked_add(len - 8).filter(|&e| e <= data.len());
                    let end = end.ok_or_else(|| protocol("data chunk outside the read".into()))?;
                    data[at..end].copy_from_slice(&payload[8..]);
                }
                // The context id and the descriptors, raw (`block_status` reads them).
                wire::REPLY_TYPE_BLOCK_STATUS if r.command == wire::CMD_BLOCK_STATUS => {
                    data = payload;
                }
                k if k & 0x8000 != 0 && len >= 6 => error = wire::be32(&payload[..4]),
                k => return Err(protocol(format!("chunk type {k} of {len} bytes"))),
            }
            if flags & wire::REPLY_FLAG_DONE != 0 {
                self.take_pending(handle)?;
                return Ok(Reply { handle, error, data });
            }
        }
    }
}
