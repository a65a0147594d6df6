//! `uraid create`: write md v1.2 superblocks (and an internal bitmap if asked) onto existing
//! member files or devices, set the way `mdadm --create --metadata=1.2` sets them
//! (`uraid_format::create`), so that mdadm and the Linux md driver accept the array.
//!
//! Everything is decided and every superblock built before the first byte is written: a
//! refusal (wrong member count, a member too small, a member that already holds md or
//! firmware RAID metadata without --force) leaves every member untouched. Only the metadata
//! area in front of the data is written; the data area is not touched (but for the magic of
//! another format's superblock, zeroed with --force), so the parity of a new array is not
//! initialised: the array is marked as needing a full resync (resync_offset 0), as md does
//! after create, unless --assume-clean says the members already agree (all zeros, for
//! example).

use crate::args::{parse_bitmap_chunk, parse_size};
use crate::cmd::md_meta::{SUPERBLOCK_AREA_BYTES, SUPERBLOCK_OFFSET_BYTES, device_size_bytes};
use anyhow::{Context, bail, ensure};
use clap::Args;
use std::fs::{File, TryLockError};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::time::{SystemTime, UNIX_EPOCH};
use uraid_core::{Geometry, Layout, Level as CoreLevel};
use uraid_format::create::{
    BITMAP_OFFSET_SECTORS, NewArray, NewMember, build_bitmap, build_superblock_with,
    choose_bitmap_space_sectors, default_data_offset_sectors,
};
use uraid_format::{
    BITMAP_SUPER_BYTES, BitmapSuper, DevRole, Level, OtherMetadata, Superblock1, Uuid,
    V1_2_SUPER_OFFSET_SECTORS, WriteIntentBitmap,
};
use uraid_io::{same_file_message, same_file_twice};

#[derive(Args)]
#[command(
    about = "Create an md v1.2 array: write superblocks onto existing members",
    long_about = "Create an md v1.2 array (readable by mdadm and Linux md) by writing \
superblocks, and an internal write-intent bitmap with --bitmap internal, onto existing member \
files or devices given in role order. Members must exist: make image files first, e.g. with \
truncate. The data area is not written, so the array is marked as needing a full resync \
(md does one when it starts the array) unless --assume-clean says the members already agree \
(for example all zeros). A member that already holds an md superblock (any version) or \
firmware RAID metadata (DDF, Intel IMSM) is refused unless --force, which also erases the \
old format's magic (but not inside the data of an --assume-clean array). As with mdadm, \
`missing` in place of a member leaves its slot empty (as many as the level survives): the \
array starts degraded and a device added later is rebuilt into it; RAID6 with one missing \
makes one given member a spare, rebuilt at the first start. Sizes take mdadm's units: a bare \
number is KiB; K, M, G, T, s (sectors), b (bytes).",
    after_help = "Example:\n  truncate -s 64M m0.img m1.img m2.img m3.img\n  uraid create \
--level 5 --raid-devices 4 --chunk 64K --name demo --bitmap internal --bitmap-chunk 1M m0.img m1.img m2.img m3.img"
)]
pub struct CreateArgs {
    /// RAID level: 4, 5 or 6.
    #[arg(short, long)]
    pub(crate) level: String,
    /// Number of members; must match the members given.
    #[arg(short = 'n', long)]
    pub(crate) raid_devices: usize,
    /// md layout name (default: left-symmetric for 5 and 6; RAID4 keeps parity last).
    #[arg(short = 'p', long)]
    pub(crate) layout: Option<String>,
    /// Chunk size.
    #[arg(short, long, default_value = "512K")]
    pub(crate) chunk: String,
    /// Array name stored in the superblock (at most 31 bytes).
    #[arg(short = 'N', long, default_value = "uraid")]
    pub(crate) name: String,
    /// Write-intent bitmap: internal or none.
    #[arg(short, long, default_value = "none", value_parser = ["internal", "none"])]
    pub(crate) bitmap: String,
    /// Bytes of each member's data a bitmap bit covers (mdadm's --bitmap-chunk; default:
    /// mdadm's choice, at least 64M). Smaller chunks make a resync after a crash shorter.
    #[arg(long, value_name = "SIZE")]
    pub(crate) bitmap_chunk: Option<String>,
    /// The members already agree (parity matches data): mark the array clean, skip the resync.
    #[arg(long)]
    pub(crate) assume_clean: bool,
    /// Array UUID in mdadm's form (default: random).
    #[arg(long)]
    pub(crate) uuid: Option<String>,
    /// Where data starts on each member (default: mdadm's, 1 MiB-aligned).
    #[arg(long)]
    pub(crate) data_offset: Option<String>,
    /// Data bytes used on each member (default: the smallest member's data area).
    #[arg(short = 'z', long)]
    pub(crate) size: Option<String>,
    /// Overwrite members that already hold an md superblock.
    #[arg(short, long)]
    pub(crate) force: bool,
    /// Print what was created as JSON on standard output.
    #[arg(long)]
    pub(crate) json: bool,
    /// Member files or devices in role order; `missing` for a slot left empty.
    #[arg(required = true)]
    pub(crate) members: Vec<String>,
}

