//! Writes of zeros (NBD_CMD_WRITE_ZEROES): where the client allows holes and the backend's
//! discard reads back as zeros, a discard (which frees what sparse members hold; with FUA, then
//! a flush); NO_HOLE writes zeros; a backend whose discard may leave old data gets written
//! zeros. Fast zeroing is not offered (the array's discard goes through its stripe heads, at
//! about the speed of writing), and a client that asks for it anyway gets EINVAL.
//! Method: a memory backend behind a recorder of the operations the server submits.

mod common;

use common::*;
use std::sync::{Arc, Mutex};
use uraid_nbd::client::Client;
use uraid_nbd::{BackendDone, BackendOp, BlockBackend, MemoryBackend, wire};

/// What the server submitted, by kind; `zeroing_discard` is what it says of its discards.
struct Recorder {
    inner: MemoryBackend,
    ops: Mutex<Vec<&'static str>>,
    zeroing_discard: bool,
}

impl Recorder {
    fn new(zeroing_discard: bool) -> Arc<Recorder> {
        let inner = MemoryBackend::new(4 * MIB, 64 * KIB as u32);
        Arc::new(Recorder { inner, ops: Mutex::new(Vec::new()), zeroing_discard })
    }

    fn take(&self) -> Vec<&'static str> {
        std::mem::take(&mut *self.ops.lock().unwrap())
    }
}

impl BlockBackend for Recorder {
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn preferred_block_bytes(&self) -> u32 {
        self.inner.preferred_block_bytes()
    }
    fn discard_zeroes(&self) -> bool {
        self.zeroing_discard
    }
    fn submit(&self, op: BackendOp, done: BackendDone) {
        let kind = match &op {
            BackendOp::Read { .. } | BackendOp::ReadInto { .. } => "read",
            BackendOp::Write { buf, .. } if buf.iter().all(|&b| b == 0) => "write-zeros",
            BackendOp::Write { .. } => "write",
            BackendOp::Flush => "flush",
            BackendOp::Discard { .. } => "discard",
        };
        self.ops.lock().unwrap().push(kind);
        self.inner.submit(op, done);
    }
}

/// NBD's fast zeroing (the export flag, the request flag), which the server does not offer.
const FLAG_SEND_FAST_ZERO: u16 = 1 << 11;
const CMD_FLAG_FAST_ZERO: u16 = 1 << 4;

/// One request with `flags`; its error (0: done).
fn zeroes(c: &mut Client, flags: u16, offset_bytes: u64, len_bytes: u32) -> u32 {
    let handle = c.send(wire::CMD_WRITE_ZEROES, flags, offset_bytes, len_bytes, &[]).unwrap();
    let reply = c.receive().unwrap();
    assert_eq!(reply.handle, handle);
    reply.error
}

fn filled(c: &mut Client, seed: u64) -> Vec<u8> {
    let data = pattern(seed, MIB);
    c.write(0, &data, false).unwrap();
    data
}

#[test]
fn zeros_that_may_leave_holes_are_discards() {
    let backend = Recorder::new(true);
    let (_server, _h, addr) = serve(backend.clone(), 64 * KIB as u32);
    let mut c = Client::connect_tcp(addr, "").unwrap();
    let flags = c.transmission_flags();
    assert_ne!(flags & wire::FLAG_SEND_TRIM, 0);
    assert_eq!(flags & FLAG_SEND_FAST_ZERO, 0, "no fast zeroing (see `Reader`): {flags:#x}");

    let data = filled(&mut c, 1);
    backend.take();
    assert_eq!(zeroes(&mut c, 0, 64 * KIB as u64, 128 * KIB as u32), 0);
    assert_eq!(backend.take(), ["discard"], "holes allowed: a discard");
    let fua = wire::CMD_FLAG_FUA;
    assert_eq!(zeroes(&mut c, fua, 768 * KIB as u64, 4 * KIB as u32), 0);
    assert_eq!(backend.take(), ["discard", "flush"], "FUA: the discard, then a flush");
    let no_hole = wire::CMD_FLAG_NO_HOLE;
    assert_eq!(zeroes(&mut c, no_hole, 896 * KIB as u64, 8 * KIB as u32), 0);
    assert_eq!(backend.take(), ["write-zeros"], "NO_HOLE: zeros written");
    let e = zeroes(&mut c, CMD_FLAG_FAST_ZERO, 0, 64 * KIB as u32);
    assert_eq!(e, wire::EINVAL, "fast zeroing was not offered");
    assert!(backend.take().is_empty(), "the refused request touched nothing");

    let mut want = data;
    for (at, len) in [(64, 128), (768, 4), (896, 8)] {
        want[at * KIB..(at + len) * KIB].fill(0);
    }
    assert_same(&c.read(0, MIB as u32).unwrap(), &want, "after the writes of zeros");
}

#[test]
fn a_discard_that_may_keep_data_never_stands_for_zeros() {
    let backend = Recorder::new(false);
    let (_server, _h, addr) = serve(backend.clone(), 64 * KIB as u32);
    let mut c = Client::connect_tcp(addr, "").unwrap();
    let mut want = filled(&mut c, 2);
    backend.take();
    assert_eq!(zeroes(&mut c, 0, 0, 64 * KIB as u32), 0);
    assert_eq!(backend.take(), ["write-zeros"]);
    want[..64 * KIB].fill(0);
    assert_same(&c.read(0, MIB as u32).unwrap(), &want, "after the write of zeros");
    assert!(matches!(c.trim(0, 4096), Ok(())), "trim itself still offered");
}
