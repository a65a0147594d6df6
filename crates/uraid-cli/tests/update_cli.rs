//! `uraid assemble --update` (mdadm's --assemble --update): a stopped array's superblocks take
//! a new name, homehost or UUID (mdadm --examine reads them so; the bitmap's UUID follows,
//! which md checks), a full resync at the next start, or no bad block log and one again where
//! mdadm puts it; its data reads back after each, and what would leave an array md cannot use
//! (or data unguarded) is refused with every member left as it was.

mod serve_common;
mod stopped_common;

use serve_common::{Served, detail, tempdir, text, uraid, uraid_ok};
use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;
use std::time::Duration;
use stopped_common::{
    MIB, assert_reads_back, examine, images, serve_and_check, small_array, strs, superblock_of,
};

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
    refused(&with("uuid", &two), "a new UUID needs a whole, clean array: the array is degraded");
    refused(&with("no-bbl", &two), "a bad block log's change needs a whole, clean array");
    refused(&with("resync", &two), "a resync needs every member (slots [2] have none)");
    let all: Vec<&'static str> = strs(&members).iter().map(|s| &*s.to_string().leak()).collect();
    refused(&with("name=this-name-is-longer-than-31-bytes", &all), "md's set_name holds 31");
    refused(&with("homehost=a:b", &all), "a homehost has no ':'");
    refused(&with("summaries", &all), "uraid takes name=NEW, homehost[=HOST], uuid[=UUID]");
    refused(&with("force-no-bbl", &all), "force-no-bbl is not offered");
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

#[test]
fn a_bad_block_log_goes_and_comes_back_where_mdadm_puts_it() {
    let dir = tempdir("update-bbl");
    let (members, data) = small_array(&dir, "bb", true);
    // uraid's create puts it after the bitmap (8 sectors of it, 8 past the superblock).
    assert!(examine(&members[0]).contains("Bad Block Log : 512 entries available at offset 16"));
    let said = update(&dir, "no-bbl", &members);
    assert!(said.contains("no bad block log (3 members had one)"), "{said}");
    for m in &members {
        assert!(!examine(m).contains("Bad Block Log"), "{}", examine(m));
    }
    serve_and_check(&dir, "bb", &members, (&data, 16 * MIB), |_| ());
    let said = update(&dir, "bbl", &members);
    assert!(said.contains("512 entries 80 sectors past the superblock on 3 members"), "{said}");
    for m in &members {
        let examined = examine(m);
        assert!(
            examined.contains("Bad Block Log : 512 entries available at offset 80"),
            "{examined}"
        );
    }
    serve_and_check(&dir, "bb", &members, (&data, 16 * MIB), |_| ());
    // A log that lists a range stays: only it keeps the range from being read as data.
    let mut sb = superblock_of(&members[1]);
    let range = uraid_format::BadRange { start_sector: 4096, sectors: 8 };
    let log = uraid_format::encode_bad_blocks(&[range], 0, 4096).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&members[1]).unwrap();
    let offset = i64::from(sb.bblog_offset_sectors);
    let at = sb.super_offset_sectors.checked_add_signed(offset).unwrap() * 512;
    file.write_all_at(&log, at).unwrap();
    sb.feature_map |= uraid_format::feature::BAD_BLOCKS;
    sb.seal();
    file.write_all_at(&sb.encode(), 4096).unwrap();
    let before = images(&members);
    let out = uraid(&dir, &[&["assemble", "--update", "no-bbl"][..], &strs(&members)].concat());
    let err = text(&out.stderr);
    assert!(!out.status.success() && err.contains("lists ranges"), "{err}");
    assert!(err.contains("m1.img"), "names the member: {err}");
    assert!(images(&members) == before, "no-bbl wrote to a member");
    let _ = std::fs::remove_dir_all(&dir);
}
