//! md's own PPL (RAID5 `--consistency-policy=ppl`) on files, without the kernel (the kernel's
//! logs are in `uraid-format/tests/md_ppl.rs` and `uraid-cli/tests/kernel_ppl.rs`): arrays made
//! here get md's PPL feature and area (mdadm's layout: the area right after the superblock,
//! the bad block log after it), and the crash's records are written as md writes them.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use uraid_core::{Geometry, Layout, Level, StripeNumber};
use uraid_format::md_ppl::{HEADER_BYTES, MdPplEntry, MdPplHeader, signature};
use uraid_format::{Level as MdLevel, MAX_SECTOR, feature};
use uraid_md::{MdArray, MdOptions};

mod common;
use common::{
    CHUNK_SECTORS, DATA_OFFSET_SECTORS, MEMBER_BYTES, fill, make_array_at, mark_recovering,
    superblock, tempdir,
};

const DATA_OFFSET: u64 = DATA_OFFSET_SECTORS * 512;
const CHUNK: u64 = CHUNK_SECTORS as u64 * 512;
const BLOCK: usize = 4096;
/// md's PPL area: 248 sectors right after the superblock (one log write at a time: below
/// the kernel's 528 sectors for several), member sectors 16..264.
const PPL_OFFSET: i16 = 8;
const PPL_SECTORS: u16 = 248;
const AREA_AT: u64 = (8 + PPL_OFFSET as u64) * 512;

fn options() -> MdOptions {
    MdOptions { workers: Some(2), ..MdOptions::default() }
}

fn read(path: &Path, at: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    std::fs::File::open(path).unwrap().read_exact_at(&mut b, at).unwrap();
    b
}

fn write(path: &Path, at: u64, data: &[u8]) {
    std::fs::OpenOptions::new().write(true).open(path).unwrap().write_all_at(data, at).unwrap();
}

/// A clean RAID5 of 4 with md's PPL feature, as mdadm --consistency-policy=ppl makes it.
fn make(dir: &Path) -> Vec<PathBuf> {
    let paths = make_array_at(dir, MdLevel::Raid5, 4, None);
    for p in &paths {
        let mut sb = superblock(p);
        sb.feature_map |= feature::PPL;
        let packed = (u32::from(PPL_SECTORS) << 16) | u32::from(PPL_OFFSET as u16);
        sb.bitmap_offset_sectors = packed.cast_signed();
        sb.bblog_offset_sectors = i32::from(PPL_OFFSET) + i32::from(PPL_SECTORS);
        sb.seal();
        write(p, 4096, &sb.encode());
        let empty =
            MdPplHeader { signature: signature(&sb.set_uuid.0), generation: 0, entries: vec![] };
        write(p, AREA_AT, &empty.encode());
    }
    paths
}

fn mark_dirty(paths: &[PathBuf]) {
    for p in paths {
        let mut sb = superblock(p);
        sb.resync_offset_sectors = 0;
        sb.seal();
        write(p, 4096, &sb.encode());
    }
}

fn geometry() -> Geometry {
    Geometry::new(Level::Raid5, Layout::LeftSymmetric, 4, CHUNK).unwrap()
}

#[test]
fn a_start_empties_mds_log_so_that_no_later_start_replays_it() {
    let dir = tempdir("md-ppl-empty");
    let paths = make(dir.path());
    // Records of some earlier run, valid but stale: the array is clean, so md would not
    // replay them, and after this start nobody may.
    let sig = signature(&superblock(&paths[0]).set_uuid.0);
    let e =
        MdPplEntry { data_sector: 0, pp_size: 0, data_size: 3 * 4096, parity_disk: 3, checksum: 0 };
    let stale = MdPplHeader { signature: sig, generation: 9, entries: vec![e] };
    write(&paths[3], AREA_AT, &stale.encode());
    let md = MdArray::assemble(&paths, &options()).expect("md's PPL arrays assemble");
    assert_eq!(md.info().md_ppl, Some(uraid_md::md_ppl::MdPplStart::default()), "clean: no replay");
    let detail = uraid_md::status::render_detail(&md.status());
    assert!(detail.contains("Consistency Policy : ppl"), "mdadm's row:\n{detail}");
    let a = fill(1, 3 * CHUNK as usize);
    md.runtime().write_at(0, &a).unwrap();
    md.stop().unwrap();
    for p in &paths {
        let area = read(p, AREA_AT, usize::from(PPL_SECTORS) * 512);
        let empty = MdPplHeader { signature: sig, generation: 0, entries: vec![] };
        assert!(area[..HEADER_BYTES] == empty.encode()[..], "{}: md's empty header", p.display());
        assert!(area[HEADER_BYTES..].iter().all(|&b| b == 0), "the rest zeroed, as md does");
        let sb = superblock(p);
        assert_eq!(sb.feature_map & feature::PPL, feature::PPL, "the array keeps md's policy");
        assert_eq!(sb.resync_offset_sectors, MAX_SECTOR, "stopped clean");
    }
}

