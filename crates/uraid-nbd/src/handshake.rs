//! The server's side of fixed newstyle negotiation: greet, read the client flags, answer
//! options until the client picks the export (NBD_OPT_EXPORT_NAME or NBD_OPT_GO) or leaves.
//!
//! One export is served; the empty (default) name and the configured name both select it.
//! Anything the protocol says the server MUST close for (bad magic, unknown client flags, an
//! unknown name in NBD_OPT_EXPORT_NAME, which cannot be answered with an error) ends the
//! connection with a `HandshakeError`; everything else is answered and haggling goes on.

use crate::wire::{self, read_u32, read_u64, write_option_reply};
use std::io::{self, Read, Write};
use thiserror::Error;

/// Option data beyond this is a denial of service, not a request: the largest legitimate one
/// (NBD_OPT_GO) is a 4 KiB name and a few info requests.
const OPTION_BYTES_MAX: u32 = 64 * 1024;

/// What the client is told about the export.
#[derive(Clone, Debug)]
pub(crate) struct Export {
    pub name: String,
    pub description: Option<String>,
    pub size_bytes: u64,
    pub transmission_flags: u16,
    pub block_bytes_min: u32,
    pub block_bytes_preferred: u32,
    pub block_bytes_max: u32,
    /// The base:allocation metadata context is offered (block status).
    pub allocation: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Transmission starts; `structured`: NBD_OPT_STRUCTURED_REPLY was acknowledged;
    /// `allocation`: the last NBD_OPT_SET_META_CONTEXT selected base:allocation.
    Transmission { structured: bool, allocation: bool },
    /// The client sent NBD_OPT_ABORT (answered).
    Aborted,
}

#[derive(Debug, Error)]
pub(crate) enum HandshakeError {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("option magic {0:#x} is not IHAVEOPT")]
    BadMagic(u64),
    #[error("client flags {0:#x} include flags the server did not offer")]
    ClientFlags(u32),
    #[error("option {option} carries {len_bytes} bytes, more than {OPTION_BYTES_MAX}")]
    OptionTooLong { option: u32, len_bytes: u32 },
    #[error("NBD_OPT_EXPORT_NAME asked for unknown export {0:?}")]
    UnknownExport(String),
    /// A client the server would not serve (`refuse`) asked for an export by
    /// NBD_OPT_EXPORT_NAME (named here), or sent too many options.
    #[error("refused client asked for export {0:?}")]
    Refused(String),
}

pub(crate) fn negotiate(
    s: &mut (impl Read + Write),
    export: &Export,
) -> Result<Outcome, HandshakeError> {
    let no_zeroes = greet(s)?;
    let mut structured = false;
    let mut allocation = false;
    loop {
        let (option, data) = read_option(s)?;
        match option {
            wire::OPT_EXPORT_NAME => {
                let name = String::from_utf8_lossy(&data).into_owned();
                if !selects(export, &name) {
                    return Err(HandshakeError::UnknownExport(name));
                }
                export_name_reply(s, export, no_zeroes)?;
                return Ok(Outcome::Transmission { structured, allocation });
            }
            wire::OPT_ABORT => {
                write_option_reply(s, option, wire::REP_ACK, &[])?;
                return Ok(Outcome::Aborted);
            }
            wire::OPT_INFO | wire::OPT_GO => {
                if info(s, option, &data, export)? && option == wire::OPT_GO {
                    return Ok(Outcome::Transmission { structured, allocation });
                }
            }
            wire::OPT_LIST | wire::OPT_STRUCTURED_REPLY if !data.is_empty() => {
                write_option_reply(s, option, wire::REP_ERR_INVALID, b"option takes no data")?;
            }
            wire::OPT_LIST => {
                let mut server = (export.name.len() as u32).to_be_bytes().to_vec();
                server.extend_from_slice(export.name.as_bytes());
                write_option_reply(s, option, wire::REP_SERVER, &server)?;
                write_option_reply(s, option, wire::REP_ACK, &[])?;
            }
            wire::OPT_STRUCTURED_REPLY => {
                structured = true;
                write_option_reply(s, option, wire::REP_ACK, &[])?;
            }
            wire::OPT_LIST_META_CONTEXT => {
                crate::meta_context::answer(s, option, &data, export, structured)?;
            }
            wire::OPT_SET_META_CONTEXT => {
                allocation = crate::meta_context::answer(s, option, &data, export, structured)?;
            }
            wire::OPT_STARTTLS => {
                write_option_reply(s, option, wire::REP_ERR_POLICY, b"TLS is not offered")?;
            }
            _ => write_option_reply(s, option, wire::REP_ERR_UNSUP, b"unknown option")?,
        }
    }
}

/// Options a refused client may send before it is closed on: enough for any client to ask
/// for an export and read why it cannot have one.
const REFUSED_OPTIONS_MAX: usize = 8;

/// Negotiates with a client the server will not serve (over its connection limit): greets
/// it as usual so that it can read `reason`, answers every option that can carry an error
/// with NBD_REP_ERR_POLICY and `reason`, and returns when the client gives up. Ends in
/// `Aborted` after NBD_OPT_ABORT, otherwise in an error (the connection is closed).
pub(crate) fn refuse(s: &mut (impl Read + Write), reason: &str) -> Result<Outcome, HandshakeError> {
    greet(s)?;
    for _ in 0..REFUSED_OPTIONS_MAX {
        let (option, data) = read_option(s)?;
        match option {
            // Has no error reply: the protocol says to close.
            wire::OPT_EXPORT_NAME => {
                let name = String::from_utf8_lossy(&data).into_owned();
                return Err(HandshakeError::Refused(name));
            }
            wire::OPT_ABORT => {
                write_option_reply(s, option, wire::REP_ACK, &[])?;
                return Ok(Outcome::Aborted);
            }
            _ => write_option_reply(s, option, wire::REP_ERR_POLICY, reason.as_bytes())?,
        }
    }
    Err(HandshakeError::Refused(String::new()))
}

