//! `uraid grow`: mdadm --grow --size, --bitmap and --raid-devices on a stopped array (the
//! last, a reshape, in `reshape.rs`). After its members were
//! replaced one by one with larger devices (or grown files, or an array created with --size
//! smaller than its members), the array takes the new room: each member's usable size, the
//! component size and the bitmap's cover grow in the superblocks as md grows them
//! (`uraid_format::grow`, `resized_bitmap`), and the new space resyncs at the next start,
//! uraid's or the kernel's. With `--shrink` the size may go down (md's shrink, asked for by
//! name here since it cuts the array's end off): the bitmap keeps its chunk, nothing resyncs.
//! `--bitmap internal|none` adds or removes the write-intent bitmap
//! (`uraid_format::grow::add_bitmap`). The data is not touched.
//!
//! Offline on purpose: an NBD client cannot be told its export grew (the protocol has no
//! resize), so the array is stopped, grown, and served again. A member a running array holds
//! is refused (the member lock; O_EXCL on a block device).

use crate::args::{parse_bitmap_chunk, parse_size};
use crate::cmd::md_meta::{SUPERBLOCK_OFFSET_BYTES, open_exclusive, read_candidate_to_assemble};
use crate::cmd::scan::{Selected, Selection};
use anyhow::{Context, bail};
use clap::Args;
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};
use uraid_core::Layout;
use uraid_format::assemble::{AssembleOptions, AssemblyPlan, Candidate, PlannedMember, plan};
use uraid_format::grow::reshape::NewShape;
use uraid_format::grow::{
    GrowError, MemberRoom, SizeChange, SizeTarget, add_bitmap, refuse_unless_whole_and_clean,
    resized_superblock, with_bitmap_field,
};
use uraid_format::{BITMAP_SUPER_BYTES, BitmapSuper, Superblock1, WriteIntentBitmap};

