//! The runtime's handle: starts the workers, routes requests to them by row, and holds the
//! array-wide state (failed members, stats) the workers share.
//!
//! `Runtime` is `Sync`: any number of client threads (the NBD server's connections) submit at
//! once, each request going straight into its workers' channels with no lock of the runtime's.

use crate::RuntimeError;
use crate::log::LogSetup;
use crate::member_set::MemberSet;
use crate::plug;
use crate::request::{self, Callback, Completed, Op, Parent, Piece, PieceOp, Span};
use crate::safe_mode::SafeMode;
use crate::source::MemberSource;
use crate::wide::ArrayWide;
use crate::worker::{Msg, Worker, WorkerView};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use uraid_core::array::{Array, ArrayConfig, ArrayError, ArrayStats, WriteIntentConfig};
use uraid_core::{SECTOR_BYTES, Sector};
use uraid_io::{CacheReport, CountersSnapshot, Driver, MemberCounters};

/// The fewest stripe heads a worker gets, whatever the array total divided by the workers:
/// enough for a full-stripe write of a wide array per head unit in flight plus a few partial
/// stripes held back for filling.
pub const MIN_STRIPE_HEADS_PER_WORKER: usize = 32;

#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// The whole array; `stripe_cache_size` is the total, shared out among the workers.
    pub array: ArrayConfig,
    /// Worker threads; None: one per CPU the process may use (`available_parallelism`).
    pub workers: Option<usize>,
    /// md's data_offset: where each member's data area starts.
    pub data_offset_bytes: u64,
    /// md's internal write-intent bitmap, if the array has one. The engine keeps the bitmap
    /// image in memory and writes whole pages of it, so one engine must own it: an array
    /// with a bitmap runs one worker whatever `workers` says.
    pub write_intent: Option<WriteIntentSetup>,
    /// The caller records every member failure in its metadata and says so with
    /// `failures_recorded`: until then, writes and flushes that finish after a failure are
    /// not acknowledged (md's MD_SB_CHANGE_PENDING; see the engine's `failure_record`). Off,
    /// failures are the caller's to notice (`failed_members`) whenever it likes.
    pub record_failures: bool,
    /// Hold a sequential stream's partial stripes, acknowledged, until the stream fills them
    /// (the engine's `set_write_back`; each worker ends a hold after 2 ms with no request).
    /// Off, every write goes to the members before it is acknowledged.
    pub write_back: bool,
}

/// Where the bitmap is and what it holds.
#[derive(Clone, Debug)]
pub struct WriteIntentSetup {
    pub config: WriteIntentConfig,
    /// Where the bitmap starts on each member (md's superblock offset + bitmap_offset).
    pub offset_bytes: u64,
}

/// Everything the workers counted, summed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    pub workers: usize,
    /// Every worker's engine counters, summed.
    pub array: ArrayStats,
    /// Every worker's stripe cache, summed.
    pub cache: CacheReport,
    /// Per member, the counters of its instances in every worker, summed.
    pub members: Vec<CountersSnapshot>,
    /// Bytes copied to cut requests at row boundaries and put them back (see `request.rs`).
    pub split_bytes_copied: u64,
}

pub struct Runtime {
    pub(crate) senders: Vec<Sender<Msg>>,
    threads: Vec<JoinHandle<()>>,
    pub(crate) views: Vec<Arc<WorkerView>>,
    pub(crate) wide: Arc<ArrayWide>,
    /// [worker][member].
    counters: Vec<Vec<Arc<MemberCounters>>>,
    pub(crate) row_sectors: u64,
    size_sectors: u64,
    pub(crate) raid_disks: usize,
    pub(crate) copied: Arc<AtomicU64>,
    /// Member sectors per row (the chunk): sync work is routed by it.
    pub(crate) chunk_sectors: u64,
    pub(crate) member_sectors: u64,
    /// User requests submitted so far: the sync process reads it to tell an idle array.
    user_requests: AtomicU64,
    /// md's safe mode: the gate every write passes (see `safe_mode`).
    safe_mode: Arc<SafeMode>,
    /// Writes and discards are refused (`set_read_only`).
    read_only: AtomicBool,
    /// The first member opened that cannot discard to zeros (`MemberInfo::discard`): the
    /// array takes no discard since.
    discard_off: Mutex<Option<String>>,
}

