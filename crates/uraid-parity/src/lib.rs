//! RAID parity kernels: XOR parity, the RAID6 P+Q syndrome over GF(2^8) with md's polynomial
//! 0x11d and generator 2, the partial P+Q update that RAID6 read-modify-write needs, and recovery
//! of every one- and two-block erasure pattern.
//!
//! Every kernel has a scalar reference ([`Backend::Scalar`]) and SIMD versions chosen at run time
//! from what the CPU has ([`backend`]). The free functions use the chosen backend; the methods of
//! [`Backend`] run a given one (tests and benchmarks compare them).
//!
//! Blocks are plain byte slices of equal length; no alignment is required (aligned buffers are
//! faster). Nothing here allocates a data buffer or does I/O.

mod backend;
pub mod gf;
mod recover;
mod scalar;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use backend::{BACKEND_ENV, Backend, backend};

/// The most data blocks a stripe can have: RAID6 of 256 members. The Q coefficients `2^i` are
/// distinct only for `i < 255`, which is why md stops there too.
pub const MAX_DATA_BLOCKS: usize = 254;

/// Calls on blocks shorter than this always write their outputs with ordinary stores; calls on
/// longer blocks bypass the caches when the outputs are not cached already and are
/// vector-aligned (see `x86/generic.rs`). Per block, not per call. A cache probe chooses; it
/// costs too much of an in-cache call to run every time (4 x 4 KiB lost 20-30% on a Zen 5
/// machine), so a thread probes once per 256 KiB of block length (one call in 16 up to 16
/// KiB, every call from 256 KiB) and keeps the verdict in between. On a Zen 3 machine (AVX2),
/// streamed 4 KiB stripes with non-temporal stores ran 25-55% faster than with ordinary ones.
/// Benchmarks that want ordinary stores stay below this.
pub const ORDINARY_STORES_BELOW: usize = 4 << 10;

/// How calls on blocks of at least [`ORDINARY_STORES_BELOW`] bytes write their outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stores {
    /// Non-temporal stores when the stripe's sources are not in a cache (the default).
    Probe,
    /// Always ordinary stores.
    Ordinary,
    /// Always non-temporal stores (where the outputs are vector-aligned).
    NonTemporal,
}

/// Names the kind of stores for the whole process (`probe`, `ordinary`, `nontemporal`), read
/// once, unless `set_stores` was called first: for measuring one against the other with the
/// same binary (`URAID_PARITY_STORES=ordinary uraid bench parity`).
pub const STORES_ENV: &str = "URAID_PARITY_STORES";

/// 0: not chosen yet; else 1 + the `Stores` discriminant.
static STORES: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Overrides the choice of stores for the whole process: for tests, which must reach both
/// paths whatever the caches hold, and for measuring one against the other. Results never
/// depend on it.
pub fn set_stores(s: Stores) {
    STORES.store(s as u8 + 1, std::sync::atomic::Ordering::Relaxed);
}

/// Names, for the whole process, whether the kernels take the figures tuned for AMD's family
/// 0x19 (`on`, `off`): stripes of more than 8 data blocks, and P+Q of 4 that missed the caches;
/// unset, the CPU decides (that family only). For measuring one against the other with the
/// same binary; results never depend on it.
pub const WIDE_TUNING_ENV: &str = "URAID_PARITY_WIDE_TUNING";

/// Overrides, for the whole process, whether the kernels take the figures tuned for AMD's
/// family 0x19 (for stripes of more than 8 data blocks a prefetch when they stream from memory,
/// P+Q's vectors per step by whether they missed the caches, for 4 data blocks too; by default
/// that CPU family only, or as
/// `URAID_PARITY_WIDE_TUNING` says): for tests, which must reach both paths on any CPU, and
/// for measuring. Results never depend on it.
pub fn set_wide_tuning(on: bool) {
    #[cfg(target_arch = "x86_64")]
    x86::set_wide_tuning(on);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = on;
}

/// Names, for the whole process, whether the kernels take the figures measured on AMD's
/// family 0x1a, Zen 5 (`on`, `off`); unset, the CPU decides (that family only). For measuring
/// one against the other with the same binary; results never depend on it.
pub const ZEN5_TUNING_ENV: &str = "URAID_PARITY_ZEN5_TUNING";

/// Overrides, for the whole process, whether the kernels take the figures measured on Zen 5
/// (P+Q of wide stripes with more vectors a step when they missed the caches, XOR of 4 and 8
/// sources in L2 and L3 source by source; by default that CPU family only, or as
/// `URAID_PARITY_ZEN5_TUNING` says): for tests, which must reach both paths on any CPU, and
/// for measuring. Results never depend on it.
pub fn set_zen5_tuning(on: bool) {
    #[cfg(target_arch = "x86_64")]
    x86::set_zen5_tuning(on);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = on;
}

#[must_use]
pub fn stores() -> Stores {
    match STORES.load(std::sync::atomic::Ordering::Relaxed) {
        0 => stores_from_env(),
        2 => Stores::Ordinary,
        3 => Stores::NonTemporal,
        _ => Stores::Probe,
    }
}

