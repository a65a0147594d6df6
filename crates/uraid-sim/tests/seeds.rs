//! The simulator in CI: thousands of seeds with faults, the same seed twice giving the same
//! run, and sabotaged members caught (checks that cannot fail prove nothing).
//!
//! The long run is `cargo run --release -p uraid-sim -- --seeds 100000`.

use uraid_sim::{Sabotage, Sim, SimConfig, SimStats, run_seed};

/// Seeds run by `cargo test` (about a minute on two cores).
const CI_SEEDS: u64 = 2000;

#[test]
fn thousands_of_seeds_with_faults_lose_nothing() {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let workers: Vec<_> = (0..threads as u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut total = SimStats::default();
                for seed in (t..CI_SEEDS).step_by(threads) {
                    match run_seed(seed, true) {
                        Ok((stats, _)) => total.add(&stats),
                        Err(f) => panic!(
                            "{f}\nreplay: cargo run --release -p uraid-sim -- --seed {}",
                            f.seed
                        ),
                    }
                }
                total
            })
        })
        .collect();
    let mut total = SimStats::default();
    for w in workers {
        total.add(&w.join().expect("every seed passes"));
    }
    println!("{CI_SEEDS} seeds: {total:?}");
    // Block status checked before every read (1500 seeds: 160,707 answers, 2.7 M sectors
    // called zeros, each one the oracle allowed).
    assert!(total.status_checks > 10_000 && total.status_zero_sectors > 100_000, "{total:?}");
    // The run exercised what it claims to (each seed draws its faults from its seed).
    assert!(total.power_cuts > 100 && total.members_pulled > 100 && total.bad_sectors > 100);
    assert!(total.spares_rebuilt > 100 && total.checks > 100 && total.io_count_checks > 100);
    // Members back by re-add, rebuilt only where the bitmap had bits set (3000 seeds: 874,
    // 421,128 member sectors, against 5,367 members rebuilt in all).
    assert!(total.readds > 100 && total.readd_sectors > 10_000, "{total:?}");
    // Spares and re-adds started beside a recovery under way (RAID6; 3000 seeds from
    // 40,000,000: 762).
    assert!(total.recoveries_overlapped > 100, "{total:?}");
    // Power cuts during a recovery, which goes on from its checkpoint (3000 seeds from
    // 40,000,000: 4,716); during a re-add's (352), and with another queued (1,125).
    assert!(total.cuts_during_recovery > 500, "{total:?}");
    assert!(total.cuts_during_readd > 50 && total.cuts_with_recovery_queued > 50, "{total:?}");
    // Write errors listed in bad block logs (members kept), and reads around them.
    assert!(total.writes_listed > 100 && total.known_bad_reads > 100, "{total:?}");
    // Writes held for failures not yet recorded, and power cuts that came meanwhile.
    assert!(total.failures_recorded > 100 && total.cuts_before_record > 10, "{total:?}");
    // The write hole's case: power cuts with members lost, and the log replayed.
    assert!(total.power_cuts_degraded > 500 && total.lost_after_cut > 100, "{total:?}");
    // Cuts right after a flush's (or FUA write's) acknowledgement, its advance's tail maybe
    // still in flight.
    assert!(total.cuts_after_flush > 200, "{total:?}");
    assert!(total.log_replays > 1000, "{total:?}");
    assert!(total.acked_when_logged > 50_000, "{total:?}");
    // And before, queued behind other generations (3000 seeds from 40,000,000: 89,330;
    // 201,715 before half the writes continued the last one, in the eighth session of
    // 2026-11-28).
    assert!(total.acked_when_admitted > 20_000, "{total:?}");
    // And held for their stream to fill the stripe (the write-back; 2000 seeds: 7,180).
    assert!(total.held_back > 2_000, "{total:?}");
    assert!(total.writes_under_range > 5_000 && total.range_resyncs > 1_000, "{total:?}");
    // Flushes that retired the log by an advance, the log going on (3000 seeds: 26,762).
    assert!(total.log_advances > 5_000, "{total:?}");
    // Log writes that wrapped to a ring's start over retired generations.
    assert!(total.log_ring_wraps > 5_000, "{total:?}");
    // Whole stripes written as batches, no stripe head (2000 seeds: 12,148 of them).
    assert!(total.stripe_batches > 1_000, "{total:?}");
    // md's replace: copies done, given up, handed over when the member failed, started over
    // after a power cut (5000 seeds: 1,028 started, 729 done, 95 taken over).
    assert!(total.replacements > 200 && total.replacements_done > 100, "{total:?}");
    assert!(total.replacements_taken_over > 10 && total.replacements_restarted > 50, "{total:?}");
    // Replacements begun with a log write queued for the member (2000 seeds: 35; 27 since
    // half the restarts read nothing back).
    assert!(total.log_writes_before_replacement > 10, "{total:?}");
    // Power cuts beside latent bad and listed sectors (2000 seeds: 962 and 1160), restarts
    // that read nothing back (4607 of 9154) and blocks a replay could not read written back
    // (276).
    assert!(total.cuts_with_bad_sectors > 300 && total.cuts_with_listed_sectors > 300, "{total:?}");
    assert!(total.restarts_unread > 1000 && total.blocks_written_back > 50, "{total:?}");
    // Sectors a cut left unknown, read again unchanged (3000 seeds: 93,677).
    assert!(total.unknown_rereads > 10_000, "{total:?}");
    // md's safe mode: power cuts while the metadata said clean, restarted with no replay and
    // no resync (3000 seeds: 1,377 of 4,817 clean marks).
    assert!(total.clean_marks > 1_000 && total.cuts_while_clean > 300, "{total:?}");
}

