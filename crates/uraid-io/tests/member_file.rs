//! File members on sparse temp files. Goal: many I/Os in flight through io_uring (or the
//! synchronous fallback where io_uring is unavailable), O_DIRECT with aligned and misaligned
//! buffers, and a RAID5 array on file members, all verified by reading back. io_uring-specific
//! assertions are skipped with a printed reason when the kernel or sandbox refuses io_uring.

use std::path::PathBuf;
use uraid_core::array::{Array, ArrayConfig, ReqId};
use uraid_core::{Geometry, Level, Sector};
use uraid_io::{
    AlignedBuf, Driver, FileMember, FileOptions, IoCompletion, IoFailure, IoOp, IoRequest,
    MediaAccess, Member,
};

const MEMBER_BYTES: u64 = 4 << 20;

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

/// A fresh directory for this test, on the first candidate filesystem that accepts O_DIRECT
/// (tmpfs may not); if none does, the first one, and the buffered fallback is what gets tested.
fn test_dir(name: &str) -> PathBuf {
    let candidates = [PathBuf::from(env!("CARGO_TARGET_TMPDIR")), "/var/tmp".into(), "/tmp".into()];
    let pid = std::process::id();
    for base in &candidates {
        let dir = base.join(format!("uraid-io-{name}-{pid}"));
        if std::fs::create_dir_all(&dir).is_err() {
            continue;
        }
        let probe = FileMember::create(&dir.join("probe"), 4096, FileOptions::default());
        if probe.is_ok_and(|m| m.is_direct()) {
            return dir;
        }
    }
    eprintln!("no candidate directory supports O_DIRECT: testing the buffered fallback");
    let dir = candidates[0].join(format!("uraid-io-{name}-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn reap_all(m: &mut FileMember) -> Vec<IoCompletion> {
    let mut out = Vec::new();
    while m.in_flight() > 0 {
        m.reap(&mut out, true).unwrap();
    }
    out
}

/// Writes `count` blocks of `block` bytes with all of them in flight at once, then reads them
/// back the same way, from buffers at `misalign` bytes past a 4 KiB boundary.
fn roundtrip(m: &mut FileMember, count: usize, block: usize, misalign: usize) {
    let data: Vec<Vec<u8>> = (0..count).map(|i| pattern(i as u64 + 1, block)).collect();
    let mut src = AlignedBuf::new(count * block + misalign);
    for (i, d) in data.iter().enumerate() {
        src[misalign + i * block..misalign + (i + 1) * block].copy_from_slice(d);
    }
    for i in 0..count {
        let buf = &src[misalign + i * block..misalign + (i + 1) * block];
        // SAFETY: `src` outlives the I/O, which is reaped below before `src` is touched again.
        unsafe { m.submit(IoRequest::write(i as u64, (i * block) as u64, buf, false)) };
    }
    m.flush_submissions().unwrap();
    assert!(reap_all(m).iter().all(|c| c.result.is_ok()));
    let mut dst = AlignedBuf::new(count * block + misalign);
    for (i, chunk) in dst[misalign..].chunks_mut(block).take(count).enumerate() {
        // SAFETY: each chunk is a disjoint part of `dst`, which outlives the reads reaped below.
        unsafe { m.submit(IoRequest::read(i as u64, (i * block) as u64, chunk)) };
    }
    m.flush_submissions().unwrap();
    let done = reap_all(m);
    assert_eq!(done.len(), count);
    assert!(done.iter().all(|c| c.result.is_ok()), "{done:?}");
    for (i, d) in data.iter().enumerate() {
        assert_eq!(&dst[misalign + i * block..misalign + (i + 1) * block], &d[..], "block {i}");
    }
}

#[test]
fn many_ios_in_flight_aligned_and_bounced() {
    let dir = test_dir("inflight");
    let opts = FileOptions { ring_entries: 64, ..FileOptions::default() };
    let mut m = FileMember::create(&dir.join("m0"), MEMBER_BYTES, opts).unwrap();
    if m.uses_io_uring() {
        // 256 I/Os through a 64-entry ring: the backlog path is exercised too.
        println!("io_uring in use; O_DIRECT: {}", m.is_direct());
    } else {
        println!("skipping io_uring assertions: io_uring unavailable, pread/pwrite path tested");
    }
    roundtrip(&mut m, 256, 4096, 0);
    assert_eq!(m.bounce_allocated_count(), 0, "aligned buffers need no bounce");
    roundtrip(&mut m, 64, 8192, 512);
    if m.is_direct() {
        assert!(m.bounce_allocated_count() > 0, "misaligned buffers bounce under O_DIRECT");
        assert!(m.bounce_allocated_count() <= 64, "the pool reuses bounce buffers");
    }
    let c = m.counters().snapshot();
    assert_eq!((c.read_ios, c.write_ios), (256 + 64, 256 + 64));
    assert_eq!((c.read_bytes, c.write_bytes), (3 << 19, 3 << 19), "1 MiB + 512 KiB each way");
    assert_eq!(c.errors, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sector_sized_ios_and_every_fallback_read_back() {
    let dir = test_dir("fallbacks");
    let variants = [
        FileOptions::default(),
        FileOptions { io_uring: false, ..FileOptions::default() },
        FileOptions { direct: false, ..FileOptions::default() },
        FileOptions { direct: false, io_uring: false, ..FileOptions::default() },
    ];
    for (i, opts) in variants.into_iter().enumerate() {
        let mut m = FileMember::create(&dir.join(format!("v{i}")), MEMBER_BYTES, opts).unwrap();
        assert!(opts.io_uring || !m.uses_io_uring(), "io_uring off means the sync path: {opts:?}");
        // 512-byte I/Os at 512-byte offsets: on a 4Kn file these take the buffered route.
        roundtrip(&mut m, 100, 512, 512);
        roundtrip(&mut m, 16, 64 << 10, 0);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn flush_fua_discard_and_out_of_range() {
    let dir = test_dir("ops");
    let mut m = FileMember::create(&dir.join("m"), MEMBER_BYTES, FileOptions::default()).unwrap();
    let data = AlignedBuf::new(8192);
    let mut filled = AlignedBuf::new(8192);
    filled.fill(0xab);
    let mut past_end = AlignedBuf::new(4096);
    // SAFETY: every buffer outlives the reap below.
    unsafe {
        m.submit(IoRequest::write(1, 0, &filled, true));
        m.submit(IoRequest::write(2, 1 << 20, &filled, false));
        m.submit(IoRequest::flush(3));
        m.submit(IoRequest::read(4, MEMBER_BYTES, &mut past_end));
    }
    m.flush_submissions().unwrap();
    let mut done = reap_all(&mut m);
    done.sort_by_key(|c| c.tag);
    assert!(done[..3].iter().all(|c| c.result.is_ok()), "{done:?}");
    assert!(matches!(done[3].result, Err(IoFailure::OutOfRange { .. })), "{done:?}");
    // SAFETY: as above.
    unsafe { m.submit(IoRequest::discard(5, 1 << 20, 8192)) };
    m.flush_submissions().unwrap();
    assert!(reap_all(&mut m)[0].result.is_ok());
    let mut back = vec![0; 8192];
    m.read_media(1 << 20, &mut back).unwrap();
    assert_eq!(back, &data[..], "a discarded range reads back as zeroes");
    m.read_media(0, &mut back).unwrap();
    assert_eq!(back, &filled[..]);
    let c = m.counters().snapshot();
    assert_eq!((c.write_ios, c.flushes, c.discards, c.read_ios, c.errors), (2, 1, 1, 1, 1));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn raid5_on_file_members_reads_back_what_it_wrote() {
    let dir = test_dir("raid5");
    let members: Vec<Box<dyn Member>> = (0..4)
        .map(|i| {
            let path = dir.join(format!("d{i}"));
            Box::new(FileMember::create(&path, MEMBER_BYTES, FileOptions::default()).unwrap())
                as Box<dyn Member>
        })
        .collect();
    let mut d = Driver::new(members);
    let geometry = Geometry::new(Level::Raid5, Level::Raid5.default_layout(), 4, 64 << 10);
    let cfg = ArrayConfig {
        geometry: geometry.unwrap(),
        stripe_size_bytes: 4096,
        stripe_cache_size: 64,
        member_sectors: MEMBER_BYTES / 512,
    };
    let mut a = Array::new(cfg).unwrap();
    let bytes = (a.size_sectors() * 512) as usize;
    let data = pattern(7, bytes);
    // Whole stripes (3 x 64 KiB) at a time, then reads of 60 KiB, many in flight at once.
    for (i, piece) in data.chunks(192 << 10).enumerate() {
        let sector = (i * (192 << 10) / 512) as u64;
        a.submit_write(ReqId(sector), Sector(sector), piece.to_vec());
        d.run_until_idle(&mut a).unwrap();
    }
    assert!(a.take_completed().into_iter().all(|(_, r, _)| r.is_ok()));
    for (i, piece) in data.chunks(60 << 10).enumerate() {
        let sector = (i * (60 << 10) / 512) as u64;
        a.submit_read(ReqId(sector), Sector(sector), vec![0; piece.len()]);
    }
    d.run_until_idle(&mut a).unwrap();
    for (ReqId(sector), r, buf) in a.take_completed() {
        r.unwrap();
        let at = (sector * 512) as usize;
        assert_eq!(buf, data[at..at + buf.len()], "read at sector {sector}");
    }
    let t = d.counters_total();
    assert_eq!((t.read_bytes, t.write_bytes, t.errors), (bytes as u64, bytes as u64 * 4 / 3, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One vectored write then one vectored read of 16 segments of 4 KiB (a merged 64 KiB I/O),
/// the segments scattered over memory out of order with gaps; `misalign` shifts one segment off its
/// 4 KiB boundary, which under O_DIRECT sends the whole I/O through a bounce buffer.
fn vectored_roundtrip(m: &mut FileMember, misalign: usize) {
    const SEG: usize = 4096;
    let order: Vec<usize> = (0..16).map(|i| (i * 7) % 16).collect();
    let data = pattern(99, 16 * SEG);
    let mut src = AlignedBuf::new(32 * SEG);
    for (i, &at) in order.iter().enumerate() {
        let at = at * 2 * SEG + if i == 5 { misalign } else { 0 };
        src[at..at + SEG].copy_from_slice(&data[i * SEG..(i + 1) * SEG]);
    }
    let segs = |base: *mut u8| -> uraid_io::member::Segments {
        let seg = |(i, &at): (usize, &usize)| uraid_io::Segment {
            // SAFETY: inside the 32-segment buffer (segments every 8 KiB, misalign < 4 KiB).
            buf: uraid_io::BufPtr::from_mut(unsafe {
                std::slice::from_raw_parts_mut(
                    base.add(at * 2 * SEG + if i == 5 { misalign } else { 0 }),
                    SEG,
                )
            }),
            len_bytes: SEG,
        };
        order.iter().enumerate().map(seg).collect()
    };
    let offset = 1 << 20;
    let write = IoRequest::vectored(1, IoOp::Write { fua: false }, offset, segs(src.as_mut_ptr()));
    // SAFETY: `src` outlives the I/O, reaped below before it is touched again.
    unsafe { m.submit(write) };
    m.flush_submissions().unwrap();
    assert!(reap_all(m).iter().all(|c| c.result.is_ok()));
    let mut on_file = vec![0; 16 * SEG];
    m.read_media(offset, &mut on_file).unwrap();
    let bad = (0..16).filter(|&i| on_file[i * SEG..(i + 1) * SEG] != data[i * SEG..(i + 1) * SEG]);
    let bad: Vec<usize> = bad.collect();
    assert!(bad.is_empty(), "misalign {misalign}: segments land in order on the file: {bad:?}");
    let mut dst = AlignedBuf::new(32 * SEG);
    let read = IoRequest::vectored(2, IoOp::Read, offset, segs(dst.as_mut_ptr()));
    // SAFETY: `dst` outlives the I/O, reaped below before it is read; segments are disjoint.
    unsafe { m.submit(read) };
    m.flush_submissions().unwrap();
    let done = reap_all(m);
    assert_eq!(done.len(), 1, "one vectored I/O, one completion");
    assert!(done[0].result.is_ok(), "{done:?}");
    for (i, &at) in order.iter().enumerate() {
        let at = at * 2 * SEG + if i == 5 { misalign } else { 0 };
        assert_eq!(&dst[at..at + SEG], &data[i * SEG..(i + 1) * SEG], "segment {i}");
    }
    let c = m.counters().snapshot();
    assert_eq!((c.read_ios, c.write_ios), (1, 1), "a vectored I/O counts once");
    assert_eq!((c.read_bytes, c.write_bytes), (16 * SEG as u64, 16 * SEG as u64));
}

#[test]
fn vectored_ios_aligned_bounced_and_synchronous() {
    let dir = test_dir("vectored");
    for (name, misalign, io_uring) in [("a", 0, true), ("b", 512, true), ("c", 512, false)] {
        let opts = FileOptions { io_uring, ..FileOptions::default() };
        let mut m = FileMember::create(&dir.join(name), MEMBER_BYTES, opts).unwrap();
        vectored_roundtrip(&mut m, misalign);
        if m.is_direct() {
            let bounced = m.bounce_allocated_count() > 0;
            assert_eq!(bounced, misalign > 0, "{name}: bounce only for a misaligned segment");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Whether a member can discard to zeros (`MemberInfo::discard`): a file on a filesystem that
/// punches holes can, and probing it (a hole punched past its end) changes nothing; opened
/// read-only it takes no discard; a loop device says what its queue's write-zeroes says.
#[test]
fn discard_to_zeros_is_probed_without_changing_the_file() {
    let dir = test_dir("discard-probe");
    let path = dir.join("m.img");
    let m = FileMember::create(&path, MEMBER_BYTES, FileOptions::default()).unwrap();
    assert!(m.info().discard, "{} punches holes", dir.display());
    drop(m);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), MEMBER_BYTES, "the size is kept");
    let ro = FileOptions { read_only: true, ..FileOptions::default() };
    assert!(!FileMember::open(&path, ro).unwrap().info().discard);
    // A block device: its queue decides (loop devices zero what they discard).
    let loop_dev = std::process::Command::new("losetup").args(["-f", "--show"]).arg(&path).output();
    if let Some(dev) = loop_dev.ok().filter(|o| o.status.success()) {
        let dev = String::from_utf8_lossy(&dev.stdout).trim().to_owned();
        let queue = std::fs::read_to_string(format!(
            "/sys/block/{}/queue/write_zeroes_max_bytes",
            dev.trim_start_matches("/dev/")
        ));
        let zeroes = queue.is_ok_and(|q| q.trim().parse::<u64>().is_ok_and(|b| b > 0));
        let opened = FileMember::open(std::path::Path::new(&dev), FileOptions::default());
        let _ = std::process::Command::new("losetup").args(["-d", &dev]).status();
        assert_eq!(opened.unwrap().info().discard, zeroes, "{dev}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Which bytes a sparse member file holds (`Member::allocated`, lseek SEEK_DATA/SEEK_HOLE):
/// what was written, at the file system's block size, and nothing else; clipped to the span
/// asked; a range its bad block log lists counts as data whatever the file holds there.
#[test]
fn allocated_finds_what_was_written() {
    let dir = test_dir("allocated");
    let path = dir.join("m.img");
    let mut m = FileMember::create(&path, MEMBER_BYTES, FileOptions::default()).unwrap();
    assert_eq!(m.allocated(0..MEMBER_BYTES), Some(vec![]), "a new sparse file is one hole");
    let data = pattern(3, 8192);
    for at in [65536, 3 << 20] {
        // SAFETY: `data` outlives the I/O, reaped below.
        unsafe { m.submit(IoRequest::write(at, at, &data, false)) };
    }
    m.flush_submissions().unwrap();
    assert!(reap_all(&mut m).iter().all(|c| c.result.is_ok()));
    let got = m.allocated(0..MEMBER_BYTES).unwrap();
    let covers = |at: u64| got.iter().any(|r| r.start <= at && at + 8192 <= r.end);
    assert!(covers(65536) && covers(3 << 20), "{got:?}");
    let total: u64 = got.iter().map(|r| r.end - r.start).sum();
    assert!(total <= 2 << 20, "only the written blocks and their file system blocks: {got:?}");
    assert_eq!(m.allocated(1 << 20..2 << 20), Some(vec![]), "a hole between");
    let inside = m.allocated(65536 + 512..65536 + 1024).unwrap();
    assert_eq!(inside, vec![65536 + 512..65536 + 1024], "clipped to the span");
    let listed = (2 << 20)..(2 << 20) + 4096;
    let list = uraid_io::known_bad::BadBlockList::fixed(vec![listed.clone()]);
    let bad = uraid_io::known_bad::KnownBad::new(m, list);
    let with_bad = bad.allocated(1 << 20..(2 << 20) + 8192).unwrap();
    assert_eq!(with_bad, vec![listed], "a listed range is data");
    drop(bad);
    std::fs::remove_dir_all(&dir).unwrap();
}