impl Runtime {
    /// Opens every worker's members, builds every worker's engine, starts the threads. The
    /// source is only borrowed: the caller keeps it (memory media to inspect, paths to reopen).
    pub fn start(
        config: &RuntimeConfig,
        members: &dyn MemberSource,
    ) -> Result<Runtime, RuntimeError> {
        Self::start_with_log(config, None, members)
    }

    /// As `start`, with the partial parity log on (`log`: where its rings are): worker `i`
    /// writes ring `i`, so at most `log.rings` workers run. The caller replays what an
    /// earlier run left in the rings before (`uraid-md` does at assemble).
    pub fn start_with_log(
        config: &RuntimeConfig,
        log: Option<&LogSetup>,
        members: &dyn MemberSource,
    ) -> Result<Runtime, RuntimeError> {
        let g = config.array.geometry.clone();
        let workers = config
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
            .max(1);
        let workers = if config.write_intent.is_some() { 1 } else { workers };
        let workers = log.map_or(workers, |l| workers.min(l.rings.max(1)));
        if let Some(l) = log {
            let unit_bytes = config.array.stripe_size_bytes;
            if !l.fits(unit_bytes / SECTOR_BYTES) {
                return Err(RuntimeError::LogTooSmall { ring_bytes: l.ring_bytes(), unit_bytes });
            }
        }
        if members.member_count() != g.raid_disks() {
            let found = members.member_count();
            return Err(RuntimeError::MemberCount { expected: g.raid_disks(), found });
        }
        let mut rt = Runtime {
            senders: Vec::new(),
            threads: Vec::new(),
            views: Vec::new(),
            wide: Arc::default(),
            counters: Vec::new(),
            row_sectors: g.stripe_data_sectors(),
            size_sectors: g.array_sectors(config.array.member_sectors),
            raid_disks: g.raid_disks(),
            copied: Arc::default(),
            chunk_sectors: g.chunk_sectors(),
            member_sectors: config.array.member_sectors,
            user_requests: AtomicU64::new(0),
            safe_mode: Arc::default(),
            read_only: AtomicBool::new(false),
            discard_off: Mutex::default(),
        };
        let mut array_config = config.array.clone();
        array_config.stripe_cache_size = heads_per_worker(config.array.stripe_cache_size, workers);
        for w in 0..workers {
            let array = worker_engine(config, &array_config, log, workers)?;
            let opened: Result<Vec<_>, _> = (0..g.raid_disks())
                .map(|m| members.open(m).map_err(|e| open_error(w, m, e)))
                .collect();
            let opened = opened?;
            rt.note_discard(&opened);
            rt.counters.push(opened.iter().map(|m| m.counters().clone()).collect());
            let mut driver = Driver::new(opened).with_data_offset_bytes(config.data_offset_bytes);
            if let Some(wi) = &config.write_intent {
                driver = driver.with_bitmap_offset_bytes(wi.offset_bytes);
            }
            if let Some(l) = log {
                // Spares and replacements swap the member under the driver: same offset.
                driver = driver.with_log_offset_bytes(l.ring_offset_bytes(w));
            }
            let (tx, rx) = mpsc::channel();
            let mut worker = Worker::new(w, array, driver, rx, rt.wide.clone());
            if config.write_intent.is_some() {
                worker = worker.with_bitmap_clock();
            }
            rt.views.push(worker.view.clone());
            let thread = std::thread::Builder::new()
                .name(format!("uraid-w{w}"))
                .spawn(move || worker.run())
                .map_err(|e| RuntimeError::Spawn { worker: w, message: e.to_string() })?;
            rt.senders.push(tx);
            rt.threads.push(thread);
        }
        Ok(rt)
    }