/// Seeds that found engine or lifecycle bugs (each fixed with its own regression test in the
/// crate at fault, or, for the partial parity log's first days, pinned here: 2, 7, 19, 43,
/// 292, 327 and 807 each found one of its bugs; 4993 a parity block rewritten over a read
/// error outside the log; 658 and 5553 the acknowledgement of logged writes; 6932 the
/// simulator's own judge, for a block a latent bad sector hid at the cut; 16461 its disk
/// model, which remapped a bad sector on a write the power cut then lost; 5429 a write left
/// unprotected when a block of its stripe's union failed to read; 1088000 the simulator's
/// restart, which left the replayed records on the rings where uraid-md clears them, so that
/// a second cut replayed them over what the first restart had read back; 106193 a spare
/// that joined while the run's first reset wrote its headers, whose ring then had none at
/// its start: the replay found nothing there and dropped every generation that went to it,
/// which flushes had hidden by resetting the log until they retired it by advances; 2944
/// a clear of the rings (after a replay) that zeroed only the headers found whole, which made
/// a header torn by the cut whole again once the rings wrapped; 10130915 a reset's header
/// written at the ring's start over the newest generation, which a power cut tore, so that
/// the replay took older entries of its heads; 850 a RAID6 head that put both its entries on
/// each of three idle members of a 24 KiB ring, which then reset forever with the head never
/// fitting, found before that placement was committed; 20013895 a read-error rewrite of Q
/// that waited through an advance and was logged after it with the batch's flushed data in
/// its union, so that a replay without that member counted it as zeros: regression test in
/// uraid-core's log_advance.rs; 230 and 1313 found what re-add needed: the restart read the
/// bitmap from a failed member, which had missed bits set after it failed, and a read whose
/// member came back by re-add while its reads were in flight rebuilt from the block it had
/// not read; 22002492 bitmap bits cleared while a member was failed (a clear wanted before
/// it failed), so that its re-add missed a flushed write: regression tests in uraid-core's
/// write_intent.rs; and what md's replace found (the second session of 2026-11-26): 1370 a
/// member that failed during its copy handed to its replacement from where the copy got to,
/// which missed the writes made between the failure and the hand-over (now in sync there only
/// where bits are clear, else rebuilt whole); 6401 a copy window that passed stripes after
/// the member failed, copying nothing, and moved the copy's progress past them; 2051 a
/// degraded read-modify-write that left a parity block it could not read stale, which the new
/// disk then served (the unreadable parity is now recomputed by a reconstruct-write:
/// regression test in uraid-core's engine.rs), and 2936 and 19972 a backstop first tried for
/// it (fail the member instead), which failed members it should not and was dropped; 107 and
/// 3315 the simulator's own model of the pair (flushes and
/// FUA to both; a spare put in the slot of a member whose replacement takes it over);
/// 25022372 the simulator's stall check, which missed the turn a worker takes when an
/// advance starts at the end of the last one; kept so that the exact runs stay green;
/// 46270675 a head with no entry acknowledged when queued, whose write a flush overtook;
/// 46411851 a read-error rewrite logged after its batch was acknowledged, which looked up the
/// batch's requests, gone by then (the write-back's first long run); 46427601 a write whose
/// head was acknowledged once logged and whose other pieces were held, acknowledged by the
/// write-back too, after which a flush completed before the logged head's write in place;
/// 40000010 and 40000035 a Recovery batch that took as rebuilt a member whose recovery
/// started while it was in flight (7e3dbc3, found by uraid-md's chaos test first: these seeds
/// fail with that fix undone, since the simulator starts a second recovery beside one under
/// way); 47175199 a Recovery batch that rebuilt a spare's block from a member that came
/// back by re-add while the batch's reads were in flight, unread (regression test in
/// uraid-core's readd.rs); and once power cuts came during recoveries, uraid-md's replay
/// (modelled here): 40000047 took the member being rebuilt for missing below its recovery
/// offset too (test: uraid-md's write_hole_recovering.rs), 40000497 left out its rings, on
/// which the engine had placed entries, and 40000773 read a ring of one that had just
/// joined, which dropped the generations written before to the device it replaced; once
/// they came during re-adds' recoveries too, 40002175 a replacement's take-over that
/// uraid-md recorded as a re-add's recovery (RECOVERY_BITMAP), so that the start after the
/// cut left what lay above the copy's progress unrebuilt (test: uraid-md's replace.rs), and
/// 47281415 a member re-added with its log rings as they were: a generation whose copy
/// failed with it looked torn for its lack, and a replay before the reset that follows its
/// join dropped it (test: uraid-md's readd.rs); 47283071 a re-added member resumed by the
/// bitmap after a replay that counted it missing above its checkpoint, so that a head's Q
/// was mended and its P, on that member, not (test: uraid-md's write_hole_recovering.rs);
/// 47319918 the bitmap read at a restart from a member being rebuilt after a re-add, whose
/// own image lacked the bits set while it was out (test: uraid-md's readd.rs). And one of the
/// simulator's own: 47611524, a re-add resumed after a cut with no bit set above its
/// checkpoint, whose recovery's closing flush completed while the array was read back and was
/// taken for that read; 48549930, a log write submitted before a replacement began that
/// reached the new disk (uraid-io's `Replacing` sends a request to both only if submitted
/// while it is under way), whose header then made the replay count that disk's ring, being
/// rebuilt, as a witness of older generations it never held; 5932 (the fourth session of
/// 2026-12-05, with replacements begun between turns) the same state by the runtime's road,
/// a log write queued before the replacement began (see the sabotage test below); 517 (the
/// fifth session, once power cuts came beside latent bad sectors) a block a cut tore while
/// a latent bad sector kept the replay from reading it, served from parity after the restart
/// and rewritten without FUA, whose torn sectors a second cut brought back (test: uraid-core's
/// engine.rs); 49461020 (the second session of 2026-12-06, the first long run with safe
/// mode) the simulator's read-back after a cut that found the array clean, which met a member
/// failure and never recorded it, so the log's first reset waited for good (before, a resync
/// ran first and recorded it).
#[test]
fn seeds_that_found_bugs_pass() {
    let log = [
        2, 7, 19, 43, 292, 327, 807, 4993, 658, 5553, 6932, 16461, 5429, 1_088_000, 106_193, 2944,
        10_130_915, 850, 20_013_895, 230, 1313, 22_002_492, 1370, 6401, 2051, 2936, 19_972, 107,
        3315, 25_022_372, 46_270_675, 46_411_851, 46_427_601, 40_000_010, 40_000_035, 47_175_199,
        40_000_047, 40_000_497, 40_000_773, 40_002_175, 47_281_415, 47_283_071, 47_319_918,
        47_611_524, 48_549_930, 5932, 517, 49_461_020,
    ];
    for seed in [17, 20, 21, 48, 76, 111, 443, 1280, 4550, 5979, 10661].into_iter().chain(log) {
        if let Err(f) = run_seed(seed, true) {
            panic!("{f}");
        }
    }
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [3, 77, 1234] {
        let a = run_seed(seed, true).expect("passes");
        let b = run_seed(seed, true).expect("passes");
        assert_eq!(a, b, "seed {seed}: same counters and event digest");
    }
}

