//! Reading what a device says about itself (size, superblock area, bitmap) without writing,
//! naming md's numbers the way mdadm does, and the member source the runtime opens each slot
//! from. The `uraid` metadata verbs (examine, create, assemble) use these too.

use std::fs::File;
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use uraid_format::assemble::Candidate;
use uraid_format::{Level, OtherMetadata, V1_2_SUPER_OFFSET_SECTORS};
use uraid_io::{BadBlockList, FileMember, FileOptions, KnownBad, Member, MemoryMember};
use uraid_runtime::MemberSource;

/// Where v1.2 metadata keeps the superblock: 4 KiB into the member.
pub const SUPERBLOCK_OFFSET_BYTES: u64 = V1_2_SUPER_OFFSET_SECTORS * 512;
/// The superblock area md reads there (the superblock plus up to 1920 roles).
pub const SUPERBLOCK_AREA_BYTES: usize = 4096;

/// Size of a file or block device, measured by seeking to its end (a block device's metadata
/// length is 0). Anything else is refused (`uraid_io::check_member_kind`).
pub fn device_size_bytes(file: &File) -> io::Result<u64> {
    uraid_io::check_member_kind(&file.metadata()?)?;
    let mut file = file;
    file.seek(SeekFrom::End(0))
}

/// Reads `path`'s size and superblock area for assembly; errors become the candidate's read
/// error so that assembly refuses naming the member.
#[must_use]
pub fn read_candidate(path: &Path) -> Candidate {
    let name = path.display().to_string();
    let read = || -> io::Result<(u64, Vec<u8>, Option<OtherMetadata>)> {
        let file = uraid_io::open_member_path(path, false)?;
        let size_bytes = device_size_bytes(&file)?;
        let mut area = vec![0u8; SUPERBLOCK_AREA_BYTES];
        let end = SUPERBLOCK_OFFSET_BYTES + SUPERBLOCK_AREA_BYTES as u64;
        if size_bytes < end {
            return Err(io::Error::other(format!(
                "{size_bytes} bytes: too small to hold an md v1.2 superblock (it ends at byte {end})"
            )));
        }
        file.read_exact_at(&mut area, SUPERBLOCK_OFFSET_BYTES)?;
        let other = if area[..4] == MD_MAGIC_BYTES {
            None
        } else {
            other_metadata(&file, size_bytes).map(|(found, _)| found)
        };
        Ok((size_bytes, area, other))
    };
    match read() {
        Ok((size_bytes, area, other_metadata)) => {
            Candidate { name, size_bytes, superblock_area: Ok(area), other_metadata }
        }
        Err(e) => {
            let size_bytes = uraid_io::open_member_path(path, false)
                .and_then(|f| device_size_bytes(&f))
                .unwrap_or(0);
            Candidate {
                name,
                size_bytes,
                superblock_area: Err(e.to_string()),
                other_metadata: None,
            }
        }
    }
}

/// md's superblock magic as it starts a v1.x superblock.
pub const MD_MAGIC_BYTES: [u8; 4] = 0xa92b_4efc_u32.to_le_bytes();

/// The first format uraid does not assemble whose magic `file` holds in its place, if any,
/// and the byte it starts at: a device of another array must not be called blank (nor
/// created over without --force).
#[must_use]
pub fn other_metadata(file: &File, size_bytes: u64) -> Option<(OtherMetadata, u64)> {
    OtherMetadata::places(size_bytes).into_iter().find_map(|(found, at)| {
        let mut bytes = [0u8; OtherMetadata::PROBE_BYTES];
        file.read_exact_at(&mut bytes, at).ok()?;
        found.recognise(&bytes).then_some((found, at))
    })
}

/// `read_candidate` for assembly: with md's PPL bit put back where uraid took it off while
/// the array was active (`meta::restore_md_ppl`), so that the plan, the areas and the start
/// rules see the array as it is.
#[must_use]
pub fn read_candidate_to_assemble(path: &Path) -> Candidate {
    let mut c = read_candidate(path);
    if let Ok(area) = &mut c.superblock_area
        && let Ok(mut sb) = uraid_format::Superblock1::decode(area)
        && crate::meta::restore_md_ppl(&mut sb)
    {
        sb.encode_into(area);
    }
    c
}

