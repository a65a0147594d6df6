//! `uraid grow --raid-devices N`, `--layout`, `--chunk` and `--continue`: a stopped array
//! grown by members or given a new layout or chunk, md's forwards reshape to a lower data
//! offset, or (`--shrink`) reduced by members, md's reshape backwards to a higher one
//! (`uraid_format::grow::reshape` decides it and writes the superblocks, `uraid_core::reshape`
//! moves the data). Offline for the same reason as the size: NBD cannot tell a client its
//! export changed size.
//!
//! Each window of new stripes is copied, made durable on every member, and only then is its
//! end recorded as `reshape_position` in every superblock; a crash or Ctrl-C leaves a
//! position from which `--continue` (or the kernel, which reads the same fields) copies on.

use crate::cmd::grow::{Grown, Stopped, bitmap_at, now_seconds, write_synced};
use crate::cmd::md_meta::{SUPERBLOCK_OFFSET_BYTES, read_candidate_to_assemble};
use crate::cmd::reshape_io::{Members, sync_all};
use anyhow::{Context, bail};
use std::fs::File;
use std::os::unix::fs::FileExt as _;
use std::path::Path;
use uraid_core::reshape::Reshape;
use uraid_core::{Geometry, Layout, SECTOR_BYTES};
use uraid_format::Superblock1;
use uraid_format::assemble::{AssemblyPlan, PlannedMember};
use uraid_format::grow::reshape::{
    KERNEL_METADATA_SECTORS, MemberSpace, NewShape, ReshapePlan, ReshapeProgress,
    mended_superblock, plan_reshape, reshape_in_progress, reshaped_superblock,
    reshaping_superblock,
};
use uraid_format::grow::takeover::with_q_built;
use uraid_format::{BITMAP_SUPER_BYTES, BitmapSuper};

/// Array data copied a batch at a time (`uraid_core::reshape`'s `batch.rs`): a few times
/// this in memory and, on 4 data members, 4 MiB a member I/O.
const BATCH_BYTES: u64 = 16 << 20;
/// Pieces each chunk of a larger stripe (or of a degraded reshape) is copied in: the memory
/// this takes is this times the members.
const UNIT_BYTES: u64 = 1 << 20;
/// Array data a window copies at most, so that a position is recorded at least this often.
const WINDOW_BYTES_MAX: u64 = 256 << 20;
/// Tests only: stop as a crash would after this many recorded windows.
const STOP_AFTER_ENV: &str = "URAID_TEST_RESHAPE_STOP_AFTER";

/// What the command prints.
pub(crate) struct Reshaped {
    pub(crate) old_raid_disks: u32,
    pub(crate) new_raid_disks: u32,
    /// Layout names and chunks in KiB, before and after.
    pub(crate) layouts: (&'static str, &'static str),
    pub(crate) chunks_kib: (u64, u64),
    pub(crate) old_array_kib: u64,
    pub(crate) new_array_kib: u64,
    pub(crate) from_sector: u64,
    pub(crate) offsets: (u64, u64),
    /// Windows copied and recorded.
    pub(crate) windows: u64,
    pub(crate) stopped_early: bool,
    /// Slots with no member (lost in the middle): the array is degraded.
    pub(crate) missing_slots: Vec<usize>,
    /// md's reshape backwards (fewer members): the position came down from the new end.
    pub(crate) backwards: bool,
}

/// Starts a reshape to `new` and runs it to the end.
pub(crate) fn start(stopped: &Stopped, new: NewShape) -> anyhow::Result<Reshaped> {
    let plan = &stopped.plan;
    let grown = stopped.members()?;
    let spaces = grown
        .iter()
        .map(|g| {
            member_space(g).map(|s| (g.member.candidate, s)).with_context(|| g.member.name.clone())
        })
        .collect::<anyhow::Result<Vec<(usize, MemberSpace)>>>()?;
    let space = |m: &PlannedMember| {
        let (_, s) = spaces.iter().find(|(c, _)| *c == m.candidate).expect("measured");
        s.clone()
    };
    let rp = plan_reshape(plan, new, &space)?;
    // Before anything is written: a geometry refused leaves no reshape recorded.
    let reshape = layout(plan, &rp)?;
    let mut records = Records::new(plan, &grown, &rp)?;
    records.write(Some(reshape.start_position()))?;
    run(&reshape, &mut records, reshape.start_position(), None)
}