fn first_failure(sabotage: Sabotage) -> Option<String> {
    first_failure_where(sabotage, |_| true)
}

/// The first failure among seeds 0..200 run with `sabotage` that `wanted` accepts.
fn first_failure_where(sabotage: Sabotage, wanted: impl Fn(&str) -> bool) -> Option<String> {
    (0..600).find_map(|seed| {
        let mut cfg = SimConfig::from_seed(seed, true);
        cfg.sabotage = Some(sabotage);
        Sim::new(cfg).run().err().map(|f| f.to_string()).filter(|f| wanted(f))
    })
}

#[test]
fn members_that_ignore_flushes_are_caught_at_a_power_cut() {
    // Seed 0 catches it first where a pulled member is re-added without writes it was told
    // were durable, which its bitmap no longer lists (since the eighth session of 2026-11-27,
    // whose log advances where it reset); others right after the cut.
    let first = first_failure(Sabotage::FlushesDoNothing).expect("caught");
    let failure =
        first_failure_where(Sabotage::FlushesDoNothing, |f| f.contains("after the power cut"))
            .unwrap_or_else(|| panic!("no seed caught it at a power cut; the first: {first}"));
    assert!(failure.contains("after the power cut"), "{failure}");
}

#[test]
fn a_restart_that_skips_the_log_replay_is_caught() {
    // Some seeds catch it first when a later read returns what the unreplayed stripe rebuilt
    // (seed 0 since the fifth session of 2026-11-27), others right after the cut.
    let failure = first_failure_where(Sabotage::NoLogReplay, |f| f.contains("after the power cut"));
    assert!(failure.is_some(), "caught after a power cut");
}

