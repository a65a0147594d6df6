//! The kernels, written once over [`Vector`]. Each walks the blocks in groups of `UNROLL`
//! vectors (independent dependency chains keep the SIMD ports busy), then single vectors, and
//! hands the last bytes that fill no vector to the scalar reference. `UNROLL` is per backend
//! (see `x86.rs`).
//!
//! SAFETY (for every function here): the caller guarantees the CPU features of `V`, and that all
//! slices have the length of the first (checked by `Backend`); loads and stores stay inside them.

// Each kernel keeps its per-group body next to the loop that runs it.
#![allow(clippy::items_after_statements)]

use super::vectors::Vector;
use crate::scalar::{self, Delta};
use smallvec::SmallVec;
use std::mem::MaybeUninit;

/// A tile's partial parity between passes over its chunks of sources, when the final outputs
/// get non-temporal stores. Kept in the outputs instead, every line of them would first be
/// read from DRAM (the partial's ordinary store), then evicted by the final non-temporal store:
/// the read for ownership that non-temporal stores exist to avoid, and a slower write. On an
/// Intel Xeon (Sapphire Rapids class) streamed 16 x 64 KiB / 1 MiB went from 0.95x ISA-L (XOR)
/// and 1.02x (P+Q) to 1.07x and 1.23x, alternating binaries in one session.
#[repr(C, align(64))]
struct Tile<const BYTES: usize>([u8; BYTES]);

/// Where a pass of `xor_gen` over a tile reads its partial parity from and writes it to: the
/// output, or with non-temporal stores the scratch tile between the first and the last pass.
fn pass_ptrs(
    nt: bool,
    (first, last): (bool, bool),
    d: *mut u8,
    tile: *mut u8,
) -> (*const u8, *mut u8) {
    if !nt {
        return (d.cast_const(), d);
    }
    (if first { d } else { tile }.cast_const(), if last { d } else { tile })
}

/// A pointer that, offset by an offset in `start..start + BYTES`, lands in `tile` (the kernels
/// index their outputs by the offset into the blocks; `wrapping_add` lands it back in bounds).
fn tile_base<const BYTES: usize>(tile: &mut MaybeUninit<Tile<BYTES>>, start: usize) -> *mut u8 {
    tile.as_mut_ptr().cast::<u8>().wrapping_sub(start)
}

/// How far ahead of the current group each source is prefetched. With many sources the hardware
/// prefetchers lose track of the streams (a 16+2 stripe is 18 of them); a software prefetch
/// per source per group keeps the memory bus busy. Prefetches never fault, so running past the
/// end of a block is harmless (the address is formed with `wrapping_add`).
#[inline(always)]
fn prefetch<const AHEAD: usize>(src: *const u8, off: usize) {
    if AHEAD == 0 {
        return;
    }
    // SAFETY: a prefetch is a hint: it reads no memory architecturally and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(
            src.wrapping_add(off + AHEAD).cast(),
        );
    }
}

/// Calls on blocks of at least this many bytes may write their outputs with non-temporal
/// stores, when the caller's outputs leave the core (`stream`) and their stripe is not in a
/// cache (see `use_nt` and `probe.rs`). An ordinary store of a line not in cache also reads it
/// (a read for ownership: 20% more traffic for a 4-wide XOR); a non-temporal store of a line
/// that is cached evicts it and sends it to DRAM, which halved in-cache rows.
pub(crate) const NT_MIN_BYTES: usize = crate::ORDINARY_STORES_BELOW;

/// A thread probes the cache once per this many bytes of block length, at most every
/// [`MAX_PROBE_EVERY`] calls, and reuses the verdict in between (see [`VERDICT`]): from 256
/// KiB every call probes, a 64 KiB call one in 4, calls up to 16 KiB one in 16. The probe
/// (two fences, two TSC reads and a load from DRAM when streaming) is a fifth of an in-cache
/// 4 x 4 KiB XOR, and probed every call it cost streamed 4 x 64 KiB XOR 8% on the Zen 3 VM
/// (0.93x ISA-L, 1.01x with non-temporal stores forced; likely the fences, which hold the
/// next call's loads behind the last one's stores). A caller that streams its stripes, or
/// keeps them in cache, does so for many calls in a row; a wrong verdict after it switches
/// (or after a call of another block size) costs at most one probe's worth of calls their
/// best kind of store.
const PROBE_BYTES: usize = 256 << 10;
const MAX_PROBE_EVERY: usize = 16;
/// Sources whose last line the probe loads (`missed`).
const PROBED_SOURCES: usize = 8;

/// The bit of [`VERDICT`] set when the last probe missed the caches; the bits below count
/// the calls left before the next probe.
const MISSED: u32 = 1 << 31;

