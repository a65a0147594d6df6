//! mdadm --monitor's events, found by comparing what running arrays report from one look to
//! the next: the pure part of `uraid monitor` (the CLI polls the control sockets, prints the
//! events and runs the alert program). No I/O and no clock, so every transition is tested
//! here from hand-made statuses.
//!
//! mdadm's event names and arguments are kept, so that alert scripts written for mdadm work
//! unchanged: the program gets the event, the array and, for Fail, FailSpare and SpareActive,
//! the member; for RebuildFinished, what the action found ("mismatches found: N (on raid
//! level L)", as mdadm passes it). Polling can miss what starts and ends between two looks;
//! what a status still shows afterwards is reported anyway (an action's new result, a member
//! that failed and was removed, a spare that was rebuilt in between), so a failure in a
//! running array is reported however quick it was. One the array stopped with before the
//! next look is not: the stop is (DeviceDisappeared), and the superblocks keep the failure.

use crate::mdadm_conf::MdadmConf;
use crate::status::{ArrayStatus, MemberStatus, SyncResult};
use serde::Serialize;
use std::collections::BTreeMap;

/// mdadm's default step for the RebuildNN events.
pub const DEFAULT_INCREMENT: u32 = 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// An array seen for the first time after the monitor started.
    NewArray,
    /// An array seen before is no longer running (stopped, or its process ended).
    DeviceDisappeared,
    /// An array degraded when the monitor first sees it (a failure seen happening is Fail).
    DegradedArray,
    /// A member in sync in its slot was marked faulty (or failed and was removed).
    Fail,
    /// A member being rebuilt into a slot (a spare, or a replace's new device) failed.
    FailSpare,
    /// A member being rebuilt into a slot is now in sync there.
    SpareActive,
    /// A resync, recovery, check or repair began.
    RebuildStarted,
    /// The running action passed this percentage (a multiple of the increment).
    Rebuild(u32),
    /// The action that ran ended (done, interrupted or failed).
    RebuildFinished,
    /// `--test`: an array found at the first look.
    TestMessage,
    /// A hot spare was moved to this array from another of its spare group (the third
    /// argument), to rebuild a slot this array lost.
    MoveSpare,
    /// When first seen, the array has fewer spares than its ARRAY line's `spares=`.
    SparesMissing,
}

impl EventKind {
    /// The name mdadm gives the event (the alert program's first argument).
    #[must_use]
    pub fn name(&self) -> String {
        match self {
            EventKind::Rebuild(percent) => format!("Rebuild{percent:02}"),
            other => format!("{other:?}"),
        }
    }

    /// The events mdadm mails (the others go to the program only): a member lost, an array
    /// found degraded, and the test message that proves the mail path.
    #[must_use]
    pub fn mailed(&self) -> bool {
        matches!(
            self,
            EventKind::Fail
                | EventKind::FailSpare
                | EventKind::DegradedArray
                | EventKind::SparesMissing
                | EventKind::TestMessage
        )
    }
}

impl Serialize for EventKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

/// One event: mdadm's two or three arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Event {
    pub event: EventKind,
    pub array: String,
    /// The member for Fail, FailSpare and SpareActive; what a finished action found for
    /// RebuildFinished, when it found something or did not end normally.
    pub member: Option<String>,
}

impl Event {
    /// MoveSpare: a spare of `from` now rebuilds in `to`.
    #[must_use]
    pub fn move_spare(to: &str, from: &str) -> Event {
        Event::new(EventKind::MoveSpare, to, Some(from.to_owned()))
    }

    fn new(event: EventKind, array: &str, member: Option<String>) -> Event {
        Event { event, array: array.to_owned(), member }
    }
}

/// What the monitor knows of one array from the looks before.
struct Seen {
    status: ArrayStatus,
    /// The highest multiple of the increment reported for the running action.
    reported_percent: u32,
    /// An action that stopped running before its result was published: its RebuildFinished
    /// waits one look for the result (the array clears the action a moment before).
    finishing: Option<String>,
    /// An action whose RebuildFinished went out without its result at the last look (another
    /// action had started): its result, if it comes now, is not a new action's.
    late: Option<String>,
}

