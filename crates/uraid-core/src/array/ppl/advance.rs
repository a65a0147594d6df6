//! Retiring the log at a flush without stopping it: an advance. A reset (the parent's docs)
//! waits for every logged write, flushes every member and writes new headers at the start of
//! every ring before the next generation may go, so writes queued behind a flush wait for
//! about three member I/Os in turn. A flush does not need the rings emptied, only the entries
//! of the writes it covers retired, and every header already says where the live ones
//! begin (its tail). So a flush starts an advance instead; so does a ring filling up, whose
//! older generations it retires for later ones to wrap over (`ring`), and so does a head that
//! finds no room with no advance under way. Every generation leaves room for a tail's header
//! after it, so the rings are reset only when not even that fits, which the room kept makes
//! rare (every run of `bench io --only ppl` resets once, at its start, since the eighth
//! session of 2026-11-27):
//!
//! 1. It covers every generation started before it (`tail`: the first one after). It waits
//!    for the writes those generations logged to complete, while later generations go on.
//! 2. It flushes every member: those writes are durable in place. The flushes waiting for
//!    it complete now, and unions drop what it made durable (`log_advance_flushed`), unless
//!    a replay could still take a head's older entry for a newer one (below).
//! 3. The next generation carries the new tail, to its entries' rings and enough more that
//!    any members the array survives losing leave one (`log_tail_holders`); once it is
//!    durable, a replay of any members that survive sees the older generations retired
//!    (and flushes still waiting complete).
//!
//! Why a flush need not wait for the tail (since the fifth session of 2026-11-27; before, it
//! did: the flush rows of `uraid bench io --only ppl` rose 0.004-0.045 with this). Between 2
//! and 3 the retired entries are still live on the rings, and a crash then replays them; their
//! writes are durable, so each rewrites the parity the members hold, and a lost member's
//! sectors in a union, which the replay takes from that parity, come back right. That fails
//! for a head with entries in two generations the advance retires on different rings (at
//! depth an entry goes to a less busy member, `placement`): losing the newer one's ring
//! leaves the older, whose partial parity predates the newer write, and the replay writes a
//! parity that rebuilds the lost block wrong (the simulator's seed 41018011, and
//! `tests/log_replay.rs`). Then the flush waits for the tail as before
//! (`replay_may_fall_back`). A head logged after 2 may have a newer entry beside an older
//! live one too, but of the rings it went to (`placement`) losing one loses nothing else:
//! its parity member's (that parity is not rebuilt), a member whose block its union holds
//! (the sectors lost were being written), or one of two or three copies.
//!
//! What may be logged meanwhile. An entry's union holds every sector of its head written
//! since the last point where they were durable, and a replay counts a lost member's sectors
//! in it as being written (it takes them from the parity, which a torn write of the head
//! leaves wrong: `crate::ppl::replay_blocks`). An entry logged during the advance outlives
//! it, so while a flush waits for the advance its union must hold no sector the advance makes
//! durable: only heads whose union began after the advance did (`Live::born`) and that log a
//! span-1 entry of their own join generations during it, while it drains, while the members
//! flush, and in its tail's generation. (Those that came while the members flushed waited for the
//! tail's generation, one log write fewer, until generations overlapped: at depth on flash
//! every head then waited out each advance's flushes; `bench io --only ppl`, RAID5 random
//! qd16 with 128 KiB rings, NVMe 0.82 -> 0.91.) An advance no flush waits for (a ring
//! filling up) promises nothing durable, so heads with older unions join too, their unions
//! whole, and no flush may join it after (`old_unions`): a sequential stream at depth 1
//! meets such a head at nearly every advance, and held it through the member flushes
//! (RAID6 4 KiB sequential qd1 with 128 KiB rings, NVMe 0.968 -> 0.991). The rest (older
//! unions while a flush waits, ranges, batches, discards) wait,
//! and are computed again when it ends, as after a reset. Full-stripe writes do not go under
//! durable ranges during it (every range it retires would have to wait for them).

use super::{Array, Owner, PartialParityLog, Reset, Waiting};
use crate::array::Pending;
use crate::units::DiskIndex;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::array) enum Stage {
    /// Waiting for the writes of older generations to complete.
    Draining,
    /// Member flushes outstanding.
    Flushing(usize),
    /// Durable in place: the next generation carries the new tail.
    Tail,
    /// That generation is in flight.
    TailInFlight,
}

#[derive(Clone, Debug)]
pub(in crate::array) struct Advance {
    /// `PartialParityLog::advances` when it started.
    pub(super) number: u64,
    /// The first generation started after it began: every older one retires.
    pub(super) tail: u64,
    pub(super) stage: Stage,
    /// A head whose union began before it joined a generation during it (no flush waited
    /// for it then): no flush may join it since (see `log_joinable`).
    pub(super) old_unions: bool,
}