std::thread_local! {
    /// The thread's last probe and the calls left before the next (see [`MISSED`]). Until
    /// the fifth session of 2026-11-29 a probe loaded one line, which had often been
    /// prefetched while the caller streamed, so either of the last two probes' misses chose
    /// non-temporal stores; loading the last line of up to [`PROBED_SOURCES`] sources, one
    /// probe is right (`missed`).
    static VERDICT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Above this many sources, `xor_gen` works in column tiles of [`XOR_TILE`] bytes and takes the
/// sources [`XOR_CHUNK`] at a time per tile, the partial parity staying in L1/L2 between the
/// passes: few enough streams at once for the hardware prefetchers to follow.
pub(crate) const XOR_CHUNK: usize = 8;
pub(crate) const XOR_TILE: usize = 8192;

/// Whether the outputs get non-temporal stores: only when the caller asked (`stream`), the call
/// has blocks of at least [`NT_MIN_BYTES`], every output is vector-aligned (which the
/// instruction needs) and the stripe missed the caches: the thread's last probe did
/// (`missed`; how often a thread probes: [`PROBE_BYTES`]).
/// A source, not an output: after non-temporal stores the outputs are never cached, so probing
/// them would keep choosing non-temporal stores for a stripe that is otherwise in cache.
#[inline(always)]
fn use_nt<V: Vector>(
    stream: bool,
    len: usize,
    outs: &[*mut u8],
    srcs: impl Iterator<Item = *const u8> + Clone,
) -> bool {
    if !(stream
        && len >= NT_MIN_BYTES
        && outs.iter().all(|p| (*p as usize).is_multiple_of(V::BYTES)))
    {
        return false;
    }
    match crate::stores() {
        crate::Stores::Ordinary => false,
        crate::Stores::NonTemporal => true,
        crate::Stores::Probe => VERDICT.with(|v| {
            let state = v.get();
            if state & !MISSED != 0 {
                v.set(state - 1);
                return state & MISSED != 0;
            }
            let miss = missed(srcs, len);
            let every = (PROBE_BYTES / len).clamp(1, MAX_PROBE_EVERY) as u32;
            v.set((every - 1) | if miss { MISSED } else { 0 });
            miss
        }),
    }
}

/// `use_nt` for XOR, which also stores non-temporally, without probing, a call whose sources
/// and output together are larger than L2 (when the caller streams and the store mode is the
/// default, `Stores::Probe`). Such a stripe is at best in L3, where an ordinary store of each
/// output line reads it first and later writes it back through L3, beside the sources' reads;
/// a non-temporal store only writes it, and an XOR writes one line per `n` it reads, so the
/// memory's writes keep up (P+Q writes two: 4 x 1 MiB in L3 fell from 44-46 to 25-29 GB/s with
/// non-temporal stores, so it keeps the probe). On the Zen 3 VM (512 KiB L2), eight runs of
/// `uraid bench parity --only xor` alternated with eight before (the eighth session of
/// 2026-11-29): 8 x 64 KiB in cache from a median 0.91x ISA-L to 0.97x, 8 x 1 MiB from 0.97x
/// to 1.00x. The engine's calls on 4 KiB stripe units never come near L2; the log's, whose
/// outputs are read again at once, ask for ordinary stores.
#[inline(always)]
fn use_nt_xor<V: Vector>(stream: bool, srcs: &[&[u8]], d: *mut u8) -> bool {
    let len = srcs.first().map_or(0, |s| s.len());
    if stream
        && len >= NT_MIN_BYTES
        && (srcs.len() + 1) * len > super::probe::l2_bytes()
        && (d as usize).is_multiple_of(V::BYTES)
        && crate::stores() == crate::Stores::Probe
    {
        return true;
    }
    use_nt::<V>(stream, len, &[d], srcs.iter().map(|s| s.as_ptr()))
}

/// Whether the stripe missed the caches: the last line of each of its first
/// [`PROBED_SOURCES`] sources, loaded at once (every source's first line is prefetched after
/// them). One line was not enough. On the Zen 3 VM, streaming through 512 MiB of stripes, a
/// probe of the first source's first line hit a cache in 19% of 4 x 64 KiB XOR calls, 63% of
/// 4 x 64 KiB P+Q calls and 36% of 4 x 4 KiB P+Q calls (the hardware prefetchers, likely), and
/// those rows ran at 0.76-0.93x ISA-L; a probe of the last source's last line alone hit in 86%
/// of the XOR calls. Loading the last line of every source, at most 0.3% of the probes hit
/// while streaming and at least 97% with the stripe in cache. Last lines rather than first: a
/// caller that just wrote the stripe wrote them last (reasoned, not measured).
#[inline(never)]
#[cold]
fn missed(srcs: impl Iterator<Item = *const u8> + Clone, len: usize) -> bool {
    // SAFETY: every source is a slice of `len >= NT_MIN_BYTES` bytes (checked by `use_nt`),
    // so its last byte is readable.
    let lasts = srcs.clone().take(PROBED_SOURCES).map(|s| unsafe { s.add(len - 1) });
    unsafe { !super::probe::cached(lasts, srcs) }
}

#[inline(always)]
unsafe fn store_out<V: Vector, const N: usize>(v: [V; N], dst: *mut u8, nt: bool) {
    if nt {
        for (k, v) in v.into_iter().enumerate() {
            unsafe { v.store_nt(dst.add(k * V::BYTES)) };
        }
    } else {
        unsafe { store_n(v, dst) }
    }
}

/// After non-temporal stores: orders them before whatever the caller does next (handing the
/// buffer to another thread or to a device).
#[inline(always)]
fn fence(nt: bool) {
    if nt {
        // SAFETY: sfence has no preconditions.
        unsafe { std::arch::x86_64::_mm_sfence() }
    }
}

#[inline(always)]
unsafe fn load_n<V: Vector, const N: usize>(src: *const u8) -> [V; N] {
    let mut v = [unsafe { V::zero() }; N];
    for (k, v) in v.iter_mut().enumerate() {
        *v = unsafe { V::load(src.add(k * V::BYTES)) };
    }
    v
}

#[inline(always)]
unsafe fn store_n<V: Vector, const N: usize>(v: [V; N], dst: *mut u8) {
    for (k, v) in v.into_iter().enumerate() {
        unsafe { v.store(dst.add(k * V::BYTES)) };
    }
}

/// Runs `body` at every offset where a whole group of `n` vectors fits, from `from`; returns where
/// the groups end.
macro_rules! groups {
    ($V:ty, $len:expr, $from:expr, $n:expr, |$off:ident| $body:block) => {{
        let step = $n * <$V>::BYTES;
        let mut $off = $from;
        while $off + step <= $len {
            $body
            $off += step;
        }
        $off
    }};
}

/// Column tiles of `syndrome_wide`, which the AVX-512 backends use for blocks longer than this.
/// On a Zen 5 machine, 16 x 64 KiB in cache went from 1.62x ISA-L to 1.85x and streaming 16 x
/// 64 KiB / 1 MiB from 83-86% of the reference to 87-90%; 8 KiB tiles were 3-6% slower than one
/// pass on streaming 16 x 1 MiB (the prefetchers restart at every tile), and 16 x 4 KiB blocks
/// gained nothing in cache and lost 7% streamed (P and Q written and read back once more), so
/// shorter blocks keep one pass there. AVX2 on Zen 3 differs (`x86.rs`).
pub(crate) const PQ_TILE: usize = 32 << 10;

/// Passes over at most this many sources take `FEW` vectors per source per group in `xor_gen`,
/// wider ones `MANY`: a group should keep about 16 cache lines in flight, whatever the number
/// of sources (on a Zen 5 machine, 4 sources x 4 lines ran 4 x 64 KiB in L2 at 1.0x ISA-L and 8
/// sources x 4 lines at 0.54x, the L1's misses queueing; 8 sources x 2 lines 1.0x).
pub(crate) const XOR_FEW_SOURCES: usize = 4;

/// `xor_gen` of at most [`XOR_FEW_SOURCES`] sources (RAID5 stripes of 4 members, and
/// accumulating calls such as read-modify-write's `P ^= old ^ new`; exactly 4 sources not
/// accumulating go to `xor_k`): one pass, the sum started from the first operand
/// (the output itself when accumulating) rather than from zero, the choice made once per call.
/// On a Zen 5 machine, `xor_gen` of 4 x 4 KiB in L1 called in a tight loop ran 282-293 GB/s
/// through the general loop (tiles, passes, the choice per group) and 302-322 here; 4 x 64 KiB
/// level. (Starting from the first source is no gain for 8 sources: 8 x 64 KiB in L2 fell 15%
/// in the same trial.) The caller checked that there are 1 to [`XOR_FEW_SOURCES`] sources.
#[inline(always)]
pub(crate) unsafe fn xor_few<V: Vector, const N: usize, const PF: usize>(
    dst: &mut [u8],
    srcs: &[&[u8]],
    acc: bool,
    stream: bool,
) {
    #[inline(always)]
    unsafe fn group<V: Vector, const N: usize, const PF: usize>(
        (first, rest): (*const u8, &[&[u8]]),
        d: *mut u8,
        off: usize,
        nt: bool,
    ) {
        unsafe {
            prefetch::<PF>(first, off);
            let mut a: [V; N] = load_n(first.add(off));
            for s in rest {
                prefetch::<PF>(s.as_ptr(), off);
                let x: [V; N] = load_n(s.as_ptr().add(off));
                for k in 0..N {
                    a[k] = a[k].xor(x[k]);
                }
            }
            store_out(a, d.add(off), nt);
        }
    }
    let len = dst.len();
    let d = dst.as_mut_ptr();
    let nt = use_nt_xor::<V>(stream, srcs, d);
    let ops = if acc { (d.cast_const(), srcs) } else { (srcs[0].as_ptr(), &srcs[1..]) };
    let o = groups!(V, len, 0, N, |off| { unsafe { group::<V, N, PF>(ops, d, off, nt) } });
    let off = groups!(V, len, o, 1, |off| { unsafe { group::<V, 1, PF>(ops, d, off, nt) } });
    fence(nt);
    scalar::xor_gen(dst, srcs, acc, off);
}

/// Whether a call over `sources` blocks of `len` bytes whose stripe missed the caches (`nt`)
/// takes the backend's `WIDE_PF` prefetch distance in place of its `PF`: more than
/// [`XOR_CHUNK`] sources (with P and Q, 18 or more streams), blocks longer than the distance
/// (else every prefetch lands past its block), on a CPU where that pays
/// (`probe::family_19h`).
/// On the Zen 4 VM of the session of 2026-12-05 (GFNI, no prefetch of its own), two runs of
/// `uraid bench parity --only stream` with 4 KiB ahead took streamed XOR of 16 x 64 KiB and
/// 16 x 1 MiB from 72-80% of the reference to 91-94%, and P+Q from 78-81% to 84-87%; in cache
/// the same prefetch cost XOR of 16 x 64 KiB 12%, hence only for stripes that missed.
#[inline(always)]
fn wide_prefetch<const PF: usize, const WIDE_PF: usize>(
    nt: bool,
    sources: usize,
    len: usize,
) -> bool {
    WIDE_PF != PF && nt && sources > XOR_CHUNK && len > WIDE_PF && super::probe::family_19h()
}

#[inline(always)]
pub(crate) unsafe fn xor_gen<
    V: Vector,
    const FEW: usize,
    const MANY: usize,
    const PF: usize,
    const WIDE_PF: usize,
>(
    dst: &mut [u8],
    srcs: &[&[u8]],
    acc: bool,
    stream: bool,
) {
    let d = dst.as_mut_ptr();
    let nt = use_nt::<V>(stream, dst.len(), &[d], srcs.iter().map(|s| s.as_ptr()));
    if wide_prefetch::<PF, WIDE_PF>(nt, srcs.len(), dst.len()) {
        unsafe { xor_passes::<V, FEW, MANY, WIDE_PF>(dst, srcs, acc, nt) }
    } else {
        unsafe { xor_passes::<V, FEW, MANY, PF>(dst, srcs, acc, nt) }
    }
}

/// `xor_gen` once its stores are chosen.
#[inline(always)]
unsafe fn xor_passes<V: Vector, const FEW: usize, const MANY: usize, const PF: usize>(
    dst: &mut [u8],
    srcs: &[&[u8]],
    acc: bool,
    nt: bool,
) {
    let len = dst.len();
    let d = dst.as_mut_ptr();
    #[inline(always)]
    unsafe fn group<V: Vector, const N: usize, const PF: usize>(
        (from, d): (*const u8, *mut u8),
        srcs: &[&[u8]],
        acc: bool,
        off: usize,
        nt: bool,
    ) {
        unsafe {
            let mut a: [V; N] = if acc { load_n(from.wrapping_add(off)) } else { [V::zero(); N] };
            for s in srcs {
                prefetch::<PF>(s.as_ptr(), off);
                let x: [V; N] = load_n(s.as_ptr().add(off));
                for k in 0..N {
                    a[k] = a[k].xor(x[k]);
                }
            }
            store_out(a, d.wrapping_add(off), nt);
        }
    }
    // Tiles end on whole groups (XOR_TILE is a multiple of every backend's group), so every
    // pass over a tile but the last covers it exactly; the last leaves the scalar tail.
    let (chunk, tile) = if srcs.len() > XOR_CHUNK {
        (XOR_CHUNK, XOR_TILE)
    } else {
        (srcs.len().max(1), len.max(1))
    };
    let mut scratch = MaybeUninit::<Tile<XOR_TILE>>::uninit();
    let mut start = 0;
    let mut off;
    loop {
        let end = len.min(start + tile);
        let tile_out = tile_base(&mut scratch, start);
        let mut first = true;
        let mut rest = srcs;
        loop {
            let (now, later) = rest.split_at(chunk.min(rest.len()));
            let (a, last) = (acc || !first, later.is_empty());
            let ptrs = pass_ptrs(nt, (first, last), d, tile_out);
            let o = if now.len() <= XOR_FEW_SOURCES {
                groups!(V, end, start, FEW, |off| {
                    unsafe { group::<V, FEW, PF>(ptrs, now, a, off, nt && last) }
                })
            } else {
                groups!(V, end, start, MANY, |off| {
                    unsafe { group::<V, MANY, PF>(ptrs, now, a, off, nt && last) }
                })
            };
            off = groups!(V, end, o, 1, |off| {
                unsafe { group::<V, 1, PF>(ptrs, now, a, off, nt && last) }
            });
            first = false;
            rest = later;
            if rest.is_empty() {
                break;
            }
        }
        if end >= len {
            break;
        }
        start = end;
    }
    fence(nt);
    scalar::xor_gen(dst, srcs, acc, off);
}

#[inline(always)]
pub(crate) unsafe fn syndrome<V: Vector, const UNROLL: usize, const PF: usize>(
    p: Option<&mut [u8]>,
    q: &mut [u8],
    data: &[Option<&[u8]>],
    stream: bool,
) {
    unsafe { syndrome_by_verdict::<V, UNROLL, UNROLL, PF>(p, q, data, stream) }
}

/// `syndrome` with `CACHED` vectors per step for a stripe in the caches and `MISSED` for one
/// that missed them (the verdict that chooses the stores; with the two equal, one loop): on the
/// Zen 4 VM of the session of 2026-12-05 (GFNI), P+Q of 16 x 4 KiB ran in cache at 1.44-1.57x
/// ISA-L with 4 vectors, 1.91-2.03x with 8 and 1.17x with 2, and streamed at 86-88% of the
/// reference with 4, 80-82% with 8 and 97% with 2 (two runs of `uraid bench parity --only pq`
/// each).
#[inline(always)]
pub(crate) unsafe fn syndrome_by_verdict<
    V: Vector,
    const CACHED: usize,
    const MISSED: usize,
    const PF: usize,
>(
    mut p: Option<&mut [u8]>,
    q: &mut [u8],
    data: &[Option<&[u8]>],
    stream: bool,
) {
    let len = q.len();
    // Horner's rule starts at the highest slot that holds data; zero slots above it add nothing.
    let Some(top) = data.iter().rposition(Option::is_some) else {
        q.fill(0);
        if let Some(p) = p {
            p.fill(0);
        }
        return;
    };
    let (outs, nt) = pq_outputs::<V>(&mut p, q, data, stream);
    let off = if MISSED != CACHED && nt {
        unsafe { syndrome_whole::<V, MISSED, PF>(outs, data, top, len, nt) }
    } else {
        unsafe { syndrome_whole::<V, CACHED, PF>(outs, data, top, len, nt) }
    };
    fence(nt);
    scalar::syndrome(p, q, data, off);
}

/// The outputs of a one-pass P+Q (P may be absent) and whether they get non-temporal stores.
#[inline(always)]
fn pq_outputs<V: Vector>(
    p: &mut Option<&mut [u8]>,
    q: &mut [u8],
    data: &[Option<&[u8]>],
    stream: bool,
) -> ((Option<*mut u8>, *mut u8), bool) {
    let pp = p.as_deref_mut().map(<[u8]>::as_mut_ptr);
    let qp = q.as_mut_ptr();
    let srcs = data.iter().flatten().map(|d| d.as_ptr());
    ((pp, qp), use_nt::<V>(stream, q.len(), &[qp, pp.unwrap_or(qp)], srcs))
}

/// P+Q in one pass over the whole blocks, up to the scalar tail (`data[top]` holds data);
/// returns where the whole vectors end.
#[inline(always)]
unsafe fn syndrome_whole<V: Vector, const UNROLL: usize, const PF: usize>(
    (pp, qp): (Option<*mut u8>, *mut u8),
    data: &[Option<&[u8]>],
    top: usize,
    len: usize,
    nt: bool,
) -> usize {
    let from = (pp.unwrap_or(qp).cast_const(), qp.cast_const());
    unsafe { syndrome_pass::<V, UNROLL, PF, false>(from, (pp, qp), data, top, 0, len, nt) }
}

/// Whether `syndrome_wide` is the better way for this call: P wanted (it carries P and Q
/// between chunks of slots in the outputs), more than [`XOR_CHUNK`] slots, blocks of at least
/// `WIDE_FROM` bytes (the backend's choice, see `x86.rs`). The backends call it from a
/// function of its own, so that the one-pass kernel's code stays as it was (inlined into one
/// function with the tiled one, it lost 5% at 4 x 4 KiB in cache).
#[inline(always)]
pub(crate) fn syndrome_is_wide<const WIDE_FROM: usize>(
    p: bool,
    len: usize,
    data: &[Option<&[u8]>],
) -> bool {
    p && data.len() > XOR_CHUNK && len >= WIDE_FROM
}

/// `syndrome` for wide stripes of long blocks, as XOR does them: column tiles of [`PQ_TILE`],
/// the slots [`XOR_CHUNK`] at a time from the top, P and Q carried between chunks in the tile's
/// outputs. A stripe that takes the wide prefetch (it missed the caches, see `wide_prefetch`)
/// takes `WIDE_MISSED` vectors a step too: on the Zen 4 VM of the session of 2026-12-05, 2 in
/// place of 8 took streamed P+Q of 16 x 1 MiB from 84-86% of the reference to 89-94% and 16 x
/// 64 KiB from 85-88% to 88-93% (eight runs of `uraid bench parity --only stream` or `--only
/// pq` each, alternated, on the idle machine).
#[inline(always)]
pub(crate) unsafe fn syndrome_wide<
    V: Vector,
    const UNROLL: usize,
    const PF: usize,
    const WIDE_PF: usize,
    const WIDE_MISSED: usize,
>(
    mut p: Option<&mut [u8]>,
    q: &mut [u8],
    data: &[Option<&[u8]>],
    stream: bool,
) {
    let len = q.len();
    let top = data.iter().rposition(Option::is_some);
    let (Some(top), Some(pp)) = (top, p.as_deref_mut().map(<[u8]>::as_mut_ptr)) else {
        return unsafe { syndrome::<V, UNROLL, PF>(p, q, data, stream) };
    };
    if top < XOR_CHUNK {
        return unsafe { syndrome::<V, UNROLL, PF>(p, q, data, stream) };
    }
    let qp = q.as_mut_ptr();
    let srcs = data.iter().flatten().map(|d| d.as_ptr());
    let nt = use_nt::<V>(stream, len, &[qp, pp], srcs);
    let off = if wide_prefetch::<PF, WIDE_PF>(nt, top + 1, len) {
        unsafe { syndrome_tiles::<V, WIDE_MISSED, WIDE_PF>((pp, qp), data, top, len, nt) }
    } else {
        unsafe { syndrome_tiles::<V, UNROLL, PF>((pp, qp), data, top, len, nt) }
    };
    fence(nt);
    scalar::syndrome(p, q, data, off);
}

/// `syndrome_wide` once its stores are chosen (`data[top]` holds data and `top` is at least
/// [`XOR_CHUNK`]); returns where the whole vectors end.
#[inline(always)]
unsafe fn syndrome_tiles<V: Vector, const UNROLL: usize, const PF: usize>(
    (pp, qp): (*mut u8, *mut u8),
    data: &[Option<&[u8]>],
    top: usize,
    len: usize,
    nt: bool,
) -> usize {
    let mut scratch =
        (MaybeUninit::<Tile<PQ_TILE>>::uninit(), MaybeUninit::<Tile<PQ_TILE>>::uninit());
    let mut start = 0;
    let mut off;
    loop {
        let end = len.min(start + PQ_TILE);
        // P and Q between chunks: in the outputs, or, when these get non-temporal stores, in
        // the scratch tiles (see `Tile`).
        let between = if nt {
            (tile_base(&mut scratch.0, start), tile_base(&mut scratch.1, start))
        } else {
            (pp, qp)
        };
        let from = (between.0.cast_const(), between.1.cast_const());
        // The first chunk starts Horner's rule at the top slot; the others resume from the
        // partial P and Q; the last (slot 0 included) stores for good.
        let lo = (top + 1).saturating_sub(XOR_CHUNK);
        let (slots, ctop) = (&data[lo..=top], top - lo);
        let to = (Some(between.0), between.1);
        off = unsafe {
            syndrome_pass::<V, UNROLL, PF, false>(from, to, slots, ctop, start, end, false)
        };
        let mut hi = lo;
        while hi > 0 {
            let lo = hi.saturating_sub(XOR_CHUNK);
            let (slots, last) = (&data[lo..hi], lo == 0);
            let (to, nt) = if last { ((Some(pp), qp), nt) } else { (to, false) };
            off =
                unsafe { syndrome_pass::<V, UNROLL, PF, true>(from, to, slots, 0, start, end, nt) };
            hi = lo;
        }
        if end >= len {
            break;
        }
        start = end;
    }
    off
}

/// P+Q of the slots `data` over `start..end`, in groups of `UNROLL` vectors, then single ones
/// (as `syndrome_group`); returns where the whole vectors end.
#[inline(always)]
unsafe fn syndrome_pass<V: Vector, const UNROLL: usize, const PF: usize, const RESUME: bool>(
    from: (*const u8, *const u8),
    ptrs: (Option<*mut u8>, *mut u8),
    data: &[Option<&[u8]>],
    top: usize,
    start: usize,
    end: usize,
    nt: bool,
) -> usize {
    let o = groups!(V, end, start, UNROLL, |off| {
        unsafe { syndrome_group::<V, UNROLL, PF, RESUME>(from, ptrs, data, top, off, nt) }
    });
    groups!(V, end, o, 1, |off| {
        unsafe { syndrome_group::<V, 1, PF, RESUME>(from, ptrs, data, top, off, nt) }
    })
}

/// One group of `N` vectors of P+Q at `off` over the slots `data`, stored at `pp`/`qp`: from
/// the start (Horner's rule starts at `data[top]`, which holds data) or, with `RESUME`, from the
/// partial P and Q at `from` (a higher chunk of slots wrote them; P is then wanted).
#[inline(always)]
unsafe fn syndrome_group<V: Vector, const N: usize, const PF: usize, const RESUME: bool>(
    from: (*const u8, *const u8),
    (pp, qp): (Option<*mut u8>, *mut u8),
    data: &[Option<&[u8]>],
    top: usize,
    off: usize,
    nt: bool,
) {
    unsafe {
        let (mut p, mut q, below): ([V; N], [V; N], _) = if RESUME {
            (load_n(from.0.wrapping_add(off)), load_n(from.1.wrapping_add(off)), data)
        } else {
            let first = data[top].expect("top slot holds data");
            prefetch::<PF>(first.as_ptr(), off);
            let v = load_n(first.as_ptr().add(off));
            (v, v, &data[..top])
        };
        horner_below::<V, N, PF>(&mut p, &mut q, below, off);
        if let Some(pp) = pp {
            store_out(p, pp.wrapping_add(off), nt);
        }
        store_out(q, qp.wrapping_add(off), nt);
    }
}

/// Horner's rule over the slots `below` (highest first) into `p` and `q`, two at a time where
/// both hold data.
#[inline(always)]
unsafe fn horner_below<V: Vector, const N: usize, const PF: usize>(
    p: &mut [V; N],
    q: &mut [V; N],
    below: &[Option<&[u8]>],
    off: usize,
) {
    unsafe {
        let mut pairs = below.rchunks_exact(2);
        for pair in &mut pairs {
            if let [Some(lo), Some(hi)] = pair {
                prefetch::<PF>(hi.as_ptr(), off);
                prefetch::<PF>(lo.as_ptr(), off);
                let (hi, lo): ([V; N], [V; N]) =
                    (load_n(hi.as_ptr().add(off)), load_n(lo.as_ptr().add(off)));
                for k in 0..N {
                    p[k] = V::xor3(p[k], hi[k], lo[k]);
                    q[k] = V::horner2(q[k], hi[k], lo[k]);
                }
            } else {
                horner_step::<V, N, PF>(p, q, pair[1], off);
                horner_step::<V, N, PF>(p, q, pair[0], off);
            }
        }
        if let [d] = pairs.remainder() {
            horner_step::<V, N, PF>(p, q, *d, off);
        }
    }
}

/// One Horner step: `p ^= d`, `q = q*2 ^ d` (`None`: a zero block, `q = q*2`).
#[inline(always)]
unsafe fn horner_step<V: Vector, const N: usize, const PF: usize>(
    p: &mut [V; N],
    q: &mut [V; N],
    d: Option<&[u8]>,
    off: usize,
) {
    unsafe {
        if let Some(d) = d {
            prefetch::<PF>(d.as_ptr(), off);
            let x: [V; N] = load_n(d.as_ptr().add(off));
            for k in 0..N {
                p[k] = p[k].xor(x[k]);
                q[k] = q[k].mul2().xor(x[k]);
            }
        } else {
            for v in q.iter_mut() {
                *v = v.mul2();
            }
        }
    }
}

#[inline(always)]
pub(crate) unsafe fn pq_update<V: Vector, const UNROLL: usize>(
    p: &mut [u8],
    q: &mut [u8],
    deltas: &[Delta<'_>],
) {
    let len = p.len();
    let (pp, qp) = (p.as_mut_ptr(), q.as_mut_ptr());
    let tables: SmallVec<[V::Table; 8]> =
        deltas.iter().map(|d| unsafe { V::table(d.coef) }).collect();
    #[inline(always)]
    unsafe fn group<V: Vector, const N: usize>(
        pp: *mut u8,
        qp: *mut u8,
        deltas: &[Delta<'_>],
        tables: &[V::Table],
        off: usize,
    ) {
        unsafe {
            let mut p: [V; N] = load_n(pp.add(off));
            let mut q: [V; N] = load_n(qp.add(off));
            for (d, t) in deltas.iter().zip(tables) {
                let old: [V; N] = load_n(d.old.as_ptr().add(off));
                let new: [V; N] = load_n(d.new.as_ptr().add(off));
                for k in 0..N {
                    let x = old[k].xor(new[k]);
                    p[k] = p[k].xor(x);
                    q[k] = q[k].xor(x.mul(*t));
                }
            }
            store_n(p, pp.add(off));
            store_n(q, qp.add(off));
        }
    }
    let off = groups!(V, len, 0, UNROLL, |off| {
        unsafe { group::<V, UNROLL>(pp, qp, deltas, &tables, off) }
    });
    let off =
        groups!(V, len, off, 1, |off| { unsafe { group::<V, 1>(pp, qp, deltas, &tables, off) } });
    scalar::pq_update(p, q, deltas, off);
}

#[inline(always)]
pub(crate) unsafe fn mul_const<V: Vector, const UNROLL: usize>(
    dst: &mut [u8],
    src: &[u8],
    c: u8,
    acc: bool,
) {
    let len = dst.len();
    let (d, s) = (dst.as_mut_ptr(), src.as_ptr());
    let t = unsafe { V::table(c) };
    #[inline(always)]
    unsafe fn group<V: Vector, const N: usize>(
        d: *mut u8,
        s: *const u8,
        t: V::Table,
        acc: bool,
        off: usize,
    ) {
        unsafe {
            let x: [V; N] = load_n(s.add(off));
            let mut r = [V::zero(); N];
            for k in 0..N {
                r[k] = x[k].mul(t);
            }
            if acc {
                let a: [V; N] = load_n(d.add(off));
                for k in 0..N {
                    r[k] = r[k].xor(a[k]);
                }
            }
            store_n(r, d.add(off));
        }
    }
    let off =
        groups!(V, len, 0, UNROLL, |off| { unsafe { group::<V, UNROLL>(d, s, t, acc, off) } });
    let off = groups!(V, len, off, 1, |off| { unsafe { group::<V, 1>(d, s, t, acc, off) } });
    scalar::mul_const(dst, src, c, acc, off);
}

/// The lost blocks from the survivors' sums `(x, y)` (P and Q with the lost slots zero) and
/// P and Q at `off`: `x = a (P ^ x) ^ b (Q ^ y)`, `y = (P ^ x_in) ^ x`.
#[inline(always)]
unsafe fn combine_2data<V: Vector, const N: usize>(
    (x, y): (&mut [V; N], &mut [V; N]),
    (pp, qp): (*const u8, *const u8),
    (ta, tb): (V::Table, V::Table),
    off: usize,
) {
    unsafe {
        let (p, q): ([V; N], [V; N]) = (load_n(pp.add(off)), load_n(qp.add(off)));
        for k in 0..N {
            let pxy = p[k].xor(x[k]);
            let qxy = q[k].xor(y[k]);
            x[k] = pxy.mul(ta).xor(qxy.mul(tb));
            y[k] = pxy.xor(x[k]);
        }
    }
}

/// Two lost data blocks in one pass: the surviving data's P and Q (Horner's rule, the lost
/// slots `None`) go straight into the combination of `recov_2data`, so the sums are never
/// stored and read back. The two-pass way moves 10 blocks for a 4-wide stripe (the sums
/// written, then they, P and Q read, the results written) where this moves 6.
/// `top`: the highest slot that holds data (None: no data survives, the sums are zero).
/// A stripe that missed the caches, when the caller streams (`stream`), gets non-temporal
/// stores and `MISSED` vectors a step, as P+Q does (`syndrome_by_verdict`; see
/// [`RECOV_MISSED`]).
#[inline(always)]
pub(crate) unsafe fn recov_2data_fused<
    V: Vector,
    const UNROLL: usize,
    const MISSED: usize,
    const PF: usize,
>(
    (dx, dy): (&mut [u8], &mut [u8]),
    data: &[Option<&[u8]>],
    top: Option<usize>,
    (p, q): (&[u8], &[u8]),
    (a, b): (u8, u8),
    stream: bool,
) {
    let len = dx.len();
    let ptrs = (dx.as_mut_ptr(), dy.as_mut_ptr(), p.as_ptr(), q.as_ptr());
    let tables = unsafe { (V::table(a), V::table(b)) };
    let srcs = data.iter().flatten().map(|d| d.as_ptr()).chain([ptrs.2, ptrs.3]);
    let nt = use_nt::<V>(stream, len, &[ptrs.0, ptrs.1], srcs);
    let o = if MISSED != UNROLL && nt {
        unsafe { recov_2data_whole::<V, MISSED, PF>(ptrs, tables, data, top, len, nt) }
    } else {
        unsafe { recov_2data_whole::<V, UNROLL, PF>(ptrs, tables, data, top, len, nt) }
    };
    fence(nt);
    if o == len {
        // No tail: and no slot list to build for it (wide stripes would allocate one).
        return;
    }
    // The tail: the sums by the reference, then the combination.
    scalar::syndrome(Some(&mut dx[o..]), &mut dy[o..], &tail(data, o), 0);
    scalar::recov_2data(&mut dx[o..], &mut dy[o..], &p[o..], &q[o..], a, b, 0);
}

/// `recov_2data_fused` once its stores are chosen; returns where the whole vectors end.
#[inline(always)]
unsafe fn recov_2data_whole<V: Vector, const UNROLL: usize, const PF: usize>(
    ptrs: (*mut u8, *mut u8, *const u8, *const u8),
    tables: (V::Table, V::Table),
    data: &[Option<&[u8]>],
    top: Option<usize>,
    len: usize,
    nt: bool,
) -> usize {
    #[inline(always)]
    unsafe fn group<V: Vector, const N: usize, const PF: usize>(
        (xp, yp, pp, qp): (*mut u8, *mut u8, *const u8, *const u8),
        (ta, tb): (V::Table, V::Table),
        data: &[Option<&[u8]>],
        top: Option<usize>,
        off: usize,
        nt: bool,
    ) {
        unsafe {
            let (mut ps, mut qs) = ([V::zero(); N], [V::zero(); N]);
            if let Some(top) = top {
                let first = data[top].expect("top slot holds data");
                prefetch::<PF>(first.as_ptr(), off);
                ps = load_n(first.as_ptr().add(off));
                qs = ps;
                horner_below::<V, N, PF>(&mut ps, &mut qs, &data[..top], off);
            }
            combine_2data((&mut ps, &mut qs), (pp, qp), (ta, tb), off);
            store_out(ps, xp.add(off), nt);
            store_out(qs, yp.add(off), nt);
        }
    }
    let o = groups!(V, len, 0, UNROLL, |off| {
        unsafe { group::<V, UNROLL, PF>(ptrs, tables, data, top, off, nt) }
    });
    groups!(V, len, o, 1, |off| { unsafe { group::<V, 1, PF>(ptrs, tables, data, top, off, nt) } })
}

/// `recov_2data_fused` for wide stripes of long blocks, in column tiles as `syndrome_wide`
/// does P+Q: the surviving data's sums go through each tile in chunks of [`XOR_CHUNK`] slots
/// (the sums between chunks in the outputs, or in scratch tiles when these get non-temporal
/// stores), and the pass over the lowest chunk combines them with P and Q and stores the lost
/// blocks. One pass over 16 data blocks keeps 18 streams in flight, more than the L1's misses
/// queue (see [`XOR_FEW_SOURCES`]). On a Zen 5 machine (the seventh session of 2026-12-06,
/// `uraid bench parity --only recov_2data`, builds alternated), 16 x 64 KiB in cache went from
/// 86-88 GB/s to 109-115 (GFNI), 69 to 75-76 (AVX-512 forced) and 56-57 to 68-70 (AVX2
/// forced, which takes this from 4 KiB blocks, as its P+Q: 16 x 4 KiB 57-58 -> 63); GFNI's
/// 16 x 4 KiB fell from 122-130 to 115 in tiles, so the AVX-512 backends keep one pass there.
/// Its frame (pointers, tables, stores, tail) repeats `recov_2data_fused`'s on purpose: shared
/// through a closure, the vector code in the closure lost the caller's target features (a
/// closure does not inherit them) and recovery ran at 3 GB/s in place of 100-190.
#[inline(always)]
pub(crate) unsafe fn recov_2data_wide<
    V: Vector,
    const UNROLL: usize,
    const MISSED: usize,
    const PF: usize,
>(
    (dx, dy): (&mut [u8], &mut [u8]),
    data: &[Option<&[u8]>],
    top: Option<usize>,
    (p, q): (&[u8], &[u8]),
    (a, b): (u8, u8),
    stream: bool,
) {
    let Some(top) = top.filter(|&top| top >= XOR_CHUNK) else {
        return unsafe {
            recov_2data_fused::<V, UNROLL, MISSED, PF>((dx, dy), data, top, (p, q), (a, b), stream);
        };
    };
    let len = dx.len();
    let ptrs = (dx.as_mut_ptr(), dy.as_mut_ptr(), p.as_ptr(), q.as_ptr());
    let tables = unsafe { (V::table(a), V::table(b)) };
    let srcs = data.iter().flatten().map(|d| d.as_ptr()).chain([ptrs.2, ptrs.3]);
    let nt = use_nt::<V>(stream, len, &[ptrs.0, ptrs.1], srcs);
    let o = if MISSED != UNROLL && nt {
        unsafe { recov_2data_tiles::<V, MISSED, PF>(ptrs, tables, data, top, len, nt) }
    } else {
        unsafe { recov_2data_tiles::<V, UNROLL, PF>(ptrs, tables, data, top, len, nt) }
    };
    fence(nt);
    if o < len {
        scalar::syndrome(Some(&mut dx[o..]), &mut dy[o..], &tail(data, o), 0);
        scalar::recov_2data(&mut dx[o..], &mut dy[o..], &p[o..], &q[o..], a, b, 0);
    }
}

/// `recov_2data_wide` once its stores are chosen (`data[top]` holds data and `top` is at
/// least [`XOR_CHUNK`]); returns where the whole vectors end.
#[inline(always)]
unsafe fn recov_2data_tiles<V: Vector, const UNROLL: usize, const PF: usize>(
    ptrs: (*mut u8, *mut u8, *const u8, *const u8),
    tables: (V::Table, V::Table),
    data: &[Option<&[u8]>],
    top: usize,
    len: usize,
    nt: bool,
) -> usize {
    #[inline(always)]
    unsafe fn last_group<V: Vector, const N: usize, const PF: usize>(
        from: (*const u8, *const u8),
        (xp, yp, pp, qp): (*mut u8, *mut u8, *const u8, *const u8),
        tables: (V::Table, V::Table),
        data: &[Option<&[u8]>],
        off: usize,
        nt: bool,
    ) {
        unsafe {
            let (mut ps, mut qs): ([V; N], [V; N]) =
                (load_n(from.0.wrapping_add(off)), load_n(from.1.wrapping_add(off)));
            horner_below::<V, N, PF>(&mut ps, &mut qs, data, off);
            combine_2data((&mut ps, &mut qs), (pp, qp), tables, off);
            store_out(ps, xp.add(off), nt);
            store_out(qs, yp.add(off), nt);
        }
    }
    let mut scratch =
        (MaybeUninit::<Tile<PQ_TILE>>::uninit(), MaybeUninit::<Tile<PQ_TILE>>::uninit());
    let mut start = 0;
    loop {
        let end = len.min(start + PQ_TILE);
        let between = if nt {
            (tile_base(&mut scratch.0, start), tile_base(&mut scratch.1, start))
        } else {
            (ptrs.0, ptrs.1)
        };
        let (from, to) =
            ((between.0.cast_const(), between.1.cast_const()), (Some(between.0), between.1));
        let lo = top + 1 - XOR_CHUNK;
        unsafe {
            syndrome_pass::<V, UNROLL, PF, false>(
                from,
                to,
                &data[lo..=top],
                top - lo,
                start,
                end,
                false,
            )
        };
        let mut hi = lo;
        while hi > XOR_CHUNK {
            let lo = hi - XOR_CHUNK;
            unsafe {
                syndrome_pass::<V, UNROLL, PF, true>(from, to, &data[lo..hi], 0, start, end, false)
            };
            hi = lo;
        }
        let below = &data[..hi];
        let o = groups!(V, end, start, UNROLL, |off| {
            unsafe { last_group::<V, UNROLL, PF>(from, ptrs, tables, below, off, nt) }
        });
        let o = groups!(V, end, o, 1, |off| {
            unsafe { last_group::<V, 1, PF>(from, ptrs, tables, below, off, nt) }
        });
        if end >= len {
            return o;
        }
        start = end;
    }
}

/// Vectors a step of two-block recovery when its stripe missed the caches (the backends with
/// fewer in their `UNROLL` keep theirs). On the Zen 4 VM of the second session of 2026-12-05,
/// streamed recovery of 8 x 64 KiB ran at 83-87% of the reference with ordinary stores and 8
/// vectors a step (GFNI), 97-99% with non-temporal stores and 8, 98-102% with 2 and 103-104%
/// with 4 (two runs of `uraid bench parity --only recov_2data` each, alternated); the AVX-512
/// and AVX2 backends (4 a step) went from 87-95% to 103-105% with the stores alone.
pub(crate) const RECOV_MISSED: usize = 4;

/// The slots from byte `from` on.
fn tail<'a>(data: &[Option<&'a [u8]>], from: usize) -> SmallVec<[Option<&'a [u8]>; 32]> {
    data.iter().map(|d| d.map(|d| &d[from..])).collect()
}

#[inline(always)]
pub(crate) unsafe fn recov_data_q<V: Vector, const UNROLL: usize>(
    dx: &mut [u8],
    p: &mut [u8],
    q: &[u8],
    c: u8,
) {
    let len = dx.len();
    let ptrs = (dx.as_mut_ptr(), p.as_mut_ptr(), q.as_ptr());
    let t = unsafe { V::table(c) };
    #[inline(always)]
    unsafe fn group<V: Vector, const N: usize>(
        (xp, pp, qp): (*mut u8, *mut u8, *const u8),
        t: V::Table,
        off: usize,
    ) {
        unsafe {
            let (dx, p, q): ([V; N], [V; N], [V; N]) =
                (load_n(xp.add(off)), load_n(pp.add(off)), load_n(qp.add(off)));
            let (mut x, mut np) = ([V::zero(); N], [V::zero(); N]);
            for k in 0..N {
                x[k] = q[k].xor(dx[k]).mul(t);
                np[k] = p[k].xor(x[k]);
            }
            store_n(x, xp.add(off));
            store_n(np, pp.add(off));
        }
    }
    let off = groups!(V, len, 0, UNROLL, |off| { unsafe { group::<V, UNROLL>(ptrs, t, off) } });
    let off = groups!(V, len, off, 1, |off| { unsafe { group::<V, 1>(ptrs, t, off) } });
    scalar::recov_data_q(dx, p, q, c, off);
}

/// `syndrome` of exactly `K` data blocks, none of them zero, with P (see the backends'
/// `syndrome_4` for why and when): `N` vectors a step, or `MISSED` when `by_verdict` and the
/// stripe missed the caches (on AMD's family 0x19, `probe::family_19h`: on the Zen 4 VM of the
/// sixth session of 2026-12-07, GFNI's 8 ran P+Q of 4 x 4 KiB streamed at 0.77-0.91x ISA-L and
/// 2 at 1.17-1.19x, in cache both 2.1-2.2x; `uraid bench parity --only pq`, builds alternated).
#[inline(always)]
pub(crate) unsafe fn syndrome_k<V: Vector, const K: usize, const N: usize, const MISSED: usize>(
    p: &mut [u8],
    q: &mut [u8],
    data: [&[u8]; K],
    stream: bool,
    by_verdict: bool,
) {
    #[inline(always)]
    unsafe fn group<V: Vector, const K: usize, const N: usize>(
        d: &[*const u8; K],
        (pp, qp): (*mut u8, *mut u8),
        off: usize,
        nt: bool,
    ) {
        unsafe {
            let top: [V; N] = load_n(d[K - 1].add(off));
            let (mut p, mut q) = (top, top);
            let mut i = K - 1;
            while i >= 2 {
                let (hi, lo): ([V; N], [V; N]) =
                    (load_n(d[i - 1].add(off)), load_n(d[i - 2].add(off)));
                for k in 0..N {
                    p[k] = V::xor3(p[k], hi[k], lo[k]);
                    q[k] = V::horner2(q[k], hi[k], lo[k]);
                }
                i -= 2;
            }
            if i == 1 {
                let x: [V; N] = load_n(d[0].add(off));
                for k in 0..N {
                    p[k] = p[k].xor(x[k]);
                    q[k] = q[k].mul2().xor(x[k]);
                }
            }
            store_out(p, pp.add(off), nt);
            store_out(q, qp.add(off), nt);
        }
    }
    let len = q.len();
    let outs = (p.as_mut_ptr(), q.as_mut_ptr());
    let d: [*const u8; K] = data.map(<[u8]>::as_ptr);
    let nt = use_nt::<V>(stream, len, &[outs.1, outs.0], data.iter().map(|x| x.as_ptr()));
    let o = if nt && by_verdict {
        groups!(V, len, 0, MISSED, |off| { unsafe { group::<V, K, MISSED>(&d, outs, off, nt) } })
    } else {
        groups!(V, len, 0, N, |off| { unsafe { group::<V, K, N>(&d, outs, off, nt) } })
    };
    let off = groups!(V, len, o, 1, |off| { unsafe { group::<V, K, 1>(&d, outs, off, nt) } });
    fence(nt);
    scalar::syndrome(Some(p), q, &data.map(Some), off);
}

/// `xor_k` takes blocks at least this long source by source (`xor_by_source`) when they are
/// in cache, on Zen 5 (`probe::zen5`): past L1, where the call runs at the speed of L2 or L3.
pub(crate) const XOR_BY_SOURCE_FROM: usize = 32 << 10;

/// `xor_gen` of exactly `K` sources, not accumulating (see the backends' `xor_4` for why and
/// when). `N` vectors per group (a cache line), `BY_SOURCE` per source per step of
/// `xor_by_source` (two lines).
#[inline(always)]
pub(crate) unsafe fn xor_k<V: Vector, const K: usize, const N: usize, const BY_SOURCE: usize>(
    dst: &mut [u8],
    srcs: [&[u8]; K],
    stream: bool,
) {
    #[inline(always)]
    unsafe fn group<V: Vector, const K: usize, const N: usize>(
        s: &[*const u8; K],
        d: *mut u8,
        off: usize,
        nt: bool,
    ) {
        unsafe {
            let mut a: [V; N] = load_n(s[0].add(off));
            let mut i = 1;
            while i + 1 < K {
                let (x, y): ([V; N], [V; N]) = (load_n(s[i].add(off)), load_n(s[i + 1].add(off)));
                for k in 0..N {
                    a[k] = V::xor3(a[k], x[k], y[k]);
                }
                i += 2;
            }
            if i < K {
                let x: [V; N] = load_n(s[i].add(off));
                for k in 0..N {
                    a[k] = a[k].xor(x[k]);
                }
            }
            store_out(a, d.add(off), nt);
        }
    }
    let len = dst.len();
    let d = dst.as_mut_ptr();
    let s: [*const u8; K] = srcs.map(<[u8]>::as_ptr);
    // From the slices, not `s`: a probe that walks `s` keeps it on the stack, and the loop
    // then reloads the pointers (8 x 4 KiB in cache lost 17% that way).
    let nt = use_nt_xor::<V>(stream, &srcs, d);
    let o = if !nt && len >= XOR_BY_SOURCE_FROM && super::probe::zen5() {
        unsafe { xor_by_source::<V, K, BY_SOURCE>(&s, d, len) }
    } else {
        groups!(V, len, 0, N, |off| { unsafe { group::<V, K, N>(&s, d, off, nt) } })
    };
    let off = groups!(V, len, o, 1, |off| { unsafe { group::<V, K, 1>(&s, d, off, nt) } });
    fence(nt);
    scalar::xor_gen(dst, &srcs, false, off);
}

/// `xor_k`'s groups for a stripe in L2 or L3, with ordinary stores: `N` vectors of each source
/// in turn, from the last source to the first, each source's pointer read again from memory
/// (volatile, so that LLVM keeps the reads). Returns where the groups stopped.
///
/// Why: on a Zen 5 machine (family 26 model 2) `xor_k`'s groups, one line of every source at a
/// time with the pointers in registers, ran 4 x 64 KiB in L2 at 0.94-0.97x ISA-L and 8 x 64 KiB
/// at 0.92-0.97x, whatever the order of the sources or the lines a step. ISA-L's loop is the
/// same arithmetic with an inner loop over its array of pointers, and a scratch benchmark
/// found that reading each pointer from memory is what makes the difference (the same loop
/// with the pointers in registers ran as fast as ours; an unrolled one that reads them, as
/// fast as ISA-L): 4 x 64 KiB 172-173 -> 178-181 GB/s (ISA-L 179-181), 8 x 64 KiB 206 ->
/// 223-231 (224-227), 8 x 32 KiB 170 -> 184 (171-172), 4 and 8 x 1 MiB level or 1-3% up; in
/// L1 (4 x 4 KiB) it is 40% slower, hence only past [`XOR_BY_SOURCE_FROM`]. Our reading: the
/// pointer's load delays each source's loads by an L1 hit, which spaces the requests to L2
/// that every source's stream makes at once; either way, both loops then move about 4.4
/// billion cache lines a second between L2 and L1 (each output line costs its sources, its
/// own read for ownership and its write-back), the most this L2 gives one core.
#[inline(always)]
unsafe fn xor_by_source<V: Vector, const K: usize, const N: usize>(
    s: &[*const u8; K],
    d: *mut u8,
    len: usize,
) -> usize {
    let step = N * V::BYTES;
    let mut off = 0;
    while off + step <= len {
        unsafe {
            let mut a: [V; N] = load_n(std::ptr::read_volatile(&raw const s[K - 1]).add(off));
            for i in (0..K - 1).rev() {
                let x: [V; N] = load_n(std::ptr::read_volatile(&raw const s[i]).add(off));
                for k in 0..N {
                    a[k] = a[k].xor(x[k]);
                }
            }
            store_n(a, d.add(off));
        }
        off += step;
    }
    off
}
