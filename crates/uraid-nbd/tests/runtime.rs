//! The server over a real uraid array (RAID5 and RAID6 on memory members, two workers).
//! Goal: what NBD clients write is what they read, trims and zeroing read back as zeros,
//! array failures reach the client as EIO, and shutdown loses no acknowledged write.
//! Method: pipelined random requests checked against a model of the array's bytes.

mod common;

use common::*;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use uraid_core::Level;
use uraid_nbd::client::{Client, ClientError};
use uraid_nbd::{BlockBackend, wire};

#[test]
fn raid5_pipelined_random_requests_match_a_model() {
    let rt = Arc::new(runtime(Level::Raid5, 4, 64 * KIB, 2 * MIB));
    let size = rt.size_bytes() as usize;
    let (_server, _h, addr) = serve(rt.clone(), 3 * 64 * KIB as u32);
    let mut c = Client::connect_tcp_structured(addr, "").unwrap();
    assert_eq!(c.size_bytes(), size as u64);
    assert_eq!(c.block_sizes().preferred, 128 * KIB as u32, "192 KiB full stripe, rounded");
    let mut model = vec![0u8; size];
    let mut x = 12345u64;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for round in 0..20u64 {
        // A batch of non-overlapping writes in flight together, then their replies.
        let mut pending = HashSet::new();
        for slot in 0..8u64 {
            let region = size as u64 / 8;
            let len = (1 + next(96)) * 512;
            let at = slot * region + next((region - len) / 512) * 512;
            let data = pattern(round * 8 + slot, len as usize);
            let kind = next(4);
            let h = match kind {
                0 => c.send(wire::CMD_TRIM, wire::CMD_FLAG_FUA, at, len as u32, &[]),
                1 => c.send(wire::CMD_WRITE_ZEROES, 0, at, len as u32, &[]),
                _ => c.send(wire::CMD_WRITE, wire::CMD_FLAG_FUA, at, len as u32, &data),
            };
            let range = at as usize..(at + len) as usize;
            if kind < 2 {
                model[range].fill(0);
            } else {
                model[range].copy_from_slice(&data);
            }
            pending.insert(h.unwrap());
        }
        while !pending.is_empty() {
            let r = c.receive().unwrap();
            assert_eq!(r.error, 0, "round {round}");
            assert!(pending.remove(&r.handle), "a reply per request");
        }
        let at = next(size as u64 / 512 - 1024) * 512;
        let got = c.read(at, 1024 * 512).unwrap();
        assert_same(&got, &model[at as usize..at as usize + 1024 * 512], "random read");
    }
    c.flush().unwrap();
    let whole = rt.read_at(0, size).unwrap();
    assert_same(&whole, &model, "the array holds what the client was acknowledged");
}

#[test]
fn raid6_beyond_redundancy_is_eio_and_degraded_reads_still_work() {
    let rt = Arc::new(runtime(Level::Raid6, 6, 64 * KIB, 2 * MIB));
    let (_server, _h, addr) = serve(rt.clone(), 64 * KIB as u32);
    let mut c = Client::connect_tcp(addr, "uraid").unwrap();
    let data = pattern(9, 512 * KIB);
    c.write(0, &data, false).unwrap();
    rt.fail_member(1);
    rt.fail_member(4);
    assert_same(&c.read(0, data.len() as u32).unwrap(), &data, "two members failed");
    rt.fail_member(0);
    // Far from the write, whose stripes the stripe cache may still hold.
    match c.read(4 * MIB as u64, 64 * KIB as u32) {
        Err(ClientError::Nbd(e)) => assert_eq!(e, wire::EIO),
        Err(e) => panic!("three failed members of RAID6: expected EIO, got {e}"),
        Ok(d) => panic!("three failed members of RAID6: expected EIO, read {} bytes", d.len()),
    }
    let again = c.read(4 * MIB as u64, 512);
    assert!(matches!(again, Err(ClientError::Nbd(wire::EIO))), "the connection lives on");
}

#[test]
fn shutdown_drains_and_every_acknowledged_write_is_in_the_array() {
    let rt = Arc::new(runtime(Level::Raid5, 4, 64 * KIB, 4 * MIB));
    let (server, handle, addr) = serve(rt.clone(), 64 * KIB as u32);
    let mut c = Client::connect_tcp(addr, "").unwrap();
    let mut sent = HashMap::new();
    for i in 0..64u64 {
        let data = pattern(1000 + i, 64 * KIB);
        sent.insert(c.send(wire::CMD_WRITE, 0, i * 65536, 65536, &data).unwrap(), i);
    }
    let stopper = std::thread::spawn(move || handle.shutdown());
    let mut acked = Vec::new();
    while let Ok(r) = c.receive() {
        assert_eq!(r.error, 0);
        acked.push(sent[&r.handle]);
    }
    stopper.join().unwrap();
    assert_eq!(server.stats().connections_active, 0, "every connection ended");
    assert!(!acked.is_empty(), "writes sent before the shutdown were read and answered");
    for i in acked {
        let got = rt.read_at(i * 65536, 64 * KIB).unwrap();
        assert_same(&got, &pattern(1000 + i, 64 * KIB), "an acknowledged write");
    }
    assert!(Client::connect_tcp(addr, "").is_err(), "no longer accepting");
}

