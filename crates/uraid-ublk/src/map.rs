//! Memory mappings: a queue's request descriptors (shared with the driver, read-only) and
//! its tag buffers (anonymous, page-aligned, touched only as requests use them).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
}

impl Mapping {
    /// `len` bytes of `file` at `offset`, read-only and shared: the driver rewrites a
    /// descriptor before each fetch completes.
    pub fn device(file: &File, len: usize, offset: i64) -> io::Result<Mapping> {
        let flags = libc::MAP_SHARED | libc::MAP_POPULATE;
        Self::map(len, libc::PROT_READ, flags, file.as_raw_fd(), offset, false)
    }

    /// `len` zeroed bytes of our own.
    pub fn anonymous(len: usize) -> io::Result<Mapping> {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        Self::map(len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0, true)
    }

    fn map(
        len: usize,
        prot: i32,
        flags: i32,
        fd: i32,
        offset: i64,
        writable: bool,
    ) -> io::Result<Mapping> {
        assert!(len > 0, "empty mapping");
        // SAFETY: a fresh mapping at an address the kernel chooses aliases nothing of ours.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, offset) };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>()).expect("mmap returned a null mapping");
        Ok(Mapping { ptr, len, writable })
    }

    /// A copy of `N` bytes at `at`, read volatile: the driver writes them behind our back.
    pub fn read_array<const N: usize>(&self, at: usize) -> [u8; N] {
        assert!(at + N <= self.len, "read of {N} bytes at {at} beyond a {}-byte mapping", self.len);
        // SAFETY: in bounds (asserted), mapped readable for our lifetime, any bit pattern is a
        // valid [u8; N] and its alignment is 1.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(at).cast::<[u8; N]>()) }
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        assert!(self.writable, "the descriptor mapping is read-only");
        // SAFETY: mapped readable and writable for our lifetime; `&mut self` makes this the
        // only reference from our side, and the driver touches a tag's buffer only while the
        // tag is fetching, when the queue holds no slice of it.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping we made, unmapped once; no slice of it outlives `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
