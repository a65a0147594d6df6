//! Entry points for the fuzz targets in fuzz/ (not an API: hidden from the docs, may change).
//!
//! They run the server's own code, not a copy: `handshake` is `negotiate` over an in-memory
//! stream, `serve_connection` is what the accept loop runs for each client, here on one end of
//! a Unix socket pair so the fuzz target can play the client on the other.

use crate::handshake::{self, Outcome};
use crate::server::{self, Server};
use crate::socket::Socket;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;

/// How a handshake ended: transmission (with structured replies or not), the client aborted,
/// or the server closed the connection for the reason given.
#[derive(Debug, PartialEq, Eq)]
pub enum HandshakeEnd {
    Transmission { structured: bool, allocation: bool },
    Aborted,
    Closed(String),
}

/// Runs the server's side of the handshake against `client` bytes; returns what the server
/// wrote and how it ended (running out of client bytes is a client that left).
#[must_use]
pub fn handshake(server: &Server, client: &[u8]) -> (Vec<u8>, HandshakeEnd) {
    let mut stream = Memory { input: client, output: Vec::new() };
    let end = match handshake::negotiate(&mut stream, &server.shared.export) {
        Ok(Outcome::Transmission { structured, allocation }) => {
            HandshakeEnd::Transmission { structured, allocation }
        }
        Ok(Outcome::Aborted) => HandshakeEnd::Aborted,
        Err(e) => HandshakeEnd::Closed(e.to_string()),
    };
    (stream.output, end)
}

/// As `handshake`, for a client the server turns away (over its connection limit): it is
/// greeted, every option but ABORT and EXPORT_NAME is refused with `reason`.
#[must_use]
pub fn refusal(client: &[u8], reason: &str) -> (Vec<u8>, HandshakeEnd) {
    let mut stream = Memory { input: client, output: Vec::new() };
    let end = match handshake::refuse(&mut stream, reason) {
        Ok(Outcome::Transmission { structured, allocation }) => {
            HandshakeEnd::Transmission { structured, allocation }
        }
        Ok(Outcome::Aborted) => HandshakeEnd::Aborted,
        Err(e) => HandshakeEnd::Closed(e.to_string()),
    };
    (stream.output, end)
}

/// Serves one client connected on `stream`, handshake then transmission, exactly as a client
/// accepted by a listener is served; returns when the connection is over.
pub fn serve_connection(server: &Server, stream: UnixStream) {
    server::serve_connection(Socket::Unix(stream), &server.shared);
}

/// Client bytes in, server bytes out.
struct Memory<'a> {
    input: &'a [u8],
    output: Vec<u8>,
}

impl Read for Memory<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Memory<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemoryBackend, ServerConfig, wire};
    use std::sync::Arc;

    #[test]
    fn a_go_for_the_default_export_starts_transmission() {
        let backend = Arc::new(MemoryBackend::new(1 << 20, 4096));
        let server = Server::new(backend, ServerConfig::default()).unwrap();
        let mut client = wire::FLAG_C_FIXED_NEWSTYLE.to_be_bytes().to_vec();
        client.extend_from_slice(&wire::IHAVEOPT.to_be_bytes());
        client.extend_from_slice(&wire::OPT_GO.to_be_bytes());
        client.extend_from_slice(&6u32.to_be_bytes());
        client.extend_from_slice(&[0; 6]); // name "", no info requests
        let (out, end) = handshake(&server, &client);
        assert_eq!(end, HandshakeEnd::Transmission { structured: false, allocation: false });
        assert_eq!(out[..8], wire::NBD_MAGIC.to_be_bytes());
        let (_, end) = handshake(&server, &client[..client.len() - 1]);
        assert!(matches!(end, HandshakeEnd::Closed(_)), "a client cut short: {end:?}");
    }
}