/// A clean array holding A over row 0, then a crash md's way: B landed on data chunk 0's
/// first block, the parity write did not, and the parity member's log holds the entry.
/// Returns the members, A, B and the slot of data chunk 1 (untouched by B).
fn crash(dir: &Path, good_checksum: bool) -> (Vec<PathBuf>, Vec<u8>, Vec<u8>, usize) {
    let paths = make(dir);
    let md = MdArray::assemble(&paths, &options()).unwrap();
    let a = fill(1, 3 * CHUNK as usize);
    md.runtime().write_at(0, &a).unwrap();
    md.stop().unwrap();
    let map = geometry().stripe_map(StripeNumber(0)).clone();
    let (d0, d1, p) = (map.data_disk[0].get(), map.data_disk[1].get(), map.p_disk.unwrap().get());
    let b = fill(2, BLOCK);
    write(&paths[d0], DATA_OFFSET, &b);
    // md's partial parity: the data blocks the write leaves alone.
    let mut pp = a[CHUNK as usize..][..BLOCK].to_vec();
    pp.iter_mut().zip(&a[2 * CHUNK as usize..][..BLOCK]).for_each(|(x, y)| *x ^= y);
    let checksum = uraid_format::md_ppl::crc32c(&pp) ^ u32::from(!good_checksum);
    let e = MdPplEntry {
        data_sector: 0,
        pp_size: 4096,
        data_size: 4096,
        parity_disk: p as u32,
        checksum,
    };
    let sig = signature(&superblock(&paths[0]).set_uuid.0);
    let header = MdPplHeader { signature: sig, generation: 3, entries: vec![e] };
    write(&paths[p], AREA_AT, &[header.encode(), pp].concat());
    mark_dirty(&paths);
    (paths, a, b, d1)
}

fn without(paths: &[PathBuf], slot: usize) -> Vec<PathBuf> {
    paths.iter().enumerate().filter(|(i, _)| *i != slot).map(|(_, p)| p.clone()).collect()
}

#[test]
fn a_torn_write_then_a_lost_member_is_mended_from_mds_log() {
    let dir = tempdir("md-ppl-hole");
    let (paths, a, b, victim) = crash(dir.path(), true);
    let md = MdArray::assemble(&without(&paths, victim), &options())
        .expect("dirty and degraded: md starts it with its PPL, and so does uraid");
    assert_row_mended(md, None, &a, &b);
}

/// The replay mended the crash's one entry (one parity block), and with member `fail` failed
/// now (if any) the row reads as A with B, the block of data chunk 1 from parity.
fn assert_row_mended(md: MdArray, fail: Option<usize>, a: &[u8], b: &[u8]) {
    let done = md.info().md_ppl.expect("md's PPL");
    assert_eq!((done.recovered_entries, done.mismatches, done.parity_blocks), (1, 0, 1));
    let rt = md.runtime().clone();
    if let Some(m) = fail {
        rt.fail_member(m);
    }
    assert!(rt.read_at(CHUNK, BLOCK).unwrap() == a[CHUNK as usize..][..BLOCK], "the lost block");
    let mut want = a.to_vec();
    want[..BLOCK].copy_from_slice(b);
    assert!(rt.read_at(0, want.len()).unwrap() == want, "the whole row: A with B");
    drop(rt);
    md.stop().unwrap();
}