    /// md's safe mode: the owner of the superblocks marks the array clean while no write is
    /// under way, and active again before the next (see `safe_mode`).
    #[must_use]
    pub fn safe_mode(&self) -> &SafeMode {
        &self.safe_mode
    }

    /// User requests submitted since start (md tells an idle array by its I/O counts).
    #[must_use]
    pub fn user_requests(&self) -> u64 {
        self.user_requests.load(Ordering::Relaxed)
    }

    #[must_use]
    pub fn workers(&self) -> usize {
        self.views.len()
    }

    /// Records the first of `members` that cannot discard to zeros, if no member before did.
    pub(crate) fn note_discard(&self, members: &[Box<dyn uraid_io::Member>]) {
        if let Some(m) = members.iter().find(|m| !m.info().discard) {
            let mut off = self.discard_off.lock().unwrap_or_else(PoisonError::into_inner);
            off.get_or_insert_with(|| m.info().name.clone());
        }
    }

    /// The member for whose sake discards are refused (None: the array takes them).
    #[must_use]
    pub fn discard_refused_by(&self) -> Option<String> {
        self.discard_off.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// From now on writes and discards fail with `RuntimeError::ReadOnly` (md's read-only
    /// array: the caller writes nothing to the members either).
    pub fn set_read_only(&self) {
        self.read_only.store(true, Ordering::Relaxed);
    }

    #[must_use]
    pub fn size_bytes(&self) -> u64 {
        self.size_sectors * SECTOR_BYTES
    }

    /// Starts `op`; `done` is called once when it has finished (on a worker thread, or on this
    /// one for a request refused before it reaches a worker).
    pub fn submit(&self, op: Op, done: impl FnOnce(Completed) + Send + 'static) {
        self.user_requests.fetch_add(1, Ordering::Relaxed);
        let writes = matches!(op, Op::Write { .. } | Op::WriteSegments { .. } | Op::Discard { .. });
        if writes && self.read_only.load(Ordering::Relaxed) {
            // Refused here, before an engine would try the members (opened read-only, their
            // writes would fail them).
            let (buf, segments) = match op {
                Op::Write { buf, .. } => (buf, Vec::new()),
                Op::WriteSegments { bufs, .. } => (Vec::new(), bufs),
                _ => (Vec::new(), Vec::new()),
            };
            return done(Completed { result: Err(RuntimeError::ReadOnly), buf, segments });
        }
        // The lock is taken for discards only: every read and write passes here.
        if matches!(op, Op::Discard { .. })
            && let Some(member) = self.discard_refused_by()
        {
            // A member's discard would fail it: refused before any member gets one.
            return done(Completed::whole(
                Err(RuntimeError::DiscardUnsupported { member }),
                vec![],
            ));
        }
        let done: Callback = if writes {
            // A clean array is marked active before the write goes on (md's safe mode).
            self.safe_mode.write_starts();
            let safe_mode = self.safe_mode.clone();
            Box::new(move |c| {
                safe_mode.write_ends();
                done(c);
            })
        } else {
            Box::new(done)
        };
        match op {
            Op::Read { offset_bytes, buf } => {
                self.submit_data(PieceOp::Read, offset_bytes, buf, done);
            }
            Op::Write { offset_bytes, buf, fua } => {
                self.submit_data(PieceOp::Write { fua }, offset_bytes, buf, done);
            }
            Op::ReadSegments { offset_bytes, bufs } => {
                self.submit_segments(PieceOp::Read, offset_bytes, bufs, done);
            }
            Op::WriteSegments { offset_bytes, bufs, fua } => {
                self.submit_segments(PieceOp::Write { fua }, offset_bytes, bufs, done);
            }
            Op::Flush => {
                let parent = Parent::new(self.workers(), done, self.copied.clone());
                for w in 0..self.workers() {
                    self.send(w, PieceOp::Flush, Sector(0), Vec::new(), w, &parent);
                }
            }
            Op::Discard { offset_bytes, len_bytes } => {
                let (sector, sectors) = match self.check(offset_bytes, len_bytes) {
                    Ok(range) => range,
                    Err(e) => return done(Completed::whole(Err(e), Vec::new())),
                };
                let spans = request::split(sector, sectors, self.row_sectors, self.workers());
                let parent = Parent::new(spans.len(), done, self.copied.clone());
                for (i, s) in spans.iter().enumerate() {
                    let op = PieceOp::Discard { sectors: s.sectors };
                    self.send(s.worker, op, Sector(s.sector), Vec::new(), i, &parent);
                }
            }
        }
    }

    /// As `submit`, reporting `(tag, Completed)` on `tx`: for a caller that waits on many.
    pub fn submit_tagged(&self, op: Op, tag: u64, tx: &Sender<(u64, Completed)>) {
        let tx = tx.clone();
        self.submit(op, move |c| {
            // The receiver gone means the caller stopped caring about the answer.
            let _ = tx.send((tag, c));
        });
    }

    fn submit_data(&self, op: PieceOp, offset_bytes: u64, buf: Vec<u8>, done: Callback) {
        let len_bytes = buf.len() as u64;
        let (sector, sectors) = match self.check(offset_bytes, len_bytes) {
            Ok(range) => range,
            Err(e) => return done(Completed::whole(Err(e), buf)),
        };
        let spans: Vec<Span> = request::split(sector, sectors, self.row_sectors, self.workers());
        let copy = matches!(op, PieceOp::Write { .. });
        let bufs = if spans.len() == 1 {
            vec![buf]
        } else {
            request::split_buf(buf, &spans, copy, &self.copied)
        };
        let parent = Parent::new(spans.len(), done, self.copied.clone());
        for (i, (s, b)) in spans.iter().zip(bufs).enumerate() {
            self.send(s.worker, op, Sector(s.sector), b, i, &parent);
        }
    }

    /// Where a read or write of `len_bytes` at `offset_bytes` is cut among the workers: the
    /// byte lengths of its pieces, in order, which `Op::ReadSegments` / `WriteSegments` take
    /// as separate buffers so that nothing is copied. One piece for a request inside a row
    /// (and for one the runtime will refuse: unaligned or out of range).
    #[must_use]
    pub fn segment_bytes(&self, offset_bytes: u64, len_bytes: u64) -> Vec<usize> {
        let Ok((sector, sectors)) = self.check(offset_bytes, len_bytes) else {
            return vec![usize::try_from(len_bytes).expect("a request fits in memory")];
        };
        request::split(sector, sectors, self.row_sectors, self.workers())
            .iter()
            .map(|s| usize::try_from(s.sectors * SECTOR_BYTES).expect("a piece fits in memory"))
            .collect()
    }

    /// Sends each of the caller's buffers as one piece, when they are cut as the rows are.
    fn submit_segments(&self, op: PieceOp, offset_bytes: u64, bufs: Vec<Vec<u8>>, done: Callback) {
        let len_bytes = bufs.iter().map(|b| b.len() as u64).sum();
        let (sector, sectors) = match self.check(offset_bytes, len_bytes) {
            Ok(range) => range,
            Err(e) => return done(Completed { result: Err(e), buf: Vec::new(), segments: bufs }),
        };
        let spans = request::split(sector, sectors, self.row_sectors, self.workers());
        let fits = spans.len() == bufs.len()
            && spans.iter().zip(&bufs).all(|(s, b)| s.sectors * SECTOR_BYTES == b.len() as u64);
        if !fits {
            let expected = self.segment_bytes(offset_bytes, len_bytes);
            let found = bufs.iter().map(Vec::len).collect();
            let e = RuntimeError::Segments { expected, found };
            return done(Completed { result: Err(e), buf: Vec::new(), segments: bufs });
        }
        let parent = Parent::segmented(spans.len(), done, self.copied.clone());
        for (i, (s, b)) in spans.iter().zip(bufs).enumerate() {
            self.send(s.worker, op, Sector(s.sector), b, i, &parent);
        }
    }

    /// The request's sectors when it is whole sectors inside the array; else why not.
    pub(crate) fn check(
        &self,
        offset_bytes: u64,
        len_bytes: u64,
    ) -> Result<(u64, u64), RuntimeError> {
        let whole = |b: u64| b.is_multiple_of(SECTOR_BYTES);
        if !whole(offset_bytes) || !whole(len_bytes) {
            return Err(RuntimeError::Unaligned { offset_bytes, len_bytes });
        }
        let (sector, sectors) = (offset_bytes / SECTOR_BYTES, len_bytes / SECTOR_BYTES);
        if sector.checked_add(sectors).is_none_or(|end| end > self.size_sectors) {
            return Err(ArrayError::OutOfRange { sector, sectors, size: self.size_sectors }.into());
        }
        Ok((sector, sectors))
    }

    pub(crate) fn send(
        &self,
        w: usize,
        op: PieceOp,
        sector: Sector,
        buf: Vec<u8>,
        index: usize,
        parent: &Arc<Parent>,
    ) {
        let piece = Piece { op, sector, buf, index, parent: parent.clone() };
        let Some(piece) = plug::hold(self.id(), w, &self.senders[w], piece) else { return };
        if let Err(mpsc::SendError(Msg::Piece(p))) = self.senders[w].send(Msg::Piece(piece)) {
            p.gone();
        }
    }

    /// Holds what this thread submits from now on until `unplug`, then sends each worker its
    /// share in one message (see `plug`). The thread must unplug before it waits for
    /// anything those requests may need, their answers included.
    pub fn plug(&self) {
        plug::plug();
    }

    /// Sends what this thread held since `plug` and stops holding.
    pub fn unplug(&self) {
        plug::unplug();
    }

    /// This runtime, among the runtimes a thread may hold pieces for.
    fn id(&self) -> usize {
        Arc::as_ptr(&self.wide) as usize
    }

    /// Reads `len_bytes` at `offset_bytes`, waiting for the answer.
    pub fn read_at(&self, offset_bytes: u64, len_bytes: usize) -> Result<Vec<u8>, RuntimeError> {
        let c = self.wait(Op::Read { offset_bytes, buf: vec![0; len_bytes] })?;
        c.result.map(|()| c.buf)
    }

    /// Writes `data` at `offset_bytes` (copied into a request buffer), waiting for the answer.
    pub fn write_at(&self, offset_bytes: u64, data: &[u8]) -> Result<(), RuntimeError> {
        self.wait(Op::Write { offset_bytes, buf: data.to_vec(), fua: false })?.result
    }

    pub fn flush(&self) -> Result<(), RuntimeError> {
        self.wait(Op::Flush)?.result
    }

    pub fn discard(&self, offset_bytes: u64, len_bytes: u64) -> Result<(), RuntimeError> {
        self.wait(Op::Discard { offset_bytes, len_bytes })?.result
    }

    fn wait(&self, op: Op) -> Result<Completed, RuntimeError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(op, move |c| {
            let _ = tx.send(c);
        });
        // A plugged caller would wait for a piece it holds itself.
        self.unplug();
        // The callback dropped unsent: a worker died holding the request.
        rx.recv().map_err(|_| RuntimeError::Gone)
    }