pub fn run(args: &CreateArgs) -> anyhow::Result<()> {
    let level = CoreLevel::parse(&args.level)?;
    ensure!(level != CoreLevel::Raid0, "uraid create makes RAID 4, 5 or 6 arrays");
    let layout = args.layout.as_deref().map_or(Ok(level.default_layout()), Layout::parse)?;
    check_counts_and_name(args)?;
    let chunk_bytes = parse_size(&args.chunk)?;
    let geometry = Geometry::new(level, layout, args.raid_devices, chunk_bytes)?;
    let roles = slot_roles(args, geometry.max_degraded())?;
    let present: Vec<(usize, &String)> =
        args.members.iter().enumerate().filter(|(_, m)| *m != MISSING).collect();
    let paths: Vec<String> = present.iter().map(|(_, m)| (*m).clone()).collect();
    let files = open_members(&paths, args.force)?;
    let sizes: Vec<u64> = files.iter().map(|m| m.size / 512).collect();
    let degraded = roles.iter().any(|r| !matches!(r, DevRole::Active(_)));
    let array = new_array(args, level, layout, chunk_bytes, &sizes, degraded)?;
    let bitmap = choose_bitmap(args, &array)?;
    let mut superblocks = Vec::new();
    for ((index, path), device_sectors) in present.iter().zip(&sizes) {
        let member = NewMember {
            dev_number: *index as u32,
            device_uuid: random_uuid()?,
            device_sectors: *device_sectors,
            dev_roles: &roles,
        };
        let superblock = build_superblock_with(&array, &member, bitmap.as_ref())
            .with_context(|| format!("member {index} ({path})"))?;
        superblocks.push(superblock);
    }
    for (member, (superblock, path)) in files.iter().zip(superblocks.iter().zip(&paths)) {
        if let Some(other) = member.other {
            erase_other_metadata(member, other, path, &array)
                .with_context(|| format!("erasing {} on {path}", other.0.describe()))?;
        }
        write_metadata(&member.file, superblock, &array, bitmap.as_ref())
            .with_context(|| format!("writing metadata to {path}"))?;
    }
    tell_created(args, &array, layout, chunk_bytes, bitmap.as_ref(), degraded);
    if args.json {
        return Ok(());
    }
    if let Some((_, spare)) = present.iter().find(|(i, _)| roles[*i] == DevRole::Spare) {
        say!(
            "uraid create: {spare} is a spare, rebuilt at the first start: RAID6 with one \
             member missing starts degraded by two (its parity is not made yet), as mdadm does"
        );
    }
    warn_about_members(&paths, args.size.is_some(), &array, &sizes);
    Ok(())
}

/// What was created: JSON on standard output with --json, else one line on standard error.
fn tell_created(
    args: &CreateArgs,
    array: &NewArray<'_>,
    layout: Layout,
    chunk_bytes: u64,
    bitmap: Option<&BitmapSuper>,
    degraded: bool,
) {
    if args.json {
        let report = serde_json::json!({
            "level": array.level.to_md(),
            "layout": layout.name(),
            "name": array.name,
            "uuid": array.set_uuid.to_string(),
            "raid_disks": array.raid_disks,
            "chunk_bytes": chunk_bytes,
            "component_sectors": array.size_sectors,
            "data_offset_sectors": array.data_offset_sectors,
            "bitmap_chunk_bytes": bitmap.map(|b| b.chunk_bytes),
            "clean": array.clean,
            "members": args.members,
        });
        out!("{report}");
        return;
    }
    let state = match (array.clean, degraded) {
        (true, true) => "degraded: missing members are rebuilt onto devices added later",
        (true, false) => "clean (--assume-clean)",
        (false, _) => "needs a full resync",
    };
    let bitmap_text = bitmap.map_or_else(
        || "none".to_owned(),
        |b| format!("internal, {}K chunk", b.chunk_bytes / 1024),
    );
    say!(
        "uraid create: {} {} {}, {} members, chunk {}K, component {} sectors, data offset {} \
         sectors, uuid {}, bitmap {bitmap_text}, {state}",
        array.level,
        layout.name(),
        array.name,
        array.raid_disks,
        chunk_bytes / 1024,
        array.size_sectors,
        array.data_offset_sectors,
        array.set_uuid,
    );
}

