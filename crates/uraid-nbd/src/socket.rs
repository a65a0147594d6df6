//! A connected stream socket, TCP or Unix: the one type the connection code reads and writes,
//! so the protocol code is written once for both.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// A Unix socket's send buffer: 4 x 1 MiB replies.
const SEND_BUFFER_BYTES: usize = 4 << 20;

#[derive(Debug)]
pub(crate) enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    pub fn try_clone(&self) -> io::Result<Socket> {
        Ok(match self {
            Socket::Tcp(s) => Socket::Tcp(s.try_clone()?),
            Socket::Unix(s) => Socket::Unix(s.try_clone()?),
        })
    }

    /// Room for a few large replies in a Unix socket's send buffer (up to the system's
    /// net.core.wmem_max), so that the worker that read the data sends it while it is in its
    /// cache, without waiting, instead of handing most of it to the backlog thread. TCP sizes
    /// its buffers itself (setting one would turn that off).
    pub fn enlarge_send_buffer(&self) {
        if let Socket::Unix(s) = self {
            // Best effort: the kernel caps it, and the default works, only slower.
            let _ = socket2::SockRef::from(s).set_send_buffer_size(SEND_BUFFER_BYTES);
        }
    }

    /// Shutting the read side wakes a thread blocked reading it (the read returns end of
    /// file) while replies still go out: how the server stops a connection and drains it.
    pub fn shutdown(&self, how: Shutdown) {
        // Already shut or disconnected: either way nothing more will be read.
        let _ = match self {
            Socket::Tcp(s) => s.shutdown(how),
            Socket::Unix(s) => s.shutdown(how),
        };
    }

    /// Bounds each read and write (`None`: wait for ever).
    pub fn set_timeouts(&self, limit: Option<Duration>) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => {
                s.set_read_timeout(limit)?;
                s.set_write_timeout(limit)
            }
            Socket::Unix(s) => {
                s.set_read_timeout(limit)?;
                s.set_write_timeout(limit)
            }
        }
    }
}

/// A socket whose reads and writes must all be done by `until` (the handshake's limit): each
/// gets the time left as its timeout, so a client that trickles a byte at a time gains none.
pub(crate) struct Deadline<'a> {
    pub socket: &'a mut Socket,
    pub until: Instant,
}

impl Deadline<'_> {
    fn arm(&self) -> io::Result<()> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "the handshake took too long"));
        }
        self.socket.set_timeouts(Some(left))
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm()?;
        self.socket.read(buf)
    }
}

impl Write for Deadline<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm()?;
        self.socket.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.socket.flush()
    }
}

impl AsFd for Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Socket::Tcp(s) => s.as_fd(),
            Socket::Unix(s) => s.as_fd(),
        }
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write_vectored(bufs),
            Socket::Unix(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.flush(),
            Socket::Unix(s) => s.flush(),
        }
    }
}