    /// Fails `member` in every worker's engine (each before it plans its next request).
    pub fn fail_member(&self, member: usize) {
        assert!(member < self.raid_disks, "member {member} of {}", self.raid_disks);
        self.wide.failed_mask.fetch_or(MemberSet::of([member]), Ordering::AcqRel);
        self.wide.announce_failure();
    }

    /// Keeps `why` as the reason `member` failed, unless a reason is kept already (the
    /// first one is the cause; what follows is its consequence). Workers give the failed
    /// I/O of the device; callers that fail a member themselves say why.
    pub fn note_failure_reason(&self, member: usize, why: impl FnOnce() -> String) {
        self.wide.note_reason(member, why);
    }

    /// Why `member` failed, when it has failed since it last came back and a reason was
    /// given (`note_failure_reason`).
    #[must_use]
    pub fn failure_reason(&self, member: usize) -> Option<String> {
        self.wide.reason(member)
    }

    /// Waits until members have failed since `seen` (what the last call returned; 0 at
    /// first) or `timeout` passes; returns the news count to pass next time. Who records
    /// failures (`failures_recorded`) waits here, so that writes held for one wait only as
    /// long as the record takes.
    pub fn wait_for_failure(&self, seen: u64, timeout: std::time::Duration) -> u64 {
        let news = self.wide.failure_news.lock().unwrap_or_else(PoisonError::into_inner);
        let (news, _) = self
            .wide
            .failure_news_cv
            .wait_timeout_while(news, timeout, |n| *n == seen)
            .unwrap_or_else(PoisonError::into_inner);
        *news
    }