/// mdadm's word for a slot created empty.
const MISSING: &str = "missing";

/// Each slot's role in the superblocks' table, by dev_number (the member's place in the list):
/// active, or for a `missing` slot mdadm's 0xffff. As mdadm, the array may be created with
/// as many missing as it survives; RAID6 with one missing would start dirty and degraded (its
/// parity not made, no resync possible in md), so one present member is made a spare instead,
/// rebuilt at the first start: the last, or the one before when the last is missing.
fn slot_roles(args: &CreateArgs, max_degraded: usize) -> anyhow::Result<Vec<DevRole>> {
    let missing: Vec<usize> =
        (0..args.members.len()).filter(|&i| args.members[i] == MISSING).collect();
    let n = args.members.len();
    ensure!(missing.len() < n, "every member is missing: nothing to create the array on");
    ensure!(
        missing.len() <= max_degraded,
        "{} members missing, but the level survives {max_degraded}",
        missing.len()
    );
    let mut roles: Vec<DevRole> = (0..n)
        .map(|i| if missing.contains(&i) { DevRole::Spare } else { DevRole::Active(i as u16) })
        .collect();
    if max_degraded == 2 && missing.len() == 1 && !args.assume_clean {
        let spare = if missing[0] == n - 1 { n - 2 } else { n - 1 };
        roles[spare] = DevRole::Spare;
    }
    Ok(roles)
}

/// What the arguments alone say is wrong, before any member is opened.
fn check_counts_and_name(args: &CreateArgs) -> anyhow::Result<()> {
    let (wanted, given) = (args.raid_devices, args.members.len());
    ensure!(given == wanted, "--raid-devices {wanted} but {given} members given");
    // md's set_name is 32 bytes, NUL-terminated.
    let name_bytes = args.name.len();
    ensure!(name_bytes <= 31, "--name: {name_bytes} bytes, at most 31 fit md's superblock");
    Ok(())
}

/// A member opened for create.
struct OpenMember {
    file: File,
    size: u64,
    /// Another format's metadata on it, and where (`--force` given).
    other: Option<(OtherMetadata, u64)>,
}

/// Opens every member for writing and measures it; refuses a member given twice (by any
/// path), one a running `uraid serve` holds (even --force must not rewrite a live array's
/// superblocks: the files keep the lock until create returns), and members holding md
/// metadata of any version, or firmware RAID metadata (mdadm asks before it creates over
/// those).
fn open_members(paths: &[String], force: bool) -> anyhow::Result<Vec<OpenMember>> {
    if let Some((i, j)) = same_file_twice(paths) {
        bail!(same_file_message(&paths[i], &paths[j]));
    }
    let mut files = Vec::new();
    for path in paths {
        let file = uraid_io::open_member_path(std::path::Path::new(path), true)
            .with_context(|| format!("cannot open member {path} (members must exist)"))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                bail!("{path} is in use: a running uraid serve holds it")
            }
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {path}"));
            }
        }
        let size = device_size_bytes(&file).with_context(|| format!("size of {path}"))?;
        let mut area = vec![0u8; SUPERBLOCK_AREA_BYTES];
        let has_md = file.read_exact_at(&mut area, SUPERBLOCK_OFFSET_BYTES).is_ok()
            && Superblock1::decode(&area).is_ok();
        if has_md && !force {
            bail!("{path} already holds an md superblock; use --force to overwrite it");
        }
        // Probed beside a v1.2 superblock too, so that --force erases both.
        let other = uraid_md::members::other_metadata(&file, size);
        if let Some((found, _)) = other
            && !force
        {
            bail!(
                "{path} holds {}: a member of another array? use --force to create over it",
                found.describe()
            );
        }
        files.push(OpenMember { file, size, other });
    }
    Ok(files)
}

