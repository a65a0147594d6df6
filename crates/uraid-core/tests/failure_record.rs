//! Writes that finish after a member failure are acknowledged only once the failure is
//! recorded (md's MD_SB_CHANGE_PENDING; see `array/failure_record.rs`).

mod common;

use common::{Mem, array, pattern, read, write};
use uraid_core::array::{Array, ArrayError, ReqId};
use uraid_core::{DiskIndex, Level, Sector};

type Done = Vec<(ReqId, Result<(), ArrayError>, Vec<u8>)>;

/// Performs member I/O until the engine offers none (it may still be busy: writes paused
/// for a record); returns the finished requests.
fn run(a: &mut Array, mem: &mut Mem) -> Done {
    while let Some(io) = a.next_io() {
        let ok = mem.perform(a, &io);
        a.complete_io(io.tag, ok);
    }
    a.take_completed()
}

fn writes(mem: &Mem) -> u64 {
    mem.total().writes
}

fn ids(done: &[(ReqId, Result<(), ArrayError>, Vec<u8>)]) -> Vec<u64> {
    done.iter().map(|(id, _, _)| id.0).collect()
}

#[test]
fn a_write_that_fails_a_member_waits_for_the_failure_to_be_recorded() {
    let mut a = array(Level::Raid5, 4, 64 << 10, 4096);
    a.hold_writes_until_failures_recorded();
    let mut mem = Mem::new(4);
    write(&mut a, &mut mem, 0, pattern(1, 3 * (64 << 10)));
    // Sector 8 of the array is on member 0; its write fails there.
    mem.bad_writes.insert((0, 8));
    let new = pattern(2, 4096);
    a.submit_write(ReqId(10), Sector(8), new.clone());
    assert!(run(&mut a, &mut mem).is_empty(), "held: the failure is not recorded");
    assert_eq!(a.unrecorded_failures(), vec![DiskIndex(0)]);
    assert!(a.busy());
    // Reads of other stripes are answered meanwhile, from parity where the member failed
    // (sector 512: row 1's chunk on member 0, never written).
    a.submit_read(ReqId(9), Sector(512), vec![1; 4096]);
    let done = run(&mut a, &mut mem);
    assert_eq!(ids(&done), vec![9]);
    assert_eq!(done[0].2, vec![0; 4096]);
    // So is a write's error. A later write and a flush wait too, and send nothing: member
    // writes pause until the record (a stripe written around the member is consistent only
    // while the member stays failed).
    let before = writes(&mem);
    a.submit_write(ReqId(11), Sector(a.size_sectors()), vec![0; 512]);
    a.submit_write(ReqId(12), Sector(64), pattern(3, 4096));
    a.submit_flush(ReqId(13));
    let done = run(&mut a, &mut mem);
    assert_eq!(ids(&done), vec![11]);
    assert!(matches!(done[0].1, Err(ArrayError::OutOfRange { .. })));
    assert_eq!(writes(&mem), before, "no member write before the record");
    assert!(a.writes_wait_for_record());
    a.failure_recorded(DiskIndex(1)); // not the failed member: nothing changes
    assert!(run(&mut a, &mut mem).is_empty());
    a.failure_recorded(DiskIndex(0));
    assert!(!a.writes_wait_for_record());
    let done = run(&mut a, &mut mem);
    assert!(!a.busy());
    let mut got = ids(&done);
    got.sort_unstable();
    assert_eq!(got, vec![10, 12, 13]);
    assert!(done.iter().all(|(_, r, _)| r.is_ok()));
    assert!(a.unrecorded_failures().is_empty());
    // Recorded once, a failed member stays recorded: later errors on it hold nothing.
    a.fail_member(DiskIndex(0));
    a.submit_write(ReqId(14), Sector(8), pattern(4, 4096));
    assert_eq!(ids(&run(&mut a, &mut mem)), vec![14]);
    assert_eq!(read(&mut a, &mut mem, 8, 4096), pattern(4, 4096));
}

#[test]
fn without_the_hold_writes_are_acknowledged_at_once() {
    let mut a = array(Level::Raid6, 5, 64 << 10, 4096);
    let mut mem = Mem::new(5);
    mem.bad_writes.insert((0, 8));
    a.submit_write(ReqId(1), Sector(8), pattern(5, 4096));
    let done = run(&mut a, &mut mem);
    assert_eq!(ids(&done), vec![1]);
    assert!(done[0].1.is_ok());
    assert_eq!(a.failed_members(), vec![DiskIndex(0)]);
    assert!(a.unrecorded_failures().is_empty());
}

#[test]
fn members_failed_before_the_hold_and_members_recovered_are_not_waited_for() {
    let mut a = array(Level::Raid6, 6, 64 << 10, 4096);
    a.fail_member(DiskIndex(2)); // missing at the start: the metadata says so already
    a.hold_writes_until_failures_recorded();
    let mut mem = Mem::new(6);
    a.submit_write(ReqId(1), Sector(0), pattern(6, 8192));
    assert_eq!(ids(&run(&mut a, &mut mem)), vec![1]);
    // A member fails (a verb, or another worker's news): writes wait until a spare takes the
    // slot and is being recovered, which leaves nothing to record about that member.
    a.fail_member(DiskIndex(4));
    a.submit_discard(ReqId(2), Sector(0), 8);
    assert!(run(&mut a, &mut mem).is_empty());
    a.start_recovery(DiskIndex(4), Sector(0));
    assert_eq!(ids(&run(&mut a, &mut mem)), vec![2]);
}

#[test]
fn a_write_error_beyond_redundancy_is_an_error_not_an_acknowledgement() {
    let mut a = array(Level::Raid5, 4, 64 << 10, 4096);
    a.hold_writes_until_failures_recorded();
    let mut mem = Mem::new(4);
    a.fail_member(DiskIndex(1));
    a.failure_recorded(DiskIndex(1));
    // Sector 8 is on member 0: with member 1 gone too, the write cannot be done.
    mem.bad_writes.insert((0, 8));
    a.submit_write(ReqId(1), Sector(8), pattern(7, 4096));
    let mut done = run(&mut a, &mut mem);
    if done.is_empty() {
        // Its remaining member writes waited for the record.
        a.failure_recorded(DiskIndex(0));
        done = run(&mut a, &mut mem);
    }
    assert_eq!(ids(&done), vec![1]);
    assert_eq!(done[0].1, Err(ArrayError::BeyondRedundancy));
}
