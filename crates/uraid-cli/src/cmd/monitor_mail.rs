//! `uraid monitor --mail`: mdadm's MAILADDR. The events mdadm mails (Fail, FailSpare,
//! DegradedArray, TestMessage) go to an address through the local mail transfer agent's
//! `sendmail -t`, as mdadm sends them, with the array's /proc/mdstat-style status in the body
//! so that the reader sees what is left without logging in.

use anyhow::Context as _;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use uraid_md::monitor::Event;
use uraid_md::status::{ArrayStatus, render_mdstat};

/// Where mail goes and how.
pub struct Mail {
    pub to: String,
    pub from: String,
    pub sendmail: PathBuf,
}

/// The message for `event`, headers first (sendmail -t reads the recipients from them).
/// `status`: the array's as of the look that found the event (None once it is gone).
#[must_use]
pub fn message(mail: &Mail, event: &Event, status: Option<&ArrayStatus>, host: &str) -> String {
    let name = event.event.name();
    let array = &event.array;
    let mut text = format!(
        "From: {}\nTo: {}\nSubject: {name} event on {array}:{host}\n\n\
         This is an automatically generated mail message from uraid monitor\n\
         running on {host}\n\n\
         A {name} event had been detected on array {array}.\n\n",
        mail.from, mail.to
    );
    if let Some(member) = &event.member {
        let _ = write!(text, "It could be related to component device {member}.\n\n");
    }
    match status {
        Some(status) => {
            text += "Its status (`uraid status`, as /proc/mdstat) is now:\n\n";
            text += &render_mdstat(std::slice::from_ref(status));
        }
        None => text += "It is no longer running.\n",
    }
    text
}

/// Hands the message to sendmail and waits for it to take it.
pub fn send(mail: &Mail, message: &str) -> anyhow::Result<()> {
    let mut child = Command::new(&mail.sendmail)
        .arg("-t")
        .stdin(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", mail.sendmail.display()))?;
    let mut stdin = child.stdin.take().expect("piped");
    let written = stdin.write_all(message.as_bytes());
    drop(stdin);
    let status = child.wait()?;
    written.with_context(|| format!("writing to {}", mail.sendmail.display()))?;
    anyhow::ensure!(status.success(), "{} -t: {status}", mail.sendmail.display());
    Ok(())
}

/// This machine's name, as mdadm puts it in the subject.
#[must_use]
pub fn host_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname");
    name.map_or_else(|_| "localhost".to_owned(), |h| h.trim().to_owned())
}