/// Sends the greeting and reads the client's flags; true: the client asked for no zeroes.
fn greet(s: &mut (impl Read + Write)) -> Result<bool, HandshakeError> {
    let mut greeting = [0; 18];
    greeting[0..8].copy_from_slice(&wire::NBD_MAGIC.to_be_bytes());
    greeting[8..16].copy_from_slice(&wire::IHAVEOPT.to_be_bytes());
    let handshake_flags = wire::FLAG_FIXED_NEWSTYLE | wire::FLAG_NO_ZEROES;
    greeting[16..18].copy_from_slice(&handshake_flags.to_be_bytes());
    s.write_all(&greeting)?;
    let client_flags = read_u32(s)?;
    if client_flags & !(wire::FLAG_C_FIXED_NEWSTYLE | wire::FLAG_C_NO_ZEROES) != 0 {
        return Err(HandshakeError::ClientFlags(client_flags));
    }
    Ok(client_flags & wire::FLAG_C_NO_ZEROES != 0)
}

/// Reads one option: its number and data.
fn read_option(s: &mut impl Read) -> Result<(u32, Vec<u8>), HandshakeError> {
    let magic = read_u64(s)?;
    if magic != wire::IHAVEOPT {
        return Err(HandshakeError::BadMagic(magic));
    }
    let option = read_u32(s)?;
    let len_bytes = read_u32(s)?;
    if len_bytes > OPTION_BYTES_MAX {
        return Err(HandshakeError::OptionTooLong { option, len_bytes });
    }
    let mut data = vec![0; len_bytes as usize];
    s.read_exact(&mut data)?;
    Ok((option, data))
}

fn selects(export: &Export, name: &str) -> bool {
    name.is_empty() || name == export.name
}

fn export_name_reply(s: &mut impl Write, export: &Export, no_zeroes: bool) -> io::Result<()> {
    let mut b = Vec::with_capacity(10 + wire::EXPORT_NAME_PADDING_BYTES);
    b.extend_from_slice(&export.size_bytes.to_be_bytes());
    b.extend_from_slice(&export.transmission_flags.to_be_bytes());
    if !no_zeroes {
        b.resize(b.len() + wire::EXPORT_NAME_PADDING_BYTES, 0);
    }
    s.write_all(&b)
}

/// Answers NBD_OPT_INFO or NBD_OPT_GO; true when it ended with NBD_REP_ACK.
///
/// Data: name length (32 bits), name, request count (16 bits), requests (16 bits each).
/// Example: GO for "" asking for the block sizes is `0 0 0 0 | 0 1 | 0 3`.
fn info(
    s: &mut impl Write,
    option: u32,
    data: &[u8],
    export: &Export,
) -> Result<bool, HandshakeError> {
    let Some(request) = parse_info(data) else {
        write_option_reply(s, option, wire::REP_ERR_INVALID, b"malformed info request")?;
        return Ok(false);
    };
    if !selects(export, &request.name) {
        write_option_reply(s, option, wire::REP_ERR_UNKNOWN, b"no such export")?;
        return Ok(false);
    }
    let mut reply = |kind: u16, payload: &[u8]| {
        let mut b = kind.to_be_bytes().to_vec();
        b.extend_from_slice(payload);
        write_option_reply(s, option, wire::REP_INFO, &b)
    };
    let mut payload = export.size_bytes.to_be_bytes().to_vec();
    payload.extend_from_slice(&export.transmission_flags.to_be_bytes());
    reply(wire::INFO_EXPORT, &payload)?;
    if request.wants.contains(&wire::INFO_NAME) {
        reply(wire::INFO_NAME, export.name.as_bytes())?;
    }
    if let Some(d) =
        export.description.as_ref().filter(|_| request.wants.contains(&wire::INFO_DESCRIPTION))
    {
        reply(wire::INFO_DESCRIPTION, d.as_bytes())?;
    }
    // Sent whether asked or not (the protocol allows it): we do enforce a 512-byte minimum.
    let sizes = [export.block_bytes_min, export.block_bytes_preferred, export.block_bytes_max];
    reply(wire::INFO_BLOCK_SIZE, &sizes.map(u32::to_be_bytes).concat())?;
    write_option_reply(s, option, wire::REP_ACK, &[])?;
    Ok(true)
}

struct InfoRequest {
    name: String,
    wants: Vec<u16>,
}

fn parse_info(data: &[u8]) -> Option<InfoRequest> {
    let name_bytes = wire::be32(data.get(0..4)?) as usize;
    if name_bytes > wire::STRING_BYTES_MAX {
        return None;
    }
    let name = std::str::from_utf8(data.get(4..4 + name_bytes)?).ok()?.to_owned();
    let rest = data.get(4 + name_bytes..)?;
    let count = usize::from(wire::be16(rest.get(0..2)?));
    let list = rest.get(2..)?;
    if list.len() != 2 * count {
        return None;
    }
    let wants = list.chunks_exact(2).map(wire::be16).collect();
    Some(InfoRequest { name, wants })
}
