//! The NBD server's transmission phase: arbitrary request bytes after a valid handshake, over a
//! real Unix socket pair, against a 64 KiB `MemoryBackend`.
//!
//! The first byte picks structured replies, a read-only export and (with structured replies)
//! base:allocation; the rest is the stream of requests (any command, flags, offsets,
//! lengths; payloads may be cut short). The target
//! parses the same bytes as the server must and keeps a model of the export (a flat `Vec`).
//! Invariants: no panic, no hang; exactly one well-formed reply per request read whole, in
//! order (the memory backend completes inline, so replies cannot overtake each other), with
//! its handle; a request outside the export, misaligned, of an unknown command or with
//! unknown flags is refused, and so is any change to a read-only export; a successful read
//! returns what the model holds (every write acknowledged is readable); block status is
//! answered only with base:allocation selected, with descriptors from the offset, within the
//! request (one with REQ_ONE), and a range said to be zeros holds zeros; at the end the
//! backend holds exactly the model (nothing unacknowledged, nothing cut short, was written).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Once};
use uraid_fuzz::nbd::{Bytes, greeting, option_reply};
use uraid_nbd::wire::{self, Request};
use uraid_nbd::{MemoryBackend, Server, ServerConfig, fuzzing};

const SIZE_BYTES: usize = 64 << 10;
const BLOCK_BYTES_MAX: u32 = 32 << 10;

fuzz_target!(|data: &[u8]| {
    static SIGPIPE: Once = Once::new();
    // libFuzzer's main, not Rust's, runs this process: writing to a closed socket must be an
    // error, not a signal that kills the fuzzer.
    SIGPIPE.call_once(|| unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    });
    let Some((&cfg, requests)) = data.split_first() else { return };
    let (structured, read_only) = (cfg & 1 != 0, cfg & 2 != 0);
    let allocation = structured && cfg & 4 != 0;
    let backend = Arc::new(MemoryBackend::new(SIZE_BYTES, 4096));
    let config =
        ServerConfig { read_only, block_bytes_max: BLOCK_BYTES_MAX, ..ServerConfig::default() };
    let server = Server::new(backend.clone(), config).unwrap();
    let mut client = handshake_bytes(structured, allocation);
    client.extend_from_slice(requests);
    let out = converse(&server, &client);
    let mut b = Bytes { rest: &out };
    greeting(&mut b);
    loop {
        let r = option_reply(&mut b).expect("the handshake is answered");
        if r.option == wire::OPT_GO && r.kind == wire::REP_ACK {
            break;
        }
        assert!(r.kind & (1 << 31) == 0, "a valid handshake is not refused: {r:?}");
    }
    let mut model = vec![0u8; SIZE_BYTES];
    for (r, payload) in parse_requests(requests) {
        let (error, data) = reply(&mut b, &r, structured);
        if r.command == wire::CMD_BLOCK_STATUS {
            check_status(&r, error, data, allocation, &model);
            continue;
        }
        check(&r, payload, error, data, read_only, &mut model);
    }
    assert!(b.rest.is_empty(), "{} bytes after the last reply", b.rest.len());
    assert!(backend.snapshot(0, SIZE_BYTES) == model, "the export holds what was acknowledged");
});

/// Client flags, NBD_OPT_STRUCTURED_REPLY if asked, NBD_OPT_SET_META_CONTEXT for
/// base:allocation if asked, NBD_OPT_GO for the default export.
fn handshake_bytes(structured: bool, allocation: bool) -> Vec<u8> {
    let mut c = (wire::FLAG_C_FIXED_NEWSTYLE | wire::FLAG_C_NO_ZEROES).to_be_bytes().to_vec();
    let mut option = |option: u32, data: &[u8]| {
        c.extend_from_slice(&wire::IHAVEOPT.to_be_bytes());
        c.extend_from_slice(&option.to_be_bytes());
        c.extend_from_slice(&(data.len() as u32).to_be_bytes());
        c.extend_from_slice(data);
    };
    if structured {
        option(wire::OPT_STRUCTURED_REPLY, &[]);
    }
    if allocation {
        let data = wire::meta_context_request("", &[wire::CONTEXT_ALLOCATION]);
        option(wire::OPT_SET_META_CONTEXT, &data);
    }
    option(wire::OPT_GO, &[0; 6]);
    c
}

