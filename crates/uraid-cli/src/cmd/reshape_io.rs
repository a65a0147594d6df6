//! The reshape copy's member I/O: a batch's reads (and writes) run at once, a thread a member,
//! each member's in order, with O_DIRECT where the member's filesystem takes it. One after
//! another, a copy of N members waited for each disk in turn and went at about one disk's
//! speed; and through the page cache its large writes cost more CPU than the copy itself
//! (on the Xeon VM's 6.18 kernel, buffered writes of about 3.7 MB took 3.3 ms each, 1.1 GB/s).

use crate::cmd::grow::Grown;
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use uraid_core::DiskIndex;
use uraid_core::buffer::BLOCK_ALIGN;
use uraid_core::reshape::{MemberRead, MemberWrite, ReshapeIo};

/// The members' files by slot (none for a missing slot, which the copy never asks for).
pub(crate) struct Members<'a> {
    files: &'a [Option<&'a Grown<'a>>],
    /// Each one's file opened again with O_DIRECT, where its filesystem takes that.
    direct: Vec<Option<File>>,
}

impl<'a> Members<'a> {
    pub(crate) fn new(files: &'a [Option<&'a Grown<'a>>]) -> Self {
        let direct = files.iter().map(|g| g.and_then(|g| open_direct(g.file))).collect();
        Members { files, direct }
    }

    fn member(&self, disk: DiskIndex) -> (&Grown<'_>, Option<&File>) {
        let g = self.files[disk.get()].expect("a missing slot is neither read nor written");
        (g, self.direct[disk.get()].as_ref())
    }

    fn on_each_member<T: Send>(
        &self,
        items: Vec<(DiskIndex, T)>,
        op: impl Fn((&Grown<'_>, Option<&File>), T) -> Result<()> + Sync,
    ) -> Result<()> {
        on_each(self.files.len(), |disk| self.member(disk), items, op)
    }
}

/// Runs `op` on every item with its member (`member`, of `members`), the items of each member
/// in order on a thread of its own; the first error wins.
fn on_each<M: Copy + Send, T: Send>(
    members: usize,
    member: impl Fn(DiskIndex) -> M,
    items: Vec<(DiskIndex, T)>,
    op: impl Fn(M, T) -> Result<()> + Sync,
) -> Result<()> {
    let mut by_member: Vec<Vec<T>> = (0..members).map(|_| Vec::new()).collect();
    for (disk, item) in items {
        by_member[disk.get()].push(item);
    }
    std::thread::scope(|scope| {
        let running: Vec<_> = by_member
            .into_iter()
            .enumerate()
            .filter(|(_, items)| !items.is_empty())
            .map(|(disk, items)| {
                let (op, m) = (&op, member(DiskIndex(disk as u16)));
                scope.spawn(move || items.into_iter().try_for_each(|item| op(m, item)))
            })
            .collect();
        running.into_iter().try_for_each(|t| t.join().expect("a member's I/O thread"))
    })
}

impl ReshapeIo for Members<'_> {
    type Error = anyhow::Error;
    fn read(&mut self, disk: DiskIndex, at: u64, buf: &mut [u8]) -> Result<()> {
        read_at(self.member(disk), at, buf)
    }
    fn write(&mut self, disk: DiskIndex, at: u64, buf: &[u8]) -> Result<()> {
        write_at(self.member(disk), at, buf)
    }
    fn read_all(&mut self, reads: &mut [MemberRead<'_>]) -> Result<()> {
        let items = reads.iter_mut().map(|r| (r.disk, (r.at_bytes, &mut *r.buf))).collect();
        self.on_each_member(items, |m, (at, buf)| read_at(m, at, buf))
    }
    fn write_all(&mut self, writes: &[MemberWrite<'_>]) -> Result<()> {
        let items = writes.iter().map(|w| (w.disk, (w.at_bytes, w.buf))).collect();
        self.on_each_member(items, |m, (at, buf)| write_at(m, at, buf))
    }
}

/// The member's file opened again (not a `dup`, which shares the flags) with O_DIRECT.
fn open_direct(file: &File) -> Option<File> {
    let again = format!("/proc/self/fd/{}", file.as_raw_fd());
    OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(again).ok()
}

/// The O_DIRECT file for an I/O aligned to 4 KiB (the largest logical block we meet), in
/// place, start and length.
fn direct_for<'f>(direct: Option<&'f File>, at: u64, buf: &[u8]) -> Option<&'f File> {
    let aligned = |n: usize| n.is_multiple_of(BLOCK_ALIGN);
    let fits = aligned(at as usize) && aligned(buf.len()) && aligned(buf.as_ptr() as usize);
    direct.filter(|_| fits)
}

/// `io` on the O_DIRECT file where there is one for it, else on the buffered one; also where
/// the filesystem opened O_DIRECT and refuses the I/O (EINVAL).
fn either<R>(
    direct: Option<&File>,
    buffered: &File,
    mut io: impl FnMut(&File) -> io::Result<R>,
) -> io::Result<R> {
    if let Some(f) = direct {
        match io(f) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            done => return done,
        }
    }
    io(buffered)
}

fn read_at((g, direct): (&Grown<'_>, Option<&File>), at: u64, buf: &mut [u8]) -> Result<()> {
    either(direct_for(direct, at, buf), g.file, |f| f.read_exact_at(buf, at))
        .with_context(|| format!("reading {} at byte {at}", g.member.name))
}

fn write_at((g, direct): (&Grown<'_>, Option<&File>), at: u64, buf: &[u8]) -> Result<()> {
    either(direct_for(direct, at, buf), g.file, |f| f.write_all_at(buf, at))
        .with_context(|| format!("writing {} at byte {at}", g.member.name))
}

/// Makes every member's writes durable, the members at once (by the buffered file: the
/// inode's, covering the O_DIRECT writes, and the device's cache).
pub(crate) fn sync_all(files: &[Option<&Grown<'_>>]) -> Result<()> {
    let slots = (0..files.len()).filter(|&slot| files[slot].is_some());
    let items = slots.map(|slot| (DiskIndex(slot as u16), ())).collect();
    let member = |disk: DiskIndex| files[disk.get()].expect("only the slots with a member");
    on_each(files.len(), member, items, |g: &Grown<'_>, ()| {
        g.file.sync_data().with_context(|| g.member.name.clone())
    })
}
