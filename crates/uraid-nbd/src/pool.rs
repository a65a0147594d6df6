//! One connection's payload buffers, recycled: a read's reply buffer and a write's payload
//! buffer go back here once sent or written, and the next request of the connection reuses
//! them. A fresh `vec![0; len]` costs as much as the copy it is for (zeroing, or page faults
//! when the allocator maps a megabyte afresh): `uraid bench serve` saw memset and page
//! clearing take about 5% of the CPU on 1 MiB requests.
//!
//! A reused buffer holds old bytes: it is only ever handed to something that overwrites all of
//! it (a backend read, a payload read from the socket), and the reply of a failed read carries
//! no data. The pool keeps at most `BYTES_MAX` (what clients keep in flight at common depths),
//! so an idle connection holds little.

use std::sync::{Mutex, PoisonError};

/// At most this many bytes wait in one connection's pool (16 x 1 MiB in flight, with room).
const BYTES_MAX: usize = 32 << 20;

#[derive(Default)]
pub(crate) struct BufferPool {
    /// The free buffers and the sum of their capacities.
    free: Mutex<(Vec<Vec<u8>>, usize)>,
}

impl BufferPool {
    /// A buffer of exactly `len` bytes; its contents are unspecified (old data or zeros).
    pub fn take(&self, len: usize) -> Vec<u8> {
        let reused = {
            let mut f = self.free.lock().unwrap_or_else(PoisonError::into_inner);
            let found = f.0.pop();
            if let Some(b) = &found {
                f.1 -= b.capacity();
            }
            found
        };
        let Some(mut buf) = reused else { return vec![0; len] };
        // Shrinking keeps the allocation; growing zeroes only the new part.
        buf.resize(len, 0);
        assert_eq!(buf.len(), len);
        buf
    }

    /// Returns every buffer of `bufs` (a request's segments) for reuse.
    pub fn give_all(&self, bufs: Vec<Vec<u8>>) {
        for b in bufs {
            self.give(b);
        }
    }

    /// Returns `buf` for reuse, or frees it when the pool is full.
    pub fn give(&self, mut buf: Vec<u8>) {
        if buf.capacity() == 0 {
            return;
        }
        // Full length, so that the next `take` of the same size does not zero anything.
        let capacity = buf.capacity();
        buf.resize(capacity, 0);
        let mut f = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        if f.1 + capacity <= BYTES_MAX {
            f.1 += capacity;
            f.0.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_with_the_asked_length_and_the_pool_stays_bounded() {
        let pool = BufferPool::default();
        let a = pool.take(4096);
        assert_eq!(a.len(), 4096);
        let ptr = a.as_ptr();
        pool.give(a);
        let b = pool.take(512);
        assert_eq!((b.len(), b.as_ptr()), (512, ptr), "the same allocation, shortened");
        pool.give(b);
        let c = pool.take(8192);
        assert_eq!(c.len(), 8192, "grown when asked for more");
        for _ in 0..(BYTES_MAX >> 20) + 4 {
            pool.give(vec![0; 1 << 20]);
        }
        let held = pool.free.lock().unwrap().1;
        assert!(held <= BYTES_MAX, "{held} bytes held");
        assert!(held >= BYTES_MAX - (1 << 20), "full up to the bound: {held}");
    }
}
