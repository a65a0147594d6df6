//! A flush under the partial parity log retires the entries it covers by an advance while the
//! rings have room (`array::ppl::advance`): heads whose unions began after it was asked for
//! go on being logged meanwhile, heads with older unions wait for it and are logged again
//! with their own sectors only, and the rings' newest tail retires what it made durable.
//! An advance no flush waits for (a ring filling up) logs heads with older unions at once.
//! Rings filling up advance too, and later generations wrap over the retired ones.

mod common;

use common::{CHUNK_64K as CHUNK, LOG_RING_SECTORS, Mem, array, pattern, read, run, write};
use uraid_core::array::{Array, IoArea, MemberIo, MemberOp, PartialParityLogConfig, ReqId};
use uraid_core::ppl::{LogHeader, entries_to_replay, full_mask, replayed_parity, scan_ring};
use uraid_core::{DiskIndex, Geometry, Level, Sector, StripeNumber};

const UUID: [u8; 16] = [9; 16];

fn logged_array(ring_sectors: u64) -> Array {
    logged_array_of(Level::Raid5, 5, ring_sectors)
}

fn logged_array_of(level: Level, members: usize, ring_sectors: u64) -> Array {
    let mut a = array(level, members, CHUNK, 4096);
    let cfg = PartialParityLogConfig {
        ring_sectors,
        uuid: UUID,
        epoch: 1,
        rotational: false,
        stride_stripes: 1,
    };
    a.enable_partial_parity_log(&cfg);
    a
}

/// The live entries a replay of the rings as they stand would take: (head, modified members).
fn live_entries(mem: &Mem) -> Vec<(u64, Vec<usize>)> {
    let mut out: Vec<(u64, Vec<usize>)> = entries_to_replay(&mem.scans(UUID))
        .into_iter()
        .map(|e| (e.entry.member_sector, e.entry.modified.iter().map(|m| m.0).collect()))
        .collect();
    out.sort();
    out
}

/// Per turn of `turns`: the requests finished, and each log write's member and the tail its
/// header carries.
type Turn = (Vec<u64>, Vec<(u16, u64)>);

/// Runs the engine a turn at a time (every I/O it hands out, then their completions).
fn turns(a: &mut Array, mem: &mut Mem) -> Vec<Turn> {
    let mut out = Vec::new();
    loop {
        let ios: Vec<MemberIo> = std::iter::from_fn(|| a.next_io()).collect();
        if ios.is_empty() {
            assert!(!a.busy());
            return out;
        }
        let log: Vec<(u16, u64)> = ios
            .iter()
            .filter(|io| io.area == IoArea::Log)
            .map(|io| (io.member.0, LogHeader::decode(a.io_buf(io)).expect("a header").tail))
            .collect();
        for io in &ios {
            let ok = mem.perform(a, io);
            a.complete_io(io.tag, ok);
        }
        let mut done: Vec<u64> = a.take_completed().into_iter().map(|d| d.0.0).collect();
        done.sort_unstable();
        out.push((done, log));
    }
}

/// The turn of the generation carrying the one advance's tail: the first log write with the
/// newest tail (later generations carry it too).
fn tail_turn(turns: &[Turn]) -> usize {
    let newest = turns.iter().flat_map(|t| &t.1).map(|w| w.1).max().expect("log writes");
    assert!(newest > 0, "an advance: {turns:?}");
    turns.iter().position(|t| t.1.iter().any(|w| w.1 == newest)).expect("found")
}

/// Whatever one member is lost, a replay takes no entry of a generation below `tail` (the
/// tail is on enough rings: any loss the array survives leaves one).
fn no_retired_entry_without_any_one_member(mem: &Mem, tail: u64) {
    for lost in 0..mem.disks.len() {
        let scans: Vec<_> =
            mem.scans(UUID).into_iter().filter(|s| s.member.get() != lost).collect();
        for e in entries_to_replay(&scans) {
            assert!(
                e.generation >= tail,
                "member {lost} lost: generation {} replayed",
                e.generation
            );
        }
    }
}

fn turn_of(turns: &[Turn], id: u64) -> usize {
    turns.iter().position(|t| t.0.contains(&id)).expect("finished")
}

