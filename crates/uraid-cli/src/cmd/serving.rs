//! The running array `uraid serve` holds: the management verbs' requests (the control
//! socket's `ArrayControl`), the stop that SIGINT, SIGTERM, SIGHUP or `uraid stop` asks for,
//! and the clean stop itself.

use anyhow::Context;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};
use std::fmt::Write as _;
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;
use uraid_md::control::{ArrayControl, ControlRequest, ControlResponse, ControlServer};
use uraid_md::status::ArrayStatus;
use uraid_md::{MdArray, MdError, SyncSpeed};
use uraid_nbd::BlockBackend;

enum StopState {
    Running,
    /// Someone asked; the serving loop is shutting the frontends down.
    Requested,
    /// The array has stopped: the outcome, for `uraid stop`'s answer.
    Stopped(Result<String, String>),
}

pub struct Serving {
    /// Requests share the array; the stop takes it, after they have finished.
    array: RwLock<Option<MdArray>>,
    stop: Mutex<StopState>,
    stop_changed: Condvar,
    /// Kept until the array has stopped, so that `uraid stop` gets its answer.
    control: Mutex<Option<ControlServer>>,
    /// The NBD server's counters and connection limit, for `uraid stats`, once it serves.
    nbd: Mutex<Option<uraid_nbd::StatsSource>>,
}

pub struct SignalGuard {
    handle: Handle,
    thread: JoinHandle<()>,
}

impl SignalGuard {
    pub fn close(self) {
        self.handle.close();
        let _ = self.thread.join();
    }
}

impl Serving {
    pub fn new() -> Serving {
        Serving {
            array: RwLock::new(None),
            stop: Mutex::new(StopState::Running),
            stop_changed: Condvar::new(),
            control: Mutex::new(None),
            nbd: Mutex::new(None),
        }
    }

    /// From here on `uraid stats` reports the NBD server's counters too.
    pub fn set_nbd_stats(&self, source: uraid_nbd::StatsSource) {
        *self.nbd.lock().unwrap_or_else(PoisonError::into_inner) = Some(source);
    }

    fn nbd_report(&self) -> Option<uraid_io::stats::NbdReport> {
        let nbd = self.nbd.lock().unwrap_or_else(PoisonError::into_inner);
        let source = nbd.as_ref()?;
        let s = source.snapshot();
        Some(uraid_io::stats::NbdReport {
            connections_active: s.connections_active,
            connections_max: source.connections_max().map(|m| m as u64),
            connections_accepted: s.connections_accepted,
            connections_over_limit: s.connections_over_limit,
            connections_refused: s.connections_refused,
            reads: s.reads,
            writes: s.writes,
            flushes: s.flushes,
            trims: s.trims,
            write_zeroes: s.write_zeroes,
            block_status: s.block_status,
            errors: s.errors,
            read_bytes: s.read_bytes,
            written_bytes: s.written_bytes,
        })
    }

    pub fn set_array(&self, md: MdArray) {
        *self.array.write().unwrap_or_else(PoisonError::into_inner) = Some(md);
    }

    /// The array's runtime as the frontends see it.
    pub fn runtime(&self) -> Option<Arc<dyn BlockBackend>> {
        let array = self.array.read().unwrap_or_else(PoisonError::into_inner);
        array.as_ref().map(|md| Arc::clone(md.runtime()) as Arc<dyn BlockBackend>)
    }

    pub fn keep_control(&self, control: ControlServer) {
        *self.control.lock().unwrap_or_else(PoisonError::into_inner) = Some(control);
    }

    /// SIGINT, SIGTERM and SIGHUP ask for a clean stop (a second one only says it is under
    /// way). SIGHUP is what a serve started from a terminal gets when the terminal or the ssh
    /// session goes away; by default it killed the process, leaving the array dirty and a
    /// stream's held partial stripes unwritten (qemu-nbd and nbdkit stop cleanly on it too).
    pub fn catch_signals(self: &Arc<Self>) -> std::io::Result<SignalGuard> {
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let handle = signals.handle();
        let serving = Arc::clone(self);
        let thread = std::thread::Builder::new().name("uraid-signals".into()).spawn(move || {
            for signal in signals.forever() {
                let name = match signal {
                    SIGINT => "SIGINT",
                    SIGHUP => "SIGHUP",
                    _ => "SIGTERM",
                };
                // Said before the stop starts, so that it comes first in the log.
                if serving.is_running() {
                    say!("uraid serve: {name}: stopping cleanly");
                } else {
                    say!("uraid serve: {name}: already stopping, please wait");
                }
                serving.request_stop();
            }
        })?;
        Ok(SignalGuard { handle, thread })
    }