#[derive(Args)]
#[command(
    about = "Grow or shrink a stopped array: its members' room, more or fewer members, another \
layout, chunk or level, or its bitmap (mdadm --grow --size, --raid-devices, --bitmap)",
    long_about = "Change a stopped array as mdadm --grow changes a running one. `--size max` \
lets it use more of its members: after they were replaced with larger devices (or their files \
grown, or the array created with --size below their room), each member's used size grows to \
what the smallest member in a slot holds past the data offset (in whole chunks), or to the size \
given; the internal bitmap follows as md's does (its chunk doubles when its bits would not fit \
their room) and the new space is resynced at the next start, by uraid or by the kernel. \
`--size SIZE --shrink` makes it smaller, as md does when asked for a smaller size: the array's \
data past its new end is lost (shrink the filesystem on it first), the bitmap keeps its chunk, \
nothing resyncs. \
`--raid-devices N` reshapes the array onto N members as md does: spares given with the members \
(added with `uraid add` while it was served) take the new slots in the order given, the data \
is restriped from the first sector on and moves down into the room mdadm keeps before it (no \
backup file: at least a chunk of room), and the new space reads as zeros. Fewer members, with \
--shrink, are md's reshape backwards: the array keeps what the fewer members hold (its data \
past that is lost: shrink the filesystem on it first), restriped from its new end down, the \
data moving up by mdadm's least move into the room after it (none: make some with --size \
--shrink first), and the removed members stay as spares. `--layout` and \
`--chunk` reshape it to another layout of its level or another chunk size, with or without \
new members (on the same members the data moves by about half the room, as mdadm's: down \
into the room before it, or up into the room after it when there is more there; \
--data-offset puts it where asked, as mdadm's). \
`--level` is md's takeover: RAID4 or RAID5 to RAID6 with one more member (the first spare \
given), as md with mdadm's --layout=preserve: nothing moves, the layout becomes its `-6` kin \
(Q on the new member, built as a rebuild when the array is next served); RAID6 to RAID5 with \
one member fewer, the last (Q's), which stays as a spare; RAID4 to RAID5 parity-last and \
back. As mdadm, a RAID6 in a rotating layout is first restriped to its `-6` kin, a RAID5 to \
parity-last for RAID4; `--level 5 --layout L` ends in L (a RAID6 restriped to L's `-6` kin \
first, a RAID4 restriped to L after); `--level 6 --layout L` is mdadm's default one pass: \
taken over, then restriped to L, the restripe building Q as it goes (nothing to rebuild \
after). \
Each window is made durable before its end is recorded in the superblocks, so a crash \
or Ctrl-C leaves a reshape that `--continue` (or the kernel) takes up where it stopped; the \
array is not served until it is done. `--bitmap internal` adds a write-intent bitmap where md \
adds one (8 sectors past the \
superblock; --bitmap-chunk, or mdadm's choice), `--bitmap none` removes it. Give every member \
and spare. Refused: a running array's member, a degraded or unclean array, a recovery or \
replacement not finished, a smaller size or fewer members without --shrink, fewer members \
with no room after the data, a level md does not take over to, \
a chunk that does not divide the members' size, too few spares, \
a size past a member's room, a \
spare too small, a bitmap with no room or one where md's partial parity log is. Sizes take \
mdadm's units: a bare number is KiB.",
    after_help = "Examples (the array stopped):\n  \
uraid grow --size max /dev/sdb /dev/sdc /dev/sdd /dev/sde   (members replaced by larger disks)\n  \
uraid serve /dev/sdb /dev/sdc /dev/sdd /dev/sde     (resyncs the new space)\n  \
uraid grow --size 60G --shrink m?.img              (after shrinking the filesystem on it)\n  \
uraid grow --bitmap internal m?.img\n  \
uraid grow --raid-devices 5 m0.img m1.img m2.img m3.img m4.img   (m4.img added as a spare)\n  \
uraid grow --raid-devices 4 --shrink m?.img         (m4.img a spare after)\n  \
uraid grow --chunk 128K --layout left-asymmetric m?.img\n  \
uraid grow --level 6 m0.img m1.img m2.img s0.img   (RAID5 to RAID6, s0.img added as a spare)\n  \
uraid grow --level 5 m0.img m1.img m2.img m3.img    (RAID6 to RAID5, m3.img left a spare)\n  \
uraid grow --continue m?.img                        (after a crash mid-reshape)"
)]
#[command(group(
    clap::ArgGroup::new("change")
        .required(true)
        .multiple(true)
        .args(["size", "bitmap", "raid_devices", "layout", "chunk", "level", "resume"])
))]
#[command(group(
    clap::ArgGroup::new("reshape_shape").multiple(true).args(["raid_devices", "layout", "chunk"])
))]
pub struct GrowArgs {
    /// The new component size (data used on each member): `max`, or a size (64G, 1T, ...).
    #[arg(short = 'z', long, value_name = "max|SIZE")]
    #[arg(conflicts_with_all = ["bitmap", "raid_devices", "layout", "chunk", "level", "resume"])]
    size: Option<String>,
    /// Let --size go below the current size, or --raid-devices below the current count: the
    /// array's data past its new end is lost (shrink the filesystem on it first). Without it
    /// either is refused.
    #[arg(long)]
    shrink: bool,
    /// Add (`internal`) or remove (`none`) the write-intent bitmap.
    #[arg(short, long, value_parser = ["internal", "none"])]
    #[arg(conflicts_with_all = ["raid_devices", "layout", "chunk", "level", "resume"])]
    bitmap: Option<String>,
    /// Bytes of member data each bit of an added bitmap covers, a power of two from 4K to 1G
    /// (mdadm's --bitmap-chunk; default: mdadm's choice, at least 64M).
    #[arg(long, value_name = "SIZE")]
    bitmap_chunk: Option<String>,
    /// Reshape to this many members: the new slots go to the spares given with the members
    /// (added with `uraid add` while the array was served), in the order given; fewer with
    /// --shrink (the removed members become spares).
    #[arg(short = 'n', long, value_name = "N")]
    raid_devices: Option<u32>,
    /// Reshape to this md layout (of the same level; with or without --raid-devices).
    #[arg(short = 'p', long, value_name = "LAYOUT")]
    layout: Option<String>,
    /// Reshape to this chunk size, a power of two dividing each member's data (mdadm's
    /// --chunk; a bare number is KiB).
    #[arg(short, long, value_name = "SIZE")]
    chunk: Option<String>,
    /// Where a reshape moves the data, from each member's start (mdadm's --grow
    /// --data-offset; a bare number is KiB): below the current offset for more members,
    /// above for fewer, either for the same (default: half the larger room, as mdadm).
    #[arg(long, value_name = "SIZE", requires = "reshape_shape")]
    #[arg(conflicts_with_all = ["size", "bitmap", "resume", "level"])]
    data_offset: Option<String>,
    /// Go on with a reshape stopped by a crash, Ctrl-C or the kernel (mdadm --grow
    /// --continue).
    #[arg(long = "continue", id = "resume")]
    #[arg(conflicts_with_all = ["raid_devices", "layout", "chunk", "level"])]
    resume: bool,
    /// Take the array over to RAID4, 5 or 6 as md does: to RAID6 with one more member, the
    /// first spare given, which becomes Q (mdadm's --layout=preserve: the `-6` layout); from
    /// RAID6 with one fewer, Q's member left a spare; RAID4 and parity-last RAID5 in place.
    /// With --layout, to RAID5 or RAID6 in that layout (restriped before or after, as mdadm;
    /// to RAID6 in one pass, the restripe building Q).
    #[arg(short, long, value_name = "4|5|6", conflicts_with_all = ["chunk"])]
    level: Option<String>,
    #[command(flatten)]
    select: crate::cmd::scan::Selection,
    /// Print what changed as one JSON object on standard output.
    #[arg(long)]
    json: bool,
    /// Every member and spare of the array, in any order (with --config or --scan: its DEVICE
    /// lines' when none are given).
    #[arg(required_unless_present_any = ["config", "scan"])]
    members: Vec<String>,
}