/// Stripe 0 of RAID5 x5 (left-symmetric): data slots 0..3 on members 0..3, P on member 4;
/// slot `s` of head 0 starts at array sector `s * 128`. Head 1 (member sector 8) is the next
/// 4 KiB row. A flush completes once its advance's member flushes have (since the fifth
/// session of 2026-11-27), before the generation carrying its tail, unless a replay could
/// then take an older entry for a newer one (`tests/log_replay.rs`); heads with older unions
/// wait for those flushes and are logged with their own sectors only.
#[test]
fn a_flush_completes_at_its_member_flushes_before_its_tail() {
    let mut a = logged_array(LOG_RING_SECTORS);
    let mut mem = Mem::new(5);
    // Before the flush: head 0, slot 0 (a partial write: an entry of its own).
    write(&mut a, &mut mem, 0, pattern(1, 4096));
    assert_eq!(live_entries(&mem), vec![(0, vec![0])]);
    let resets = a.log_stats().unwrap().2;
    // The flush, a write to a fresh head (head 1, slot 2) and one to head 0's slot 1, whose
    // union holds slot 0's unflushed sectors until the flush makes them durable.
    a.submit_flush(ReqId(100));
    a.submit_write(ReqId(101), Sector(256 + 8), pattern(2, 4096));
    a.submit_write(ReqId(102), Sector(128), pattern(3, 4096));
    let turns = turns(&mut a, &mut mem);
    let (flush, old) = (turn_of(&turns, 100), turn_of(&turns, 102));
    // Head 0 waits for the advance's member flushes, then for its generation (its entry
    // below holds its own sectors only); its write is acknowledged when it joins the queue
    // for that generation, in the turn the flush completes, which need not cover it.
    assert_eq!(old, flush, "head 0's write is acknowledged once admitted: {turns:?}");
    let at = tail_turn(&turns);
    assert!(at > flush, "the flush does not wait for the tail: {turns:?}");
    let tail = turns[at].1[0].1;
    let mut tail_members: Vec<u16> = turns[at].1.iter().map(|w| w.0).collect();
    tail_members.sort_unstable();
    // The generation's rings carry it, not every ring: head 1's entry on P (member 4, placed
    // with the log idle) and head 0's two copies (members 0 and 2: placed at depth, on idle
    // members its union leaves alone). Any one loss leaves it (RAID5 survives one).
    assert_eq!(tail_members, vec![0, 2, 4], "the tail goes to three rings: {turns:?}");
    no_retired_entry_without_any_one_member(&mem, tail);
    let (_, _, resets_after, unprotected) = a.log_stats().unwrap();
    assert_eq!(resets_after, resets, "no reset");
    assert_eq!(unprotected, 0);
    assert_eq!(a.stats().log_advances, 1);
    // Head 0's new entry holds slot 1 only (slot 0 is durable): if member 0 were lost now,
    // its flushed block would read back, not zeros. Head 1's holds slot 2.
    assert_eq!(live_entries(&mem), vec![(0, vec![1]), (8, vec![2])]);
    let head0 =
        entries_to_replay(&mem.scans(UUID)).into_iter().find(|e| e.entry.member_sector == 0);
    assert_eq!(head0.unwrap().entry.modified, vec![(1, full_mask(8))]);
}

/// The parity a replay of the rings as they stand would write for each live entry (RAID5 x5:
/// P on member 4 for stripe 0), beside the parity member 4 holds: equal when every write has
/// completed.
fn replayed_against_parity(mem: &Mem) -> Vec<(u64, Vec<u8>, Vec<u8>)> {
    entries_to_replay(&mem.scans(UUID))
        .into_iter()
        .map(|e| {
            let at = (e.entry.member_sector * 512) as usize;
            let data: Vec<Option<&[u8]>> =
                (0..4).map(|m| Some(&mem.disks[m][at..at + 4096])).collect();
            let block = e.block.as_deref().expect("a partial parity block");
            let parity = replayed_parity(&e.entry, block, 4096, &data, |_| 0);
            (e.entry.member_sector, parity, mem.disks[4][at..at + 4096].to_vec())
        })
        .collect()
}

