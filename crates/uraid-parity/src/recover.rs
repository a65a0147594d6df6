//! RAID6 erasure recovery for every pattern of one or two lost blocks, built from the backend's
//! kernels. Lost data blocks double as scratch space and the block lists live on the stack, so
//! recovery allocates nothing.

use crate::{Backend, Block, MAX_DATA_BLOCKS, gf};
use smallvec::SmallVec;

/// Syndrome inputs: one entry per data slot, `None` for a zero (or not yet rebuilt) block.
/// Inline up to 32 entries (arrays up to 34 members); wider stripes spill to the heap.
type View<'a> = SmallVec<[Option<&'a [u8]>; INLINE]>;
const INLINE: usize = 32;

pub(crate) fn raid6_recover(
    be: Backend,
    data: &mut [Block<'_>],
    p: &mut Block<'_>,
    q: &mut Block<'_>,
) {
    check_stripe(data, p, q);
    let mut lost = data.iter().enumerate().filter(|(_, b)| b.is_lost()).map(|(i, _)| i);
    let (x, y) = (lost.next(), lost.next());
    let (p_lost, q_lost) = (p.is_lost(), q.is_lost());
    let total = lost.count() + usize::from(x.is_some()) + usize::from(y.is_some());
    let total = total + usize::from(p_lost) + usize::from(q_lost);
    assert!(total <= 2, "RAID6 recovers at most two lost blocks, {total} are lost");
    match (x, y, p_lost, q_lost) {
        (None, _, false, false) => {}
        (None, _, true, true) => {
            be.syndrome(p.lost_mut(), q.lost_mut().expect("Q is lost"), &view(data), false);
        }
        (None, _, true, false) => {
            let srcs: SmallVec<[&[u8]; INLINE]> = data.iter().filter_map(Block::present).collect();
            be.xor(p.lost_mut().expect("P is lost"), &srcs, false, false);
        }
        (None, _, false, true) => {
            be.syndrome(None, q.lost_mut().expect("Q is lost"), &view(data), false);
        }
        (Some(x), None, false, _) => {
            // One data block from P, as in RAID5; then Q if it is lost too.
            {
                let (dx, others) = split_lost(data, x);
                let mut srcs: SmallVec<[&[u8]; INLINE]> =
                    others.iter().flatten().copied().collect();
                srcs.push(p.present().expect("P survives"));
                be.xor(dx, &srcs, false, false);
            }
            if let Some(q) = q.lost_mut() {
                be.syndrome(None, q, &view(data), false);
            }
        }
        (Some(x), None, true, false) => {
            // One data block and P: the data from Q, then P from all the data.
            let (dx, others) = split_lost(data, x);
            let p = p.lost_mut().expect("P is lost");
            be.syndrome(Some(p), dx, &others, false);
            be.recov_data_q(dx, p, q.present().expect("Q survives"), gf::inv(gf::exp2(x)));
        }
        (Some(x), Some(y), false, false) => {
            let (pv, qv) = (p.present().expect("P survives"), q.present().expect("Q survives"));
            let (dx, dy, others) = split_lost2(data, x, y);
            // dx = (Q' ^ g^y P') / (g^x ^ g^y), dy = P' ^ dx, with P', Q' the missing sums.
            // The outputs are final, as RAID5's rebuilt block from `xor_gen` is: a stripe that
            // missed the caches gets non-temporal stores (before the second session of
            // 2026-12-05 they were always ordinary: 83-95% of the memory bus streamed).
            let denom = gf::inv(gf::exp2(x) ^ gf::exp2(y));
            be.recov_2data(dx, dy, &others, pv, qv, gf::mul(gf::exp2(y), denom), denom, true);
        }
        _ => unreachable!("more than two losses were refused above"),
    }
}

fn check_stripe(data: &[Block<'_>], p: &Block<'_>, q: &Block<'_>) {
    assert!(
        !matches!(p, Block::Zero) && !matches!(q, Block::Zero),
        "P and Q are never zero blocks"
    );
    assert!(data.len() <= MAX_DATA_BLOCKS, "at most {MAX_DATA_BLOCKS} data blocks");
    let len = p.len();
    for b in data.iter().chain([q]) {
        if !matches!(b, Block::Zero) {
            assert_eq!(b.len(), len, "every block of a stripe has the same length");
        }
    }
}

/// The data blocks as syndrome inputs, lost ones included (they have been rebuilt by now).
fn view<'a>(data: &'a [Block<'_>]) -> View<'a> {
    data.iter().map(Block::bytes).collect()
}

/// The lost block `x` as a mutable buffer, and the rest as syndrome inputs with `x` zero.
fn split_lost<'a>(data: &'a mut [Block<'_>], x: usize) -> (&'a mut [u8], View<'a>) {
    let (before, rest) = data.split_at_mut(x);
    let (bx, after) = rest.split_first_mut().expect("x is a data slot");
    let mut view: View<'a> = before.iter().map(Block::present).collect();
    view.push(None);
    view.extend(after.iter().map(Block::present));
    (bx.lost_mut().expect("x is lost"), view)
}

type TwoLost<'a> = (&'a mut [u8], &'a mut [u8], View<'a>);

/// The lost blocks `x < y` as mutable buffers, and the rest with both zero.
fn split_lost2<'a>(data: &'a mut [Block<'_>], x: usize, y: usize) -> TwoLost<'a> {
    let (head, tail) = data.split_at_mut(y);
    let (by, after) = tail.split_first_mut().expect("y is a data slot");
    let (before, mid) = head.split_at_mut(x);
    let (bx, between) = mid.split_first_mut().expect("x is a data slot");
    let mut view: View<'a> = before.iter().map(Block::present).collect();
    view.push(None);
    view.extend(between.iter().map(Block::present));
    view.push(None);
    view.extend(after.iter().map(Block::present));
    (bx.lost_mut().expect("x is lost"), by.lost_mut().expect("y is lost"), view)
}
