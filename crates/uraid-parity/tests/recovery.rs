//! RAID6 recovery: every erasure pattern (one data block, P, Q, data+P, data+Q, two data
//! blocks, P+Q) round-trips on every backend, at widths up to 254 data blocks (256 members).

use proptest::prelude::*;
use uraid_parity::{Backend, Block, gf};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Loss {
    Data(usize),
    P,
    Q,
}

/// A stripe of `n` data slots (those in `zero` are zero blocks) with correct P and Q.
struct Stripe {
    data: Vec<Option<Vec<u8>>>,
    p: Vec<u8>,
    q: Vec<u8>,
}

fn stripe(n: usize, len: usize, seed: u64, zero: &[usize]) -> Stripe {
    let mut x = seed | 1;
    let mut next = || {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as u8
    };
    let data: Vec<Option<Vec<u8>>> =
        (0..n).map(|i| (!zero.contains(&i)).then(|| (0..len).map(|_| next()).collect())).collect();
    let (mut p, mut q) = (vec![0u8; len], vec![0u8; len]);
    for (i, d) in data.iter().enumerate() {
        for (b, v) in d.iter().flatten().enumerate() {
            p[b] ^= v;
            q[b] ^= gf::mul(gf::exp2(i), *v);
        }
    }
    Stripe { data, p, q }
}

/// Loses `losses` (their buffers are filled with garbage), recovers with `be`, and checks that
/// every block is back.
fn round_trip(be: Backend, s: &Stripe, losses: &[Loss]) -> Result<(), String> {
    round_trip_placed(be, s, losses, 3)
}

/// `round_trip` with the lost blocks' buffers starting `skew` bytes past a 64-byte boundary
/// (aligned outputs may take non-temporal stores).
fn round_trip_placed(be: Backend, s: &Stripe, losses: &[Loss], skew: usize) -> Result<(), String> {
    let len = s.p.len();
    let mut bufs: Vec<Vec<u8>> =
        (0..losses.len()).map(|k| vec![0xe7 ^ k as u8; len + 64 + skew]).collect();
    let mut bufs = bufs.iter_mut().map(|b| {
        let at = b.as_ptr().align_offset(64) + skew;
        &mut b[at..at + len]
    });
    let mut lost_buf = |loss| if losses.contains(&loss) { bufs.next() } else { None };
    let mut p = match lost_buf(Loss::P) {
        Some(b) => Block::Lost(b),
        None => Block::Present(&s.p),
    };
    let mut q = match lost_buf(Loss::Q) {
        Some(b) => Block::Lost(b),
        None => Block::Present(&s.q),
    };
    let mut data: Vec<Block<'_>> = s
        .data
        .iter()
        .enumerate()
        .map(|(i, d)| match (d, lost_buf(Loss::Data(i))) {
            (None, _) => Block::Zero,
            (Some(_), Some(b)) => Block::Lost(b),
            (Some(d), None) => Block::Present(d),
        })
        .collect();
    be.raid6_recover(&mut data, &mut p, &mut q);
    let ok = p.bytes() == Some(&s.p[..])
        && q.bytes() == Some(&s.q[..])
        && data.iter().zip(&s.data).all(|(b, d)| b.bytes() == d.as_deref());
    if ok { Ok(()) } else { Err(format!("{} failed to recover {losses:?}", be.name())) }
}

/// Every pattern of one or two losses among the non-zero blocks.
fn all_patterns(s: &Stripe) -> Vec<Vec<Loss>> {
    let mut blocks: Vec<Loss> = s
        .data
        .iter()
        .enumerate()
        .filter(|(_, d)| d.is_some())
        .map(|(i, _)| Loss::Data(i))
        .collect();
    blocks.extend([Loss::P, Loss::Q]);
    let mut out = Vec::new();
    for (i, a) in blocks.iter().enumerate() {
        out.push(vec![*a]);
        for b in &blocks[i + 1..] {
            out.push(vec![*a, *b]);
        }
    }
    out
}

