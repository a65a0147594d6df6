//! Hostile and broken clients. Goal: each gets the protocol's error reply, or a clean close of
//! its own connection, and the server keeps serving other clients correct data afterwards.
//! Method: raw sockets that break one rule each, then a well-behaved client (`still_serves`)
//! on the same server; the memory backend shows what was (not) written.

mod common;

use common::*;
use std::io::Write;
use std::sync::Arc;
use uraid_nbd::client::{Client, ClientError};
use uraid_nbd::wire;

fn nbd_error<T: std::fmt::Debug>(r: Result<T, ClientError>) -> u32 {
    match r {
        Err(ClientError::Nbd(e)) => e,
        other => panic!("expected an NBD error reply, got {other:?}"),
    }
}

#[test]
fn bad_option_magic_closes_only_that_connection() {
    let (_b, server, _h, addr) = memory_server(MIB);
    let mut s = raw_greeted(addr);
    s.write_all(&[0xde; 16]).unwrap();
    assert_closed(&mut s, "bad option magic");
    still_serves(addr, 1);
    assert_eq!(server.stats().connections_refused, 1);
}

#[test]
fn unknown_client_flags_close_the_connection() {
    let (_b, _s, _h, addr) = memory_server(MIB);
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    std::io::Read::read_exact(&mut s, &mut [0; 18]).unwrap();
    s.write_all(&0x8000_0001u32.to_be_bytes()).unwrap();
    assert_closed(&mut s, "unknown client flag");
    still_serves(addr, 2);
}

#[test]
fn unknown_option_is_unsupported_and_haggling_goes_on() {
    let (_b, _s, _h, addr) = memory_server(MIB);
    let mut s = raw_greeted(addr);
    send_option(&mut s, 0x4242, b"whatever");
    assert_eq!(option_reply(&mut s).1, wire::REP_ERR_UNSUP);
    send_option(&mut s, wire::OPT_STARTTLS, &[]);
    assert!(option_reply(&mut s).1 & (1 << 31) != 0, "STARTTLS refused with an error");
    send_option(&mut s, wire::OPT_LIST, &[]);
    let (opt, kind, data) = option_reply(&mut s);
    assert_eq!((opt, kind), (wire::OPT_LIST, wire::REP_SERVER));
    assert_eq!(&data[4..], b"uraid", "the configured name, after its 32-bit length");
    assert_eq!(option_reply(&mut s).1, wire::REP_ACK);
    send_option(&mut s, wire::OPT_LIST, b"x");
    assert_eq!(option_reply(&mut s).1, wire::REP_ERR_INVALID, "LIST takes no data");
    send_option(&mut s, wire::OPT_ABORT, &[]);
    assert_eq!(option_reply(&mut s).1, wire::REP_ACK);
    assert_closed(&mut s, "after NBD_OPT_ABORT");
    still_serves(addr, 3);
}

/// GO/INFO data: name length, name, count, info requests.
fn info_request(name: &str, wants: &[u16]) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(wants.len() as u16).to_be_bytes());
    for w in wants {
        d.extend_from_slice(&w.to_be_bytes());
    }
    d
}