/// Before `--continue`: the members a crash kept from the last superblock write
/// (`mended_superblock`: one event behind the freshest, holding what it says) get it, so that
/// the array plans whole. `files` are `paths` opened exclusively (`Stopped::open`).
pub(crate) fn mend_torn_writes(paths: &[String], files: &[File]) -> anyhow::Result<()> {
    let own = |path: &String| {
        let area = read_candidate_to_assemble(path).superblock_area.ok()?;
        Superblock1::decode(&area).ok()
    };
    let sbs: Vec<Option<Superblock1>> = paths.iter().map(own).collect();
    let Some(reference) = sbs.iter().flatten().max_by_key(|sb| sb.events) else { return Ok(()) };
    for ((path, file), sb) in paths.iter().zip(files).zip(&sbs) {
        let Some(mended) = sb.as_ref().and_then(|sb| mended_superblock(sb, reference)) else {
            continue;
        };
        file.write_all_at(&mended.encode(), SUPERBLOCK_OFFSET_BYTES)
            .and_then(|()| file.sync_data())
            .with_context(|| format!("{path}: writing the superblock"))?;
        out!("{path}: the reshape's last superblock write had not reached it (a crash): written");
    }
    Ok(())
}

/// Takes up a reshape the superblocks record (uraid's or the kernel's); with `align`, only
/// until its position is a whole number of that many sectors (a stripe at a time), for a
/// revert (`update.rs`).
pub(crate) fn resume(stopped: &Stopped, align: Option<u64>) -> anyhow::Result<Reshaped> {
    let plan = &stopped.plan;
    let grown = stopped.members()?;
    // Any member still reshaping says what (one whose last write ended it says nothing).
    let progress = grown.iter().find_map(|g| ReshapeProgress::of(&g.own).transpose());
    let Some(progress) = progress.transpose().map_err(anyhow::Error::msg)? else {
        bail!("no reshape is in progress on {}: it assembles as it is", plan.name);
    };
    // A member lost in the middle: md goes on degraded, and so does this. A restripe builds
    // the Q member a takeover added (`q_built_by_restripe`, which needs the rest whole).
    uraid_format::grow::refuse_unless_clean(&with_q_built(plan, progress.keeps_members()), true)?;
    let members: Vec<_> = grown.iter().map(|g| (g.member, &g.own)).collect();
    let rp = reshape_in_progress(plan, &members, &progress);
    let reshape = layout(plan, &rp)?;
    reshape.check_position(progress.position_sectors)?;
    let mut records = Records::new(plan, &grown, &rp)?;
    run(&reshape, &mut records, progress.position_sectors, align)
}

fn run(
    reshape: &Reshape,
    records: &mut Records<'_>,
    from: u64,
    align: Option<u64>,
) -> anyhow::Result<Reshaped> {
    let (grown, rp) = (records.grown, records.rp);
    // Every slot read or written: a removed member's too, until the end.
    let files: Vec<Option<&Grown<'_>>> = (0..rp.slot_count() as usize)
        .map(|slot| {
            let m = rp.in_slot(slot)?;
            grown.iter().find(|g| g.member.candidate == m.candidate)
        })
        .collect();
    let mut io = Members::new(&files);
    let stripe_bytes = reshape.new_geometry().stripe_data_sectors() * SECTOR_BYTES;
    let max_stripes = if align.is_some() { 1 } else { (WINDOW_BYTES_MAX / stripe_bytes).max(1) };
    let stop_after: Option<u64> = std::env::var(STOP_AFTER_ENV).ok().and_then(|v| v.parse().ok());
    let total = reshape.new_array_sectors() * SECTOR_BYTES;
    let bar = crate::cmd::progress::byte_bar(total, "reshaping");
    // Bytes copied, from the start either way.
    let copied = |position: u64| position.abs_diff(reshape.start_position()) * SECTOR_BYTES;
    bar.set_position(copied(from));
    let (mut position, mut windows) = (from, 0);
    while let Some(window) = reshape.next_window(position, max_stripes) {
        if stop_after == Some(windows) || align.is_some_and(|a| position.is_multiple_of(a)) {
            bar.finish_and_clear();
            return Ok(told(rp, reshape, from, windows, true));
        }
        position = reshape.copy_window(&mut io, window, UNIT_BYTES, BATCH_BYTES)?;
        sync_all(&files)?;
        records.write(Some(position))?;
        windows += 1;
        bar.set_position(copied(position));
    }
    records.write(None)?;
    bar.finish_and_clear();
    Ok(told(rp, reshape, from, windows, false))
}