/// Runs the engine to idle as `run` does, noting every log write's (member, generation,
/// tail) as it goes out; after each, a scan of the rings must find every generation written
/// at or above the newest tail (a crash could come then), wherever the wraps left it.
fn run_checking_rings(a: &mut Array, mem: &mut Mem, written: &mut Vec<(u16, u64, u64)>) {
    while let Some(io) = a.next_io() {
        let log = io.area == IoArea::Log;
        if log {
            let h = LogHeader::decode(a.io_buf(&io)).expect("a header leads every log write");
            written.push((io.member.0, h.generation, h.tail));
        }
        let ok = mem.perform(a, &io);
        a.complete_io(io.tag, ok);
        if !log {
            continue;
        }
        let tail = written.iter().max_by_key(|w| w.1).expect("logged").2;
        let mut found: Vec<(u16, u64)> = mem
            .scans(UUID)
            .iter()
            .flat_map(|s| s.headers.iter().map(|h| (s.member.0, h.1)))
            .filter(|f| f.1 >= tail)
            .collect();
        found.sort_unstable();
        let mut live: Vec<(u16, u64)> =
            written.iter().filter(|w| w.1 >= tail).map(|w| (w.0, w.1)).collect();
        live.sort_unstable();
        assert_eq!(found, live, "the generations at or above tail {tail}");
    }
    for (_, r, _) in a.take_completed() {
        r.unwrap();
    }
}

/// With no flush at all, the rings wrap: an advance starts when one fills up and retires
/// the older generations, and later ones go back to the ring's start over them, with no reset
/// (a reset stops the log). After every log write, a scan of the rings finds every generation
/// at or above the newest tail (wherever the wraps left it); after every write, a replay
/// restores the parity the members hold.
#[test]
fn rings_wrap_over_retired_generations() {
    // A sector for the run's first header, then 9 (a header and a block) per 4 KiB write on
    // a head of its own: eight of them fill member 4's ring.
    let ring = 1 + 8 * 9 + 4;
    let mut a = logged_array(ring);
    let mut mem = Mem::new(5);
    let mut live_after = 0;
    let mut written = Vec::new();
    for i in 0..40u64 {
        let head = (i % 16) * 8;
        a.submit_write(ReqId(head), Sector(head), pattern(100 + i, 4096));
        run_checking_rings(&mut a, &mut mem, &mut written);
        // Each time, the replay restores what the members hold; the write just done is live
        // unless an advance (the ring filling up) retired it already.
        let replayed = replayed_against_parity(&mem);
        for (head, replayed, held) in &replayed {
            assert!(
                replayed == held,
                "write {i}, head {head}: the replay would write other parity"
            );
        }
        live_after += usize::from(replayed.iter().any(|r| r.0 == head));
    }
    assert!(live_after >= 20, "{live_after} of 40 writes live after them");
    assert_eq!(a.log_stats().unwrap().2, 1, "the run's first reset only");
    assert!(a.stats().log_advances >= 4, "{} advances", a.stats().log_advances);
    let log_sectors: Vec<u64> = mem
        .log
        .iter()
        .filter(|io| io.area == IoArea::Log && io.member == DiskIndex(4))
        .map(|io| io.sector.0)
        .collect();
    let wraps = log_sectors.windows(2).filter(|w| w[1] < w[0]).count();
    assert!(wraps >= 4, "the ring wraps: {log_sectors:?}");
    for i in 24..40u64 {
        assert_eq!(read(&mut a, &mut mem, (i % 16) * 8, 4096), pattern(100 + i, 4096));
    }
}

