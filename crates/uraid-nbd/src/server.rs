//! The control side of the server: listeners, one accept thread each, one thread per
//! connection (handshake, then `transmission`), and the handle that stops them.
//!
//! Shutdown (`ServerHandle::shutdown`): stop accepting, shut the read side of every connection
//! (a blocked read returns end of file, a half-read request is dropped unanswered), let every
//! connection answer what it had read, join them all. Afterwards nothing is in flight, so the
//! caller may flush the array and mark it clean.

use crate::backend::BlockBackend;
use crate::handshake::{self, Export, HandshakeError, Outcome};
use crate::socket::{Deadline, Socket};
use crate::stats::{Counters, ServerStats, bump};
use crate::transmission::{self, End};
use crate::wire::{self, Request};
use crate::{ServerConfig, ServerError};
use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// NBD requires at least this much (and a power of two) for the preferred block size.
const BLOCK_BYTES_MIN: u32 = 512;

/// Threads at once that tell clients over the connection limit why they are not served;
/// beyond them such clients are closed on at once, so a flood of them costs nothing.
const REFUSERS_MAX: u64 = 4;

/// How long a client over the connection limit has to ask for the export and read why not.
const REFUSAL_LIMIT: Duration = Duration::from_secs(2);

/// What every connection shares: the backend, what clients are told, the counters.
pub(crate) struct Shared {
    pub backend: Arc<dyn BlockBackend>,
    pub export: Export,
    /// Shared with `StatsSource`, which outlives the server.
    pub counters: Arc<Counters>,
    /// `ServerConfig::handshake_limit`.
    pub handshake_limit: Option<std::time::Duration>,
    /// `ServerConfig::connections_max`.
    pub connections_max: Option<usize>,
    /// `ServerConfig::over_limit`.
    pub over_limit: Option<crate::OverLimitHook>,
    /// Threads answering clients over the limit. Apart from `Shared`, which holds the
    /// backend: they are not joined at shutdown, and must not keep the array open.
    pub refusers: Arc<AtomicU64>,
}

impl Shared {
    /// Counts a request the backend is about to get.
    pub fn count(&self, r: &Request) {
        let c = &self.counters;
        let counter = match r.command {
            wire::CMD_READ => &c.reads,
            wire::CMD_WRITE => &c.writes,
            wire::CMD_FLUSH => &c.flushes,
            wire::CMD_TRIM => &c.trims,
            wire::CMD_BLOCK_STATUS => &c.block_status,
            _ => &c.write_zeroes,
        };
        bump(counter, 1);
        if matches!(r.command, wire::CMD_WRITE | wire::CMD_WRITE_ZEROES) {
            bump(&c.written_bytes, u64::from(r.len_bytes));
        }
    }
}

/// An NBD server for one export; it may listen on several sockets at once.
pub struct Server {
    pub(crate) shared: Arc<Shared>,
}

impl Server {
    pub fn new(
        backend: Arc<dyn BlockBackend>,
        config: ServerConfig,
    ) -> Result<Server, ServerError> {
        let (handshake_limit, connections_max) = (config.handshake_limit, config.connections_max);
        let over_limit = config.over_limit.clone();
        let export = export(backend.as_ref(), config)?;
        let shared = Shared {
            backend,
            export,
            counters: Arc::default(),
            handshake_limit,
            connections_max,
            over_limit,
            refusers: Arc::default(),
        };
        Ok(Server { shared: Arc::new(shared) })
    }

    /// Listens on `addr` (port 0: any free port, see `ServerHandle::local_addr`).
    pub fn serve_tcp(&self, addr: impl ToSocketAddrs) -> io::Result<ServerHandle> {
        self.serve_tcp_on(TcpListener::bind(addr)?)
    }

    /// Serves on a listener bound beforehand (so that a port taken is found before the
    /// array behind the export is started).
    pub fn serve_tcp_on(&self, listener: TcpListener) -> io::Result<ServerHandle> {
        let local = ListenAddr::Tcp(listener.local_addr()?);
        let accept = move || {
            let (s, _) = listener.accept()?;
            // Replies are small and latency-bound; do not let Nagle hold them back.
            s.set_nodelay(true)?;
            Ok(Socket::Tcp(s))
        };
        self.start(local, accept)
    }