    /// The caller's metadata now says `members` (a bit each) are faulty: writes held for
    /// their failures are acknowledged (with `RuntimeConfig::record_failures`). A bit stays
    /// until the member comes back (`start_recovery`).
    pub fn failures_recorded(&self, members: MemberSet) {
        let before = self.wide.recorded_mask.fetch_or(members, Ordering::AcqRel);
        if !members.minus(before).is_empty() {
            for tx in &self.senders {
                // A worker gone holds nothing.
                let _ = tx.send(Msg::FailuresRecorded);
            }
        }
    }

    /// The members failed anywhere in the array.
    #[must_use]
    pub fn failed_members(&self) -> Vec<usize> {
        self.wide.failed_mask.load(Ordering::Acquire).members().collect()
    }

    /// Per worker, the members its engine treated as failed at its last turn.
    #[must_use]
    pub fn worker_failed_members(&self) -> Vec<Vec<usize>> {
        self.views
            .iter()
            .map(|v| v.failed_mask.load(Ordering::Acquire).members().collect())
            .collect()
    }

    /// Changes md's stripe_cache_size (the array total) while running.
    pub fn set_stripe_cache_size(&self, heads: usize) {
        // Within md's range, which each worker's engine refuses to leave.
        let heads = heads.clamp(1, uraid_core::stripe::STRIPE_CACHE_SIZE_MAX);
        let each = heads_per_worker(heads, self.workers());
        for tx in &self.senders {
            // A worker gone already has no cache to resize.
            let _ = tx.send(Msg::CacheSize(each));
        }
    }

