//! Where `assemble -o` and `build` write an array's contents: never over a member.
//!
//! Both read members and write the contents out. An output that is one of those members
//! (`-o /dev/sdc` for `/dev/sdc`, a path that links to a member image, the disk a member
//! partition is on) was truncated or overwritten while it was read, and the member was lost.

use anyhow::{Context, bail};
use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::Path;
use uraid_io::identity::{FileIdentity, member_under_output, stdout_identity};

/// Refuses `output` (`None` or `-`: standard output) when writing there would overwrite one
/// of `members`, or a member of an array a running `uraid serve` holds. Before anything is
/// opened for writing.
pub(crate) fn refuse_output_over_members(
    output: Option<&Path>,
    members: &[impl AsRef<Path>],
) -> anyhow::Result<()> {
    let to_stdout = output.is_none_or(|p| p == Path::new("-"));
    let (id, what) = match output {
        Some(path) if !to_stdout => {
            if uraid_io::held_by_a_server(path) {
                bail!(
                    "the output {} is a member of an array a running uraid serve holds: \
                     writing there would destroy it; nothing was written",
                    path.display()
                );
            }
            // Not there yet: created, so it is nothing that exists.
            let Ok(id) = FileIdentity::of_path(path) else { return Ok(()) };
            (id, format!("the output {}", path.display()))
        }
        _ => {
            let Some(id) = stdout_identity() else { return Ok(()) };
            (id, "standard output".to_string())
        }
    };
    if let Some(i) = member_under_output(id, members) {
        let member = members[i].as_ref().display();
        let same = FileIdentity::of_path(members[i].as_ref()).is_ok_and(|m| m == id);
        let relation = if same { "is" } else { "shares blocks with" };
        // A shell's `>` truncates a file before uraid runs (a device it leaves alone).
        let emptied = to_stdout
            && std::fs::metadata(members[i].as_ref()).is_ok_and(|m| m.is_file() && m.len() == 0);
        let emptied =
            if emptied { " (the shell's redirection has emptied it already)" } else { "" };
        bail!(
            "{what} {relation} {member}, a member being read{emptied}: writing the array's \
             contents there would destroy it; write them elsewhere"
        );
    }
    Ok(())
}

/// Creates `path` and writes `contents` into it. A regular file is written sparsely, as `cp
/// --sparse` does: blocks of zeros are skipped, which a file just created reads back as zeros,
/// so the contents of a mostly empty array take only what it holds. Anything else (a block
/// device keeps what it held) gets every byte.
pub(crate) fn write_file(
    path: &Path,
    contents: impl FnOnce(&mut dyn Write) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let file =
        File::create(path).with_context(|| format!("cannot create output {}", path.display()))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return contents(&mut BufWriter::with_capacity(4 << 20, file));
    }
    let mut out = BufWriter::with_capacity(4 << 20, Sparse { file, len: 0 });
    contents(&mut out)?;
    let sparse = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    // A tail of zeros was skipped: the length says where the contents end.
    sparse.file.set_len(sparse.len).context("writing the array's contents")?;
    Ok(())
}

/// A new regular file written with its blocks of zeros left as holes.
struct Sparse {
    file: File,
    len: u64,
}

/// The hole granularity looked for: file systems allocate 4 KiB blocks.
const BLOCK_BYTES: usize = 4096;

impl Write for Sparse {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for block in buf.chunks(BLOCK_BYTES) {
            if block.iter().all(|b| *b == 0) {
                // At most BLOCK_BYTES: fits.
                self.file.seek(SeekFrom::Current(i64::try_from(block.len()).expect("4 KiB")))?;
            } else {
                self.file.write_all(block)?;
            }
        }
        self.len += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}
