//! `uraid grow --size`: mdadm --grow --size on a stopped array. After its members were
//! replaced one by one with larger devices (or grown files, or an array created with --size
//! smaller than its members), the array takes the new room: each member's usable size, the
//! component size and the bitmap's cover grow in the superblocks as md grows them
//! (`uraid_format::grow`, `grown_bitmap`), and the new space resyncs at the next start,
//! uraid's or the kernel's. The data is not touched.
//!
//! Offline on purpose: an NBD client cannot be told its export grew (the protocol has no
//! resize), so the array is stopped, grown, and served again. A member a running array holds
//! is refused (the member lock; O_EXCL on a block device).

use crate::args::parse_size;
use crate::cmd::md_meta::{SUPERBLOCK_OFFSET_BYTES, open_exclusive, read_candidate_to_assemble};
use anyhow::Context;
use clap::Args;
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::time::{SystemTime, UNIX_EPOCH};
use uraid_format::assemble::{AssembleOptions, AssemblyPlan, PlannedMember, plan};
use uraid_format::grow::{GrowError, MemberRoom, SizeChange, SizeTarget, grown_superblock};
use uraid_format::{BITMAP_SUPER_BYTES, BitmapSuper, Superblock1, Uuid, WriteIntentBitmap};

#[derive(Args)]
#[command(
    about = "Grow a stopped array's component size into its members' room (mdadm --grow --size)",
    long_about = "Let a stopped array use more of its members: after they were replaced with \
larger devices (or their files grown, or the array created with --size below their room), \
`--size max` grows each member's used size to what the smallest member in a slot holds past \
the data offset (in whole chunks), or to the size given. The superblocks and the internal \
bitmap are updated as md updates them (the bitmap chunk doubles when its bits would not fit \
its room) and the new space is resynced at the next start, by uraid or by the kernel. Give \
every member and spare. Refused: a running array's member, a degraded or unclean array, a \
recovery or replacement not finished, a smaller size (nothing shrinks), a size past a member's \
room, a spare too small. Sizes take mdadm's units: a bare number is KiB.",
    after_help = "Example (members replaced by larger disks, array stopped):\n  \
uraid grow --size max /dev/sdb /dev/sdc /dev/sdd /dev/sde\n  \
uraid serve /dev/sdb /dev/sdc /dev/sdd /dev/sde     (resyncs the new space)"
)]
pub struct GrowArgs {
    /// The new component size (data used on each member): `max`, or a size (64G, 1T, ...).
    #[arg(short = 'z', long, value_name = "max|SIZE")]
    size: String,
    /// The array's UUID, when the devices given hold more than one array.
    #[arg(long)]
    uuid: Option<String>,
    /// Print what changed as one JSON object on standard output.
    #[arg(long)]
    json: bool,
    /// Every member and spare of the array, in any order.
    #[arg(required = true)]
    members: Vec<String>,
}

/// A member planned for the grow and the file it is written through.
struct Grown<'a> {
    member: &'a PlannedMember,
    file: &'a File,
    own: Superblock1,
    avail_sectors: u64,
}

pub fn run(args: &GrowArgs) -> anyhow::Result<()> {
    let target = match args.size.as_str() {
        "max" => SizeTarget::Max,
        size => SizeTarget::Sectors(parse_size(size)? / 512),
    };
    let held = "stop it first (uraid grow works on a stopped array)";
    let files = args
        .members
        .iter()
        .map(|path| open_exclusive(path.as_ref(), held).with_context(|| path.clone()))
        .collect::<anyhow::Result<Vec<File>>>()?;
    let candidates: Vec<_> = args.members.iter().map(|p| read_candidate_to_assemble(p)).collect();
    let uuid = args.uuid.as_deref().map(str::parse::<Uuid>).transpose()?;
    let options = AssembleOptions { uuid, ..AssembleOptions::default() };
    let plan = plan(&candidates, &options).context("cannot grow")?;
    let avail = |m: &PlannedMember| {
        (candidates[m.candidate].size_bytes / 512).saturating_sub(m.data_offset_sectors)
    };
    let room = |m: &PlannedMember| MemberRoom { name: m.name.clone(), avail_sectors: avail(m) };
    let change = uraid_format::grow::plan_size(&plan, &room, target)
        .with_context(|| format!("cannot grow {}", plan.name))?;
    if change.unchanged() {
        out!("{}: component size unchanged at {} sectors", plan.name, change.old_size_sectors);
        return Ok(());
    }
    let members = plan.slots.iter().flatten().chain(&plan.spares);
    let grown: Vec<Grown<'_>> = members
        .map(|member| {
            let area = candidates[member.candidate].superblock_area.as_ref();
            let own = area.map_err(|e| anyhow::anyhow!("{}: {e}", member.name))?;
            let own = Superblock1::decode(own).with_context(|| member.name.clone())?;
            let file = &files[member.candidate];
            Ok(Grown { member, file, own, avail_sectors: avail(member) })
        })
        .collect::<anyhow::Result<_>>()?;
    let events = plan.events + 1;
    let bitmap = grow_bitmap(&grown[0], &change, events)?;
    if let Some(bitmap) = &bitmap {
        for g in &grown {
            write_synced(g, &bitmap.image, bitmap_at(&g.own)?).context("writing the bitmap")?;
        }
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    for g in &grown {
        let sb = grown_superblock(&g.own, &change, g.avail_sectors, events, now);
        write_synced(g, &sb.encode(), SUPERBLOCK_OFFSET_BYTES).context("writing the superblock")?;
    }
    tell(args, &plan, &change, bitmap.map(|b| b.chunk_bytes));
    Ok(())
}

/// The bitmap after the grow, as written to every member.
struct GrownBitmap {
    /// Bytes a bit covers, before and after (md doubles it when the bits outgrow their room).
    chunk_bytes: (u32, u32),
    /// Its superblock and bits.
    image: Vec<u8>,
}

/// The grown bitmap, when the array has one: read from the first member in a slot (md reads
/// it from a member in sync).
fn grow_bitmap(
    first: &Grown<'_>,
    change: &SizeChange,
    events: u64,
) -> anyhow::Result<Option<GrownBitmap>> {
    if !first.own.has_bitmap() {
        return Ok(None);
    }
    let at = bitmap_at(&first.own)?;
    let read = |len: usize| -> anyhow::Result<Vec<u8>> {
        let mut bytes = vec![0u8; len];
        first.file.read_exact_at(&mut bytes, at).context("reading the bitmap")?;
        Ok(bytes)
    };
    let header = BitmapSuper::decode(&read(BITMAP_SUPER_BYTES)?)
        .with_context(|| format!("{}: its bitmap", first.member.name))?;
    let image = read(BITMAP_SUPER_BYTES + header.bits_bytes())?;
    let bits = WriteIntentBitmap::decode(&header, &image[BITMAP_SUPER_BYTES..])?;
    let new_sectors = change.new_size_sectors;
    let (mut grown, grown_bits) = uraid_format::grown_bitmap(&header, &bits, new_sectors)
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

fn bitmap_at(sb: &Superblock1) -> anyhow::Result<u64> {
    let at = SUPERBLOCK_OFFSET_BYTES.checked_add_signed(i64::from(sb.bitmap_offset_sectors) * 512);
    at.context("the bitmap offset points before the device's start")
}

fn write_synced(g: &Grown<'_>, bytes: &[u8], at: u64) -> anyhow::Result<()> {
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
            "resync_from_sector": old,
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
    out!(
        "{}: the new space has no parity yet: it resyncs from sector {old} a member at the \
         next start (uraid serve, or the kernel)",
        plan.name
    );
}
