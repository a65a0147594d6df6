//! A minimal blocking NBD client: fixed newstyle, NBD_OPT_GO (asking for the block sizes),
//! optionally structured replies and base:allocation; then read, write (FUA), flush, trim,
//! write zeroes, block status.
//!
//! The blocking calls send one request and wait for its reply. `send` and `receive` pipeline
//! instead (crash tests use them to know exactly which writes and flushes were acknowledged
//! when the server went away): replies come back in any order, matched by handle.

mod requests;

use crate::wire::{self, Request, read_u16, read_u32, read_u64};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("protocol violation by the server: {0}")]
    Protocol(String),
    #[error("option {option} refused with reply {reply:#x}: {message}")]
    OptionRefused { option: u32, reply: u32, message: String },
    /// The server answered the request with this NBD error value (EIO, EINVAL, ...).
    #[error("request failed with NBD error {0}")]
    Nbd(u32),
}

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// The server's block size constraints (NBD_INFO_BLOCK_SIZE), or NBD's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSizes {
    pub min: u32,
    pub preferred: u32,
    pub max: u32,
}

/// A reply: its handle, error (0: success) and a read's data.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply {
    pub handle: u64,
    pub error: u32,
    pub data: Vec<u8>,
}

pub struct Client {
    stream: Box<dyn Stream>,
    size_bytes: u64,
    transmission_flags: u16,
    block_sizes: BlockSizes,
    structured: bool,
    /// The id the server gave base:allocation, when selected.
    allocation_id: Option<u32>,
    next_handle: u64,
    /// Requests sent and not answered yet, by handle.
    pending: HashMap<u64, Request>,
}

