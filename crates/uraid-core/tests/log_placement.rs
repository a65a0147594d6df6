//! Where a RAID5 write at depth 1 logs its partial parity (`array::ppl::placement`): on the
//! parity member only when no idle member is as safe. A data member whose whole block is in
//! the head's union but that the write leaves alone holds it alone; on rotational members two
//! data members the union leaves alone hold a copy each. Either way a torn write followed by
//! the loss of any one member is mended by the replay from what is left. At depth (the log
//! busy) it goes to two untouched data members with no I/O queued or in flight, if there are
//! two (RAID6, on rotational members only: P's and Q's entries to three); else to the least
//! busy of the parity member and the data members whose whole block is in the union.

mod common;

use common::{CHUNK_64K as CHUNK, Mem, array, pattern, write};
use uraid_core::array::{Array, IoArea, MemberIo, MemberOp, ReqId};
use uraid_core::ppl::{LogParity, entries_to_replay, replayed_parity};
use uraid_core::{Level, Sector};

const UUID: [u8; 16] = [7; 16];

/// RAID5 x5, left-symmetric: stripe 0 has data slots 0..3 on members 0..3 and P on member 4;
/// slot `s` of head 0 is array sector `s * 128`.
fn logged_array(rotational: bool) -> Array {
    logged(Level::Raid5, 5, rotational)
}

fn logged(level: Level, members: usize, rotational: bool) -> Array {
    common::with_log(array(level, members, CHUNK, 4096), UUID, rotational)
}

/// The members whose rings hold an entry for head 0, ascending.
fn holders(mem: &Mem) -> Vec<usize> {
    let mut out: Vec<usize> = mem
        .scans(UUID)
        .iter()
        .filter(|s| s.entries.iter().any(|e| e.entry.member_sector == 0 && e.block.is_some()))
        .map(|s| s.member.get())
        .collect();
    out.sort_unstable();
    out
}

#[test]
fn a_write_at_depth_one_logs_on_idle_members() {
    for rotational in [false, true] {
        let mut a = logged_array(rotational);
        let mut mem = Mem::new(5);
        // Slot 0: the union is member 0 alone, which the write uses. Rotational: two data
        // members it leaves alone (1 and 2); else the parity member, as md does.
        write(&mut a, &mut mem, 0, pattern(1, 4096));
        let first = if rotational { vec![1, 2] } else { vec![4] };
        assert_eq!(holders(&mem), first, "rotational {rotational}");
        // Slot 1: member 0's whole block is in the union and this write leaves it alone.
        write(&mut a, &mut mem, 128, pattern(2, 4096));
        let newest = entries_to_replay(&mem.scans(UUID));
        assert_eq!(newest.len(), 1, "one entry per head, whichever rings hold it: {newest:?}");
        assert_eq!(newest[0].member.get(), 0, "rotational {rotational}");
        // Every write is complete: what a replay would write is the parity member 4 holds.
        let e = &newest[0];
        let data: Vec<Option<&[u8]>> = (0..4).map(|m| Some(&mem.disks[m][..4096])).collect();
        let parity = replayed_parity(&e.entry, e.block.as_deref().unwrap(), 4096, &data, |_| 0);
        assert!(parity == mem.disks[4][..4096], "rotational {rotational}");
    }
}

