//! Which file or device a path names, whatever path reaches it: `m1`, `./m1`, a symlink or a
//! hard link to it; `/dev/sdb` or a `/dev/disk/by-id` link. A member given twice, or a device
//! added as a spare that the array already holds, would have one array write the same blocks
//! as two members (a spare rebuilt over an active member destroys it), so the verbs that take
//! member paths compare these rather than the paths' text.

use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// Members are block devices or regular files. Anything else is refused by what it is, not by
/// what it would do later: `/dev/null` sizes as 0 bytes ("too small"), a directory opened for
/// O_DIRECT gives EINVAL.
pub fn check_member_kind(metadata: &Metadata) -> io::Result<()> {
    let t = metadata.file_type();
    let kind = if t.is_file() || t.is_block_device() {
        return Ok(());
    } else if t.is_dir() {
        "a directory"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_fifo() {
        "a pipe"
    } else if t.is_socket() {
        "a socket"
    } else {
        "neither a file nor a device"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{kind}: a member is a block device or a regular file"),
    ))
}

/// Opens `path` as members are opened (for reading, and writing when `write`), once
/// `check_member_kind` has passed on the path: before the open, which on a pipe waits for a
/// writer.
pub fn open_member_path(path: &Path, write: bool) -> io::Result<File> {
    check_member_kind(&std::fs::metadata(path)?)?;
    std::fs::OpenOptions::new().read(true).write(write).open(path)
}

