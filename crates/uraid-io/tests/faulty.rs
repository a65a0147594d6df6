//! The fault wrapper. Goal: each injected fault fails exactly the I/Os it names, and a power
//! cut leaves the medium as a real disk would. Method: drive a `Faulty<MemoryMember>` by hand
//! and inspect the memory underneath; then run RAID5 over one faulty member and check the array
//! still returns the right data.

use uraid_core::array::{Array, ArrayConfig, ReqId};
use uraid_core::{DiskIndex, Geometry, Level, Sector};
use uraid_io::{
    Driver, Faulty, IoCompletion, IoFailure, IoRequest, Member, MemoryMember, PowerCutReport,
};

const MEMBER_BYTES: usize = 1 << 20;

fn faulty(seed: u64) -> Faulty<MemoryMember> {
    Faulty::new(MemoryMember::new("faulty", MEMBER_BYTES), seed)
}

/// Submits one I/O and reaps it; returns whether it succeeded.
fn one(m: &mut Faulty<MemoryMember>, req: IoRequest) -> Result<(), IoFailure> {
    // SAFETY: the caller's buffer outlives this call, which reaps the I/O before returning.
    unsafe { m.submit(req) };
    m.flush_submissions().unwrap();
    let mut out = Vec::new();
    m.reap(&mut out, true).unwrap();
    assert_eq!(out.len(), 1);
    out.pop().unwrap().result
}

fn media(m: &Faulty<MemoryMember>, offset: usize, len: usize) -> &[u8] {
    &m.inner().bytes()[offset..offset + len]
}

#[test]
fn reads_and_writes_fail_at_their_ranges_only() {
    let mut m = faulty(1);
    m.fail_writes(4096..8192);
    m.fail_reads(65536..66048);
    let data = vec![0x5a; 4096];
    assert_eq!(one(&mut m, IoRequest::write(1, 0, &data, false)), Ok(()));
    let failed = one(&mut m, IoRequest::write(2, 6144, &data, false));
    assert!(matches!(failed, Err(IoFailure::Injected(_))), "{failed:?}");
    assert!(media(&m, 6144, 4096).iter().all(|&b| b == 0), "a failed write changes nothing");
    let mut buf = vec![0; 4096];
    assert_eq!(one(&mut m, IoRequest::read(3, 0, &mut buf)), Ok(()));
    assert_eq!(buf, data);
    assert!(one(&mut m, IoRequest::read(4, 64512, &mut buf)).is_err(), "overlaps the range");
    assert_eq!(one(&mut m, IoRequest::read(5, 66048, &mut buf)), Ok(()), "just past it");
    let c = m.counters().snapshot();
    assert_eq!((c.write_ios, c.read_ios, c.errors), (2, 3, 2));
}

#[test]
fn fail_after_n_and_whole_member() {
    let mut m = faulty(2);
    let mut buf = vec![0; 512];
    m.fail_after_ios(3);
    let results: Vec<bool> =
        (0..5).map(|i| one(&mut m, IoRequest::read(i, 0, &mut buf)).is_ok()).collect();
    assert_eq!(results, [true, true, true, false, false]);
    m.heal();
    assert!(one(&mut m, IoRequest::read(9, 0, &mut buf)).is_ok());
    m.fail_member();
    assert!(one(&mut m, IoRequest::flush(10)).is_err());
    assert!(one(&mut m, IoRequest::write(11, 0, &buf, true)).is_err());
    assert_eq!(m.counters().snapshot().errors, 4);
}

/// A flushed write, an unflushed write over it, a FUA write, and a write in flight; then the
/// power goes. Returns the report, the torn write's completion and the medium.
fn crash(seed: u64) -> (PowerCutReport, Vec<IoCompletion>, Vec<u8>) {
    let mut m = faulty(seed);
    let (a, b, c, d) = (vec![0xaa; 4096], vec![0xbb; 4096], vec![0xcc; 4096], vec![0xdd; 8192]);
    assert_eq!(one(&mut m, IoRequest::write(1, 0, &a, false)), Ok(()));
    assert_eq!(one(&mut m, IoRequest::flush(2)), Ok(()));
    assert_eq!(one(&mut m, IoRequest::write(3, 0, &b, false)), Ok(()));
    assert_eq!(one(&mut m, IoRequest::write(4, 65536, &c, true)), Ok(()));
    assert_eq!(media(&m, 0, 4096), &b[..], "before the cut the device shows the latest data");
    // SAFETY: `d` outlives the power cut and the reap below.
    unsafe { m.submit(IoRequest::write(5, 131_072, &d, false)) };
    let report = m.power_cut().unwrap();
    let mut out = Vec::new();
    m.reap(&mut out, true).unwrap();
    (report, out, m.inner().bytes().to_vec())
}