#[test]
fn runtime_backend_maps_its_errors() {
    let rt = runtime(Level::Raid5, 3, 64 * KIB, MIB);
    let (tx, rx) = std::sync::mpsc::channel();
    let end = rt.size_bytes();
    let op = uraid_nbd::BackendOp::Read { offset_bytes: end, len_bytes: 512 };
    BlockBackend::submit(&rt, op, Box::new(move |r| tx.send(r).unwrap()));
    let err = rx.recv().unwrap().unwrap_err();
    assert_eq!(err, uraid_nbd::BackendError::OutOfRange { offset_bytes: end, len_bytes: 512 });
}

/// Goal: requests spanning several rows (so several workers) move between the socket and the
/// engines in the runtime's segments, with no copy to cut or join them, and read back whole,
/// over simple and structured replies. Method: 1 MiB and 700 KiB writes at row-aligned and
/// unaligned offsets, read back both ways; `split_bytes_copied` must stay 0.
#[test]
fn requests_spanning_rows_are_moved_in_segments_without_copies() {
    let rt = Arc::new(runtime(Level::Raid5, 5, 64 * KIB, 2 * MIB));
    let (_server, _h, addr) = serve(rt.clone(), 256 * KIB as u32);
    let mut simple = Client::connect_tcp(addr, "").unwrap();
    let mut structured = Client::connect_tcp_structured(addr, "").unwrap();
    for (i, (at, len)) in [(0, MIB), (3 * 256 * KIB + 4096, 700 * KIB)].into_iter().enumerate() {
        assert!(rt.segment_bytes(at as u64, len as u64).len() >= 3, "spans rows");
        let data = pattern(40 + i as u64, len);
        simple.write(at as u64, &data, i == 1).unwrap();
        assert_same(&simple.read(at as u64, len as u32).unwrap(), &data, "simple reply");
        assert_same(&structured.read(at as u64, len as u32).unwrap(), &data, "structured");
    }
    assert_eq!(rt.stats().split_bytes_copied, 0, "nothing cut or joined by copying");
}

/// Goal: large write payloads (read from the socket around the reader's read-ahead buffer,
/// the header after each alone) and small ones pipelined together stay in step. Method: rounds
/// of writes of mixed sizes in flight at once, some ending mid read-ahead, then every reply and
/// a read-back of each against what was sent.
#[test]
fn large_and_small_pipelined_writes_stay_in_step() {
    let rt = Arc::new(runtime(Level::Raid5, 4, 64 * KIB, 4 * MIB));
    let (_server, _h, addr) = serve(rt.clone(), 256 * KIB as u32);
    let mut c = Client::connect_tcp(addr, "").unwrap();
    let lens = [MIB, 200 * KIB + 512, 4 * KIB, 128 * KIB, 512, 300 * KIB, 129 * KIB, 8 * KIB];
    let mut written = Vec::new();
    for round in 0..4u64 {
        let mut pending = HashSet::new();
        let mut at = round * 2 * MIB as u64 + 512;
        for (i, &len) in lens.iter().enumerate() {
            let data = pattern(round * 100 + i as u64, len);
            pending.insert(c.send(wire::CMD_WRITE, 0, at, len as u32, &data).unwrap());
            written.push((at, data));
            at += len as u64 + 512;
        }
        while !pending.is_empty() {
            let r = c.receive().unwrap();
            assert_eq!(r.error, 0, "round {round}");
            assert!(pending.remove(&r.handle), "a reply per request");
        }
    }
    for (at, data) in &written {
        assert_same(&c.read(*at, data.len() as u32).unwrap(), data, "read back");
    }
}

/// Goal: a client that stops reading its replies stalls only itself. Replies are sent by the
/// workers that finish the requests, never waiting on a socket; what a full socket will not
/// take goes to that connection's backlog thread. Method: one client pipelines 24 MiB of
/// reads (far more than socket buffers hold) and reads nothing; meanwhile another client's
/// writes and reads on the same workers complete; then the first reads every reply, each
/// with the right data.
#[test]
fn a_client_not_reading_its_replies_stalls_only_itself() {
    let rt = Arc::new(runtime(Level::Raid5, 5, 64 * KIB, 4 * MIB));
    let (_server, _h, addr) = serve(rt.clone(), 256 * KIB as u32);
    let data = pattern(77, 4 * MIB);
    rt.write_at(0, &data).unwrap();
    let mut stalled = Client::connect_tcp_structured(addr, "").unwrap();
    let mut handles = HashMap::new();
    for i in 0..24u64 {
        let at = (i % 4) * MIB as u64;
        handles.insert(stalled.send(wire::CMD_READ, 0, at, MIB as u32, &[]).unwrap(), at);
    }
    // On its own thread, so that a worker stuck on the stalled socket fails the test in time
    // instead of hanging it.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut other = Client::connect_tcp(addr, "").unwrap();
        for i in 0..16u64 {
            let (at, more) = (8 * MIB as u64 + i * 256 * KIB as u64, pattern(100 + i, 256 * KIB));
            other.write(at, &more, i % 4 == 0).unwrap();
            assert_same(&other.read(at, more.len() as u32).unwrap(), &more, "beside a stalled one");
        }
        done.send(()).unwrap();
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("another client is served while one reads none of its replies");
    for _ in 0..24 {
        let r = stalled.receive().unwrap();
        assert_eq!(r.error, 0);
        let at = handles.remove(&r.handle).expect("a reply per request") as usize;
        assert_same(&r.data, &data[at..at + MIB], "a read answered while stalled");
    }
    assert!(handles.is_empty());
}