/// A member planned for the change and the file it is written through.
pub(crate) struct Grown<'a> {
    pub(crate) member: &'a PlannedMember,
    pub(crate) file: &'a File,
    pub(crate) own: Superblock1,
    pub(crate) avail_sectors: u64,
}

/// A stopped array opened for a change of its superblocks (grow, assemble --update): every
/// member held, so that a running array's is refused, and planned by md's rules.
pub(crate) struct Stopped {
    pub(crate) plan: AssemblyPlan,
    candidates: Vec<Candidate>,
    files: Vec<File>,
}

impl Stopped {
    /// `verb` names the change in refusals ("grow", "update"); `take_reshape`: the array is
    /// in the middle of a reshape to go on with (a member one superblock write behind is
    /// given that write first, `reshape::mend_torn_writes`).
    pub(crate) fn open(
        select: &Selection,
        given: &[String],
        verb: &str,
        take_reshape: bool,
    ) -> anyhow::Result<Self> {
        let Selected { uuid, members: paths } = select.resolve(given)?;
        let held = format!("stop it first (uraid {verb} works on a stopped array)");
        let files = paths
            .iter()
            .map(|path| open_exclusive(path.as_ref(), &held).with_context(|| path.clone()))
            .collect::<anyhow::Result<Vec<File>>>()?;
        if take_reshape {
            crate::cmd::reshape::mend_torn_writes(&paths, &files)?;
        }
        let candidates: Vec<_> = paths.iter().map(|p| read_candidate_to_assemble(p)).collect();
        let options = AssembleOptions { uuid, take_reshape, ..AssembleOptions::default() };
        let plan = plan(&candidates, &options).with_context(|| format!("cannot {verb}"))?;
        Ok(Stopped { plan, candidates, files })
    }

