//! A short command whose reader has gone (`uraid examine ... | head -1`) ends quietly with
//! the status a shell gives a process SIGPIPE ends (141): it panicked in `println!` ("failed
//! printing to stdout: Broken pipe") and exited 101. Method: standard output is a pipe whose
//! reading end is closed before the command starts, so its first write fails.

mod md_common;

use md_common::{fixtures, unpack};
use std::process::{Command, Stdio};

#[test]
fn a_closed_standard_output_ends_a_short_command_quietly() {
    let (name, manifest) = fixtures().into_iter().next().unwrap();
    let members: Vec<_> = unpack(&name, &manifest).into_iter().map(|(_, p)| p).collect();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .arg("examine")
        .args(&members)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{:?}: {stderr}", out.status);
    assert!(stderr.is_empty(), "{stderr}");
}
