//! Goal: `uraid monitor` says what mdadm --monitor says, under mdadm's event names, for every
//! change a running array's status can show between two looks, including the changes that
//! start and end between them.
//!
//! Method: hand-made statuses of a RAID6 of four members given to `Monitor::look` one after
//! another; the events each look returns are compared in full.

use uraid_md::monitor::{DEFAULT_INCREMENT, EventKind, Monitor};
use uraid_md::status::{ArrayStatus, MemberStatus, SyncResult, SyncStatus};

fn member(number: u32, slot: Option<u32>, state: &str) -> MemberStatus {
    MemberStatus {
        slot,
        dev_number: Some(number),
        path: format!("/dev/d{number}"),
        state: state.into(),
        recovery_offset_sectors: None,
        bad_sectors: 0,
    }
}

fn empty_slot(slot: u32) -> MemberStatus {
    MemberStatus {
        dev_number: None,
        path: "missing".into(),
        state: "removed".into(),
        ..member(0, Some(slot), "")
    }
}

/// md0, RAID6 x 4, every slot in sync.
fn healthy(name: &str) -> ArrayStatus {
    ArrayStatus {
        name: name.into(),
        level: 6,
        raid_disks: 4,
        state: "clean".into(),
        members: (0..4).map(|n| member(n, Some(n), "active sync")).collect(),
        ..ArrayStatus::default()
    }
}

fn with_sync(mut s: ArrayStatus, action: &str, done: u64) -> ArrayStatus {
    s.sync = Some(SyncStatus {
        action: action.into(),
        done_sectors: done,
        total_sectors: 1000,
        ..SyncStatus::default()
    });
    s
}

fn result(action: &str, outcome: &str, mismatches: u64) -> SyncResult {
    SyncResult {
        action: action.into(),
        outcome: outcome.into(),
        sectors: 1000,
        mismatch_sectors: mismatches,
        ..SyncResult::default()
    }
}

/// Slot 2's member faulty (not removed), the array degraded.
fn slot_2_failed() -> ArrayStatus {
    let mut s = healthy("md0");
    s.members[2] = empty_slot(2);
    s.members.push(member(2, None, "faulty"));
    s.degraded = true;
    s
}

/// Slot 2 being rebuilt onto /dev/d7, `done` of 1000 sectors.
fn recovering(done: u64) -> ArrayStatus {
    let mut s = healthy("md0");
    s.members[2] = member(7, Some(2), "spare rebuilding");
    s.degraded = true;
    with_sync(s, "recover", done)
}

fn rebuilt() -> ArrayStatus {
    let mut s = healthy("md0");
    s.members[2] = member(7, Some(2), "active sync");
    s.last_sync = Some(result("recover", "done", 0));
    s
}

/// The events as "Name array [member]" strings.
fn look(m: &mut Monitor, statuses: Vec<ArrayStatus>) -> Vec<String> {
    m.look(statuses, false)
        .into_iter()
        .map(|e| match e.member {
            Some(member) => format!("{} {} {member}", e.event.name(), e.array),
            None => format!("{} {}", e.event.name(), e.array),
        })
        .collect()
}

fn monitor_of(first: Vec<ArrayStatus>) -> Monitor {
    let mut m = Monitor::new(DEFAULT_INCREMENT);
    assert_eq!(look(&mut m, first), Vec::<String>::new());
    m
}

#[test]
fn the_first_look_reports_degraded_arrays_and_test_messages_only() {
    let mut m = Monitor::new(DEFAULT_INCREMENT);
    let mut degraded = slot_2_failed();
    degraded.name = "md1".into();
    let events: Vec<String> = m
        .look(vec![healthy("md0"), degraded, with_sync(healthy("md2"), "check", 500)], true)
        .iter()
        .map(|e| format!("{} {}", e.event.name(), e.array))
        .collect();
    assert_eq!(
        events,
        ["TestMessage md0", "DegradedArray md1", "TestMessage md1", "TestMessage md2"]
    );
    // No test messages after the first look, and the check seen at 50% is not re-announced.
    let events = m.look(
        vec![healthy("md0"), slot_2_failed_named("md1"), with_sync(healthy("md2"), "check", 700)],
        true,
    );
    assert_eq!(events.iter().map(|e| e.event.name()).collect::<Vec<_>>(), ["Rebuild60"]);
}

fn slot_2_failed_named(name: &str) -> ArrayStatus {
    let mut s = slot_2_failed();
    s.name = name.into();
    s
}

#[test]
fn arrays_that_appear_and_disappear() {
    let mut m = monitor_of(vec![healthy("md0")]);
    assert_eq!(
        look(&mut m, vec![healthy("md0"), slot_2_failed_named("md1")]),
        ["NewArray md1", "DegradedArray md1"]
    );
    let checking = with_sync(slot_2_failed_named("md1"), "check", 1);
    assert_eq!(look(&mut m, vec![healthy("md0"), checking]), ["RebuildStarted md1"]);
    // Stopped (md1 in the middle of its check): the check ended with it.
    assert_eq!(
        look(&mut m, vec![]),
        ["DeviceDisappeared md0", "RebuildFinished md1", "DeviceDisappeared md1"]
    );
    // Started again: new to the monitor again.
    assert_eq!(look(&mut m, vec![healthy("md0")]), ["NewArray md0"]);
}