impl Client {
    pub fn connect_tcp(addr: impl ToSocketAddrs, export_name: &str) -> Result<Client, ClientError> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        Client::handshake(Box::new(s), export_name, false, false)
    }

    pub fn connect_unix(path: impl AsRef<Path>, export_name: &str) -> Result<Client, ClientError> {
        Client::handshake(Box::new(UnixStream::connect(path)?), export_name, false, false)
    }

    /// As `connect_tcp`, with structured replies and the base:allocation metadata context
    /// selected (NBD_OPT_SET_META_CONTEXT) where the server has it (`allocation_id`).
    pub fn connect_tcp_allocation(
        addr: impl ToSocketAddrs,
        export_name: &str,
    ) -> Result<Client, ClientError> {
        Client::handshake(Box::new(TcpStream::connect(addr)?), export_name, true, true)
    }

    /// `connect_tcp_allocation` on a Unix socket.
    pub fn connect_unix_allocation(
        path: impl AsRef<Path>,
        export_name: &str,
    ) -> Result<Client, ClientError> {
        Client::handshake(Box::new(UnixStream::connect(path)?), export_name, true, true)
    }

    /// As `connect_tcp`, negotiating structured replies first (NBD_OPT_STRUCTURED_REPLY).
    pub fn connect_tcp_structured(
        addr: impl ToSocketAddrs,
        export_name: &str,
    ) -> Result<Client, ClientError> {
        Client::handshake(Box::new(TcpStream::connect(addr)?), export_name, true, false)
    }

    fn handshake(
        mut s: Box<dyn Stream>,
        name: &str,
        structured: bool,
        allocation: bool,
    ) -> Result<Client, ClientError> {
        let (magic, opt_magic) = (read_u64(&mut s)?, read_u64(&mut s)?);
        if magic != wire::NBD_MAGIC || opt_magic != wire::IHAVEOPT {
            return Err(protocol(format!("greeting {magic:#x} {opt_magic:#x}")));
        }
        let flags = read_u16(&mut s)?;
        if flags & wire::FLAG_FIXED_NEWSTYLE == 0 {
            return Err(protocol("the server does not speak fixed newstyle".into()));
        }
        let mut ours = wire::FLAG_C_FIXED_NEWSTYLE;
        if flags & wire::FLAG_NO_ZEROES != 0 {
            ours |= wire::FLAG_C_NO_ZEROES;
        }
        s.write_all(&ours.to_be_bytes())?;
        let mut c = Client {
            stream: s,
            size_bytes: 0,
            transmission_flags: 0,
            block_sizes: BlockSizes { min: 1, preferred: 4096, max: u32::MAX },
            structured: false,
            allocation_id: None,
            next_handle: 1,
            pending: HashMap::new(),
        };
        if structured {
            c.send_option(wire::OPT_STRUCTURED_REPLY, &[])?;
            let (reply, _) = c.option_reply(wire::OPT_STRUCTURED_REPLY)?;
            c.structured = reply == wire::REP_ACK;
        }
        if allocation {
            c.select_allocation(name)?;
        }
        c.go(name)?;
        Ok(c)
    }

    fn go(&mut self, name: &str) -> Result<(), ClientError> {
        let mut data = (name.len() as u32).to_be_bytes().to_vec();
        data.extend_from_slice(name.as_bytes());
        data.extend_from_slice(&1u16.to_be_bytes());
        data.extend_from_slice(&wire::INFO_BLOCK_SIZE.to_be_bytes());
        self.send_option(wire::OPT_GO, &data)?;
        let mut saw_export = false;
        loop {
            let (reply, data) = self.option_reply(wire::OPT_GO)?;
            match reply {
                wire::REP_ACK if saw_export => return Ok(()),
                wire::REP_ACK => return Err(protocol("NBD_REP_ACK before NBD_INFO_EXPORT".into())),
                wire::REP_INFO => saw_export |= self.info(&data)?,
                r if r & (1 << 31) != 0 => {
                    let message = String::from_utf8_lossy(&data).into_owned();
                    return Err(ClientError::OptionRefused {
                        option: wire::OPT_GO,
                        reply,
                        message,
                    });
                }
                r => return Err(protocol(format!("reply type {r} to NBD_OPT_GO"))),
            }
        }
    }

    /// NBD_OPT_SET_META_CONTEXT for base:allocation: its id, if the server selected it.
    fn select_allocation(&mut self, name: &str) -> Result<(), ClientError> {
        let option = wire::OPT_SET_META_CONTEXT;
        self.send_option(option, &wire::meta_context_request(name, &[wire::CONTEXT_ALLOCATION]))?;
        loop {
            let (reply, data) = self.option_reply(option)?;
            match reply {
                wire::REP_ACK => return Ok(()),
                wire::REP_META_CONTEXT if data.len() >= 4 => {
                    if &data[4..] == wire::CONTEXT_ALLOCATION.as_bytes() {
                        self.allocation_id = Some(wire::be32(&data[..4]));
                    }
                }
                r if r & (1 << 31) != 0 => {
                    let message = String::from_utf8_lossy(&data).into_owned();
                    return Err(ClientError::OptionRefused { option, reply, message });
                }
                r => return Err(protocol(format!("reply type {r} to NBD_OPT_SET_META_CONTEXT"))),
            }
        }
    }

    /// Takes in one NBD_REP_INFO; true if it was NBD_INFO_EXPORT.
    fn info(&mut self, data: &[u8]) -> Result<bool, ClientError> {
        let bad = || protocol(format!("NBD_REP_INFO of {} bytes", data.len()));
        let kind = wire::be16(data.get(0..2).ok_or_else(bad)?);
        match (kind, data.len()) {
            (wire::INFO_EXPORT, 12) => {
                self.size_bytes = wire::be64(&data[2..10]);
                self.transmission_flags = wire::be16(&data[10..12]);
                Ok(true)
            }
            (wire::INFO_BLOCK_SIZE, 14) => {
                let at = |i: usize| wire::be32(&data[i..i + 4]);
                self.block_sizes = BlockSizes { min: at(2), preferred: at(6), max: at(10) };
                Ok(false)
            }
            (wire::INFO_EXPORT | wire::INFO_BLOCK_SIZE, _) => Err(bad()),
            _ => Ok(false),
        }
    }

    fn send_option(&mut self, option: u32, data: &[u8]) -> io::Result<()> {
        let mut b = wire::IHAVEOPT.to_be_bytes().to_vec();
        b.extend_from_slice(&option.to_be_bytes());
        b.extend_from_slice(&(data.len() as u32).to_be_bytes());
        b.extend_from_slice(data);
        self.stream.write_all(&b)
    }

    fn option_reply(&mut self, option: u32) -> Result<(u32, Vec<u8>), ClientError> {
        let magic = read_u64(&mut self.stream)?;
        let answered = read_u32(&mut self.stream)?;
        if magic != wire::OPTION_REPLY_MAGIC || answered != option {
            return Err(protocol(format!("option reply {magic:#x} for option {answered}")));
        }
        let reply = read_u32(&mut self.stream)?;
        let len = read_u32(&mut self.stream)?;
        if len > 64 * 1024 {
            return Err(protocol(format!("option reply of {len} bytes")));
        }
        let mut data = vec![0; len as usize];
        self.stream.read_exact(&mut data)?;
        Ok((reply, data))
    }
}

fn protocol(message: String) -> ClientError {
    ClientError::Protocol(message)
}
