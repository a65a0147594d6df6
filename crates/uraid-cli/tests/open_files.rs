//! A wide array needs more descriptors than a shell's usual soft limit (1024): a RAID6 of 256
//! members failed to start at member 168 with "Too many open files". uraid raises the soft
//! limit to the hard one; against a hard limit too low it says what it needs. Method: a RAID6
//! of 12 members read by `assemble -o` (which starts the engine) under `ulimit -Sn 30`, then
//! under `ulimit -Hn 30` as well.

mod md_common;

use md_common::{scratch, text};
use std::process::Command;

fn under_limit(limits: &str, args: &[String]) -> std::process::Output {
    let script = format!("{limits} && exec \"$0\" \"$@\"");
    Command::new("sh")
        .args(["-c", &script, env!("CARGO_BIN_EXE_uraid")])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_low_soft_limit_is_raised_and_a_low_hard_one_explained() {
    let dir = scratch("open-files");
    let members: Vec<String> = (0..12)
        .map(|i| {
            let path = dir.join(format!("m{i}.img"));
            std::fs::File::create(&path).unwrap().set_len(4 << 20).unwrap();
            path.display().to_string()
        })
        .collect();
    let mut create = vec!["create", "-l", "6", "-n", "12", "--force", "--assume-clean"];
    create.extend(members.iter().map(String::as_str));
    let out = md_common::uraid(&create);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let output = dir.join("contents.img").display().to_string();
    let mut read = vec!["assemble".to_owned(), "-o".to_owned(), output];
    read.extend(members.iter().cloned());

    let out = under_limit("ulimit -Sn 30", &read);
    assert!(out.status.success(), "the soft limit was not raised: {}", text(&out.stderr));

    let out = under_limit("ulimit -Sn 30 && ulimit -Hn 30", &read);
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("Too many open files") && stderr.contains("ulimit -n"), "{stderr}");
}