/// What the members given may cost: space unused on larger ones, and sparse files their file
/// system cannot fill.
fn warn_about_members(paths: &[String], sized: bool, array: &NewArray<'_>, sizes: &[u64]) {
    // mdadm's warning: the component is the smallest member's; the rest of a larger one is
    // unused (it asks to go on past 1%; a script-friendly create says it).
    let used = array.data_offset_sectors + array.size_sectors;
    let smallest = sizes.iter().copied().min().unwrap_or_default();
    for (path, &sectors) in paths.iter().zip(sizes).filter(|_| !sized) {
        if (sectors - smallest) * 100 > smallest {
            let unused_mib = ((sectors - used) * 512) >> 20;
            let size = "the component size";
            say!("uraid create: warning: {path} exceeds {size} by {unused_mib} MiB, unused");
        }
    }
    let members: Vec<std::path::PathBuf> = paths.iter().map(Into::into).collect();
    for short in uraid_io::file_space::sparse_shortfalls(&members) {
        say!("uraid create: warning: {short}");
    }
}

fn new_array<'a>(
    args: &'a CreateArgs,
    level: CoreLevel,
    layout: Layout,
    chunk_bytes: u64,
    sizes: &[u64],
    degraded: bool,
) -> anyhow::Result<NewArray<'a>> {
    let chunk_sectors = chunk_bytes / 512;
    let smallest = sizes.iter().copied().min().expect("members were given");
    let data_offset_sectors = match &args.data_offset {
        Some(text) => data_offset_sectors(text)?,
        None => default_data_offset_sectors(smallest, chunk_sectors as u32),
    };
    let available = smallest.saturating_sub(data_offset_sectors);
    let wanted = args.size.as_deref().map(parse_size).transpose()?.map(|b| b / 512);
    if let Some(wanted) = wanted {
        ensure!(wanted <= available, "--size {wanted} sectors exceeds the {available} available");
    }
    let size_sectors = wanted.unwrap_or(available) / chunk_sectors * chunk_sectors;
    ensure!(
        size_sectors > 0,
        "the smallest member has {smallest} sectors: no whole chunk fits after data offset \
         {data_offset_sectors}"
    );
    let set_uuid = match &args.uuid {
        Some(text) => text.parse::<Uuid>()?,
        None => random_uuid()?,
    };
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Ok(NewArray {
        set_uuid,
        name: &args.name,
        level: Level::from_md(i32::from(level.number())).expect("4, 5 and 6 are md levels"),
        // md ignores the field for RAID4 and mdadm stores 0 there (the r4 fixture).
        layout: if level == CoreLevel::Raid4 { 0 } else { layout.md_number() },
        chunk_sectors: chunk_sectors as u32,
        raid_disks: args.raid_devices as u32,
        size_sectors,
        data_offset_sectors,
        ctime_seconds: now,
        utime_seconds: now,
        events: 1,
        // md cannot resync a degraded array: its parity is made by the rebuilds (mdadm marks
        // such an array clean).
        clean: args.assume_clean || degraded,
        internal_bitmap: args.bitmap == "internal",
    })
}

/// `--data-offset`: whole 4 KiB units from 8 KiB on. The data must start after the 4 KiB
/// superblock area at 4 KiB (which create writes whole, as md keeps it), and on a 4 KiB
/// boundary, so that O_DIRECT I/O to a disk of 4 KiB sectors stays aligned (md accepts any
/// offset past the superblock; mdadm's own are 1 MiB multiples).
pub(crate) fn data_offset_sectors(text: &str) -> anyhow::Result<u64> {
    let bytes = parse_size(text)?;
    let start = SUPERBLOCK_OFFSET_BYTES + SUPERBLOCK_AREA_BYTES as u64;
    ensure!(
        bytes >= start,
        "--data-offset {text}: the data would overlap the md superblock, which takes bytes \
         {SUPERBLOCK_OFFSET_BYTES}..{start} of each member: at least 8K"
    );
    ensure!(
        bytes.is_multiple_of(4096),
        "--data-offset {text}: not a multiple of 4K (the data must start 4 KiB aligned)"
    );
    Ok(bytes / 512)
}

