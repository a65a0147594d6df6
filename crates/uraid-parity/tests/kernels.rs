//! Every SIMD backend against the scalar reference, and the scalar reference against the
//! definitions (P = Σ d_i, Q = Σ 2^i d_i over GF(2^8) mod 0x11d), on random data at many widths,
//! lengths and misalignments.

use proptest::prelude::*;
use uraid_parity::{Backend, Block, Stores, gf};

/// The backends this CPU runs besides the reference.
fn fast_backends() -> Vec<Backend> {
    Backend::ALL.into_iter().filter(|b| *b != Backend::Scalar && b.available()).collect()
}

/// `count` random blocks of `len` bytes, each starting `skew` bytes into its allocation so that
/// no block is vector-aligned when `skew` is odd.
fn blocks(seed: u64, count: usize, len: usize, skew: usize) -> Vec<Vec<u8>> {
    let mut x = seed | 1;
    (0..count)
        .map(|_| {
            (0..len + skew)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        })
        .collect()
}

fn definition_pq(data: &[Option<&[u8]>], len: usize) -> (Vec<u8>, Vec<u8>) {
    let (mut p, mut q) = (vec![0u8; len], vec![0u8; len]);
    for (i, d) in data.iter().enumerate() {
        if let Some(d) = d {
            for b in 0..len {
                p[b] ^= d[b];
                q[b] ^= gf::mul(gf::exp2(i), d[b]);
            }
        }
    }
    (p, q)
}

fn geometry() -> impl Strategy<Value = (usize, usize, usize, u64)> {
    // (data blocks, length, skew, seed): lengths cover empty, sub-vector, odd and multi-group.
    (1usize..=254, prop_oneof![0usize..300, 300usize..5000], 0usize..64, any::<u64>())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn xor_matches_reference((n, len, skew, seed) in geometry(), acc in any::<bool>()) {
        xor_case(n, len, skew, seed, acc)?;
    }

    /// Up to 4 sources take a loop of their own (`xor_few`), and so do exactly 4 and 8
    /// (`xor_4`, `xor_8`); the general geometry rarely draws them.
    #[test]
    fn xor_of_few_sources_matches_reference(
        n in prop_oneof![0usize..=5, Just(8usize)], len in prop_oneof![0usize..300, 300usize..20_000],
        skew in 0usize..64, seed in any::<u64>(), acc in any::<bool>(),
    ) {
        xor_case(n, len, skew, seed, acc)?;
    }

    #[test]
    fn syndrome_matches_definition_and_reference(
        (n, len, skew, seed) in geometry(),
        zero_mask in any::<u64>(),
    ) {
        let src = blocks(seed, n, len, skew);
        // Some slots are zero blocks (None), as in DDF layouts.
        let data: Vec<Option<&[u8]>> = src.iter().enumerate()
            .map(|(i, b)| (zero_mask >> (i % 64) & 1 == 0 || n < 3).then(|| &b[skew..]))
            .collect();
        let (want_p, want_q) = definition_pq(&data, len);
        for be in Backend::ALL.into_iter().filter(|b| b.available()) {
            let (mut p, mut q) = (vec![0xa5; len], vec![0x5a; len]);
            be.gen_syndrome(&mut p, &mut q, &data);
            prop_assert!(p == want_p && q == want_q, "{} differs", be.name());
        }
    }

    /// Four data blocks, every one there, on blocks shorter than 16 KiB take a loop of their
    /// own (`syndrome_4`); the general geometry rarely draws them.
    #[test]
    fn syndrome_of_four_blocks_matches_definition(
        len in prop_oneof![0usize..300, 300usize..20_000], skew in 0usize..64, seed in any::<u64>(),
    ) {
        let src = blocks(seed, 4, len, skew);
        let data: Vec<Option<&[u8]>> = src.iter().map(|b| Some(&b[skew..])).collect();
        let (want_p, want_q) = definition_pq(&data, len);
        for be in Backend::ALL.into_iter().filter(|b| b.available()) {
            let (mut p, mut q) = (vec![0xa5; len], vec![0x5a; len]);
            be.gen_syndrome(&mut p, &mut q, &data);
            prop_assert!(p == want_p && q == want_q, "{} differs", be.name());
        }
    }

    #[test]
    fn pq_update_equals_fresh_syndrome(
        (n, len, skew, seed) in geometry(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..4),
    ) {
        let old = blocks(seed, n, len, skew);
        let mut new = old.clone();
        let fresh = blocks(seed.rotate_left(7), picks.len(), len, skew);
        let mut slots: Vec<usize> = picks.iter().map(|i| i.index(n)).collect();
        slots.sort_unstable();
        slots.dedup();
        for (k, &s) in slots.iter().enumerate() { new[s] = fresh[k].clone(); }
        let old_refs: Vec<Option<&[u8]>> = old.iter().map(|b| Some(&b[skew..])).collect();
        let new_refs: Vec<Option<&[u8]>> = new.iter().map(|b| Some(&b[skew..])).collect();
        let (want_p, want_q) = definition_pq(&new_refs, len);
        let (p0, q0) = definition_pq(&old_refs, len);
        let updates: Vec<(usize, &[u8], &[u8])> =
            slots.iter().map(|&s| (s, &old[s][skew..], &new[s][skew..])).collect();
        for be in Backend::ALL.into_iter().filter(|b| b.available()) {
            let (mut p, mut q) = (p0.clone(), q0.clone());
            be.pq_update_multi(&mut p, &mut q, &updates);
            prop_assert!(p == want_p && q == want_q, "{} differs", be.name());
        }
    }

    #[test]
    fn mul_const_matches_reference((_, len, skew, seed) in geometry(), c in any::<u8>(), acc in any::<bool>()) {
        let src = blocks(seed, 2, len, skew);
        let want: Vec<u8> = src[0][skew..].iter().zip(&src[1][skew..])
            .map(|(d, s)| gf::mul(c, *s) ^ if acc { *d } else { 0 })
            .collect();
        for be in Backend::ALL.into_iter().filter(|b| b.available()) {
            let mut got = src[0][skew..].to_vec();
            if acc { be.mul_const_acc(&mut got, &src[1][skew..], c) } else { be.mul_const(&mut got, &src[1][skew..], c) }
            prop_assert!(got == want, "{} differs", be.name());
        }
    }
}

