//! The servers fio talks to, all on Unix sockets (no TCP stack in the way, the same transport
//! for each): `nbdkit memory` as a child process, and uraid's NBD server in this process over a
//! runtime on shared memory members.
//!
//! Fairness: every export has the same size, every server runs with its defaults (nbdkit's
//! thread pool and sparse memory allocator; uraid's one engine worker per core, `uraid
//! serve`'s 1024 stripe heads), and each is prefilled the same way before it is measured.
//! A target with the partial parity log has its rings on the same memory members, before the
//! data.

use anyhow::{Context, Result, bail, ensure};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use uraid_core::array::ArrayConfig;
use uraid_core::{Geometry, Level, SECTOR_BYTES};
use uraid_md::ppl::{LogArea, MAX_LOG_BYTES};
use uraid_nbd::{Server, ServerConfig, ServerHandle};
use uraid_runtime::{Runtime, RuntimeConfig, SharedMemorySource};

/// What one target is.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub name: &'static str,
    /// None: nbdkit.
    pub level: Option<Level>,
    pub members: usize,
    pub chunk_bytes: u64,
    /// With the partial parity log (the write hole closed), as `uraid serve` runs by default:
    /// md's largest log area before the data, cut into its rings.
    pub log: bool,
}

impl Spec {
    #[must_use]
    pub fn data_disks(&self) -> usize {
        self.members - self.level.map_or(0, |l| usize::from(l.max_degraded()))
    }
}

pub struct Target {
    pub spec: Spec,
    socket: PathBuf,
    server: Running,
}

enum Running {
    Nbdkit(Child),
    Uraid { handle: Option<ServerHandle>, runtime: Option<Arc<Runtime>> },
}

/// Counts from a uraid target's runtime (`Target::io_counts`).
#[derive(Clone, Copy, Debug, Default)]
pub struct IoCounts {
    pub member_reads: u64,
    pub member_writes: u64,
    pub head_writes: u64,
}

impl IoCounts {
    /// Member reads and writes per stripe head write from `before` to `self` (None if no head
    /// wrote: a read job).
    #[must_use]
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    pub fn per_head_write_since(&self, before: &IoCounts) -> Option<(f64, f64)> {
        let heads = self.head_writes - before.head_writes;
        (heads > 0).then(|| {
            let per = |n: u64, b: u64| (n - b) as f64 / heads as f64;
            (
                per(self.member_reads, before.member_reads),
                per(self.member_writes, before.member_writes),
            )
        })
    }
}

/// `uraid serve`'s default stripe cache (md's stripe_cache_size).
const STRIPE_CACHE_SIZE: usize = 1024;

impl Target {
    /// Starts `spec`'s server on a new socket in `dir`, exporting `size_bytes`.
    pub fn start(spec: Spec, dir: &Path, size_bytes: u64) -> Result<Target> {
        let socket = dir.join(format!("{}.sock", spec.name));
        let server = match spec.level {
            None => Running::Nbdkit(start_nbdkit(&socket, dir, size_bytes)?),
            Some(level) => start_uraid(&spec, level, &socket, size_bytes)?,
        };
        Ok(Target { spec, socket, server })
    }

    /// libnbd's URI for this target (the default export).
    #[must_use]
    pub fn uri(&self) -> String {
        format!("nbd+unix:///?socket={}", self.socket.display())
    }

    /// The process serving it: its CPU time is the server's cost.
    #[must_use]
    pub fn pid(&self) -> u32 {
        match &self.server {
            Running::Nbdkit(child) => child.id(),
            Running::Uraid { .. } => std::process::id(),
        }
    }

    /// uraid's member I/Os (reads, writes, the log's included) and stripe head writes so far
    /// (a batch counts its stripe's heads); None for nbdkit.
    #[must_use]
    pub fn io_counts(&self) -> Option<IoCounts> {
        let Running::Uraid { runtime: Some(rt), .. } = &self.server else { return None };
        let stats = rt.stats();
        let a = stats.array;
        Some(IoCounts {
            member_reads: stats.members.iter().map(|m| m.read_ios).sum(),
            member_writes: stats.members.iter().map(|m| m.write_ios).sum(),
            head_writes: a.stripe_writes_full
                + a.stripe_writes_rmw
                + a.stripe_writes_rcw
                + a.stripe_writes_degraded,
        })
    }