#[test]
fn info_describes_the_export_and_refuses_unknown_names() {
    let (_b, _s, _h, addr) = memory_server(4 * MIB);
    let mut s = raw_greeted(addr);
    send_option(&mut s, wire::OPT_INFO, &info_request("nope", &[]));
    assert_eq!(option_reply(&mut s).1, wire::REP_ERR_UNKNOWN);
    send_option(&mut s, wire::OPT_GO, &[0, 0, 0, 9, b'x']);
    assert_eq!(option_reply(&mut s).1, wire::REP_ERR_INVALID, "name longer than the data");
    send_option(&mut s, wire::OPT_INFO, &info_request("uraid", &[wire::INFO_NAME]));
    let mut infos = Vec::new();
    loop {
        let (_, kind, data) = option_reply(&mut s);
        if kind == wire::REP_ACK {
            break;
        }
        assert_eq!(kind, wire::REP_INFO);
        infos.push(data);
    }
    let find = |t: u16| infos.iter().find(|d| wire::be16(&d[0..2]) == t).expect("info sent");
    let export = find(wire::INFO_EXPORT);
    assert_eq!(wire::be64(&export[2..10]), 4 * MIB as u64);
    let flags = wire::be16(&export[10..12]);
    let want = wire::FLAG_HAS_FLAGS | wire::FLAG_SEND_FLUSH | wire::FLAG_SEND_FUA;
    assert_eq!(flags & want, want);
    assert_eq!(flags & wire::FLAG_READ_ONLY, 0);
    assert_eq!(&find(wire::INFO_NAME)[2..], b"uraid");
    let sizes = find(wire::INFO_BLOCK_SIZE);
    let at = |i: usize| wire::be32(&sizes[i..i + 4]);
    assert_eq!((at(2), at(6), at(10)), (512, 64 * 1024, 32 << 20));
    // INFO does not start transmission: GO still can, with the default name.
    send_option(&mut s, wire::OPT_GO, &info_request("", &[]));
    loop {
        if option_reply(&mut s).1 == wire::REP_ACK {
            break;
        }
    }
    s.write_all(
        &wire::Request {
            flags: 0,
            command: wire::CMD_DISC,
            handle: 1,
            offset_bytes: 0,
            len_bytes: 0,
        }
        .encode(),
    )
    .unwrap();
    assert_closed(&mut s, "after NBD_CMD_DISC");
}

#[test]
fn export_name_with_an_unknown_name_closes_and_with_ours_starts_transmission() {
    let (_b, _s, _h, addr) = memory_server(MIB);
    let mut s = raw_greeted(addr);
    send_option(&mut s, wire::OPT_EXPORT_NAME, b"other");
    assert_closed(&mut s, "unknown export name");
    let mut s = raw_greeted(addr);
    send_option(&mut s, wire::OPT_EXPORT_NAME, b"uraid");
    let mut reply = [0; 10];
    std::io::Read::read_exact(&mut s, &mut reply).unwrap();
    assert_eq!(wire::be64(&reply[0..8]), MIB as u64, "size, then flags, no zero padding");
    s.write_all(
        &wire::Request {
            flags: 0,
            command: wire::CMD_READ,
            handle: 7,
            offset_bytes: 512,
            len_bytes: 512,
        }
        .encode(),
    )
    .unwrap();
    let mut r = [0; 16 + 512];
    std::io::Read::read_exact(&mut s, &mut r).unwrap();
    assert_eq!(wire::be32(&r[0..4]), wire::SIMPLE_REPLY_MAGIC);
    assert_eq!((wire::be32(&r[4..8]), wire::be64(&r[8..16])), (0, 7));
}

#[test]
fn bad_request_magic_closes_only_that_connection() {
    let (_b, server, _h, addr) = memory_server(MIB);
    let mut c = Client::connect_tcp(addr, "uraid").unwrap();
    c.write(0, &pattern(4, 4096), false).unwrap();
    let mut s = raw_greeted(addr);
    send_option(&mut s, wire::OPT_EXPORT_NAME, b"");
    std::io::Read::read_exact(&mut s, &mut [0; 10]).unwrap();
    s.write_all(&[0x11; 28]).unwrap();
    assert_closed(&mut s, "bad request magic");
    assert_same(&c.read(0, 4096).unwrap(), &pattern(4, 4096), "the other connection");
    still_serves(addr, 4);
    assert_eq!(server.stats().connections_refused, 1);
}

