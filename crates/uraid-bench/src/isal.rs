//! Intel ISA-L, loaded at run time (Debian's libisal2) so that uraid builds and tests without it:
//! the baseline our parity kernels are measured against. The safe wrappers check what ISA-L
//! assumes (equal lengths, lengths a multiple of 64, at least 2 sources) before calling it.

// Counts passed to ISA-L's `int` parameters are at most a few hundred (block lists) and lengths
// are checked to fit by `check`.
#![allow(clippy::cast_possible_wrap)]

use anyhow::{Context, Result, ensure};
use libloading::Library;
use std::ffi::c_void;

/// Where Debian puts it; `URAID_ISAL` overrides.
const DEFAULT_PATH: &str = "libisal.so.2";

type RaidFn = unsafe extern "C" fn(i32, i32, *mut *mut c_void) -> i32;
type InitTablesFn = unsafe extern "C" fn(i32, i32, *const u8, *mut u8);
type EncodeFn = unsafe extern "C" fn(i32, i32, i32, *const u8, *const *const u8, *const *mut u8);
type UpdateFn = unsafe extern "C" fn(i32, i32, i32, i32, *const u8, *const u8, *const *mut u8);

pub struct Isal {
    xor_gen: RaidFn,
    pq_gen: RaidFn,
    ec_init_tables: InitTablesFn,
    ec_encode_data: EncodeFn,
    ec_encode_data_update: UpdateFn,
    /// Keeps the function pointers above valid.
    _lib: Library,
}

impl Isal {
    pub fn load() -> Result<Isal> {
        let path = std::env::var("URAID_ISAL").unwrap_or_else(|_| DEFAULT_PATH.to_owned());
        // SAFETY: loading ISA-L runs no initialisers with preconditions; the symbols are looked up
        // by their documented C names and given their C signatures from isa-l/raid.h and
        // erasure_code.h.
        unsafe {
            let lib = Library::new(&path)
                .with_context(|| format!("loading ISA-L from {path} (apt install libisal2)"))?;
            Ok(Isal {
                xor_gen: *lib.get::<RaidFn>(b"xor_gen\0")?,
                pq_gen: *lib.get::<RaidFn>(b"pq_gen\0")?,
                ec_init_tables: *lib.get::<InitTablesFn>(b"ec_init_tables\0")?,
                ec_encode_data: *lib.get::<EncodeFn>(b"ec_encode_data\0")?,
                ec_encode_data_update: *lib.get::<UpdateFn>(b"ec_encode_data_update\0")?,
                _lib: lib,
            })
        }
    }

    /// `dst = XOR of srcs`.
    pub fn xor_gen(&self, dst: &mut [u8], srcs: &[&[u8]]) -> Result<()> {
        let len = check(dst.len(), srcs.iter().map(|s| s.len()), 2)?;
        let mut array = Pointers::new(srcs);
        array.push(dst.as_mut_ptr().cast());
        // SAFETY: every pointer is valid for `len` bytes; ISA-L only reads the sources.
        let rc = unsafe { (self.xor_gen)(array.count(), len, array.as_mut_ptr()) };
        ensure!(rc == 0, "ISA-L xor_gen returned {rc}");
        Ok(())
    }

    /// RAID6 P and Q of `data` (Q's coefficient for `data[i]` is 2^i, as in uraid).
    pub fn pq_gen(&self, p: &mut [u8], q: &mut [u8], data: &[&[u8]]) -> Result<()> {
        let len = check(p.len(), data.iter().map(|s| s.len()).chain([q.len()]), 2)?;
        let mut array = Pointers::new(data);
        array.push(p.as_mut_ptr().cast());
        array.push(q.as_mut_ptr().cast());
        // SAFETY: as in xor_gen; P and Q are the last two pointers, as ISA-L requires.
        let rc = unsafe { (self.pq_gen)(array.count(), len, array.as_mut_ptr()) };
        ensure!(rc == 0, "ISA-L pq_gen returned {rc}");
        Ok(())
    }

