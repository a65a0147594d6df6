//! One worker thread: owns one `Array` (its rows' stripe heads), one `Driver` and its own
//! instance of every member (its own io_uring rings), and takes pieces from its own channel.
//! Nothing on the I/O path is shared with other workers but the member media themselves and
//! two atomics read once a turn (the array-wide failed set) or written once a turn (stats).
//!
//! The loop: take new pieces (blocking only when the worker has nothing at all to do), apply
//! member failures other workers saw, submit the pieces, run one driver turn, publish the
//! failures this engine saw, hand back finished pieces.
//!
//! Latency of waiting: a turn blocks in a member's reap (io_uring wait) only when no new piece
//! arrived since the previous turn and I/O is in flight; a piece that arrives during that wait
//! is taken at the next completion, so it waits at most for the earliest in-flight member I/O
//! (microseconds on memory and NVMe, up to a seek, ~10 ms, on an HDD). The alternative, an
//! eventfd the submitter writes and the ring polls, would wake the worker at once, but the
//! `Member` trait (uraid-io) has no way to add a wake source to a member's wait, and the
//! engine's own batching gains from taking new requests at completions anyway (they join the
//! next turn's merge). What would change it: `Member::wait_with(eventfd)` in uraid-io.

use crate::RuntimeError;
use crate::request::{Piece, PieceOp};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use uraid_core::DiskIndex;
use uraid_core::array::{Array, ArrayStats, ReqId};
use uraid_io::Driver;

pub(crate) enum Msg {
    Piece(Piece),
    /// This worker's share of md's stripe_cache_size.
    CacheSize(usize),
}

/// What the runtime reads of a worker while it runs.
#[derive(Default)]
pub(crate) struct WorkerView {
    /// The engine's counters as of its last turn.
    pub stats: Mutex<ArrayStats>,
    /// The members this worker's engine treats as failed, as of its last turn (a bit each).
    pub failed_mask: AtomicU64,
}

/// State every worker shares: the members failed anywhere (a bit each).
#[derive(Default)]
pub(crate) struct ArrayWide {
    pub failed_mask: AtomicU64,
}

pub(crate) struct Worker {
    pub index: usize,
    pub array: Array,
    pub driver: Driver,
    pub rx: Receiver<Msg>,
    pub view: Arc<WorkerView>,
    pub wide: Arc<ArrayWide>,
    /// Pieces in the engine, by the `ReqId` this worker gave them.
    pieces: HashMap<u64, Piece>,
    next_id: u64,
    /// Set when the driver failed (a member's ring returned an error): the engine has nothing
    /// in flight (the driver drained it) and this worker refuses everything from then on.
    broken: Option<String>,
}

impl Worker {
    pub fn new(
        index: usize,
        array: Array,
        driver: Driver,
        rx: Receiver<Msg>,
        wide: Arc<ArrayWide>,
    ) -> Worker {
        Worker {
            index,
            array,
            driver,
            rx,
            view: Arc::default(),
            wide,
            pieces: HashMap::new(),
            next_id: 0,
            broken: None,
        }
    }

    /// Runs until every sender is gone and every piece has finished.
    pub fn run(mut self) {
        let mut open = true;
        let mut stalled_turns = 0u32;
        loop {
            let idle = self.pieces.is_empty() && self.driver.in_flight() == 0;
            let mut taken = 0;
            if idle {
                if !open {
                    return;
                }
                match self.rx.recv() {
                    Ok(msg) => {
                        self.accept(msg);
                        taken += 1;
                    }
                    Err(_) => return,
                }
            }
            let (more, still_open) = self.take_ready();
            taken += more;
            open = still_open;
            self.turn(taken == 0);
            // The engine never stays busy with nothing in flight for long (held writes start
            // when it goes idle); many such turns in a row is a stall, not a workload.
            let spinning = self.driver.in_flight() == 0 && !self.pieces.is_empty();
            stalled_turns = if spinning { stalled_turns + 1 } else { 0 };
            assert!(stalled_turns < 1_000_000, "worker {} stalled: {}", self.index, self.report());
        }
    }

