//! The disk model on a manual clock. Goal: completions become visible exactly at their modelled
//! finish times. Method: submit I/Os at a fixed time, step the clock, and check which have
//! been reaped; then measure the presets' random IOPS and sequential bandwidth in simulated time.

use uraid_io::{
    Clock, DiskModel, IoCompletion, IoRequest, ManualClock, Member, MemoryMember, Throttled,
};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn throttled(model: DiskModel, clock: &ManualClock) -> Throttled<MemoryMember, ManualClock> {
    Throttled::new(MemoryMember::new("disk", 64 << 20), model, clock.clone())
}

fn tags(out: &[IoCompletion]) -> Vec<u64> {
    out.iter().map(|c| c.tag).collect()
}

#[test]
fn bandwidth_limit_spaces_sequential_completions() {
    // 100 MB/s, nothing else: four sequential 1 MB writes finish at 10, 20, 30 and 40 ms.
    let model =
        DiskModel { bandwidth_bytes_per_s: 100_000_000, iops_max: 0, latency_ns: 0, seek_ns: 0 };
    let clock = ManualClock::new();
    let mut d = throttled(model, &clock);
    let buf = vec![7u8; 1_000_000];
    for i in 0..4u64 {
        // SAFETY: `buf` outlives every reap below.
        unsafe { d.submit(IoRequest::write(i, i * 1_000_000, &buf, false)) };
    }
    d.flush_submissions().unwrap();
    let mut out = Vec::new();
    d.reap(&mut out, false).unwrap();
    assert!(out.is_empty(), "nothing finishes at time 0");
    clock.advance_ns(10 * MS - 1);
    d.reap(&mut out, false).unwrap();
    assert!(out.is_empty(), "not a nanosecond early");
    clock.advance_ns(1);
    d.reap(&mut out, false).unwrap();
    assert_eq!(tags(&out), [0]);
    clock.set_ns(35 * MS);
    d.reap(&mut out, false).unwrap();
    assert_eq!(tags(&out), [0, 1, 2]);
    d.reap(&mut out, true).unwrap();
    assert_eq!((tags(&out), clock.now_ns()), (vec![0, 1, 2, 3], 40 * MS), "waiting jumps time");
}

#[test]
fn iops_limit_and_latency() {
    // 1000 IOPS, 2 ms latency, 4096 MB/s: 4 KiB I/O k starts at k ms, holds the channel for
    // 1 us and finishes at k ms + 1 us + 2 ms.
    let model = DiskModel {
        bandwidth_bytes_per_s: 4_096_000_000,
        iops_max: 1000,
        latency_ns: 2 * MS,
        seek_ns: 0,
    };
    let clock = ManualClock::new();
    let mut d = throttled(model, &clock);
    let mut bufs = vec![vec![0u8; 4096]; 10];
    for (i, b) in bufs.iter_mut().enumerate() {
        // SAFETY: `bufs` outlives every reap below.
        unsafe { d.submit(IoRequest::read(i as u64, i as u64 * 4096, b)) };
    }
    d.flush_submissions().unwrap();
    let mut out = Vec::new();
    clock.set_ns(2 * MS + US);
    d.reap(&mut out, false).unwrap();
    assert_eq!(tags(&out), [0]);
    clock.set_ns(6 * MS + US);
    d.reap(&mut out, false).unwrap();
    assert_eq!(tags(&out), [0, 1, 2, 3, 4]);
    while d.in_flight() > 0 {
        d.reap(&mut out, true).unwrap();
    }
    assert_eq!((out.len() as u64, clock.now_ns()), (10, 11 * MS + US));
    assert_eq!(d.counters().snapshot().read_ios, 10);
}

/// Random 4 KiB reads and sequential 1 MiB reads on a preset, in simulated time; returns
/// (random IOPS, sequential MB/s).
fn measure(model: DiskModel) -> (f64, f64) {
    let clock = ManualClock::new();
    let mut d = throttled(model, &clock);
    let mut buf = vec![0u8; 1 << 20];
    let mut out = Vec::new();
    for i in 0..200u64 {
        let offset = (i * 7_919 % 16_000) * 4096; // scattered, never adjacent
        // SAFETY: one I/O at a time, reaped before `buf` is reused.
        unsafe { d.submit(IoRequest::read(i, offset, &mut buf[..4096])) };
        d.reap(&mut out, true).unwrap();
    }
    let iops = 200.0 / (clock.now_ns() as f64 / 1e9);
    let start = clock.now_ns();
    for i in 0..64u64 {
        // SAFETY: as above.
        unsafe { d.submit(IoRequest::read(1000 + i, (i + 1) << 20, &mut buf)) };
        d.reap(&mut out, true).unwrap();
    }
    let mb_s = (64u64 << 20) as f64 / ((clock.now_ns() - start) as f64 / 1e9) / 1e6;
    (iops, mb_s)
}

#[test]
fn presets_match_their_data_sheets() {
    let (iops, mb_s) = measure(DiskModel::hdd_7200());
    println!("hdd_7200: {iops:.0} random 4 KiB IOPS at queue depth 1, {mb_s:.0} MB/s sequential");
    assert!((150.0..=200.0).contains(&iops), "hdd random IOPS {iops}");
    assert!((190.0..=200.0).contains(&mb_s), "hdd sequential MB/s {mb_s}");
    let (iops, mb_s) = measure(DiskModel::nvme());
    println!("nvme: {iops:.0} random 4 KiB IOPS at queue depth 1, {mb_s:.0} MB/s sequential");
    assert!(iops > 10_000.0, "nvme IOPS {iops}");
    assert!(mb_s > 2_000.0, "nvme MB/s {mb_s}");
}

