//! `uraid serve`: assemble an md array and serve it as a block device over NBD, with the
//! control socket the management verbs talk to, until SIGINT, SIGTERM, SIGHUP or `uraid stop`.
//!
//! Stopping is md's clean stop seen from a client: listeners close, every request already
//! read is answered (NBD drains), the array is flushed, the sync process records where it
//! got to, and the superblocks say clean. Only then does `uraid stop` get its answer.

use crate::args::parse_size;
use crate::cmd::demo;
use crate::cmd::serving::Serving;
use anyhow::{Context, bail};
use clap::Args;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use uraid_io::held_by_a_server;
use uraid_md::control::{self, ControlServer};
use uraid_md::members::layout_name;
use uraid_md::{ArrayInfo, ConsistencyPolicy, MdArray, MdOptions};
use uraid_nbd::{BlockBackend, ListenAddr, OverLimitHook, Server, ServerConfig, ServerHandle};
use uraid_ublk::{UblkConfig, UblkDevice};

#[derive(Args)]
#[command(
    about = "Serve an md array over NBD (no members: a demo RAID6 on local files)",
    long_about = "Assemble an md v1.2 array from its members (md's rules, as `uraid assemble`) \
and serve it as a block device over NBD, on TCP and/or a Unix socket, until SIGINT, SIGTERM, \
SIGHUP (the terminal closed) or `uraid stop NAME`. While it runs, the management verbs \
(status, detail, fail, remove, add, replace, check, repair, sync-speed, stop) reach it by its \
name through its control socket in \
$URAID_RUN_DIR (default /run/uraid). A failed member is marked faulty and a spare rebuilt onto \
at once; a resync after an unclean stop runs in the background. Stopping drains every request \
already received, flushes, and marks the array clean.\n\nWith no members, makes (or reopens) \
a demo RAID6 of six 1 GiB sparse files in --demo-dir and serves that.",
    after_help = "Examples:\n  uraid serve\n  uraid serve --listen 0.0.0.0:10809 /dev/sdb \
/dev/sdc /dev/sdd /dev/sde\n  uraid serve --unix /run/uraid/md0.nbd --no-tcp --name md0 m*.img\n  \
uraid serve --ublk --no-tcp /dev/sdb /dev/sdc /dev/sdd   (as /dev/ublkb0: modprobe ublk_drv)\n\
Connect:\n  nbdinfo nbd://127.0.0.1:10809\n  qemu-img info nbd://127.0.0.1:10809/uraid\n  \
nbd-client 127.0.0.1 10809 /dev/nbd0 -N uraid"
)]
// Command-line switches are independent flags, not a state machine.
#[allow(clippy::struct_excessive_bools)]
pub struct ServeArgs {
    /// Member devices or image files, in any order (none: the demo array; with --config or
    /// --scan, its DEVICE lines').
    pub(crate) members: Vec<String>,
    /// TCP address to serve NBD on.
    #[arg(long, default_value = "127.0.0.1:10809", value_name = "ADDR:PORT")]
    pub(crate) listen: String,
    /// Do not serve NBD on TCP (with --unix).
    #[arg(long)]
    pub(crate) no_tcp: bool,
    /// Also serve NBD on this Unix socket.
    #[arg(long, value_name = "PATH")]
    pub(crate) unix: Option<PathBuf>,
    /// The array's name for the management verbs (default: the superblock's name).
    #[arg(short = 'N', long)]
    pub(crate) name: Option<String>,
    /// The NBD export name (clients may also ask for the empty name).
    #[arg(long, default_value = uraid_nbd::DEFAULT_EXPORT_NAME)]
    pub(crate) export_name: String,
    /// md's read-only array (mdadm --assemble --readonly): nothing is written to any member.
    /// Members are opened read-only; no superblock, bitmap or log update, no resync of a dirty
    /// array, no rebuild onto a spare, no log replay; fail, remove, add, replace, check and
    /// repair are refused; clients' writes, trims and zeroing fail with EPERM. For looking at
    /// an array (mount it read-only, fsck -n) before deciding what to do with it. A read error
    /// is answered from parity and fails the member in memory only.
    #[arg(long, visible_alias = "readonly", conflicts_with = "export_read_only")]
    pub(crate) read_only: bool,
    /// Only the export is read-only: clients' writes, trims and zeroing fail with EPERM, while
    /// the array runs as md runs it (superblocks updated, a resync if it is dirty, rebuilds).
    #[arg(long)]
    pub(crate) export_read_only: bool,
    /// NBD connections served at once, 1-65536 (qemu-nbd's --shared). Each holds a thread
    /// and a share of the requests in flight; a client beyond them is refused with the
    /// reason, and served once another has closed.
    #[arg(long, value_name = "N", default_value_t = uraid_nbd::DEFAULT_CONNECTIONS_MAX as u32,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub(crate) max_connections: u32,
    /// Where the demo array's files live (used when no members are given).
    #[arg(long, default_value = "uraid-demo", value_name = "DIR")]
    pub(crate) demo_dir: PathBuf,
    /// mdadm's --force: start a dirty degraded array (parity may not match: data rebuilt
    /// from it may be wrong), and when more members are stale than the array survives (they
    /// failed one after another), bring the freshest of them back until it can run (blocks
    /// written after they dropped out read back old).
    #[arg(short, long)]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) select: crate::cmd::scan::Selection,
    /// mdadm's --consistency-policy: ppl closes the write hole with the partial parity log
    /// (when md's free space before the data has room for it); resync leaves it open, as md
    /// does by default, and saves the log's cost (see docs/write-hole.md).
    #[arg(long, value_enum, default_value_t = Policy::Ppl)]
    pub(crate) consistency_policy: Policy,
    /// md's stripe_size: the unit the stripe cache works in, a power of two from 4K up to the
    /// chunk, with its unit (4K, 16K, 16384b): md's sysfs file takes bytes and mdadm's sizes
    /// KiB, so a bare number is refused.
    #[arg(long, default_value = "4K")]
    pub(crate) stripe_size: String,
    /// md's stripe_cache_size: stripe heads in the cache, each a stripe unit of every member
    /// (default: 1024, fewer on wide arrays to stay within 64 MiB, never below two chunk rows).
    #[arg(long)]
    pub(crate) stripe_cache_size: Option<usize>,
    /// Print the "serving" report as one JSON object on standard output instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Engine worker threads, 1-64 (default: one per core; one when the array has a bitmap;
    /// with the partial parity log at most its 8 rings)
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(crate) workers: Option<u16>,
    /// Also serve the array as the block device /dev/ublkbN (Linux >= 6.0, ublk_drv, root);
    /// with --no-tcp and no --unix, only that.
    #[arg(long)]
    pub(crate) ublk: bool,
    /// The N of /dev/ublkbN (default: the first free one).
    #[arg(long, value_name = "N", requires = "ublk")]
    pub(crate) ublk_id: Option<u32>,
    /// Write a sequential stream's partial stripes at once. By default they are acknowledged
    /// and held in memory until the stream fills them (then written as full stripes, with no
    /// reads), or until a flush, or 2 ms with no request: durable at the next flush, as data
    /// in a disk's volatile write cache is.
    #[arg(long)]
    pub(crate) no_write_back: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Policy {
    Ppl,
    Resync,
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let demo = args.members.is_empty() && args.select.needs_devices();
    let (paths, uuid): (Vec<PathBuf>, _) = if demo {
        (demo::prepare(&args.demo_dir)?, None)
    } else {
        let selected = args.select.resolve_named(&args.members, args.name.as_deref())?;
        (selected.members.iter().map(PathBuf::from).collect(), selected.uuid)
    };
    let options = MdOptions {
        force: args.force,
        consistency_policy: match args.consistency_policy {
            Policy::Ppl => ConsistencyPolicy::Ppl,
            Policy::Resync => ConsistencyPolicy::Resync,
        },
        uuid,
        stripe_size_bytes: parse_stripe_size(&args.stripe_size)?,
        stripe_cache_size: args.stripe_cache_size,
        workers: args.workers.map(usize::from),
        write_back: !args.no_write_back,
        label: args.name.clone(),
        read_only: args.read_only,
        ..MdOptions::default()
    };
    // Signals are caught from here on: a SIGINT during a long assemble must not leave the
    // superblocks active with nobody to mark them clean.
    let serving = Arc::new(Serving::new());
    let signals = serving.catch_signals().context("installing SIGINT/SIGTERM/SIGHUP handlers")?;
    refuse_a_name_in_use(args.name.as_deref(), &paths)?;
    if args.no_tcp && args.unix.is_none() && !args.ublk {
        bail!("nothing to serve on: --no-tcp without --unix or --ublk");
    }
    // The port before the array: a port taken (a second array on the default one) is refused
    // before the assembly marks the superblocks active.
    let tcp = (!args.no_tcp).then(|| TcpListener::bind(args.listen.as_str())).transpose().map_err(
        |e| {
            // Only a port taken has another server behind it; a bad address is just bad.
            let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
                " (another server there? use --listen)"
            } else {
                " (--listen takes ADDRESS:PORT, e.g. 127.0.0.1:10809 or [::1]:10809)"
            };
            anyhow::Error::new(e).context(format!("cannot serve NBD on {}{hint}", args.listen))
        },
    )?;
    // The Unix socket too: a path that cannot be bound (too long, no such directory) is
    // refused before the array starts.
    let unix = args.unix.as_deref().map(BoundUnix::bind).transpose()?;
    let md = MdArray::assemble(&paths, &options).context("cannot start the array")?;
    // The control socket's name, and how messages name the array (`MdOptions::label`).
    let name = md.info().label.clone();
    let info = md.info().clone();
    tell_started(args, &md, &paths);
    serving.set_array(md);
    let served = serve_until_stopped(args, &serving, (&name, &info), (tcp, unix));
    // Whatever happened to the frontends, the array is stopped cleanly.
    let stopped = serving.stop_array();
    signals.close();
    served?;
    let message = stopped?;
    say!("uraid serve: {name}: {message}");
    Ok(())
}