#[test]
fn refused_requests_get_the_protocols_errors_and_the_connection_goes_on() {
    let (backend, server, _h, addr) = memory_server(MIB);
    let mut c = Client::connect_tcp(addr, "").unwrap();
    let end = MIB as u64;
    let h = c.send(9, 0, 0, 0, &[]).unwrap();
    let reply = c.receive().unwrap();
    assert_eq!((reply.handle, reply.error), (h, wire::EINVAL), "unknown command");
    assert_eq!(nbd_error(c.read(end - 512, 1024)), wire::EINVAL, "read past the end");
    assert_eq!(nbd_error(c.read(u64::MAX - 511, 512)), wire::EINVAL, "offset + length overflows");
    assert_eq!(nbd_error(c.write(end, &[7; 512], false)), wire::ENOSPC, "write past the end");
    assert_eq!(nbd_error(c.write_zeroes(end - 512, 4096)), wire::ENOSPC, "zeroes past the end");
    assert_eq!(nbd_error(c.trim(end, 512)), wire::EINVAL, "trim past the end");
    assert_eq!(nbd_error(c.read(100, 512)), wire::EINVAL, "unaligned offset");
    assert_eq!(nbd_error(c.write(0, &[7; 100], false)), wire::EINVAL, "unaligned length");
    let flags = 1 << 7;
    let h = c.send(wire::CMD_READ, flags, 0, 512, &[]).unwrap();
    assert_eq!(
        c.receive().unwrap(),
        uraid_nbd::client::Reply { handle: h, error: wire::EINVAL, data: vec![] },
        "unknown command flag"
    );
    assert_eq!(backend.snapshot(0, MIB), vec![0; MIB], "nothing refused was written");
    assert_eq!(server.stats().errors, 9);
    c.write(4096, &[9; 512], true).unwrap();
    assert_eq!(c.read(4096, 512).unwrap(), vec![9; 512], "the stream stayed in step");
}

#[test]
fn requests_over_the_maximum_are_refused_without_losing_step() {
    let (backend, _s, _h, addr) = memory_server(64 * MIB);
    let mut c = Client::connect_tcp(addr, "").unwrap();
    let max = c.block_sizes().max;
    assert_eq!(max, 32 << 20);
    assert_eq!(nbd_error(c.read(0, max + 512)), wire::EINVAL, "read over the maximum");
    assert_eq!(nbd_error(c.write_zeroes(0, max + 512)), wire::EINVAL, "zeroes over the maximum");
    let big = vec![0xab; max as usize + 512];
    assert_eq!(nbd_error(c.write(0, &big, false)), wire::EINVAL, "write over the maximum");
    assert_eq!(backend.snapshot(0, 4096), vec![0; 4096], "the refused payload was not written");
    let data = pattern(5, max as usize);
    c.write(512, &data, false).unwrap();
    assert_same(&c.read(512, max).unwrap(), &data, "a maximum-sized request after them");
}

