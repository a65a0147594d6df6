//! Opening a file member: O_DIRECT when the filesystem takes it, and the logical block size
//! that O_DIRECT then requires, found by asking the device (block devices) or by probing
//! (regular files: the smallest aligned read that succeeds).

use crate::buffer_pool::AlignedBuf;
use crate::member::MemberInfo;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

pub(crate) struct Opened {
    pub(crate) info: MemberInfo,
    pub(crate) file: File,
    pub(crate) buffered: File,
    pub(crate) direct: bool,
}

pub(crate) fn open_member(path: &Path, want_direct: bool, write: bool) -> io::Result<Opened> {
    let name = path.display().to_string();
    let mut buffered = crate::open_member_path(path, write)?;
    let size_bytes = buffered.seek(SeekFrom::End(0))?;
    let is_block = buffered.metadata()?.file_type().is_block_device();
    let direct_file = if want_direct { open_direct(path, is_block, write)? } else { None };
    let (file, direct, block) = if let Some((file, block)) = direct_file {
        (file, true, block)
    } else {
        if want_direct {
            say!("warning: {name}: O_DIRECT refused by the filesystem; using buffered I/O");
        }
        (buffered.try_clone()?, false, 512)
    };
    let rotational = crate::rotational::rotational(path) == Some(true);
    let discard = write && discard_zeroes(&buffered, path, is_block, size_bytes);
    let info = MemberInfo { name, size_bytes, logical_block_bytes: block, rotational, discard };
    Ok(Opened { info, file, buffered, direct })
}

/// Whether a discard (`FALLOC_FL_PUNCH_HOLE`, as the members do it) leaves zeros. On a block
/// device the kernel turns it into write-zeroes, refused (EOPNOTSUPP) where the device has
/// none (`queue/write_zeroes_max_bytes` 0: many disks). On a file, a hole punched past its
/// end changes nothing and tells whether the filesystem punches holes at all (vfat, NFSv3
/// and others do not). Without it, every discard would fail the member: the array then takes
/// none, as md raid456 takes none unless its members zero what they discard.
fn discard_zeroes(file: &File, path: &Path, is_block: bool, size_bytes: u64) -> bool {
    if is_block {
        return crate::rotational::queue_attribute(path, "write_zeroes_max_bytes")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|bytes| bytes > 0);
    }
    let past_end = size_bytes.next_multiple_of(4096);
    let (Ok(at), Ok(len)) = (libc::off_t::try_from(past_end), libc::off_t::try_from(4096u64))
    else {
        return false;
    };
    // SAFETY: fallocate only reads its integer arguments; `file` stays open for the call.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), crate::file_sync::DISCARD_MODE, at, len) };
    r == 0
}

/// The file opened with O_DIRECT and its logical block size, or None where O_DIRECT is refused.
fn open_direct(path: &Path, is_block: bool, write: bool) -> io::Result<Option<(File, u32)>> {
    let opened = OpenOptions::new().read(true).write(write).custom_flags(libc::O_DIRECT).open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(None),
        Err(e) => return Err(e),
    };
    let block = if is_block { block_device_sector_size(&file)? } else { probe_block(&file) };
    Ok(block.map(|b| (file, b)))
}

fn block_device_sector_size(file: &File) -> io::Result<Option<u32>> {
    let mut size: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one c_int through the pointer, which points at `size`.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), libc::BLKSSZGET, &raw mut size) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Some(u32::try_from(size).expect("a positive sector size")))
}

/// Some filesystems accept the O_DIRECT flag and refuse the I/O; and the block size a file
/// needs is its device's. Reads of 512 then 4096 aligned bytes at offset 0 tell both (a read
/// at or past the end of a file succeeds with 0 bytes once alignment is accepted).
fn probe_block(file: &File) -> Option<u32> {
    let mut buf = AlignedBuf::new(4096);
    [512u32, 4096].into_iter().find(|&block| {
        file.read_at(&mut buf[..block as usize], 0)
            .map_or_else(|e| e.raw_os_error() != Some(libc::EINVAL), |_| true)
    })
}
