//! mdadm.conf as `uraid monitor --config` reads it (`uraid_md::mdadm_conf`), then the spare
//! moves and SparesMissing events it leads to (`uraid_md::spare_groups`, `uraid_md::monitor`)
//! over arrays made from the parsed lines.
//!
//! Byte 0 steers: which of four arrays are degraded (bits 0-3), which have a hot spare (bits
//! 4-7). The rest is the file's text. Invariants: no panic; an error names a line of the
//! file; every ARRAY line kept is within the file and identifies an array (a UUID or a device
//! name); written back as mdadm writes ARRAY lines (quoted), it parses to the same values; a
//! move goes to a degraded array with no spare, from a whole array of the same group, and
//! offers only that array's hot spares; SparesMissing is said of exactly the arrays first
//! seen with fewer spares than their line's `spares=`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uraid_md::mdadm_conf::{ConfArray, MdadmConf, parse};
use uraid_md::monitor::{EventKind, Monitor};
use uraid_md::spare_groups::spare_moves;
use uraid_md::status::{ArrayStatus, MemberStatus};

fuzz_target!(|data: &[u8]| {
    let Some((&steer, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let lines = text.lines().count();
    let conf = match parse(&text) {
        Ok(conf) => conf,
        Err(e) => {
            assert!((1..=lines).contains(&e.line), "{e} of {lines} lines");
            return;
        }
    };
    for array in &conf.arrays {
        assert!((1..=lines).contains(&array.line));
        assert!(array.uuid.is_some() || array.devname.is_some());
    }
    written_back(&conf);
    let statuses = arrays(&conf, steer);
    for planned in spare_moves(&statuses, &conf) {
        let to = statuses.iter().find(|s| s.name == planned.to).unwrap();
        assert!(to.in_sync_members() < to.raid_disks && to.spare_members() == 0);
        assert!(!to.failed());
        let group = conf.spare_group(to).unwrap();
        for d in &planned.candidates {
            let from = statuses.iter().find(|s| s.name == d.from).unwrap();
            assert_ne!(from.name, to.name);
            assert_eq!(conf.spare_group(from), Some(group));
            assert_eq!(from.in_sync_members(), from.raid_disks);
            assert!(from.members.iter().any(|m| m.path == d.spare && m.state == "spare"));
        }
    }
    let mut monitor = Monitor::new(20).with_config(conf.clone());
    let events = monitor.look(statuses.clone(), false);
    for s in &statuses {
        let expected = conf.array_for(s).and_then(|a| a.spares);
        let missing = expected.is_some_and(|n| s.spare_members() < n);
        let said = events.iter().any(|e| e.event == EventKind::SparesMissing && e.array == s.name);
        assert_eq!(said, missing, "{}", s.name);
    }
});

/// The ARRAY lines as mdadm writes them, each value quoted, parsed again: the same values.
fn written_back(conf: &MdadmConf) {
    let mut text = String::new();
    let mut kept = Vec::new();
    for a in &conf.arrays {
        let mut words = Vec::new();
        if let Some(d) = &a.devname {
            words.push(quoted(d));
        }
        if let Some(u) = &a.uuid {
            words.push(Some(format!("UUID={u}")));
        }
        if let Some(g) = &a.spare_group {
            words.push(quoted(g).map(|q| format!("spare-group={q}")));
        }
        if let Some(n) = a.spares {
            words.push(Some(format!("spares={n}")));
        }
        // A value holding both quotes, or a device name that reads as a word with '=' or a
        // comment, cannot be written back as one word.
        if words.iter().any(Option::is_none) || a.devname.as_deref().is_some_and(odd_devname) {
            continue;
        }
        let words: Vec<String> = words.into_iter().map(Option::unwrap).collect();
        text.push_str(&format!("ARRAY {}\n", words.join(" ")));
        kept.push(ConfArray { line: kept.len() + 1, ..a.clone() });
    }
    assert_eq!(parse(&text).unwrap().arrays, kept, "{text}");
}

fn odd_devname(d: &str) -> bool {
    d.is_empty() || (d.contains('=') && !d.starts_with('/'))
}

/// `value` as one word: bare when it can be, else in the quote it does not hold.
fn quoted(value: &str) -> Option<String> {
    let bare = !value.is_empty()
        && !value.contains([' ', '\t', '\'', '"', '\r'])
        && !value.starts_with('#');
    if bare {
        Some(value.to_owned())
    } else if !value.contains('\'') {
        Some(format!("'{value}'"))
    } else if !value.contains('"') {
        Some(format!("\"{value}\""))
    } else {
        None
    }
}

/// Four RAID5 arrays of three: named from the lines' device names, with their UUIDs, so that
/// the lines match them; `steer` says which are degraded and which have a spare.
fn arrays(conf: &MdadmConf, steer: u8) -> Vec<ArrayStatus> {
    let mut out = Vec::new();
    for i in 0..4u8 {
        let line = conf.arrays.get(usize::from(i));
        let devname = line.and_then(|a| a.devname.as_deref()).unwrap_or("/dev/md/none");
        let short = devname.rsplit('/').next().unwrap_or(devname);
        let name = format!("{short}{i}");
        let uuid = line.and_then(|a| a.uuid).map(|u| u.to_string()).unwrap_or_default();
        let degraded = steer & (1 << i) != 0;
        let mut members: Vec<MemberStatus> = (0..3)
            .map(|slot| {
                let lost = degraded && slot == 0;
                MemberStatus {
                    slot: Some(slot),
                    dev_number: Some(slot),
                    path: if lost { "missing".into() } else { format!("{name}/m{slot}") },
                    state: if lost { "removed".into() } else { "active sync".into() },
                    ..MemberStatus::default()
                }
            })
            .collect();
        if steer & (16 << i) != 0 {
            let path = format!("{name}/spare");
            let state = "spare".into();
            let spare = MemberStatus { dev_number: Some(3), path, state, ..Default::default() };
            members.push(spare);
        }
        let array = ArrayStatus { name, uuid, members, degraded, ..Default::default() };
        out.push(ArrayStatus { level: 5, raid_disks: 3, ..array });
    }
    out
}