    /// Listens on a Unix socket at `path`; removed at shutdown. A socket file left by a
    /// server that died is replaced; a live one, or a file that is not a socket, is refused.
    pub fn serve_unix(&self, path: impl AsRef<Path>) -> io::Result<ServerHandle> {
        uraid_io::unix_socket::remove_stale(path.as_ref())?;
        let listener = UnixListener::bind(path.as_ref())?;
        self.serve_unix_on(listener, path.as_ref().to_path_buf())
    }

    /// As `serve_unix` on a listener bound already at `path` (so that a caller learns of a
    /// path it cannot bind before it does anything else); the socket file is removed when
    /// the handle stops.
    pub fn serve_unix_on(&self, listener: UnixListener, path: PathBuf) -> io::Result<ServerHandle> {
        self.start(ListenAddr::Unix(path), move || Ok(Socket::Unix(listener.accept()?.0)))
    }

    #[must_use]
    pub fn stats(&self) -> ServerStats {
        self.shared.counters.snapshot()
    }

    /// The counters, to read while the server runs and after: unlike the server and its
    /// handles, this holds no reference to the backend.
    #[must_use]
    pub fn stats_source(&self) -> StatsSource {
        let counters = Arc::clone(&self.shared.counters);
        StatsSource { counters, connections_max: self.shared.connections_max }
    }

    fn start(
        &self,
        local: ListenAddr,
        accept: impl FnMut() -> io::Result<Socket> + Send + 'static,
    ) -> io::Result<ServerHandle> {
        let stop = Arc::new(AtomicBool::new(false));
        let conns = Arc::new(Mutex::new(Conns::default()));
        let (shared, stop2, conns2) = (self.shared.clone(), stop.clone(), conns.clone());
        let thread = std::thread::Builder::new()
            .name("nbd-accept".into())
            .spawn(move || accept_loop(accept, &shared, &stop2, &conns2))?;
        let shared = self.shared.clone();
        Ok(ServerHandle { local, stop, accept: Some(thread), conns, shared })
    }
}

/// `Server::stats_source`.
#[derive(Clone)]
pub struct StatsSource {
    counters: Arc<Counters>,
    connections_max: Option<usize>,
}

impl StatsSource {
    #[must_use]
    pub fn snapshot(&self) -> ServerStats {
        self.counters.snapshot()
    }

    /// `ServerConfig::connections_max`, the limit the counters run against.
    #[must_use]
    pub fn connections_max(&self) -> Option<usize> {
        self.connections_max
    }
}

/// Where a listener listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// One listener and its connections. Dropping it shuts it down as `shutdown` does.
pub struct ServerHandle {
    local: ListenAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    conns: Arc<Mutex<Conns>>,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Conns {
    next_id: u64,
    /// A clone of each live connection's socket, to shut its read side.
    sockets: HashMap<u64, Socket>,
    threads: Vec<JoinHandle<()>>,
}

impl ServerHandle {
    #[must_use]
    pub fn local_addr(&self) -> &ListenAddr {
        &self.local
    }

    /// The whole server's counters (every listener).
    #[must_use]
    pub fn stats(&self) -> ServerStats {
        self.shared.counters.snapshot()
    }