#[test]
fn a_torn_write_then_any_member_lost_is_mended_from_what_is_left() {
    let before: Vec<Vec<u8>> = (0..4).map(|s| pattern(10 + s, 4096)).collect();
    for lost in 0..5 {
        let mut a = logged_array(true);
        let mut mem = Mem::new(5);
        for (s, block) in before.iter().enumerate() {
            write(&mut a, &mut mem, s as u64 * 128, block.clone());
        }
        a.submit_flush(ReqId(999));
        common::run(&mut a, &mut mem);
        // Slot 2 is rewritten; the power fails after its data reached member 2 and before
        // its parity reached member 4 (the parity write is dropped).
        a.submit_write(ReqId(1), Sector(256), pattern(20, 4096));
        let mut logged_on = Vec::new();
        while let Some(io) = a.next_io() {
            let parity_write = io.area == IoArea::Data && io.member.get() == 4;
            if io.area == IoArea::Log && io.op == MemberOp::Write {
                logged_on.push(io.member.get());
            }
            let ok = parity_write && io.op == MemberOp::Write || mem.perform(&mut a, &io);
            a.complete_io(io.tag, ok);
        }
        logged_on.sort_unstable();
        // The replay, with `lost` gone: entries from the rings left, parity from the data left.
        let scans: Vec<_> =
            mem.scans(UUID).into_iter().filter(|s| s.member.get() != lost).collect();
        for e in entries_to_replay(&scans) {
            let data: Vec<Option<&[u8]>> =
                (0..4).map(|m| (m != lost).then(|| &mem.disks[m][..4096])).collect();
            let block = e.block.as_deref().unwrap();
            let parity = replayed_parity(&e.entry, block, 4096, &data, |_| 0);
            if lost != 4 {
                mem.disks[4][..4096].copy_from_slice(&parity);
            }
        }
        // Every block not being written reads back as it was, the lost one rebuilt from P.
        for slot in [0usize, 1, 3] {
            let got: Vec<u8> = if slot == lost {
                (0..4096)
                    .map(|i| (0..5).filter(|&m| m != lost).fold(0, |x, m| x ^ mem.disks[m][i]))
                    .collect()
            } else {
                mem.disks[slot][..4096].to_vec()
            };
            assert!(got == before[slot], "slot {slot} with member {lost} lost");
        }
        assert_eq!(logged_on, vec![0, 1], "the union (2) and P (4) are busy; 0 and 1 are not");
    }
}