fn xor_case(n: usize, len: usize, skew: usize, seed: u64, acc: bool) -> Result<(), TestCaseError> {
    let src = blocks(seed, n + 1, len, skew);
    let srcs: Vec<&[u8]> = src[1..].iter().map(|b| &b[skew..]).collect();
    let mut want = src[0][skew..].to_vec();
    if acc {
        Backend::Scalar.xor_acc(&mut want, &srcs);
    } else {
        Backend::Scalar.xor_gen(&mut want, &srcs);
    }
    let mut by_definition = if acc { src[0][skew..].to_vec() } else { vec![0; len] };
    for s in &srcs {
        for (d, x) in by_definition.iter_mut().zip(*s) {
            *d ^= x;
        }
    }
    prop_assert_eq!(&want, &by_definition);
    for be in fast_backends() {
        let mut got = src[0][skew..].to_vec();
        if acc {
            be.xor_acc(&mut got, &srcs);
        } else {
            be.xor_gen(&mut got, &srcs);
        }
        prop_assert!(got == want, "{} differs", be.name());
    }
    Ok(())
}

#[test]
fn every_backend_is_refused_or_runs() {
    for be in Backend::ALL {
        let result = std::panic::catch_unwind(|| {
            let mut d = [0u8; 8];
            be.xor_gen(&mut d, &[&[1u8; 8]]);
            d
        });
        assert_eq!(result.is_ok(), be.available(), "{}", be.name());
        if let Ok(d) = result {
            assert_eq!(d, [1; 8]);
        }
    }
    assert!(Backend::detect().available());
    assert_eq!(Backend::from_name("gfni"), Some(Backend::Gfni));
    assert_eq!(Backend::from_name("sse9"), None);
}

#[test]
#[should_panic(expected = "same length")]
fn mismatched_lengths_are_refused() {
    let mut p = [0u8; 16];
    Backend::Scalar.xor_gen(&mut p, &[&[0u8; 15]]);
}

/// A zeroed buffer of `len` bytes starting `skew` bytes past a 64-byte boundary.
fn placed(len: usize, skew: usize) -> (Vec<u8>, usize) {
    let buf = vec![0u8; len + skew + 64];
    let at = buf.as_ptr().align_offset(64) + skew;
    (buf, at)
}

/// The paths that short random blocks never reach: wide XOR in column tiles (more than 8
/// sources, blocks longer than a tile, tile ends and odd tails) and non-temporal stores (calls
/// of at least `ORDINARY_STORES_BELOW` bytes with vector-aligned outputs), with aligned and
/// misaligned outputs, and each kind of store forced (whether the probe would choose
/// non-temporal stores depends on what the caches hold), with and without the tuning for wide
/// stripes (which CPUs take it by default) and for Zen 5 (XOR of 4 and 8 sources past L1 source
/// by source, P+Q of wide stripes).
#[test]
fn large_and_wide_calls_match_reference() {
    for (tuned, zen5) in [(true, false), (false, false), (false, true)] {
        uraid_parity::set_wide_tuning(tuned);
        uraid_parity::set_zen5_tuning(zen5);
        for stores in [Stores::NonTemporal, Stores::Ordinary, Stores::Probe] {
            uraid_parity::set_stores(stores);
            large_and_wide_calls(stores);
        }
    }
}

