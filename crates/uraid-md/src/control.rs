//! The control socket between a running array (`uraid serve`) and the `uraid` verbs that drive
//! it (`detail`, `status`, `fail`, `add`, `check`, ...): one Unix stream socket per array,
//! `run_dir()/NAME.sock`.
//!
//! Protocol: the client connects, writes ONE request as a JSON line, the server answers with
//! ONE response as a JSON line and closes. One exchange per connection keeps both sides free
//! of framing state; a client that wants to watch progress simply asks again.
//!
//! Fault model: clients are local but untrusted in shape: a line longer than
//! `REQUEST_BYTES_MAX` or not valid JSON gets an error response, never a panic; a client that
//! stalls is dropped after `CLIENT_STALL`. A socket file left by a crashed array (nothing
//! answers on it) is replaced; a live one is never taken over.

use crate::status::ArrayStatus;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest request line the server reads. The largest real request names two paths.
pub const REQUEST_BYTES_MAX: usize = 64 << 10;
/// Longest response line a client reads: a status with hundreds of members fits easily.
pub const RESPONSE_BYTES_MAX: u64 = 16 << 20;
/// Requests handled at once; past that the server answers "busy" rather than spawn more.
const IN_FLIGHT_MAX: usize = 32;
/// How long the server waits for a client to send its line or take its answer.
const CLIENT_STALL: Duration = Duration::from_secs(10);
/// How long a client waits for an answer: a stop flushes the bitmap and writes every
/// superblock, which takes seconds, not minutes.
const ANSWER_WAIT: Duration = Duration::from_secs(120);
/// How long `shutdown` lets in-flight requests finish writing their answers.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// One request to a running array. `member` is a path as given at assemble, or a slot number
/// as text ("2").
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum ControlRequest {
    Status,
    /// The array's counters (`uraid stats`).
    Stats,
    Fail {
        member: String,
    },
    Remove {
        member: String,
    },
    Add {
        path: String,
        /// Even a device holding a member of another md array.
        #[serde(default)]
        force: bool,
    },
    Replace {
        member: String,
        /// None: one of the array's hot spares.
        #[serde(default)]
        with: Option<String>,
        /// Even onto a device holding a member of another md array.
        #[serde(default)]
        force: bool,
    },
    Check {
        /// Only these member sectors (md's sync_min and sync_max); None: the whole array.
        #[serde(default)]
        span: Option<ScrubSpan>,
    },
    Repair {
        #[serde(default)]
        span: Option<ScrubSpan>,
    },
    /// md's sync_action "idle": stop a running check or repair, or thaw a frozen array.
    Idle,
    /// md's sync_action "frozen": stop the running action and start none until thawed.
    Freeze,
    Stop,
    /// md's sync_speed_min / sync_speed_max in KiB/s per member; None leaves a limit as it
    /// is, so both None only reports the limits.
    SyncSpeed {
        min_kib: Option<u64>,
        max_kib: Option<u64>,
    },
}

/// Part of each member a check or repair covers: member sectors `from_sectors` to
/// `to_sectors` (md's sync_min and sync_max), rounded out to whole chunks by the array.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScrubSpan {
    pub from_sectors: u64,
    pub to_sectors: u64,
}

/// The answer to one request: `ok` with an optional message and status, or `error`.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub struct ControlResponse {
    pub ok: bool,
    pub error: Option<String>,
    pub message: Option<String>,
    pub status: Option<ArrayStatus>,
    /// The answer to `Stats`.
    #[serde(default)]
    pub stats: Option<uraid_io::StatsReport>,
}

impl ControlResponse {
    #[must_use]
    pub fn ok(message: impl Into<String>) -> ControlResponse {
        ControlResponse { ok: true, message: Some(message.into()), ..ControlResponse::default() }
    }

    #[must_use]
    pub fn err(message: impl Into<String>) -> ControlResponse {
        ControlResponse { ok: false, error: Some(message.into()), ..ControlResponse::default() }
    }

    /// The answer to `Status` (and to `SyncSpeed`, so the client sees the limits in force).
    #[must_use]
    pub fn with_status(status: ArrayStatus) -> ControlResponse {
        ControlResponse { ok: true, status: Some(status), ..ControlResponse::default() }
    }