#[test]
fn a_failure_a_spare_and_its_rebuild() {
    let mut m = monitor_of(vec![healthy("md0")]);
    assert_eq!(look(&mut m, vec![slot_2_failed()]), ["Fail md0 /dev/d2"]);
    assert_eq!(look(&mut m, vec![slot_2_failed()]), Vec::<String>::new());
    // Removed, then a spare added: no event until it is rebuilt into the slot.
    let mut removed = slot_2_failed();
    removed.members.pop();
    assert_eq!(look(&mut m, vec![removed.clone()]), Vec::<String>::new());
    removed.members.push(member(7, None, "spare"));
    assert_eq!(look(&mut m, vec![removed]), Vec::<String>::new());
    assert_eq!(look(&mut m, vec![recovering(10)]), ["RebuildStarted md0"]);
    assert_eq!(look(&mut m, vec![recovering(250)]), ["Rebuild20 md0"]);
    assert_eq!(look(&mut m, vec![recovering(399)]), Vec::<String>::new());
    // Past two steps in one look: the highest only, as mdadm.
    assert_eq!(look(&mut m, vec![recovering(650)]), ["Rebuild60 md0"]);
    assert_eq!(look(&mut m, vec![recovering(999)]), ["Rebuild80 md0"]);
    assert_eq!(look(&mut m, vec![rebuilt()]), ["SpareActive md0 /dev/d7", "RebuildFinished md0"]);
    assert_eq!(look(&mut m, vec![rebuilt()]), Vec::<String>::new());
}

#[test]
fn what_happens_between_two_looks_is_still_reported() {
    // Failed and removed between looks; then a spare rebuilt whole between looks.
    let mut m = monitor_of(vec![healthy("md0")]);
    let mut removed = slot_2_failed();
    removed.members.pop();
    assert_eq!(look(&mut m, vec![removed]), ["Fail md0 /dev/d2"]);
    assert_eq!(
        look(&mut m, vec![rebuilt()]),
        ["SpareActive md0 /dev/d7", "RebuildStarted md0", "RebuildFinished md0"]
    );
    // A check begun and ended between looks, with what it found.
    let mut checked = rebuilt();
    checked.last_sync = Some(result("check", "done", 16));
    assert_eq!(
        look(&mut m, vec![checked]),
        ["RebuildStarted md0", "RebuildFinished md0 mismatches found: 16 (on raid level 6)"]
    );
}

#[test]
fn a_spare_that_fails_while_rebuilt() {
    let mut m = Monitor::new(DEFAULT_INCREMENT);
    assert_eq!(look(&mut m, vec![recovering(100)]), ["DegradedArray md0"]);
    let mut failed = slot_2_failed();
    failed.members.push(member(7, None, "faulty"));
    assert_eq!(look(&mut m, vec![failed]), ["FailSpare md0 /dev/d7"]);
    // The recovery was cut short: its result comes a look later.
    let mut ended = slot_2_failed();
    ended.last_sync = Some(result("recover", "interrupted", 0));
    assert_eq!(look(&mut m, vec![ended]), ["RebuildFinished md0 recover interrupted"]);
}

fn replacing(done: u64) -> ArrayStatus {
    let mut s = healthy("md0");
    s.members.push(member(9, Some(1), "replacement"));
    with_sync(s, "recover", done)
}

#[test]
fn a_finished_replace_is_not_a_failure_but_a_failure_during_one_is() {
    let mut m = monitor_of(vec![replacing(500)]);
    let mut replaced = healthy("md0");
    replaced.members[1] = member(9, Some(1), "active sync");
    replaced.members.push(member(1, None, "faulty"));
    replaced.last_sync = Some(result("recover", "done", 0));
    assert_eq!(look(&mut m, vec![replaced]), ["SpareActive md0 /dev/d9", "RebuildFinished md0"]);

    // The member being replaced fails: its new device takes the slot, still rebuilding.
    let mut m = monitor_of(vec![replacing(500)]);
    let mut failed = healthy("md0");
    failed.members[1] = member(9, Some(1), "spare rebuilding");
    failed.members.push(member(1, None, "faulty"));
    failed.degraded = true;
    assert_eq!(look(&mut m, vec![with_sync(failed, "recover", 550)]), ["Fail md0 /dev/d1"]);
}

#[test]
fn a_result_published_after_the_action_cleared_comes_with_its_rebuild_finished() {
    let mut m = monitor_of(vec![with_sync(healthy("md0"), "check", 900)]);
    // The action is gone, its result not there yet: nothing, one look.
    assert_eq!(look(&mut m, vec![healthy("md0")]), Vec::<String>::new());
    let mut done = healthy("md0");
    done.last_sync = Some(result("check", "done", 8));
    assert_eq!(
        look(&mut m, vec![done.clone()]),
        ["RebuildFinished md0 mismatches found: 8 (on raid level 6)"]
    );
    assert_eq!(look(&mut m, vec![done]), Vec::<String>::new());

    // No result at all: RebuildFinished a look later without one.
    let mut m = monitor_of(vec![with_sync(healthy("md0"), "repair", 900)]);
    assert_eq!(look(&mut m, vec![healthy("md0")]), Vec::<String>::new());
    assert_eq!(look(&mut m, vec![healthy("md0")]), ["RebuildFinished md0"]);
}