/// Every generation leaves room for an advance's tail after it, so a ring that fills up with
/// no advance under way starts one instead of a reset (a reset stops the log). Sixteen writes
/// to heads of their own, in one turn, on a ring that holds exactly their one generation: the
/// sixteenth does not fit beside the room kept, an advance retires the fifteen and it goes
/// after. (Before the eighth session of 2026-11-27 the sixteen went together and filled the
/// ring, so the advance a later write needed had no room for its tail and the log reset:
/// RAID6 4 KiB sequential writes at qd16 on 128 KiB rings reset 95 times in `bench io --only
/// ppl`.)
#[test]
fn a_full_ring_advances_into_the_room_kept_for_its_tail() {
    // The run's first header, then one generation: a header of sixteen entries (three
    // sectors) and their blocks.
    let big_gen = uraid_core::ppl::header_sectors(16) + 16 * 8;
    let ring = 1 + big_gen;
    // RAID5 x3 (slot 0 on member 0, P on member 2): with one data member the writes leave
    // alone, every entry goes to P's ring, at depth too.
    let mut a = logged_array_of(Level::Raid5, 3, ring);
    let mut mem = Mem::new(3);
    for i in 0..16u64 {
        a.submit_write(ReqId(i), Sector(i * 8), pattern(200 + i, 4096));
    }
    let mut written = Vec::new();
    run_checking_rings(&mut a, &mut mem, &mut written);
    let on_p: Vec<u64> = mem
        .log
        .iter()
        .filter(|io| io.area == IoArea::Log && io.member == DiskIndex(2))
        .map(|io| io.sectors)
        .collect();
    let fifteen = uraid_core::ppl::header_sectors(15) + 15 * 8;
    assert!(on_p.contains(&fifteen), "fifteen entries in one generation: {on_p:?}");
    assert!(!on_p.contains(&big_gen), "never sixteen: {on_p:?}");
    assert_eq!(a.log_stats().unwrap().2, 1, "the run's first reset only");
    assert_eq!(a.stats().log_advances, 1);
    assert_eq!(live_entries(&mem), vec![(15 * 8, vec![0])], "the sixteenth, after the tail");
    for i in 0..16u64 {
        assert_eq!(read(&mut a, &mut mem, i * 8, 4096), pattern(200 + i, 4096));
    }
    // A flush retires the last one by another advance, with no reset.
    a.submit_flush(ReqId(201));
    for (_, r, _) in run(&mut a, &mut mem) {
        r.unwrap();
    }
    assert_eq!(a.log_stats().unwrap().2, 1);
    assert_eq!(a.stats().log_advances, 2);
    assert!(live_entries(&mem).is_empty(), "retired by the tail");
}

/// A spare that joins while a reset writes its headers gets one of its own: another reset
/// follows. (When a replay walked each ring from its start, one with no header there held
/// nothing, and every generation that went to it was dropped: seed 106193.)
#[test]
fn a_spare_joining_during_a_reset_gets_a_header() {
    let mut a = logged_array(LOG_RING_SECTORS);
    let mut mem = Mem::new(5);
    a.submit_write(ReqId(1), Sector(0), pattern(50, 4096));
    // The run's first reset: its member flushes (with the write's reads), then its headers.
    loop {
        let mut ios: Vec<MemberIo> = std::iter::from_fn(|| a.next_io()).collect();
        let headers = ios.iter().any(|io| io.area == IoArea::Log);
        // Member 4's first, while the other headers are still in flight.
        ios.sort_by_key(|io| io.member.get() != 4);
        for io in &ios {
            // Member 4's header write fails; a blank spare takes its place before the reset
            // is done.
            let fails = headers && io.member.get() == 4 && io.area == IoArea::Log;
            let ok = !fails && mem.perform(&mut a, io);
            a.complete_io(io.tag, ok);
            if fails {
                mem.rings[4].fill(0);
                a.start_recovery(DiskIndex(4), Sector(0));
            }
        }
        if headers {
            break;
        }
    }
    for (_, r, _) in run(&mut a, &mut mem) {
        r.unwrap();
    }
    assert_eq!(a.log_stats().unwrap().2, 2, "a second reset");
    let spare = scan_ring(&mem.rings[4], UUID, DiskIndex(4));
    assert!(!spare.headers.is_empty(), "the spare's ring starts with a header");
    // Its generations are found: the write's P entry is on member 4 (stripe 0's P).
    assert_eq!(live_entries(&mem), vec![(0, vec![0])]);
}

/// Requests finished, each with the live entries when it finished.
/// Runs every I/O but the data writes to member sectors `hold` (kept in `held`, unperformed)
/// until the engine has nothing else to hand out; notes the requests finished.
fn run_holding(
    a: &mut Array,
    mem: &mut Mem,
    hold: &[u64],
    held: &mut Vec<MemberIo>,
    done: &mut Vec<u64>,
) {
    loop {
        let ios: Vec<MemberIo> = std::iter::from_fn(|| a.next_io()).collect();
        if ios.is_empty() {
            return;
        }
        for io in ios {
            let data_write = io.area == IoArea::Data && io.op == MemberOp::Write;
            if data_write && hold.contains(&io.sector.0) {
                held.push(io);
                continue;
            }
            let ok = mem.perform(a, &io);
            a.complete_io(io.tag, ok);
        }
        for (id, r, _) in a.take_completed() {
            r.unwrap();
            done.push(id.0);
        }
    }
}