    /// The members in slots, then the spares, each with its own superblock.
    pub(crate) fn members(&self) -> anyhow::Result<Vec<Grown<'_>>> {
        let members = self.plan.slots.iter().flatten().chain(&self.plan.spares);
        members
            .map(|member| {
                let candidate = &self.candidates[member.candidate];
                let area = candidate.superblock_area.as_ref();
                let own = area.map_err(|e| anyhow::anyhow!("{}: {e}", member.name))?;
                let own = Superblock1::decode(own).with_context(|| member.name.clone())?;
                let file = &self.files[member.candidate];
                let avail_sectors =
                    (candidate.size_bytes / 512).saturating_sub(member.data_offset_sectors);
                Ok(Grown { member, file, own, avail_sectors })
            })
            .collect()
    }
}

/// The shape `--raid-devices`, `--layout` and `--chunk` ask for, the rest as it is.
fn new_shape(args: &GrowArgs, plan: &AssemblyPlan) -> anyhow::Result<NewShape> {
    let level = uraid_md::members::core_level(plan.level).context("a level uraid serves")?;
    let layout = match args.layout.as_deref() {
        Some(name) => {
            let layout = Layout::parse(name)?;
            layout.check_level(level)?;
            layout.md_number()
        }
        None => plan.layout,
    };
    let chunk_sectors = match args.chunk.as_deref() {
        Some(size) => u32::try_from(parse_size(size)? / 512).context("--chunk: too large")?,
        None => plan.chunk_sectors,
    };
    let raid_disks = args.raid_devices.unwrap_or(plan.raid_disks);
    let data_offset_sectors =
        args.data_offset.as_deref().map(crate::cmd::create::data_offset_sectors).transpose()?;
    Ok(NewShape { raid_disks, layout, chunk_sectors, shrink: args.shrink, data_offset_sectors })
}

/// Seconds since the epoch, for the superblocks' update time.
pub(crate) fn now_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

pub fn run(args: &GrowArgs) -> anyhow::Result<()> {
    let bitmap_chunk = args.bitmap_chunk.as_deref().map(parse_bitmap_chunk).transpose()?;
    if args.shrink && args.size.is_none() && args.raid_devices.is_none() {
        bail!("--shrink goes with --size or --raid-devices");
    }
    if bitmap_chunk.is_some() && args.bitmap.as_deref() != Some("internal") {
        bail!("--bitmap-chunk goes with --bitmap internal");
    }
    let stopped = Stopped::open(&args.select, &args.members, "grow", args.resume)?;
    let cannot = || format!("cannot grow {}", stopped.plan.name);
    if let Some(level) = args.level.as_deref() {
        let change = crate::cmd::takeover::LevelChange {
            level,
            layout: args.layout.as_deref(),
            raid_devices: args.raid_devices,
            select: &args.select,
            members: &args.members,
            json: args.json,
        };
        return crate::cmd::takeover::run(&change, stopped);
    }
    let reshapes = args.raid_devices.is_some() || args.layout.is_some() || args.chunk.is_some();
    if args.resume || reshapes {
        let reshaped = if args.resume {
            crate::cmd::reshape::resume(&stopped, None)
        } else {
            new_shape(args, &stopped.plan).and_then(|new| crate::cmd::reshape::start(&stopped, new))
        };
        crate::cmd::reshape::tell(&stopped.plan, &reshaped.with_context(cannot)?, args.json);
        return Ok(());
    }
    let (plan, grown) = (&stopped.plan, stopped.members()?);
    let now = now_seconds();
    match (&args.size, args.bitmap.as_deref()) {
        (Some(size), _) => grow_size(args, plan, &grown, size, now).with_context(cannot),
        (None, Some(bitmap)) => {
            change_bitmap(args, plan, &grown, bitmap_chunk, bitmap == "internal", now)
                .with_context(cannot)
        }
        (None, None) => unreachable!("clap requires --size or --bitmap"),
    }
}

