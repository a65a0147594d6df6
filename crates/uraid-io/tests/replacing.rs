//! `Replacing`, md's replace at the member layer, on memory members: reads from the member,
//! writes to both (complete when both have), copy-writes to the replacement alone, a failed
//! replacement never failing a request, and the mode switch taking effect per request with
//! I/O in flight.

use std::sync::{Arc, Mutex};
use uraid_io::{
    Faulty, IoCompletion, IoFailure, IoRequest, Medium, Member, MemoryMember, ReplacementControl,
    ReplacementMode, Replacing,
};

const SIZE: usize = 64 << 10;

/// A medium the test can look into after the member is boxed.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Medium for Shared {
    fn size_bytes(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn read(&self, at: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self.0.lock().unwrap()[at..at + dst.len()]);
    }
    fn write(&mut self, at: usize, src: &[u8]) {
        self.0.lock().unwrap()[at..at + src.len()].copy_from_slice(src);
    }
    fn zero(&mut self, at: usize, len: usize) {
        self.0.lock().unwrap()[at..at + len].fill(0);
    }
}

fn shared(fill: u8) -> Shared {
    Shared(Arc::new(Mutex::new(vec![fill; SIZE])))
}

fn run(m: &mut dyn Member, req: IoRequest) -> IoCompletion {
    // SAFETY: every buffer outlives the call, which reaps the request before returning.
    unsafe { m.submit(req) };
    m.flush_submissions().unwrap();
    let mut out = Vec::new();
    while out.is_empty() {
        m.reap(&mut out, true).unwrap();
    }
    assert_eq!(out.len(), 1);
    assert_eq!(m.in_flight(), 0);
    out.pop().unwrap()
}

/// A member filled with 1s paired with a replacement filled with 2s, both still looked into.
fn pair() -> (Shared, Shared, Arc<ReplacementControl>, Replacing) {
    let (old, new) = (shared(1), shared(2));
    let control = ReplacementControl::new();
    let r = Replacing::new(
        Box::new(MemoryMember::on("old", old.clone())),
        Box::new(MemoryMember::on("new", new.clone())),
        control.clone(),
    );
    (old, new, control, r)
}

#[test]
fn reads_come_from_the_member_and_writes_go_to_both() {
    let (old, new, control, mut r) = pair();
    let mut buf = vec![0u8; 4096];
    assert!(run(&mut r, IoRequest::read(1, 0, &mut buf)).result.is_ok());
    assert!(buf.iter().all(|b| *b == 1), "read from the member");
    let data = vec![7u8; 4096];
    assert!(run(&mut r, IoRequest::write(2, 4096, &data, false)).result.is_ok());
    assert!(old.0.lock().unwrap()[4096..8192].iter().all(|b| *b == 7));
    assert!(new.0.lock().unwrap()[4096..8192].iter().all(|b| *b == 7));
    let mut copy = IoRequest::write(3, 0, &buf, false);
    copy.to_replacement = true;
    assert!(run(&mut r, copy).result.is_ok());
    assert!(new.0.lock().unwrap()[..4096].iter().all(|b| *b == 1), "copied");
    assert_eq!(old.0.lock().unwrap()[8192], 1, "the member is not written by a copy");
    // Done: everything goes to the replacement.
    control.set_mode(ReplacementMode::New);
    let data = vec![9u8; 4096];
    assert!(run(&mut r, IoRequest::write(4, 8192, &data, false)).result.is_ok());
    assert_eq!(new.0.lock().unwrap()[8192], 9);
    assert_eq!(old.0.lock().unwrap()[8192], 1);
    assert!(run(&mut r, IoRequest::read(5, 8192, &mut buf)).result.is_ok());
    assert!(buf.iter().all(|b| *b == 9), "read from the replacement");
}

#[test]
fn a_failing_replacement_fails_no_request_and_is_reported() {
    let old = shared(1);
    let control = ReplacementControl::new();
    let mut new = Faulty::new(MemoryMember::new("new", SIZE), 1);
    new.fail_member();
    let mut r = Replacing::new(
        Box::new(MemoryMember::on("old", old.clone())),
        Box::new(new),
        control.clone(),
    );
    let data = vec![5u8; 4096];
    assert!(run(&mut r, IoRequest::write(1, 0, &data, true)).result.is_ok());
    assert!(control.failure().is_some(), "the replacement's error is reported");
    assert_eq!(old.0.lock().unwrap()[0], 5, "the member has the write");
    let mut copy = IoRequest::write(2, 4096, &data, false);
    copy.to_replacement = true;
    assert!(run(&mut r, copy).result.is_ok(), "a copy to a failed replacement is dropped");
    assert!(run(&mut r, IoRequest::flush(3)).result.is_ok());
    control.set_mode(ReplacementMode::Old);
    assert!(run(&mut r, IoRequest::write(4, 0, &data, false)).result.is_ok());
}