/// A flush that comes while an advance drains joins it (a whole advance sooner) only if that
/// advance covers every write acknowledged before the flush. Here a write (head 2) is still
/// writing, so the advance a first flush started keeps draining. Then a write to a fresh head
/// (head 1) may be logged in a generation the advance does not drain, and acknowledged
/// before a second flush comes, while its own writes in place are still held: that flush
/// must wait for the next advance, which drains them, else it would complete with an
/// acknowledged write not durable. Without that write, the second flush completes with the
/// first.
#[test]
fn a_flush_joins_the_advance_under_way_only_if_it_covers_every_acknowledged_write() {
    for fresh_acknowledged in [false, true] {
        let mut a = logged_array(LOG_RING_SECTORS);
        let mut mem = Mem::new(5);
        write(&mut a, &mut mem, 0, pattern(1, 4096));
        let (mut held, mut done) = (Vec::new(), Vec::new());
        a.submit_write(ReqId(10), Sector(16), pattern(2, 4096));
        run_holding(&mut a, &mut mem, &[16, 8], &mut held, &mut done);
        assert!(held.iter().any(|io| io.area == IoArea::Data), "head 2's writes held");
        assert!(done.contains(&10), "acknowledged once logged: {done:?}");
        a.submit_flush(ReqId(20));
        if fresh_acknowledged {
            a.submit_write(ReqId(11), Sector(256 + 8), pattern(3, 4096));
        }
        run_holding(&mut a, &mut mem, &[16, 8], &mut held, &mut done);
        assert!(!done.contains(&20), "the advance drains head 2's writes");
        if fresh_acknowledged {
            assert!(done.contains(&11), "the fresh head logged and acknowledged");
            assert!(held.iter().any(|io| io.sector.0 == 8), "head 1's writes held");
        }
        a.submit_flush(ReqId(21));
        // Head 2's writes go: the first advance ends; head 1's are still held.
        let (head2, head1): (Vec<MemberIo>, Vec<MemberIo>) =
            std::mem::take(&mut held).into_iter().partition(|io| io.sector.0 == 16);
        held = head1;
        for io in head2 {
            let ok = mem.perform(&mut a, &io);
            a.complete_io(io.tag, ok);
        }
        run_holding(&mut a, &mut mem, &[8], &mut held, &mut done);
        assert!(done.contains(&20), "the first flush completes: {done:?}");
        assert_eq!(done.contains(&21), !fresh_acknowledged, "{done:?}");
        for io in std::mem::take(&mut held) {
            let ok = mem.perform(&mut a, &io);
            a.complete_io(io.tag, ok);
        }
        run_holding(&mut a, &mut mem, &[], &mut held, &mut done);
        assert!(done.contains(&21));
        let head1 = if fresh_acknowledged { pattern(3, 4096) } else { vec![0; 4096] };
        assert_eq!(mem.durable[2][4096..8192], head1[..], "head 1's write is durable");
        assert_eq!(a.stats().log_advances, if fresh_acknowledged { 2 } else { 1 });
    }
}