impl PartialParityLog {
    pub(super) fn start_advance(&mut self) {
        self.advances += 1;
        self.rings.advance_started();
        let (number, tail) = (self.advances, self.generation + 1);
        self.advance = Some(Advance { number, tail, stage: Stage::Draining, old_unions: false });
    }

    /// Rings filling up: an advance retires their older generations while the log goes on
    /// (see `ring`).
    pub(super) fn advance_if_rings_fill(&mut self, live: &[usize]) {
        if self.advance.is_none() && self.reset == Reset::No && self.rings.want_advance(live) {
            self.start_advance();
        }
    }

    /// Whether every write advance `number` covers has completed: those of heads logged by
    /// older generations, and of batches (none starts during an advance), with no older
    /// generation in flight.
    fn drained(&self, number: u64) -> bool {
        self.writing == self.logged.len() + self.behind.len()
            && self.logged.values().chain(self.behind.values()).all(|(_, s)| *s >= number)
            && self.in_flight.iter().all(|f| f.advance >= number)
    }

    /// Whether a flush that comes now is covered by the advance under way. The writes it
    /// must cover are those acknowledged before it (logged in a completed generation, or
    /// written without the log and completed). The advance covers them if its member
    /// flushes have not gone out yet and no generation it does not retire (from its tail on)
    /// has completed: such a generation's writes would outlive it in live entries, whose
    /// unions a replay counts as being written. Then waiting for the next advance would add a
    /// whole advance (drain, member flushes, the tail) to the flush.
    pub(super) fn flush_may_join(&self) -> bool {
        self.advance.as_ref().is_some_and(|a| {
            a.stage == Stage::Draining
                && self.newest_done < a.tail
                && !a.old_unions
                && !self.in_flight.iter().any(|f| f.acked && f.generation >= a.tail)
        })
    }

    /// Whether advance `number` has flushes waiting for it (each makes durable what it
    /// drains).
    pub(super) fn flushes_wait_for(&self, number: u64) -> bool {
        self.flush_waiters.iter().any(|f| f.2 <= number)
    }

    /// The advance whose tail the next generation carries, if any.
    pub(super) fn tail_due(&self) -> Option<u64> {
        self.advance.as_ref().filter(|a| a.stage == Stage::Tail).map(|a| a.tail)
    }
}

impl Array {
    /// Whether the log has advance work it could do now (see `Array::busy`).
    pub(super) fn log_advance_busy(&self) -> bool {
        self.ppl.as_ref().is_some_and(|l| {
            l.advance.as_ref().is_some_and(|a| a.stage != Stage::Draining || l.drained(a.number))
        })
    }

    /// Whether waiting head `w` may join a generation while advance `number` is under way
    /// (see the module docs): a head whose union began before it only while no flush waits
    /// for it.
    pub(super) fn log_joinable(&self, w: &Waiting, number: u64) -> bool {
        self.log_union_born(w).is_some_and(|born| {
            born >= number || !self.ppl.as_ref().expect("a log").flushes_wait_for(number)
        })
    }

    /// When the union of waiting head `w` began, if it may join a generation during an
    /// advance at all: a head logging span-1 entries of its own.
    fn log_union_born(&self, w: &Waiting) -> Option<u64> {
        let Owner::Head(id) = w.owner else { return None };
        if w.discard || w.ranged || w.entries.is_empty() || w.entries.iter().any(|e| e.1.span != 1)
        {
            return None;
        }
        let l = self.ppl.as_ref().expect("a log");
        l.live.get(&self.head_member_range(id).0).map(|v| v.born)
    }

    /// Heads `taken` join a generation: if one's union began before the advance under way,
    /// no flush may join that advance any more, and the union counts as born in it: the
    /// advance does not drain this write, so its end must not drop the union (simulator
    /// seed 36000868: a torn write's later entry left unflushed sectors out, and a member
    /// lost after the cut read back garbage).
    pub(super) fn log_note_old_unions(&mut self, taken: &[Waiting]) {
        let Some(number) = self.ppl.as_ref().and_then(|l| l.advance.as_ref()).map(|a| a.number)
        else {
            return;
        };
        let old: Vec<u64> = taken
            .iter()
            .filter(|w| self.log_union_born(w).is_some_and(|born| born < number))
            .filter_map(|w| match w.owner {
                Owner::Head(id) => Some(self.head_member_range(id).0),
                Owner::Batch(_) => None,
            })
            .collect();
        let l = self.ppl.as_mut().expect("a log");
        for key in &old {
            l.live.get_mut(key).expect("a union").born = number;
        }
        if !old.is_empty() {
            l.advance.as_mut().expect("checked").old_unions = true;
        }
    }

