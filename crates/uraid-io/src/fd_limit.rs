//! The open files limit. A served array takes about 2 + 3 x workers descriptors per member
//! (counted on a RAID6 of 256: 1,289 with one worker, 2,057 with two, 3,593 with four), so a
//! wide array outgrows the soft limit most shells start with (1024): that array failed to
//! start at member 168 with "Too many open files". The commands raise the soft limit to the
//! hard one, as servers commonly do (Go's runtime does it for every program); the hard limit
//! is the administrator's.

use std::io;

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force.
pub fn raise_open_files_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit only writes the struct it is given, which lives across the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur >= limit.rlim_max {
        return Ok(limit.rlim_cur);
    }
    // An unlimited hard limit cannot be a soft one for files: the kernel caps it (nr_open).
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<libc::rlim_t>().ok())
        .unwrap_or(1 << 20);
    let raised = libc::rlimit { rlim_cur: limit.rlim_max.min(nr_open), rlim_max: limit.rlim_max };
    // SAFETY: setrlimit only reads the struct it is given.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const raised) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(raised.rlim_cur)
}

/// Whether `e` is the open files limit met (EMFILE, "Too many open files").
#[must_use]
pub fn is_out_of_files(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EMFILE)
}

/// What to say beside EMFILE: what an array takes, the limit in force, and the knob.
#[must_use]
pub fn out_of_files_hint() -> String {
    let limit = open_files_limit().map_or_else(String::new, |l| format!(", the limit is {l}"));
    format!("an array takes about 2 + 3 x workers descriptors per member{limit}: raise `ulimit -n`")
}

/// The soft RLIMIT_NOFILE in force, if it can be read.
#[must_use]
pub fn open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: as in `raise_open_files_limit`.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } == 0).then_some(limit.rlim_cur)
}