/// A default stripe cache cut below 1024 heads (wide arrays, large stripe units; it is
/// allocated whole): said, with the knob.
fn tell_stripe_cache(name: &str, info: &ArrayInfo, stripe_size_bytes: u64) {
    use uraid_md::stripe_cache::{DEFAULT_STRIPE_CACHE_SIZE, default_stripe_cache_size};
    let members = u64::from(info.raid_disks);
    let heads = default_stripe_cache_size(members, info.chunk_sectors * 512, stripe_size_bytes);
    if heads < DEFAULT_STRIPE_CACHE_SIZE {
        let mib = (heads as u64 * members * stripe_size_bytes) >> 20;
        say!(
            "uraid serve: {name}: stripe cache: {heads} heads of {members} x {} KiB ({mib} MiB): \
             the default 1024 cut to stay within 64 MiB, never below two chunk rows \
             (--stripe-cache-size sets it)",
            stripe_size_bytes >> 10
        );
    }
}

/// `--unix`'s socket, bound before the array starts; its file goes if it is never served.
struct BoundUnix {
    listener: Option<UnixListener>,
    path: PathBuf,
}

impl BoundUnix {
    fn bind(path: &Path) -> anyhow::Result<BoundUnix> {
        let context = || format!("cannot serve NBD on {}", path.display());
        uraid_io::unix_socket::remove_stale(path).with_context(context)?;
        // sun_path holds 108 bytes with the terminating NUL; std's "path must be shorter
        // than SUN_LEN" does not say how long either is.
        let len = path.as_os_str().len();
        if len > 107 {
            bail!("{}: a Unix socket path is at most 107 bytes, this one {len}", context());
        }
        let listener = UnixListener::bind(path).with_context(context)?;
        Ok(BoundUnix { listener: Some(listener), path: path.to_owned() })
    }