/// The bitmap superblock: mdadm's default, or the chunk asked for if its bits fit the room
/// mdadm leaves for the bitmap.
fn choose_bitmap(args: &CreateArgs, array: &NewArray<'_>) -> anyhow::Result<Option<BitmapSuper>> {
    if !array.internal_bitmap {
        ensure!(args.bitmap_chunk.is_none(), "--bitmap-chunk needs --bitmap internal");
        return Ok(None);
    }
    let Some(text) = &args.bitmap_chunk else {
        let bitmap = build_bitmap(array);
        check_bitmap_before_data(array, &bitmap)?;
        return Ok(Some(bitmap));
    };
    let chunk = u64::from(parse_bitmap_chunk(text)?);
    let bits = (array.size_sectors * 512).div_ceil(chunk);
    let room_bytes = choose_bitmap_space_sectors(array.size_sectors) * 512;
    let fits = room_bytes.saturating_sub(BITMAP_SUPER_BYTES as u64) * 8;
    ensure!(
        bits <= fits,
        "--bitmap-chunk {text}: {bits} bits do not fit the {room_bytes} bytes of bitmap room; \
         use a larger chunk"
    );
    let bitmap = BitmapSuper::new_internal(array.set_uuid, array.size_sectors, chunk as u32);
    check_bitmap_before_data(array, &bitmap)?;
    Ok(Some(bitmap))
}

/// The bitmap (4 KiB after the superblock) must end before the data: a small `--data-offset`
/// with many bits would have md write the bitmap over the array's first blocks.
fn check_bitmap_before_data(array: &NewArray<'_>, bitmap: &BitmapSuper) -> anyhow::Result<()> {
    let end = V1_2_SUPER_OFFSET_SECTORS
        + BITMAP_OFFSET_SECTORS as u64
        + (bitmap.reserved_bytes() / 512) as u64;
    ensure!(
        end <= array.data_offset_sectors,
        "the bitmap ({} KiB from 8 KiB) would run to sector {end}, past the data offset ({} \
         sectors): use a larger --data-offset or --bitmap-chunk",
        bitmap.reserved_bytes() >> 10,
        array.data_offset_sectors
    );
    Ok(())
}

/// Writes the 4 KiB superblock area (zero-padded, as md keeps it) and the bitmap, then syncs.
fn write_metadata(
    file: &File,
    superblock: &Superblock1,
    array: &NewArray<'_>,
    bitmap: Option<&BitmapSuper>,
) -> anyhow::Result<()> {
    let mut area = vec![0u8; SUPERBLOCK_AREA_BYTES];
    superblock.encode_into(&mut area);
    file.write_all_at(&area, SUPERBLOCK_OFFSET_BYTES)?;
    if let Some(bitmap) = bitmap {
        let bits = if array.clean {
            WriteIntentBitmap::new_clean(bitmap)
        } else {
            WriteIntentBitmap::new_all_dirty(bitmap)
        };
        let offset_sectors = u64::try_from(superblock.bitmap_offset_sectors)?;
        let at = SUPERBLOCK_OFFSET_BYTES + offset_sectors * 512;
        let mut bytes = bitmap.encode().to_vec();
        bytes.extend_from_slice(bits.encode());
        file.write_all_at(&bytes, at)?;
    }
    file.sync_all()?;
    Ok(())
}

/// With --force over another format's metadata: its magic is zeroed, so that mdadm, the
/// kernel and blkid do not find a second array on the device. Left in place (and said) where
/// it lies in the data of an array created --assume-clean: the members are said to agree
/// with their parity there, and zeroing bytes would break that. Without it, the data area
/// is not in sync anyway (the resync makes parity from the data as it is).
fn erase_other_metadata(
    member: &OpenMember,
    (found, at): (OtherMetadata, u64),
    path: &str,
    array: &NewArray<'_>,
) -> anyhow::Result<()> {
    let start = array.data_offset_sectors * 512;
    let end = start + array.size_sectors * 512;
    if array.clean && at < end && at + OtherMetadata::PROBE_BYTES as u64 > start {
        say!(
            "uraid create: {path}: the old {} is left in place: it lies in the new array's \
             data, which --assume-clean says matches its parity (`mdadm --zero-superblock` \
             before create erases it)",
            found.describe()
        );
        return Ok(());
    }
    member.file.write_all_at(&[0u8; OtherMetadata::PROBE_BYTES], at)?;
    say!("uraid create: {path}: erased the old {} (its magic at byte {at})", found.describe());
    Ok(())
}

pub(crate) fn random_uuid() -> anyhow::Result<Uuid> {
    let mut bytes = [0u8; 16];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .context("reading /dev/urandom for a UUID")?;
    Ok(Uuid(bytes))
}
