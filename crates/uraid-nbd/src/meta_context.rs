//! NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT: the one metadata context this
//! server has is `base:allocation` (block status: holes and zeros), offered where the backend
//! can tell (`BlockBackend::reports_allocation`).
//!
//! Data of both options: export name length (32 bits), name, query count (32 bits), then per
//! query its length (32 bits) and text. Example: SET for "" selecting base:allocation is
//! `0 0 0 0 | 0 0 0 1 | 0 0 0 15 | base:allocation`.

use crate::handshake::Export;
use crate::wire::{self, write_option_reply};
use std::io::{self, Write};

/// A parsed request: the export name and the queries.
struct Queries {
    name: String,
    queries: Vec<String>,
}

fn parse(data: &[u8]) -> Option<Queries> {
    let mut at = 0;
    let u32_at = |at: &mut usize| -> Option<usize> {
        let b = data.get(*at..*at + 4)?;
        *at += 4;
        Some(u32::from_be_bytes(b.try_into().ok()?) as usize)
    };
    let name_len = u32_at(&mut at)?;
    let name = String::from_utf8(data.get(at..at.checked_add(name_len)?)?.to_vec()).ok()?;
    at += name_len;
    let count = u32_at(&mut at)?;
    // Each query takes at least its length field: a count beyond that is malformed.
    if count > (data.len() - at) / 4 {
        return None;
    }
    let mut queries = Vec::with_capacity(count);
    for _ in 0..count {
        let len = u32_at(&mut at)?;
        let text = data.get(at..at.checked_add(len)?)?;
        queries.push(String::from_utf8(text.to_vec()).ok()?);
        at += len;
    }
    (at == data.len()).then_some(Queries { name, queries })
}

/// Answers a LIST or SET option; for SET, returns whether base:allocation is now selected
/// (false after any error: a SET replaces what an earlier one selected, even when it fails).
pub(crate) fn answer(
    s: &mut impl Write,
    option: u32,
    data: &[u8],
    export: &Export,
    structured: bool,
) -> io::Result<bool> {
    let set = option == wire::OPT_SET_META_CONTEXT;
    if set && !structured {
        let why = b"NBD_OPT_SET_META_CONTEXT needs structured replies first";
        write_option_reply(s, option, wire::REP_ERR_INVALID, why)?;
        return Ok(false);
    }
    let Some(request) = parse(data) else {
        write_option_reply(s, option, wire::REP_ERR_INVALID, b"malformed metadata context option")?;
        return Ok(false);
    };
    if !(request.name.is_empty() || request.name == export.name) {
        write_option_reply(s, option, wire::REP_ERR_UNKNOWN, b"no such export")?;
        return Ok(false);
    }
    let wanted = |q: &str| {
        // LIST takes "base:" as a wildcard (and no query at all as "everything"); SET must
        // name the context.
        q == wire::CONTEXT_ALLOCATION || (!set && q == "base:")
    };
    let found = export.allocation
        && if set || !request.queries.is_empty() {
            request.queries.iter().any(|q| wanted(q))
        } else {
            true
        };
    if found {
        // LIST's ids are reserved (zero); SET's name the context in block status replies.
        let id = if set { wire::CONTEXT_ALLOCATION_ID } else { 0 };
        let mut reply = id.to_be_bytes().to_vec();
        reply.extend_from_slice(wire::CONTEXT_ALLOCATION.as_bytes());
        write_option_reply(s, option, wire::REP_META_CONTEXT, &reply)?;
    }
    write_option_reply(s, option, wire::REP_ACK, &[])?;
    Ok(set && found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_and_malformed_ones_do_not() {
        let ok =
            parse(&wire::meta_context_request("x", &["base:allocation", "qemu:dirty"])).unwrap();
        assert_eq!((ok.name.as_str(), ok.queries.len()), ("x", 2));
        let good = wire::meta_context_request("", &["base:allocation"]);
        for cut in 0..good.len() {
            assert!(parse(&good[..cut]).is_none(), "cut at {cut}");
        }
        let mut long = good.clone();
        long.push(0);
        assert!(parse(&long).is_none(), "trailing bytes");
        let mut huge = wire::meta_context_request("", &[]);
        huge[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(parse(&huge).is_none(), "a count no data backs");
    }
}