/// The events of running arrays, look after look.
pub struct Monitor {
    increment: u32,
    looked: bool,
    arrays: BTreeMap<String, Seen>,
    /// mdadm.conf's ARRAY lines: the spares each array should have (`spares=`), and the
    /// spare groups the CLI moves spares within.
    conf: MdadmConf,
}

impl Monitor {
    /// `increment`: the RebuildNN step in percent (mdadm's --increment), 1 to 99.
    #[must_use]
    pub fn new(increment: u32) -> Monitor {
        let conf = MdadmConf::default();
        Monitor { increment: increment.clamp(1, 99), looked: false, arrays: BTreeMap::new(), conf }
    }

    /// Arrays described by `conf` with `spares=N` say SparesMissing when first seen with fewer.
    #[must_use]
    pub fn with_config(self, conf: MdadmConf) -> Monitor {
        Monitor { conf, ..self }
    }

    /// The configuration the monitor was given (its spare groups move spares).
    #[must_use]
    pub fn config(&self) -> &MdadmConf {
        &self.conf
    }

    /// One look: the statuses of every array watched that runs now. At the first look the
    /// arrays found are not new: degraded ones say DegradedArray, and with `test` each says
    /// TestMessage. Events come in the order a reader wants them (by array name; within an
    /// array, failures before the actions they start).
    pub fn look(&mut self, statuses: Vec<ArrayStatus>, test: bool) -> Vec<Event> {
        let first = !self.looked;
        self.looked = true;
        let mut events = Vec::new();
        let now: BTreeMap<String, ArrayStatus> =
            statuses.into_iter().map(|s| (s.name.clone(), s)).collect();
        let gone: Vec<String> =
            self.arrays.keys().filter(|name| !now.contains_key(*name)).cloned().collect();
        for name in gone {
            let seen = self.arrays.remove(&name).expect("listed above");
            if seen.finishing.is_some() || seen.status.sync.is_some() {
                events.push(Event::new(EventKind::RebuildFinished, &name, None));
            }
            events.push(Event::new(EventKind::DeviceDisappeared, &name, None));
        }
        for (name, status) in now {
            if let Some(seen) = self.arrays.get_mut(&name) {
                events.extend(member_events(&seen.status, &status));
                events.extend(sync_events(seen, &status, self.increment));
                seen.status = status;
            } else {
                if !first {
                    events.push(Event::new(EventKind::NewArray, &name, None));
                }
                if status.degraded {
                    events.push(Event::new(EventKind::DegradedArray, &name, None));
                }
                let expected = self.conf.array_for(&status).and_then(|a| a.spares);
                if expected.is_some_and(|n| status.spare_members() < n) {
                    events.push(Event::new(EventKind::SparesMissing, &name, None));
                }
                if first && test {
                    events.push(Event::new(EventKind::TestMessage, &name, None));
                }
                // An action already running when first seen: its progress from here on.
                let reported_percent = status
                    .sync
                    .as_ref()
                    .map_or(0, |s| step(percent(s.done_sectors, s.total_sectors), self.increment));
                let seen = Seen { status, reported_percent, finishing: None, late: None };
                self.arrays.insert(name, seen);
            }
        }
        events
    }
}

fn percent(done: u64, total: u64) -> u32 {
    (done.min(total) * 100).checked_div(total).map_or(0, |p| p as u32)
}

/// `percent` rounded down to a multiple of `increment`.
fn step(percent: u32, increment: u32) -> u32 {
    percent / increment * increment
}

/// Being rebuilt into a slot: a spare taking a slot, or a replace's new device.
fn rebuilding(m: &MemberStatus) -> bool {
    m.slot.is_some() && (m.state == "spare rebuilding" || m.state == "replacement")
}

/// A member's identity: md's device number with its path (a number freed by a removal is
/// given to the next device added; an empty slot has none and is no member).
type MemberKey<'a> = (u32, &'a str);

fn members_of(s: &ArrayStatus) -> BTreeMap<MemberKey<'_>, &MemberStatus> {
    s.members.iter().filter_map(|m| Some(((m.dev_number?, m.path.as_str()), m))).collect()
}

