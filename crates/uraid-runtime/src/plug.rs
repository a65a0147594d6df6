//! Plugging, in the block layer's sense: a thread that submits a burst of requests (an NBD
//! connection working through the requests one socket read brought in) holds their pieces and
//! sends each worker its share as one message when it unplugs. A worker asleep in its channel
//! is then woken once per burst, not once per request: `uraid bench serve` measured those
//! futex wakes at about a tenth of the connection thread's CPU on 4 KiB random writes at
//! iodepth 32.
//!
//! The plug is the thread's own (a thread-local): submitting never takes a lock for it, and
//! nothing held is visible to another thread. The rule that keeps it safe: a plugged thread
//! unplugs before it waits for anything (a socket read, room in a window, an answer), since
//! the held pieces may be what it would wait for. `Runtime`'s own blocking helpers unplug
//! first.

use crate::request::Piece;
use crate::worker::Msg;
use std::cell::{Cell, RefCell};
use std::sync::mpsc::{SendError, Sender};

/// Pieces held for one worker of one runtime (its channel, cloned, so unplugging needs no
/// runtime at hand).
struct Held {
    runtime: usize,
    worker: usize,
    tx: Sender<Msg>,
    pieces: Vec<Piece>,
}

thread_local! {
    /// What this thread holds while plugged.
    static PLUG: RefCell<Vec<Held>> = const { RefCell::new(Vec::new()) };
    /// Whether this thread is plugged: a flag without a destructor, read first, so that
    /// threads that never plug never touch `PLUG` (see `completions` for why that matters).
    static PLUGGED: Cell<bool> = const { Cell::new(false) };
}

/// Starts holding this thread's pieces (no effect when already plugged).
pub(crate) fn plug() {
    PLUGGED.set(true);
}

/// Sends everything held, a message per worker, and stops holding.
pub(crate) fn unplug() {
    if !PLUGGED.replace(false) {
        return;
    }
    for h in PLUG.with_borrow_mut(std::mem::take) {
        if let Err(SendError(Msg::Pieces(pieces))) = h.tx.send(Msg::Pieces(h.pieces)) {
            pieces.into_iter().for_each(Piece::gone);
        }
    }
}

/// Holds `piece` for `worker` of `runtime` when this thread is plugged; else gives it back.
pub(crate) fn hold(runtime: usize, worker: usize, tx: &Sender<Msg>, piece: Piece) -> Option<Piece> {
    if !PLUGGED.get() {
        return Some(piece);
    }
    PLUG.with_borrow_mut(|held| {
        match held.iter_mut().find(|h| h.runtime == runtime && h.worker == worker) {
            Some(h) => h.pieces.push(piece),
            None => held.push(Held { runtime, worker, tx: tx.clone(), pieces: vec![piece] }),
        }
    });
    None
}
