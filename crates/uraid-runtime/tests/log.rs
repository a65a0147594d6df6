//! Goal: the partial parity log wired into the runtime: each worker writes its own ring of the
//! area (ring `i` for worker `i`, at fixed places whatever the worker count), no ring spills
//! into another or into the data, and a partial-stripe write leaves a live entry on its
//! parity member's ring. Method: RAID5 of 4 memory members with the data 1 MiB in and the
//! area before it; full rows written and flushed, then one 4 KiB write in each of four rows
//! (one per worker), and the rings read back with `uraid_core::ppl`.

mod common;

use common::{KIB, assert_same, config, pattern, with_workers};
use uraid_core::ppl::{entries_to_replay, scan_ring};
use uraid_core::{DiskIndex, Level, StripeNumber};
use uraid_runtime::{LogSetup, Runtime, RuntimeError, SharedMemorySource};

const DATA_OFFSET: u64 = 1 << 20;
const MEMBER_BYTES: usize = 2 << 20;
const CHUNK_BYTES: usize = 64 * KIB;

fn setup(rings: usize) -> LogSetup {
    LogSetup {
        offset_bytes: 64 << 10,
        bytes: 512 << 10,
        rings,
        uuid: [9; 16],
        epoch: 5,
        rotational: false,
    }
}

#[test]
fn each_worker_logs_to_its_own_ring() {
    let mut cfg = with_workers(config(Level::Raid5, 4, CHUNK_BYTES, MEMBER_BYTES), 4);
    cfg.data_offset_bytes = DATA_OFFSET;
    let g = cfg.array.geometry.clone();
    let source = SharedMemorySource::new(4, DATA_OFFSET as usize + MEMBER_BYTES);
    let log = setup(8);
    let rt = Runtime::start_with_log(&cfg, Some(&log), &source).unwrap();
    assert_eq!(rt.workers(), 4);
    let row = 3 * CHUNK_BYTES;
    let first = pattern(1, 8 * row);
    rt.write_at(0, &first).unwrap();
    rt.flush().unwrap();
    // One 4 KiB write into rows 0..4: rows go to workers round robin.
    let mut want = first.clone();
    for r in 0..4 {
        let at = r * row + 4096;
        let data = pattern(10 + r as u64, 4096);
        rt.write_at(at as u64, &data).unwrap();
        want[at..at + 4096].copy_from_slice(&data);
    }
    assert_same(&rt.read_at(0, want.len()).unwrap(), &want, "read back");
    let media = source.media();
    let ring = |m: usize, r: usize| {
        let mut b = vec![0u8; log.ring_bytes() as usize];
        media[m].read(log.ring_offset_bytes(r) as usize, &mut b);
        b
    };
    for r in 0..4usize {
        let p = g.stripe_map(StripeNumber(r as u64)).p_disk.unwrap().get();
        let scans: Vec<_> =
            (0..4).map(|m| scan_ring(&ring(m, r), [9; 16], DiskIndex(m as u16))).collect();
        let live = entries_to_replay(&scans);
        // The write is 4 KiB into the row: the second 4 KiB stripe head of each member.
        let sector = r as u64 * (CHUNK_BYTES as u64 / 512) + 8;
        assert!(
            live.iter().any(|e| e.member.get() == p && e.entry.member_sector == sector),
            "ring {r}: no live entry for member sector {sector} on member {p}: {:?}",
            live.iter().map(|e| (e.member.get(), e.entry.member_sector)).collect::<Vec<_>>()
        );
        assert!(live.iter().all(|e| e.epoch == 5), "the run's epoch");
    }
    for r in 4..8 {
        for m in 0..4 {
            assert!(ring(m, r).iter().all(|b| *b == 0), "ring {r} of member {m} is not in use");
        }
    }
    // Nothing of the log beyond its area: the bytes after it up to the data stay zero.
    let mut tail = vec![0u8; (DATA_OFFSET - log.offset_bytes - log.bytes) as usize];
    media[0].read((log.offset_bytes + log.bytes) as usize, &mut tail);
    assert!(tail.iter().all(|b| *b == 0));
    rt.shutdown().unwrap();
}

#[test]
fn workers_are_capped_at_the_rings_and_small_rings_refused() {
    let mut cfg = with_workers(config(Level::Raid6, 5, CHUNK_BYTES, MEMBER_BYTES), 4);
    cfg.data_offset_bytes = DATA_OFFSET;
    let source = SharedMemorySource::new(5, DATA_OFFSET as usize + MEMBER_BYTES);
    let rt = Runtime::start_with_log(&cfg, Some(&setup(2)), &source).unwrap();
    assert_eq!(rt.workers(), 2);
    rt.write_at(4096, &pattern(3, 4096)).unwrap();
    assert_eq!(rt.read_at(4096, 4096).unwrap(), pattern(3, 4096));
    rt.shutdown().unwrap();
    cfg.array.stripe_size_bytes = 64 * KIB as u64;
    let err = Runtime::start_with_log(&cfg, Some(&setup(8)), &source).err().unwrap();
    assert!(matches!(err, RuntimeError::LogTooSmall { .. }), "{err}");
}

/// Two workers take the stripes in turn, and each engine sees a sequential stream as every
/// other stripe (`PartialParityLogConfig::stride_stripes`): past each engine's first stripes
/// the stream writes under a range, with no log write and no reset of its own. Before the
/// stride every stripe logged a range of its own, and every fifth reset the log (a flush and
/// a header on every member): 192 member writes and 32 flushes here (a scratch build with
/// the stride left at 1), against 140 and 8 now, for 128 data writes.
#[test]
fn a_stream_over_two_workers_logs_a_range_not_every_stripe() {
    let mut cfg = with_workers(config(Level::Raid5, 4, CHUNK_BYTES, MEMBER_BYTES), 2);
    cfg.data_offset_bytes = DATA_OFFSET;
    let source = SharedMemorySource::new(4, DATA_OFFSET as usize + MEMBER_BYTES);
    let rt = Runtime::start_with_log(&cfg, Some(&setup(8)), &source).unwrap();
    assert_eq!(rt.workers(), 2);
    let row = 3 * CHUNK_BYTES;
    let stripes = MEMBER_BYTES / CHUNK_BYTES;
    let data = pattern(3, stripes * row);
    // Two rows a request, one request at a time: every stripe a whole-stripe batch.
    for (i, part) in data.chunks(2 * row).enumerate() {
        rt.write_at((i * 2 * row) as u64, part).unwrap();
    }
    let stats = rt.stats();
    assert_eq!(stats.array.stripe_batches, stripes as u64);
    let writes: u64 = stats.members.iter().map(|m| m.write_ios).sum();
    let flushes: u64 = stats.members.iter().map(|m| m.flushes).sum();
    let data_writes = 4 * stripes as u64;
    // Each engine: its first reset (a header per member) and its first two stripes' ranges
    // (a log write on each parity member), then nothing.
    assert!(writes <= data_writes + 2 * (4 + 2), "{writes} member writes for {data_writes}");
    assert!(flushes <= 2 * 4, "{flushes} member flushes: the first resets only");
    assert_same(&rt.read_at(0, data.len()).unwrap(), &data, "read back");
}
