//! Helpers shared by the NBD tests: servers on memory and on a real uraid runtime, data
//! patterns, and a raw socket that speaks just enough NBD to misbehave on purpose.

#![allow(dead_code)] // each test file uses its own subset

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use uraid_core::array::ArrayConfig;
use uraid_core::{Geometry, Level};
use uraid_nbd::client::Client;
use uraid_nbd::{
    BlockBackend, ListenAddr, MemoryBackend, Server, ServerConfig, ServerHandle, wire,
};
use uraid_runtime::{Runtime, RuntimeConfig, SharedMemorySource};

pub const KIB: usize = 1024;
pub const MIB: usize = 1024 * 1024;

/// A uraid array on memory members: `disks` members of `member_bytes`, chunk `chunk_bytes`,
/// two workers (so requests cross rows and workers).
pub fn runtime(level: Level, disks: usize, chunk_bytes: usize, member_bytes: usize) -> Runtime {
    let geometry = Geometry::new(level, level.default_layout(), disks, chunk_bytes as u64).unwrap();
    let array = ArrayConfig {
        geometry,
        stripe_size_bytes: 4096,
        stripe_cache_size: 256,
        member_sectors: (member_bytes / 512) as u64,
    };
    let config = RuntimeConfig {
        array,
        workers: Some(2),
        data_offset_bytes: 0,
        write_intent: None,
        record_failures: false,
        write_back: true,
    };
    let source = SharedMemorySource::new(disks, member_bytes);
    Runtime::start(&config, &source).unwrap()
}

/// A server for `backend` on a free loopback port, preferring `preferred` bytes.
pub fn serve(backend: Arc<dyn BlockBackend>, preferred: u32) -> (Server, ServerHandle, SocketAddr) {
    let config = ServerConfig { preferred_block_bytes: Some(preferred), ..ServerConfig::default() };
    let server = Server::new(backend, config).unwrap();
    let handle = server.serve_tcp("127.0.0.1:0").unwrap();
    let ListenAddr::Tcp(addr) = handle.local_addr().clone() else { unreachable!() };
    (server, handle, addr)
}

pub fn memory_server(size_bytes: usize) -> (Arc<MemoryBackend>, Server, ServerHandle, SocketAddr) {
    let backend = Arc::new(MemoryBackend::new(size_bytes, 64 * KIB as u32));
    let (server, handle, addr) = serve(backend.clone(), 64 * KIB as u32);
    (backend, server, handle, addr)
}

/// xorshift bytes: different seeds give different data, the same seed the same.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Asserts `got == want`, naming the first differing byte instead of dumping both.
pub fn assert_same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: byte {i} is {:#x}, expected {:#x}", got[i], want[i]);
    }
}

/// A well-behaved client writes, reads back and checks: the server still serves correctly.
pub fn still_serves(addr: SocketAddr, seed: u64) {
    let mut c = Client::connect_tcp(addr, "").unwrap();
    let data = pattern(seed, 8 * KIB);
    let at = (seed % 16) * 8192;
    c.write(at, &data, false).unwrap();
    c.flush().unwrap();
    assert_same(&c.read(at, data.len() as u32).unwrap(), &data, "read after a hostile client");
    c.disconnect().unwrap();
}

/// A raw connection past the greeting, client flags sent (fixed newstyle, no zeroes).
pub fn raw_greeted(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let mut greeting = [0; 18];
    s.read_exact(&mut greeting).unwrap();
    assert_eq!(u64::from_be_bytes(greeting[0..8].try_into().unwrap()), wire::NBD_MAGIC);
    assert_eq!(u64::from_be_bytes(greeting[8..16].try_into().unwrap()), wire::IHAVEOPT);
    let flags = u16::from_be_bytes([greeting[16], greeting[17]]);
    assert_eq!(flags, wire::FLAG_FIXED_NEWSTYLE | wire::FLAG_NO_ZEROES);
    s.write_all(&(wire::FLAG_C_FIXED_NEWSTYLE | wire::FLAG_C_NO_ZEROES).to_be_bytes()).unwrap();
    s
}

pub fn send_option(s: &mut TcpStream, option: u32, data: &[u8]) {
    let mut b = wire::IHAVEOPT.to_be_bytes().to_vec();
    b.extend_from_slice(&option.to_be_bytes());
    b.extend_from_slice(&(data.len() as u32).to_be_bytes());
    b.extend_from_slice(data);
    s.write_all(&b).unwrap();
}

/// (option answered, reply type, data) of the next option reply.
pub fn option_reply(s: &mut TcpStream) -> (u32, u32, Vec<u8>) {
    let mut h = [0; 20];
    s.read_exact(&mut h).unwrap();
    assert_eq!(u64::from_be_bytes(h[0..8].try_into().unwrap()), wire::OPTION_REPLY_MAGIC);
    let at = |i: usize| u32::from_be_bytes(h[i..i + 4].try_into().unwrap());
    let mut data = vec![0; at(16) as usize];
    s.read_exact(&mut data).unwrap();
    (at(8), at(12), data)
}

/// Asserts the server closed `s` (end of file or reset), with nothing more sent.
pub fn assert_closed(s: &mut TcpStream, what: &str) {
    let mut b = [0; 1];
    match s.read(&mut b) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!("{what}: the server kept the connection open")
        }
        // End of file, or a reset: closed with our unread bytes in its buffer.
        Ok(0) | Err(_) => {}
        Ok(_) => panic!("{what}: the server sent {:#x} instead of closing", b[0]),
    }
}