/// The same crash with B's data member being rebuilt, in sync past row 0 (its recovery
/// offset half the member): the kernel reads its block for the entry. uraid counted it as
/// missing, left the row alone and still took the array as clean (no resync), so a member lost
/// afterwards had its block of the row rebuilt wrong (the eighth session of 2026-11-29).
#[test]
fn a_member_being_rebuilt_counts_below_its_recovery_offset() {
    let dir = tempdir("md-ppl-rebuilding");
    let (paths, a, b, victim) = crash(dir.path(), true);
    let d0 = geometry().stripe_map(StripeNumber(0)).data_disk[0].get();
    mark_recovering(&paths[d0], (MEMBER_BYTES / 512 - DATA_OFFSET_SECTORS) / 2);
    let md = MdArray::assemble(&paths, &options()).expect("dirty, one member being rebuilt");
    assert_row_mended(md, Some(victim), &a, &b);
}

#[test]
fn partial_parity_that_fails_its_checksum_mends_nothing_and_the_array_resyncs() {
    let dir = tempdir("md-ppl-mismatch");
    let (paths, a, _, victim) = crash(dir.path(), false);
    // Healthy: the mismatch is counted, nothing is written, and md's rule says resync.
    let md = MdArray::assemble(&paths, &options()).unwrap();
    let done = md.info().md_ppl.expect("md's PPL");
    assert_eq!((done.recovered_entries, done.mismatches, done.parity_blocks), (0, 1, 0));
    assert!(!done.leaves_clean(0));
    md.stop().unwrap();
    // The same crash degraded: nothing mends the stripe, so the lost block comes back wrong
    // (the test above fails without the replay).
    let (paths, ..) = crash(&dir.path().join("again"), false);
    let md = MdArray::assemble(&without(&paths, victim), &options()).unwrap();
    assert!(md.runtime().read_at(CHUNK, BLOCK).unwrap() != a[CHUNK as usize..][..BLOCK]);
    md.stop().unwrap();
}

/// A device added to an array with md's PPL gets its area emptied (md does the same when it
/// adds one): records there from some other life of the device must never be replayed.
#[test]
fn a_device_added_gets_an_empty_md_log() {
    let dir = tempdir("md-ppl-add");
    let paths = make(dir.path());
    let sig = signature(&superblock(&paths[0]).set_uuid.0);
    let spare = dir.path().join("spare.img");
    std::fs::File::create(&spare).unwrap().set_len(common::MEMBER_BYTES).unwrap();
    let e =
        MdPplEntry { data_sector: 0, pp_size: 0, data_size: 3 * 4096, parity_disk: 3, checksum: 0 };
    let stale = MdPplHeader { signature: sig, generation: 7, entries: vec![e] };
    write(&spare, AREA_AT, &stale.encode());
    let md = MdArray::assemble(&paths, &options()).unwrap();
    md.add(spare.to_str().unwrap()).expect("a spare is added");
    let area = read(&spare, AREA_AT, usize::from(PPL_SECTORS) * 512);
    let empty = MdPplHeader { signature: sig, generation: 0, entries: vec![] };
    assert!(area[..HEADER_BYTES] == empty.encode()[..], "md's empty header");
    assert!(area[HEADER_BYTES..].iter().all(|&b| b == 0));
    md.stop().unwrap();
}

/// Entries md would never write (its checksums intact: a crafted or foreign log) mend
/// nothing and count as mismatches: parity named on another member, sectors beyond the
/// array, a shape with more chunks than a stripe has.
#[test]
fn entries_md_would_not_write_mend_nothing() {
    let dir = tempdir("md-ppl-crafted");
    let paths = make(dir.path());
    let sb = superblock(&paths[0]);
    let map = geometry().stripe_map(StripeNumber(0)).clone();
    let p = map.p_disk.unwrap().get();
    let before: Vec<Vec<u8>> = paths.iter().map(|m| read(m, DATA_OFFSET, 4 * BLOCK)).collect();
    let pp = vec![0x77u8; BLOCK];
    let e = |data_sector, parity_disk, data_size| MdPplEntry {
        data_sector,
        pp_size: 4096,
        data_size,
        parity_disk,
        checksum: uraid_format::md_ppl::crc32c(&pp),
    };
    let entries = vec![
        e(0, ((p + 1) % 4) as u32, 4096), // P is on member p
        e(u64::MAX / 2, p as u32, 4096),  // beyond the array
        e(0, p as u32, 4 * 4096),         // four data chunks of three
    ];
    let header = MdPplHeader { signature: signature(&sb.set_uuid.0), generation: 5, entries };
    write(&paths[p], AREA_AT, &[header.encode(), pp.clone(), pp.clone(), pp].concat());
    mark_dirty(&paths);
    let md = MdArray::assemble(&paths, &options()).unwrap();
    let done = md.info().md_ppl.expect("md's PPL");
    assert_eq!((done.recovered_entries, done.mismatches, done.parity_blocks), (0, 3, 0));
    md.stop().unwrap();
    // The array was consistent (zeros), so the resync md's rule asks for changes nothing
    // either: whatever differs was written by the replay.
    for (m, was) in paths.iter().zip(&before) {
        assert!(read(m, DATA_OFFSET, 4 * BLOCK) == *was, "nothing written by the replay");
    }
}

