//! md's read-only array (`mdadm --assemble --readonly`; `uraid serve --read-only`): nothing
//! is written to a member, whatever state the array is found in, and reads answer as the
//! members stand (a member being rebuilt is read below its checkpoint only).

mod common;
use common::{
    CHUNK_SECTORS, DATA_OFFSET_SECTORS, copy_all, fill, make_array_at, mark_recovering, superblock,
    tempdir, write_member,
};
use std::path::PathBuf;
use std::time::Duration;
use uraid_format::Level;
use uraid_md::{MdArray, MdOptions};

const DATA_BYTES: usize = 4 << 20;

fn options(read_only: bool) -> MdOptions {
    MdOptions { workers: Some(1), read_only, ..MdOptions::default() }
}

/// Every member file's bytes.
fn contents(paths: &[PathBuf]) -> Vec<Vec<u8>> {
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Every verb that would write is refused, and says why.
fn refuses_changes(md: &MdArray, member: &str, spare: &str) {
    let refusals = [
        md.fail(member).err(),
        md.remove(member).err(),
        md.add(spare).err(),
        md.replace(member, spare).err(),
        md.replace_from_spare(member).err(),
        md.scrub(false).err(),
        md.scrub(true).err(),
    ];
    for r in refusals {
        let r = r.expect("refused").to_string();
        assert!(r.contains("runs read-only"), "{r}");
    }
    let err = md.runtime().write_at(0, &[1u8; 4096]).unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
}

/// A crash image (superblocks active, bitmap bits set): read-only it is read as written, no
/// resync runs, the state says one is pending, and not a byte of any member changes. Served
/// writable afterwards it resyncs, as it would have without the read-only look.
#[test]
fn a_crashed_array_read_only_is_read_as_written_and_left_as_found() {
    let dir = tempdir("ro-crash");
    let paths = make_array_at(&dir.path().join("a"), Level::Raid5, 4, Some(1 << 20));
    let md = MdArray::assemble(&paths, &options(false)).unwrap();
    let model = fill(7, DATA_BYTES);
    md.runtime().write_at(0, &model).unwrap();
    md.runtime().flush().unwrap();
    let crash = copy_all(&paths, &dir.path().join("crash"));
    md.stop().unwrap();
    let spare = dir.path().join("a").join("spare.img");
    std::fs::copy(&paths[0], &spare).unwrap();
    let found = contents(&crash);
    let events = superblock(&crash[0]).events;

    let md = MdArray::assemble(&crash, &options(true)).unwrap();
    let st = md.status();
    assert_eq!(st.state, "active, resync pending, read-only", "{st:?}");
    assert!(st.read_only && st.bitmap_dirty_chunks > 0 && st.sync.is_none(), "{st:?}");
    // Members opened read-only cannot discard; no "Discard: off" row for that.
    assert!(st.discard_off_by.is_empty(), "{st:?}");
    std::thread::sleep(Duration::from_millis(300));
    let st = md.status();
    assert!(st.sync.is_none() && st.last_sync.is_none(), "no resync ran: {st:?}");
    assert!(md.runtime().read_at(0, DATA_BYTES).unwrap() == model, "read as written");
    refuses_changes(&md, crash[1].to_str().unwrap(), spare.to_str().unwrap());
    md.stop().unwrap();
    assert!(contents(&crash) == found, "a member changed");
    assert_eq!(superblock(&crash[0]).events, events);

    let md = MdArray::assemble(&crash, &options(false)).unwrap();
    let resync = md.wait_sync_idle(Duration::from_secs(60)).expect("a resync");
    assert_eq!(resync.action, "resync", "{resync:?}");
    assert!(md.runtime().read_at(0, DATA_BYTES).unwrap() == model);
    md.stop().unwrap();
}

/// A member being rebuilt (its checkpoint in its superblock) is read below the checkpoint and
/// rebuilt from parity above it, where its own blocks are garbage here; the rebuild itself
/// waits for a writable start, and nothing is written.
#[test]
fn a_member_being_rebuilt_is_read_below_its_checkpoint_only() {
    let dir = tempdir("ro-recovering");
    let paths = make_array_at(dir.path(), Level::Raid6, 5, None);
    let md = MdArray::assemble(&paths, &options(false)).unwrap();
    let model = fill(8, DATA_BYTES);
    md.runtime().write_at(0, &model).unwrap();
    md.stop().unwrap();
    // Checkpoint after the first 4 chunks of member 2; above it, garbage on the member.
    let at = 4 * u64::from(CHUNK_SECTORS);
    mark_recovering(&paths[2], at);
    let above = (DATA_OFFSET_SECTORS + at) * 512;
    write_member(&paths[2], above, &fill(99, 2 << 20));
    let found = contents(&paths);

    let md = MdArray::assemble(&paths, &options(true)).unwrap();
    let st = md.status();
    assert!(st.degraded && st.sync.is_none(), "{st:?}");
    assert!(st.members.iter().any(|m| m.state == "spare rebuilding"), "{st:?}");
    assert!(md.runtime().read_at(0, DATA_BYTES).unwrap() == model, "rebuilt above, read below");
    md.stop().unwrap();
    assert!(contents(&paths) == found, "a member changed");
}

/// md's rule stands read-only: a dirty degraded array needs --force (no log is replayed to
/// mend the stripes being written), and with it the array is read, still writing nothing.
#[test]
fn a_dirty_degraded_array_needs_force_read_only_too() {
    let dir = tempdir("ro-dirty-degraded");
    let paths = make_array_at(&dir.path().join("a"), Level::Raid5, 4, None);
    let md = MdArray::assemble(&paths, &options(false)).unwrap();
    let model = fill(9, DATA_BYTES);
    md.runtime().write_at(0, &model).unwrap();
    md.runtime().flush().unwrap();
    let crash = copy_all(&paths, &dir.path().join("crash"));
    md.stop().unwrap();
    let left = crash[1..].to_vec();
    let found = contents(&left);
    let err = MdArray::assemble(&left, &options(true)).err().expect("refused").to_string();
    assert!(err.contains("cannot start dirty degraded array"), "{err}");
    let forced = MdOptions { force: true, ..options(true) };
    let md = MdArray::assemble(&left, &forced).unwrap();
    assert!(md.runtime().read_at(0, DATA_BYTES).unwrap() == model, "flushed: parity agrees");
    md.stop().unwrap();
    assert!(contents(&left) == found, "a member changed");
}