    #[must_use]
    pub fn stats(&self) -> RuntimeStats {
        let mut stats = RuntimeStats { workers: self.workers(), ..RuntimeStats::default() };
        for v in &self.views {
            let (array, cache) = *v.stats.lock().unwrap_or_else(PoisonError::into_inner);
            stats.array = sum_stats(stats.array, array);
            stats.cache = stats.cache.sum(cache);
        }
        stats.members = (0..self.raid_disks)
            .map(|m| {
                let each = self.counters.iter().map(|w| w[m].snapshot());
                each.fold(CountersSnapshot::default(), CountersSnapshot::sum)
            })
            .collect();
        stats.split_bytes_copied = self.copied.load(Ordering::Relaxed);
        stats
    }

    /// Lets every worker finish what it holds, then joins them. A worker that panicked is
    /// reported (its requests have failed with `Gone`).
    pub fn shutdown(mut self) -> Result<(), RuntimeError> {
        self.stop()
    }

    fn stop(&mut self) -> Result<(), RuntimeError> {
        self.senders.clear();
        let mut result = Ok(());
        for (w, t) in self.threads.drain(..).enumerate() {
            if t.join().is_err() {
                result = Err(RuntimeError::Worker { worker: w, message: "panicked".into() });
            }
        }
        result
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Errors were already reported to the requests; a panic here would only hide them.
        let _ = self.stop();
    }
}

