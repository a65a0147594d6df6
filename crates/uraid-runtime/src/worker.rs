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
use crate::member_set::{AtomicMemberSet, MemberSet};
use crate::request::{Piece, PieceOp};
use crate::wide::ArrayWide;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use uraid_core::DiskIndex;
use uraid_core::Sector;
use uraid_core::array::{Array, ArrayStats, Mismatch, ReqId};
use uraid_io::{CacheReport, Driver, Member};

/// md's bitmap daemon period (daemon_sleep): bits idle for two of these are cleared.
pub(crate) const BITMAP_TICK: Duration = Duration::from_secs(5);

/// How long the engine may hold a stream's partial stripes (`Array::set_write_back`) with no
/// request coming: a client streaming at depth 1 sends its next write well within this.
const WRITE_BACK_HOLD: Duration = Duration::from_millis(2);

pub(crate) enum Msg {
    Piece(Piece),
    /// A plugged thread's burst (see `plug`).
    Pieces(Vec<Piece>),
    /// This worker's share of md's stripe_cache_size.
    CacheSize(usize),
    /// A member comes back (a spare in its slot): in sync below `offset` member sectors.
    StartRecovery {
        member: usize,
        offset: u64,
    },
    /// A member comes back by re-add (`Array::start_readd`): the ranges it must be rebuilt
    /// in go back on `reply` (None: no bitmap here).
    StartReAdd {
        member: usize,
        reply: std::sync::mpsc::SyncSender<Option<Vec<(u64, u64)>>>,
    },
    /// A sync action starts: where earlier ones found mismatches is forgotten.
    ClearMismatches,
    /// Recovery progress: the member is in sync below `offset` (everywhere at its end).
    RecoveryOffset {
        member: usize,
        offset: u64,
    },
    /// A new instance for a member's slot (a spare, or an empty slot after a remove).
    Replace {
        member: usize,
        instance: Box<dyn Member>,
    },
    /// md's replace: `instance` (the new device) pairs with the member's instance until
    /// `control` says otherwise (`uraid_io::Replacing`); the engine copies the member.
    StartReplacement {
        member: usize,
        instance: Box<dyn Member>,
        control: std::sync::Arc<uraid_io::ReplacementControl>,
    },
    /// The replacement is over (its control says which device stays): copies stop.
    EndReplacement {
        member: usize,
    },
    /// The member being replaced failed: its replacement takes its place
    /// (`Array::take_over_replacement`); the ranges it must be rebuilt in go back on `reply`
    /// (None: no bitmap here).
    TakeOver {
        member: usize,
        front: u64,
        reply: std::sync::mpsc::SyncSender<Option<Vec<(u64, u64)>>>,
    },
    /// Fail the member in this engine now and say so on `reply` (`Runtime::fail_member_now`).
    Fail {
        member: usize,
        reply: std::sync::mpsc::SyncSender<()>,
    },
    /// A new bitmap superblock for the engine to write (see `Array::write_intent_set_header`).
    BitmapHeader(Vec<u8>),
    /// The resync of member sectors `[sector, +sectors)` is done: their bits may clear.
    BitmapResynced {
        sector: u64,
        sectors: u64,
    },
    /// `ArrayWide::recorded_mask` grew: writes held for those failures may be acknowledged.
    FailuresRecorded,
}