fn told(
    rp: &ReshapePlan,
    reshape: &Reshape,
    from: u64,
    windows: u64,
    stopped_early: bool,
) -> Reshaped {
    let (old, new) = (reshape.old_geometry(), reshape.new_geometry());
    Reshaped {
        old_raid_disks: rp.old_raid_disks,
        new_raid_disks: rp.new_raid_disks,
        layouts: (old.layout().name(), new.layout().name()),
        chunks_kib: (old.chunk_bytes() >> 10, new.chunk_bytes() >> 10),
        old_array_kib: reshape.old_array_sectors() / 2,
        new_array_kib: reshape.new_array_sectors() / 2,
        from_sector: from,
        offsets: (rp.members[0].old_offset_sectors, rp.members[0].new_offset_sectors),
        windows,
        stopped_early,
        // The array's: a removed slot's member lost on the way is not missed after it.
        missing_slots: rp.missing_slots().into_iter().filter(|&s| s < new.raid_disks()).collect(),
        backwards: reshape.is_backwards(),
    }
}

/// The old and new geometry with every member's offsets (a missing slot's are another's: it
/// is neither read nor written, and uraid moves every member by as much).
fn layout(plan: &AssemblyPlan, rp: &ReshapePlan) -> anyhow::Result<Reshape> {
    let level = uraid_md::members::core_level(plan.level).context("a level uraid serves")?;
    let geometry = |layout, disks: u32, chunk_sectors: u32| {
        let chunk_bytes = u64::from(chunk_sectors) * SECTOR_BYTES;
        Geometry::new(level, Layout::from_md(level, layout)?, disks as usize, chunk_bytes)
    };
    let old = geometry(plan.layout, rp.old_raid_disks, plan.chunk_sectors)?;
    let new = geometry(rp.new_layout, rp.new_raid_disks, rp.new_chunk_sectors)?;
    let any = rp.in_slots().next().context("no member in a slot")?;
    let member = |slot| rp.in_slot(slot).unwrap_or(any);
    let old_offsets = (0..old.raid_disks()).map(|s| member(s).old_offset_sectors).collect();
    let new_offsets = (0..new.raid_disks()).map(|s| member(s).new_offset_sectors).collect();
    let reshape = Reshape::new(old, new, plan.size_sectors, old_offsets, new_offsets)?;
    Ok(reshape.with_missing(&rp.missing_slots())?)
}

/// The superblock writes of a run, each with the next event count (md's: one more a write),
/// the bitmap restamped with it (`BitmapStamp`).
struct Records<'a> {
    grown: &'a [Grown<'a>],
    rp: &'a ReshapePlan,
    events: u64,
    bitmap: BitmapStamp,
}

/// The array's bitmap restamped with each superblock write's event count: read once from the
/// first member (its bits do not change), written whole to every member and spare the first
/// time (the added ones take it as md gives them the array's), its header alone after that.
/// None when the array has none or it is older than the array (then it stays so: md resyncs
/// all).
pub(crate) struct BitmapStamp(Option<(BitmapSuper, Option<Vec<u8>>)>);