fn member_events(before: &ArrayStatus, after: &ArrayStatus) -> Vec<Event> {
    let (old, new) = (members_of(before), members_of(after));
    let name = &after.name;
    let mut events = Vec::new();
    for (key, was) in &old {
        let is = new.get(key);
        let still_working = is.is_some_and(|m| m.in_sync() || rebuilding(m));
        if was.in_sync() && !still_working && !replaced(was, &old, &new) {
            events.push(Event::new(EventKind::Fail, name, Some(was.path.clone())));
        }
        if rebuilding(was) && !still_working {
            events.push(Event::new(EventKind::FailSpare, name, Some(was.path.clone())));
        }
    }
    for (key, is) in &new {
        if is.in_sync() && !old.get(key).is_some_and(|m| m.in_sync()) {
            events.push(Event::new(EventKind::SpareActive, name, Some(is.path.clone())));
        }
    }
    events
}

/// Whether `was`, in sync before, left its slot because a replace finished: the device that
/// was its replacement now holds the slot in sync. (A member that fails while being replaced
/// is a Fail: its replacement is then still rebuilding.)
fn replaced(
    was: &MemberStatus,
    old: &BTreeMap<MemberKey<'_>, &MemberStatus>,
    new: &BTreeMap<MemberKey<'_>, &MemberStatus>,
) -> bool {
    old.iter().any(|(key, m)| {
        m.state == "replacement"
            && m.slot == was.slot
            && new.get(key).is_some_and(|n| n.in_sync() && n.slot == was.slot)
    })
}

fn sync_events(seen: &mut Seen, now: &ArrayStatus, increment: u32) -> Vec<Event> {
    let name = &now.name;
    let was = seen.status.sync.as_ref().map(|s| s.action.clone());
    let is = now.sync.as_ref().map(|s| s.action.clone());
    let result = now.last_sync.as_ref().filter(|r| Some(*r) != seen.status.last_sync.as_ref());
    let late = seen.late.take();
    let finishing = seen.finishing.take();
    let result_of = |action: &str| result.filter(|r| r.action == action);
    let mut events = Vec::new();
    let finished = |events: &mut Vec<Event>, r: Option<&SyncResult>| {
        let found = r.and_then(|r| found(r, now.level));
        events.push(Event::new(EventKind::RebuildFinished, name, found));
    };
    // The action that ran at the last look (or stopped just before it) and has ended.
    let ended = finishing.clone().or_else(|| {
        let restarted = was.as_deref().is_some_and(|a| result_of(a).is_some());
        was.clone().filter(|_| is != was || restarted)
    });
    let mut result_told = false;
    if let Some(action) = &ended {
        let r = result_of(action);
        if r.is_none() && finishing.is_none() && is.is_none() {
            seen.finishing.clone_from(&ended);
        } else {
            finished(&mut events, r);
            result_told = r.is_some();
            if r.is_none() {
                seen.late.clone_from(&ended);
            }
        }
    }
    if let Some(r) = result.filter(|r| !result_told && late.as_deref() != Some(&r.action)) {
        // Begun and ended between two looks.
        events.push(Event::new(EventKind::RebuildStarted, name, None));
        finished(&mut events, Some(r));
    }
    let Some(sync) = now.sync.as_ref() else { return events };
    if is != was || (ended.is_some() && ended == was) {
        events.push(Event::new(EventKind::RebuildStarted, name, None));
        seen.reported_percent = 0;
    }
    let reached = step(percent(sync.done_sectors, sync.total_sectors), increment);
    if reached > seen.reported_percent && reached < 100 {
        events.push(Event::new(EventKind::Rebuild(reached), name, None));
        seen.reported_percent = reached;
    }
    events
}

/// RebuildFinished's third argument: mismatches (mdadm's words), sectors a recovery could
/// not rebuild, or how the action ended if not normally. None when there is nothing to say.
fn found(result: &SyncResult, level: u32) -> Option<String> {
    let mut parts = Vec::new();
    if result.outcome != "done" {
        parts.push(format!("{} {}", result.action, result.outcome));
    }
    if result.mismatch_sectors > 0 {
        let n = result.mismatch_sectors;
        parts.push(format!("mismatches found: {n} (on raid level {level})"));
    }
    if result.listed_bad_sectors > 0 {
        parts.push(format!("sectors not rebuilt: {}", result.listed_bad_sectors));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
