use super::*;

const UUID: &str = "eb42de13:44e23c33:a6be9334:ca81223a";

fn status(name: &str, uuid: &str) -> ArrayStatus {
    ArrayStatus { name: name.into(), uuid: uuid.into(), ..ArrayStatus::default() }
}

#[test]
fn debians_default_file_and_mdadms_scan_lines() {
    // Debian's shipped mdadm.conf, then what `mdadm --detail --scan` appends.
    let text = "# mdadm.conf\n#\nHOMEHOST <system>\nMAILADDR root\nDEVICE partitions\n\
                ARRAY /dev/md/data  metadata=1.2 UUID=eb42de13:44e23c33:a6be9334:ca81223a \
                name=host:data\n   spares=1 spare-group=shelf\n";
    let conf = parse(text).unwrap();
    assert_eq!(conf.mail_addr.as_deref(), Some("root"));
    assert_eq!(conf.devices, ["partitions"]);
    assert_eq!(conf.warnings, Vec::<String>::new());
    let array = &conf.arrays[0];
    assert_eq!(array.line, 6);
    assert_eq!(array.devname.as_deref(), Some("/dev/md/data"));
    assert_eq!(array.uuid.unwrap().to_string(), UUID);
    assert_eq!((array.spares, array.spare_group.as_deref()), (Some(1), Some("shelf")));
}

#[test]
fn keywords_abbreviate_and_ignore_case_comments_and_quotes_are_mdadms() {
    let text = "arr /dev/md0 spare-group='two words' # a comment\n\
                MAIL a@example.com b@example.com\nMAILF \"RAID\" <raid@example.com>\n\
                prog /usr/local/sbin/alert\nMONITORDELAY 30\nCREATE owner=root\n\
                AR /dev/md1\nfrobnicate yes\nARRAY /dev/md2 colour=blue\n";
    let conf = parse(text).unwrap();
    assert_eq!(conf.arrays.len(), 2, "AR is not a keyword (two letters): {conf:?}");
    assert_eq!(conf.arrays[0].spare_group.as_deref(), Some("two words"));
    assert_eq!(conf.mail_addr.as_deref(), Some("a@example.com"));
    assert_eq!(conf.mail_from.as_deref(), Some("RAID <raid@example.com>"));
    assert_eq!(conf.program.as_deref(), Some("/usr/local/sbin/alert"));
    assert_eq!(conf.monitor_delay, Some(30));
    assert_eq!(
        conf.warnings,
        [
            "line 2: excess addresses ignored: b@example.com",
            "line 7: unknown keyword AR",
            "line 8: unknown keyword frobnicate",
            "line 9: unrecognised word on ARRAY line: colour=blue",
        ]
    );
}

#[test]
fn a_value_the_monitor_would_misread_is_an_error_with_its_line() {
    let cases = [
        ("ARRAY /dev/md0 UUID=eb42de13:44e23c33:a6be9334\n", "line 1: bad UUID="),
        ("\n\nARRAY /dev/md0 spares=one\n", "line 3: bad spares=one"),
        ("ARRAY /dev/md0 spare-group=a spare-group=b\n", "line 1: a second spare-group="),
        (
            concat!(
                "ARRAY uuid=eb42de13:44e23c33:a6be9334:ca81223a\n",
                "  UUID=eb42de13:44e23c33:a6be9334:ca81223a\n"
            ),
            "line 1: a second uuid=",
        ),
        ("MONITORDELAY 0\n", "line 1: MONITORDELAY \"0\" is not"),
        ("MONITORDELAY\n", "line 1: MONITORDELAY \"\" is not"),
    ];
    for (text, expected) in cases {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.starts_with(expected), "{text:?}: {e}");
    }
}

#[test]
fn uuids_take_mdadms_separators_and_decide_the_match_alone() {
    for text in [UUID, "EB42DE13-44E23C33-A6BE9334-CA81223A", "eb42de1344e23c33.a6be9334 ca81223a"]
    {
        assert_eq!(conf_uuid(text).map(|u| u.to_string()).as_deref(), Some(UUID), "{text}");
    }
    assert_eq!(conf_uuid("eb42de13:44e23c33:a6be9334:ca81223a00"), None);
    assert_eq!(conf_uuid("eb42de13:44e23c33:a6be9334:ca81223g"), None);
    let by_uuid = ConfArray {
        uuid: conf_uuid(UUID),
        devname: Some("/dev/md0".into()),
        ..ConfArray::default()
    };
    assert!(by_uuid.matches(&status("anything", UUID)));
    assert!(!by_uuid.matches(&status("md0", "00000000:00000000:00000000:00000000")));
}

#[test]
fn without_a_uuid_the_device_name_matches_the_arrays_name() {
    let conf =
        parse("ARRAY /dev/md/data\nARRAY /dev/md0\nARRAY <ignore>\nARRAY devices=/dev/sda\n")
            .unwrap();
    assert_eq!(conf.arrays.len(), 3);
    assert_eq!(conf.warnings.len(), 1, "{:?}", conf.warnings);
    let other = "00000000:00000000:00000000:00000001";
    assert_eq!(conf.array_for(&status("data", other)).map(|a| a.line), Some(1));
    assert_eq!(conf.array_for(&status("md0", other)).map(|a| a.line), Some(2));
    assert_eq!(conf.array_for(&status("<ignore>", other)), None);
    assert_eq!(conf.array_for(&status("md1", other)), None);
}

#[test]
fn the_first_line_for_an_array_wins_and_gives_its_group() {
    let text = format!("ARRAY /dev/md0 spare-group=a\nARRAY /dev/md0 UUID={UUID} spare-group=b\n");
    let conf = parse(&text).unwrap();
    assert_eq!(conf.spare_group(&status("md0", UUID)), Some("a"));
    assert_eq!(conf.spare_group(&status("x", UUID)), Some("b"));
    assert_eq!(conf.spare_group(&status("y", "00000000:00000000:00000000:00000001")), None);
}

#[test]
fn device_lines_gather_paths_patterns_and_mdadms_two_words() {
    let text = "DEVICE /dev/sd[ab]1 Partitions\nDEVICE /dev/disk/by-id/* CONTAINERS sda\n";
    let conf = parse(text).unwrap();
    assert_eq!(conf.devices, ["/dev/sd[ab]1", "partitions", "/dev/disk/by-id/*", "containers"]);
    assert_eq!(conf.warnings, ["line 2: unrecognised word on DEVICE line: sda"]);
    let named = ConfArray { devname: Some("/dev/md/data".into()), ..ConfArray::default() };
    assert!(named.names("data") && !named.names("md/data") && !named.names("other"));
}
