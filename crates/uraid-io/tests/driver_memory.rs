//! The driver on memory members. Goal: the driver loop performs exactly the member I/Os the
//! engine asks for, with the right buffers, and reports them back. Method: write patterns
//! through a RAID5 array, read them back, and compare every member counter with the count the
//! engine's plan implies (full-stripe write: no reads; 4 KiB update: 2 reads + 2 writes).

use uraid_core::array::{Array, ArrayConfig, ReqId};
use uraid_core::{Geometry, Level, Sector};
use uraid_io::{CountersSnapshot, Driver, MediaAccess, Member, MemoryMember};

const MEMBER_BYTES: usize = 1 << 20;
const CHUNK_BYTES: usize = 64 << 10;

fn raid5(disks: usize) -> Array {
    let geometry = Geometry::new(Level::Raid5, Level::Raid5.default_layout(), disks, 64 << 10);
    let cfg = ArrayConfig {
        geometry: geometry.unwrap(),
        stripe_size_bytes: 4096,
        stripe_cache_size: 64,
        member_sectors: (MEMBER_BYTES / 512) as u64,
    };
    Array::new(cfg).unwrap()
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn memory_driver(disks: usize) -> Driver<MemoryMember> {
    let members =
        (0..disks).map(|i| Box::new(MemoryMember::new(&format!("mem{i}"), MEMBER_BYTES))).collect();
    Driver::new(members)
}

fn write<M: Member + ?Sized>(d: &mut Driver<M>, a: &mut Array, sector: u64, data: Vec<u8>) {
    a.submit_write(ReqId(sector), Sector(sector), data);
    d.run_until_idle(a).unwrap();
    for (_, r, _) in a.take_completed() {
        r.unwrap();
    }
}

fn read<M: Member + ?Sized>(d: &mut Driver<M>, a: &mut Array, sector: u64, len: usize) -> Vec<u8> {
    a.submit_read(ReqId(sector), Sector(sector), vec![0; len]);
    d.run_until_idle(a).unwrap();
    let mut done = a.take_completed();
    assert_eq!(done.len(), 1);
    let (_, r, buf) = done.pop().unwrap();
    r.unwrap();
    buf
}

fn delta(after: CountersSnapshot, before: CountersSnapshot) -> (u64, u64, u64, u64) {
    (
        after.read_ios - before.read_ios,
        after.write_ios - before.write_ios,
        after.read_bytes - before.read_bytes,
        after.write_bytes - before.write_bytes,
    )
}

#[test]
fn full_stripe_write_and_read_back_with_exact_counts() {
    let mut a = raid5(4);
    let mut d = memory_driver(4);
    let stripe = 3 * CHUNK_BYTES;
    let data = pattern(1, 2 * stripe);
    write(&mut d, &mut a, 0, data.clone());
    let t = d.counters_total();
    assert_eq!((t.read_ios, t.read_bytes), (0, 0), "a full-stripe write reads nothing");
    assert_eq!(t.write_bytes, 2 * 4 * CHUNK_BYTES as u64, "data and parity, once each");
    for c in d.counters() {
        assert_eq!(c.write_bytes, 2 * CHUNK_BYTES as u64, "every member gets one chunk a stripe");
        assert_eq!((c.errors, c.flushes, c.discards), (0, 0, 0));
    }
    let before = d.counters_total();
    assert_eq!(read(&mut d, &mut a, 0, data.len()), data);
    // A healthy read bypasses the cache: one member read per chunk, nothing else, and the
    // driver merges a member's contiguous chunks: members 0 and 1 hold data in both stripes
    // (P is on member 3, then 2), so 2 + 2 + 1 + 1 chunks are 4 member reads.
    assert_eq!(delta(d.counters_total(), before), (4, 0, data.len() as u64, 0));
}

#[test]
fn small_update_is_two_reads_two_writes_and_lands_on_the_media() {
    let mut a = raid5(4);
    let mut d = memory_driver(4);
    write(&mut d, &mut a, 0, pattern(2, 3 * CHUNK_BYTES));
    // A fresh engine over the same members, so that nothing is cached.
    let mut a = raid5(4);
    let before = d.counters_total();
    let update = pattern(3, 4096);
    write(&mut d, &mut a, 8, update.clone());
    assert_eq!(delta(d.counters_total(), before), (2, 2, 8192, 8192), "rmw: old data and P");
    // Array sector 8 is in chunk 0: member 0, byte 4096 of its data area.
    let mut on_media = vec![0; 4096];
    d.members()[0].read_media(4096, &mut on_media).unwrap();
    assert_eq!(on_media, update);
    let mut expect = pattern(2, 3 * CHUNK_BYTES);
    expect[4096..8192].copy_from_slice(&update);
    assert_eq!(read(&mut d, &mut a, 0, expect.len()), expect);
}

#[test]
fn data_offset_shifts_every_member_io() {
    let mut a = raid5(3);
    let members: Vec<Box<dyn Member>> = (0..3)
        .map(|i| Box::new(MemoryMember::new(&format!("m{i}"), MEMBER_BYTES + 8192)) as Box<_>)
        .collect();
    let mut d = Driver::new(members).with_data_offset_bytes(8192);
    let data = pattern(4, 2 * CHUNK_BYTES);
    write(&mut d, &mut a, 0, data.clone());
    assert_eq!(read(&mut d, &mut a, 0, data.len()), data);
    assert_eq!(d.counters_total().errors, 0);
}

#[test]
fn many_requests_in_flight_at_once() {
    let mut a = raid5(4);
    let mut d = memory_driver(4);
    let bytes = (a.size_sectors() * 512) as usize;
    let data = pattern(5, bytes);
    for (i, piece) in data.chunks(48 << 10).enumerate() {
        let sector = (i * (48 << 10) / 512) as u64;
        a.submit_write(ReqId(sector), Sector(sector), piece.to_vec());
    }
    d.run_until_idle(&mut a).unwrap();
    assert!(a.take_completed().into_iter().all(|(_, r, _)| r.is_ok()));
    for (i, piece) in data.chunks(12 << 10).enumerate() {
        let sector = (i * (12 << 10) / 512) as u64;
        a.submit_read(ReqId(sector), Sector(sector), vec![0; piece.len()]);
    }
    d.run_until_idle(&mut a).unwrap();
    for (ReqId(sector), r, buf) in a.take_completed() {
        r.unwrap();
        let at = (sector * 512) as usize;
        assert_eq!(buf, data[at..at + buf.len()], "read at sector {sector}");
    }
    let json = serde_json::to_string(&d.counters()[0]).unwrap();
    assert!(json.contains("\"read_ios\":"), "{json}");
}
