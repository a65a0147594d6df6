//! Block status (NBD_CMD_BLOCK_STATUS with the base:allocation metadata context). Goal: the
//! context is listed and selected as the protocol says (structured replies first, the export's
//! name, unknown queries ignored, malformed options refused), block status is refused unless
//! it was selected or when its range is bad, and answered with descriptors that start at the
//! offset, follow the data, stay within the request and within the reply's cap. Method: raw
//! options and the blocking client against the memory backend, which calls 4 KiB blocks of
//! zeros zeros.

mod common;

use common::*;
use uraid_nbd::client::{Client, ClientError};
use uraid_nbd::{BackendOp, BlockBackend, wire};

/// The replies to one option up to its final one: (type, data) each.
fn replies(s: &mut std::net::TcpStream) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        let (_, kind, data) = option_reply(s);
        out.push((kind, data));
        if kind != wire::REP_META_CONTEXT {
            return out;
        }
    }
}

fn context(id: u32) -> (u32, Vec<u8>) {
    let mut data = id.to_be_bytes().to_vec();
    data.extend_from_slice(b"base:allocation");
    (wire::REP_META_CONTEXT, data)
}

#[test]
fn base_allocation_is_listed_and_selected_as_the_protocol_says() {
    let (_b, _s, _h, addr) = memory_server(MIB);
    let mut s = raw_greeted(addr);
    let ack = (wire::REP_ACK, Vec::new());
    send_option(&mut s, wire::OPT_LIST_META_CONTEXT, &wire::meta_context_request("", &[]));
    assert_eq!(replies(&mut s), vec![context(0), ack.clone()], "no query: everything");
    send_option(
        &mut s,
        wire::OPT_LIST_META_CONTEXT,
        &wire::meta_context_request("uraid", &["base:"]),
    );
    assert_eq!(replies(&mut s), vec![context(0), ack.clone()], "base: lists the namespace");
    send_option(
        &mut s,
        wire::OPT_SET_META_CONTEXT,
        &wire::meta_context_request("", &["base:allocation"]),
    );
    let refused = replies(&mut s);
    assert_eq!(refused[0].0, wire::REP_ERR_INVALID, "SET before structured replies");
    send_option(&mut s, wire::OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(option_reply(&mut s).1, wire::REP_ACK);
    send_option(
        &mut s,
        wire::OPT_SET_META_CONTEXT,
        &wire::meta_context_request("", &["qemu:x", "base:"]),
    );
    assert_eq!(replies(&mut s), vec![ack.clone()], "unknown and wildcard queries select none");
    send_option(
        &mut s,
        wire::OPT_SET_META_CONTEXT,
        &wire::meta_context_request("other", &["base:allocation"]),
    );
    assert_eq!(replies(&mut s)[0].0, wire::REP_ERR_UNKNOWN, "another export");
    let mut bad = wire::meta_context_request("", &["base:allocation"]);
    bad.pop();
    send_option(&mut s, wire::OPT_SET_META_CONTEXT, &bad);
    assert_eq!(replies(&mut s)[0].0, wire::REP_ERR_INVALID, "a query cut short");
    let both = ["qemu:dirty-bitmap:a", "base:allocation"];
    send_option(&mut s, wire::OPT_SET_META_CONTEXT, &wire::meta_context_request("uraid", &both));
    assert_eq!(replies(&mut s), vec![context(wire::CONTEXT_ALLOCATION_ID), ack]);
    send_option(&mut s, wire::OPT_ABORT, &[]);
    assert_eq!(option_reply(&mut s).1, wire::REP_ACK);
    still_serves(addr, 5);
}

fn nbd_error<T: std::fmt::Debug>(r: Result<T, ClientError>) -> u32 {
    match r {
        Err(ClientError::Nbd(e)) => e,
        other => panic!("expected an NBD error reply, got {other:?}"),
    }
}

const ZERO: u32 = wire::STATE_ZERO;

#[test]
fn block_status_follows_the_data_and_refuses_what_it_must() {
    let (_b, server, _h, addr) = memory_server(MIB);
    let mut c = Client::connect_tcp_allocation(addr, "").unwrap();
    assert_eq!(c.allocation_id(), Some(wire::CONTEXT_ALLOCATION_ID));
    c.write(8192, &pattern(1, 8192), false).unwrap();
    let got = c.block_status(0, 64 * KIB as u32, false).unwrap();
    assert_eq!(got, vec![(8192, ZERO), (8192, 0), (49152, ZERO)]);
    assert_eq!(c.block_status(4096, 4096, false).unwrap(), vec![(4096, ZERO)]);
    assert_eq!(c.block_status(0, 64 * KIB as u32, true).unwrap(), vec![(8192, ZERO)], "REQ_ONE");
    assert_eq!(c.block_status(10240, 2048, true).unwrap(), vec![(2048, 0)], "within a block");
    let end = c.size_bytes();
    assert_eq!(nbd_error(c.block_status(end - 4096, 8192, false)), wire::EINVAL, "past the end");
    assert_eq!(nbd_error(c.block_status(0, 0, false)), wire::EINVAL, "no length");
    assert_eq!(nbd_error(c.block_status(100, 512, false)), wire::EINVAL, "unaligned");
    let h = c.send(wire::CMD_BLOCK_STATUS, wire::CMD_FLAG_NO_HOLE, 0, 4096, &[]).unwrap();
    let reply = c.receive().unwrap();
    assert_eq!((reply.handle, reply.error), (h, wire::EINVAL), "a flag it does not take");
    c.trim(8192, 8192).unwrap();
    assert_eq!(c.block_status(0, 64 * KIB as u32, false).unwrap(), vec![(65536, ZERO)]);
    assert_eq!(server.stats().block_status, 5, "answered ones counted");

    // Without the context selected, refused; the connection goes on.
    let mut plain = Client::connect_tcp_structured(addr, "").unwrap();
    let h = plain.send(wire::CMD_BLOCK_STATUS, 0, 0, 4096, &[]).unwrap();
    let reply = plain.receive().unwrap();
    assert_eq!((reply.handle, reply.error), (h, wire::EINVAL));
    plain.flush().unwrap();
    still_serves(addr, 6);
}

/// A range of many small extents is answered for its start, at most 16,384 descriptors, and
/// asked again from where that ended it goes on.
#[test]
fn a_fragmented_range_is_answered_in_capped_replies() {
    let size = 128 * MIB;
    let (backend, _s, _h, addr) = memory_server(size);
    let mut data = vec![0u8; size];
    for block in data.chunks_mut(8192) {
        block[..4096].fill(0xa5);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    backend.submit(
        BackendOp::Write { offset_bytes: 0, buf: data, fua: false },
        Box::new(move |r| {
            tx.send(r.map(drop)).unwrap();
        }),
    );
    rx.recv().unwrap().unwrap();
    let mut c = Client::connect_tcp_allocation(addr, "uraid").unwrap();
    let first = c.block_status(0, (64 * MIB) as u32 + 4096, false).unwrap();
    assert_eq!(first.len(), 16 << 10, "capped");
    assert!(first.iter().enumerate().all(|(i, d)| *d == (4096, if i % 2 == 0 { 0 } else { ZERO })));
    let covered: u64 = first.iter().map(|d| u64::from(d.0)).sum();
    assert_eq!(covered, 64 * MIB as u64);
    let next = c.block_status(covered, 4096, false).unwrap();
    assert_eq!(next, vec![(4096, 0)], "asked again from where it ended");
}
