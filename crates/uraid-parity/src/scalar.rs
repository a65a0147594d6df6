//! The scalar reference: byte at a time, obviously right, always available. Every SIMD kernel is
//! tested against these, and they finish the tail bytes that do not fill a vector.
//!
//! Each kernel works on the byte range `from..len` so that a SIMD kernel can hand over its tail.

use crate::gf;

/// `dst = XOR of srcs` (or `dst ^= XOR of srcs` when `acc`).
pub(crate) fn xor_gen(dst: &mut [u8], srcs: &[&[u8]], acc: bool, from: usize) {
    for i in from..dst.len() {
        let mut x = if acc { dst[i] } else { 0 };
        for s in srcs {
            x ^= s[i];
        }
        dst[i] = x;
    }
}

/// P (if wanted) and Q of `data` in syndrome order; `None` is an all-zero block.
/// Q is evaluated by Horner's rule from the highest slot: `q = q * 2 ^ d_i`.
pub(crate) fn syndrome(
    mut p: Option<&mut [u8]>,
    q: &mut [u8],
    data: &[Option<&[u8]>],
    from: usize,
) {
    for i in from..q.len() {
        let (mut pv, mut qv) = (0u8, 0u8);
        for d in data.iter().rev() {
            let x = d.map_or(0, |d| d[i]);
            pv ^= x;
            qv = gf::mul2(qv) ^ x;
        }
        if let Some(p) = p.as_deref_mut() {
            p[i] = pv;
        }
        q[i] = qv;
    }
}

/// One changed data block for a read-modify-write: its Q coefficient and old and new contents.
#[derive(Clone, Copy, Debug)]
pub struct Delta<'a> {
    pub coef: u8,
    pub old: &'a [u8],
    pub new: &'a [u8],
}

/// `p ^= Σ (old ^ new)`, `q ^= Σ coef * (old ^ new)`.
pub(crate) fn pq_update(p: &mut [u8], q: &mut [u8], deltas: &[Delta<'_>], from: usize) {
    for i in from..p.len() {
        for d in deltas {
            let x = d.old[i] ^ d.new[i];
            p[i] ^= x;
            q[i] ^= gf::mul(d.coef, x);
        }
    }
}

/// `dst = c * src` (or `dst ^= c * src` when `acc`).
pub(crate) fn mul_const(dst: &mut [u8], src: &[u8], c: u8, acc: bool, from: usize) {
    for i in from..dst.len() {
        let x = gf::mul(c, src[i]);
        dst[i] = if acc { dst[i] ^ x } else { x };
    }
}

/// Two lost data blocks. On entry `dx`, `dy` hold P and Q of the surviving data; on exit the
/// lost blocks: `dx = a * (P ^ dx) ^ b * (Q ^ dy)`, `dy = (P ^ dx_in) ^ dx`.
pub(crate) fn recov_2data(
    dx: &mut [u8],
    dy: &mut [u8],
    p: &[u8],
    q: &[u8],
    a: u8,
    b: u8,
    from: usize,
) {
    for i in from..dx.len() {
        let pxy = p[i] ^ dx[i];
        let qxy = q[i] ^ dy[i];
        let x = gf::mul(a, pxy) ^ gf::mul(b, qxy);
        dx[i] = x;
        dy[i] = pxy ^ x;
    }
}

/// One lost data block and a lost P. On entry `dx` holds Q of the surviving data and `p` their
/// P; on exit `dx = c * (Q ^ dx)` and `p ^= dx`.
pub(crate) fn recov_data_q(dx: &mut [u8], p: &mut [u8], q: &[u8], c: u8, from: usize) {
    for i in from..dx.len() {
        let x = gf::mul(c, q[i] ^ dx[i]);
        dx[i] = x;
        p[i] ^= x;
    }
}