fn backends() -> impl Iterator<Item = Backend> {
    Backend::ALL.into_iter().filter(|b| b.available())
}

#[test]
fn every_pattern_at_small_widths() {
    for (n, zero) in [(1, &[][..]), (2, &[]), (3, &[1]), (8, &[]), (8, &[0, 7]), (17, &[3])] {
        for len in [1, 64, 100, 4096 + 33] {
            let s = stripe(n, len, (n * 1000 + len) as u64, zero);
            for losses in all_patterns(&s) {
                for be in backends() {
                    round_trip(be, &s, &losses).unwrap();
                }
            }
        }
    }
}

#[test]
fn every_pattern_at_254_data_blocks() {
    // 256 members: every loss of one and every pair that involves the first, last, P or Q.
    let s = stripe(254, 520, 254, &[]);
    for losses in all_patterns(&s) {
        let edge = |l: &Loss| matches!(l, Loss::P | Loss::Q | Loss::Data(0 | 253));
        if losses.len() == 1 || losses.iter().any(edge) {
            for be in backends() {
                round_trip(be, &s, &losses).unwrap();
            }
        }
    }
}

/// Wide stripes of long blocks, which the SIMD backends recover in column tiles of slots:
/// lengths past a tile and odd tails, losses that leave the top slots empty (fewer chunks),
/// zero blocks, aligned and misaligned outputs, each kind of store forced.
#[test]
fn wide_stripes_of_long_blocks() {
    use uraid_parity::Stores;
    let cases =
        [(9, 40_000, &[][..]), (16, 65_536, &[]), (17, 65_536 + 5, &[4]), (33, 70_000, &[32])];
    for stores in [Stores::NonTemporal, Stores::Ordinary, Stores::Probe] {
        uraid_parity::set_stores(stores);
        for (i, &(n, len, zero)) in cases.iter().enumerate() {
            let s = stripe(n, len, i as u64 + 7, zero);
            let top = (0..n).rev().find(|k| !zero.contains(k)).expect("a data block");
            let pairs = [(0, top), (top - 1, top), (0, 1), (3, 8), (1, n - 8), (n - 9, top)];
            for (a, b) in pairs {
                let losses = [Loss::Data(a), Loss::Data(b)];
                if a == b || losses.iter().any(|l| matches!(l, Loss::Data(k) if zero.contains(k))) {
                    continue;
                }
                for be in backends() {
                    for skew in [0, 3] {
                        let r = round_trip_placed(be, &s, &losses, skew);
                        assert_eq!(r, Ok(()), "n={n} len={len} {stores:?} skew={skew}");
                    }
                }
            }
        }
    }
}

fn loss() -> impl Strategy<Value = Loss> {
    prop_oneof![
        3 => any::<prop::sample::Index>().prop_map(|i| Loss::Data(i.index(1 << 16))),
        1 => Just(Loss::P),
        1 => Just(Loss::Q),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_patterns_round_trip(
        n in 2usize..=254,
        len in prop_oneof![1usize..200, 200usize..9000],
        seed in any::<u64>(),
        picks in prop::collection::vec(loss(), 1..=2),
    ) {
        let s = stripe(n, len, seed, &[]);
        let mut losses: Vec<Loss> = picks.into_iter()
            .map(|l| if let Loss::Data(i) = l { Loss::Data(i % n) } else { l })
            .collect();
        losses.dedup();
        for be in backends() {
            prop_assert_eq!(round_trip(be, &s, &losses), Ok(()));
        }
    }
}

#[test]
#[should_panic(expected = "at most two")]
fn three_losses_are_refused() {
    let s = stripe(4, 16, 1, &[]);
    let _ = round_trip(Backend::Scalar, &s, &[Loss::Data(0), Loss::Data(1), Loss::P]);
}