fn grow_size(
    args: &GrowArgs,
    plan: &AssemblyPlan,
    grown: &[Grown<'_>],
    size: &str,
    now: u64,
) -> anyhow::Result<()> {
    let target = match size {
        "max" => SizeTarget::Max,
        size if args.shrink => SizeTarget::Shrink(parse_size(size)? / 512),
        size => SizeTarget::Sectors(parse_size(size)? / 512),
    };
    let room = |m: &PlannedMember| {
        let g = grown.iter().find(|g| g.member.candidate == m.candidate).expect("planned");
        MemberRoom { name: m.name.clone(), avail_sectors: g.avail_sectors }
    };
    let change = uraid_format::grow::plan_size(plan, &room, target)?;
    if change.unchanged() {
        out!("{}: component size unchanged at {} sectors", plan.name, change.old_size_sectors);
        return Ok(());
    }
    let events = plan.events + 1;
    let bitmap = grow_bitmap(&grown[0], &change, events)?;
    if let Some(bitmap) = &bitmap {
        for g in grown {
            write_synced(g, &bitmap.image, bitmap_at(&g.own)?).context("writing the bitmap")?;
        }
    }
    for g in grown {
        let sb = resized_superblock(&g.own, &change, g.avail_sectors, events, now);
        write_synced(g, &sb.encode(), SUPERBLOCK_OFFSET_BYTES).context("writing the superblock")?;
    }
    tell(args, plan, &change, bitmap.map(|b| b.chunk_bytes));
    Ok(())
}

/// Adds the bitmap (written to every member first, then the superblocks that lead to it) or
/// removes it (the superblocks only: its bytes stay, as md leaves them).
fn change_bitmap(
    args: &GrowArgs,
    plan: &AssemblyPlan,
    grown: &[Grown<'_>],
    chunk_bytes: Option<u32>,
    internal: bool,
    now: u64,
) -> anyhow::Result<()> {
    // `plan_size` refuses these for a size; a bitmap needs the same.
    refuse_unless_whole_and_clean(plan)?;
    let events = plan.events + 1;
    let base = &grown[0].own;
    let added = if internal {
        let (bitmap, bits) = add_bitmap(base, chunk_bytes, events)?;
        // Each member keeps its own bad block log: the bitmap must fit before every one.
        for g in &grown[1..] {
            add_bitmap(&g.own, Some(bitmap.chunk_bytes), events)
                .with_context(|| g.member.name.clone())?;
        }
        let mut image = bitmap.encode().to_vec();
        image.extend_from_slice(bits.encode());
        let at = bitmap_at(&with_bitmap_field(base, true, events, now))?;
        for g in grown {
            write_synced(g, &image, at).context("writing the bitmap")?;
        }
        Some(bitmap)
    } else if !base.has_bitmap() {
        return Err(GrowError::NoBitmap.into());
    } else {
        None
    };
    for g in grown {
        let sb = with_bitmap_field(&g.own, internal, events, now);
        write_synced(g, &sb.encode(), SUPERBLOCK_OFFSET_BYTES).context("writing the superblock")?;
    }
    if args.json {
        let json = serde_json::json!({
            "array": plan.name,
            "uuid": plan.uuid.to_string(),
            "bitmap": if internal { "internal" } else { "none" },
            "bitmap_chunk_bytes": added.as_ref().map(|b| b.chunk_bytes),
            "bitmap_bits": added.as_ref().map(BitmapSuper::chunk_count),
        });
        out!("{json}");
    } else if let Some(b) = added {
        out!(
            "{}: internal bitmap added, 8 sectors past the superblock: {} bits of {} KiB, all \
             clear (the array is clean)",
            plan.name,
            b.chunk_count(),
            b.chunk_bytes / 1024
        );
    } else {
        out!("{}: internal bitmap removed (a crash now resyncs the whole array)", plan.name);
    }
    Ok(())
}

/// The bitmap after the grow, as written to every member.
struct GrownBitmap {
    /// Bytes a bit covers, before and after (md doubles it when the bits outgrow their room).
    chunk_bytes: (u32, u32),
    /// Its superblock and bits.
    image: Vec<u8>,
}

/// The resized bitmap, when the array has one: read from the first member in a slot (md reads
/// it from a member in sync).
fn grow_bitmap(
    first: &Grown<'_>,
    change: &SizeChange,
    events: u64,
) -> anyhow::Result<Option<GrownBitmap>> {
    if !first.own.has_bitmap() {
        return Ok(None);
    }
    let name = &first.member.name;
    let (header, image) = uraid_md::members::read_bitmap(Path::new(name), &first.own)
        .map_err(|e| anyhow::anyhow!("{name}: its bitmap: {e}"))?;
    let bits = WriteIntentBitmap::decode(&header, &image[BITMAP_SUPER_BYTES..])?;
    let new_sectors = change.new_size_sectors;
    let (mut grown, grown_bits) = uraid_format::resized_bitmap(&header, &bits, new_sectors)
        .ok_or(GrowError::BitmapTooSmall { new_sectors })?;
    // A bitmap as old as the array goes on being as new; a stale one stays stale (md then
    // resyncs everything, as it would have).
    if !header.is_stale(first.own.events) {
        grown.events = events;
    }
    let mut image = grown.encode().to_vec();
    image.extend_from_slice(grown_bits.encode());
    Ok(Some(GrownBitmap { chunk_bytes: (header.chunk_bytes, grown.chunk_bytes), image }))
}

pub(crate) fn bitmap_at(sb: &Superblock1) -> anyhow::Result<u64> {
    sb.bitmap_at_bytes().context("the bitmap offset points before the device's start")
}

pub(crate) fn write_synced(g: &Grown<'_>, bytes: &[u8], at: u64) -> anyhow::Result<()> {
    let name = &g.member.name;
    g.file.write_all_at(bytes, at).with_context(|| name.clone())?;
    g.file.sync_data().with_context(|| name.clone())
}

fn tell(args: &GrowArgs, plan: &AssemblyPlan, change: &SizeChange, chunks: Option<(u32, u32)>) {
    let data_disks = u64::from(plan.data_disks());
    let array_kib = |size: u64| size / 2 * data_disks;
    let (old, new) = (change.old_size_sectors, change.new_size_sectors);
    if args.json {
        let json = serde_json::json!({
            "array": plan.name,
            "uuid": plan.uuid.to_string(),
            "old_component_sectors": old,
            "new_component_sectors": new,
            "old_array_kib": array_kib(old),
            "new_array_kib": array_kib(new),
            "resync_from_sector": (!change.shrinks()).then_some(old),
            "bitmap_chunk_bytes": chunks.map(|c| serde_json::json!({"old": c.0, "new": c.1})),
        });
        out!("{json}");
        return;
    }
    out!(
        "{}: component size {old} -> {new} sectors a member, array {} -> {} KiB",
        plan.name,
        array_kib(old),
        array_kib(new)
    );
    if let Some((from, to)) = chunks.filter(|c| c.0 != c.1) {
        out!(
            "{}: bitmap chunk {} -> {} KiB (its bits keep their room)",
            plan.name,
            from / 1024,
            to / 1024
        );
    }
    if change.shrinks() {
        out!(
            "{}: the array's data past {} KiB is gone; nothing to resync",
            plan.name,
            array_kib(new)
        );
        return;
    }
    out!(
        "{}: the new space has no parity yet: it resyncs from sector {old} a member at the \
         next start (uraid serve, or the kernel)",
        plan.name
    );
}