/// Serves one connection: a thread sends `client` then half-closes, this one reads every
/// byte the server sends until it closes.
fn converse(server: &Server, client: &[u8]) -> Vec<u8> {
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    let mut writer = ours.try_clone().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| fuzzing::serve_connection(server, theirs));
        s.spawn(move || {
            // The server may stop reading first (a bad magic): then the write fails, fine.
            let _ = writer.write_all(client);
            let _ = writer.shutdown(Shutdown::Write);
        });
        let mut out = Vec::new();
        ours.read_to_end(&mut out).expect("reading the replies");
        out
    })
}

/// The requests the server reads whole, with their payloads, as the protocol frames them.
fn parse_requests(mut rest: &[u8]) -> Vec<(Request, &[u8])> {
    let mut requests = Vec::new();
    while rest.len() >= wire::REQUEST_BYTES {
        let (header, tail) = rest.split_at(wire::REQUEST_BYTES);
        let Ok(r) = Request::decode(header.try_into().unwrap()) else { break };
        if r.command == wire::CMD_DISC {
            break;
        }
        let payload_len = if r.command == wire::CMD_WRITE { r.len_bytes as usize } else { 0 };
        if tail.len() < payload_len {
            break;
        }
        let (payload, tail) = tail.split_at(payload_len);
        requests.push((r, payload));
        rest = tail;
    }
    requests
}

/// Parses the next reply, which must be `r`'s: its error, and a read's data when it succeeded.
fn reply<'a>(b: &mut Bytes<'a>, r: &Request, structured: bool) -> (u32, Option<&'a [u8]>) {
    let magic = b.u32().expect("a reply for every request read whole");
    let read = r.command == wire::CMD_READ;
    if magic == wire::SIMPLE_REPLY_MAGIC {
        let error = b.u32().expect("simple reply cut short");
        assert_eq!(b.u64(), Some(r.handle), "replies come in request order");
        assert!(!(structured && read), "no simple reply to a read once structured: {r:?}");
        let data = (read && error == 0).then(|| b.take(r.len_bytes as usize).expect("read data"));
        return (error, data);
    }
    assert_eq!(magic, wire::STRUCTURED_REPLY_MAGIC, "reply magic");
    assert!(structured, "structured replies only when negotiated");
    let flags = b.u16().unwrap();
    let kind = b.u16().unwrap();
    assert_eq!(b.u64(), Some(r.handle), "replies come in request order");
    let len = b.u32().unwrap() as usize;
    let mut payload = Bytes { rest: b.take(len).expect("structured reply cut short") };
    assert_eq!(flags, wire::REPLY_FLAG_DONE, "one chunk per reply");
    match kind {
        wire::REPLY_TYPE_NONE => {
            assert!(len == 0 && read && r.len_bytes == 0, "NONE ends an empty read only");
            (0, Some(&[]))
        }
        wire::REPLY_TYPE_OFFSET_DATA => {
            assert!(read, "data for a read only");
            assert_eq!(payload.u64(), Some(r.offset_bytes), "the data's offset");
            assert_eq!(payload.rest.len(), r.len_bytes as usize, "the read's length");
            (0, Some(payload.rest))
        }
        wire::REPLY_TYPE_BLOCK_STATUS => {
            assert_eq!(r.command, wire::CMD_BLOCK_STATUS, "block status for block status only");
            assert_eq!(payload.u32(), Some(wire::CONTEXT_ALLOCATION_ID), "the context's id");
            assert!(!payload.rest.is_empty() && payload.rest.len() % 8 == 0, "descriptors");
            (0, Some(payload.rest))
        }
        wire::REPLY_TYPE_ERROR => {
            let error = payload.u32().expect("error value");
            let message_len = payload.u16().expect("message length") as usize;
            assert_eq!(payload.rest.len(), message_len, "error message length");
            assert!(error != 0, "an error chunk with no error");
            (error, None)
        }
        other => panic!("reply chunk type {other}"),
    }
}

