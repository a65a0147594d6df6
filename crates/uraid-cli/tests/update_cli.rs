//! `uraid assemble --update` (mdadm's --assemble --update): a stopped array's superblocks take
//! a new name, homehost or UUID (mdadm --examine reads them so; the bitmap's UUID follows,
//! which md checks), or a full resync at the next start; its data reads back after each, and
//! what would leave an array md cannot use is refused with every member left as it was.

mod serve_common;
mod stopped_common;

use serve_common::{Served, detail, tempdir, text, uraid, uraid_ok};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use stopped_common::{assert_reads_back, images, small_array, strs, superblock_of};

/// `mdadm --examine` of a member: its "Key : value" lines.
fn examine(member: &PathBuf) -> String {
    let out = Command::new("mdadm").arg("--examine").arg(member).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

fn update(dir: &std::path::Path, word: &str, members: &[PathBuf]) -> String {
    let mut args = vec!["assemble", "--update", word];
    args.extend(strs(members));
    uraid_ok(dir, &args)
}

#[test]
fn name_homehost_and_uuid_change_and_the_data_stays() {
    let dir = tempdir("update-cli");
    let (members, data) = small_array(&dir, "old", true);
    let events = superblock_of(&members[0]).events;

    let said = update(&dir, "name=renamed", &members);
    assert!(said.starts_with("old: name \"old\" -> \"renamed\" (3 members written"), "{said}");
    assert!(examine(&members[2]).contains("Name : renamed"));
    update(&dir, "homehost=box", &members);
    assert!(examine(&members[0]).contains("Name : box:renamed"));

    let uuid = "0123abcd:00000000:11111111:22222222";
    update(&dir, &format!("uuid={uuid}"), &members);
    for member in &members {
        let sb = superblock_of(member);
        assert_eq!((sb.set_uuid.to_string(), sb.events), (uuid.to_owned(), events + 3));
        assert!(examine(member).contains(&format!("Array UUID : {uuid}")));
        let bitmap = uraid_ok(&dir, &["examine", "--bitmap", "--json", member.to_str().unwrap()]);
        let bitmap: serde_json::Value = serde_json::from_str(&bitmap).unwrap();
        assert_eq!(bitmap[0]["bitmap"]["uuid"], uuid, "{bitmap}");
        assert_eq!(bitmap[0]["bitmap"]["events"], events + 3, "as new as the array: {bitmap}");
    }
    // A random one, as mdadm's --update=uuid with no --uuid.
    update(&dir, "uuid", &members);
    let random = superblock_of(&members[0]).set_uuid.to_string();
    assert_ne!(random, uuid);

    // Served again under its new name and UUID: the data as written, nothing to resync.
    let served = Served::start(&dir, "renamed", &members);
    let status = detail(&dir, "renamed");
    assert_eq!(
        (status["uuid"].as_str(), status["md_name"].as_str()),
        (Some(&*random), Some("box:renamed"))
    );
    assert_eq!(status["last_sync"], serde_json::Value::Null, "{status}");
    let mut client = served.client();
    assert_reads_back(&mut client, &data);
    client.disconnect().unwrap();
    uraid_ok(&dir, &["stop", "renamed"]);
    assert!(served.wait(Duration::from_secs(30)).success());

    // resync: the next start resyncs, and the data is still there. With a bitmap, as in md,
    // only what its bits mark (none: it was clean); without one, everything.
    for (bitmap, resynced) in [(true, 0), (false, 16384)] {
        if !bitmap {
            uraid_ok(&dir, &[&["grow", "--bitmap", "none"][..], &strs(&members)].concat());
        }
        update(&dir, "resync", &members);
        assert_eq!(superblock_of(&members[1]).resync_offset_sectors, 0);
        let served = Served::start(&dir, "renamed", &members);
        let _ = uraid(&dir, &["wait", "renamed"]);
        let status = detail(&dir, "renamed");
        assert_eq!(status["last_sync"]["action"], "resync", "{status}");
        assert_eq!(status["last_sync"]["sectors"], resynced, "{status}");
        let mut client = served.client();
        assert_reads_back(&mut client, &data);
        client.disconnect().unwrap();
        uraid_ok(&dir, &["stop", "renamed"]);
        assert!(served.wait(Duration::from_secs(30)).success());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_md_could_not_use_is_refused_and_nothing_written() {
    let dir = tempdir("update-refused");
    let (members, _) = small_array(&dir, "keep", true);
    let refused = |args: &[&str], why: &str| {
        let before = images(&members);
        let out = uraid(&dir, args);
        let err = text(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{args:?}: {err}");
        assert!(images(&members) == before, "{args:?} wrote to a member");
    };
    let two = strs(&members[..2]);
    let with = |word: &'static str, devices: &[&'static str]| -> Vec<&'static str> {
        [&["assemble", "--update", word][..], devices].concat()
    };
    let two: Vec<&'static str> = two.iter().map(|s| &*s.to_string().leak()).collect();
    refused(&with("uuid", &two), "a new UUID needs the array is degraded");
    refused(&with("resync", &two), "a resync needs every member (slots [2] have none)");
    let all: Vec<&'static str> = strs(&members).iter().map(|s| &*s.to_string().leak()).collect();
    refused(&with("name=this-name-is-longer-than-31-bytes", &all), "md's set_name holds 31");
    refused(&with("homehost=a:b", &all), "a homehost has no ':'");
    refused(&with("bbl", &all), "uraid takes name=NEW, homehost[=HOST], uuid[=UUID], resync");
    refused(&with("uuid=not-a-uuid", &all), "not-a-uuid");
    // A running array's members are not touched (it writes them itself, so its name is
    // what shows that).
    let served = Served::start(&dir, "keep", &members);
    let out = uraid(&dir, &with("name=busy", &all));
    let err = text(&out.stderr);
    let why = "stop it first (uraid assemble --update works on a stopped array)";
    assert!(!out.status.success() && err.contains(why), "{err}");
    uraid_ok(&dir, &["stop", "keep"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    assert_eq!(superblock_of(&members[0]).name(), "keep");
    let _ = std::fs::remove_dir_all(&dir);
}