    /// Expands a `rows x k` coefficient matrix into ISA-L's multiplication tables.
    #[must_use]
    pub fn init_tables(&self, k: usize, rows: usize, coefficients: &[u8]) -> Vec<u8> {
        assert_eq!(coefficients.len(), k * rows, "a rows x k matrix");
        let mut tables = vec![0u8; 32 * k * rows];
        // SAFETY: ISA-L reads k*rows coefficients and writes 32*k*rows table bytes.
        unsafe {
            (self.ec_init_tables)(
                k as i32,
                rows as i32,
                coefficients.as_ptr(),
                tables.as_mut_ptr(),
            );
        }
        tables
    }

    /// `coding[r] = Σ_j matrix[r][j] * data[j]` with tables from [`Isal::init_tables`].
    pub fn encode(&self, tables: &[u8], data: &[&[u8]], coding: &mut [&mut [u8]]) -> Result<()> {
        let len = check(coding[0].len(), data.iter().map(|s| s.len()), 1)?;
        check(coding[0].len(), coding.iter().map(|s| s.len()), 1)?;
        let (k, rows) = (data.len(), coding.len());
        ensure!(tables.len() == 32 * k * rows, "tables for {rows} x {k}");
        let srcs: Vec<*const u8> = data.iter().map(|s| s.as_ptr()).collect();
        let dsts: Vec<*mut u8> = coding.iter_mut().map(|s| s.as_mut_ptr()).collect();
        // SAFETY: k source and `rows` destination pointers, each valid for `len` bytes.
        unsafe {
            (self.ec_encode_data)(
                len,
                k as i32,
                rows as i32,
                tables.as_ptr(),
                srcs.as_ptr(),
                dsts.as_ptr(),
            );
        }
        Ok(())
    }

    /// `coding[r] ^= matrix[r][vec_i] * data`: ISA-L's incremental update (tables for `k`
    /// sources, of which `data` is number `vec_i`).
    pub fn encode_update(
        &self,
        k: usize,
        vec_i: usize,
        tables: &[u8],
        data: &[u8],
        coding: &mut [&mut [u8]],
    ) -> Result<()> {
        let len = check(data.len(), coding.iter().map(|s| s.len()), 1)?;
        let rows = coding.len();
        ensure!(tables.len() == 32 * k * rows && vec_i < k, "tables for {rows} x {k}");
        let dsts: Vec<*mut u8> = coding.iter_mut().map(|s| s.as_mut_ptr()).collect();
        // SAFETY: one source and `rows` destinations, each valid for `len` bytes.
        unsafe {
            (self.ec_encode_data_update)(
                len,
                k as i32,
                rows as i32,
                vec_i as i32,
                tables.as_ptr(),
                data.as_ptr(),
                dsts.as_ptr(),
            );
        }
        Ok(())
    }
}

/// ISA-L's pointer array, on the stack: a heap allocation per call would be measured too.
struct Pointers {
    ptrs: [*mut c_void; 260],
    count: usize,
}

impl Pointers {
    fn new(srcs: &[&[u8]]) -> Pointers {
        let mut p = Pointers { ptrs: [std::ptr::null_mut(); 260], count: 0 };
        for s in srcs {
            p.push(s.as_ptr() as *mut c_void);
        }
        p
    }
    fn push(&mut self, ptr: *mut c_void) {
        self.ptrs[self.count] = ptr;
        self.count += 1;
    }
    fn count(&self) -> i32 {
        self.count as i32
    }
    fn as_mut_ptr(&mut self) -> *mut *mut c_void {
        self.ptrs.as_mut_ptr()
    }
}

fn check(len: usize, others: impl Iterator<Item = usize>, min_srcs: usize) -> Result<i32> {
    let mut count = 0;
    for other in others {
        ensure!(other == len, "ISA-L needs equal lengths ({other} != {len})");
        count += 1;
    }
    ensure!(count >= min_srcs, "ISA-L needs at least {min_srcs} sources");
    ensure!(
        len.is_multiple_of(64) && len > 0,
        "ISA-L needs a length that is a multiple of 64, not {len}"
    );
    i32::try_from(len).context("length beyond ISA-L's int")
}
