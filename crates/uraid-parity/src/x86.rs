//! x86-64 SIMD kernels. One generic implementation of each kernel over a [`Vector`] trait, and
//! one module per backend that instantiates them inside `#[target_feature]` functions: the trait
//! methods are `#[inline(always)]`, so the intrinsics land in code compiled for those features
//! (the pattern the `memchr` crate uses).
//!
//! GF(2^8) multiplication by a constant `c` uses either two 16-entry nibble tables and `vpshufb`
//! (`c*x = c*lo(x) ^ c*hi(x)`) or, with GFNI, one `vgf2p8affineqb` with the 8x8 bit matrix of
//! "multiply by c" modulo 0x11d. (`vgf2p8mulb` is no use: its polynomial is AES's 0x11b.)

mod generic;
mod probe;
mod vectors;

pub(crate) use probe::{set_wide_tuning, set_zen5_tuning};

use crate::scalar::Delta;
use vectors::{Avx2, Avx512, Gfni, Vector};

/// A cache line's bytes.
const LINE: usize = 64;

macro_rules! backend_module {
    ($name:ident, $vector:ty, ($xor_few:literal, $xor_many:literal), ($unroll:literal, $pq_many:literal), $pq_wide_from:expr, $syndrome_4_below:expr, $prefetch:literal, ($wide_prefetch:literal, $pq_many_cached:literal, $pq_many_missed:literal), $features:literal) => {
        pub(crate) mod $name {
            use super::*;

            #[target_feature(enable = $features)]
            pub(crate) unsafe fn xor_gen(dst: &mut [u8], srcs: &[&[u8]], acc: bool, stream: bool) {
                if !acc && let [a, b, c, d] = srcs {
                    // SAFETY: the caller checked the CPU features this module is compiled for.
                    return unsafe { xor_4(dst, [a, b, c, d], stream) };
                }
                if !acc && let [a, b, c, d, e, f, g, h] = srcs {
                    // SAFETY: as above.
                    return unsafe { xor_8(dst, [a, b, c, d, e, f, g, h], stream) };
                }
                if (1..=generic::XOR_FEW_SOURCES).contains(&srcs.len()) {
                    // SAFETY: the caller checked the CPU features this module is compiled for.
                    return unsafe { xor_few(dst, srcs, acc, stream) };
                }
                // SAFETY: as above.
                unsafe {
                    generic::xor_gen::<$vector, $xor_few, $xor_many, $prefetch, $wide_prefetch>(
                        dst, srcs, acc, stream,
                    )
                }
            }

            /// Full stripes of RAID5 of 5 and 9 members: the source pointers in registers and
            /// the sum unrolled at compile time (three-way XORs), where `xor_few` and the
            /// general loop walk a slice of sources in every group. On a Zen 5 machine, three
            /// runs each alternated with the loops before: 4 x 4 KiB in L1 1.35-1.38x ISA-L ->
            /// 1.69-1.70x, 4 x 1 MiB in L3 0.97-1.04x -> 1.02-1.03x, 4 x 64 KiB in L2 0.94x ->
            /// 0.95x; 8 x 4 KiB 1.19-1.23x -> 1.63-1.67x. 8 sources of 16 KiB and more kept
            /// the general loop there (8 x 64 KiB in L2 0.98x with it, 0.92-1.02x with this);
            /// on an Intel Xeon (Sapphire Rapids class) VM this one is faster: 8 x 64 KiB in L2
            /// 0.99-1.04x -> 1.06-1.10x (three runs alternated), 8 x 1 MiB and streamed level.
            ///
            /// Four sources take one cache line each per group (AVX2 two vectors, the AVX-512
            /// backends one), not the `xor_few` figure: on the Zen 4 VM of the second session
            /// of 2026-12-05, GFNI's 4 vectors a source ran streamed 4 x 4 KiB at 0.93-1.01x
            /// ISA-L and one line at 1.12-1.20x, streamed 4 x 64 KiB 1.08-1.13x -> 1.19-1.20x,
            /// the in-cache rows level (three runs of `uraid bench parity --only xor` each,
            /// alternated; the AVX2 backend, whose code this leaves as it was, moved by up to
            /// 0.1 between the runs). Zen 5 and the Xeon have not measured it.
            #[target_feature(enable = $features)]
            #[inline(never)]
            unsafe fn xor_4(dst: &mut [u8], srcs: [&[u8]; 4], stream: bool) {
                // SAFETY: as above.
                unsafe {
                    generic::xor_k::<
                        $vector,
                        4,
                        { LINE / <$vector as Vector>::BYTES },
                        { 2 * LINE / <$vector as Vector>::BYTES },
                    >(dst, srcs, stream)
                }
            }

            #[target_feature(enable = $features)]
            #[inline(never)]
            unsafe fn xor_8(dst: &mut [u8], srcs: [&[u8]; 8], stream: bool) {
                // SAFETY: as above.
                unsafe {
                    generic::xor_k::<
                        $vector,
                        8,
                        $xor_many,
                        { 2 * LINE / <$vector as Vector>::BYTES },
                    >(dst, srcs, stream)
                }
            }

            /// Few sources in a function of its own: inlined beside the general loop, the
            /// same loop ran 262-289 GB/s on 4 x 4 KiB in L1 instead of 302-322 (its output
            /// pointer and length were kept on the stack).
            #[target_feature(enable = $features)]
            #[inline(never)]
            unsafe fn xor_few(dst: &mut [u8], srcs: &[&[u8]], acc: bool, stream: bool) {
                // SAFETY: as above.
                unsafe { generic::xor_few::<$vector, $xor_few, $prefetch>(dst, srcs, acc, stream) }
            }

            #[target_feature(enable = $features)]
            pub(crate) unsafe fn syndrome(
                mut p: Option<&mut [u8]>,
                q: &mut [u8],
                data: &[Option<&[u8]>],
                stream: bool,
            ) {
                if q.len() < $syndrome_4_below
                    && let (Some(p), [Some(a), Some(b), Some(c), Some(d)]) =
                        (p.as_deref_mut(), data)
                {
                    // SAFETY: as above.
                    return unsafe { syndrome_4(p, q, [a, b, c, d], stream) };
                }
                if generic::syndrome_is_wide::<{ $pq_wide_from }>(p.is_some(), q.len(), data) {
                    // SAFETY: as above.
                    return unsafe { syndrome_wide(p, q, data, stream) };
                }
                if data.len() > generic::XOR_CHUNK {
                    // SAFETY: as above.
                    return unsafe { syndrome_many(p, q, data, stream) };
                }
                // SAFETY: as above.
                unsafe { generic::syndrome::<$vector, $unroll, $prefetch>(p, q, data, stream) }
            }

            /// RAID6 of 6 members (4 data blocks, every one there) on short blocks, the engine's
            /// 4 KiB stripe units: the block pointers in registers and the Horner steps
            /// unrolled at compile time, where the general loop walks a slice of `Option`s in
            /// every group. On a Zen 5 machine, P+Q of 4 x 4 KiB in L1 went from 238-251 GB/s
            /// (1.99-2.04x ISA-L) to 287-320 (2.41-2.61x), streamed from 1.31x to 1.36-1.40x.
            /// Longer blocks keep the general loop: this one ran 4 x 64 KiB in L2 at 0.71x ISA-L
            /// (8 vectors per step) or 0.97x (4) against its 1.10x. Since ced9c9c it takes only
            /// blocks shorter than 4 KiB (`NT_MIN_BYTES`, which was 16 KiB); taking 4-16 KiB
            /// again was no clear gain on a Zen 3 machine (4 runs of `uraid bench parity --only
            /// pq` each, alternated: 4 x 4 KiB in cache 2.45x -> 2.09x ISA-L, streamed 0.88x ->
            /// 0.94x, both within the runs' spread). The AVX-512 backends take 4 KiB blocks (the
            /// engine's default stripe unit) again since the sixth session of 2026-12-06: on a
            /// Zen 5 machine (family 26 model 2), three runs of `--only pq` each alternated,
            /// GFNI ran 4 x 4 KiB in cache at 281-285 GB/s (2.21-2.66x ISA-L) against 246-247
            /// (1.87-1.93x), streamed at 19.3-20.6 against 17.9-19.0; AVX-512 (two runs, the
            /// backend forced) 187-192 against 161-164 in cache, 18.7-18.8 against 16.9-17.1
            /// streamed. AVX2 there: +10% in cache, -10-20% streamed; it keeps the loop. On AMD's
            /// family 0x19 a stripe that missed the caches takes the backend's vectors a step
            /// for such (`generic::syndrome_k`).
            #[target_feature(enable = $features)]
            #[inline(never)]
            unsafe fn syndrome_4(p: &mut [u8], q: &mut [u8], data: [&[u8]; 4], stream: bool) {
                // SAFETY: as above.
                unsafe {
                    generic::syndrome_k::<$vector, 4, $unroll, $pq_many_missed>(
                        p,
                        q,
                        data,
                        stream,
                        probe::family_19h(),
                    )
                }
            }

            #[target_feature(enable = $features)]
            #[inline(never)]
            unsafe fn syndrome_many(
                p: Option<&mut [u8]>,
                q: &mut [u8],
                data: &[Option<&[u8]>],
                stream: bool,
            ) {
                if probe::family_19h() {
                    // SAFETY: as above.
                    return unsafe {
                        generic::syndrome_by_verdict::<
                            $vector,
                            $pq_many_cached,
                            $pq_many_missed,
                            $prefetch,
                        >(p, q, data, stream)
                    };
                }
                if probe::zen5() {
                    // SAFETY: as above.
                    return unsafe {
                        generic::syndrome_by_verdict::<$vector, $pq_many, $unroll, $prefetch>(
                            p, q, data, stream,
                        )
                    };
                }
                // SAFETY: as above.
                unsafe { generic::syndrome::<$vector, $pq_many, $prefetch>(p, q, data, stream) }
            }

            #[target_feature(enable = $features)]
            #[inline(never)]
            unsafe fn syndrome_wide(
                p: Option<&mut [u8]>,
                q: &mut [u8],
                data: &[Option<&[u8]>],
                stream: bool,
            ) {
                // SAFETY: as above.
                unsafe {
                    generic::syndrome_wide::<
                        $vector,
                        $unroll,
                        $prefetch,
                        $wide_prefetch,
                        $pq_many_missed,
                    >(p, q, data, stream)
                }
            }

            #[target_feature(enable = $features)]
            pub(crate) unsafe fn pq_update(p: &mut [u8], q: &mut [u8], deltas: &[Delta<'_>]) {
                // SAFETY: as above.
                unsafe { generic::pq_update::<$vector, $unroll>(p, q, deltas) }
            }

            #[target_feature(enable = $features)]
            pub(crate) unsafe fn mul_const(dst: &mut [u8], src: &[u8], c: u8, acc: bool) {
                // SAFETY: as above.
                unsafe { generic::mul_const::<$vector, $unroll>(dst, src, c, acc) }
            }

            #[target_feature(enable = $features)]
            pub(crate) unsafe fn recov_2data_fused(
                out: (&mut [u8], &mut [u8]),
                data: &[Option<&[u8]>],
                top: Option<usize>,
                pq: (&[u8], &[u8]),
                coefs: (u8, u8),
                stream: bool,
            ) {
                if data.len() > generic::XOR_CHUNK {
                    if generic::syndrome_is_wide::<{ $pq_wide_from }>(true, out.0.len(), data) {
                        // SAFETY: as above.
                        return unsafe { recov_2data_wide(out, data, top, pq, coefs, stream) };
                    }
                    // SAFETY: as above.
                    return unsafe { recov_2data_many(out, data, top, pq, coefs, stream) };
                }
                // SAFETY: as above.
                unsafe {
                    generic::recov_2data_fused::<
                        $vector,
                        $unroll,
                        { generic::RECOV_MISSED },
                        $prefetch,
                    >(out, data, top, pq, coefs, stream)
                }
            }

            /// As `syndrome_many`: wide stripes take the fewer vectors per step.
            #[target_feature(enable = $features)]
            #[inline(never)]
            unsafe fn recov_2data_many(
                out: (&mut [u8], &mut [u8]),
                data: &[Option<&[u8]>],
                top: Option<usize>,
                pq: (&[u8], &[u8]),
                coefs: (u8, u8),
                stream: bool,
            ) {
                // SAFETY: as above.
                unsafe {
                    generic::recov_2data_fused::<$vector, $pq_many, $pq_many, $prefetch>(
                        out, data, top, pq, coefs, stream,
                    )
                }
            }

            /// As `syndrome_wide`: wide stripes of long blocks in column tiles.
            #[target_feature(enable = $features)]
            #[inline(never)]
            unsafe fn recov_2data_wide(
                out: (&mut [u8], &mut [u8]),
                data: &[Option<&[u8]>],
                top: Option<usize>,
                pq: (&[u8], &[u8]),
                coefs: (u8, u8),
                stream: bool,
            ) {
                // SAFETY: as above.
                unsafe {
                    generic::recov_2data_wide::<$vector, $unroll, $pq_many_missed, $prefetch>(
                        out, data, top, pq, coefs, stream,
                    )
                }
            }

            #[target_feature(enable = $features)]
            pub(crate) unsafe fn recov_data_q(dx: &mut [u8], p: &mut [u8], q: &[u8], c: u8) {
                // SAFETY: as above.
                unsafe { generic::recov_data_q::<$vector, $unroll>(dx, p, q, c) }
            }
        }
    };
}

// Vectors per group: as many independent chains as the registers hold without spilling
// (AVX2 has 16 registers, AVX-512 32; GFNI's multiply needs no nibble tables or masks, which
// leaves room for 8). Measured with `uraid bench parity --only cache`. XOR is the exception:
// it has the registers but not the cache's bandwidth for them, and wants about 16 lines in
// flight per group whatever the width (`generic::XOR_FEW_SOURCES`): (few, many) vectors per
// source. On a Zen 5 machine, 8 vectors per source ran XOR of 4 and 8 x 64 KiB in L2 at
// 0.55-0.6x ISA-L, (4, 2) at 0.95-1.03x and streaming XOR from 0.7-0.8x to 1.1-1.2x. P+Q takes
// (up to 8 data blocks, more) vectors per step in one pass (wide stripes of long blocks go in
// tiles of 8 data blocks, `generic::syndrome_wide`): on Zen 5, 4 for 16 x 4 KiB ran 2.3x ISA-L
// in cache against 1.95x with 8 (streamed: 1.2x against 1.3x); the other backends keep one
// figure, unmeasured there.
//
// Wide P+Q (more than 8 data blocks) goes in chunks of 8 slots (`generic::syndrome_wide`) for
// blocks of at least the given bytes. AVX2 takes it from 4 KiB: on a Zen 3 machine, streamed
// 16 x 4 KiB ran at a median 74% of the reference in one pass and 88% in chunks (1.08x ISA-L ->
// 1.31x; 6 and 9 runs of `uraid bench parity --only pq`, the builds alternated), 16 x 4 KiB in
// cache 2.75x -> 2.92x; chunks of 6 or 4 slots were no better streamed and cost the 8-wide
// rows. The AVX-512 backends keep one pass up to `generic::PQ_TILE` (measured on Zen 5).
//
// After that figure: 4 data blocks and P of blocks shorter than this many bytes take
// `syndrome_4` (see there).
//
// The tuple before the features: for stripes of more than 8 data blocks on a CPU tuned for
// them (`probe::family_19h`, AMD's family 0x19), a software prefetch distance for
// those that missed the caches (`generic::wide_prefetch`), and P+Q's vectors per step for
// those in cache on blocks up to `generic::PQ_TILE` and for those that missed on any blocks
// (`generic::syndrome_by_verdict`, `generic::syndrome_wide`). On the Zen 4 VM of the session
// of 2026-12-05 (GFNI), 4 KiB ahead took streamed XOR of 16 x 64 KiB and 16 x 1 MiB from
// 78-80% of the reference to 92-94% (8 KiB was no better); 8 vectors per step in cache and 2
// when missed took P+Q of 16 x 4 KiB from 1.48-1.55x ISA-L in cache to 1.96-2.03x and
// streamed from 74-90% of the reference to 85-94% (three runs of `uraid bench parity --only
// pq` each, `URAID_PARITY_WIDE_TUNING=off` alternated with the default), and 2 in the tiles
// of longer blocks streamed 16 x 1 MiB at 89-94% in place of 84-86%. The AVX-512 and AVX2
// backends keep their own figures there (unmeasured). The last figure serves `syndrome_4` too
// on that family, when its stripe missed the caches (`generic::syndrome_k`).
//
// Software prefetch distance for every call (bytes ahead, 0 = none): 4 KiB for AVX-512 without
// GFNI, measured on a Zen 4 machine (8-wide streaming from ~80% to ~90% of the reference, before
// the cache probe and tiles); none for GFNI, measured on a Zen 5 machine, where 4 KiB ahead cost
// streaming P+Q of 8 x 1 MiB a third (25 against 39 GB/s) and a short prefetch into L1 (512 B, 1
// KiB) cost in-cache 64 KiB rows 10-40%; none for AVX2, measured on a Zen 3 machine without
// AVX-512, where the prefetches cost 25-40% of streaming XOR and P+Q at every width (the hardware
// prefetchers alone did better). The AVX-512 (without GFNI) XOR groups follow the Zen 5 rule in
// bytes per source (256 B for few sources, 128 B for many). AVX2's were (8, 4) by that rule too,
// until a Zen 5 machine measured the AVX2 backend (forced with URAID_PARITY_BACKEND=avx2; the
// machine would choose GFNI): with 16 registers, 8 accumulators per group ran 4 x 64 KiB in L2 at
// 106-108 GB/s where 4 ran 151-165, and (4, 2) against (8, 4) took 4-wide rows from 169/154/82
// GB/s (4K/64K/1M in cache) to 195/166/84, 8 x 64K from 114 to 170, streamed 8 x 1M from 18 to 30,
// 16 x 1M from 21 to 27 (8 x 4K in L1 189 -> 176). On a Zen 3 machine, where AVX2 is the backend
// chosen, 2 vectors (one line) per source for few sources beat 4 (medians of the ratio to ISA-L
// over 5-8 runs of `uraid bench parity --only xor`, the builds alternated): 4-wide XOR streamed 4
// x 4K 0.86 -> 1.01, in cache 4K 3.83 -> 4.49, 64K 1.12 -> 1.15, 1M 0.78 -> 0.93 (both bimodal
// there); 1 vector was no better than 4, and 8 ran 4 x 1M in cache at 1.02 but streamed 4 x 4K at
// 0.70 (2 runs). For P+Q it ran (3, 4), (2, 4), (4, 2) and (3, 3) against (4, 4), two runs each:
// none was better on most rows ((4, 2) ran 16 x 4K in cache at 2.2x ISA-L against 3.1x), so (4, 4)
// stays.
backend_module!(avx2, Avx2, (2, 2), (4, 4), 4096, generic::NT_MIN_BYTES, 0, (0, 4, 4), "avx2");
backend_module!(
    avx512,
    Avx512,
    (4, 2),
    (4, 4),
    generic::PQ_TILE + 1,
    generic::NT_MIN_BYTES + 1,
    4096,
    (4096, 4, 4),
    "avx512f,avx512bw"
);
backend_module!(
    gfni,
    Gfni,
    (4, 2),
    (8, 4),
    generic::PQ_TILE + 1,
    generic::NT_MIN_BYTES + 1,
    0,
    (4096, 8, 2),
    "avx512f,avx512bw,gfni"
);
