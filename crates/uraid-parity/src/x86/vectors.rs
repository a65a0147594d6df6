//! The [`Vector`] trait and its AVX2, AVX-512BW and AVX-512+GFNI implementations.
//!
//! Every method is `unsafe`: it needs its CPU features, and `load`/`store` take raw pointers that
//! must be valid for one vector (no alignment needed).

use crate::gf;
use std::arch::x86_64::{
    __m256i, __m512i, _mm_loadu_si128, _mm256_add_epi8, _mm256_and_si256,
    _mm256_broadcastsi128_si256, _mm256_loadu_si256, _mm256_set1_epi8, _mm256_setzero_si256,
    _mm256_shuffle_epi8, _mm256_srli_epi16, _mm256_storeu_si256, _mm256_stream_si256,
    _mm256_xor_si256, _mm512_add_epi8, _mm512_and_si512, _mm512_broadcast_i32x4,
    _mm512_gf2p8affine_epi64_epi8, _mm512_loadu_si512, _mm512_maskz_mov_epi8, _mm512_movepi8_mask,
    _mm512_set1_epi8, _mm512_set1_epi64, _mm512_setzero_si512, _mm512_shuffle_epi8,
    _mm512_srli_epi16, _mm512_storeu_si512, _mm512_stream_si512, _mm512_ternarylogic_epi32,
    _mm512_xor_si512,
};

pub(crate) trait Vector: Copy {
    /// Bytes per vector.
    const BYTES: usize;
    /// Whatever multiplication by one constant needs, prepared once per kernel call.
    type Table: Copy;
    unsafe fn load(src: *const u8) -> Self;
    unsafe fn store(self, dst: *mut u8);
    /// A non-temporal store: `dst` must be aligned to `BYTES`.
    unsafe fn store_nt(self, dst: *mut u8);
    unsafe fn zero() -> Self;
    unsafe fn xor(self, other: Self) -> Self;
    /// Each byte times 2 in GF(2^8): the Horner step of the Q syndrome.
    unsafe fn mul2(self) -> Self;
    unsafe fn table(c: u8) -> Self::Table;
    unsafe fn mul(self, table: Self::Table) -> Self;

    /// `a ^ b ^ c` (one instruction with AVX-512's ternary logic).
    #[inline(always)]
    unsafe fn xor3(a: Self, b: Self, c: Self) -> Self {
        unsafe { a.xor(b).xor(c) }
    }

    /// Two Horner steps of the Q syndrome at once: `(q*2 ^ hi)*2 ^ lo`.
    #[inline(always)]
    unsafe fn horner2(q: Self, hi: Self, lo: Self) -> Self {
        unsafe { q.mul2().xor(hi).mul2().xor(lo) }
    }
}

/// `NIBBLES[c] = [c*0, c*1, ..., c*15, c*0x00, c*0x10, ..., c*0xf0]`: the `vpshufb` tables.
static NIBBLES: [[u8; 32]; 256] = build_nibbles();

const fn build_nibbles() -> [[u8; 32]; 256] {
    let mut t = [[0u8; 32]; 256];
    let mut c = 0;
    while c < 256 {
        let mut i = 0;
        while i < 16 {
            t[c][i] = gf::mul_const_eval(c as u8, i as u8);
            t[c][16 + i] = gf::mul_const_eval(c as u8, (i as u8) << 4);
            i += 1;
        }
        c += 1;
    }
    t
}

/// `AFFINE[c]`: the `vgf2p8affineqb` matrix of multiplication by `c`. The instruction computes
/// output bit `i` as the parity of `x AND matrix.byte[7 - i]`, so that byte holds, for each
/// input bit `j`, bit `i` of `c * 2^j`.
static AFFINE: [u64; 256] = build_affine();

const fn build_affine() -> [u64; 256] {
    let mut t = [0u64; 256];
    let mut c = 0;
    while c < 256 {
        let mut m = 0u64;
        let mut i = 0;
        while i < 8 {
            let mut row = 0u64;
            let mut j = 0;
            while j < 8 {
                let column = gf::mul_const_eval(c as u8, 1 << j);
                row |= (((column >> i) & 1) as u64) << j;
                j += 1;
            }
            m |= row << (8 * (7 - i));
            i += 1;
        }
        t[c] = m;
        c += 1;
    }
    t
}

#[derive(Clone, Copy)]
pub(crate) struct Avx2(__m256i);