#[test]
fn a_restart_that_skips_the_ranges_resync_is_caught() {
    // Some seeds catch it first as parity left inconsistent (the final check); others as a
    // lost member's block rebuilt wrong after the cut, which is what the resync is for.
    let failure =
        first_failure_where(Sabotage::NoRangeResync, |f| f.contains("after the power cut"));
    assert!(failure.is_some(), "caught after a power cut");
}

#[test]
fn corrupt_member_reads_are_caught() {
    let failure = first_failure(Sabotage::CorruptReads).expect("caught");
    println!("{failure}");
}

#[test]
fn a_replacement_that_misses_writes_is_caught() {
    let failure = first_failure(Sabotage::ReplacementMissesWrites).expect("caught");
    println!("{failure}");
}

#[test]
fn a_replacement_given_log_writes_queued_before_it_is_caught() {
    // Seed 5932 (RAID5 x7) caught it first: member 1's replacement begins with a
    // generation's log write to it queued; the sabotage sends it to the new disk too. The
    // member is pulled and the new disk takes over before the join's reset writes its
    // headers, and the power goes: the replay counts the new disk's ring, which holds that
    // generation's header but not the older live ones, takes those for torn and skips them,
    // and member 1's block of a torn stripe is rebuilt wrong. Since cuts come beside bad
    // sectors (the fifth session of 2026-12-05) that seed runs otherwise; seeds 0..12000 with
    // the sabotage fail at 3606, 7275, 7896 and 8997 (each passes without it), 7896 first by
    // steps: array sector 448 garbage after the cut, which its read-back found, and since
    // half the restarts read nothing back, the workload's first read of it.
    let mut cfg = SimConfig::from_seed(7896, true);
    cfg.sabotage = Some(Sabotage::ReplacementGetsEarlierLogWrites);
    let failure = Sim::new(cfg).run().expect_err("caught").to_string();
    assert!(failure.contains("array sector 448"), "{failure}");
}

#[test]
fn acknowledging_writes_before_a_failure_is_recorded_is_caught() {
    // A member failed, a degraded write acknowledged, the power cut before the superblocks
    // said so: the member comes back in sync with stale blocks.
    let failure = first_failure(Sabotage::AckBeforeFailureRecorded).expect("caught");
    println!("{failure}");
}
