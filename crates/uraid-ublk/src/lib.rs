//! uraid's ublk frontend: exports a `uraid_nbd::BlockBackend` (the uraid runtime, or memory)
//! as a Linux block device `/dev/ublkbN` through ublk_drv (Linux >= 6.0, `modprobe ublk_drv`,
//! root). The kernel queues block requests to us through io_uring commands on `/dev/ublkcN`;
//! we run them on the backend and commit the results.
//!
//! - `ctrl`: the control plane (`/dev/ublk-control`: ADD_DEV, SET_PARAMS, START_DEV,
//!   STOP_DEV, DEL_DEV).
//! - `queue`: one thread and one io_uring per hardware queue, owning the queue's tags.
//! - `sys`: the driver's ABI, encoded at explicit offsets; `map`: the mmaps.
//!
//! **Why io_uring commands directly, not the libublk crate.** libublk 0.4.8 (crates.io,
//! maintained, MIT/Apache) asks for io-uring ^0.7.12, which our 0.7 satisfies, but it brings
//! 84 crates (smol and its async stack, serde, and bindgen with clang-sys for its `-sys`
//! crate). Measured here: a clean `cargo build` of it ran 3.5 minutes on 2 cores and then
//! failed, since bindgen needs libclang at build time (one more CI install). Its queues are
//! async tasks on smol, while our backends complete through callbacks on their own threads.
//! What we need (fetch, hand the request to the backend, commit) is ~700 lines over crates
//! the workspace already has, and owning it keeps the one unsafe contract (memory named in
//! an io_uring command outlives it) in a few short places with their reasons beside them.
//!
//! Semantics: the device advertises a volatile write cache with FUA, so the kernel sends
//! FLUSH and FUA writes and a write is acknowledged when the backend has finished it (durable
//! with FUA), exactly what the NBD frontend promises. DISCARD goes to the backend's discard;
//! WRITE_ZEROES is a write of zeroes. `UblkDevice::stop` is the graceful stop: STOP_DEV
//! removes the disk (the block layer drains what is in flight, which our queues still
//! serve), the queues end, the backend is flushed, and DEL_DEV frees the device.

/// `eprintln!` that never panics. eprintln! panics when stderr is gone (a closed pipe:
/// EPIPE, since Rust ignores SIGPIPE); in a serve whose log reader went away that killed the
/// signal thread at its first message, and SIGTERM then went unheard (seen with `| head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod ctrl;
mod map;
mod queue;
mod sys;

pub use queue::QueueStats as UblkStats;
use queue::{Inbox, QueueSetup};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thiserror::Error;
use uraid_nbd::{BackendError, BackendOp, BlockBackend};

#[derive(Clone, Debug)]
pub struct UblkConfig {
    /// The device number N of `/dev/ublkbN`; `None` lets the driver choose.
    pub dev_id: Option<u32>,
    /// Hardware queues, one thread each (the driver caps them at the CPU count).
    pub queues: u16,
    /// Requests in flight per queue (at most 4096).
    pub queue_depth: u16,
    /// The largest request, a multiple of 4096: each tag has a buffer of this size.
    pub max_io_bytes: u32,
    /// Advertise a read-only disk.
    pub read_only: bool,
    /// The optimal I/O size the disk advertises (md's full stripe); default the backend's.
    pub preferred_block_bytes: Option<u32>,
}