impl BitmapStamp {
    pub(crate) fn new(plan: &AssemblyPlan, grown: &[Grown<'_>]) -> anyhow::Result<Self> {
        let first = &grown[0];
        let bitmap = if plan.has_bitmap() { Some(bitmap_image(first)?) } else { None };
        let bitmap = bitmap.filter(|(b, _)| !b.is_stale(first.own.events));
        Ok(BitmapStamp(bitmap.map(|(header, image)| (header, Some(image)))))
    }

    pub(crate) fn write(&mut self, grown: &[Grown<'_>], events: u64) -> anyhow::Result<()> {
        let Some((header, image)) = &mut self.0 else { return Ok(()) };
        header.events = events;
        let mut bytes = image.take().unwrap_or_default();
        bytes.resize(bytes.len().max(BITMAP_SUPER_BYTES), 0);
        bytes[..BITMAP_SUPER_BYTES].copy_from_slice(&header.encode());
        for g in grown {
            write_synced(g, &bytes, bitmap_at(&g.own)?).context("writing the bitmap")?;
        }
        Ok(())
    }
}

impl<'a> Records<'a> {
    fn new(
        plan: &AssemblyPlan,
        grown: &'a [Grown<'a>],
        rp: &'a ReshapePlan,
    ) -> anyhow::Result<Self> {
        Ok(Records { grown, rp, events: plan.events, bitmap: BitmapStamp::new(plan, grown)? })
    }

    /// Every superblock: the reshape at `position`, or (`None`) ended.
    fn write(&mut self, position: Option<u64>) -> anyhow::Result<()> {
        self.events += 1;
        let (events, now) = (self.events, now_seconds());
        self.bitmap.write(self.grown, events)?;
        for g in self.grown {
            let me = self.rp.members.iter().find(|m| m.candidate == g.member.candidate);
            let me = me.expect("planned");
            let sb = match position {
                Some(position) => reshaping_superblock(&g.own, self.rp, me, position, events, now),
                None => reshaped_superblock(&g.own, self.rp, me, events, now),
            };
            write_synced(g, &sb.encode(), SUPERBLOCK_OFFSET_BYTES)
                .context("writing the superblock")?;
        }
        Ok(())
    }
}

/// Where md's metadata ends on a member (see `MemberSpace`).
fn member_space(g: &Grown<'_>) -> anyhow::Result<MemberSpace> {
    let sb = &g.own;
    // md keeps the bitmap in whole pages (the kernel's `super_1_allow_new_offset`).
    let bitmap_bytes = if sb.has_bitmap() {
        Some((bitmap_image(g)?.1.len() as u64).next_multiple_of(4096))
    } else {
        None
    };
    let ranges = uraid_md::ppl::reserved_ranges(sb, bitmap_bytes).context("md's metadata")?;
    let end_bytes = ranges.iter().map(|r| r.1).max().unwrap_or(0);
    let kernel = sb.super_offset_sectors + KERNEL_METADATA_SECTORS;
    Ok(MemberSpace {
        metadata_end_sectors: end_bytes.div_ceil(SECTOR_BYTES).max(kernel),
        avail_sectors: g.avail_sectors,
        lists_bad_blocks: sb.feature_map & uraid_format::feature::BAD_BLOCKS != 0,
    })
}

fn bitmap_image(g: &Grown<'_>) -> anyhow::Result<(BitmapSuper, Vec<u8>)> {
    let name = &g.member.name;
    uraid_md::members::read_bitmap(Path::new(name), &g.own)
        .map_err(|e| anyhow::anyhow!("{name}: its bitmap: {e}"))
}

/// What the reshape did, as `uraid grow --json` prints it.
pub(crate) fn json(plan: &AssemblyPlan, r: &Reshaped) -> serde_json::Value {
    serde_json::json!({
        "array": plan.name,
        "uuid": plan.uuid.to_string(),
        "old_raid_disks": r.old_raid_disks,
        "new_raid_disks": r.new_raid_disks,
        "old_layout": r.layouts.0,
        "new_layout": r.layouts.1,
        "old_chunk_kib": r.chunks_kib.0,
        "new_chunk_kib": r.chunks_kib.1,
        "old_array_kib": r.old_array_kib,
        "new_array_kib": r.new_array_kib,
        "from_sector": r.from_sector,
        "old_data_offset_sectors": r.offsets.0,
        "new_data_offset_sectors": r.offsets.1,
        "windows": r.windows,
        "backwards": r.backwards,
        "finished": !r.stopped_early,
        "missing_slots": r.missing_slots,
    })
}

/// Prints what the reshape did.
pub(crate) fn tell(plan: &AssemblyPlan, r: &Reshaped, json: bool) {
    if json {
        out!("{}", self::json(plan, r));
        return;
    }
    let (old, new) = (r.old_raid_disks, r.new_raid_disks);
    if r.stopped_early {
        out!(
            "{}: reshape {old} -> {new} members stopped after {} windows as asked: `uraid grow \
             --continue` goes on",
            plan.name,
            r.windows
        );
        return;
    }
    let ((l0, l1), (c0, c1)) = (r.layouts, r.chunks_kib);
    out!(
        "{}: reshaped from {old} to {new} members, {l0} to {l1}, {c0}K to {c1}K chunks, from \
         array sector {}, {} windows: array {} -> {} KiB, data offset {} -> {} sectors",
        plan.name,
        r.from_sector,
        r.windows,
        r.old_array_kib,
        r.new_array_kib,
        r.offsets.0,
        r.offsets.1
    );
    if new < old {
        let removed = if old - new == 1 {
            format!("the member of slot {new} is a spare")
        } else {
            format!("the members of slots {new} to {} are spares", old - 1)
        };
        out!("{}: the array's data past {} KiB is gone; {removed} now", plan.name, r.new_array_kib);
    }
    if !r.missing_slots.is_empty() {
        out!(
            "{}: degraded, slots {:?} missing: add a spare when it is served and it rebuilds",
            plan.name,
            r.missing_slots
        );
    }
}