#[test]
fn one_action_after_another() {
    // A check cut short by a recovery: its late "interrupted" result is not a new action.
    let mut m = monitor_of(vec![with_sync(healthy("md0"), "check", 300)]);
    assert_eq!(
        look(&mut m, vec![recovering(1)]),
        ["Fail md0 /dev/d2", "RebuildFinished md0", "RebuildStarted md0"]
    );
    let mut late = recovering(100);
    late.last_sync = Some(result("check", "interrupted", 0));
    assert_eq!(look(&mut m, vec![late]), Vec::<String>::new());

    // The same action again between two looks: the first finished, the second started.
    let mut m = monitor_of(vec![with_sync(healthy("md0"), "check", 900)]);
    let mut again = with_sync(healthy("md0"), "check", 100);
    again.last_sync = Some(result("check", "done", 0));
    assert_eq!(look(&mut m, vec![again]), ["RebuildFinished md0", "RebuildStarted md0"]);
}

#[test]
fn the_increment_sets_the_rebuild_steps() {
    let mut m = Monitor::new(25);
    assert!(m.look(vec![with_sync(healthy("md0"), "resync", 0)], false).is_empty());
    let names = |m: &mut Monitor, done| -> Vec<String> {
        let events = m.look(vec![with_sync(healthy("md0"), "resync", done)], false);
        events.into_iter().map(|e| e.event.name()).collect()
    };
    assert_eq!(names(&mut m, 260), ["Rebuild25"]);
    assert_eq!(names(&mut m, 500), ["Rebuild50"]);
    assert_eq!(names(&mut m, 999), ["Rebuild75"]);
    assert_eq!(EventKind::Rebuild(5).name(), "Rebuild05");
}

#[test]
fn events_serialize_with_mdadms_names() {
    let mut m = monitor_of(vec![healthy("md0")]);
    let events = m.look(vec![slot_2_failed()], false);
    assert_eq!(
        serde_json::to_string(&events[0]).unwrap(),
        r#"{"event":"Fail","array":"md0","member":"/dev/d2"}"#
    );
    assert!(events[0].event.mailed() && EventKind::TestMessage.mailed());
    assert!(!EventKind::SpareActive.mailed() && !EventKind::RebuildFinished.mailed());
}

#[test]
fn a_device_number_given_again_is_a_new_member() {
    // Slot 2's member failed and was removed, and the next device added took its number.
    let mut m = monitor_of(vec![healthy("md0")]);
    let mut s = healthy("md0");
    s.members[2] = member(2, Some(2), "spare rebuilding");
    s.members[2].path = "/dev/d8".into();
    s.degraded = true;
    assert_eq!(
        look(&mut m, vec![with_sync(s.clone(), "recover", 1)]),
        ["Fail md0 /dev/d2", "RebuildStarted md0"]
    );
    s.members[2].state = "active sync".into();
    s.degraded = false;
    s.last_sync = Some(result("recover", "done", 0));
    assert_eq!(look(&mut m, vec![s]), ["SpareActive md0 /dev/d8", "RebuildFinished md0"]);
}

#[test]
fn arrays_first_seen_with_fewer_spares_than_their_config_says_are_sparesmissing() {
    let conf = uraid_md::mdadm_conf::parse(
        "ARRAY /dev/md0 spares=1\nARRAY /dev/md1 spares=2\nARRAY /dev/md/md2 spares=0\n",
    )
    .unwrap();
    let mut m = Monitor::new(DEFAULT_INCREMENT).with_config(conf);
    // md1 has one spare waiting and one being rebuilt: md counts both (spare_disks).
    let mut md1 = slot_2_failed_named("md1");
    md1.members.push(member(7, None, "spare"));
    md1.members[2] = member(8, Some(2), "spare rebuilding");
    let events = look(&mut m, vec![healthy("md0"), md1.clone(), healthy("md2"), healthy("md3")]);
    assert_eq!(events, ["SparesMissing md0", "DegradedArray md1"]);
    // Said once, when first seen, as mdadm says it; an array started later is first seen then.
    assert_eq!(
        look(&mut m, vec![healthy("md0"), md1.clone()]),
        ["DeviceDisappeared md2", "DeviceDisappeared md3"]
    );
    let mut md4 = healthy("md4");
    md4.uuid = "eb42de13:44e23c33:a6be9334:ca81223a".into();
    let conf =
        uraid_md::mdadm_conf::parse("ARRAY UUID=eb42de13:44e23c33:a6be9334:ca81223a spares=1\n");
    let mut m = monitor_of(vec![]).with_config(conf.unwrap());
    assert_eq!(look(&mut m, vec![md4]), ["NewArray md4", "SparesMissing md4"]);
    assert!(EventKind::SparesMissing.mailed() && !EventKind::MoveSpare.mailed());
}