    fn is_running(&self) -> bool {
        matches!(*self.stop.lock().unwrap_or_else(PoisonError::into_inner), StopState::Running)
    }

    /// Returns whether this request started the stop.
    fn request_stop(&self) -> bool {
        let mut stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
        let first = matches!(*stop, StopState::Running);
        if first {
            *stop = StopState::Requested;
            self.stop_changed.notify_all();
        }
        first
    }

    /// Waits for a stop request, reporting the array's state changes (a member failed, a
    /// rebuild started or finished) as they happen.
    pub fn monitor_until_stop(&self, name: &str) {
        let mut last = self.status().map(|s| summary(&s));
        // The state it starts in, when it is not plainly whole (degraded, syncing, spares).
        if let Some(line) =
            last.as_ref().filter(|l| !matches!(l.as_str(), "state active" | "state clean"))
        {
            say!("uraid serve: {name}: {line}");
        }
        let mut stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
        while matches!(*stop, StopState::Running) {
            stop = self
                .stop_changed
                .wait_timeout(stop, Duration::from_secs(1))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            drop(stop);
            let now = self.status().map(|s| summary(&s));
            if now != last {
                if let Some(line) = &now {
                    say!("uraid serve: {name}: {line}");
                }
                last = now;
            }
            stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn status(&self) -> Option<ArrayStatus> {
        let array = self.array.read().unwrap_or_else(PoisonError::into_inner);
        array.as_ref().map(MdArray::status)
    }

    /// md's clean stop, once the frontends have dropped the runtime; then `uraid stop` gets
    /// its answer and the control socket closes.
    pub fn stop_array(&self) -> anyhow::Result<String> {
        self.request_stop();
        let md = self.array.write().unwrap_or_else(PoisonError::into_inner).take();
        let outcome = match md {
            None => Err("the array was not running".to_owned()),
            Some(md) => {
                let before = md.status();
                md.stop().map(|()| stopped_message(&before)).map_err(|e| e.to_string())
            }
        };
        {
            let mut stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
            *stop = StopState::Stopped(outcome.clone());
            self.stop_changed.notify_all();
        }
        // Answers in flight (the `uraid stop` that asked) are written before it closes.
        drop(self.control.lock().unwrap_or_else(PoisonError::into_inner).take());
        outcome.map_err(anyhow::Error::msg).context("stopping the array")
    }

    fn wait_stopped(&self) -> Result<String, String> {
        let mut stop = self.stop.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let StopState::Stopped(outcome) = &*stop {
                return outcome.clone();
            }
            stop = self.stop_changed.wait(stop).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn with_array(&self, f: impl FnOnce(&MdArray) -> ControlResponse) -> ControlResponse {
        let array = self.array.read().unwrap_or_else(PoisonError::into_inner);
        match array.as_ref() {
            Some(md) => f(md),
            None => ControlResponse::err("the array is stopping"),
        }
    }
}

impl ArrayControl for Serving {
    fn handle(&self, request: ControlRequest) -> ControlResponse {
        let answer = |r: Result<String, MdError>| match r {
            Ok(message) => ControlResponse::ok(message),
            Err(e) => ControlResponse::err(e.to_string()),
        };
        match request {
            ControlRequest::Stop => {
                self.request_stop();
                match self.wait_stopped() {
                    Ok(message) => ControlResponse::ok(message),
                    Err(why) => ControlResponse::err(why),
                }
            }
            ControlRequest::Status => {
                self.with_array(|md| ControlResponse::with_status(md.status()))
            }
            ControlRequest::Stats => self.with_array(|md| {
                let mut stats = md.stats();
                stats.nbd = self.nbd_report();
                ControlResponse::with_stats(stats)
            }),
            ControlRequest::Fail { member } => self.with_array(|md| answer(md.fail(&member))),
            ControlRequest::Remove { member } => self.with_array(|md| answer(md.remove(&member))),
            ControlRequest::Add { path, force: false } => {
                self.with_array(|md| answer(md.add(&path)))
            }
            ControlRequest::Add { path, force: true } => {
                self.with_array(|md| answer(md.add_forced(&path)))
            }
            ControlRequest::Replace { member, with: Some(with), force: false } => {
                self.with_array(|md| answer(md.replace(&member, &with)))
            }
            ControlRequest::Replace { member, with: Some(with), force: true } => {
                self.with_array(|md| answer(md.replace_forced(&member, &with)))
            }
            ControlRequest::Replace { member, with: None, .. } => {
                self.with_array(|md| answer(md.replace_from_spare(&member)))
            }
            ControlRequest::Check { span } => {
                self.with_array(|md| answer(md.scrub_span(false, span)))
            }
            ControlRequest::Repair { span } => {
                self.with_array(|md| answer(md.scrub_span(true, span)))
            }
            ControlRequest::Idle => self.with_array(|md| answer(md.stop_scrub())),
            ControlRequest::Freeze => self.with_array(|md| answer(Ok(md.freeze()))),
            ControlRequest::SyncSpeed { min_kib, max_kib } => self.with_array(|md| {
                let now = md.status();
                // md: a limit of 0 is the system's limit.
                let or_system = |kib: u64, system: u64| if kib == 0 { system } else { kib };
                let speed = SyncSpeed {
                    min_kib: or_system(
                        min_kib.unwrap_or(now.sync_speed_min_kib),
                        uraid_md::sync::DEFAULT_SPEED_MIN_KIB,
                    ),
                    max_kib: or_system(
                        max_kib.unwrap_or(now.sync_speed_max_kib),
                        uraid_md::sync::DEFAULT_SPEED_MAX_KIB,
                    ),
                };
                if speed.min_kib > speed.max_kib {
                    return ControlResponse::err(format!(
                        "sync_speed_min {} KiB/s is above sync_speed_max {} KiB/s",
                        speed.min_kib, speed.max_kib
                    ));
                }
                md.set_sync_speed(speed);
                ControlResponse::with_status(md.status())
            }),
        }
    }
}

/// One line for the state changes an operator wants to see: the array state and which
/// members are not "active sync".
fn summary(s: &ArrayStatus) -> String {
    // Clean and active alternate with the writes (md's safe mode): not a change to report.
    // Read-only, the superblocks' word stands.
    let state = match s.state.strip_prefix("clean") {
        Some(r) if !s.read_only => format!("active{r}"),
        _ => s.state.clone(),
    };
    let mut line = format!("state {state}");
    for m in s.members.iter().filter(|m| m.state != "active sync") {
        let slot = m.slot.map_or_else(String::new, |slot| format!(" (slot {slot})"));
        let _ = write!(line, "; {}{slot} {}", m.path, m.state);
    }
    line
}

fn stopped_message(before: &ArrayStatus) -> String {
    if before.read_only {
        "stopped: read-only, nothing was written to the members".into()
    } else if before.failed() {
        // Faulty members take no superblock (md's neither): when every one failed, none did.
        let written = if before.members.iter().any(|m| !matches!(&*m.state, "faulty" | "removed")) {
            "superblocks written"
        } else {
            "no member left to take a superblock (each has the last one it took)"
        };
        format!(
            "stopped FAILED: {written}; more members are missing than the array survives: \
             once their devices are back, `uraid serve --force` (or assemble --force) starts it \
             from the freshest of them, as mdadm --assemble --force"
        )
    } else if before.degraded {
        "stopped degraded: superblocks written, missing members stay rebuild targets".into()
    } else if before.sync.is_some() {
        "stopped: superblocks written, the sync resumes from its recorded position".into()
    } else {
        "stopped clean: superblocks written".into()
    }
}

#[cfg(test)]
mod tests {
    //! Goal: the stop's last line says what reached the members. Method: hand-built statuses.

    use super::*;
    use uraid_md::status::MemberStatus;

    fn failed(states: &[&str]) -> ArrayStatus {
        let members = states
            .iter()
            .map(|state| MemberStatus { state: (*state).into(), ..MemberStatus::default() })
            .collect();
        ArrayStatus { level: 5, raid_disks: 4, members, ..ArrayStatus::default() }
    }

    #[test]
    fn a_failed_stop_says_whether_any_member_took_a_superblock() {
        let some = failed(&["active sync", "active sync", "faulty", "faulty", "removed"]);
        assert!(some.failed());
        assert!(stopped_message(&some).starts_with("stopped FAILED: superblocks written;"));
        let none = failed(&["faulty", "faulty", "faulty", "faulty", "removed"]);
        assert!(stopped_message(&none).starts_with("stopped FAILED: no member left"));
    }
}
