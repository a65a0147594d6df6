//! What the verbs that drive a running array share: one request over its control socket
//! (`uraid_md::control`), refusals turned into errors, `--json` printing.

use anyhow::{Context, bail};
use std::path::PathBuf;
use uraid_md::control::{self, ControlRequest, ControlResponse};
use uraid_md::status::ArrayStatus;

/// The verb a request stands for, as errors name it.
fn verb(req: &ControlRequest) -> &'static str {
    match req {
        ControlRequest::Status => "status",
        ControlRequest::Stats => "stats",
        ControlRequest::Fail { .. } => "fail",
        ControlRequest::Remove { .. } => "remove",
        ControlRequest::Add { .. } => "add",
        ControlRequest::Replace { .. } => "replace",
        ControlRequest::Check { .. } => "check",
        ControlRequest::Repair { .. } => "repair",
        ControlRequest::Idle => "idle",
        ControlRequest::Freeze => "freeze",
        ControlRequest::Stop => "stop",
        ControlRequest::SyncSpeed { .. } => "sync-speed",
    }
}

pub fn socket(name: &str) -> anyhow::Result<PathBuf> {
    Ok(control::socket_path(name)?)
}

/// One exchange; the error for an array that is not running names it and its socket.
pub fn send(name: &str, req: &ControlRequest) -> anyhow::Result<ControlResponse> {
    Ok(control::request(&socket(name)?, req)?)
}

/// Sends `req`, prints the answer as JSON when asked, and fails when the array refused.
pub fn send_ok(name: &str, req: &ControlRequest, json: bool) -> anyhow::Result<ControlResponse> {
    let response = send(name, req)?;
    if json {
        out!("{}", serde_json::to_string(&response)?);
    }
    if !response.ok {
        let why = response.error.as_deref().unwrap_or("no reason given");
        bail!("array {name} refused {}: {why}", verb(req));
    }
    Ok(response)
}

/// The array's status, or an error saying why there is none.
pub fn status_of(name: &str) -> anyhow::Result<ArrayStatus> {
    let response = send(name, &ControlRequest::Status)?;
    if !response.ok {
        let why = response.error.as_deref().unwrap_or("no reason given");
        bail!("array {name} refused status: {why}");
    }
    response.status.with_context(|| format!("array {name} answered status without one"))
}

/// The array's counters, or an error saying why there are none.
pub fn stats_of(name: &str) -> anyhow::Result<uraid_io::StatsReport> {
    let response = send(name, &ControlRequest::Stats)?;
    if !response.ok {
        let why = response.error.as_deref().unwrap_or("no reason given");
        bail!("array {name} refused stats: {why}");
    }
    response.stats.with_context(|| format!("array {name} answered stats without them"))
}

/// Sends a management request and reports the answer: JSON, or "NAME: message".
pub fn run_simple(name: &str, req: &ControlRequest, json: bool) -> anyhow::Result<()> {
    let response = send_ok(name, req, json)?;
    if !json {
        let message = response.message.unwrap_or_else(|| format!("{} done", verb(req)));
        out!("{name}: {message}");
    }
    Ok(())
}
