//! Which bytes of a member file hold data, by lseek's SEEK_DATA and SEEK_HOLE: a hole reads
//! back as zeros, so an array range whose sources are all holes reads as zeros, which is what
//! NBD block status tells a client that copies the array (`Member::allocated`).

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;

/// The parts of device bytes `span` that `file` holds data in, in order and apart. None when
/// the file system cannot say (an lseek other than "no data past here" failed): the caller
/// counts all of `span` as data. Holes the file system does not track read as data, which is
/// the safe answer; a range reported a hole always reads as zeros.
pub(crate) fn data_ranges(file: &File, span: Range<u64>) -> Option<Vec<Range<u64>>> {
    let mut out: Vec<Range<u64>> = Vec::new();
    let mut at = span.start;
    while at < span.end {
        let data = match seek(file, at, libc::SEEK_DATA) {
            Ok(d) => d,
            // No data at or past `at` (or `at` is past the end of the file).
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => break,
            Err(_) => return None,
        };
        if data >= span.end {
            break;
        }
        let hole = seek(file, data, libc::SEEK_HOLE).ok()?;
        out.push(data.max(span.start)..hole.min(span.end));
        // SEEK_HOLE always finds one (the end of the file is one); never loop in place.
        at = hole.max(data + 1);
    }
    Some(out)
}

fn seek(file: &File, offset: u64, whence: libc::c_int) -> io::Result<u64> {
    let past = || io::Error::from_raw_os_error(libc::ENXIO);
    let offset = libc::off_t::try_from(offset).map_err(|_| past())?;
    // SAFETY: lseek reads its integer arguments only; `file` stays open for the call. The
    // file position it moves is used by nothing: every member I/O names its offset.
    let r = unsafe { libc::lseek(file.as_raw_fd(), offset, whence) };
    u64::try_from(r).map_err(|_| io::Error::last_os_error())
}