    #[must_use]
    pub fn with_stats(stats: uraid_io::StatsReport) -> ControlResponse {
        ControlResponse { ok: true, stats: Some(stats), ..ControlResponse::default() }
    }
}

/// What a running array does with each request. The server calls `handle` on its own thread
/// per connection, so requests may arrive concurrently (a status poll during a slow `add`).
///
/// Expected answers: `Status` → `with_status`; `Check`/`Repair` start the action and answer
/// at once (the client polls `Status` to follow it); `Stop` answers once the array is
/// stopped, and the array process then calls `ControlServer::shutdown` (not from `handle`).
pub trait ArrayControl: Send + Sync + 'static {
    fn handle(&self, request: ControlRequest) -> ControlResponse;
}

/// Where control sockets live: `$URAID_RUN_DIR`; else `/run/uraid` for root, and for other
/// users `$XDG_RUNTIME_DIR/uraid` (or `/tmp/uraid-UID`), since only root may write `/run`.
/// `uraid serve` and the verbs call this alike, so they meet in the same place.
#[must_use]
pub fn run_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("URAID_RUN_DIR").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    // The owner of /proc/self is this process's effective user.
    let uid = fs::metadata("/proc/self").map_or(0, |m| m.uid());
    if uid == 0 {
        return PathBuf::from("/run/uraid");
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|dir| !dir.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("uraid"),
        None => PathBuf::from(format!("/tmp/uraid-{uid}")),
    }
}

/// The control socket of the array NAME: `run_dir()/NAME.sock`. A name must be one path
/// component, so that no name reaches outside the run directory.
pub fn socket_path(name: &str) -> io::Result<PathBuf> {
    let valid = !name.is_empty() && !name.contains(['/', '\0']) && name != "." && name != "..";
    if !valid {
        let why = format!("invalid array name {name:?}: it must be non-empty and have no '/'");
        return Err(io::Error::new(ErrorKind::InvalidInput, why));
    }
    Ok(run_dir().join(format!("{name}.sock")))
}

/// The array name a socket path stands for (`/run/uraid/md0.sock` → `md0`).
fn array_name(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.strip_suffix(".sock").map(str::to_owned).unwrap_or(name)
}

/// Sends one request to the array serving `path` and returns its answer. An array that is
/// not running is an `ErrorKind::NotFound` error that says so.
pub fn request(path: &Path, req: &ControlRequest) -> io::Result<ControlResponse> {
    let name = array_name(path);
    let mut stream = UnixStream::connect(path).map_err(|e| not_running(&name, path, &e))?;
    stream.set_read_timeout(Some(ANSWER_WAIT))?;
    let mut line = serde_json::to_vec(req)?;
    line.push(b'\n');
    stream.write_all(&line)?;
    let mut answer = Vec::new();
    BufReader::new((&stream).take(RESPONSE_BYTES_MAX)).read_until(b'\n', &mut answer).map_err(
        |e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => io::Error::new(
                ErrorKind::TimedOut,
                format!("array {name} did not answer within {} s", ANSWER_WAIT.as_secs()),
            ),
            _ => e,
        },
    )?;
    if answer.is_empty() {
        let why = format!("array {name} closed the control connection without answering");
        return Err(io::Error::new(ErrorKind::UnexpectedEof, why));
    }
    serde_json::from_slice(&answer).map_err(|e| {
        io::Error::new(ErrorKind::InvalidData, format!("array {name} answered badly: {e}"))
    })
}

fn not_running(name: &str, path: &Path, error: &io::Error) -> io::Error {
    match error.kind() {
        // No file, or a file left by an array that died: nobody listens either way.
        ErrorKind::NotFound | ErrorKind::ConnectionRefused => io::Error::new(
            ErrorKind::NotFound,
            format!("no running array named {name}: nothing listens on {}", path.display()),
        ),
        kind => io::Error::new(
            kind,
            format!("cannot reach array {name} at {}: {error}", path.display()),
        ),
    }
}

/// Names of the arrays whose sockets in `run_dir()` answer, sorted.
#[must_use]
pub fn running_arrays() -> Vec<String> {
    running_arrays_in(&run_dir())
}

/// `running_arrays` for an explicit directory (tests cannot change the environment safely).
#[must_use]
pub fn running_arrays_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sock"))
        .filter(|path| UnixStream::connect(path).is_ok())
        .map(|path| array_name(&path))
        .collect();
    names.sort();
    names
}

