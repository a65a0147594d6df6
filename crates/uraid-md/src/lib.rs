//! md's array lifecycle, around the runtime: what the Linux md driver does with an array
//! between assemble and stop.
//!
//! - `meta`: the v1.2 superblocks kept current on every member (events, clean/active, roles,
//!   recovery and resync offsets, the bitmap superblock).
//! - `array`: `MdArray`, an assembled running array and md's verbs on it.
//! - `sync`: the background process shared by resync, recovery, check and repair.
//! - `scrub`, `frozen`: md's sync_action verbs (check, repair, idle; frozen).
//! - `control`: the control socket the `uraid` verbs talk to.
//! - `ppl`: the partial parity log's place on the members and its replay after a crash.
//! - `status`: what a running array reports.
//! - `monitor`: mdadm --monitor's events, from one status to the next.
//! - `mdadm_conf`: what the monitor takes from an mdadm.conf; `spare_groups`: which spare
//!   it moves where.

/// `eprintln!` that never panics. eprintln! panics when stderr is gone (a closed pipe:
/// EPIPE, since Rust ignores SIGPIPE); in a serve whose log reader went away that killed the
/// signal thread at its first message, and SIGTERM then went unheard (seen with `| head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod array;
mod bad_blocks;
pub mod control;
mod frozen;
mod log_start;
pub mod md_ppl;
pub mod mdadm_conf;
pub mod members;
pub mod meta;
pub mod monitor;
mod ops;
pub mod ppl;
mod readd;
mod replace;
mod report;
mod runner;
mod safe_mode;
mod scrub;
pub mod spare_groups;
pub mod status;
pub mod stripe_cache;
pub mod sync;

pub use array::{ArrayInfo, ConsistencyPolicy, MdArray, MdError, MdOptions};
pub use sync::{SyncControl, SyncSpeed};
