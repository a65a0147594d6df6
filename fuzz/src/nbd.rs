//! Parsing what the server sent, as a strict client would, to check it is well-formed.

use uraid_nbd::wire;

/// A cursor over the server's bytes; every take is checked.
pub struct Bytes<'a> {
    pub rest: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    pub fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes(b.try_into().unwrap()))
    }

    pub fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_be_bytes(b.try_into().unwrap()))
    }

    pub fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64::from_be_bytes(b.try_into().unwrap()))
    }
}

/// One option reply of fixed newstyle negotiation.
#[derive(Debug)]
pub struct OptionReply<'a> {
    pub option: u32,
    pub kind: u32,
    pub data: &'a [u8],
}

/// Checks the 18-byte greeting (magic, IHAVEOPT, fixed newstyle and no zeroes).
pub fn greeting(b: &mut Bytes<'_>) {
    assert_eq!(b.u64(), Some(wire::NBD_MAGIC), "greeting magic");
    assert_eq!(b.u64(), Some(wire::IHAVEOPT), "newstyle magic");
    let flags = wire::FLAG_FIXED_NEWSTYLE | wire::FLAG_NO_ZEROES;
    assert_eq!(b.u16(), Some(flags), "handshake flags");
}

/// The next option reply, if the bytes start with one (none left, or something else: `None`).
pub fn option_reply<'a>(b: &mut Bytes<'a>) -> Option<OptionReply<'a>> {
    let saved = b.rest;
    if b.u64() != Some(wire::OPTION_REPLY_MAGIC) {
        b.rest = saved;
        return None;
    }
    let option = b.u32().expect("option reply cut short");
    let kind = b.u32().expect("option reply cut short");
    let len = b.u32().expect("option reply cut short") as usize;
    // The largest thing the server sends in one reply is a 4 KiB name or description.
    assert!(len <= wire::STRING_BYTES_MAX + 16, "option reply of {len} bytes");
    let data = b.take(len).expect("option reply data cut short");
    let known = [
        wire::REP_ACK,
        wire::REP_SERVER,
        wire::REP_INFO,
        wire::REP_META_CONTEXT,
        wire::REP_ERR_UNSUP,
        wire::REP_ERR_POLICY,
        wire::REP_ERR_INVALID,
        wire::REP_ERR_UNKNOWN,
    ];
    assert!(known.contains(&kind), "option reply type {kind:#x}");
    if kind == wire::REP_ACK {
        assert!(data.is_empty(), "NBD_REP_ACK carries no data");
    }
    if kind == wire::REP_META_CONTEXT {
        assert_eq!(&data[4.min(data.len())..], wire::CONTEXT_ALLOCATION.as_bytes(), "the context");
    }
    Some(OptionReply { option, kind, data })
}