/// What the accept thread and the connection threads share.
struct Shared {
    control: Arc<dyn ArrayControl>,
    stopping: AtomicBool,
    in_flight: Mutex<usize>,
    drained: Condvar,
}

/// A running array's control socket: an accept thread and one short thread per connection.
/// Dropping it (or `shutdown`) stops accepting and removes the socket file.
pub struct ControlServer {
    path: PathBuf,
    /// (device, inode) of the socket file we bound, so that shutdown never removes (or
    /// wakes) a socket some later server put at the same path.
    identity: (u64, u64),
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Serves `control` on `path`. Refused when a live server already answers there; a stale
    /// socket file (its server died) is replaced.
    pub fn start(path: &Path, control: Arc<dyn ArrayControl>) -> io::Result<ControlServer> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        remove_stale_socket(path)?;
        let listener = UnixListener::bind(path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot listen on {}: {e}", path.display()))
        })?;
        // The socket can fail members and stop the array: only its owner may connect.
        fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
        let meta = fs::symlink_metadata(path)?;
        let shared = Arc::new(Shared {
            control,
            stopping: AtomicBool::new(false),
            in_flight: Mutex::new(0),
            drained: Condvar::new(),
        });
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("uraid-ctl-{}", array_name(path)))
            .spawn(move || accept_loop(&listener, &thread_shared))?;
        let identity = (meta.dev(), meta.ino());
        Ok(ControlServer { path: path.to_owned(), identity, shared, thread: Some(thread) })
    }

    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops accepting, lets answers in flight finish (briefly), removes the socket file.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(thread) = self.thread.take() else { return };
        self.shared.stopping.store(true, Ordering::SeqCst);
        let ours = fs::symlink_metadata(&self.path)
            .is_ok_and(|meta| (meta.dev(), meta.ino()) == self.identity);
        // The accept thread sleeps in accept(): a connection of our own wakes it. When the
        // file is no longer ours nothing can reach it, so the thread is left to the exit.
        if ours && UnixStream::connect(&self.path).is_ok() {
            thread.join().expect("the control accept thread does not panic");
        }
        if ours {
            let _ = fs::remove_file(&self.path);
        }
        let in_flight = self.shared.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        let _drained = self
            .shared
            .drained
            .wait_timeout_while(in_flight, DRAIN_WAIT, |n| *n > 0)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Removes a socket file nobody answers on (`uraid_io::unix_socket`); a live one is an
/// array already running.
fn remove_stale_socket(path: &Path) -> io::Result<()> {
    uraid_io::unix_socket::remove_stale(path).map_err(|e| match e.kind() {
        ErrorKind::AddrInUse => io::Error::new(
            ErrorKind::AddrInUse,
            format!(
                "array {} is already running: a server answers on {}",
                array_name(path),
                path.display()
            ),
        ),
        _ => e,
    })
}

fn accept_loop(listener: &UnixListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        match stream {
            Ok(stream) => dispatch(stream, shared),
            // EMFILE and friends pass; do not spin on them.
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// Hands a connection to its own thread, or answers "busy" inline when too many run.
fn dispatch(mut stream: UnixStream, shared: &Arc<Shared>) {
    {
        let mut in_flight = shared.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        if *in_flight >= IN_FLIGHT_MAX {
            drop(in_flight);
            let busy = format!("busy: {IN_FLIGHT_MAX} control requests in flight, try again");
            let _ = stream.set_write_timeout(Some(CLIENT_STALL));
            let _ = write_response(&mut stream, &ControlResponse::err(busy));
            return;
        }
        *in_flight += 1;
    }
    let guard = InFlight(Arc::clone(shared));
    let spawned = std::thread::Builder::new()
        .name("uraid-ctl-conn".into())
        .spawn(move || serve_connection(stream, &guard));
    // A failed spawn dropped the closure, and with it the guard and the stream.
    drop(spawned);
}

/// Counts a connection in flight until dropped, also when `handle` panics.
struct InFlight(Arc<Shared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut n = self.0.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        assert!(*n > 0, "in-flight count underflow");
        *n -= 1;
        self.0.drained.notify_all();
    }
}

fn serve_connection(mut stream: UnixStream, guard: &InFlight) {
    let _ = stream.set_read_timeout(Some(CLIENT_STALL));
    let _ = stream.set_write_timeout(Some(CLIENT_STALL));
    let response = match read_request(&stream) {
        // Connected and closed without a line: a liveness probe (running_arrays, start).
        Ok(None) | Err(_) => return,
        Ok(Some(Ok(request))) => guard.0.control.handle(request),
        Ok(Some(Err(why))) => ControlResponse::err(format!("malformed request: {why}")),
    };
    let _ = write_response(&mut stream, &response);
}

/// Reads one request line: None at once-EOF, Some(Err) for a line too long or not a request.
fn read_request(stream: &UnixStream) -> io::Result<Option<Result<ControlRequest, String>>> {
    let mut line = Vec::new();
    BufReader::new(stream.take(REQUEST_BYTES_MAX as u64 + 1)).read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Ok(None);
    }
    if line.len() > REQUEST_BYTES_MAX {
        return Ok(Some(Err(format!("line longer than {REQUEST_BYTES_MAX} bytes"))));
    }
    Ok(Some(serde_json::from_slice(&line).map_err(|e| e.to_string())))
}