    fn serve(mut self, server: &Server) -> std::io::Result<ServerHandle> {
        let listener = self.listener.take().expect("served once");
        server.serve_unix_on(listener, self.path.clone())
    }
}

impl Drop for BoundUnix {
    fn drop(&mut self) {
        if self.listener.is_some() {
            // Ours, made by bind; the server's handle removes it once served.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What the start did that an operator should hear of: sparse members, discard off, fewer
/// workers than asked, members left out or forced in, a forced dirty degraded start.
fn tell_started(args: &ServeArgs, md: &MdArray, paths: &[PathBuf]) {
    let info = md.info();
    let name = &info.label;
    for short in uraid_io::file_space::sparse_shortfalls(paths) {
        say!("uraid serve: {name}: warning: {short}");
    }
    if let Some(member) = md.runtime().discard_refused_by().filter(|_| !info.read_only) {
        say!(
            "uraid serve: {name}: discard (trim) off: {member} cannot discard a range so that \
             it reads back zeros (a disk with no write-zeroes, a filesystem that punches no \
             holes), which parity needs; clients are offered none"
        );
    }
    let workers = md.runtime().workers();
    if let Some(asked) = args.workers.map(usize::from)
        && asked != workers
    {
        let why = if info.bitmap_chunk_bytes.is_some() {
            "the write-intent bitmap's updates take one"
        } else {
            "each writes one of the partial parity log's rings"
        };
        say!("uraid serve: {name}: engine workers: {workers}, not {asked}: {why}");
    }
    if args.stripe_cache_size.is_none() {
        tell_stripe_cache(name, info, parse_stripe_size(&args.stripe_size).unwrap_or(4096));
    }
    for device in &info.left_out {
        say!("uraid serve: {name}: left out {device}");
    }
    for device in &info.forced_in {
        say!("uraid serve: {name}: forced in {device}");
    }
    if info.forced {
        say!(
            "uraid serve: {name}: started dirty and degraded by --force: stripes written at the \
             crash may hold parity that does not match, and data rebuilt from it may be wrong"
        );
    }
}

/// Refuses, before the assembly marks the superblocks active, to serve a second array under
/// a name another `uraid serve` answers to (two arrays created with the default name `uraid`).
/// The name is `--name` or the superblock's, as the assembly will take it; the control
/// socket's own check stays for what this cannot see (a name the members disagree on).
fn refuse_a_name_in_use(name: Option<&str>, paths: &[PathBuf]) -> anyhow::Result<()> {
    // The same members served twice: the assembly says "in use", which says more.
    if paths.iter().any(|path| held_by_a_server(path)) {
        return Ok(());
    }
    let name = if let Some(name) = name {
        name.to_owned()
    } else {
        let superblock = paths.iter().find_map(|path| {
            let area = uraid_md::members::read_candidate(path).superblock_area.ok()?;
            uraid_format::Superblock1::decode(&area).ok()
        });
        let Some(superblock) = superblock else { return Ok(()) };
        uraid_md::status::short_name(&superblock.name())
    };
    let Ok(socket) = control::socket_path(&name) else { return Ok(()) };
    if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
        bail!(
            "an array named {name} is already served (its control socket {} answers): serve \
             this one under another name with --name; nothing was written",
            socket.display()
        );
    }
    Ok(())
}

/// Starts the control socket and the NBD listeners, waits for a stop, then shuts them down
/// (draining every connection) so that the array can be stopped.
fn serve_until_stopped(
    args: &ServeArgs,
    serving: &Arc<Serving>,
    (name, info): (&str, &ArrayInfo),
    (tcp, unix): (Option<TcpListener>, Option<BoundUnix>),
) -> anyhow::Result<()> {
    let socket = control::socket_path(name)?;
    let control = ControlServer::start(&socket, Arc::clone(serving) as _).with_context(|| {
        format!(
            "cannot serve the control socket {} (another name with --name, or another \
             directory with URAID_RUN_DIR)",
            socket.display()
        )
    })?;
    let runtime = serving.runtime().context("the array stopped before it was served")?;
    // Before the NBD listeners, so that a failure leaves nothing to shut down.
    let ublk = args.ublk.then(|| start_ublk(args, &runtime, info)).transpose()?;
    let config = ServerConfig {
        export_name: args.export_name.clone(),
        description: Some(describe(name, info)),
        read_only: args.read_only || args.export_read_only,
        preferred_block_bytes: Some(preferred_block_bytes(info)),
        connections_max: Some(args.max_connections as usize),
        over_limit: Some(over_limit_hook(name, args.max_connections)),
        ..ServerConfig::default()
    };
    let server = Server::new(runtime, config)?;
    serving.set_nbd_stats(server.stats_source());
    let mut listeners: Vec<ServerHandle> = Vec::new();
    if let Some(listener) = tcp {
        let handle = server
            .serve_tcp_on(listener)
            .with_context(|| format!("cannot serve NBD on {}", args.listen))?;
        listeners.push(handle);
    }
    if let Some(bound) = unix {
        let path = bound.path.clone();
        let handle = bound
            .serve(&server)
            .with_context(|| format!("cannot serve NBD on {}", path.display()))?;
        listeners.push(handle);
    }
    // The server holds the runtime only through its listeners from here on.
    drop(server);
    let ublk_path = ublk.as_ref().map(UblkDevice::block_path);
    if args.json {
        let mut banner = banner_json(name, info, &args.export_name, &listeners, &socket);
        banner["ublk"] = serde_json::json!(ublk_path);
        tell!("{banner}");
    } else {
        if let Some(path) = &ublk_path {
            tell!("serving block device {} (ublk)", path.display());
        }
        print_banner(name, info, &args.export_name, &listeners, &socket);
    }
    serving.monitor_until_stop(name);
    if !listeners.is_empty() {
        say!("uraid serve: {name}: stopping: draining NBD connections");
    }
    for handle in listeners {
        handle.shutdown();
    }
    // The ublk device drains the same way: the kernel finishes what it queued, then the
    // disk goes away. Its runtime reference goes with it, before the array stops.
    let ublk_stopped = ublk.map(|device| stop_ublk(name, device)).transpose();
    // The control server stays up until the array has stopped, so that `uraid stop` gets
    // its answer; it is shut down when `control` drops, after the stop completes.
    serving.keep_control(control);
    ublk_stopped?;
    Ok(())
}

/// The serve log's line for NBD clients turned away over `--max-connections`: the first at
/// once, then at most one every 10 s with how many since, so that a client retrying in a
/// loop cannot flood the log (`uraid stats` counts every one at once).
fn over_limit_hook(name: &str, max: u32) -> OverLimitHook {
    use std::sync::{Mutex, PoisonError};
    use std::time::{Duration, Instant};
    let name = name.to_string();
    let last: Mutex<Option<(Instant, u64)>> = Mutex::new(None);
    OverLimitHook(Arc::new(move |turned_away| {
        let mut last = last.lock().unwrap_or_else(PoisonError::into_inner);
        if last.is_some_and(|(at, _)| at.elapsed() < Duration::from_secs(10)) {
            return;
        }
        let since = turned_away - last.map_or(0, |(_, n)| n);
        let clients = if since == 1 { "client" } else { "clients" };
        let connections = if max == 1 { "connection" } else { "connections" };
        say!(
            "uraid serve: {name}: turned away {since} NBD {clients}: {max} {connections} open, \
             the limit (--max-connections; `uraid stats {name}` counts every one)"
        );
        *last = Some((Instant::now(), turned_away));
    }))
}

fn start_ublk(
    args: &ServeArgs,
    runtime: &Arc<dyn BlockBackend>,
    info: &ArrayInfo,
) -> anyhow::Result<UblkDevice> {
    let config = UblkConfig {
        dev_id: args.ublk_id,
        read_only: args.read_only || args.export_read_only,
        preferred_block_bytes: Some(preferred_block_bytes(info)),
        ..UblkConfig::default()
    };
    UblkDevice::start(Arc::clone(runtime), &config).context("cannot serve the array over ublk")
}

fn stop_ublk(name: &str, device: UblkDevice) -> anyhow::Result<()> {
    let path = device.block_path();
    say!("uraid serve: {name}: stopping: removing {}", path.display());
    let served = device.stop().with_context(|| format!("stopping {}", path.display()))?;
    say!(
        "uraid serve: {name}: {} removed after {} reads, {} writes, {} flushes, {} discards, \
         {} zeroings ({} failed)",
        path.display(),
        served.reads,
        served.writes,
        served.flushes,
        served.discards,
        served.write_zeroes,
        served.errors
    );
    Ok(())
}

fn describe(name: &str, info: &ArrayInfo) -> String {
    format!(
        "uraid {name}: {} {}, {} members, chunk {}K",
        info.level,
        layout_name(info.level, info.layout),
        info.raid_disks,
        info.chunk_sectors / 2
    )
}

/// A full stripe when it is a power of two (writes of it need no reads), else one chunk:
/// NBD's preferred block size must be a power of two.
fn preferred_block_bytes(info: &ArrayInfo) -> u32 {
    let chunk = info.chunk_sectors * 512;
    let stripe = chunk * u64::from(info.data_disks);
    let best = if stripe.is_power_of_two() { stripe } else { chunk };
    u32::try_from(best.min(u64::from(uraid_nbd::DEFAULT_BLOCK_BYTES_MAX))).unwrap_or(u32::MAX)
}

fn print_banner(
    name: &str,
    info: &ArrayInfo,
    export: &str,
    listeners: &[ServerHandle],
    control: &std::path::Path,
) {
    let size = info.member_sectors * u64::from(info.data_disks) * 512;
    tell!(
        "uraid serve: {name}: {} {}, {} members, chunk {}K, {} MiB",
        info.level,
        layout_name(info.level, info.layout),
        info.raid_disks,
        info.chunk_sectors / 2,
        size >> 20
    );
    for l in listeners {
        match l.local_addr() {
            ListenAddr::Tcp(addr) => {
                tell!("serving NBD export {export:?} on {addr}; connect with:");
                tell!("  nbdinfo nbd://{addr}/{export}");
                tell!("  qemu-img info nbd://{addr}/{export}");
                tell!("  nbd-client {} {} /dev/nbd0 -N {export}", addr.ip(), addr.port());
            }
            ListenAddr::Unix(path) => {
                tell!(
                    "serving NBD export {export:?} on unix socket {}; connect with:",
                    path.display()
                );
                tell!("  nbdinfo 'nbd+unix:///{export}?socket={}'", path.display());
            }
        }
    }
    tell!(
        "manage: uraid status | uraid detail {name} | uraid monitor {name} | uraid stop {name}   \
         (control {})",
        control.display()
    );
    if info.read_only {
        tell!("read-only: nothing is written to the members; stop with Ctrl-C or SIGTERM");
    } else {
        tell!("stop with Ctrl-C or SIGTERM: the array is flushed and marked clean");
    }
}

/// `--stripe-size`, which must say its unit: md's sysfs stripe_size is in bytes (`echo 16384`)
/// and mdadm's bare sizes are KiB, so `4096` meant 4 MiB here to one reader and 4 KiB to the
/// other (it was taken as 4 MiB, a stripe unit that also turned the write-hole log off).
fn parse_stripe_size(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
        anyhow::bail!(
            "--stripe-size {t} has no unit: md's stripe_size file takes bytes ({t} bytes: \
             {t}b) and mdadm's sizes are KiB ({t} KiB: {t}K); say which"
        );
    }
    parse_size(t)
}

/// The banner for scripts: where to connect (the real port when --listen asked for port 0).
fn banner_json(
    name: &str,
    info: &ArrayInfo,
    export: &str,
    listeners: &[ServerHandle],
    control: &std::path::Path,
) -> serde_json::Value {
    let listen: Vec<serde_json::Value> = listeners
        .iter()
        .map(|l| match l.local_addr() {
            ListenAddr::Tcp(addr) => serde_json::json!({ "tcp": addr.to_string() }),
            ListenAddr::Unix(path) => serde_json::json!({ "unix": path }),
        })
        .collect();
    serde_json::json!({
        "serving": name,
        "export": export,
        "size_bytes": info.member_sectors * u64::from(info.data_disks) * 512,
        "level": info.level.to_md(),
        "layout": layout_name(info.level, info.layout),
        "raid_disks": info.raid_disks,
        "chunk_bytes": info.chunk_sectors * 512,
        "listen": listen,
        "control": control,
    })
}
