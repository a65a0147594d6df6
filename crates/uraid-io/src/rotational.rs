//! Whether a member sits on a disk that seeks, as the kernel says (`queue/rotational`): the
//! partial parity log places entries differently there (`uraid_core`'s log placement).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// The kernel's `queue/rotational` for the block device `path` is, or for the device a regular
/// file's filesystem lives on (a partition's is its parent disk's). None where sysfs does not
/// say: a file on tmpfs or overlayfs, no sysfs.
#[must_use]
pub fn rotational(path: &Path) -> Option<bool> {
    queue_attribute(path, "rotational").map(|text| text == "1")
}

/// The kernel's `queue/NAME` for the block device `path` is, or for the device a regular
/// file's filesystem lives on (a partition's is its parent disk's), trimmed.
pub(crate) fn queue_attribute(path: &Path, name: &str) -> Option<String> {
    let m = std::fs::metadata(path).ok()?;
    let dev = if m.file_type().is_block_device() { m.rdev() } else { m.dev() };
    let base =
        Path::new("/sys/dev/block").join(format!("{}:{}", libc::major(dev), libc::minor(dev)));
    [base.join("queue").join(name), base.join("../queue").join(name)]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|text| text.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::rotational;
    use std::path::Path;

    #[test]
    fn what_sysfs_says_or_nothing() {
        assert_eq!(rotational(Path::new("/nonexistent/member")), None);
        // /proc lives on no block device: sysfs has nothing to say.
        assert_eq!(rotational(Path::new("/proc/self/stat")), None);
        // Whatever this machine's disk is, a file on it gets the same answer as the disk.
        if let Some(disk) = rotational(Path::new("/")) {
            let here = std::env::current_dir().expect("a working directory");
            let same_fs =
                std::fs::metadata(&here).ok().map(|m| std::os::unix::fs::MetadataExt::dev(&m))
                    == std::fs::metadata("/").ok().map(|m| std::os::unix::fs::MetadataExt::dev(&m));
            if same_fs {
                assert_eq!(rotational(&here), Some(disk));
            }
        }
    }
}