/// RAID6 x6 with data slot 0's member failed, the second 4 KiB row of stripe 0: a one-block
/// write to slot 1 whose Q read fails, with a read of slot 0 in its batch, and a flush once
/// the write's block is on its member. After the flush no live entry may count that block as
/// being written: a replay after losing its member would take it as zeros and rewrite P and
/// Q from that, and the flushed block would be rebuilt wrong (simulator seed 20013895). There
/// the write went out without Q, whose rewrite (after the read rebuilt slot 0) waited through
/// the flush's advance and was then logged with the write's data in its union. Now Q is
/// recomputed with the write (a degraded reconstruct-write), and a rewrite logged after an
/// advance counts only the blocks it writes (`log_entries`).
#[test]
fn a_read_error_rewrite_after_an_advance_leaves_durable_data_out_of_its_union() {
    let mut a = logged_array_of(Level::Raid6, 6, LOG_RING_SECTORS);
    let g = Geometry::new(Level::Raid6, Level::Raid6.default_layout(), 6, CHUNK).unwrap();
    let map = g.stripe_map(StripeNumber(0));
    let (data, q) = (map.data_disk[1].0, map.q_disk.unwrap().0);
    a.fail_member(map.data_disk[0]);
    let mut mem = Mem::new(6);
    mem.bad_reads.insert((q, 8));
    let sector = CHUNK / 512 + 8;
    a.submit_write(ReqId(10), Sector(sector), pattern(2, 4096));
    a.submit_read(ReqId(11), Sector(8), vec![0; 4096]);
    let mut flushed = false;
    while let Some(io) = a.next_io() {
        let data_write = io.op == MemberOp::Write && io.area == IoArea::Data;
        let ok = mem.perform(&mut a, &io);
        a.complete_io(io.tag, ok);
        // Once the write's block is on its member, the flush (before Q is rewritten).
        if data_write && io.member.0 == data && !flushed {
            flushed = true;
            a.submit_flush(ReqId(20));
        }
    }
    let done: Vec<u64> = a.take_completed().into_iter().map(|d| d.0.0).collect();
    assert!(flushed && done.contains(&10) && done.contains(&20), "{done:?}");
    assert!(mem.bad_reads.is_empty(), "Q rewritten");
    assert_eq!(a.stats().log_advances, 1);
    let live = live_entries(&mem);
    assert!(live.iter().all(|(_, modified)| !modified.contains(&usize::from(data))), "{live:?}");
    assert_eq!(read(&mut a, &mut mem, sector, 4096), pattern(2, 4096));
}

/// Three writes to fresh heads on a small ring: the third one's generation leaves less than
/// half of the ring free and starts an advance (no flush waits for it).
fn array_advancing_for_room(mem: &mut Mem) -> Array {
    // The run's first header, then a header and a block per write.
    let mut a = logged_array(1 + 9 + 9 + 9 + 12);
    write(&mut a, mem, 0, pattern(1, 4096)); // head 0, slot 0
    write(&mut a, mem, 8, pattern(2, 4096)); // head 1, slot 0
    assert_eq!(a.stats().log_advances, 0);
    a.submit_write(ReqId(3), Sector(16), pattern(3, 4096)); // head 2, slot 0
    loop {
        let ios: Vec<MemberIo> = std::iter::from_fn(|| a.next_io()).collect();
        assert!(!ios.is_empty(), "head 2 is logged");
        let logged = ios.iter().any(|io| io.area == IoArea::Log);
        for io in &ios {
            let ok = mem.perform(&mut a, io);
            a.complete_io(io.tag, ok);
        }
        if logged {
            return a;
        }
    }
}

/// With an advance started by a ring filling up (no flush waits for it), a write to a head
/// whose union began before the advance is logged at once, its union whole (nothing promised
/// its older sectors durable), not held until every member is flushed (a sequential stream
/// at depth 1 meets such a head at nearly every advance).
#[test]
fn a_head_with_an_older_union_is_logged_during_an_advance_no_flush_waits_for() {
    let mut mem = Mem::new(5);
    let mut a = array_advancing_for_room(&mut mem);
    // Head 0 again (slot 1): its union holds slot 0's sectors, written before the advance.
    a.submit_write(ReqId(4), Sector(128), pattern(4, 4096));
    let turns = turns(&mut a, &mut mem);
    let tail = tail_turn(&turns);
    assert!(turn_of(&turns, 4) < tail, "head 0 is logged before the tail: {turns:?}");
    no_retired_entry_without_any_one_member(&mem, turns[tail].1[0].1);
    assert_eq!(a.stats().log_advances, 1);
    assert_eq!(a.log_stats().unwrap().3, 0, "nothing unprotected");
    let head0 =
        entries_to_replay(&mem.scans(UUID)).into_iter().find(|e| e.entry.member_sector == 0);
    assert_eq!(head0.unwrap().entry.modified, vec![(0, full_mask(8)), (1, full_mask(8))]);
    for (head, replayed, held) in replayed_against_parity(&mem) {
        assert!(replayed == held, "head {head}: the replay would write other parity");
    }
    assert_eq!(read(&mut a, &mut mem, 0, 4096), pattern(1, 4096));
    assert_eq!(read(&mut a, &mut mem, 128, 4096), pattern(4, 4096));
    // The advance did not drain that write, so its end keeps the union: head 0's next entry
    // still counts slots 0 and 1 (unflushed) as being written.
    write(&mut a, &mut mem, 256, pattern(5, 4096));
    let head0 =
        entries_to_replay(&mem.scans(UUID)).into_iter().find(|e| e.entry.member_sector == 0);
    let modified: Vec<usize> = head0.unwrap().entry.modified.iter().map(|m| m.0).collect();
    assert_eq!(modified, vec![0, 1, 2]);
}