/// Zeroes the magic of another format's metadata on `path` (a device that joins an array with
/// --force over it), so that no tool finds a second array on it. Returns what was erased.
pub fn erase_other_metadata(path: &Path) -> io::Result<Option<OtherMetadata>> {
    let file = uraid_io::open_member_path(path, true)?;
    let size_bytes = device_size_bytes(&file)?;
    let Some((found, at)) = other_metadata(&file, size_bytes) else { return Ok(None) };
    file.write_all_at(&[0u8; OtherMetadata::PROBE_BYTES], at)?;
    file.sync_data()?;
    Ok(Some(found))
}

/// The engine's level for an md level uraid serves (4, 5, 6).
#[must_use]
pub fn core_level(level: Level) -> Option<uraid_core::Level> {
    match level {
        Level::Raid4 => Some(uraid_core::Level::Raid4),
        Level::Raid5 => Some(uraid_core::Level::Raid5),
        Level::Raid6 => Some(uraid_core::Level::Raid6),
        _ => None,
    }
}

/// mdadm's name for a (level, layout number) pair, or the number when it has none.
#[must_use]
pub fn layout_name(level: Level, layout: u32) -> String {
    core_level(level)
        .and_then(|level| uraid_core::Layout::from_md(level, layout).ok())
        .map_or_else(|| layout.to_string(), |layout| layout.name().to_owned())
}

/// Reads `len` bytes at `at` of `path`.
pub fn read_at(path: &Path, at: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    File::open(path)?.read_exact_at(&mut buf, at)?;
    Ok(buf)
}

/// The internal bitmap of the member at `path` whose superblock is `sb`, read as md reads it
/// (`BitmapSuper::decode_for`: its bits counted over the component size, and none past the
/// data): its superblock, and its whole image (superblock and bits). Err says why not.
pub fn read_bitmap(
    path: &Path,
    sb: &uraid_format::Superblock1,
) -> Result<(uraid_format::BitmapSuper, Vec<u8>), String> {
    let at = sb.bitmap_at_bytes().ok_or("bitmap offset before the device start")?;
    let reading = |e: io::Error| format!("reading the bitmap: {e}");
    let head = read_at(path, at, uraid_format::BITMAP_SUPER_BYTES).map_err(reading)?;
    let bitmap = uraid_format::BitmapSuper::decode_for(&head, sb).map_err(|e| e.to_string())?;
    let image = read_at(path, at, uraid_format::BITMAP_SUPER_BYTES + bitmap.bits_bytes())
        .map_err(reading)?;
    Ok((bitmap, image))
}

/// The byte ranges of `path` its md bad block log names (`uraid_format::decode_bad_blocks`),
/// `normalized`, empty when it names none. An unreadable or malformed log is an error: md refuses
/// such a superblock, and reading through ranges md knows are bad would return stale data.
pub fn known_bad_bytes(path: &Path) -> io::Result<Vec<std::ops::Range<u64>>> {
    let area = read_at(path, SUPERBLOCK_OFFSET_BYTES, SUPERBLOCK_AREA_BYTES)?;
    let sb = uraid_format::Superblock1::decode(&area).map_err(io::Error::other)?;
    let bad = bad_block_entries(path, &sb)?;
    let bytes = bad.iter().map(|r| r.start_sector * 512..(r.start_sector + r.sectors) * 512);
    Ok(uraid_io::known_bad::normalized(bytes.collect()))
}

