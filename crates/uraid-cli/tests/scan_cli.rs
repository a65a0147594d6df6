//! `--scan`: arrays found among devices. `uraid examine --scan` prints what `mdadm --examine
//! --brief --verbose` prints of the same devices; `assemble`, `serve` and `grow` with `--scan`
//! take only the members of the array --uuid names from every device given (or of the only one
//! there) and pass over the rest: another array's members, a device with no superblock, a
//! second path to a device already taken. A device pattern is expanded by uraid.

mod serve_common;

use serve_common::{Served, tempdir, text, uraid, uraid_ok};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

const A: &str = "5ca00000:00000000:00000000:0000000a";
const B: &str = "5ca00000:00000000:00000000:0000000b";

/// Two RAID5 arrays of three 24 MiB files (A using 8 MiB of each), a file with no superblock
/// and a symbolic link to one of A's members: every device, in a jumbled order.
fn devices(dir: &Path) -> Vec<String> {
    let mut made = Vec::new();
    for (array, uuid, size) in [("a", A, "8M"), ("b", B, "23M")] {
        let members: Vec<PathBuf> = (0..3).map(|i| dir.join(format!("{array}{i}.img"))).collect();
        for m in &members {
            std::fs::File::create(m).unwrap().set_len(24 << 20).unwrap();
        }
        let names: Vec<&str> = members.iter().map(|m| m.to_str().unwrap()).collect();
        let mut create = vec!["create", "-l", "5", "-n", "3", "--chunk", "64K", "-N", array];
        create.extend(["--uuid", uuid, "--size", size, "--assume-clean"]);
        create.extend(&names);
        uraid_ok(dir, &create);
        made.push(members);
    }
    let blank = dir.join("blank.img");
    std::fs::File::create(&blank).unwrap().set_len(24 << 20).unwrap();
    let link = dir.join("link-to-a1.img");
    std::os::unix::fs::symlink(&made[0][1], &link).unwrap();
    let order = [&made[1][2], &made[0][0], &blank, &made[1][0], &made[0][1], &link, &made[1][1]];
    let mut devices: Vec<String> = order.iter().map(|p| p.to_str().unwrap().to_owned()).collect();
    devices.push(made[0][2].to_str().unwrap().to_owned());
    devices
}

/// The ARRAY line and its devices line, per array.
fn blocks(output: &str) -> BTreeSet<String> {
    let lines: Vec<&str> = output.lines().collect();
    lines.chunks(2).map(|pair| pair.join("\n")).collect()
}