impl Default for UblkConfig {
    fn default() -> UblkConfig {
        UblkConfig {
            dev_id: None,
            queues: 1,
            queue_depth: 64,
            max_io_bytes: 512 << 10,
            read_only: false,
            preferred_block_bytes: None,
        }
    }
}

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum UblkError {
    #[error("ublk is not available: /dev/ublk-control missing (modprobe ublk_drv; Linux >= 6.0)")]
    NotAvailable,
    #[error("ublk needs root (CAP_SYS_ADMIN) to add a device: {0}")]
    Permission(#[source] io::Error),
    #[error("invalid ublk configuration: {0}")]
    Config(String),
    #[error("ublk {what} of device {dev_id} failed: {source}")]
    Command { what: &'static str, dev_id: u32, source: io::Error },
    #[error("ublk: {what}: {source}")]
    Io { what: &'static str, source: io::Error },
    #[error("{} did not appear (is devtmpfs or udev running?)", .0.display())]
    NoDeviceNode(PathBuf),
    #[error("flushing the backend at stop: {0}")]
    Flush(BackendError),
}

/// The boundary to the kernel: what a failed backend operation becomes in the request's
/// completion (the block layer turns it into EIO or EINVAL for the caller).
#[must_use]
pub fn errno(e: &BackendError) -> i32 {
    match e {
        BackendError::OutOfRange { .. } | BackendError::Unaligned { .. } => libc::EINVAL,
        BackendError::NotSupported(_) => libc::EOPNOTSUPP,
        _ => libc::EIO,
    }
}

/// A running `/dev/ublkbN`. Dropping it stops it as `stop` does, ignoring errors.
pub struct UblkDevice {
    id: u32,
    ctrl: ctrl::Control,
    backend: Arc<dyn BlockBackend>,
    cdev: Option<Arc<File>>,
    queues: Vec<(JoinHandle<UblkStats>, Arc<Inbox>)>,
    stopping: Arc<AtomicBool>,
    stopped: bool,
}

impl UblkDevice {
    /// Adds the device, starts its queues and the disk; returns once `/dev/ublkbN` exists.
    pub fn start(
        backend: Arc<dyn BlockBackend>,
        config: &UblkConfig,
    ) -> Result<UblkDevice, UblkError> {
        let size = backend.size_bytes();
        check_config(config, size)?;
        let mut ctrl = ctrl::Control::open()?;
        let want = sys::DevInfo {
            nr_hw_queues: config.queues,
            queue_depth: config.queue_depth,
            max_io_buf_bytes: config.max_io_bytes,
            dev_id: config.dev_id.unwrap_or(u32::MAX),
            flags: sys::F_CMD_IOCTL_ENCODE,
        };
        let info = ctrl.add_dev(&want)?;
        let mut device = UblkDevice {
            id: info.dev_id,
            ctrl,
            backend,
            cdev: None,
            queues: Vec::new(),
            stopping: Arc::new(AtomicBool::new(false)),
            stopped: false,
        };
        // From here on a failure drops `device`, which stops and deletes what was added.
        let discard = device.backend.can_discard();
        let params = params(config, &info, size, device.backend.preferred_block_bytes(), discard);
        device.ctrl.set_params(info.dev_id, &params)?;
        device.start_queues(&info)?;
        device.ctrl.start_dev(info.dev_id)?;
        wait_for(&device.block_path())?;
        Ok(device)
    }

    #[must_use]
    pub fn id(&self) -> u32 {
        self.id
    }

    #[must_use]
    pub fn block_path(&self) -> PathBuf {
        PathBuf::from(format!("/dev/ublkb{}", self.id))
    }

    /// The graceful stop: STOP_DEV (the kernel drains in-flight requests through our queues
    /// and removes the disk), the queues end, the backend is flushed, DEL_DEV. Returns what
    /// the queues served.
    pub fn stop(mut self) -> Result<UblkStats, UblkError> {
        self.shutdown()
    }

    fn start_queues(&mut self, info: &sys::DevInfo) -> Result<(), UblkError> {
        let path = PathBuf::from(format!("/dev/ublkc{}", self.id));
        wait_for(&path)?;
        let cdev = OpenOptions::new().read(true).write(true).open(&path);
        let cdev =
            Arc::new(cdev.map_err(|source| UblkError::Io { what: "opening /dev/ublkcN", source })?);
        self.cdev = Some(Arc::clone(&cdev));
        let (ready_tx, ready_rx) = mpsc::sync_channel(usize::from(info.nr_hw_queues));
        let mut inboxes = Vec::new();
        for q_id in 0..info.nr_hw_queues {
            let setup = QueueSetup {
                q_id,
                depth: info.queue_depth,
                buf_bytes: info.max_io_buf_bytes as usize,
                cdev: Arc::clone(&cdev),
                backend: Arc::clone(&self.backend),
                encoded: self.ctrl.encoded(),
                stopping: Arc::clone(&self.stopping),
            };
            let thread = queue::spawn(setup, ready_tx.clone())
                .map_err(|source| UblkError::Io { what: "spawning a queue thread", source })?;
            inboxes.push(thread);
        }
        let mut first_error = None;
        for thread in inboxes {
            match ready_rx.recv().expect("every queue thread reports once") {
                Ok(inbox) => self.queues.push((thread, inbox)),
                Err(e) => {
                    let _ = thread.join();
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn shutdown(&mut self) -> Result<UblkStats, UblkError> {
        if self.stopped {
            return Ok(UblkStats::default());
        }
        self.stopped = true;
        // Before START_DEV succeeded there is no disk: STOP_DEV then only aborts the fetches.
        let stop = self.ctrl.stop_dev(self.id);
        self.stopping.store(true, Ordering::SeqCst);
        let mut stats = UblkStats::default();
        for (thread, inbox) in self.queues.drain(..) {
            inbox.wake();
            let q =
                thread.join().map_err(|_| UblkError::Config("a queue thread panicked".into()))?;
            stats = add(stats, q);
        }
        let flushed = flush(self.backend.as_ref());
        // DEL_DEV waits until /dev/ublkcN is closed.
        self.cdev = None;
        let deleted = self.ctrl.del_dev(self.id);
        stop?;
        flushed?;
        deleted?;
        Ok(stats)
    }
}

impl Drop for UblkDevice {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

fn check_config(config: &UblkConfig, size: u64) -> Result<(), UblkError> {
    let bad = |why: String| Err(UblkError::Config(why));
    if config.queues == 0 {
        return bad("at least one queue".into());
    }
    if config.queue_depth == 0 || config.queue_depth > sys::MAX_QUEUE_DEPTH {
        return bad(format!("queue depth {} is not in 1..=4096", config.queue_depth));
    }
    if config.max_io_bytes < 4096 || !config.max_io_bytes.is_multiple_of(4096) {
        return bad(format!(
            "max I/O {} bytes is not a positive multiple of 4096",
            config.max_io_bytes
        ));
    }
    if size == 0 || !size.is_multiple_of(512) {
        return bad(format!("the backend's size {size} is not a positive multiple of 512"));
    }
    Ok(())
}

/// 512-byte logical blocks (the backend takes any whole sector), 4 KiB physical blocks (the
/// stripe cache's unit: smaller writes read first), the preferred block as the optimal size.
fn params(
    config: &UblkConfig,
    info: &sys::DevInfo,
    size: u64,
    backend_pref: u32,
    discard: bool,
) -> sys::Params {
    let preferred = config.preferred_block_bytes.unwrap_or(backend_pref).max(4096);
    let max_sectors = info.max_io_buf_bytes / 512;
    let mut attrs = sys::ATTR_VOLATILE_CACHE | sys::ATTR_FUA;
    if config.read_only {
        attrs |= sys::ATTR_READ_ONLY;
    }
    sys::Params {
        attrs,
        logical_bs_shift: 9,
        physical_bs_shift: 12,
        io_opt_shift: preferred.ilog2() as u8,
        io_min_shift: 12,
        max_sectors,
        dev_sectors: size / 512,
        discard_granularity: 4096,
        // None where the backend takes no discard: the kernel then offers none.
        max_discard_sectors: if discard { max_sectors } else { 0 },
        max_write_zeroes_sectors: max_sectors,
    }
}

fn flush(backend: &dyn BlockBackend) -> Result<(), UblkError> {
    let (tx, rx) = mpsc::channel();
    backend.submit(BackendOp::Flush, Box::new(move |r| drop(tx.send(r))));
    match rx.recv() {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(UblkError::Flush(e)),
        Err(_) => Err(UblkError::Flush(BackendError::Io("the backend dropped the flush".into()))),
    }
}

/// Device nodes appear shortly after the driver registers them (devtmpfs or udev).
fn wait_for(path: &Path) -> Result<(), UblkError> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !path.exists() {
        if Instant::now() > deadline {
            return Err(UblkError::NoDeviceNode(path.to_owned()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

fn add(a: UblkStats, b: UblkStats) -> UblkStats {
    UblkStats {
        reads: a.reads + b.reads,
        writes: a.writes + b.writes,
        flushes: a.flushes + b.flushes,
        discards: a.discards + b.discards,
        write_zeroes: a.write_zeroes + b.write_zeroes,
        errors: a.errors + b.errors,
    }
}