/// The entries of `path`'s md bad block log as md keeps them (device sectors, in the log's
/// order), `sb` being its superblock; empty when the superblock says the log holds none.
/// A log that shares its place with the bitmap (`bad_block_log_in_bitmap`) is read as empty.
pub fn bad_block_entries(
    path: &Path,
    sb: &uraid_format::Superblock1,
) -> io::Result<Vec<uraid_format::BadRange>> {
    let Some((at, sectors)) = sb.bad_block_log() else { return Ok(Vec::new()) };
    if bad_block_log_in_bitmap(path, sb)? {
        return Ok(Vec::new());
    }
    let log = read_at(path, at * 512, usize::from(sectors) * 512)?;
    uraid_format::decode_bad_blocks(&log, sb.bblog_shift)
        .map_err(|e| io::Error::other(format!("{}: {e}", path.display())))
}

/// Whether `path`'s bad block log lies inside its internal bitmap (`sb`: its superblock);
/// false when the bitmap's superblock does not decode (the assembly reports that itself).
pub fn bad_block_log_in_bitmap(path: &Path, sb: &uraid_format::Superblock1) -> io::Result<bool> {
    if !sb.has_bitmap() || sb.bblog_offset_sectors == 0 {
        return Ok(false);
    }
    let Some(at) = sb.bitmap_at_bytes() else { return Ok(false) };
    let head = read_at(path, at, uraid_format::BITMAP_SUPER_BYTES)?;
    let bitmap = uraid_format::BitmapSuper::decode_for(&head, sb);
    Ok(bitmap.is_ok_and(|b| sb.bad_block_log_in_bitmap(&b)))
}

/// A member file, behind `KnownBad` when its bad block log names ranges.
pub fn open_member(path: &Path, options: FileOptions) -> io::Result<Box<dyn Member>> {
    let file = FileMember::open(path, options)?;
    read_around_log(Box::new(file), path)
}

/// `member` behind `KnownBad` when `path`'s bad block log names ranges.
fn read_around_log(member: Box<dyn Member>, path: &Path) -> io::Result<Box<dyn Member>> {
    let bad = known_bad_bytes(path)?;
    if bad.is_empty() {
        Ok(member)
    } else {
        Ok(Box::new(KnownBad::new(member, BadBlockList::fixed(bad))))
    }
}

/// Fault injection for tests and drills (what md's faulty personality or dm-flakey give the
/// kernel): every member device a slot opens is handed over, with its slot, and what comes
/// back (a `uraid_io::Faulty` around it, say) is used instead, under the bad block layer,
/// which takes its errors for a disk's.
#[derive(Clone)]
pub struct MemberFaults(pub Arc<dyn Fn(usize, FileMember) -> Box<dyn Member> + Send + Sync>);

impl std::fmt::Debug for MemberFaults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemberFaults")
    }
}

/// Each slot's device, or none (an empty slot: a stand-in that is failed and gets no I/O).
/// A device with a bad block list (`Device::bad_blocks`) reads around it and lists the data
/// writes that fail; one without reads around what its log names (`open_member`).
pub struct SlotSource {
    pub paths: Vec<Option<PathBuf>>,
    pub options: FileOptions,
    /// Per slot: its device's list, shared by every worker's instance.
    pub bad_blocks: Vec<Option<Arc<BadBlockList>>>,
    pub faults: Option<MemberFaults>,
}

impl SlotSource {
    /// The devices of `paths` without lists of their own (each reads its log).
    #[must_use]
    pub fn new(paths: Vec<Option<PathBuf>>, options: FileOptions) -> SlotSource {
        SlotSource { bad_blocks: vec![None; paths.len()], paths, options, faults: None }
    }
}

impl MemberSource for SlotSource {
    fn member_count(&self) -> usize {
        self.paths.len()
    }

    fn open(&self, member: usize) -> io::Result<Box<dyn Member>> {
        let Some(path) = &self.paths[member] else {
            return Ok(Box::new(MemoryMember::new(&format!("missing-{member}"), 0)));
        };
        let file = FileMember::open(path, self.options)?;
        let device = match &self.faults {
            Some(faults) => (faults.0)(member, file),
            None => Box::new(file),
        };
        match &self.bad_blocks[member] {
            Some(list) => Ok(Box::new(KnownBad::new(device, list.clone()))),
            None => read_around_log(device, path),
        }
    }
}
