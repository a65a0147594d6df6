//! The thread-free synchronous fallback for file members where io_uring is unavailable: queued I/Os
//! are performed with pread/pwrite (one per segment), fdatasync or fallocate when the batch is
//! flushed, and their completions wait to be reaped. Results use io_uring's convention (bytes, or
//! -errno) so that both paths finish I/Os through the same code.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

/// One I/O as the file paths see it, after bounce-buffer routing: a Read or Write names its
/// memory as an iovec array (one entry for a bounce buffer or a plain I/O).
#[derive(Clone, Copy, Debug)]
pub(crate) enum FileOp<'a> {
    Read { iov: &'a [libc::iovec], offset: u64 },
    Write { iov: &'a [libc::iovec], offset: u64, fua: bool },
    Flush,
    Discard { len: usize, offset: u64 },
}

/// Mode for discard: punch a hole and keep the size (on a block device: discard or zero out).
pub(crate) const DISCARD_MODE: i32 = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;

/// The bytes an iovec array covers.
pub(crate) fn iov_len(iov: &[libc::iovec]) -> usize {
    iov.iter().map(|v| v.iov_len).sum()
}

/// Performs `op` on `file` now; a vectored I/O as one positioned transfer per segment (the
/// segments are contiguous on the file, so this is the same as preadv/pwritev, without their
/// short-transfer bookkeeping).
///
/// # Safety
/// Every iovec must point at `iov_len` valid bytes (for reads, writable and not otherwise
/// accessed) for the duration of the call.
pub(crate) unsafe fn perform(file: &File, op: FileOp<'_>) -> i32 {
    let result = match op {
        FileOp::Read { iov, offset } => {
            let mut at = offset;
            iov.iter().try_for_each(|v| {
                // SAFETY: the caller guarantees each segment is valid, exclusive and writable.
                let buf = unsafe { std::slice::from_raw_parts_mut(v.iov_base.cast(), v.iov_len) };
                at += v.iov_len as u64;
                read_full(file, buf, at - v.iov_len as u64)
            })
        }
        FileOp::Write { iov, offset, fua } => {
            let mut at = offset;
            iov.iter()
                .try_for_each(|v| {
                    // SAFETY: the caller guarantees each segment is valid for iov_len bytes.
                    let buf = unsafe { std::slice::from_raw_parts(v.iov_base.cast(), v.iov_len) };
                    at += v.iov_len as u64;
                    file.write_all_at(buf, at - v.iov_len as u64)
                })
                .and_then(|()| if fua { file.sync_data() } else { Ok(()) })
        }
        FileOp::Flush => file.sync_data(),
        FileOp::Discard { len, offset } => discard(file, offset, len),
    };
    match (result, op) {
        (Ok(()), FileOp::Read { iov, .. } | FileOp::Write { iov, .. }) => {
            i32::try_from(iov_len(iov)).expect("an I/O is under 2 GiB, as io_uring's result is")
        }
        (Ok(()), _) => 0,
        (Err(e), _) => -e.raw_os_error().unwrap_or(libc::EIO),
    }
}

fn read_full(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    file.read_exact_at(buf, offset)
}

fn discard(file: &File, offset: u64, len: usize) -> io::Result<()> {
    let off = libc::off_t::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
    let len = libc::off_t::try_from(len).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: fallocate takes no pointers; the fd is open for as long as `file` lives.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), DISCARD_MODE, off, len) };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}