/// Whether a running `uraid serve` holds `path`: it takes an exclusive lock on every member
/// it opens. Only files and block devices are asked (`open_member_path`).
#[must_use]
pub fn held_by_a_server(path: &Path) -> bool {
    open_member_path(path, false)
        .is_ok_and(|f| matches!(f.try_lock(), Err(std::fs::TryLockError::WouldBlock)))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileIdentity {
    /// A block device, by device number: every node and link of it is the same device.
    BlockDevice { rdev: u64 },
    /// Anything else, by filesystem and inode.
    File { dev: u64, ino: u64 },
}

impl FileIdentity {
    /// The identity of what `path` names (symlinks followed).
    pub fn of_path(path: &Path) -> io::Result<FileIdentity> {
        std::fs::metadata(path).map(|m| Self::of_metadata(&m))
    }

    /// The identity of an open file (still right if its path was renamed since).
    pub fn of_file(file: &File) -> io::Result<FileIdentity> {
        file.metadata().map(|m| Self::of_metadata(&m))
    }

    fn of_metadata(m: &Metadata) -> FileIdentity {
        if m.file_type().is_block_device() {
            FileIdentity::BlockDevice { rdev: m.rdev() }
        } else {
            FileIdentity::File { dev: m.dev(), ino: m.ino() }
        }
    }
}

/// The first two of `paths` (by index, in order) that name the same file or device. Paths that
/// cannot be examined are skipped: opening them fails later with an error that names them.
pub fn same_file_twice<P: AsRef<Path>>(paths: &[P]) -> Option<(usize, usize)> {
    let ids: Vec<_> = paths.iter().map(|p| FileIdentity::of_path(p.as_ref()).ok()).collect();
    (0..ids.len()).find_map(|j| {
        let id = ids[j]?;
        (0..j).find(|&i| ids[i] == Some(id)).map(|i| (i, j))
    })
}

/// The refusal for two paths that name one file: `first` and `second` as the user gave them.
#[must_use]
pub fn same_file_message(first: &str, second: &str) -> String {
    if first == second {
        format!("{first} is given twice: each member may be given once")
    } else {
        format!("{first} and {second} are the same file or device: each member may be given once")
    }
}

impl FileIdentity {
    /// Whether writing one overwrites blocks of the other: the same file or device, or a
    /// disk and a partition on it (`/dev/sdb` and `/dev/sdb1`), known by sysfs, where a
    /// partition's directory is inside its disk's.
    #[must_use]
    pub fn overlaps(self, other: FileIdentity) -> bool {
        self.overlaps_in(other, Path::new("/sys"))
    }

    /// `overlaps`, with sysfs mounted at `sysfs` (tests build one).
    fn overlaps_in(self, other: FileIdentity, sysfs: &Path) -> bool {
        if self == other {
            return true;
        }
        let (FileIdentity::BlockDevice { rdev: a }, FileIdentity::BlockDevice { rdev: b }) =
            (self, other)
        else {
            return false;
        };
        let node = |rdev: u64| {
            let (major, minor) = (libc::major(rdev), libc::minor(rdev));
            std::fs::canonicalize(sysfs.join(format!("dev/block/{major}:{minor}"))).ok()
        };
        node(a).zip(node(b)).is_some_and(|(a, b)| a.starts_with(&b) || b.starts_with(&a))
    }
}

/// The first of `members` that an output written with the array's contents would overwrite
/// (`uraid assemble -o`, `uraid build -o`, or their standard output): writing an array's
/// contents over one of its own members destroys the member while it is being read. Paths
/// that cannot be examined are skipped (their open fails later, naming them).
pub fn member_under_output<P: AsRef<Path>>(output: FileIdentity, members: &[P]) -> Option<usize> {
    members
        .iter()
        .position(|m| FileIdentity::of_path(m.as_ref()).is_ok_and(|member| member.overlaps(output)))
}

/// What standard output is, when it is a file or a device (a redirection).
#[must_use]
pub fn stdout_identity() -> Option<FileIdentity> {
    use std::os::fd::AsFd;
    let fd = io::stdout().as_fd().try_clone_to_owned().ok()?;
    let m = File::from(fd).metadata().ok()?;
    (m.file_type().is_file() || m.file_type().is_block_device())
        .then(|| FileIdentity::of_metadata(&m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_reach_one_file_are_the_same_file() {
        let dir = std::env::temp_dir().join(format!("uraid-io-identity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let a = dir.join("a");
        let b = dir.join("b");
        std::fs::write(&a, b"a").expect("write a");
        std::fs::write(&b, b"b").expect("write b");
        let dotted = dir.join(".").join("a");
        let link = dir.join("link");
        std::os::unix::fs::symlink(&a, &link).expect("symlink");
        let hard = dir.join("hard");
        std::fs::hard_link(&b, &hard).expect("hard link");
        let missing = dir.join("missing");

        assert_eq!(same_file_twice(&[&a, &b]), None);
        assert_eq!(same_file_twice(&[&a, &b, &dotted]), Some((0, 2)));
        assert_eq!(same_file_twice(&[&b, &link, &a]), Some((1, 2)));
        assert_eq!(same_file_twice(&[&a, &hard, &b]), Some((1, 2)));
        // Paths that cannot be examined are left to the open that names them.
        assert_eq!(same_file_twice(&[&missing, &a, &missing]), None);
        let file = File::open(&link).expect("open");
        assert_eq!(FileIdentity::of_file(&file).ok(), FileIdentity::of_path(&a).ok());
        assert_ne!(FileIdentity::of_path(&a).ok(), FileIdentity::of_path(&b).ok());

        let id = |p: &Path| FileIdentity::of_path(p).expect("identity");
        assert_eq!(member_under_output(id(&link), &[&b, &missing, &a]), Some(2));
        assert_eq!(member_under_output(id(&hard), &[&a, &b]), Some(1));
        assert_eq!(member_under_output(id(&a), &[&b, &missing]), None);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    /// sysfs as the kernel lays it out: /sys/dev/block/MAJ:MIN links to the device's
    /// directory, and a partition's directory is inside its disk's.
    #[test]
    fn a_disk_and_its_partitions_overlap_and_nothing_else_does() {
        let sys = std::env::temp_dir().join(format!("uraid-io-sysfs-{}", std::process::id()));
        let disks = sys.join("devices/pci0000:00/block");
        for d in ["sda/sda1", "sda/sda2", "sdb"] {
            std::fs::create_dir_all(disks.join(d)).expect("device dirs");
        }
        std::fs::create_dir_all(sys.join("dev/block")).expect("dev/block");
        let nodes = [((8, 0), "sda"), ((8, 1), "sda/sda1"), ((8, 2), "sda/sda2"), ((8, 16), "sdb")];
        for ((major, minor), d) in nodes {
            let link = sys.join(format!("dev/block/{major}:{minor}"));
            std::os::unix::fs::symlink(disks.join(d), link).expect("symlink");
        }
        let dev = |major, minor| FileIdentity::BlockDevice { rdev: libc::makedev(major, minor) };
        let overlap = |a, b| FileIdentity::overlaps_in(a, b, &sys);
        assert!(overlap(dev(8, 0), dev(8, 1)), "a disk and its partition");
        assert!(overlap(dev(8, 2), dev(8, 0)), "a partition and its disk");
        assert!(overlap(dev(8, 16), dev(8, 16)), "one device");
        assert!(!overlap(dev(8, 1), dev(8, 2)), "two partitions of one disk");
        assert!(!overlap(dev(8, 0), dev(8, 16)), "two disks");
        assert!(!overlap(dev(8, 1), dev(9, 9)), "a device sysfs does not know");
        let file = FileIdentity::File { dev: 8, ino: 1 };
        assert!(!overlap(file, dev(8, 1)), "a file and a device");
        std::fs::remove_dir_all(&sys).expect("clean up");
    }
}
