//! GF(2^8) with md's RAID6 polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d) and generator 2.
//!
//! Tables are built at compile time; everything here is the scalar reference that the SIMD
//! kernels are tested against.

/// The field polynomial, as md and ISA-L use it for RAID6.
pub const POLY: u16 = 0x11d;

/// `EXP[i] = 2^i`, doubled in length so that `EXP[log a + log b]` needs no reduction.
static EXP: [u8; 512] = build_exp();
/// `LOG[a] = i` such that `2^i = a`; `LOG[0]` is unused.
static LOG: [u8; 256] = build_log();

const fn build_exp() -> [u8; 512] {
    let mut exp = [0u8; 512];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 512 {
        exp[i] = x as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    exp
}

const fn build_log() -> [u8; 256] {
    let exp = build_exp();
    let mut log = [0u8; 256];
    let mut i = 0;
    while i < 255 {
        log[exp[i] as usize] = i as u8;
        i += 1;
    }
    log
}

/// `a * b` in the field.
#[inline]
#[must_use]
pub fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        return 0;
    }
    EXP[usize::from(LOG[usize::from(a)]) + usize::from(LOG[usize::from(b)])]
}

/// The multiplicative inverse of a non-zero element.
#[inline]
#[must_use]
pub fn inv(a: u8) -> u8 {
    assert_ne!(a, 0, "0 has no inverse in GF(2^8)");
    EXP[255 - usize::from(LOG[usize::from(a)])]
}

/// `a / b` for non-zero `b`.
#[inline]
#[must_use]
pub fn div(a: u8, b: u8) -> u8 {
    mul(a, inv(b))
}

/// `2^i`: the Q coefficient of the data block in syndrome slot `i`.
#[inline]
#[must_use]
pub fn exp2(i: usize) -> u8 {
    EXP[i % 255]
}

/// `i` such that `2^i = a`, for non-zero `a`.
#[inline]
#[must_use]
pub fn log2(a: u8) -> u8 {
    assert_ne!(a, 0, "0 has no logarithm");
    LOG[usize::from(a)]
}

/// Multiplication by 2 without tables: the step of the Q syndrome's Horner evaluation.
#[inline]
#[must_use]
pub const fn mul2(a: u8) -> u8 {
    let shifted = (a as u16) << 1;
    (if shifted & 0x100 != 0 { shifted ^ POLY } else { shifted }) as u8
}

/// `a * b` by shift-and-add, usable in constant evaluation (the SIMD tables are built with it).
#[must_use]
pub const fn mul_const_eval(mut a: u8, mut b: u8) -> u8 {
    let mut r = 0;
    while b != 0 {
        if b & 1 != 0 {
            r ^= a;
        }
        a = mul2(a);
        b >>= 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_agree_with_shift_and_add() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), mul_const_eval(a, b), "{a} * {b}");
            }
        }
    }

    #[test]
    fn two_generates_the_whole_group() {
        let mut seen = [false; 256];
        for i in 0..255 {
            let x = exp2(i);
            assert!(!seen[usize::from(x)], "2^{i} repeats");
            seen[usize::from(x)] = true;
            assert_eq!(usize::from(log2(x)), i);
        }
        assert!(!seen[0]);
    }

    #[test]
    fn inverse_and_division() {
        for a in 1..=255u8 {
            assert_eq!(mul(a, inv(a)), 1);
            for b in 1..=255u8 {
                assert_eq!(mul(div(a, b), b), a);
            }
        }
    }
}