#[test]
fn driver_on_throttled_members_runs_in_simulated_time() {
    use uraid_core::array::{Array, ArrayConfig, ReqId};
    use uraid_core::{Geometry, Level, Sector};
    use uraid_io::Driver;
    // RAID5 of 4 modelled HDDs: a 3 MiB full-stripe write puts 1 MiB sequentially on each
    // member, so it takes one seek plus 1 MiB at 200 MB/s (5.5 + 5.24 ms) plus the latency.
    let clock = ManualClock::new();
    let members: Vec<_> = (0..4)
        .map(|i| {
            let mem = MemoryMember::new(&format!("hdd{i}"), 1 << 20);
            Box::new(Throttled::new(mem, DiskModel::hdd_7200(), clock.clone()))
        })
        .collect();
    let mut d = Driver::new(members);
    let geometry = Geometry::new(Level::Raid5, Level::Raid5.default_layout(), 4, 64 << 10);
    let cfg = ArrayConfig {
        geometry: geometry.unwrap(),
        stripe_size_bytes: 4096,
        stripe_cache_size: 256,
        member_sectors: 2048,
    };
    let mut a = Array::new(cfg).unwrap();
    let data: Vec<u8> = (0..3 << 20).map(|i: usize| (i % 253) as u8).collect();
    a.submit_write(ReqId(0), Sector(0), data.clone());
    d.run_until_idle(&mut a).unwrap();
    let elapsed_ms = clock.now_ns() as f64 / MS as f64;
    println!("3 MiB full-stripe write on 4 modelled HDDs: {elapsed_ms:.2} ms simulated");
    assert!((10.7..11.5).contains(&elapsed_ms), "{elapsed_ms} ms");
    a.submit_read(ReqId(1), Sector(0), vec![0; data.len()]);
    d.run_until_idle(&mut a).unwrap();
    let (_, r, buf) = a.take_completed().pop().unwrap();
    r.unwrap();
    assert!(buf == data);
}

/// The driver saves seeks on members whose disk seeks. 4 KiB sequential writes at queue depth
/// 1 on RAID5 of 4 modelled HDDs with the partial parity log: each is acknowledged once its log
/// entry is durable, so its writes in place share a turn with the next write's pre-reads, 4 KiB
/// further on. Sent reads first, every write cost two seeks on its data and parity members
/// (back to it, then on to the next read; 6.8 ms a write here). Sent in the order that
/// continues the head, at most one in two costs a seek (2.3 ms).
#[test]
fn sequential_writes_at_depth_1_seek_at_most_every_other_write() {
    use uraid_core::array::{Array, ArrayConfig, PartialParityLogConfig, ReqId};
    use uraid_core::{Geometry, Level, Sector};
    use uraid_io::Driver;
    let clock = ManualClock::new();
    let member_bytes = 4 << 20;
    let members: Vec<_> = (0..4)
        .map(|i| {
            let mem = MemoryMember::new(&format!("hdd{i}"), member_bytes + (1 << 20));
            Box::new(Throttled::new(mem, DiskModel::hdd_7200(), clock.clone()))
        })
        .collect();
    assert!(members[0].info().rotational, "a model that seeks is a rotational disk");
    let mut d = Driver::new(members).with_log_offset_bytes(member_bytes as u64);
    let geometry = Geometry::new(Level::Raid5, Level::Raid5.default_layout(), 4, 64 << 10);
    let cfg = ArrayConfig {
        geometry: geometry.unwrap(),
        stripe_size_bytes: 4096,
        stripe_cache_size: 256,
        member_sectors: member_bytes as u64 / 512,
    };
    let mut a = Array::new(cfg).unwrap();
    let log = PartialParityLogConfig {
        ring_sectors: 2048,
        uuid: [1; 16],
        epoch: 1,
        rotational: true,
        stride_stripes: 1,
    };
    a.enable_partial_parity_log(&log);
    // Past the log's first reset (a flush and a header on every member).
    a.submit_write(ReqId(0), Sector(0), vec![1; 4096]);
    d.run_until_idle(&mut a).unwrap();
    a.take_completed();
    let (start, writes) = (clock.now_ns(), 48u64);
    for i in 1..=writes {
        a.submit_write(ReqId(i), Sector(i * 8), vec![i as u8; 4096]);
        while a.take_completed().is_empty() {
            d.turn(&mut a, true).unwrap();
        }
    }
    d.run_until_idle(&mut a).unwrap();
    let per_write_ms = (clock.now_ns() - start) as f64 / writes as f64 / MS as f64;
    println!("4 KiB sequential writes at qd1 with the log: {per_write_ms:.2} ms each (simulated)");
    assert!(per_write_ms < 0.5 * 5.5 + 1.0, "{per_write_ms:.2} ms a write");
    for i in 1..=writes {
        a.submit_read(ReqId(1000 + i), Sector(i * 8), vec![0; 4096]);
        d.run_until_idle(&mut a).unwrap();
        let (_, r, buf) = a.take_completed().pop().unwrap();
        r.unwrap();
        assert!(buf.iter().all(|b| *b == i as u8), "write {i} reads back");
    }
}