/// (sources, block length) of `large_and_wide_calls`.
const LARGE_AND_WIDE: &[(usize, usize)] = &[
    (9, 8192 * 2),
    (9, 8192 * 2 + 77),
    (16, 65536),
    (17, 65536 + 5),
    (16, (1 << 20) / 16 + 64),
    (33, 40_000),
    (8, 1 << 17),
    (4, (1 << 20) / 4 + 31),
    // XOR of 4 and 8 sources source by source from 32 KiB, two lines a step: tails of
    // a line and less.
    (4, (32 << 10) + 64 + 7),
    (8, 32 << 10),
    (254, 4096 + 3),
    // AVX2 takes wide P+Q in chunks of slots from 4 KiB blocks.
    (16, 4096),
    (10, 4096 + 64),
    (4, 4096),
    (3, 8192 + 32),
];

fn large_and_wide_calls(stores: Stores) {
    let cases = LARGE_AND_WIDE;
    for (i, &(n, len)) in cases.iter().enumerate() {
        let src = blocks(i as u64 + 1, n, len, 0);
        let srcs: Vec<&[u8]> = src.iter().map(Vec::as_slice).collect();
        let data: Vec<Option<&[u8]>> = srcs.iter().map(|s| Some(*s)).collect();
        let mut want = vec![0u8; len];
        Backend::Scalar.xor_gen(&mut want, &srcs);
        let mut want_acc = src[0].clone();
        Backend::Scalar.xor_acc(&mut want_acc, &srcs[1..]);
        let (mut want_p, mut want_q) = (vec![0u8; len], vec![0u8; len]);
        Backend::Scalar.gen_syndrome(&mut want_p, &mut want_q, &data);
        for be in fast_backends() {
            for skew in [0, 1, 32] {
                let (mut d, at) = placed(len, skew);
                be.xor_gen(&mut d[at..at + len], &srcs);
                assert!(
                    d[at..at + len] == want[..],
                    "{} xor n={n} len={len} skew={skew} {stores:?}",
                    be.name()
                );
                d[at..at + len].copy_from_slice(&src[0]);
                be.xor_acc(&mut d[at..at + len], &srcs[1..]);
                assert!(d[at..at + len] == want_acc[..], "{} xor_acc n={n} len={len}", be.name());
                let (mut p, pa) = placed(len, skew);
                let (mut q, qa) = placed(len, 0);
                be.gen_syndrome(&mut p[pa..pa + len], &mut q[qa..qa + len], &data);
                assert!(p[pa..pa + len] == want_p[..], "{} P n={n} len={len}", be.name());
                assert!(q[qa..qa + len] == want_q[..], "{} Q n={n} len={len}", be.name());
                // The entry points for outputs read again at once: ordinary stores always.
                d[at..at + len].fill(0xa5);
                be.xor_gen_cached(&mut d[at..at + len], &srcs);
                assert!(d[at..at + len] == want[..], "{} xor_gen_cached n={n}", be.name());
                d[at..at + len].copy_from_slice(&src[0]);
                be.xor_acc_cached(&mut d[at..at + len], &srcs[1..]);
                assert!(d[at..at + len] == want_acc[..], "{} xor_acc_cached n={n}", be.name());
                p[pa..pa + len].fill(0x5a);
                q[qa..qa + len].fill(0x5a);
                be.gen_syndrome_cached(&mut p[pa..pa + len], &mut q[qa..qa + len], &data);
                assert!(p[pa..pa + len] == want_p[..], "{} P cached n={n}", be.name());
                assert!(q[qa..qa + len] == want_q[..], "{} Q cached n={n}", be.name());
                // Two lost data blocks (the first and the last slot), rebuilt into outputs
                // placed as above: recovery's stores follow the same choice.
                let (mut x, xa) = placed(len, skew);
                let (mut y, ya) = placed(len, 0);
                let mut stripe: Vec<Block<'_>> = srcs.iter().map(|s| Block::Present(s)).collect();
                stripe[0] = Block::Lost(&mut x[xa..xa + len]);
                stripe[n - 1] = Block::Lost(&mut y[ya..ya + len]);
                be.raid6_recover(
                    &mut stripe,
                    &mut Block::Present(&want_p),
                    &mut Block::Present(&want_q),
                );
                drop(stripe);
                assert!(x[xa..xa + len] == src[0][..], "{} recovery n={n} len={len}", be.name());
                assert!(y[ya..ya + len] == src[n - 1][..], "{} recovery n={n}", be.name());
            }
        }
    }
}
