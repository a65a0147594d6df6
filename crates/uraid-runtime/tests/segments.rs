//! Goal: `Op::ReadSegments` / `WriteSegments` move a request that spans rows and workers with
//! no copy, read back what was written (also through the joined `Op::Read`), and refuse
//! buffers not cut as `Runtime::segment_bytes` says. Method: on RAID5 x4 with 3 workers,
//! writes of 2.5 rows at row-aligned and mid-row offsets in segments, reads of the same ranges
//! both ways, then a write cut in the wrong place; `split_bytes_copied` must stay 0 for the
//! segmented requests.

mod common;

use common::{KIB, assert_same, config, pattern, with_workers};
use uraid_core::Level;
use uraid_runtime::{Completed, Op, Runtime, RuntimeError, SharedMemorySource};

const MEMBER_BYTES: usize = 1 << 20;
const CHUNK_BYTES: usize = 16 * KIB;

fn wait(rt: &Runtime, op: Op) -> Completed {
    let (tx, rx) = std::sync::mpsc::channel();
    rt.submit(op, move |c| tx.send(c).unwrap());
    rx.recv().unwrap()
}

fn cut(data: &[u8], lens: &[usize]) -> Vec<Vec<u8>> {
    let mut at = 0;
    lens.iter()
        .map(|&n| {
            at += n;
            data[at - n..at].to_vec()
        })
        .collect()
}

#[test]
fn segmented_requests_copy_nothing_and_read_back() {
    let cfg = with_workers(config(Level::Raid5, 4, CHUNK_BYTES, MEMBER_BYTES), 3);
    let source = SharedMemorySource::new(4, MEMBER_BYTES);
    let rt = Runtime::start(&cfg, &source).unwrap();
    let row = 3 * CHUNK_BYTES;
    let len = 5 * row / 2;
    for (i, offset) in [0, row / 2, 7 * row].into_iter().enumerate() {
        let offset = offset as u64;
        let copied_before = rt.stats().split_bytes_copied;
        let lens = rt.segment_bytes(offset, len as u64);
        assert_eq!(lens.iter().sum::<usize>(), len);
        assert!(lens.len() >= 3, "2.5 rows span 3 or 4 rows: {lens:?}");
        let data = pattern(i as u64 + 1, len);
        let bufs = cut(&data, &lens);
        let c =
            wait(&rt, Op::WriteSegments { offset_bytes: offset, bufs: bufs.clone(), fua: false });
        c.result.unwrap();
        assert_eq!(c.segments, bufs, "a write's segments come back as they went");
        let zeros = lens.iter().map(|&n| vec![0; n]).collect();
        let c = wait(&rt, Op::ReadSegments { offset_bytes: offset, bufs: zeros });
        c.result.unwrap();
        assert_same(&c.segments.concat(), &data, "read back in segments");
        let copied = rt.stats().split_bytes_copied - copied_before;
        assert_eq!(copied, 0, "nothing cut or joined by copying");
        let c = wait(&rt, Op::Read { offset_bytes: offset, buf: vec![0; len] });
        assert_same(&c.buf, &data, "read back joined");
    }
    assert_eq!(rt.segment_bytes(512, 4096), vec![4096], "inside a row: one piece");
    assert_eq!(rt.segment_bytes(1, 4096), vec![4096], "refused later: one piece");
    rt.shutdown().unwrap();
}

#[test]
fn segments_cut_elsewhere_are_refused_untouched() {
    let cfg = with_workers(config(Level::Raid5, 4, CHUNK_BYTES, MEMBER_BYTES), 2);
    let source = SharedMemorySource::new(4, MEMBER_BYTES);
    let rt = Runtime::start(&cfg, &source).unwrap();
    let row = 3 * CHUNK_BYTES;
    let bufs = vec![pattern(9, row / 2), pattern(10, row)];
    let c = wait(&rt, Op::WriteSegments { offset_bytes: 0, bufs: bufs.clone(), fua: false });
    match c.result {
        Err(RuntimeError::Segments { expected, found }) => {
            assert_eq!(expected, vec![row, row / 2]);
            assert_eq!(found, vec![row / 2, row]);
        }
        other => panic!("a mis-cut write must be refused, got {other:?}"),
    }
    assert_eq!(c.segments, bufs, "the caller's buffers come back");
    let c = wait(&rt, Op::Read { offset_bytes: 0, buf: vec![1; row] });
    assert!(c.buf.iter().all(|&b| b == 0), "nothing was written");
    rt.shutdown().unwrap();
}
