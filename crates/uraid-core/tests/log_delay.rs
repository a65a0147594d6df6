//! A partial-stripe write that needs reads waits while other I/O is in flight (md's delayed
//! list), so that more writes may fill its stripe. The log's own writes and flushes hold back
//! only writes that run on into the next stripe (a stream's, which the next request fills)
//! and, while a flush waits for the log to retire, every write; a write that lies within its
//! stripe reads at once while a generation is in flight, and its entry joins the next one.

mod common;

use common::{CHUNK_64K as CHUNK, Mem, array, pattern, read, run};
use uraid_core::array::{Array, IoArea, MemberIo, MemberOp, PartialParityLogConfig, ReqId};
use uraid_core::{Level, Sector};

/// RAID5 x5: 4 data blocks of 64 KiB chunks per stripe, 512 array sectors a stripe.
fn logged_array() -> Array {
    let mut a = array(Level::Raid5, 5, CHUNK, 4096);
    let cfg = PartialParityLogConfig {
        ring_sectors: common::LOG_RING_SECTORS,
        uuid: [9; 16],
        epoch: 1,
        rotational: false,
    };
    a.enable_partial_parity_log(&cfg);
    a
}

fn drain(a: &mut Array) -> Vec<MemberIo> {
    std::iter::from_fn(|| a.next_io()).collect()
}

#[test]
fn a_write_within_its_stripe_reads_while_the_log_writes() {
    for flush_waits in [false, true] {
        let mut a = logged_array();
        let mut mem = Mem::new(5);
        // The log's first reset, out of the way.
        common::write(&mut a, &mut mem, 5 * 512, pattern(1, 4096));
        // A write to stripe 0 reads, then its generation's log write is held in flight.
        let first = pattern(2, 4096);
        a.submit_write(ReqId(1), Sector(0), first.clone());
        for io in drain(&mut a) {
            assert_eq!((io.op, io.area), (MemberOp::Read, IoArea::Data), "{io:?}");
            let ok = mem.perform(&mut a, &io);
            a.complete_io(io.tag, ok);
        }
        let held = drain(&mut a);
        assert!(!held.is_empty() && held.iter().all(|io| io.area == IoArea::Log), "{held:?}");
        if flush_waits {
            a.submit_flush(ReqId(9));
        }
        // An 8 KiB write from the end of stripe 3 into stripe 4: held back.
        let spanning = pattern(3, 8192);
        a.submit_write(ReqId(2), Sector(4 * 512 - 8), spanning.clone());
        assert!(drain_reads(&mut a).is_empty(), "a stream's write waits for the next request");
        // A 4 KiB write within stripe 2 (member sector 256 of its members) reads at once,
        // unless a flush waits.
        let within = pattern(4, 4096);
        a.submit_write(ReqId(3), Sector(2 * 512), within.clone());
        let reads = drain_reads(&mut a);
        if flush_waits {
            assert!(reads.is_empty(), "while a flush waits every write is held: {reads:?}");
        } else {
            assert_eq!(reads.len(), 2, "an rmw of stripe 2's first block: {reads:?}");
            assert!(reads.iter().all(|io| io.sector.0 == 256), "{reads:?}");
        }
        for io in held.into_iter().chain(reads) {
            let ok = mem.perform(&mut a, &io);
            a.complete_io(io.tag, ok);
        }
        let done = run(&mut a, &mut mem);
        assert_eq!(done.len(), 3 + usize::from(flush_waits));
        assert!(done.iter().all(|d| d.1.is_ok()), "{done:?}");
        assert!(read(&mut a, &mut mem, 0, 4096) == first);
        assert!(read(&mut a, &mut mem, 4 * 512 - 8, 8192) == spanning);
        assert!(read(&mut a, &mut mem, 2 * 512, 4096) == within);
        common::assert_consistent(&mut a, &mut mem, 6);
    }
}

/// The member I/O the engine issues now; none may be a log write (those are held above).
fn drain_reads(a: &mut Array) -> Vec<MemberIo> {
    let ios = drain(a);
    assert!(ios.iter().all(|io| io.op == MemberOp::Read && io.area == IoArea::Data), "{ios:?}");
    ios
}