    /// Which waiting heads may join the next generation: all of them but during an advance,
    /// and but those under a range a generation in flight logs (`log_range_in_flight`).
    pub(super) fn log_joinable_now(&self) -> Vec<bool> {
        let l = self.ppl.as_ref().expect("a log");
        let mut joinable = match l.advance.as_ref() {
            None => vec![true; l.waiting.len()],
            Some(a) => l.waiting.iter().map(|w| self.log_joinable(w, a.number)).collect(),
        };
        for (j, w) in joinable.iter_mut().zip(&l.waiting) {
            *j &= !(w.ranged && self.log_range_in_flight(w));
        }
        joinable
    }

    /// Once drained, flushes every live member.
    pub(super) fn step_log_advance(&mut self) {
        let Some(l) = self.ppl.as_ref() else { return };
        let Some(a) = l.advance.as_ref() else { return };
        if l.reset != Reset::No || a.stage != Stage::Draining || !l.drained(a.number) {
            return;
        }
        let number = a.number;
        let live = self.live_members();
        let stage = if live.is_empty() { Stage::Tail } else { Stage::Flushing(live.len()) };
        self.ppl.as_mut().expect("a log").advance.as_mut().expect("checked").stage = stage;
        for member in live {
            self.queue_member_flush(member, Pending::LogFlush { member, advance: number });
        }
    }

    /// A member flush of advance `number` completed (one a reset took over is ignored); a
    /// member that cannot flush fails, as at a reset.
    pub(in crate::array) fn log_advance_flush_done(
        &mut self,
        member: DiskIndex,
        number: u64,
        ok: bool,
    ) {
        if !ok {
            self.mark_failed(member);
        }
        let Some(l) = self.ppl.as_mut() else { return };
        let Some(a) = l.advance.as_mut().filter(|a| a.number == number) else { return };
        if let Stage::Flushing(n) = &mut a.stage {
            *n -= 1;
            if *n == 0 {
                a.stage = Stage::Tail;
                let tail = a.tail;
                if l.flushes_wait_for(number) && !l.replay_may_fall_back(tail) {
                    self.log_advance_flushed(number);
                }
            }
        }
    }

    /// The member flushes of advance `number`, which flushes wait for, are done: what it
    /// drained is durable in place. The flushes complete now, not when its tail is durable,
    /// and unions drop what it made durable. The tail only frees ring space: until it is
    /// durable the entries it retires stay live, and a replay of one whose writes are
    /// durable writes back the parity the members hold (with a member lost, its blocks in
    /// the union come from that parity: `crate::ppl::replay_blocks`).
    fn log_advance_flushed(&mut self, number: u64) {
        self.drop_durable_unions(number);
        let l = self.ppl.as_mut().expect("a log");
        let (done, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut l.flush_waiters).into_iter().partition(|w| w.2 <= number);
        l.flush_waiters = later;
        self.complete_log_waiters(done.into_iter().map(|w| w.0).collect());
    }

    /// What advance `number` drained is durable in place: unions born before it drop (but
    /// those of heads it did not drain), and waiting heads that could not join it are
    /// computed again.
    fn drop_durable_unions(&mut self, number: u64) {
        let keep: Vec<bool> = {
            let l = self.ppl.as_ref().expect("a log");
            l.waiting.iter().map(|w| self.log_joinable(w, number)).collect()
        };
        // Before the waiting heads' entries are computed again: a stripe's union it drops
        // is no part of theirs.
        let l = self.ppl.as_mut().expect("a log");
        l.stripes.retain(|_, v| v.born >= number || v.writing > 0);
        self.recompute_waiting(&keep);
        let l = self.ppl.as_mut().expect("a log");
        l.live.retain(|_, v| v.born >= number || v.writing > 0);
    }

    /// The generation carrying the advance's tail is durable: what it covers retires (every
    /// range with it: none was logged during it), waiting heads with older unions (while a
    /// flush waited for it) are computed again (again, if its member flushes completed the
    /// flushes), and the flushes still waiting for it complete.
    pub(super) fn finish_log_advance(&mut self) {
        self.stats.log_advances += 1;
        let l = self.ppl.as_mut().expect("a log");
        let advance = l.advance.take().expect("an advance");
        let number = advance.number;
        // Every ring holds the tail now: what lies below it may be overwritten.
        l.retire(advance.tail);
        l.rings.advance_finished();
        l.ranges.clear();
        self.drop_durable_unions(number);
        let l = self.ppl.as_mut().expect("a log");
        let live = &l.live;
        l.on_ring.retain(|k| live.contains_key(k));
        let ready = l.take_done_waiters();
        if l.flush_waiters.iter().any(|w| w.2 != u64::MAX) && l.reset == Reset::No {
            l.start_advance();
        }
        self.complete_log_waiters(ready);
    }
}
