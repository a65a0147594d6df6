//! A turn's member I/Os in an order that saves seeks on disks that have to seek
//! (`MemberInfo::rotational`). `order_for_merging` puts reads before writes, so that on a
//! device that serves in order the pre-reads that requests wait for go first. On a disk that
//! seeks, a run that starts where the member's previous I/O ended costs no seek at all, and
//! sent after another it costs two (there and back). That happens whenever a write is
//! acknowledged before its writes in place (once its log entry is durable): at queue depth 1 a
//! sequential writer's next pre-read (at X + 4 KiB) and the previous write (at X) share a
//! turn, and reads first sends the disk from X + 4 KiB back to X and on to X + 8 KiB for every
//! request: 4 KiB sequential writes at qd1 on a modelled 7200 rpm disk ran at 0.55 of the speed
//! without the log (`uraid bench io --only ppl`). So on such a member the run that continues
//! the head's position goes first, and the one that continues it, and so on; the rest keep
//! their order. This is what an elevator does (mq-deadline dispatches in sector order from the
//! last position); a kernel elevator under the member would reorder the same way, a device
//! that serves in order (the modelled disks, a file on some filesystems) would not.

use super::Part;
use crate::member::IoOp;
use std::ops::Range;

/// Reorders `runs` (ranges of `parts`, each one member I/O, grouped by member and epoch as
/// `order_for_merging` sorts them) for members where `seeks[member]`, and moves `head`, the
/// offset where each such member's last data I/O ended, past this turn's.
pub(super) fn sequential_first(
    parts: &[Part],
    runs: &mut [Range<usize>],
    head: &mut [Option<u64>],
    seeks: &[bool],
) {
    // Every turn passes here: nothing to walk on arrays of flash.
    if !seeks.contains(&true) {
        return;
    }
    let key = |r: &Range<usize>| (parts[r.start].member, parts[r.start].epoch);
    let mut start = 0;
    while start < runs.len() {
        let group = key(&runs[start]);
        let len = runs[start..].iter().take_while(|r| key(r) == group).count();
        let member = group.0;
        if seeks[member] {
            order_group(parts, &mut runs[start..start + len], &mut head[member]);
        }
        start += len;
    }
}

/// One member's runs between flushes: gating writes (bitmap pages, log entries) stay first;
/// after them, chains of runs that each start where the one before ended.
fn order_group(parts: &[Part], runs: &mut [Range<usize>], head: &mut Option<u64>) {
    let first = |r: &Range<usize>| &parts[r.start];
    let end = |r: &Range<usize>| parts[r.end - 1].end_bytes();
    let moves_head =
        |r: &Range<usize>| matches!(first(r).op, IoOp::Read | IoOp::Write { .. } | IoOp::Discard);
    let mut placed = runs.iter().take_while(|r| first(r).bitmap).count();
    let mut at = runs[..placed].iter().rev().find(|r| moves_head(r)).map(end).or(*head);
    while let Some(pos) = at {
        let next =
            runs[placed..].iter().position(|r| moves_head(r) && first(r).offset_bytes == pos);
        let Some(i) = next else { break };
        runs[placed..=placed + i].rotate_right(1);
        at = Some(end(&runs[placed]));
        placed += 1;
    }
    if let Some(last) = runs.iter().rev().find(|r| moves_head(r)) {
        *head = Some(end(last));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(member: usize, op: IoOp, offset_bytes: u64) -> Part {
        Part::for_test(offset_bytes, member, op, offset_bytes, 4096)
    }

    const W: IoOp = IoOp::Write { fua: false };

    /// Submission order of `parts` (each its own run) as (op, offset).
    fn order(parts: &[Part], head: &mut [Option<u64>], seeks: &[bool]) -> Vec<(IoOp, u64)> {
        let mut runs: Vec<Range<usize>> = (0..parts.len()).map(|i| i..i + 1).collect();
        sequential_first(parts, &mut runs, head, seeks);
        runs.iter().map(|r| (parts[r.start].op, parts[r.start].offset_bytes)).collect()
    }

    #[test]
    fn the_run_at_the_head_goes_first_on_a_disk_that_seeks() {
        // A sequential writer at qd1: the next pre-read (8 KiB) sorted before the previous
        // write (4 KiB), with the head at 8 KiB after that write's own pre-read: the read
        // continues the head, the write goes back: reads first stays.
        let parts = [part(0, IoOp::Read, 8192), part(0, W, 4096)];
        let mut head = [Some(8192)];
        assert_eq!(order(&parts, &mut head, &[true]), [(IoOp::Read, 8192), (W, 4096)]);
        assert_eq!(head, [Some(8192)]);
        // The next turn: the write at 8 KiB continues the head, then the read at 12 KiB.
        let parts = [part(0, IoOp::Read, 12288), part(0, W, 8192)];
        assert_eq!(order(&parts, &mut head, &[true]), [(W, 8192), (IoOp::Read, 12288)]);
        assert_eq!(head, [Some(16384)]);
    }

    #[test]
    fn other_disks_and_unrelated_runs_keep_their_order() {
        let parts =
            [part(0, IoOp::Read, 0), part(0, W, 8192), part(1, IoOp::Read, 0), part(1, W, 8192)];
        let mut head = [Some(8192), Some(8192)];
        let got = order(&parts, &mut head, &[false, true]);
        assert_eq!(got, [(IoOp::Read, 0), (W, 8192), (W, 8192), (IoOp::Read, 0)]);
        assert_eq!(head, [Some(8192), Some(4096)], "only disks that seek are followed");
        // Nothing at the head: unchanged.
        let parts = [part(0, IoOp::Read, 0), part(0, W, 40960)];
        let mut head = [Some(8192)];
        assert_eq!(order(&parts, &mut head, &[true]), [(IoOp::Read, 0), (W, 40960)]);
    }

    #[test]
    fn gating_writes_stay_first_and_flushes_keep_their_place() {
        let mut log = part(0, IoOp::Write { fua: true }, 1 << 20);
        log.bitmap = true;
        let mut after_flush = part(0, W, (1 << 20) + 4096);
        after_flush.epoch = 1;
        let mut flush = part(0, IoOp::Flush, 0);
        flush.len_bytes = 0;
        let parts = [log, part(0, IoOp::Read, 0), part(0, W, (1 << 20) + 4096), flush, after_flush];
        let mut head = [Some(0)];
        let got = order(&parts, &mut head, &[true]);
        // After the log write the head is past it: the write there goes next, not the read.
        assert_eq!(
            got,
            [
                (IoOp::Write { fua: true }, 1 << 20),
                (W, (1 << 20) + 4096),
                (IoOp::Read, 0),
                (IoOp::Flush, 0),
                (W, (1 << 20) + 4096)
            ]
        );
    }
}