#[test]
fn examine_scan_prints_what_mdadm_prints() {
    let dir = tempdir("scan-examine");
    let all = devices(&dir);
    let without_link: Vec<&str> =
        all.iter().map(String::as_str).filter(|d| !d.contains("link")).collect();
    let mdadm = std::process::Command::new("mdadm")
        .args(["--examine", "--brief", "--verbose"])
        .args(&without_link)
        .output()
        .unwrap();
    let ours = uraid_ok(&dir, &[&["examine", "--scan"][..], &without_link].concat());
    assert_eq!(blocks(&ours), blocks(&text(&mdadm.stdout)), "{ours}");
    // --export, for udev rules: mdadm's lines exactly, member after member.
    let members: Vec<&str> =
        without_link.iter().copied().filter(|d| !d.contains("blank")).collect();
    let mdadm = std::process::Command::new("mdadm")
        .args(["--examine", "--export"])
        .args(&members)
        .output()
        .unwrap();
    let exported = uraid_ok(&dir, &[&["examine", "--export"][..], &members].concat());
    assert_eq!(exported, text(&mdadm.stdout));
    let sizes = ["MD_ARRAY_SIZE=16.78MB\n", "MD_ARRAY_SIZE=48.23MB\n"];
    assert!(sizes.iter().all(|size| exported.contains(size)), "{exported}");
    assert_eq!(blocks(&ours).len(), 2);
    // A second path to a member is that member: listed once.
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let with_link = uraid_ok(&dir, &[&["examine", "--scan"][..], &all].concat());
    assert_eq!(blocks(&with_link), blocks(&ours));
    let none = uraid(&dir, &["examine", "--scan", dir.join("blank.img").to_str().unwrap()]);
    assert!(!none.status.success() && text(&none.stderr).contains("no md v1.2 superblock"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_verbs_take_the_named_array_from_every_device() {
    let dir = tempdir("scan-verbs");
    let all = devices(&dir);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let with = |args: &[&'static str]| -> Vec<&str> { [args, &all].concat() };
    // Two arrays and no UUID: which one is for the operator to say.
    let out = uraid(&dir, &with(&["assemble", "--scan"]));
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains(&format!("2 arrays: {B} (b), {A} (a); name one with --uuid")), "{err}");
    let plan = uraid_ok(&dir, &with(&["assemble", "--scan", "--json", "--uuid", B]));
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
    let slots: Vec<&str> =
        plan["slots"].as_array().unwrap().iter().map(|s| s["member"].as_str().unwrap()).collect();
    assert!(slots.iter().all(|s| s.contains("/b")), "{slots:?}");
    // Serve A by its UUID from a pattern uraid expands (systemd passes it on as written):
    // its three members, not the link's second path to one of them.
    let pattern = dir.join("*.img");
    let served =
        Served::start_with(&dir, "sa", &[pattern], &dir.join("sa.sock"), &["--scan", "--uuid", A]);
    let detail = uraid_ok(&dir, &["detail", "sa"]);
    assert!(detail.contains("Array Size : 16384 "), "{detail}");
    assert!(!detail.contains("link") && !detail.contains("b0.img"), "{detail}");
    uraid_ok(&dir, &["stop", "sa"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    // Grow A the same way; B is left as it was.
    let b_before: Vec<Vec<u8>> =
        (0..3).map(|i| std::fs::read(dir.join(format!("b{i}.img"))).unwrap()).collect();
    uraid_ok(&dir, &with(&["grow", "--scan", "--uuid", A, "--size", "max"]));
    let plan = uraid_ok(&dir, &with(&["assemble", "--scan", "--json", "--uuid", A]));
    assert!(plan.contains("\"component_size_sectors\": 47104"), "{plan}");
    for (i, before) in b_before.iter().enumerate() {
        assert!(std::fs::read(dir.join(format!("b{i}.img"))).unwrap() == *before, "b{i}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_mdadm_conf_names_the_array_and_where_to_look() {
    let dir = tempdir("scan-config");
    let all = devices(&dir);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    // mdadm.conf as an administrator makes it: a DEVICE line, then what `examine --scan`
    // prints (ARRAY lines, each with its devices= continuation line).
    let lines = uraid_ok(&dir, &[&["examine", "--scan"][..], &all].concat());
    let conf = dir.join("mdadm.conf");
    std::fs::write(&conf, format!("DEVICE {}/*.img\n{lines}", dir.display())).unwrap();
    let conf = conf.to_str().unwrap();

    let out = uraid(&dir, &["assemble", "--config", conf, "--json"]);
    let err = text(&out.stderr);
    assert!(err.contains("2 ARRAY lines (/dev/md/b, /dev/md/a): name one with --array"), "{err}");
    let plan = uraid_ok(&dir, &["assemble", "--config", conf, "--array", "a", "--json"]);
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
    let slots: Vec<&str> =
        plan["slots"].as_array().unwrap().iter().map(|s| s["member"].as_str().unwrap()).collect();
    assert_eq!(slots.len(), 3);
    assert!(slots.iter().all(|s| s.contains("/a") && !s.contains("link")), "{slots:?}");
    // Served with no device given: the DEVICE line's files, array b's members among them.
    let options = ["--config", conf, "--array", "b"];
    let served = Served::start_with(&dir, "sb", &[], &dir.join("sb.sock"), &options);
    let detail = uraid_ok(&dir, &["detail", "sb"]);
    assert!(detail.contains("b0.img") && !detail.contains("a0.img"), "{detail}");
    // `detail --scan` gives its line as mdadm --detail --scan does, which with a DEVICE line
    // is a configuration uraid takes (its only ARRAY line: no --array needed).
    let line = uraid_ok(&dir, &["detail", "--scan"]);
    assert!(line.starts_with("ARRAY /dev/md/sb metadata=1.2 name=b"), "{line}");
    assert!(line.ends_with(&format!(" UUID={B}\n")) && line.lines().count() == 1, "{line}");
    let verbose = uraid_ok(&dir, &["detail", "--scan", "--verbose", "sb"]);
    let b_files: Vec<String> = (0..3).map(|i| format!("{}/b{i}.img", dir.display())).collect();
    let devices = format!("\n   devices={}\n", b_files.join(","));
    assert!(verbose.starts_with("ARRAY /dev/md/sb level=raid5 num-devices=3 metadata=1.2"));
    assert!(verbose.ends_with(&devices), "{verbose}");
    let from_detail = dir.join("from-detail.conf");
    std::fs::write(&from_detail, format!("DEVICE {}/*.img\n{verbose}", dir.display())).unwrap();
    let plan = uraid_ok(&dir, &["assemble", "--config", from_detail.to_str().unwrap(), "--json"]);
    assert!(plan.contains("b1.img") && !plan.contains("a1.img"), "{plan}");
    uraid_ok(&dir, &["stop", "sb"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    // No --array: serve's --name (a systemd unit's instance) names the line.
    let served = Served::start_with(&dir, "b", &[], &dir.join("b.sock"), &["--config", conf]);
    let detail = uraid_ok(&dir, &["detail", "b"]);
    assert!(detail.contains("b2.img") && !detail.contains("a2.img"), "{detail}");
    uraid_ok(&dir, &["stop", "b"]);
    assert!(served.wait(Duration::from_secs(30)).success());
    uraid_ok(&dir, &["grow", "--config", conf, "--array", "a", "--size", "max"]);
    let plan = uraid_ok(&dir, &["assemble", "--config", conf, "--array", "a", "--json"]);
    assert!(plan.contains("\"component_size_sectors\": 47104"), "{plan}");

    // What the file cannot answer is refused with the reason.
    let refused = |args: &[&str], why: &str| {
        let out = uraid(&dir, args);
        assert!(!out.status.success() && text(&out.stderr).contains(why), "{}", text(&out.stderr));
    };
    refused(&["assemble", "--config", conf, "--array", "zz"], "no ARRAY line for /dev/md/zz");
    refused(&["assemble", "--array", "a", "x.img"], "--array names an ARRAY line of mdadm.conf");
    // --scan and no device: mdadm's own file (Debian's has no ARRAY line), or none at all.
    let out = uraid(&dir, &["assemble", "--scan"]);
    let e = text(&out.stderr);
    let (read, none) =
        ("in /etc/mdadm/mdadm.conf: no ARRAY line", "there is no /etc/mdadm/mdadm.conf");
    assert!(!out.status.success() && (e.contains(read) || e.contains(none)), "{e}");
    let bare = dir.join("bare.conf");
    std::fs::write(&bare, "ARRAY /dev/md/a level=raid5\n").unwrap();
    refused(
        &["assemble", "--config", bare.to_str().unwrap()],
        "the ARRAY line at line 1 has no UUID=",
    );
    // No DEVICE line: mdadm's default, every partition (none of which holds array a).
    std::fs::write(&bare, format!("ARRAY /dev/md/a UUID={A}\n")).unwrap();
    let why = format!("no device scanned holds a member of array {A}");
    refused(&["assemble", "--config", bare.to_str().unwrap()], &why);
    std::fs::remove_dir_all(&dir).unwrap();
}