    /// Stops accepting, drains every connection of this listener, and returns when they have
    /// all closed: every request read by then has been answered.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(accept) = self.accept.take() else { return };
        self.stop.store(true, Ordering::SeqCst);
        wake(&self.local);
        accept.join().expect("the accept loop does not panic");
        let threads = {
            let mut c = self.conns.lock().unwrap_or_else(PoisonError::into_inner);
            c.sockets.values().for_each(|s| s.shutdown(Shutdown::Read));
            std::mem::take(&mut c.threads)
        };
        for t in threads {
            t.join().expect("connection threads do not panic");
        }
        if let ListenAddr::Unix(path) = &self.local {
            // Ours, made by bind; a failure leaves a stale socket file, nothing worse.
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Unblocks `accept` by connecting to ourselves; the loop sees `stop` and ends.
fn wake(local: &ListenAddr) {
    match local {
        ListenAddr::Tcp(a) => {
            let mut a = *a;
            if a.ip().is_unspecified() {
                a.set_ip(if a.is_ipv4() {
                    Ipv4Addr::LOCALHOST.into()
                } else {
                    Ipv6Addr::LOCALHOST.into()
                });
            }
            let _ = TcpStream::connect(a);
        }
        ListenAddr::Unix(p) => {
            let _ = UnixStream::connect(p);
        }
    }
}

fn accept_loop(
    mut accept: impl FnMut() -> io::Result<Socket>,
    shared: &Arc<Shared>,
    stop: &AtomicBool,
    conns: &Arc<Mutex<Conns>>,
) {
    loop {
        let socket = accept();
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(socket) = socket else {
            // Out of descriptors or an aborted connection: pause rather than spin.
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        };
        let Ok(clone) = socket.try_clone() else { continue };
        bump(&shared.counters.connections_accepted, 1);
        if !admit(shared) {
            turn_away(socket, shared);
            continue;
        }
        let mut c = conns.lock().unwrap_or_else(PoisonError::into_inner);
        let id = c.next_id;
        c.next_id += 1;
        c.sockets.insert(id, clone);
        c.threads.retain(|t| !t.is_finished());
        let (shared2, conns2) = (shared.clone(), conns.clone());
        let thread = std::thread::Builder::new().name(format!("nbd-conn{id}")).spawn(move || {
            serve_connection(socket, &shared2);
            conns2.lock().unwrap_or_else(PoisonError::into_inner).sockets.remove(&id);
            shared2.counters.connections_active.fetch_sub(1, Ordering::Relaxed);
        });
        if let Ok(t) = thread {
            c.threads.push(t);
        } else {
            // No thread, no connection: the socket closes as it drops.
            c.sockets.remove(&id);
            shared.counters.connections_active.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Counts a new connection in if the limit allows (listeners accept on threads of their
/// own, so the test and the count are one step).
fn admit(shared: &Shared) -> bool {
    let active = &shared.counters.connections_active;
    let Some(max) = shared.connections_max else {
        bump(active, 1);
        return true;
    };
    let below = |n: u64| (n < max as u64).then_some(n + 1);
    active.fetch_update(Ordering::SeqCst, Ordering::SeqCst, below).is_ok()
}

/// A connection over the limit: told why on a short-lived thread of its own, while fewer
/// than `REFUSERS_MAX` are, else closed on (dropped) at once.
fn turn_away(socket: Socket, shared: &Shared) {
    let turned_away = shared.counters.connections_over_limit.fetch_add(1, Ordering::Relaxed) + 1;
    if let Some(hook) = &shared.over_limit {
        (hook.0)(turned_away);
    }
    let max = shared.connections_max.unwrap_or(0);
    let refusers = shared.refusers.clone();
    let room = |n: u64| (n < REFUSERS_MAX).then_some(n + 1);
    if refusers.fetch_update(Ordering::SeqCst, Ordering::SeqCst, room).is_err() {
        return;
    }
    let refusers2 = refusers.clone();
    let spawned = std::thread::Builder::new().name("nbd-refuse".into()).spawn(move || {
        let mut socket = socket;
        let reason = format!(
            "too many connections: the server serves {max} at once (uraid serve \
             --max-connections); try again when one has closed"
        );
        let until = Instant::now() + REFUSAL_LIMIT;
        let _ = handshake::refuse(&mut Deadline { socket: &mut socket, until }, &reason);
        refusers2.fetch_sub(1, Ordering::SeqCst);
    });
    if spawned.is_err() {
        refusers.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(crate) fn serve_connection(mut socket: Socket, shared: &Arc<Shared>) {
    let refused = || bump(&shared.counters.connections_refused, 1);
    let negotiated = match shared.handshake_limit {
        Some(limit) => {
            let until = std::time::Instant::now() + limit;
            handshake::negotiate(&mut Deadline { socket: &mut socket, until }, &shared.export)
        }
        None => handshake::negotiate(&mut socket, &shared.export),
    };
    match negotiated {
        Ok(Outcome::Transmission { structured, allocation }) => {
            // Transmission waits on the client as long as it likes (an idle mount).
            if shared.handshake_limit.is_some() && socket.set_timeouts(None).is_err() {
                return;
            }
            bump(&shared.counters.connections_transmitting, 1);
            if let Ok(End::BadMagic(_)) =
                transmission::transmit(socket, shared, structured, allocation)
            {
                refused();
            }
        }
        // The client left (an I/O error) or said goodbye: nothing to count against it.
        Ok(Outcome::Aborted) | Err(HandshakeError::Io(_)) => {}
        Err(_) => refused(),
    }
}

/// What clients are told, from the backend and the configuration, within NBD's rules.
fn export(backend: &dyn BlockBackend, config: ServerConfig) -> Result<Export, ServerError> {
    let max = config.block_bytes_max;
    if max < BLOCK_BYTES_MIN || !max.is_multiple_of(BLOCK_BYTES_MIN) {
        return Err(ServerError::BlockBytesMax(max));
    }
    let size_bytes = backend.size_bytes();
    if !size_bytes.is_multiple_of(u64::from(BLOCK_BYTES_MIN)) {
        return Err(ServerError::SizeUnaligned(size_bytes));
    }
    if config.export_name.len() > wire::STRING_BYTES_MAX {
        return Err(ServerError::NameTooLong(config.export_name.len()));
    }
    // NBD's preferred size is a power of two: a 192 KiB full stripe (3 x 64 KiB) becomes
    // 128 KiB. It is also no more than the maximum, as the protocol requires.
    let wanted = config.preferred_block_bytes.unwrap_or_else(|| backend.preferred_block_bytes());
    let preferred = floor_power_of_two(wanted.clamp(BLOCK_BYTES_MIN, max));
    assert!(preferred.is_power_of_two() && preferred >= BLOCK_BYTES_MIN && preferred <= max);
    let mut flags = wire::FLAG_HAS_FLAGS
        | wire::FLAG_SEND_FLUSH
        | wire::FLAG_SEND_FUA
        | wire::FLAG_SEND_WRITE_ZEROES
        // One backend behind every connection: a flush on one covers writes done on all.
        | wire::FLAG_CAN_MULTI_CONN;
    if config.read_only {
        flags |= wire::FLAG_READ_ONLY;
    }
    if backend.can_discard() {
        flags |= wire::FLAG_SEND_TRIM;
    }
    Ok(Export {
        name: config.export_name,
        description: config.description,
        size_bytes,
        transmission_flags: flags,
        block_bytes_min: BLOCK_BYTES_MIN,
        block_bytes_preferred: preferred,
        block_bytes_max: max,
        allocation: backend.reports_allocation(),
    })
}

fn floor_power_of_two(n: u32) -> u32 {
    assert!(n > 0);
    1 << n.ilog2()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryBackend;

    #[test]
    fn preferred_block_size_is_a_power_of_two_within_the_limits() {
        let backend = MemoryBackend::new(1 << 20, 192 << 10);
        let e = export(&backend, ServerConfig::default()).unwrap();
        assert_eq!(e.block_bytes_preferred, 128 << 10, "192 KiB rounds down to 128 KiB");
        let config = ServerConfig { preferred_block_bytes: Some(100), ..ServerConfig::default() };
        assert_eq!(export(&backend, config).unwrap().block_bytes_preferred, 512);
        let config = ServerConfig { block_bytes_max: 1000, ..ServerConfig::default() };
        assert!(matches!(export(&backend, config), Err(ServerError::BlockBytesMax(1000))));
        let odd = MemoryBackend::new(1000, 4096);
        assert!(matches!(
            export(&odd, ServerConfig::default()),
            Err(ServerError::SizeUnaligned(_))
        ));
    }
}

#[cfg(test)]
mod discard_tests {
    use super::*;
    use crate::MemoryBackend;
    use crate::backend::{BackendDone, BackendOp};

    /// A backend that takes no discard (an array with a member that cannot discard to zeros).
    struct NoDiscard(MemoryBackend);

    impl BlockBackend for NoDiscard {
        fn size_bytes(&self) -> u64 {
            self.0.size_bytes()
        }

        fn preferred_block_bytes(&self) -> u32 {
            self.0.preferred_block_bytes()
        }

        fn submit(&self, op: BackendOp, done: BackendDone) {
            self.0.submit(op, done);
        }

        fn can_discard(&self) -> bool {
            false
        }
    }

    #[test]
    fn trim_is_offered_only_where_the_backend_discards() {
        let backend = MemoryBackend::new(1 << 20, 4096);
        let flags = export(&backend, ServerConfig::default()).unwrap().transmission_flags;
        assert_ne!(flags & wire::FLAG_SEND_TRIM, 0);
        let flags =
            export(&NoDiscard(backend), ServerConfig::default()).unwrap().transmission_flags;
        assert_eq!(flags & wire::FLAG_SEND_TRIM, 0);
        assert_ne!(flags & wire::FLAG_SEND_WRITE_ZEROES, 0, "zeroing writes zeros");
    }
}
