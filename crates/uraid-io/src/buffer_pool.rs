//! Memory aligned for O_DIRECT, and a small pool of it.
//!
//! O_DIRECT needs the buffer address, the file offset and the length to be multiples of the
//! device's logical block size (512 or 4096). The engine's buffers are ordinary `Vec<u8>` and
//! `Box<[u8]>` allocations with no such alignment, so a file member bounces an I/O whose buffer
//! is misaligned through an `AlignedBuf`. Buffers are kept after use (up to `retain_count`) so
//! that steady-state I/O allocates nothing.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;

/// Alignment of every `AlignedBuf`: the largest logical block size in use (4Kn drives) and the
/// page size, so any O_DIRECT device accepts it.
pub const BUF_ALIGN_BYTES: usize = 4096;

/// A zeroed heap allocation aligned to `BUF_ALIGN_BYTES`, a whole number of 4 KiB long.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like Box<[u8]>), so moving it to another
// thread moves sole access with it.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of at least `len` bytes (rounded up to 4 KiB; at least 4 KiB).
    #[must_use]
    pub fn new(len: usize) -> AlignedBuf {
        let len = len.max(1).next_multiple_of(BUF_ALIGN_BYTES);
        let layout = Self::layout(len);
        // SAFETY: the layout has a non-zero size (len >= 4096).
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else { std::alloc::handle_alloc_error(layout) };
        AlignedBuf { ptr, len }
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, BUF_ALIGN_BYTES).expect("a valid aligned layout")
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is a live allocation of len initialised (zeroed) bytes owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated in `new` with exactly this layout and is freed only here.
        unsafe { dealloc(self.ptr.as_ptr(), Self::layout(self.len)) };
    }
}

/// Free aligned buffers, reused by size.
pub struct BufferPool {
    free: Vec<AlignedBuf>,
    retain_count: usize,
    allocated_count: u64,
}

impl BufferPool {
    #[must_use]
    pub fn new(retain_count: usize) -> BufferPool {
        BufferPool { free: Vec::new(), retain_count, allocated_count: 0 }
    }

    /// A buffer of at least `len` bytes: the smallest free one that fits, else a new one.
    pub fn get(&mut self, len: usize) -> AlignedBuf {
        let fit = (0..self.free.len())
            .filter(|&i| self.free[i].len() >= len)
            .min_by_key(|&i| self.free[i].len());
        if let Some(i) = fit {
            return self.free.swap_remove(i);
        }
        self.allocated_count += 1;
        AlignedBuf::new(len)
    }

    /// Returns a buffer for reuse (dropped if the pool already holds `retain_count`).
    pub fn put(&mut self, buf: AlignedBuf) {
        if self.free.len() < self.retain_count {
            self.free.push(buf);
        }
    }

    /// Buffers allocated so far: flat in steady state.
    #[must_use]
    pub fn allocated_count(&self) -> u64 {
        self.allocated_count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_reused() {
        let mut pool = BufferPool::new(2);
        let mut a = pool.get(5000);
        assert_eq!(a.len(), 8192);
        assert_eq!(a.as_ptr() as usize % BUF_ALIGN_BYTES, 0);
        assert!(a.iter().all(|&b| b == 0));
        a[0] = 7;
        let addr = a.as_ptr();
        pool.put(a);
        let b = pool.get(4096);
        assert_eq!(b.as_ptr(), addr, "the free buffer that fits is reused");
        assert_eq!(pool.allocated_count(), 1);
        let c = pool.get(1 << 20);
        assert_eq!((c.len(), pool.allocated_count()), (1 << 20, 2));
    }
}