/// A flush that comes once such a head is being logged may not join that advance, even while
/// it drains: it would make slot 0 durable while head 0's live entry counts it as being
/// written (zeros at a replay that lost member 0). Here head 2's writes are held, so the
/// advance drains, and so is head 0's log write, so no generation after the tail is durable
/// yet; the flush waits for the next advance, which retires head 0's entry.
#[test]
fn a_flush_does_not_join_an_advance_that_logged_an_older_union() {
    let mut mem = Mem::new(5);
    let mut a = array_advancing_for_room(&mut mem);
    a.submit_write(ReqId(4), Sector(128), pattern(4, 4096));
    let mut held = Vec::new();
    loop {
        let ios: Vec<MemberIo> = std::iter::from_fn(|| a.next_io()).collect();
        assert!(!ios.is_empty(), "head 0 is logged");
        let logged = ios.iter().any(|io| io.area == IoArea::Log);
        for io in ios {
            let head2 = io.area == IoArea::Data && io.op == MemberOp::Write && io.sector.0 == 16;
            if head2 || io.area == IoArea::Log {
                held.push(io);
                continue;
            }
            let ok = mem.perform(&mut a, &io);
            a.complete_io(io.tag, ok);
        }
        if logged {
            break;
        }
    }
    assert!(held.iter().any(|io| io.area == IoArea::Data), "head 2's writes held");
    a.submit_flush(ReqId(5));
    for io in held {
        let ok = mem.perform(&mut a, &io);
        a.complete_io(io.tag, ok);
    }
    let done: Vec<u64> = run(&mut a, &mut mem).into_iter().map(|d| d.0.0).collect();
    assert!(done.contains(&4) && done.contains(&5), "{done:?}");
    assert_eq!(a.stats().log_advances, 2, "the flush waited for an advance of its own");
    assert!(live_entries(&mem).iter().all(|e| e.0 != 0), "{:?}", live_entries(&mem));
}

/// RAID6: a flush's tail goes to three rings (the level survives two losses), and whichever
/// two members are lost, a replay takes no entry the advance retired. The writes before the
/// flush left entries on the P and Q rings of their heads.
#[test]
fn a_raid6_tail_survives_any_two_losses() {
    let mut a = logged_array_of(Level::Raid6, 6, LOG_RING_SECTORS);
    let mut mem = Mem::new(6);
    write(&mut a, &mut mem, 0, pattern(1, 4096));
    write(&mut a, &mut mem, 8, pattern(2, 4096));
    a.submit_flush(ReqId(100));
    let turns = turns(&mut a, &mut mem);
    turn_of(&turns, 100);
    let at = tail_turn(&turns);
    let tail = turns[at].1[0].1;
    let rings: Vec<u16> = turns[at].1.iter().map(|w| w.0).collect();
    assert_eq!(rings.len(), 3, "the tail goes to three rings: {turns:?}");
    for first in 0..6 {
        for second in first + 1..6 {
            let scans: Vec<_> = mem
                .scans(UUID)
                .into_iter()
                .filter(|s| ![first, second].contains(&s.member.get()))
                .collect();
            for e in entries_to_replay(&scans) {
                assert!(e.generation >= tail, "{first} and {second} lost: {}", e.generation);
            }
        }
    }
    // A later generation carries the tail too (the write after the flush).
    write(&mut a, &mut mem, 16, pattern(3, 4096));
    let newest = mem.scans(UUID).iter().flat_map(|s| s.headers.clone()).max().expect("headers");
    assert_eq!(newest.2, tail, "{newest:?}");
    assert_eq!(read(&mut a, &mut mem, 0, 4096), pattern(1, 4096));
    assert_eq!(read(&mut a, &mut mem, 16, 4096), pattern(3, 4096));
}
