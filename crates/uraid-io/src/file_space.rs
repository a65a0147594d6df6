//! Whether sparse member files can be filled: a file member is usually made with `truncate`
//! (the demo's are), so its blocks are allocated only as they are first written. When the
//! file system holding them fills, each member fails at its next write with ENOSPC, one after
//! another, and the array fails past its redundancy (seen by hand: a RAID5 of four 64 MiB
//! files on a 100 MiB tmpfs, filled over NBD). Said at the start, an operator can allocate
//! the files (`fallocate`) or make room before that happens.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Member files on one file system that it may not have room to fill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpaceShortfall {
    /// The member files there, as given.
    pub files: Vec<PathBuf>,
    /// Bytes of them not allocated yet (file sizes less allocated blocks).
    pub unallocated_bytes: u64,
    /// Bytes the file system has free for this user.
    pub free_bytes: u64,
}

impl std::fmt::Display for SpaceShortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.files.iter().map(|p| p.display().to_string()).collect();
        write!(
            f,
            "member files {} are sparse: {} MiB of them unallocated, and their file system has \
             {} MiB free: once it fills, each member fails at its next write (ENOSPC) and the \
             array fails; allocate them (fallocate -l SIZE FILE) or make room",
            names.join(", "),
            self.unallocated_bytes >> 20,
            self.free_bytes >> 20
        )
    }
}

/// The file systems among those holding the regular files of `paths` (devices are skipped)
/// whose free space is less than what their sparse member files still need.
#[must_use]
pub fn sparse_shortfalls(paths: &[PathBuf]) -> Vec<SpaceShortfall> {
    let mut by_fs: BTreeMap<u64, (Vec<PathBuf>, u64)> = BTreeMap::new();
    for p in paths {
        let Ok(meta) = std::fs::metadata(p) else { continue };
        if !meta.is_file() {
            continue;
        }
        let unallocated = meta.len().saturating_sub(meta.blocks() * 512);
        let entry = by_fs.entry(meta.dev()).or_default();
        entry.0.push(p.clone());
        entry.1 += unallocated;
    }
    by_fs
        .into_values()
        .filter_map(|(files, unallocated_bytes)| {
            let free_bytes = free_bytes(&files[0]).ok()?;
            (unallocated_bytes > free_bytes).then_some(SpaceShortfall {
                files,
                unallocated_bytes,
                free_bytes,
            })
        })
        .collect()
}

/// statvfs's blocks available to an unprivileged user; std has no call for it.
fn free_bytes(path: &Path) -> io::Result<u64> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: an all-zero statvfs is a valid value of the plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a statvfs the call may write.
    if unsafe { libc::statvfs(c.as_ptr(), &raw mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file far larger than any file system here is short; an allocated one never is.
    #[test]
    fn a_huge_sparse_file_is_short_of_space_and_an_allocated_one_is_not() {
        let dir = std::env::temp_dir().join(format!("uraid-space-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (sparse, full) = (dir.join("sparse"), dir.join("full"));
        std::fs::File::create(&sparse).unwrap().set_len(1 << 43).unwrap();
        std::fs::write(&full, vec![1u8; 1 << 16]).unwrap();
        let short = sparse_shortfalls(&[sparse.clone(), full.clone()]);
        assert_eq!(short.len(), 1, "{short:?}");
        assert_eq!(short[0].files, [sparse.clone(), full.clone()]);
        assert!(short[0].unallocated_bytes >= (1 << 43) - (1 << 20));
        assert!(short[0].to_string().contains("ENOSPC"), "{}", short[0]);
        assert!(sparse_shortfalls(&[full, PathBuf::from("/dev/null")]).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
