//! The NBD protocol's numbers and its fixed-size messages, as the NBD project's `doc/proto.md`
//! defines them. Everything on the wire is big-endian (network byte order).
//!
//! Only facts are taken from the document (magics, flag bits, option and command numbers,
//! layouts); the encoding is ours. Server and client share these so the two ends cannot drift.

use std::io::{self, Read, Write};

/// "NBDMAGIC": the first 8 bytes the server sends.
pub const NBD_MAGIC: u64 = 0x4e42_444d_4147_4943;
/// "IHAVEOPT": the newstyle magic, and the magic opening every option request.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Opens every option reply in fixed newstyle negotiation.
pub const OPTION_REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;
pub const STRUCTURED_REPLY_MAGIC: u32 = 0x668e_33ef;

// Handshake flags (server) and client flags.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
pub const FLAG_C_FIXED_NEWSTYLE: u32 = 1 << 0;
pub const FLAG_C_NO_ZEROES: u32 = 1 << 1;

// Transmission flags.
pub const FLAG_HAS_FLAGS: u16 = 1 << 0;
pub const FLAG_READ_ONLY: u16 = 1 << 1;
pub const FLAG_SEND_FLUSH: u16 = 1 << 2;
pub const FLAG_SEND_FUA: u16 = 1 << 3;
pub const FLAG_SEND_TRIM: u16 = 1 << 5;
pub const FLAG_SEND_WRITE_ZEROES: u16 = 1 << 6;
pub const FLAG_CAN_MULTI_CONN: u16 = 1 << 8;

// Options.
pub const OPT_EXPORT_NAME: u32 = 1;
pub const OPT_ABORT: u32 = 2;
pub const OPT_LIST: u32 = 3;
pub const OPT_STARTTLS: u32 = 5;
pub const OPT_INFO: u32 = 6;
pub const OPT_GO: u32 = 7;
pub const OPT_STRUCTURED_REPLY: u32 = 8;
pub const OPT_LIST_META_CONTEXT: u32 = 9;
pub const OPT_SET_META_CONTEXT: u32 = 10;

// Option replies; errors have bit 31 set.
pub const REP_ACK: u32 = 1;
pub const REP_SERVER: u32 = 2;
pub const REP_INFO: u32 = 3;
pub const REP_META_CONTEXT: u32 = 4;
pub const REP_ERR_UNSUP: u32 = (1 << 31) + 1;
pub const REP_ERR_POLICY: u32 = (1 << 31) + 2;
pub const REP_ERR_INVALID: u32 = (1 << 31) + 3;
pub const REP_ERR_UNKNOWN: u32 = (1 << 31) + 6;

// Information types in NBD_REP_INFO.
pub const INFO_EXPORT: u16 = 0;
pub const INFO_NAME: u16 = 1;
pub const INFO_DESCRIPTION: u16 = 2;
pub const INFO_BLOCK_SIZE: u16 = 3;

// Commands and command flags.
pub const CMD_READ: u16 = 0;
pub const CMD_WRITE: u16 = 1;
pub const CMD_DISC: u16 = 2;
pub const CMD_FLUSH: u16 = 3;
pub const CMD_TRIM: u16 = 4;
pub const CMD_WRITE_ZEROES: u16 = 6;
pub const CMD_BLOCK_STATUS: u16 = 7;
pub const CMD_FLAG_FUA: u16 = 1 << 0;
pub const CMD_FLAG_NO_HOLE: u16 = 1 << 1;
pub const CMD_FLAG_REQ_ONE: u16 = 1 << 3;

// Structured reply chunks.
pub const REPLY_FLAG_DONE: u16 = 1 << 0;
pub const REPLY_TYPE_NONE: u16 = 0;
pub const REPLY_TYPE_OFFSET_DATA: u16 = 1;
pub const REPLY_TYPE_BLOCK_STATUS: u16 = 5;
pub const REPLY_TYPE_ERROR: u16 = (1 << 15) + 1;

// The base:allocation metadata context: its name, the id this server gives it, its flags.
pub const CONTEXT_ALLOCATION: &str = "base:allocation";
pub const CONTEXT_ALLOCATION_ID: u32 = 1;
pub const STATE_HOLE: u32 = 1 << 0;
pub const STATE_ZERO: u32 = 1 << 1;

// Error values (the protocol's own, chosen to equal the common errno values).
pub const EPERM: u32 = 1;
pub const EIO: u32 = 5;
pub const EINVAL: u32 = 22;
pub const ENOSPC: u32 = 28;
pub const EOVERFLOW: u32 = 75;
pub const ENOTSUP: u32 = 95;
pub const ESHUTDOWN: u32 = 108;

/// Strings (export names, messages) MUST be no longer than this.
pub const STRING_BYTES_MAX: usize = 4096;
/// The zero padding after NBD_OPT_EXPORT_NAME's reply unless the client asked for none.
pub const EXPORT_NAME_PADDING_BYTES: usize = 124;
pub const REQUEST_BYTES: usize = 28;
pub const SIMPLE_REPLY_BYTES: usize = 16;
pub const STRUCTURED_REPLY_BYTES: usize = 20;

/// A transmission request header (a write's payload follows it on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub flags: u16,
    pub command: u16,
    pub handle: u64,
    pub offset_bytes: u64,
    pub len_bytes: u32,
}