#[test]
fn a_member_error_is_the_request_s_and_in_flight_io_survives_the_wrap() {
    let mut old = Faulty::new(MemoryMember::new("old", SIZE), 1);
    old.fail_writes(0..4096);
    let mut old: Box<dyn Member> = Box::new(old);
    // A read in flight when the pair is made completes through it.
    let mut early = vec![0u8; 4096];
    // SAFETY: `early` outlives the reap below.
    unsafe { old.submit(IoRequest::read(9, 8192, &mut early)) };
    let control = ReplacementControl::new();
    let mut r = Replacing::new(old, Box::new(MemoryMember::on("new", shared(0))), control.clone());
    assert_eq!(r.in_flight(), 1);
    r.flush_submissions().unwrap();
    let mut out = Vec::new();
    while out.is_empty() {
        r.reap(&mut out, true).unwrap();
    }
    assert_eq!(out[0].tag, 9);
    let data = vec![3u8; 4096];
    assert!(run(&mut r, IoRequest::write(1, 0, &data, false)).result.is_err());
    assert!(control.failure().is_none(), "the member's error, not the replacement's");
}

/// md reads from a replacement below its recovery offset: a read the member fails there is
/// read again from the replacement; above it, or with the replacement failing it too, the
/// member's error stands (and a failing replacement is given up).
#[test]
fn a_read_the_member_fails_below_the_copy_comes_from_the_replacement() {
    let mut old = Faulty::new(MemoryMember::on("old", shared(1)), 1);
    old.fail_reads(0..4096);
    old.fail_reads(8192..12288);
    old.fail_reads(32768..36864);
    let mut new = Faulty::new(MemoryMember::on("new", shared(2)), 2);
    new.fail_reads(8192..12288);
    let control = ReplacementControl::new();
    let mut r = Replacing::new(Box::new(old), Box::new(new), control.clone());
    let mut buf = vec![0u8; 4096];
    assert!(run(&mut r, IoRequest::read(1, 0, &mut buf)).result.is_err(), "nothing copied yet");
    control.set_copied_below(16384);
    assert!(run(&mut r, IoRequest::read(2, 0, &mut buf)).result.is_ok());
    assert!(buf.iter().all(|b| *b == 2), "from the replacement");
    assert!(run(&mut r, IoRequest::read(3, 4096, &mut buf)).result.is_ok());
    assert!(buf.iter().all(|b| *b == 1), "the member's good blocks from the member");
    assert!(run(&mut r, IoRequest::read(4, 32768, &mut buf)).result.is_err(), "beyond the copy");
    assert!(control.failure().is_none());
    assert!(run(&mut r, IoRequest::read(5, 8192, &mut buf)).result.is_err(), "failed by both");
    assert!(control.failure().is_some(), "the replacement is given up");
    assert!(run(&mut r, IoRequest::read(6, 0, &mut buf)).result.is_err(), "not asked again");
}

/// After the replacement takes the slot (the member failed during the copy), what the member
/// still had in flight must not fail the new device: a write both had answers as the new
/// device wrote it, and a failed read says the old device failed it (`IoFailure::Replaced`,
/// which the engine rebuilds without counting against the member).
#[test]
fn after_a_takeover_the_member_s_late_errors_are_not_the_new_device_s() {
    let mut old = Faulty::new(MemoryMember::on("old", shared(1)), 1);
    old.fail_writes(0..4096);
    old.fail_reads(8192..12288);
    let new = shared(2);
    let control = ReplacementControl::new();
    let mut r = Replacing::new(
        Box::new(old),
        Box::new(MemoryMember::on("new", new.clone())),
        control.clone(),
    );
    let data = vec![6u8; 4096];
    let mut buf = vec![0u8; 4096];
    // SAFETY: both buffers outlive the reaps below.
    unsafe {
        r.submit(IoRequest::write(1, 0, &data, false));
        r.submit(IoRequest::read(2, 8192, &mut buf));
    }
    r.flush_submissions().unwrap();
    control.set_mode(ReplacementMode::New);
    let mut out = Vec::new();
    while out.len() < 2 {
        r.reap(&mut out, true).unwrap();
    }
    out.sort_by_key(|c| c.tag);
    assert_eq!(out[0].result, Ok(()), "written by the device that holds the slot");
    assert_eq!(new.0.lock().unwrap()[0], 6);
    assert_eq!(out[1].result, Err(IoFailure::Replaced));
    assert!(control.failure().is_none());
}

#[test]
fn a_log_write_queued_before_the_replacement_reaches_the_member_alone() {
    let (old, new, control, mut r) = pair();
    let data = vec![7u8; 4096];
    let mut early = IoRequest::write(1, 0, &data, true);
    early.before_replacement = true;
    assert!(run(&mut r, early).result.is_ok());
    assert_eq!(old.0.lock().unwrap()[0], 7, "the member has it");
    assert_eq!(new.0.lock().unwrap()[0], 2, "the replacement does not");
    // Once the replacement holds the slot, the member it was for is gone: written nowhere.
    control.set_mode(ReplacementMode::New);
    let data = vec![8u8; 4096];
    let mut late = IoRequest::write(2, 4096, &data, true);
    late.before_replacement = true;
    assert!(run(&mut r, late).result.is_ok(), "it completes");
    assert_eq!(new.0.lock().unwrap()[4096], 2, "the replacement does not get it");
    assert_eq!(old.0.lock().unwrap()[4096], 1, "nor the member");
    assert!(run(&mut r, IoRequest::write(3, 4096, &data, true)).result.is_ok());
    assert_eq!(new.0.lock().unwrap()[4096], 8, "a write queued since goes to the new device");
}