    /// Stops the server: nbdkit killed, uraid's connections drained and its runtime shut down.
    pub fn stop(mut self) -> Result<()> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Result<()> {
        match &mut self.server {
            Running::Nbdkit(child) => {
                // Already gone is fine: the child is reaped either way.
                let _ = child.kill();
                child.wait().context("reaping nbdkit")?;
            }
            Running::Uraid { handle, runtime } => {
                if let Some(h) = handle.take() {
                    h.shutdown();
                }
                if let Some(rt) = runtime.take() {
                    let rt = Arc::try_unwrap(rt)
                        .map_err(|_| anyhow::anyhow!("the runtime is still shared"))?;
                    rt.shutdown().context("stopping the uraid runtime")?;
                }
            }
        }
        Ok(())
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        // After an error elsewhere: best effort, the error that got us here is the one to see.
        let _ = self.stop_inner();
    }
}

/// Why nbdkit's memory plugin cannot run here, if it cannot.
#[must_use]
pub fn nbdkit_missing() -> Option<String> {
    match Command::new("nbdkit").args(["memory", "--dump-plugin"]).output() {
        Err(e) => Some(format!("nbdkit is not installed ({e})")),
        Ok(o) if !o.status.success() => Some("nbdkit has no memory plugin".into()),
        Ok(_) => None,
    }
}

/// `nbdkit memory` on `socket`; returns once it accepts connections (it writes its pid file
/// only then).
fn start_nbdkit(socket: &Path, dir: &Path, size_bytes: u64) -> Result<Child> {
    let pid_file = dir.join("nbdkit.pid");
    let mut child = Command::new("nbdkit")
        .args(["--foreground", "--exit-with-parent", "-U"])
        .arg(socket)
        .arg("-P")
        .arg(&pid_file)
        .args(["memory", &format!("size={size_bytes}")])
        .stdin(Stdio::null())
        .spawn()
        .context("starting nbdkit")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pid_file.exists() {
        if let Some(status) = child.try_wait()? {
            bail!("nbdkit exited at start ({status})");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("nbdkit did not start within 10 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(child)
}

fn start_uraid(spec: &Spec, level: Level, socket: &Path, size_bytes: u64) -> Result<Running> {
    let data_disks = spec.data_disks() as u64;
    ensure!(
        size_bytes.is_multiple_of(data_disks * spec.chunk_bytes),
        "{size_bytes} bytes is not a whole number of {}'s stripes",
        spec.name
    );
    let member_bytes = size_bytes / data_disks;
    // The log's area goes before the data, where md's headroom is; uraid-md's cut of it.
    let log = spec.log.then(|| {
        let area = LogArea { offset_bytes: 0, bytes: MAX_LOG_BYTES };
        uraid_md::ppl::log_setup(area, [7; 16], 1)
    });
    let data_offset_bytes = log.as_ref().map_or(0, |l| l.bytes);
    let geometry = Geometry::new(level, level.default_layout(), spec.members, spec.chunk_bytes)?;
    let array = ArrayConfig {
        geometry,
        stripe_size_bytes: 4096,
        stripe_cache_size: STRIPE_CACHE_SIZE,
        member_sectors: member_bytes / SECTOR_BYTES,
    };
    let config = RuntimeConfig {
        array,
        workers: None,
        data_offset_bytes,
        write_intent: None,
        record_failures: false,
        write_back: true,
    };
    let source =
        SharedMemorySource::new(spec.members, usize::try_from(data_offset_bytes + member_bytes)?);
    let runtime = Arc::new(Runtime::start_with_log(&config, log.as_ref(), &source)?);
    ensure!(runtime.size_bytes() == size_bytes, "{} exports {}", spec.name, runtime.size_bytes());
    let stripe_bytes = u32::try_from(data_disks * spec.chunk_bytes)?;
    let config =
        ServerConfig { preferred_block_bytes: Some(stripe_bytes), ..ServerConfig::default() };
    let server = Server::new(runtime.clone(), config)?;
    let handle = server.serve_unix(socket).context("listening on the Unix socket")?;
    Ok(Running::Uraid { handle: Some(handle), runtime: Some(runtime) })
}

/// CPU seconds (user + system) `pid` has used so far, from /proc (clock ticks of 10 ms).
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').context("a /proc stat line")? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    Ok(ticks as f64 / USER_HZ)
}

/// The unit of /proc's CPU times: 100 on every architecture Linux ships for.
const USER_HZ: f64 = 100.0;
