//! Is a stripe in a cache? Loads timed with the TSC. The kernels ask this of their sources'
//! last lines (then prefetch the sources' first lines) to choose between
//! ordinary and non-temporal stores (see `generic.rs`): the size of a call cannot tell a stripe
//! that the caller just wrote (in cache) from one that it streams through (in DRAM), and each
//! kind of store costs the other case 2x or 20%.
//!
//! On the Zen 3 VM where this was measured (a 10 ns TSC granularity), the probe of a line in
//! L1 read 49-98 ticks at 2.445 ticks/ns, an L3 hit no more, a miss to DRAM 300-2000. The limit
//! is the probe's typical cost plus [`MISS_NS`], measured once in ticks.

use std::arch::x86_64::{_MM_HINT_T0, _mm_lfence, _mm_mfence, _mm_prefetch, _rdtsc};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What a load that missed every cache takes at least beyond a hit: DRAM is ~70-100 ns away
/// (more with a TLB miss), L3 ~15 ns.
const MISS_NS: u64 = 45;

/// TSC ticks above which a probe missed the caches; 0 until measured.
static MISS_TICKS: AtomicU64 = AtomicU64::new(0);

/// Ticks from just before to just after loading the byte at each pointer of `lines` (the
/// loads overlap, so misses cost about one memory latency however many lines miss); then
/// prefetches `also`.
///
/// SAFETY: every pointer of `lines` must be readable; `also` may point anywhere (prefetches
/// cannot fault).
#[inline(always)]
unsafe fn ticks(
    lines: impl Iterator<Item = *const u8>,
    also: impl Iterator<Item = *const u8>,
) -> u64 {
    unsafe {
        // Drain the stores of the caller's previous call first: on an Intel Xeon (Sapphire
        // Rapids class, VM) a load timed behind a store buffer full of RFOs read 157-1000
        // ticks from L2 in 70% of the probes of a 4 x 64 KiB XOR loop, against < 100 after the
        // fence; the wrong answer sent cache-resident stripes to non-temporal stores (0.13-0.2x).
        _mm_mfence();
        _mm_lfence();
        let start = _rdtsc();
        _mm_lfence();
        for p in lines {
            std::hint::black_box(std::ptr::read_volatile(p));
        }
        _mm_lfence();
        let took = _rdtsc().wrapping_sub(start);
        // Not inside the timed interval: prefetches of lines in a slow cache hold the line fill
        // buffers, and the timed loads queue behind them. On the Xeon VM with its neighbours
        // busy, a 16 x 64 KiB stripe in L2 read as a miss in 90% of the probes that way
        // (41-96% at 8 wide), against 0.5-4% with the prefetches after.
        for a in also {
            _mm_prefetch::<_MM_HINT_T0>(a.cast());
        }
        took
    }
}

#[cold]
fn calibrate() -> u64 {
    let local = 0u8;
    // SAFETY: `local` is a readable byte.
    let mut hits: Vec<u64> = (0..33)
        .map(|_| unsafe { ticks(std::iter::once(&raw const local), std::iter::empty()) })
        .collect();
    hits.sort_unstable();
    // The TSC's rate, over 200 us (once per process).
    // SAFETY: reading the TSC has no preconditions.
    let (start, t0) = (Instant::now(), unsafe { _rdtsc() });
    while start.elapsed() < Duration::from_micros(200) {
        std::hint::spin_loop();
    }
    // SAFETY: as above.
    let elapsed_ticks = u128::from(unsafe { _rdtsc() }.wrapping_sub(t0));
    let miss = elapsed_ticks * u128::from(MISS_NS) / start.elapsed().as_nanos().max(1);
    let limit = (hits[hits.len() / 2] + u64::try_from(miss).unwrap_or(u64::MAX / 2)).max(1);
    MISS_TICKS.store(limit, Ordering::Relaxed);
    limit
}

/// Whether every line of `lines` answered from a cache. The lines at `also`, which the caller
/// reads first, are prefetched right after them.
///
/// SAFETY: every pointer of `lines` must be readable.
#[inline(always)]
pub(crate) unsafe fn cached(
    lines: impl Iterator<Item = *const u8>,
    also: impl Iterator<Item = *const u8>,
) -> bool {
    let limit = match MISS_TICKS.load(Ordering::Relaxed) {
        0 => calibrate(),
        t => t,
    };
    unsafe { ticks(lines, also) < limit }
}