/// Checks a block status reply: refused unless base:allocation was selected and the request
/// is good; else descriptors from the offset, nonzero, within the request (exactly one with
/// REQ_ONE), and every range said to be zeros holds zeros in the model.
fn check_status(r: &Request, error: u32, data: Option<&[u8]>, allocation: bool, m: &[u8]) {
    let (offset, len) = (r.offset_bytes, u64::from(r.len_bytes));
    let bad = !allocation
        || len == 0
        || offset.checked_add(len).is_none_or(|end| end > SIZE_BYTES as u64)
        || offset % 512 != 0
        || len % 512 != 0
        || r.flags & !(wire::CMD_FLAG_REQ_ONE | wire::CMD_FLAG_FUA) != 0;
    if bad {
        assert_eq!(error, wire::EINVAL, "block status {r:?}");
        return;
    }
    assert_eq!(error, 0, "block status {r:?} refused");
    let descriptors: Vec<(u64, u32)> = data
        .expect("descriptors")
        .chunks_exact(8)
        .map(|d| (u64::from(be32(&d[..4])), be32(&d[4..])))
        .collect();
    if r.flags & wire::CMD_FLAG_REQ_ONE != 0 {
        assert_eq!(descriptors.len(), 1, "REQ_ONE");
    }
    let mut at = offset;
    for (n, flags) in descriptors {
        assert!(n > 0 && at + n <= offset + len, "a descriptor within the request");
        if flags & wire::STATE_ZERO != 0 {
            let range = at as usize..(at + n) as usize;
            assert!(m[range].iter().all(|b| *b == 0), "said zeros at {at}+{n}, holds data");
        }
        at += n;
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b.try_into().unwrap())
}

/// Checks the reply against the protocol's rules and the model, and applies what succeeded.
fn check(r: &Request, payload: &[u8], error: u32, data: Option<&[u8]>, ro: bool, m: &mut [u8]) {
    let known = [0, wire::EPERM, wire::EIO, wire::EINVAL, wire::ENOSPC, wire::EOVERFLOW];
    assert!(known.contains(&error), "error {error} for {r:?}");
    let ranged = matches!(
        r.command,
        wire::CMD_READ | wire::CMD_WRITE | wire::CMD_TRIM | wire::CMD_WRITE_ZEROES
    );
    let (offset, len) = (r.offset_bytes, u64::from(r.len_bytes));
    let range_bad = offset.checked_add(len).is_none_or(|end| end > SIZE_BYTES as u64)
        || offset % 512 != 0
        || len % 512 != 0;
    let changes = matches!(r.command, wire::CMD_WRITE | wire::CMD_TRIM | wire::CMD_WRITE_ZEROES);
    let allowed = if r.command == wire::CMD_WRITE_ZEROES { 3 } else { 1 };
    let refused = (!ranged && r.command != wire::CMD_FLUSH)
        || (ranged && range_bad)
        || r.flags & !allowed != 0
        || (changes && ro)
        || (r.command != wire::CMD_TRIM && ranged && r.len_bytes > BLOCK_BYTES_MAX);
    if refused {
        assert!(error != 0, "accepted {r:?}");
    }
    if error != 0 || !ranged {
        return;
    }
    let range = offset as usize..(offset + len) as usize;
    match r.command {
        wire::CMD_READ => assert!(data == Some(&m[range]), "a read returns the last write"),
        wire::CMD_WRITE => m[range].copy_from_slice(payload),
        _ => m[range].fill(0), // WRITE_ZEROES, TRIM
    }
}
