//! Page-aligned block buffers for stripe heads.
//!
//! Member I/O on files and block devices goes out with O_DIRECT, which wants memory aligned to
//! the device's logical block (4 KiB covers every device we meet). A `Box<[u8]>` has alignment 1,
//! which forced the runtime to bounce every head I/O through a copy; a `BlockBuf` is a vector of
//! 4 KiB-aligned pages seen as bytes (bytemuck does the cast safely), so head blocks go to the
//! device as they are and this crate stays free of `unsafe`.

use bytemuck::{Pod, Zeroable};
use std::ops::{Deref, DerefMut};

/// The alignment (and granule) of every `BlockBuf`.
pub const BLOCK_ALIGN: usize = 4096;

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C, align(4096))]
struct Page([u8; BLOCK_ALIGN]);

/// A `BLOCK_ALIGN`-aligned byte buffer, zeros when made (`zeroed`).
#[derive(Default)]
pub struct BlockBuf {
    /// At least `len` bytes; more after `resize_any` shrank it.
    pages: Vec<Page>,
    len: usize,
}

impl BlockBuf {
    /// `len` zero bytes, aligned to `BLOCK_ALIGN`.
    #[must_use]
    pub fn zeroed(len: usize) -> BlockBuf {
        BlockBuf { pages: vec![Page::zeroed(); len.div_ceil(BLOCK_ALIGN)], len }
    }

    /// Makes this buffer `len` bytes of any contents (what it held, then zeros), in the pages
    /// it has where they are enough: for a caller that writes every byte, as a log write's
    /// encoder does, zeroing them first is wasted work. Pages past `len` are kept (see
    /// `pages`), so a buffer that grows back to a size it had zeroes nothing.
    pub fn resize_any(&mut self, len: usize) {
        let pages = len.div_ceil(BLOCK_ALIGN);
        if pages > self.pages.len() {
            self.pages.resize(pages, Page::zeroed());
        }
        self.len = len;
    }

    /// The pages this buffer holds, `len` or more since `resize_any`.
    #[must_use]
    pub fn pages(&self) -> usize {
        self.pages.len()
    }
}

impl Deref for BlockBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.pages)[..self.len]
    }
}

impl DerefMut for BlockBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.pages)[..self.len]
    }
}

impl std::fmt::Debug for BlockBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockBuf").field("len", &self.len()).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resized_buffers_keep_their_bytes_and_zero_new_pages() {
        let mut b = BlockBuf::zeroed(4096);
        b.fill(0xa5);
        b.resize_any(512);
        assert_eq!(b.len(), 512);
        assert!(b.iter().all(|x| *x == 0xa5));
        assert_eq!(b.pages(), 1);
        b.resize_any(12288);
        assert_eq!(b.len(), 12288);
        assert!(b[..4096].iter().all(|x| *x == 0xa5), "the page it kept");
        assert!(b[4096..].iter().all(|x| *x == 0), "new pages are zeros");
        assert_eq!(b.as_ptr() as usize % BLOCK_ALIGN, 0);
        b.fill(0x3c);
        b.resize_any(4608);
        assert_eq!((b.len(), b.pages()), (4608, 3), "pages past len are kept");
        b.resize_any(12288);
        assert!(b.iter().all(|x| *x == 0x3c), "growing back zeroes nothing");
    }

    #[test]
    fn aligned_zeroed_and_writable() {
        for len in [0, 512, 4096, 65536, 1 << 20] {
            let mut b = BlockBuf::zeroed(len);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0));
            if len > 0 {
                assert_eq!(b.as_ptr() as usize % BLOCK_ALIGN, 0);
                b[len - 1] = 7;
                assert_eq!(b[len - 1], 7);
            }
        }
        assert!(BlockBuf::default().is_empty());
    }
}