/// RAID6 x6 on rotational members: P's and Q's entries together on three data members the
/// write leaves alone (any two losses leave a copy of both); not on rotational members, or with
/// fewer than three such members (x5), on the P and Q members as before.
#[test]
fn raid6_logs_both_entries_on_three_idle_members_or_on_p_and_q() {
    for (members, rotational) in [(6, true), (6, false), (5, true)] {
        let mut a = logged(Level::Raid6, members, rotational);
        let mut mem = Mem::new(members);
        write(&mut a, &mut mem, 0, pattern(3, 4096));
        let geometry =
            uraid_core::Geometry::new(Level::Raid6, Level::Raid6.default_layout(), members, CHUNK)
                .unwrap();
        let map = geometry.stripe_map(uraid_core::StripeNumber(0));
        let (p, q) = (map.p_disk.unwrap().get(), map.q_disk.unwrap().get());
        let written = map.data_disk[0].get();
        let idle: Vec<usize> = map.data_disk[1..].iter().map(|d| d.get()).collect();
        let scans = mem.scans(UUID);
        let mut holders: Vec<(usize, usize)> = scans
            .iter()
            .map(|s| {
                let n = s.entries.iter().filter(|e| e.entry.member_sector == 0).count();
                (s.member.get(), n)
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        holders.sort_unstable();
        let want: Vec<(usize, usize)> = if rotational && members == 6 {
            idle.iter().map(|&m| (m, 2)).collect()
        } else {
            let mut pq = vec![(p, 1), (q, 1)];
            pq.sort_unstable();
            pq
        };
        assert_eq!(holders, want, "x{members} rotational {rotational}, wrote {written}");
        // The replay takes each entry (P's and Q's) once, whichever rings hold it.
        assert_eq!(entries_to_replay(&scans).len(), 2);
    }
}

/// At depth (the log busy), with fewer than two idle untouched members (user reads held on
/// members 1 and 3), a RAID5 entry goes to the least busy member that
/// may hold it alone: here the written data member 0, whose whole block is in the union, when
/// the parity member 4 has two more I/Os queued or in flight (two user reads held there); with
/// none held it stays on member 4, as md puts it. A torn write whose entry member 0 holds is
/// then mended after the loss of an untouched member, as from member 4.
#[test]
fn at_depth_an_entry_goes_to_the_least_busy_member_that_may_hold_it() {
    for busy_parity in [false, true] {
        let mut a = logged_array(false);
        let mut mem = Mem::new(5);
        // The log's first reset, out of the way.
        write(&mut a, &mut mem, 3 * 512, pattern(30, 4096));
        // Slot 0 of stripe 0 (member 0, P on member 4) and slot 0 of stripe 2 (member 3, P on
        // member 2) start their reads; then, if busy, two reads of stripe 1's slot 0 (member
        // 4) go out, held to the end.
        a.submit_write(ReqId(1), Sector(0), pattern(31, 4096));
        a.submit_write(ReqId(2), Sector(2 * 512), pattern(32, 4096));
        let mut first: Vec<_> = std::iter::from_fn(|| a.next_io()).collect();
        assert!(first.iter().all(|io| io.op == MemberOp::Read), "{first:?}");
        assert_eq!(first.len(), 4, "both heads read for an rmw: {first:?}");
        // Stripe 1's slot 2 is on member 1 (P on member 3), stripe 4's slot 2 on member 3.
        a.submit_read(ReqId(5), Sector(512 + 256), vec![0; 4096]);
        a.submit_read(ReqId(6), Sector(4 * 512 + 256), vec![0; 4096]);
        if busy_parity {
            a.submit_read(ReqId(3), Sector(512), vec![0; 4096]);
            a.submit_read(ReqId(4), Sector(520), vec![0; 4096]);
        }
        let held: Vec<_> = std::iter::from_fn(|| a.next_io()).collect();
        assert_eq!(held.len(), if busy_parity { 4 } else { 2 });
        assert!(held.iter().all(|io| [1, 3, 4].contains(&io.member.get()) && io.sector.0 >= 128));
        // Stripe 2's reads complete first: its generation goes out, so stripe 0's entry is
        // placed with the log busy.
        first.sort_by_key(|io| io.member.get() < 2 || io.member.get() == 4);
        for io in first {
            let ok = mem.perform(&mut a, &io);
            a.complete_io(io.tag, ok);
        }
        finish_losing_stripe0_parity(&mut a, &mut mem, held);
        let want = if busy_parity { vec![0] } else { vec![4] };
        assert_eq!(holders(&mem), want, "busy parity member: {busy_parity}");
        // Member 1 (untouched) lost: the entry left on the rings mends P, which rebuilds it.
        let rebuilt = rebuilt_after_replay(&mut mem, 1);
        assert!(rebuilt.iter().all(|&b| b == 0), "member 1's block (never written) comes back");
    }
}

/// At depth, a RAID5 entry goes to two data members the union leaves alone that have no I/O
/// queued or in flight, not behind the busy parity member's queue: RAID5 x6, stripe 0's slot
/// 0 (member 0, P on member 5) is placed while stripe 1's generation (slot 0 on member 5, P on
/// member 4; logged at depth 1 on its untouched members 0 and 1, or on member 4 when not
/// rotational) is in flight, so members 2 and 3 hold it (rotational: member 1 is busy), or 1
/// and 2 (not rotational: member 4 is busy). A torn parity write is then mended after the loss
/// of either copy's member.
#[test]
fn at_depth_an_entry_goes_to_two_idle_untouched_members() {
    const STRIPE: u64 = 5 * 128;
    for rotational in [true, false] {
        let want = if rotational { vec![2, 3] } else { vec![1, 2] };
        for &lost in &want {
            let mut a = logged(Level::Raid5, 6, rotational);
            let mut mem = Mem::new(6);
            let (held, held_on) = place_stripe0_while_stripe1_logs(&mut a, &mut mem, STRIPE, 2);
            assert_eq!(held_on, if rotational { vec![0, 1] } else { vec![4] });
            finish_losing_stripe0_parity(&mut a, &mut mem, held);
            assert_eq!(holders(&mem), want, "rotational {rotational}");
            // Member `lost` (untouched, never written) gone: the entry left mends P, which
            // rebuilds it.
            let rebuilt = rebuilt_after_replay(&mut mem, lost);
            assert!(rebuilt.iter().all(|&b| b == 0), "member {lost}'s block comes back");
        }
    }
}

/// Writes slot 0 of stripes 0 and 1 (`stripe` sectors apart), each an rmw reading `reads`
/// blocks, after a first write that gets the log's first reset out of the way. Stripe 1's reads
/// complete first and its log writes are held in flight (returned, with their members, sorted
/// and once each) while stripe 0's reads complete, so that stripe 0's entries are placed with
/// the log busy.
fn place_stripe0_while_stripe1_logs(
    a: &mut Array,
    mem: &mut Mem,
    stripe: u64,
    reads: usize,
) -> (Vec<MemberIo>, Vec<usize>) {
    write(a, mem, 3 * stripe, pattern(40, 4096));
    a.submit_write(ReqId(1), Sector(0), pattern(41, 4096));
    a.submit_write(ReqId(2), Sector(stripe), pattern(42, 4096));
    let first: Vec<_> = std::iter::from_fn(|| a.next_io()).collect();
    assert!(first.iter().all(|io| io.op == MemberOp::Read), "{first:?}");
    assert_eq!(first.len(), 2 * reads, "both heads read for an rmw: {first:?}");
    let (stripe1, stripe0): (Vec<_>, Vec<_>) = first.into_iter().partition(|io| io.sector.0 >= 128);
    for io in stripe1 {
        let ok = mem.perform(a, &io);
        a.complete_io(io.tag, ok);
    }
    let held: Vec<_> = std::iter::from_fn(|| a.next_io()).collect();
    assert!(held.iter().all(|io| io.area == IoArea::Log), "{held:?}");
    let mut held_on: Vec<usize> = held.iter().map(|io| io.member.get()).collect();
    held_on.sort_unstable();
    held_on.dedup();
    for io in stripe0 {
        let ok = mem.perform(a, &io);
        a.complete_io(io.tag, ok);
    }
    (held, held_on)
}

/// Runs everything to the end, `held` I/Os last, with stripe 0's parity write (on the last
/// member, RAID5 left-symmetric) lost to a power cut.
fn finish_losing_stripe0_parity(a: &mut Array, mem: &mut Mem, held: Vec<MemberIo>) {
    let parity = mem.disks.len() - 1;
    let mut held = held.into_iter();
    while let Some(io) = a.next_io().or_else(|| held.next()) {
        let torn = io.area == IoArea::Data
            && io.op == MemberOp::Write
            && (io.member.get(), io.sector.0) == (parity, 0);
        let ok = torn || mem.perform(a, &io);
        a.complete_io(io.tag, ok);
    }
    assert!(!a.busy());
}

/// With member `lost` gone: head 0's newest entry on the rings left mends stripe 0's parity
/// (on the last member) from the data left, and the lost block is rebuilt from it.
fn rebuilt_after_replay(mem: &mut Mem, lost: usize) -> Vec<u8> {
    let members = mem.disks.len();
    let scans: Vec<_> = mem.scans(UUID).into_iter().filter(|s| s.member.get() != lost).collect();
    let newest = entries_to_replay(&scans);
    let e = newest.iter().find(|e| e.entry.member_sector == 0).expect("head 0's entry");
    let data: Vec<Option<&[u8]>> =
        (0..members - 1).map(|m| (m != lost).then(|| &mem.disks[m][..4096])).collect();
    let parity = replayed_parity(&e.entry, e.block.as_deref().unwrap(), 4096, &data, |_| 0);
    mem.disks[members - 1][..4096].copy_from_slice(&parity);
    (0..4096)
        .map(|i| (0..members).filter(|&m| m != lost).fold(0, |x, m| x ^ mem.disks[m][i]))
        .collect()
}

/// The RAID6 form of the test above: RAID6 x8, stripe 0's slot 0 is placed while stripe 1's
/// generation (logged at depth 1 on three of its untouched data members) is in flight. On
/// rotational members P's and Q's entries go together to three data members of stripe 0 that
/// the write leaves alone and that have no I/O (so none of stripe 1's three), and any two
/// members lost leave a copy of both entries. Not rotational, Q's entry goes to stripe 0's Q
/// (member 0) and P's to the written data member 1: stripe 1's log write (on its P and Q,
/// members 6 and 7) is queued on stripe 0's P member 7, and member 1 has nothing queued.
#[test]
fn raid6_at_depth_on_rotational_members_entries_go_to_three_idle_untouched_members() {
    const MEMBERS: usize = 8;
    const STRIPE: u64 = (MEMBERS as u64 - 2) * 128;
    let geometry =
        uraid_core::Geometry::new(Level::Raid6, Level::Raid6.default_layout(), MEMBERS, CHUNK)
            .unwrap();
    let map = geometry.stripe_map(uraid_core::StripeNumber(0));
    let q = map.q_disk.unwrap().get();
    let written = map.data_disk[0].get();
    let untouched: Vec<usize> = map.data_disk[1..].iter().map(|d| d.get()).collect();
    for rotational in [true, false] {
        let mut a = logged(Level::Raid6, MEMBERS, rotational);
        let mut mem = Mem::new(MEMBERS);
        // Each head reads D, P and Q for its rmw.
        let (held, busy) = place_stripe0_while_stripe1_logs(&mut a, &mut mem, STRIPE, 3);
        assert_eq!(busy.len(), if rotational { 3 } else { 2 }, "stripe 1's holders: {busy:?}");
        let mut held = held.into_iter();
        while let Some(io) = a.next_io().or_else(|| held.next()) {
            let ok = mem.perform(&mut a, &io);
            a.complete_io(io.tag, ok);
        }
        assert!(!a.busy());
        let scans = mem.scans(UUID);
        let count = |m: usize| {
            scans
                .iter()
                .filter(move |s| s.member.get() == m)
                .flat_map(|s| &s.entries)
                .filter(|e| e.entry.member_sector == 0 && e.block.is_some())
        };
        let holders: Vec<usize> = (0..MEMBERS).filter(|&m| count(m).next().is_some()).collect();
        if rotational {
            assert_eq!(holders.len(), 3, "{holders:?}");
            for &m in &holders {
                assert!(untouched.contains(&m), "{m} is one of stripe 0's untouched members");
                assert!(!busy.contains(&m), "{m} was busy with stripe 1's log: {busy:?}");
                assert_eq!(count(m).count(), 2, "member {m} holds P's and Q's entries");
            }
        } else {
            let mut want = vec![written, q];
            want.sort_unstable();
            assert_eq!(holders, want);
            assert_eq!(count(written).next().unwrap().entry.parity, LogParity::P);
        }
        // Any two members lost: both of head 0's entries are still found.
        for x in 0..MEMBERS {
            for y in x + 1..MEMBERS {
                let left: Vec<_> =
                    scans.iter().filter(|s| ![x, y].contains(&s.member.get())).cloned().collect();
                let found =
                    entries_to_replay(&left).iter().filter(|e| e.entry.member_sector == 0).count();
                let lost_holders =
                    usize::from([x, y].contains(&written)) + usize::from([x, y].contains(&q));
                // Not rotational, an entry is lost with its holder (see the next test for why
                // the replay does not need it then).
                let want = if rotational { 2 } else { 2 - lost_holders };
                assert_eq!(found, want, "rotational {rotational}, members {x} and {y} lost");
            }
        }
    }
}
