//! The NBD server's handshake (fixed newstyle negotiation) against arbitrary client bytes.
//!
//! The first byte picks the server's configuration; the rest is what the client sends.
//! Invariants: no panic, no hang, memory bounded whatever the option lengths claim; what the
//! server sends is its greeting, then well-formed option replies, then (only when
//! NBD_OPT_EXPORT_NAME selected the export) the export's size and flags; GO and ABORT end with
//! their NBD_REP_ACK. The same bytes are then sent to a server turning the client away (over
//! its connection limit): never transmission, every option answered by the policy error and
//! its reason but ABORT (acknowledged) and EXPORT_NAME (closed on), at most 8 options.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use uraid_fuzz::nbd::{Bytes, greeting, option_reply};
use uraid_nbd::fuzzing::{HandshakeEnd, handshake, refusal};
use uraid_nbd::{MemoryBackend, Server, ServerConfig, wire};

const SIZE_BYTES: usize = 64 << 10;

fuzz_target!(|data: &[u8]| {
    let Some((&cfg, client)) = data.split_first() else { return };
    let config = ServerConfig {
        export_name: if cfg & 1 != 0 { "uraid".into() } else { String::new() },
        description: (cfg & 2 != 0).then(|| "a fuzzed export".into()),
        read_only: cfg & 4 != 0,
        ..ServerConfig::default()
    };
    let server = Server::new(Arc::new(MemoryBackend::new(SIZE_BYTES, 4096)), config).unwrap();
    let (out, end) = handshake(&server, client);
    let mut b = Bytes { rest: &out };
    greeting(&mut b);
    let mut replies = 0;
    let mut last = None;
    while let Some(r) = option_reply(&mut b) {
        replies += 1;
        last = Some((r.option, r.kind));
    }
    // Each option is at least 16 client bytes and gets at most 5 replies (INFO/GO: export,
    // name, description, block sizes, ack).
    assert!(replies <= 5 * (client.len() / 16 + 1), "{replies} replies to {} bytes", client.len());
    let tail = b.rest;
    match end {
        HandshakeEnd::Transmission { .. } if !tail.is_empty() => {
            // NBD_OPT_EXPORT_NAME: size, transmission flags, maybe 124 zeros.
            assert!(tail.len() == 10 || tail.len() == 134, "export name reply of {}", tail.len());
            assert_eq!(tail[..8], (SIZE_BYTES as u64).to_be_bytes());
            assert!(tail[10..].iter().all(|&z| z == 0));
        }
        HandshakeEnd::Transmission { .. } => {
            assert_eq!(last, Some((wire::OPT_GO, wire::REP_ACK)), "GO ends with its ACK");
        }
        HandshakeEnd::Aborted => {
            assert!(tail.is_empty());
            assert_eq!(last, Some((wire::OPT_ABORT, wire::REP_ACK)), "ABORT is acknowledged");
        }
        HandshakeEnd::Closed(_) => assert!(tail.is_empty(), "{} stray bytes", tail.len()),
    }

    let reason = "too many connections";
    let (out, end) = refusal(client, reason);
    let mut b = Bytes { rest: &out };
    greeting(&mut b);
    let mut replies = 0;
    while let Some(r) = option_reply(&mut b) {
        replies += 1;
        if r.kind == wire::REP_ACK {
            assert_eq!(r.option, wire::OPT_ABORT, "only ABORT is acknowledged");
            assert_eq!(end, HandshakeEnd::Aborted);
        } else {
            assert_eq!(r.kind, wire::REP_ERR_POLICY, "refused by policy");
            assert_eq!(r.data, reason.as_bytes(), "with the reason");
        }
    }
    assert!(replies <= 8, "{replies} replies to a refused client");
    assert!(b.rest.is_empty(), "{} stray bytes", b.rest.len());
    assert!(!matches!(end, HandshakeEnd::Transmission { .. }), "a refused client was served");
});