impl Request {
    #[must_use]
    pub fn encode(&self) -> [u8; REQUEST_BYTES] {
        let mut b = [0; REQUEST_BYTES];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..6].copy_from_slice(&self.flags.to_be_bytes());
        b[6..8].copy_from_slice(&self.command.to_be_bytes());
        b[8..16].copy_from_slice(&self.handle.to_be_bytes());
        b[16..24].copy_from_slice(&self.offset_bytes.to_be_bytes());
        b[24..28].copy_from_slice(&self.len_bytes.to_be_bytes());
        b
    }

    /// The request, or the magic it carried instead of NBD_REQUEST_MAGIC.
    pub fn decode(b: &[u8; REQUEST_BYTES]) -> Result<Request, u32> {
        let magic = be32(&b[0..4]);
        if magic != REQUEST_MAGIC {
            return Err(magic);
        }
        Ok(Request {
            flags: be16(&b[4..6]),
            command: be16(&b[6..8]),
            handle: be64(&b[8..16]),
            offset_bytes: be64(&b[16..24]),
            len_bytes: be32(&b[24..28]),
        })
    }
}

/// A simple reply header: magic, error, handle (a successful read's data follows).
#[must_use]
pub fn simple_reply(error: u32, handle: u64) -> [u8; SIMPLE_REPLY_BYTES] {
    let mut b = [0; SIMPLE_REPLY_BYTES];
    b[0..4].copy_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&error.to_be_bytes());
    b[8..16].copy_from_slice(&handle.to_be_bytes());
    b
}

/// The data of NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT: the export's name and
/// the query count, each query, every one after its 32-bit length (`meta_context` parses it).
#[must_use]
pub fn meta_context_request(name: &str, queries: &[&str]) -> Vec<u8> {
    let mut b = (name.len() as u32).to_be_bytes().to_vec();
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(&(queries.len() as u32).to_be_bytes());
    for q in queries {
        b.extend_from_slice(&(q.len() as u32).to_be_bytes());
        b.extend_from_slice(q.as_bytes());
    }
    b
}

/// A structured reply chunk header: magic, flags, type, handle, payload length.
#[must_use]
pub fn structured_reply(
    flags: u16,
    kind: u16,
    handle: u64,
    payload_bytes: u32,
) -> [u8; STRUCTURED_REPLY_BYTES] {
    let mut b = [0; STRUCTURED_REPLY_BYTES];
    b[0..4].copy_from_slice(&STRUCTURED_REPLY_MAGIC.to_be_bytes());
    b[4..6].copy_from_slice(&flags.to_be_bytes());
    b[6..8].copy_from_slice(&kind.to_be_bytes());
    b[8..16].copy_from_slice(&handle.to_be_bytes());
    b[16..20].copy_from_slice(&payload_bytes.to_be_bytes());
    b
}

/// An option reply in fixed newstyle: magic, option, reply type, length, data.
pub fn write_option_reply(
    w: &mut impl Write,
    option: u32,
    reply: u32,
    data: &[u8],
) -> io::Result<()> {
    let len = u32::try_from(data.len()).expect("option replies are small");
    let mut b = Vec::with_capacity(20 + data.len());
    b.extend_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&reply.to_be_bytes());
    b.extend_from_slice(&len.to_be_bytes());
    b.extend_from_slice(data);
    w.write_all(&b)
}

#[must_use]
pub fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes(b.try_into().expect("2 bytes"))
}

#[must_use]
pub fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b.try_into().expect("4 bytes"))
}

#[must_use]
pub fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().expect("8 bytes"))
}

pub fn read_u16(r: &mut impl Read) -> io::Result<u16> {
    let mut b = [0; 2];
    r.read_exact(&mut b)?;
    Ok(u16::from_be_bytes(b))
}

pub fn read_u32(r: &mut impl Read) -> io::Result<u32> {
    let mut b = [0; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

pub fn read_u64(r: &mut impl Read) -> io::Result<u64> {
    let mut b = [0; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_be_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_encodes_and_decodes_to_itself() {
        let r = Request {
            flags: CMD_FLAG_FUA,
            command: CMD_WRITE,
            handle: 0x0102_0304_0506_0708,
            offset_bytes: 1 << 40,
            len_bytes: 4096,
        };
        let b = r.encode();
        assert_eq!(&b[0..4], &[0x25, 0x60, 0x95, 0x13], "magic first, big-endian");
        assert_eq!(&b[24..28], &[0, 0, 0x10, 0], "length last");
        assert_eq!(Request::decode(&b), Ok(r));
        let mut bad = b;
        bad[0] = 0;
        assert_eq!(Request::decode(&bad), Err(0x0060_9513));
    }

    #[test]
    fn option_reply_magic_is_the_documented_value() {
        let mut out = Vec::new();
        write_option_reply(&mut out, OPT_LIST, REP_ACK, &[]).unwrap();
        assert_eq!(&out[0..8], &[0, 0x03, 0xe8, 0x89, 0x04, 0x55, 0x65, 0xa9]);
        assert_eq!(be32(&out[12..16]), REP_ACK);
        assert_eq!(out.len(), 20);
    }
}