#[test]
fn power_cut_drops_unflushed_writes_and_tears_in_flight_ones() {
    let (report, lost, disk) = crash(7);
    let expect = PowerCutReport { dropped_writes: 1, torn_writes: 1, sectors_restored: 8 + 16 };
    assert_eq!(report, expect);
    assert_eq!(lost, [IoCompletion { tag: 5, result: Err(IoFailure::PowerLost) }]);
    assert!(disk[..4096].iter().all(|&x| x == 0xaa), "the unflushed write is gone");
    assert!(disk[65536..69632].iter().all(|&x| x == 0xcc), "the FUA write survived");
    // The torn write: some whole sectors of it landed, the rest holds what was there before.
    let torn = &disk[131_072..139_264];
    let kept = torn.iter().take_while(|&&x| x == 0xdd).count();
    assert_eq!(kept % 512, 0, "torn at a sector boundary");
    assert!(torn[kept..].iter().all(|&x| x == 0), "after the tear, the old contents");
    // The same seed tears the same way; across seeds, some tear in the middle.
    assert_eq!(crash(7).2, disk);
    let middles = (0..20).filter(|&s| {
        let torn = &crash(s).2[131_072..139_264];
        let kept = torn.iter().take_while(|&&x| x == 0xdd).count();
        kept > 0 && kept < 8192
    });
    assert!(middles.count() > 0, "tears land inside writes");
}

#[test]
fn flush_covers_only_writes_completed_before_it() {
    let mut m = faulty(3);
    let (a, b) = (vec![0x11; 512], vec![0x22; 512]);
    assert_eq!(one(&mut m, IoRequest::write(1, 0, &a, false)), Ok(()));
    // A flush submitted before the second write completes does not cover it.
    // SAFETY: `a` and `b` outlive the reap below.
    unsafe {
        m.submit(IoRequest::flush(2));
        m.submit(IoRequest::write(3, 512, &b, false));
    }
    let mut out = Vec::new();
    m.reap(&mut out, true).unwrap();
    assert_eq!(out.len(), 2);
    let report = m.power_cut().unwrap();
    assert_eq!((report.dropped_writes, report.torn_writes), (1, 0));
    assert_eq!(media(&m, 0, 512), &a[..]);
    assert!(media(&m, 512, 512).iter().all(|&x| x == 0));
}

#[test]
fn raid5_rebuilds_a_read_error_from_parity_and_fails_the_member_only_when_it_repeats() {
    for rewrite_fails in [false, true] {
        read_error_case(rewrite_fails);
    }
}

fn read_error_case(rewrite_fails: bool) {
    let geometry = Geometry::new(Level::Raid5, Level::Raid5.default_layout(), 4, 64 << 10);
    let cfg = ArrayConfig {
        geometry: geometry.unwrap(),
        stripe_size_bytes: 4096,
        stripe_cache_size: 64,
        member_sectors: (MEMBER_BYTES / 512) as u64,
    };
    let members: Vec<Box<Faulty<MemoryMember>>> = (0..4)
        .map(|i| Box::new(Faulty::new(MemoryMember::new(&format!("d{i}"), MEMBER_BYTES), 0)))
        .collect();
    let mut d = Driver::new(members);
    let mut a = Array::new(cfg.clone()).unwrap();
    let bytes = (a.size_sectors() * 512) as usize;
    let data: Vec<u8> = (0..bytes).map(|i| (i * 7 % 251) as u8).collect();
    // Written with the member whole, then the faults go in.
    a.submit_write(ReqId(0), Sector(0), data.clone());
    d.run_until_idle(&mut a).unwrap();
    assert!(a.take_completed().into_iter().all(|(_, r, _)| r.is_ok()));
    let errors_before = d.counters()[2].errors;
    d.member_mut(2).fail_reads(8192..12288);
    if rewrite_fails {
        d.member_mut(2).fail_writes(8192..12288);
    }
    // A fresh engine (nothing cached) reads everything back through the failing member.
    let mut a = Array::new(cfg).unwrap();
    a.submit_read(ReqId(1), Sector(0), vec![0; bytes]);
    d.run_until_idle(&mut a).unwrap();
    let (_, result, buf) = a.take_completed().pop().unwrap();
    result.unwrap();
    assert!(buf == data, "the array returns the data, rebuilt from parity where it must");
    // The driver merges member 2's contiguous chunks into one read; that read fails first, then
    // the chunk holding the bad range when its parts are retried one by one.
    if rewrite_fails {
        // Merged read, direct read, re-read through the stripe head, then the rewrite: all fail.
        assert_eq!(a.failed_members(), vec![DiskIndex(2)]);
        assert_eq!(d.counters()[2].errors - errors_before, 4);
    } else {
        // md's read-error correction: rebuilt, rewritten, the member stays in the array.
        assert_eq!(a.failed_members(), vec![]);
        assert_eq!(a.stats().read_errors_corrected, 1);
        let errors = d.counters()[2].errors - errors_before;
        assert_eq!(errors, 3, "merged read, the direct read of its part, then the re-read");
    }
}
