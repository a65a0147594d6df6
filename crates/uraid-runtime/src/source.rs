//! Where each worker's members come from. Every worker owns its own instance of every member,
//! so no lock sits between workers on the I/O path: for a file that is the same path opened
//! again (its own descriptor and io_uring ring per worker), for memory a handle on a shared
//! medium (`SharedMemory`).

use crate::shared_memory::SharedMemory;
use std::io;
use std::path::PathBuf;
use uraid_io::{FileMember, FileOptions, Member};

/// Opens one instance of a member for one worker.
///
/// `Runtime::start` calls `open` for worker 0's members in member order, then worker 1's, and
/// so on: a test source can count calls to give one worker's instance a fault.
pub trait MemberSource {
    /// How many members the array has.
    fn member_count(&self) -> usize;

    /// A new instance of `member`, owned by the worker that asked.
    fn open(&self, member: usize) -> io::Result<Box<dyn Member>>;
}

/// Members in memory, one `SharedMemory` each, shared by every worker.
#[derive(Clone)]
pub struct SharedMemorySource {
    media: Vec<SharedMemory>,
}

impl SharedMemorySource {
    /// `count` zeroed members of `size_bytes` each, named `mem0`, `mem1`, ...
    #[must_use]
    pub fn new(count: usize, size_bytes: usize) -> SharedMemorySource {
        let media = (0..count).map(|i| SharedMemory::new(&format!("mem{i}"), size_bytes)).collect();
        SharedMemorySource { media }
    }

    /// Every member's medium, for inspection and for wrapping in test sources.
    #[must_use]
    pub fn media(&self) -> &[SharedMemory] {
        &self.media
    }
}

impl MemberSource for SharedMemorySource {
    fn member_count(&self) -> usize {
        self.media.len()
    }

    fn open(&self, member: usize) -> io::Result<Box<dyn Member>> {
        Ok(Box::new(self.media[member].member()))
    }
}

/// Members in files or block devices: each worker opens the paths again.
pub struct FileSource {
    paths: Vec<PathBuf>,
    opts: FileOptions,
}

impl FileSource {
    #[must_use]
    pub fn new(paths: Vec<PathBuf>, opts: FileOptions) -> FileSource {
        assert!(!paths.is_empty(), "an array has members");
        FileSource { paths, opts }
    }
}

impl MemberSource for FileSource {
    fn member_count(&self) -> usize {
        self.paths.len()
    }

    fn open(&self, member: usize) -> io::Result<Box<dyn Member>> {
        Ok(Box::new(FileMember::open(&self.paths[member], self.opts)?))
    }
}