/// Bytes of the core's L2 cache (CPUID leaf 0x8000_0006, which AMD and Intel both fill, in
/// ECX bits 31-16 as KiB); `usize::MAX` when the CPU does not say, so that no call counts as
/// larger than it.
#[inline(always)]
pub(crate) fn l2_bytes() -> usize {
    static L2: AtomicU64 = AtomicU64::new(0);
    match L2.load(Ordering::Relaxed) {
        0 => {
            // An unsupported leaf reads as zeros or as the highest basic leaf's values, so the
            // highest extended leaf is asked first.
            let kib = if std::arch::x86_64::__cpuid(0x8000_0000).eax >= 0x8000_0006 {
                std::arch::x86_64::__cpuid(0x8000_0006).ecx >> 16
            } else {
                0
            };
            let bytes = if kib == 0 { u64::MAX } else { u64::from(kib) << 10 };
            L2.store(bytes, Ordering::Relaxed);
            usize::try_from(bytes).unwrap_or(usize::MAX)
        }
        b => usize::try_from(b).unwrap_or(usize::MAX),
    }
}

/// Whether the kernels take the backend's second set of figures (see `x86.rs`), measured on
/// AMD's family 0x19: for stripes of more than `XOR_CHUNK` data blocks a software prefetch when
/// they missed the caches (`generic::wide_prefetch`), and for P+Q one number of vectors per
/// step when cached (blocks up to `PQ_TILE`) and another when they missed
/// (`generic::syndrome_by_verdict`, `generic::syndrome_wide`); the latter for P+Q of 4 data
/// blocks that missed too (`generic::syndrome_k`). Yes on that family (Zen 3 and 4; only Zen 4
/// has the GFNI and AVX-512 backends whose figures differ); other CPUs keep the figures
/// measured on them (Zen 5 lost a third of streamed 8 x 1 MiB P+Q to the prefetch, ran 16 x 4
/// KiB P+Q in cache faster with 4 vectors than with 8 and streamed 4 x 4 KiB faster with 8;
/// the Intel Xeon met its streaming goals without).
#[inline(always)]
pub(crate) fn family_19h() -> bool {
    switch(&WIDE, crate::WIDE_TUNING_ENV, || amd_family() == Some(0x19))
}

/// A choice for the whole process: `cell` is 0 until read, then 1 (no) or 2 (yes), from the
/// environment variable `env` (`on`, `off`) or, unset, from `default`.
#[inline(always)]
fn switch(cell: &AtomicU8, env: &str, default: impl FnOnce() -> bool) -> bool {
    match cell.load(Ordering::Relaxed) {
        0 => {
            let yes = match std::env::var(env).as_deref() {
                Err(_) => default(),
                Ok("on") => true,
                Ok("off") => false,
                // As with URAID_PARITY_STORES: never silently measure something else.
                Ok(other) => panic!("{env}={other}: not one of on, off"),
            };
            cell.store(1 + u8::from(yes), Ordering::Relaxed);
            yes
        }
        w => w == 2,
    }
}

/// [`family_19h`]: 0 not read yet, 1 no, 2 yes.
static WIDE: AtomicU8 = AtomicU8::new(0);

/// Overrides [`family_19h`] for the whole process.
pub(crate) fn set_wide_tuning(on: bool) {
    WIDE.store(1 + u8::from(on), Ordering::Relaxed);
}

/// Whether this is AMD's family 0x1a (Zen 5), where P+Q of wide stripes in one pass runs
/// fastest with the fewer vectors a step in cache but the more when the stripe missed the
/// caches (the other way round from family 0x19: see `x86.rs`, `syndrome_many`). On a Zen 5
/// VM (family 26 model 2; the seventh session of 2026-12-06), GFNI's 4 in cache and 8 when
/// missed, against 4 for both: P+Q of 16 x 4 KiB streamed from 23.2-24.2 GB/s (85-87% of the
/// reference, 1.18-1.19x ISA-L) to 26.0-26.9 (96-97%, 1.32-1.33x), in cache 153-160 against
/// 156-162 (three runs of `uraid bench parity --only pq` each, alternated).
///
/// XOR of 4 and 8 sources in L2 and L3 goes source by source there too
/// (`generic::xor_by_source`).
#[inline(always)]
pub(crate) fn zen5() -> bool {
    switch(&ZEN5, crate::ZEN5_TUNING_ENV, || amd_family() == Some(0x1a))
}

/// [`zen5`]: 0 not read yet, 1 no, 2 yes.
static ZEN5: AtomicU8 = AtomicU8::new(0);

/// Overrides [`zen5`] for the whole process.
pub(crate) fn set_zen5_tuning(on: bool) {
    ZEN5.store(1 + u8::from(on), Ordering::Relaxed);
}

/// The CPU family (base plus extended, as AMD numbers them) when the vendor is AMD.
fn amd_family() -> Option<u32> {
    use std::arch::x86_64::__cpuid;
    let vendor = __cpuid(0);
    let name = [vendor.ebx, vendor.edx, vendor.ecx].map(u32::to_le_bytes).concat();
    if name != b"AuthenticAMD" {
        return None;
    }
    let eax = __cpuid(1).eax;
    let base = (eax >> 8) & 0xf;
    Some(if base == 0xf { base + ((eax >> 20) & 0xff) } else { base })
}