/// While uraid runs such an array (active), its superblocks lack md's PPL bit: uraid's own log
/// covers a crash, md does not read it, and md would start a PPL array dirty and degraded
/// with its empty log mending nothing (a lost member's blocks in torn stripes then read back
/// wrong, silently). Without the bit md refuses that start, as for any array without a log;
/// uraid puts the bit back: a crash copy starts degraded under uraid (its log replayed), and
/// every clean stop writes the bit again.
#[test]
fn while_uraid_runs_it_mds_bit_is_off_so_a_crash_cannot_start_in_the_kernel_degraded() {
    let dir = tempdir("md-ppl-bit-off");
    let paths = make(dir.path());
    let md = MdArray::assemble(&paths, &options()).unwrap();
    let data = fill(3, 3 * CHUNK as usize);
    md.runtime().write_at(0, &data).unwrap();
    md.runtime().flush().unwrap();
    for p in &paths {
        let sb = superblock(p);
        assert_eq!(sb.feature_map & (feature::PPL | feature::MULTIPLE_PPLS), 0, "{}", p.display());
        assert_eq!(uraid_md::meta::md_ppl_taken_off(&sb), Some(feature::PPL));
        assert!(uraid_md::meta::uraid_wrote_last(&sb), "still uraid's run mark");
        assert_ne!(sb.resync_offset_sectors, MAX_SECTOR, "active");
    }
    let crashed: Vec<PathBuf> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let to = dir.path().join(format!("crash-m{i}.img"));
            std::fs::copy(p, &to).unwrap();
            to
        })
        .collect();
    md.stop().unwrap();
    for p in &paths {
        let sb = superblock(p);
        assert_eq!(sb.feature_map & feature::PPL, feature::PPL, "back at the clean stop");
        assert_eq!(uraid_md::meta::md_ppl_taken_off(&sb), None);
        assert_eq!(sb.resync_offset_sectors, MAX_SECTOR);
    }
    // The crash copy without a member: uraid knows the array and starts it without --force.
    let degraded = without(&crashed, 1);
    let md = MdArray::assemble(&degraded, &options()).expect("uraid starts its crash degraded");
    assert!(md.info().md_ppl.is_some(), "seen as md's PPL array");
    assert_eq!(md.runtime().read_at(0, data.len()).unwrap(), data);
    md.stop().unwrap();
    for p in &degraded {
        assert_eq!(superblock(p).feature_map & feature::PPL, feature::PPL, "{}", p.display());
    }
}

/// Read-only (md's --readonly), md's log is neither replayed nor emptied: the crash image is
/// read as the members hold it and left byte for byte, detail still names md's policy, and a
/// dirty degraded start needs --force (no replay mends the torn row first).
#[test]
fn read_only_leaves_mds_log_and_the_torn_row_as_they_are() {
    let dir = tempdir("md-ppl-read-only");
    let (paths, a, b, victim) = crash(dir.path(), true);
    let before: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let ro = MdOptions { read_only: true, ..options() };
    let md = MdArray::assemble(&paths, &ro).unwrap();
    assert_eq!(md.info().md_ppl, None, "not started read-only");
    let detail = uraid_md::status::render_detail(&md.status());
    assert!(detail.contains("Consistency Policy : ppl"), "{detail}");
    assert!(detail.contains("State : active, resync pending, read-only"), "{detail}");
    let mut want = a.clone();
    want[..BLOCK].copy_from_slice(&b);
    assert!(md.runtime().read_at(0, want.len()).unwrap() == want, "as the members hold it");
    md.stop().unwrap();
    let after: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(after == before, "a member changed");
    let err = MdArray::assemble(&without(&paths, victim), &ro).err().expect("md's rule");
    assert!(err.to_string().contains("cannot start dirty degraded array"), "{err}");
}