    fn report(&self) -> String {
        format!("{} pieces, engine busy {}", self.pieces.len(), self.array.busy())
    }

    /// Takes every message already queued; returns how many and whether senders remain.
    fn take_ready(&mut self) -> (usize, bool) {
        let mut taken = 0;
        loop {
            match self.rx.try_recv() {
                Ok(msg) => {
                    self.accept(msg);
                    taken += 1;
                }
                Err(TryRecvError::Empty) => return (taken, true),
                Err(TryRecvError::Disconnected) => return (taken, false),
            }
        }
    }

    fn accept(&mut self, msg: Msg) {
        match msg {
            Msg::Piece(piece) => self.submit(piece),
            Msg::CacheSize(heads) => {
                self.array.set_stripe_cache_size(heads).expect("the runtime sends at least 1");
            }
        }
    }

    fn submit(&mut self, mut piece: Piece) {
        if let Some(why) = &self.broken {
            let e = RuntimeError::Worker { worker: self.index, message: why.clone() };
            let buf = std::mem::take(&mut piece.buf);
            piece.parent.piece_done(piece.index, Err(e), buf);
            return;
        }
        // Failures seen elsewhere apply before this piece is planned, so it is never planned
        // against a member another worker has already failed.
        self.sync_failures();
        let id = ReqId(self.next_id);
        self.next_id += 1;
        let buf = std::mem::take(&mut piece.buf);
        match piece.op {
            PieceOp::Read => self.array.submit_read(id, piece.sector, buf),
            PieceOp::Write { fua: false } => self.array.submit_write(id, piece.sector, buf),
            PieceOp::Write { fua: true } => self.array.submit_write_fua(id, piece.sector, buf),
            PieceOp::Flush => self.array.submit_flush(id),
            PieceOp::Discard { sectors } => self.array.submit_discard(id, piece.sector, sectors),
        }
        let old = self.pieces.insert(id.0, piece);
        assert!(old.is_none(), "request id {} reused", id.0);
    }

    fn turn(&mut self, wait: bool) {
        if self.broken.is_some() {
            return;
        }
        let result = self.driver.turn(&mut self.array, wait);
        self.sync_failures();
        // Published before the pieces complete, so that stats read after a request's answer
        // include its work.
        *self.view.stats.lock().unwrap_or_else(PoisonError::into_inner) = self.array.stats();
        match result {
            Ok(()) => self.complete(),
            Err(e) => self.break_down(&e.to_string()),
        }
    }

    /// Shares this engine's failed members and adopts everyone else's.
    fn sync_failures(&mut self) {
        let mine = mask(&self.array.failed_members());
        let all = self.wide.failed_mask.fetch_or(mine, Ordering::AcqRel) | mine;
        let adopt = all & !mine;
        for m in 0..64 {
            if adopt & (1 << m) != 0 {
                self.array.fail_member(DiskIndex(m));
            }
        }
        self.view.failed_mask.store(all, Ordering::Release);
    }

    fn complete(&mut self) {
        for (id, result, buf) in self.array.take_completed() {
            let piece = self.pieces.remove(&id.0).expect("a completion for a piece in flight");
            piece.parent.piece_done(piece.index, result.map_err(RuntimeError::from), buf);
        }
    }

    /// After a driver error every piece fails; the engine has nothing in flight any more.
    fn break_down(&mut self, why: &str) {
        assert_eq!(self.driver.in_flight(), 0, "the driver drains before returning an error");
        self.complete();
        for (_, mut piece) in self.pieces.drain() {
            let e = RuntimeError::Worker { worker: self.index, message: why.to_owned() };
            let buf = std::mem::take(&mut piece.buf);
            piece.parent.piece_done(piece.index, Err(e), buf);
        }
        self.broken = Some(why.to_owned());
    }
}

/// A bit per member; the runtime refuses arrays of more than 64 members.
pub(crate) fn mask(members: &[DiskIndex]) -> u64 {
    members.iter().fold(0, |m, d| m | (1 << d.get()))
}