#[cold]
fn stores_from_env() -> Stores {
    let s = match std::env::var(STORES_ENV).as_deref() {
        Err(_) | Ok("probe") => Stores::Probe,
        Ok("ordinary") => Stores::Ordinary,
        Ok("nontemporal") => Stores::NonTemporal,
        // As with URAID_PARITY_BACKEND: never silently measure something else.
        Ok(other) => panic!("{STORES_ENV}={other}: not one of probe, ordinary, nontemporal"),
    };
    let _ = STORES.compare_exchange(
        0,
        s as u8 + 1,
        std::sync::atomic::Ordering::Relaxed,
        std::sync::atomic::Ordering::Relaxed,
    );
    stores()
}

/// One block of a RAID6 stripe handed to [`raid6_recover`].
#[derive(Debug)]
pub enum Block<'a> {
    /// A surviving block.
    Present(&'a [u8]),
    /// A slot that holds zeros by definition (DDF layouts' unused syndrome slots).
    Zero,
    /// A lost block: its buffer receives the rebuilt contents (its previous contents are ignored).
    Lost(&'a mut [u8]),
}

impl Block<'_> {
    #[must_use]
    pub fn is_lost(&self) -> bool {
        matches!(self, Block::Lost(_))
    }

    /// The contents of a surviving block.
    #[must_use]
    pub fn present(&self) -> Option<&[u8]> {
        match self {
            Block::Present(b) => Some(b),
            _ => None,
        }
    }

    /// The contents of a surviving or (already) rebuilt block; `None` for a zero block.
    #[must_use]
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Block::Present(b) => Some(b),
            Block::Lost(b) => Some(b),
            Block::Zero => None,
        }
    }

    /// The buffer of a lost block.
    pub fn lost_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Block::Lost(b) => Some(b),
            _ => None,
        }
    }

    /// Length in bytes; 0 for a zero block, which takes the stripe's length.
    #[must_use]
    pub fn len(&self) -> usize {
        self.bytes().map_or(0, <[u8]>::len)
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `dst = srcs[0] ^ srcs[1] ^ ...` with the [`backend`].
pub fn xor_gen(dst: &mut [u8], srcs: &[&[u8]]) {
    backend().xor_gen(dst, srcs);
}

/// `dst ^= srcs[0] ^ srcs[1] ^ ...` with the [`backend`].
pub fn xor_acc(dst: &mut [u8], srcs: &[&[u8]]) {
    backend().xor_acc(dst, srcs);
}

/// `dst = srcs[0] ^ srcs[1] ^ ...`, for an output the caller reads again at once. See
/// [`Backend::xor_gen_cached`].
pub fn xor_gen_cached(dst: &mut [u8], srcs: &[&[u8]]) {
    backend().xor_gen_cached(dst, srcs);
}

/// `dst ^= srcs[0] ^ srcs[1] ^ ...`, for an output the caller reads again at once.
pub fn xor_acc_cached(dst: &mut [u8], srcs: &[&[u8]]) {
    backend().xor_acc_cached(dst, srcs);
}

/// RAID6 P and Q of `data` in syndrome order (`None` = zero block). See [`Backend::gen_syndrome`].
pub fn gen_syndrome(p: &mut [u8], q: &mut [u8], data: &[Option<&[u8]>]) {
    backend().gen_syndrome(p, q, data);
}

/// P and Q as [`gen_syndrome`], for outputs the caller reads again at once.
pub fn gen_syndrome_cached(p: &mut [u8], q: &mut [u8], data: &[Option<&[u8]>]) {
    backend().gen_syndrome_cached(p, q, data);
}

/// RAID6 read-modify-write of the block in syndrome `slot`. See [`Backend::pq_update`].
pub fn pq_update(p: &mut [u8], q: &mut [u8], slot: usize, old: &[u8], new: &[u8]) {
    backend().pq_update(p, q, slot, old, new);
}

/// RAID6 read-modify-write of several blocks `(slot, old, new)` in one pass.
pub fn pq_update_multi(p: &mut [u8], q: &mut [u8], updates: &[(usize, &[u8], &[u8])]) {
    backend().pq_update_multi(p, q, updates);
}

/// `dst = c * src` in GF(2^8).
pub fn mul_const(dst: &mut [u8], src: &[u8], c: u8) {
    backend().mul_const(dst, src, c);
}

/// `dst ^= c * src` in GF(2^8).
pub fn mul_const_acc(dst: &mut [u8], src: &[u8], c: u8) {
    backend().mul_const_acc(dst, src, c);
}

/// Rebuilds the lost blocks of a RAID6 stripe (one or two, any of data, P, Q).
/// See [`Backend::raid6_recover`].
pub fn raid6_recover(data: &mut [Block<'_>], p: &mut Block<'_>, q: &mut Block<'_>) {
    backend().raid6_recover(data, p, q);
}
