//! Where `assemble -o` and `build` write an array's contents: never over a member.
//!
//! Both read members and write the contents out. An output that is one of those members
//! (`-o /dev/sdc` for `/dev/sdc`, a path that links to a member image, the disk a member
//! partition is on) was truncated or overwritten while it was read, and the member was lost.

use anyhow::bail;
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