#[test]
fn a_client_vanishing_mid_payload_writes_nothing_and_others_go_on() {
    let (backend, server, _h, addr) = memory_server(MIB);
    let mut c = Client::connect_tcp(addr, "").unwrap();
    let header = wire::Request {
        flags: 0,
        command: wire::CMD_WRITE,
        handle: 1,
        offset_bytes: 65536,
        len_bytes: 65536,
    };
    let mut s = raw_greeted(addr);
    send_option(&mut s, wire::OPT_EXPORT_NAME, b"");
    std::io::Read::read_exact(&mut s, &mut [0; 10]).unwrap();
    s.write_all(&header.encode()).unwrap();
    s.write_all(&vec![0x5a; 30000]).unwrap();
    drop(s);
    c.write(0, &[1; 4096], false).unwrap();
    still_serves(addr, 6);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.stats().connections_active > 1 {
        assert!(std::time::Instant::now() < deadline, "the vanished connection never ended");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(backend.snapshot(65536, 65536), vec![0; 65536], "half a payload is not written");
    assert_eq!(c.read(0, 4096).unwrap(), vec![1; 4096]);
}

#[test]
fn many_concurrent_pipelined_connections_each_see_their_own_data() {
    let (backend, server, _h, addr) = memory_server(16 * MIB);
    let threads: Vec<_> = (0..32u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = Client::connect_tcp(addr, "uraid").unwrap();
                let base = t * 512 * 1024;
                // 16 writes in flight at once, then every reply, in whatever order.
                let mut handles = std::collections::HashSet::new();
                for i in 0..16u64 {
                    let data = pattern(t * 100 + i, 32 * 1024);
                    handles.insert(
                        c.send(wire::CMD_WRITE, 0, base + i * 32768, 32768, &data).unwrap(),
                    );
                }
                while !handles.is_empty() {
                    let r = c.receive().unwrap();
                    assert_eq!(r.error, 0);
                    assert!(handles.remove(&r.handle), "each request answered once");
                }
                c.flush().unwrap();
                for i in 0..16u64 {
                    let got = c.read(base + i * 32768, 32768).unwrap();
                    assert_same(&got, &pattern(t * 100 + i, 32768), "read back");
                }
                c.disconnect().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_same(&backend.snapshot(31 * 512 * 1024, 32768), &pattern(3100, 32768), "backend");
    let stats = server.stats();
    assert_eq!((stats.writes, stats.reads, stats.flushes), (512, 512, 32));
    assert_eq!(stats.connections_accepted, 32);
}

#[test]
fn backend_errors_are_eio_in_simple_and_structured_replies() {
    let (backend, _s, _h, addr) = memory_server(MIB);
    let mut simple = Client::connect_tcp(addr, "").unwrap();
    let mut structured = Client::connect_tcp_structured(addr, "").unwrap();
    assert!(structured.structured() && !simple.structured());
    structured.write(0, &pattern(7, 8192), false).unwrap();
    assert_same(&structured.read(0, 8192).unwrap(), &pattern(7, 8192), "structured read");
    backend.set_failing(true);
    assert_eq!(nbd_error(simple.read(0, 512)), wire::EIO);
    assert_eq!(nbd_error(simple.write(0, &[1; 512], true)), wire::EIO);
    assert_eq!(nbd_error(structured.read(0, 512)), wire::EIO, "an NBD_REPLY_TYPE_ERROR chunk");
    assert_eq!(nbd_error(structured.flush()), wire::EIO);
    backend.set_failing(false);
    assert_same(&simple.read(0, 8192).unwrap(), &pattern(7, 8192), "after the errors");
}

#[test]
fn a_read_only_export_refuses_writes_with_eperm() {
    let backend = Arc::new(uraid_nbd::MemoryBackend::new(MIB, 4096));
    let config = uraid_nbd::ServerConfig { read_only: true, ..Default::default() };
    let server = uraid_nbd::Server::new(backend, config).unwrap();
    let handle = server
        .serve_unix(std::env::temp_dir().join(format!("uraid-nbd-ro-{}.sock", std::process::id())))
        .unwrap();
    let uraid_nbd::ListenAddr::Unix(path) = handle.local_addr().clone() else { unreachable!() };
    let mut c = Client::connect_unix(&path, "").unwrap();
    assert_ne!(c.transmission_flags() & wire::FLAG_READ_ONLY, 0);
    assert_eq!(nbd_error(c.write(0, &[1; 512], false)), wire::EPERM);
    assert_eq!(nbd_error(c.trim(0, 512)), wire::EPERM);
    assert_eq!(c.read(0, 512).unwrap(), vec![0; 512]);
    handle.shutdown();
    assert!(!path.exists(), "the socket file is removed at shutdown");
}

/// A client that connects and never finishes the handshake, silent or trickling a byte at a
/// time, is disconnected at the handshake limit (qemu-nbd's --handshake-limit): it held a
/// thread and a socket for ever before. Transmission has no limit: an idle client stays.
#[test]
fn a_handshake_never_finished_is_cut_off_at_the_limit() {
    let backend = Arc::new(uraid_nbd::MemoryBackend::new(MIB, 64 * KIB as u32));
    let limit = std::time::Duration::from_millis(400);
    let config = uraid_nbd::ServerConfig {
        handshake_limit: Some(limit),
        ..uraid_nbd::ServerConfig::default()
    };
    let server = uraid_nbd::Server::new(backend, config).unwrap();
    let handle = server.serve_tcp("127.0.0.1:0").unwrap();
    let uraid_nbd::ListenAddr::Tcp(addr) = handle.local_addr().clone() else { unreachable!() };

    let started = std::time::Instant::now();
    let mut silent = raw_greeted(addr);
    assert_closed(&mut silent, "a silent client past the limit");
    let waited = started.elapsed();
    assert!(waited >= limit && waited < limit * 10, "cut off after {waited:?}");

    // A byte of an option header every 100 ms: each read is quick, the handshake is not.
    let started = std::time::Instant::now();
    let mut trickle = raw_greeted(addr);
    let header = [0x49u8, 0x48, 0x41, 0x56, 0x45, 0x4f, 0x50, 0x54, 0, 0, 0, 1, 0, 0, 0, 0];
    for byte in header.iter().cycle().take(40) {
        if trickle.write_all(&[*byte]).is_err() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_closed(&mut trickle, "a trickling client past the limit");
    assert!(started.elapsed() < limit * 12, "cut off after {:?}", started.elapsed());

    // A client that finished its handshake may then sit idle longer than the limit.
    let mut c = Client::connect_tcp(addr, "").unwrap();
    std::thread::sleep(limit * 2);
    let data = pattern(9, 4096);
    c.write(0, &data, false).unwrap();
    assert_same(&c.read(0, 4096).unwrap(), &data, "after an idle spell");
    c.disconnect().unwrap();
    drop(handle);
}

/// Holds every operation it is given, undone, until `release_all`.
#[derive(Default)]
struct HoldingBackend {
    held: std::sync::Mutex<Vec<uraid_nbd::BackendDone>>,
}

impl HoldingBackend {
    fn held(&self) -> usize {
        self.held.lock().unwrap().len()
    }

    fn release_all(&self) {
        for done in self.held.lock().unwrap().drain(..) {
            done(Ok(Vec::new()));
        }
    }
}

impl uraid_nbd::BlockBackend for HoldingBackend {
    fn size_bytes(&self) -> u64 {
        1 << 30
    }
    fn preferred_block_bytes(&self) -> u32 {
        64 * KIB as u32
    }
    fn submit(&self, _op: uraid_nbd::BackendOp, done: uraid_nbd::BackendDone) {
        self.held.lock().unwrap().push(done);
    }
}

/// A write of zeros holds a buffer of zeros until it is done, as a write holds its payload,
/// and counts against the connection's in-flight bytes the same way: 256 of 32 MiB (headers
/// only, 28 bytes each) grew one connection's server to 10 GB before.
#[test]
fn writes_of_zeros_count_against_the_in_flight_bytes() {
    let backend = Arc::new(HoldingBackend::default());
    let (_server, _h, addr) = serve(backend.clone(), 64 * KIB as u32);
    let mut s = raw_greeted(addr);
    send_option(&mut s, wire::OPT_EXPORT_NAME, b"");
    std::io::Read::read_exact(&mut s, &mut [0; 10]).unwrap();
    let len = 32 * MIB as u32;
    for i in 0..16u64 {
        let header = wire::Request {
            flags: 0,
            command: wire::CMD_WRITE_ZEROES,
            handle: i,
            offset_bytes: i * u64::from(len),
            len_bytes: len,
        };
        s.write_all(&header.encode()).unwrap();
    }
    // The window (256 MiB a connection) takes 8; the reader waits for room for the rest.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while backend.held() < 8 {
        assert!(std::time::Instant::now() < deadline, "only {} submitted", backend.held());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let held = backend.held();
    if held != 8 {
        // Let the server drain before failing, or its drop would wait on these for ever.
        backend.release_all();
        drop(s);
        panic!("{held} writes of 32 MiB of zeros in flight: more than 256 MiB");
    }
    // Done, each frees its room: every request is answered.
    let mut replies = 0;
    while replies < 16 {
        backend.release_all();
        let mut reply = [0u8; 16];
        s.set_read_timeout(Some(std::time::Duration::from_millis(200))).unwrap();
        if std::io::Read::read_exact(&mut s, &mut reply).is_ok() {
            assert_eq!(&reply[4..8], &[0; 4], "reply {replies}: no error");
            replies += 1;
        }
        assert!(std::time::Instant::now() < deadline + std::time::Duration::from_secs(10));
    }
}

/// Each connection holds a thread and its share of the in-flight bytes, so their number is
/// limited: past `connections_max` a client is told why it is not served (its NBD_OPT_GO
/// refused by policy, with the reason), one asking by NBD_OPT_EXPORT_NAME is closed on, a
/// flood is closed on within the refusal's short limit, and a place that frees up goes to
/// the next client.
#[test]
fn clients_beyond_the_connection_limit_are_told_why_and_turned_away() {
    let backend = Arc::new(uraid_nbd::MemoryBackend::new(MIB, 64 * KIB as u32));
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let told2 = told.clone();
    let hook = uraid_nbd::OverLimitHook(Arc::new(move |n| told2.lock().unwrap().push(n)));
    let config = uraid_nbd::ServerConfig {
        connections_max: Some(2),
        over_limit: Some(hook),
        ..uraid_nbd::ServerConfig::default()
    };
    let server = uraid_nbd::Server::new(backend, config).unwrap();
    let handle = server.serve_tcp("127.0.0.1:0").unwrap();
    let uraid_nbd::ListenAddr::Tcp(addr) = handle.local_addr().clone() else { unreachable!() };

    let mut served = Client::connect_tcp(addr, "").unwrap();
    // Still in its handshake, it holds a place too.
    let haggling = raw_greeted(addr);
    match Client::connect_tcp(addr, "") {
        Err(ClientError::OptionRefused { reply, message, .. }) => {
            assert_eq!(reply, wire::REP_ERR_POLICY);
            assert!(message.contains("too many connections"), "told why: {message:?}");
            assert!(message.contains("--max-connections"), "told what sets it: {message:?}");
        }
        Err(e) => panic!("a third client was not refused by policy: {e}"),
        Ok(_) => panic!("a third client was served"),
    }
    let mut by_name = raw_greeted(addr);
    send_option(&mut by_name, wire::OPT_EXPORT_NAME, b"");
    assert_closed(&mut by_name, "EXPORT_NAME over the limit");

    // Silent clients beyond the limit: a few wait for the refusal's limit, the rest are
    // closed on at once; none is left open.
    let started = std::time::Instant::now();
    let flood: Vec<std::net::TcpStream> =
        (0..20).map(|_| std::net::TcpStream::connect(addr).unwrap()).collect();
    for mut s in flood {
        s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        let mut sink = Vec::new();
        let end = std::io::Read::read_to_end(&mut s, &mut sink);
        assert!(
            end.is_ok()
                || end.as_ref().is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "closed, not timed out: {end:?}"
        );
        assert!(sink.is_empty() || sink.len() == 18, "at most the greeting: {} bytes", sink.len());
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(8), "{:?}", started.elapsed());
    let stats = server.stats();
    assert_eq!(stats.connections_over_limit, 22);
    assert_eq!(stats.connections_active, 2);
    assert_eq!(*told.lock().unwrap(), (1..=22).collect::<Vec<u64>>(), "the operator is told");

    // The one in its handshake leaves: the next client gets its place.
    drop(haggling);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while server.stats().connections_active > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    still_serves(addr, 4);
    let data = pattern(5, 4096);
    served.write(0, &data, false).unwrap();
    assert_same(&served.read(0, 4096).unwrap(), &data, "the first client, throughout");
    served.disconnect().unwrap();
    drop(handle);
}