impl Vector for Avx2 {
    const BYTES: usize = 32;
    type Table = (__m256i, __m256i);

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Avx2(unsafe { _mm256_loadu_si256(src.cast()) })
    }
    #[inline(always)]
    unsafe fn store(self, dst: *mut u8) {
        unsafe { _mm256_storeu_si256(dst.cast(), self.0) }
    }
    #[inline(always)]
    unsafe fn store_nt(self, dst: *mut u8) {
        unsafe { _mm256_stream_si256(dst.cast(), self.0) }
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx2(unsafe { _mm256_setzero_si256() })
    }
    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        Avx2(unsafe { _mm256_xor_si256(self.0, other.0) })
    }
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn mul2(self) -> Self {
        // Bytes with the top bit set get 0x1d after the shift: `vpblendvb` picks the shifted
        // byte or it xor 0x1d by that bit, three ops with the shift and the xor, where
        // compare-and-mask takes four (P+Q in cache is ALU-bound). In asm, because LLVM folds
        // a blend written with intrinsics back into compare-and-mask inside the unrolled loops:
        // on a Zen 3 machine P+Q of 4 x 4 KiB in cache went from 41.6 to 59.6 GB/s, 4 x 64 KiB
        // from 39.5 to 45.8, two-block recovery of 4 x 64 KiB from 28.6 to 37.0 (medians of
        // ten alternated runs of `uraid bench parity --only cache`).
        let doubled = _mm256_add_epi8(self.0, self.0);
        let reduced = _mm256_xor_si256(doubled, _mm256_set1_epi8(0x1d));
        let out: __m256i;
        // SAFETY: a register-only instruction of AVX2, which this function enables.
        unsafe {
            std::arch::asm!(
                "vpblendvb {out}, {doubled}, {reduced}, {mask}",
                out = lateout(ymm_reg) out,
                doubled = in(ymm_reg) doubled,
                reduced = in(ymm_reg) reduced,
                mask = in(ymm_reg) self.0,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        Avx2(out)
    }
    #[inline(always)]
    unsafe fn table(c: u8) -> Self::Table {
        let t = &NIBBLES[usize::from(c)];
        unsafe {
            let lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().cast()));
            let hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(t[16..].as_ptr().cast()));
            (lo, hi)
        }
    }
    #[inline(always)]
    unsafe fn mul(self, (lo, hi): Self::Table) -> Self {
        unsafe {
            let mask = _mm256_set1_epi8(0x0f);
            let l = _mm256_and_si256(self.0, mask);
            let h = _mm256_and_si256(_mm256_srli_epi16(self.0, 4), mask);
            Avx2(_mm256_xor_si256(_mm256_shuffle_epi8(lo, l), _mm256_shuffle_epi8(hi, h)))
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Avx512(__m512i);

/// `vpternlogd` immediate for `a ^ b ^ c`.
const XOR3: i32 = 0x96;

impl Vector for Avx512 {
    const BYTES: usize = 64;
    type Table = (__m512i, __m512i);

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Avx512(unsafe { _mm512_loadu_si512(src.cast()) })
    }
    #[inline(always)]
    unsafe fn store(self, dst: *mut u8) {
        unsafe { _mm512_storeu_si512(dst.cast(), self.0) }
    }
    #[inline(always)]
    unsafe fn store_nt(self, dst: *mut u8) {
        unsafe { _mm512_stream_si512(dst.cast(), self.0) }
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        Avx512(unsafe { _mm512_setzero_si512() })
    }
    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        Avx512(unsafe { _mm512_xor_si512(self.0, other.0) })
    }
    #[inline(always)]
    unsafe fn mul2(self) -> Self {
        unsafe {
            let carry = _mm512_movepi8_mask(self.0);
            let doubled = _mm512_add_epi8(self.0, self.0);
            Avx512(_mm512_xor_si512(doubled, _mm512_maskz_mov_epi8(carry, _mm512_set1_epi8(0x1d))))
        }
    }
    #[inline(always)]
    unsafe fn xor3(a: Self, b: Self, c: Self) -> Self {
        Avx512(unsafe { _mm512_ternarylogic_epi32::<XOR3>(a.0, b.0, c.0) })
    }
    #[inline(always)]
    unsafe fn table(c: u8) -> Self::Table {
        let t = &NIBBLES[usize::from(c)];
        unsafe {
            let lo = _mm512_broadcast_i32x4(_mm_loadu_si128(t.as_ptr().cast()));
            let hi = _mm512_broadcast_i32x4(_mm_loadu_si128(t[16..].as_ptr().cast()));
            (lo, hi)
        }
    }
    #[inline(always)]
    unsafe fn mul(self, (lo, hi): Self::Table) -> Self {
        unsafe {
            let mask = _mm512_set1_epi8(0x0f);
            let l = _mm512_and_si512(self.0, mask);
            let h = _mm512_and_si512(_mm512_srli_epi16(self.0, 4), mask);
            Avx512(_mm512_xor_si512(_mm512_shuffle_epi8(lo, l), _mm512_shuffle_epi8(hi, h)))
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Gfni(__m512i);

impl Vector for Gfni {
    const BYTES: usize = 64;
    type Table = __m512i;

    #[inline(always)]
    unsafe fn load(src: *const u8) -> Self {
        Gfni(unsafe { _mm512_loadu_si512(src.cast()) })
    }
    #[inline(always)]
    unsafe fn store(self, dst: *mut u8) {
        unsafe { _mm512_storeu_si512(dst.cast(), self.0) }
    }
    #[inline(always)]
    unsafe fn store_nt(self, dst: *mut u8) {
        unsafe { _mm512_stream_si512(dst.cast(), self.0) }
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        Gfni(unsafe { _mm512_setzero_si512() })
    }
    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        Gfni(unsafe { _mm512_xor_si512(self.0, other.0) })
    }
    #[inline(always)]
    unsafe fn mul2(self) -> Self {
        unsafe { self.mul(Self::table(2)) }
    }
    #[inline(always)]
    unsafe fn xor3(a: Self, b: Self, c: Self) -> Self {
        Gfni(unsafe { _mm512_ternarylogic_epi32::<XOR3>(a.0, b.0, c.0) })
    }
    /// `q*4 ^ hi*2 ^ lo`: the two multiplications are independent, so the chain through `q`
    /// is one affine and one ternary-logic op per two data blocks.
    #[inline(always)]
    unsafe fn horner2(q: Self, hi: Self, lo: Self) -> Self {
        unsafe { Self::xor3(q.mul(Self::table(4)), hi.mul(Self::table(2)), lo) }
    }
    #[inline(always)]
    unsafe fn table(c: u8) -> Self::Table {
        unsafe { _mm512_set1_epi64(AFFINE[usize::from(c)].cast_signed()) }
    }
    #[inline(always)]
    unsafe fn mul(self, matrix: Self::Table) -> Self {
        Gfni(unsafe { _mm512_gf2p8affine_epi64_epi8::<0>(self.0, matrix) })
    }
}