/// What the runtime reads of a worker while it runs.
#[derive(Default)]
pub(crate) struct WorkerView {
    /// The engine's counters and its stripe cache's as of its last turn.
    pub stats: Mutex<(ArrayStats, CacheReport)>,
    /// The members this worker's engine treats as failed, as of its last turn (a bit each).
    pub failed_mask: AtomicMemberSet,
    /// Where check, repair and resync found mismatches (the engine's first ones), and the
    /// count in sectors, as of the last turn that changed them.
    pub mismatches: Mutex<(Vec<Mismatch>, u64)>,
    /// Bitmap chunks set, as of the last tick; and bitmap page writes so far.
    pub write_intent: Mutex<(Vec<u64>, u64)>,
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
    /// Members this worker has published as failed or adopted from others: only failures
    /// beyond these are published, so a member the runtime brings back (recovery) is not
    /// failed again by a worker that has not yet seen the news.
    known_failed: MemberSet,
    /// With a write-intent bitmap: when the engine's clock last ticked.
    last_tick: Option<Instant>,
    /// When the last message came: held writes go once none has come for
    /// `WRITE_BACK_HOLD`, even while other work (a sync) keeps the worker from waiting.
    last_message: Instant,
    mismatch_sectors: u64,
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
            known_failed: MemberSet::default(),
            last_tick: None,
            last_message: Instant::now(),
            mismatch_sectors: 0,
        }
    }

    /// Ticks the bitmap clock every `BITMAP_TICK` while the engine has a bitmap.
    pub fn with_bitmap_clock(mut self) -> Worker {
        self.last_tick = Some(Instant::now());
        self
    }

    /// Runs until every sender is gone and every piece has finished.
    pub fn run(mut self) {
        let mut open = true;
        let mut stalled_turns = 0u32;
        loop {
            // The engine may still have work no piece waits on: writes acknowledged once
            // their log entries were durable, a log reset. It is idle only without those.
            // Pieces held until a member failure is recorded, and member writes paused for it,
            // wait for that news (a message).
            let idle = self.driver.in_flight() == 0
                && (self.array.writes_wait_for_record()
                    || (self.pieces.len() == self.array.held_requests()
                        && (self.broken.is_some() || !self.array.busy())));
            let mut taken = 0;
            if idle && !open && self.array.holds_writes_back() {
                self.array.release_held_writes();
            } else if idle {
                if !open {
                    return;
                }
                match self.wait_for_message() {
                    Ok(Some(msg)) => {
                        self.accept(msg);
                        taken += 1;
                    }
                    Ok(None) => {}
                    // Every sender is gone: writes still held go before the worker does.
                    Err(()) if self.array.holds_writes_back() => self.array.release_held_writes(),
                    Err(()) => return,
                }
            }
            self.tick_if_due();
            self.end_hold_if_due();
            let (more, still_open) = self.take_ready();
            taken += more;
            open = still_open;
            self.turn(taken == 0);
            // The engine never stays busy with nothing in flight for long (held writes start
            // when it goes idle); many such turns in a row is a stall, not a workload.
            let spinning = self.driver.in_flight() == 0
                && self.broken.is_none()
                && !self.array.writes_wait_for_record()
                && (self.pieces.len() > self.array.held_requests() || self.array.busy());
            stalled_turns = if spinning { stalled_turns + 1 } else { 0 };
            assert!(stalled_turns < 1_000_000, "worker {} stalled: {}", self.index, self.report());
        }
    }

    /// Blocks for the next message; with a bitmap clock, only until the next tick is due;
    /// while the engine holds writes back, only for `WRITE_BACK_HOLD`, then they go.
    fn wait_for_message(&mut self) -> Result<Option<Msg>, ()> {
        let tick = self.last_tick.map(|last| BITMAP_TICK.saturating_sub(last.elapsed()));
        let hold = self.array.holds_writes_back();
        let wait = if hold {
            Some(tick.map_or(WRITE_BACK_HOLD, |t| t.min(WRITE_BACK_HOLD)))
        } else {
            tick
        };
        let Some(left) = wait else { return self.rx.recv().map(Some).map_err(|_| ()) };
        match self.rx.recv_timeout(left) {
            Ok(msg) => Ok(Some(msg)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if hold {
                    self.array.release_held_writes();
                }
                Ok(None)
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(()),
        }
    }

    fn tick_if_due(&mut self) {
        let Some(last) = self.last_tick else { return };
        if last.elapsed() < BITMAP_TICK {
            return;
        }
        self.last_tick = Some(Instant::now());
        self.array.write_intent_tick();
        let mut wi = self.view.write_intent.lock().unwrap_or_else(PoisonError::into_inner);
        *wi = (self.array.write_intent_dirty_chunks(), self.array.write_intent_page_writes());
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

    fn end_hold_if_due(&mut self) {
        if self.array.holds_writes_back() && self.last_message.elapsed() >= WRITE_BACK_HOLD {
            self.array.release_held_writes();
        }
    }

    fn accept(&mut self, msg: Msg) {
        self.last_message = Instant::now();
        match msg {
            Msg::Piece(piece) => self.submit(piece),
            Msg::Pieces(pieces) => pieces.into_iter().for_each(|p| self.submit(p)),
            Msg::CacheSize(heads) => {
                self.array.set_stripe_cache_size(heads).expect("the runtime sends at least 1");
            }
            Msg::StartRecovery { member, offset } => {
                self.known_failed.remove(member);
                self.array.start_recovery(DiskIndex(member as u16), Sector(offset));
                self.wide.revived(member);
            }
            Msg::StartReAdd { member, reply } => {
                self.known_failed.remove(member);
                let ranges = self.array.start_readd(DiskIndex(member as u16));
                self.wide.revived(member);
                let _ = reply.send(ranges);
            }
            Msg::RecoveryOffset { member, offset } => {
                self.array.set_recovery_offset(DiskIndex(member as u16), Sector(offset));
            }
            Msg::ClearMismatches => {
                self.array.clear_mismatches();
                let view =
                    &mut *self.view.mismatches.lock().unwrap_or_else(PoisonError::into_inner);
                view.0.clear();
            }
            Msg::Replace { member, instance } => self.replace(member, instance),
            Msg::StartReplacement { member, instance, control } => {
                self.driver.wrap_member(member, |old| {
                    Box::new(uraid_io::Replacing::new(old, instance, control))
                });
                self.array.start_replacement(DiskIndex(member as u16));
            }
            Msg::EndReplacement { member } => {
                self.array.end_replacement(DiskIndex(member as u16));
            }
            Msg::TakeOver { member, front, reply } => {
                self.known_failed.remove(member);
                let ranges =
                    self.array.take_over_replacement(DiskIndex(member as u16), Sector(front));
                self.wide.revived(member);
                let _ = reply.send(ranges);
            }
            Msg::BitmapHeader(header) => self.array.write_intent_set_header(&header),
            Msg::BitmapResynced { sector, sectors } => {
                self.array.write_intent_resynced(Sector(sector), sectors);
            }
            // The turn that follows hands back what this releases.
            Msg::FailuresRecorded => self.sync_failures(),
            Msg::Fail { member, reply } => {
                // The caller changes what the member's device is once this is answered.
                self.fail_before_device_change(member);
                let _ = reply.send(());
            }
        }
    }

    /// Fails `member` in this engine now (it may not have adopted the runtime's failure yet)
    /// and takes a turn, which hands its device what the engine planned for it before: sent
    /// after the device changes (a swap, a replacement's takeover), a read planned while the
    /// member was in sync read the new device's blank blocks as good (a healthy read goes
    /// straight to the member, past the stripe heads that would plan it again:
    /// tests/revival.rs, uraid-md's lifecycle_chaos).
    fn fail_before_device_change(&mut self, member: usize) {
        self.array.fail_member(DiskIndex(member as u16));
        self.known_failed.insert(member);
        self.turn(false);
    }

    /// Swaps a member's instance once the old one has nothing in flight (it is failed or
    /// removed, so it gets no new I/O and drains within its slowest I/O). The runtime failed
    /// the member before sending this.
    fn replace(&mut self, member: usize, mut instance: Box<dyn Member>) {
        self.fail_before_device_change(member);
        while let Err(back) = self.driver.replace_member(member, instance) {
            instance = back;
            self.turn(true);
            if self.broken.is_some() {
                // The driver drained everything: the swap cannot be refused now.
                let _ = self.driver.replace_member(member, instance);
                break;
            }
        }
        self.array.member_device_changed(DiskIndex(member as u16));
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
        if let PieceOp::Status { sectors } = piece.op {
            let answer =
                crate::status::piece_status(&self.array, &self.driver, piece.sector, sectors);
            piece.parent.piece_done(piece.index, Ok(()), answer);
            return;
        }
        let id = ReqId(self.next_id);
        self.next_id += 1;
        let buf = std::mem::take(&mut piece.buf);
        match piece.op {
            PieceOp::Read => self.array.submit_read(id, piece.sector, buf),
            PieceOp::Write { fua: false } => self.array.submit_write(id, piece.sector, buf),
            PieceOp::Write { fua: true } => self.array.submit_write_fua(id, piece.sector, buf),
            PieceOp::Flush => self.array.submit_flush(id),
            PieceOp::Discard { sectors } => self.array.submit_discard(id, piece.sector, sectors),
            PieceOp::Sync { kind, sectors } => {
                self.array.submit_sync(id, kind, piece.sector, sectors);
            }
            PieceOp::Status { .. } => unreachable!("answered above"),
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
        let stats = self.array.stats();
        let cache = CacheReport::of(&self.array);
        *self.view.stats.lock().unwrap_or_else(PoisonError::into_inner) = (stats, cache);
        if stats.mismatch_sectors != self.mismatch_sectors {
            self.mismatch_sectors = stats.mismatch_sectors;
            let (found, count) = self.array.mismatches();
            *self.view.mismatches.lock().unwrap_or_else(PoisonError::into_inner) =
                (found.to_vec(), count);
        }
        match result {
            Ok(()) => self.complete(),
            Err(e) => self.break_down(&e.to_string()),
        }
    }

    /// Shares this engine's new failures and adopts everyone else's.
    /// Runs before every piece is planned: in the common case (nothing new anywhere) it
    /// only reads the shared mask, so that the workers do not bounce its cache line.
    fn sync_failures(&mut self) {
        let mine = mask(&self.array.failed_members());
        let mut newly = mine.minus(self.known_failed);
        if !newly.is_empty() {
            // A member being brought back failed here on its old device: no news.
            newly = newly.minus(self.wide.reviving_mask());
        }
        let all = if newly.is_empty() {
            self.wide.failed_mask.load(Ordering::Acquire)
        } else {
            // Kept before the news goes out, so that whoever records the failure can say why.
            for m in newly.members() {
                if let Some(failed) = self.driver.last_failure(m) {
                    self.wide.note_reason(m, || failed.to_string());
                }
            }
            let all = self.wide.failed_mask.fetch_or(newly, Ordering::AcqRel).union(newly);
            self.wide.announce_failure();
            all
        };
        let adopt = all.minus(mine);
        self.known_failed = mine.union(all);
        for m in adopt.members() {
            self.array.fail_member(DiskIndex(m as u16));
        }
        if self.array.has_unrecorded_failures() {
            let recorded = self.wide.recorded_mask.load(Ordering::Acquire);
            for m in self.array.unrecorded_failures() {
                if recorded.contains(m.get()) {
                    self.array.failure_recorded(m);
                }
            }
        }
        // Only this worker writes its view.
        if self.view.failed_mask.load(Ordering::Relaxed) != all {
            self.view.failed_mask.store(all, Ordering::Release);
        }
    }

    fn complete(&mut self) {
        let done = self.array.take_completed();
        if done.is_empty() {
            return;
        }
        let pieces = &mut self.pieces;
        crate::completions::deliver_batch(|| {
            for (id, result, buf) in done {
                let piece = pieces.remove(&id.0).expect("a completion for a piece in flight");
                piece.parent.piece_done(piece.index, result.map_err(RuntimeError::from), buf);
            }
        });
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

pub(crate) fn mask(members: &[DiskIndex]) -> MemberSet {
    MemberSet::of(members.iter().map(|d| d.get()))
}