fn write_response(stream: &mut UnixStream, response: &ControlResponse) -> io::Result<()> {
    let mut line = serde_json::to_vec(response)?;
    line.push(b'\n');
    stream.write_all(&line)
}

#[cfg(test)]
mod tests {
    //! Goal: every request survives the wire, and the server stays sane against bad clients
    //! and leftover sockets. Method: a fake ArrayControl that records what it was asked, on
    //! sockets in a fresh directory per test.

    use super::*;
    use std::sync::atomic::AtomicU64;

    #[derive(Default)]
    struct TestControl {
        seen: Mutex<Vec<ControlRequest>>,
    }

    impl ArrayControl for TestControl {
        fn handle(&self, request: ControlRequest) -> ControlResponse {
            self.seen.lock().unwrap().push(request.clone());
            match request {
                ControlRequest::Status => ControlResponse::with_status(ArrayStatus {
                    name: "md0".into(),
                    level: 6,
                    ..ArrayStatus::default()
                }),
                ControlRequest::Fail { member } if member == "9" => {
                    ControlResponse::err("no member in slot 9")
                }
                other => ControlResponse::ok(format!("did {other:?}")),
            }
        }
    }

    fn test_dir(tag: &str) -> PathBuf {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("uraid-ctl-{}-{tag}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn every_request() -> Vec<ControlRequest> {
        vec![
            ControlRequest::Status,
            ControlRequest::Fail { member: "/dev/sdc".into() },
            ControlRequest::Remove { member: "2".into() },
            ControlRequest::Add { path: "m6.img".into(), force: false },
            ControlRequest::Replace {
                member: "1".into(),
                with: Some("m7.img".into()),
                force: false,
            },
            ControlRequest::Replace { member: "1".into(), with: None, force: false },
            ControlRequest::Check { span: None },
            ControlRequest::Repair {
                span: Some(ScrubSpan { from_sectors: 128, to_sectors: 4096 }),
            },
            ControlRequest::Idle,
            ControlRequest::Freeze,
            ControlRequest::Stop,
            ControlRequest::SyncSpeed { min_kib: Some(51_200), max_kib: None },
            ControlRequest::SyncSpeed { min_kib: None, max_kib: None },
        ]
    }

    /// Sends raw bytes and returns the answer line.
    fn raw_exchange(path: &Path, bytes: &[u8]) -> ControlResponse {
        let mut stream = UnixStream::connect(path).unwrap();
        // The server may close before taking everything it was sent: ignore EPIPE.
        let _ = stream.write_all(bytes);
        let mut answer = Vec::new();
        BufReader::new(&stream).read_until(b'\n', &mut answer).unwrap();
        serde_json::from_slice(&answer).unwrap()
    }

    #[test]
    fn every_request_round_trips() {
        let dir = test_dir("roundtrip");
        let path = dir.join("md0.sock");
        let control = Arc::new(TestControl::default());
        let server = ControlServer::start(&path, control.clone()).unwrap();
        for req in every_request() {
            let answer = request(&path, &req).unwrap();
            assert!(answer.ok, "{req:?}: {answer:?}");
            assert!(answer.error.is_none());
        }
        assert_eq!(*control.seen.lock().unwrap(), every_request());
        let status = request(&path, &ControlRequest::Status).unwrap().status.unwrap();
        assert_eq!((status.name.as_str(), status.level), ("md0", 6));
        let refused = request(&path, &ControlRequest::Fail { member: "9".into() }).unwrap();
        assert!(!refused.ok);
        assert_eq!(refused.error.as_deref(), Some("no member in slot 9"));
        assert_eq!(running_arrays_in(&dir), vec!["md0".to_owned()]);
        server.shutdown();
        assert!(!path.exists(), "shutdown removes the socket file");
        assert!(running_arrays_in(&dir).is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wire_format_is_tagged_snake_case() {
        let req = ControlRequest::SyncSpeed { min_kib: Some(1), max_kib: None };
        let text = serde_json::to_string(&req).unwrap();
        assert_eq!(text, r#"{"cmd":"sync_speed","min_kib":1,"max_kib":null}"#);
        let back: ControlRequest = serde_json::from_str(r#"{"cmd":"check"}"#).unwrap();
        assert_eq!(back, ControlRequest::Check { span: None });
    }

    #[test]
    fn malformed_and_oversize_lines_get_errors() {
        let dir = test_dir("malformed");
        let path = dir.join("md0.sock");
        let control = Arc::new(TestControl::default());
        let _server = ControlServer::start(&path, control.clone()).unwrap();
        for bad in [&b"not json\n"[..], b"{\"cmd\":\"explode\"}\n", b"{\"cmd\":\"fail\"}\n"] {
            let answer = raw_exchange(&path, bad);
            assert!(!answer.ok);
            let error = answer.error.unwrap();
            assert!(error.starts_with("malformed request: "), "{error}");
        }
        let mut huge = vec![b'x'; REQUEST_BYTES_MAX * 2];
        huge.push(b'\n');
        let answer = raw_exchange(&path, &huge);
        assert!(answer.error.unwrap().contains("longer than 65536 bytes"));
        assert!(control.seen.lock().unwrap().is_empty(), "nothing bad reaches handle");
        // The server still answers after all that.
        assert!(request(&path, &ControlRequest::Status).unwrap().ok);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn second_server_on_a_live_path_is_refused() {
        let dir = test_dir("twice");
        let path = dir.join("md0.sock");
        let first = ControlServer::start(&path, Arc::new(TestControl::default())).unwrap();
        let Err(error) = ControlServer::start(&path, Arc::new(TestControl::default())) else {
            panic!("a second server on a live socket must be refused");
        };
        assert_eq!(error.kind(), ErrorKind::AddrInUse);
        assert!(error.to_string().contains("array md0 is already running"), "{error}");
        // The refusal left the first server serving.
        assert!(request(&path, &ControlRequest::Status).unwrap().ok);
        drop(first);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stale_socket_file_is_replaced() {
        let dir = test_dir("stale");
        let path = dir.join("md0.sock");
        fs::create_dir_all(&dir).unwrap();
        // A listener dropped without removing its file: what a crashed array leaves.
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let error = request(&path, &ControlRequest::Status).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::NotFound);
        assert!(error.to_string().starts_with("no running array named md0: nothing listens on"));
        assert!(running_arrays_in(&dir).is_empty());
        let server = ControlServer::start(&path, Arc::new(TestControl::default())).unwrap();
        assert!(request(&path, &ControlRequest::Status).unwrap().ok);
        drop(server);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn not_a_socket_is_left_alone() {
        let dir = test_dir("regular");
        let path = dir.join("md0.sock");
        fs::create_dir_all(&dir).unwrap();
        fs::write(&path, b"keep me").unwrap();
        assert!(ControlServer::start(&path, Arc::new(TestControl::default())).is_err());
        assert_eq!(fs::read(&path).unwrap(), b"keep me");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_map_to_socket_paths() {
        assert!(socket_path("md0").unwrap().ends_with("md0.sock"));
        for bad in ["", "a/b", "..", "/md0"] {
            assert_eq!(socket_path(bad).unwrap_err().kind(), ErrorKind::InvalidInput, "{bad:?}");
        }
        assert_eq!(array_name(Path::new("/run/uraid/md0.sock")), "md0");
    }
}
