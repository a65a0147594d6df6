//! Runtime CPU dispatch: which kernel set runs, chosen once from what the CPU has.

use crate::scalar::{self, Delta};
use crate::{Block, gf, recover};
use smallvec::SmallVec;
use std::sync::OnceLock;

/// Calls the kernel of the chosen backend; SIMD kernels only after `check()` proved the CPU has
/// their features, which is what makes the `unsafe` sound.
macro_rules! dispatch {
    ($be:expr, $f:ident($($arg:expr),*)) => {
        dispatch!($be, $f($($arg),*), scalar: scalar::$f($($arg,)* 0))
    };
    ($be:expr, $f:ident($($arg:expr),*), scalar: $scalar:expr) => {
        match $be {
            Backend::Scalar => $scalar,
            #[cfg(target_arch = "x86_64")]
            // SAFETY: check() asserted the backend's CPU features.
            Backend::Avx2 => unsafe { crate::x86::avx2::$f($($arg),*) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Backend::Avx512 => unsafe { crate::x86::avx512::$f($($arg),*) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Backend::Gfni => unsafe { crate::x86::gfni::$f($($arg),*) },
            #[cfg(not(target_arch = "x86_64"))]
            _ => unreachable!("only scalar is available off x86_64"),
        }
    };
}

/// A set of parity kernels. `Scalar` is always there; the others need the CPU features named by
/// [`Backend::name`] and are refused (with a panic, never undefined behaviour) where absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// Byte at a time; the reference every other backend is tested against.
    Scalar,
    /// 256-bit AVX2: XOR and nibble-table (`vpshufb`) GF multiplication.
    Avx2,
    /// 512-bit AVX-512BW: as `Avx2`, twice as wide.
    Avx512,
    /// AVX-512 with GFNI: one `vgf2p8affineqb` per GF multiplication, with 0x11d matrices.
    Gfni,
}

/// Environment variable that forces a backend by name (for tests and benchmarks).
pub const BACKEND_ENV: &str = "URAID_PARITY_BACKEND";

impl Backend {
    pub const ALL: [Backend; 4] = [Backend::Scalar, Backend::Avx2, Backend::Avx512, Backend::Gfni];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Backend::Scalar => "scalar",
            Backend::Avx2 => "avx2",
            Backend::Avx512 => "avx512",
            Backend::Gfni => "gfni",
        }
    }

    #[must_use]
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name)
    }

    /// Whether this CPU can run the backend.
    #[must_use]
    pub fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Backend::Scalar => true,
                Backend::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
                Backend::Avx512 => std::arch::is_x86_feature_detected!("avx512bw"),
                Backend::Gfni => {
                    std::arch::is_x86_feature_detected!("avx512bw")
                        && std::arch::is_x86_feature_detected!("gfni")
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Backend::Scalar
        }
    }

    /// The fastest backend this CPU can run (GFNI, then AVX-512, AVX2, scalar).
    #[must_use]
    pub fn detect() -> Backend {
        Backend::ALL.into_iter().rev().find(|b| b.available()).unwrap_or(Backend::Scalar)
    }

    fn check(self) {
        assert!(self.available(), "parity backend {} is not available on this CPU", self.name());
    }

    /// `dst = srcs[0] ^ srcs[1] ^ ...`. Every source has `dst`'s length.
    pub fn xor_gen(self, dst: &mut [u8], srcs: &[&[u8]]) {
        check_lens(dst.len(), srcs.iter().map(|s| s.len()));
        self.xor(dst, srcs, false, true);
    }

    /// `dst ^= srcs[0] ^ srcs[1] ^ ...` (RAID5 read-modify-write: `P ^= old ^ new`).
    pub fn xor_acc(self, dst: &mut [u8], srcs: &[&[u8]]) {
        check_lens(dst.len(), srcs.iter().map(|s| s.len()));
        self.xor(dst, srcs, true, true);
    }

    /// As [`Backend::xor_gen`], for an output the caller reads again at once: ordinary
    /// stores, whatever the cache probe says. Non-temporal stores leave the output in memory
    /// only, and reading it back there costs more than they saved (see [`Backend::xor`]).
    pub fn xor_gen_cached(self, dst: &mut [u8], srcs: &[&[u8]]) {
        check_lens(dst.len(), srcs.iter().map(|s| s.len()));
        self.xor(dst, srcs, false, false);
    }

    /// As [`Backend::xor_acc`], for an output the caller reads again at once (see
    /// [`Backend::xor_gen_cached`]).
    pub fn xor_acc_cached(self, dst: &mut [u8], srcs: &[&[u8]]) {
        check_lens(dst.len(), srcs.iter().map(|s| s.len()));
        self.xor(dst, srcs, true, false);
    }

    /// RAID6 P and Q of the data blocks in syndrome order: `P = Σ d_i`, `Q = Σ 2^i d_i`.
    /// `None` stands for an all-zero block (DDF layouts leave such slots).
    pub fn gen_syndrome(self, p: &mut [u8], q: &mut [u8], data: &[Option<&[u8]>]) {
        check_lens(p.len(), std::iter::once(q.len()).chain(data.iter().flatten().map(|d| d.len())));
        self.syndrome(Some(p), q, data, true);
    }

    /// As [`Backend::gen_syndrome`], for outputs the caller reads again at once (see
    /// [`Backend::xor_gen_cached`]).
    pub fn gen_syndrome_cached(self, p: &mut [u8], q: &mut [u8], data: &[Option<&[u8]>]) {
        check_lens(p.len(), std::iter::once(q.len()).chain(data.iter().flatten().map(|d| d.len())));
        self.syndrome(Some(p), q, data, false);
    }

    /// RAID6 read-modify-write of one data block: updates P and Q from the block's old and new
    /// contents alone, without reading the other data blocks.
    pub fn pq_update(self, p: &mut [u8], q: &mut [u8], slot: usize, old: &[u8], new: &[u8]) {
        self.pq_update_multi(p, q, &[(slot, old, new)]);
    }

    /// As [`Backend::pq_update`] for several changed blocks `(slot, old, new)` in one pass.
    pub fn pq_update_multi(self, p: &mut [u8], q: &mut [u8], updates: &[(usize, &[u8], &[u8])]) {
        let lens = updates.iter().flat_map(|u| [u.1.len(), u.2.len()]);
        check_lens(p.len(), std::iter::once(q.len()).chain(lens));
        assert!(updates.len() <= crate::MAX_DATA_BLOCKS, "at most one update per data block");
        let deltas: SmallVec<[Delta<'_>; 8]> = updates
            .iter()
            .map(|&(slot, old, new)| Delta { coef: gf::exp2(slot), old, new })
            .collect();
        self.check();
        dispatch!(self, pq_update(p, q, &deltas));
    }

    /// `dst = c * src` in GF(2^8).
    pub fn mul_const(self, dst: &mut [u8], src: &[u8], c: u8) {
        check_lens(dst.len(), [src.len()]);
        self.check();
        dispatch!(self, mul_const(dst, src, c, false));
    }

    /// `dst ^= c * src` in GF(2^8).
    pub fn mul_const_acc(self, dst: &mut [u8], src: &[u8], c: u8) {
        check_lens(dst.len(), [src.len()]);
        self.check();
        dispatch!(self, mul_const(dst, src, c, true));
    }

    /// Rebuilds the `Lost` blocks among `data` (in syndrome order), `p` and `q` from the others,
    /// for every pattern of one or two losses. Panics on more than two: that is beyond RAID6.
    pub fn raid6_recover(self, data: &mut [Block<'_>], p: &mut Block<'_>, q: &mut Block<'_>) {
        recover::raid6_recover(self, data, p, q);
    }

    /// `stream`: the output is not read again soon (it goes to a device or another core), so
    /// large outputs may bypass the caches (non-temporal stores; see `x86/generic.rs`). The
    /// public entry points say so but the `_cached` ones; recovery's intermediate results, read
    /// back at once, do not.
    pub(crate) fn xor(self, dst: &mut [u8], srcs: &[&[u8]], acc: bool, stream: bool) {
        self.check();
        dispatch!(
            self,
            xor_gen(dst, srcs, acc, stream),
            scalar: scalar::xor_gen(dst, srcs, acc, 0)
        );
    }

    /// As [`Backend::xor`] for the P+Q syndrome.
    pub(crate) fn syndrome(
        self,
        p: Option<&mut [u8]>,
        q: &mut [u8],
        data: &[Option<&[u8]>],
        stream: bool,
    ) {
        self.check();
        dispatch!(self, syndrome(p, q, data, stream), scalar: scalar::syndrome(p, q, data, 0));
    }

    /// Two lost data blocks `dx`, `dy` from the surviving `data` (the lost slots `None`), `p`
    /// and `q`, with `a = g^y / (g^x ^ g^y)` and `b = 1 / (g^x ^ g^y)`. One pass where the backend
    /// has SIMD.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn recov_2data(
        self,
        dx: &mut [u8],
        dy: &mut [u8],
        data: &[Option<&[u8]>],
        p: &[u8],
        q: &[u8],
        a: u8,
        b: u8,
        stream: bool,
    ) {
        self.check();
        let top = data.iter().rposition(Option::is_some);
        dispatch!(
            self,
            recov_2data_fused((dx, dy), data, top, (p, q), (a, b), stream),
            scalar: {
                scalar::syndrome(Some(&mut *dx), dy, data, 0);
                scalar::recov_2data(dx, dy, p, q, a, b, 0);
            }
        );
    }

    pub(crate) fn recov_data_q(self, dx: &mut [u8], p: &mut [u8], q: &[u8], c: u8) {
        self.check();
        dispatch!(self, recov_data_q(dx, p, q, c));
    }
}

fn check_lens(len: usize, others: impl IntoIterator<Item = usize>) {
    for other in others {
        assert_eq!(other, len, "every block of a parity operation has the same length");
    }
}

/// The backend the free functions use: `URAID_PARITY_BACKEND` if set (it must name an available
/// backend, else this panics rather than silently measure something else), else the fastest.
pub fn backend() -> Backend {
    static CHOSEN: OnceLock<Backend> = OnceLock::new();
    *CHOSEN.get_or_init(|| match std::env::var(BACKEND_ENV) {
        Ok(name) => {
            let b = Backend::from_name(&name).unwrap_or_else(|| {
                panic!("{BACKEND_ENV}={name}: not one of scalar, avx2, avx512, gfni")
            });
            b.check();
            b
        }
        Err(_) => Backend::detect(),
    })
}