/// One worker's engine: its share of the stripe cache, the bitmap, the log, the hold; one of
/// `workers`, which take stripes in turn (`request::split`: the log's stride).
fn worker_engine(
    config: &RuntimeConfig,
    array_config: &ArrayConfig,
    log: Option<&LogSetup>,
    workers: usize,
) -> Result<Array, RuntimeError> {
    let mut array = Array::new(array_config.clone())?;
    // The worker times the hold (`worker::WRITE_BACK_HOLD`).
    array.set_write_back(config.write_back);
    // Worker `i` of `n` serves rows `i`, `i + n`, ...: a stream skips the others' rows.
    array.set_stream_stride(workers as u64);
    if config.record_failures {
        array.hold_writes_until_failures_recorded();
    }
    if let Some(wi) = &config.write_intent {
        array.enable_write_intent(&wi.config);
    }
    if let Some(l) = log {
        array.enable_partial_parity_log(&l.engine_config(workers));
    }
    Ok(array)
}

fn heads_per_worker(total: usize, workers: usize) -> usize {
    (total / workers).max(MIN_STRIPE_HEADS_PER_WORKER)
}

fn open_error(worker: usize, member: usize, e: std::io::Error) -> RuntimeError {
    // The limit met: say how far it went and which knobs move it.
    let e = if uraid_io::fd_limit::is_out_of_files(&e) {
        let hint = uraid_io::fd_limit::out_of_files_hint();
        std::io::Error::other(format!("{e}: {hint}, or serve with fewer --workers"))
    } else {
        e
    };
    RuntimeError::Open { worker, member, source: Arc::new(e) }
}

fn sum_stats(a: ArrayStats, b: ArrayStats) -> ArrayStats {
    ArrayStats {
        reads_bypassed: a.reads_bypassed + b.reads_bypassed,
        writes_bypassed: a.writes_bypassed + b.writes_bypassed,
        bytes_copied: a.bytes_copied + b.bytes_copied,
        stripe_writes_full: a.stripe_writes_full + b.stripe_writes_full,
        stripe_batches: a.stripe_batches + b.stripe_batches,
        stripe_writes_rmw: a.stripe_writes_rmw + b.stripe_writes_rmw,
        stripe_writes_rcw: a.stripe_writes_rcw + b.stripe_writes_rcw,
        stripe_writes_degraded: a.stripe_writes_degraded + b.stripe_writes_degraded,
        read_errors_corrected: a.read_errors_corrected + b.read_errors_corrected,
        stripe_discards: a.stripe_discards + b.stripe_discards,
        replace_copies: a.replace_copies + b.replace_copies,
        mismatch_sectors: a.mismatch_sectors + b.mismatch_sectors,
        writes_acked_when_logged: a.writes_acked_when_logged + b.writes_acked_when_logged,
        writes_acked_when_admitted: a.writes_acked_when_admitted + b.writes_acked_when_admitted,
        writes_under_log_range: a.writes_under_log_range + b.writes_under_log_range,
        log_advances: a.log_advances + b.log_advances,
        log_ring_wraps: a.log_ring_wraps + b.log_ring_wraps,
        writes_behind: a.writes_behind + b.writes_behind,
        writes_held_back: a.writes_held_back + b.writes_held_back,
        held_writes_failed: a.held_writes_failed + b.held_writes_failed,
        sectors_listed_bad: a.sectors_listed_bad + b.sectors_listed_bad,
    }
}
