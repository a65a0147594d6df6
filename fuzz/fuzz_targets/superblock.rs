//! md's v1.2 superblock decoder and the assembly planner on arbitrary bytes.
//!
//! Random bytes almost never carry md's magic and a matching checksum, so each area may be
//! "fixed up" (magic, version, a bounded max_dev, the checksum sealed) to reach the field
//! checks behind them. Invariants: no panic; whatever decodes re-encodes to the same bytes and
//! decodes to the same value; `plan` over candidates made from one area with small edits never
//! panics, and a plan it returns is self-consistent; so is `uraid grow` planned over it.
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use uraid_format::assemble::{AssembleOptions, AssemblyPlan, Candidate, PlannedMember, plan};
use uraid_format::grow::reshape::{
    MemberSpace, NewShape, ReshapeProgress, plan_reshape, reshape_in_progress, reshaped_superblock,
    reshaping_superblock, mended_superblock, reverted,
};
use uraid_format::grow::{
    MemberRoom, SizeTarget, Update, add_bitmap, check_member_update, check_update,
    plan_size, resized_superblock, updated_superblock, with_bitmap_field,
};
use uraid_format::grow::takeover::{
    SlotChange, plan_takeover, restripe_before, taken_over_superblock,
};
use uraid_format::{DevRole, Level, Superblock1, Uuid, sb_csum};

const AREA_BYTES: usize = 4096;
const MAGIC: u32 = 0xa92b_4efc;
const MAX_DEV_OFFSET: usize = 220;
const SB_CSUM_OFFSET: usize = 216;
const DEV_NUMBER_OFFSET: usize = 160;
const DEVICE_UUID_OFFSET: usize = 168;

/// What follows the first byte (`fix`) and the first 4 KiB area: the seeds are md's own
/// superblock areas (fuzz/README.md), prefixed with a 0.
#[derive(Arbitrary, Debug)]
struct Input {
    /// Also every other member of the first area's array (its roles table's dev_numbers,
    /// as a create writes them), so that plans of whole arrays, and the grow and reshape
    /// plans over them, are reached without the fuzzer finding each member.
    whole: bool,
    others: Vec<Variant>,
    force: bool,
    uuid: Option<[u8; 16]>,
    size_bytes: u64,
    /// `uraid grow --size` in sectors (None: max).
    grow_to: Option<u64>,
    /// Plan a reshape in progress (`uraid grow --continue`) or to this many members.
    take_reshape: bool,
    reshape_to: u16,
    /// `uraid grow --level` to RAID4, 5 or 6 (this, modulo 3).
    take_over_to: u8,
    /// `uraid assemble --update bbl` with a bitmap of this many 4 KiB (else no-bbl).
    bbl_bitmap: Option<u8>,
}

/// Another candidate: the first area with a few bytes changed.
#[derive(Arbitrary, Debug)]
struct Variant {
    edits: Vec<(u16, u8)>,
    fix: u8,
    size_bytes: u64,
    unreadable: bool,
    /// Another format's metadata seen on the device.
    other: bool,
    /// Another member of the array: this dev_number and a device UUID of its own, before
    /// the edits (the roles table the first area carries then places it).
    member: Option<u8>,
}

fn area(bytes: &[u8], fix: u8) -> Vec<u8> {
    let mut a = bytes.to_vec();
    a.resize(AREA_BYTES, 0);
    if fix & 1 != 0 {
        a[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        a[4..8].copy_from_slice(&1u32.to_le_bytes());
    }
    let max_dev = u32::from_le_bytes(a[MAX_DEV_OFFSET..MAX_DEV_OFFSET + 4].try_into().unwrap());
    let max_dev = if fix & 2 != 0 { max_dev % 1921 } else { max_dev };
    a[MAX_DEV_OFFSET..MAX_DEV_OFFSET + 4].copy_from_slice(&max_dev.to_le_bytes());
    if fix & 4 != 0 && max_dev <= 1920 {
        let csum = sb_csum(&a[..256 + 2 * max_dev as usize]);
        a[SB_CSUM_OFFSET..SB_CSUM_OFFSET + 4].copy_from_slice(&csum.to_le_bytes());
    }
    a
}

/// The first area's array's other members: each dev_number its roles table holds (up to 8)
/// with a device UUID of its own, sealed.
fn members_of(first: &[u8], size_bytes: u64) -> Vec<Candidate> {
    let Ok(sb) = Superblock1::decode(first) else { return Vec::new() };
    let others = (0..sb.max_dev().min(9)).filter(|&d| d != sb.dev_number);
    others
        .map(|d| {
            let mut a = first.to_vec();
            a[DEV_NUMBER_OFFSET..DEV_NUMBER_OFFSET + 4].copy_from_slice(&d.to_le_bytes());
            a[DEVICE_UUID_OFFSET] ^= d as u8 + 1;
            Candidate {
                name: format!("m{d}"),
                size_bytes,
                superblock_area: Ok(area(&a, 4)),
                other_metadata: None,
            }
        })
        .collect()
}

fn round_trip(a: &[u8]) {
    let Ok(sb) = Superblock1::decode(a) else { return };
    let encoded = sb.encode();
    assert_eq!(encoded, a[..encoded.len()], "encode(decode(bytes)) == bytes");
    assert_eq!(Superblock1::decode(&encoded).expect("re-decodes"), sb);
    // The accessors callers use on any decoded superblock.
    let _ = (sb.role(), sb.slot_count(), sb.array_state(), sb.is_clean(), sb.name());
    let _ = (sb.has_bitmap(), sb.ppl(), sb.ctime_seconds(), sb.utime_seconds(), sb.checksum());
    let mut sealed = sb.clone();
    sealed.seal();
    assert_eq!(sealed.checksum(), sb.checksum(), "a decoded superblock is already sealed");
}

fuzz_target!(|data: &[u8]| {
    let Some((&fix, rest)) = data.split_first() else { return };
    let (first, rest) = rest.split_at(rest.len().min(AREA_BYTES));
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(rest)) else { return };
    // Bit 0: md's magic and version 1; bit 1: max_dev within 4 KiB; bit 2: seal.
    let first = area(first, fix);
    round_trip(&first);
    let mut candidates = vec![Candidate {
        name: "c0".into(),
        size_bytes: input.size_bytes,
        superblock_area: Ok(first.clone()),
        other_metadata: None,
    }];
    for (i, v) in input.others.iter().take(8).enumerate() {
        let mut a = first.clone();
        if let Some(dev_number) = v.member {
            a[DEV_NUMBER_OFFSET..DEV_NUMBER_OFFSET + 4]
                .copy_from_slice(&u32::from(dev_number).to_le_bytes());
            a[DEVICE_UUID_OFFSET] ^= dev_number.wrapping_add(1);
        }
        for &(at, value) in v.edits.iter().take(16) {
            a[usize::from(at) % AREA_BYTES] = value;
        }
        let a = area(&a, v.fix);
        round_trip(&a);
        let superblock_area = if v.unreadable { Err("unreadable".into()) } else { Ok(a) };
        candidates.push(Candidate {
            name: format!("c{}", i + 1),
            size_bytes: v.size_bytes,
            superblock_area,
            other_metadata: v.other.then_some(uraid_format::OtherMetadata::V1_0),
        });
    }
    if input.whole {
        candidates.extend(members_of(&first, input.size_bytes));
    }
    // mdadm's --force is both halves, as the CLI passes it.
    let options = AssembleOptions {
        uuid: input.uuid.map(Uuid),
        force: input.force,
        force_stale: input.force,
        take_reshape: input.take_reshape,
    };
    let Ok(p) = plan(&candidates, &options) else { return };
    assert_eq!(p.slots.len(), p.raid_disks as usize);
    assert!(p.missing_slots().iter().all(|&s| s < p.raid_disks));
    assert!(p.missing_slots().len() as u32 <= p.max_degraded(), "a plan the array survives");
    assert!(p.fresh_members().next().is_some(), "the array's superblock has a member");
    assert!(
        p.forced_members().all(|m| m.events == p.events && m.forced_from_events < Some(p.events))
    );
    let _ = (p.is_clean(), p.has_bitmap(), p.data_disks(), p.array_sectors());
    let placed = p.slots.iter().flatten().chain(&p.stale).chain(&p.spares).chain(&p.faulty);
    let mut seen = vec![false; candidates.len()];
    for m in placed {
        assert!(!seen[m.candidate], "candidate {} placed twice", m.candidate);
        seen[m.candidate] = true;
    }
    grow(&p, &candidates, input.grow_to);
    reshape(&p, &candidates, input.reshape_to);
    take_over(&p, &candidates, input.take_over_to);
    bad_block_log(&p, &candidates, input.bbl_bitmap);
});

/// `uraid grow --raid-devices`, `--layout`, `--chunk` and `--continue` planned over the plan:
/// one new offset, the copy's gap or more below every old member's and past the metadata;
/// the superblocks written during and after decode and say so; a reshape read back goes on
/// from no later than any member recorded.
fn reshape(p: &AssemblyPlan, candidates: &[Candidate], to: u16) {
    let own = |m: &PlannedMember| {
        let area = candidates[m.candidate].superblock_area.as_ref().ok()?;
        Superblock1::decode(area).ok()
    };
    let members: Vec<&PlannedMember> = p.slots.iter().flatten().chain(&p.spares).collect();
    let Some(sbs) = members.iter().map(|m| own(m)).collect::<Option<Vec<_>>>() else { return };
    if let Ok(Some(progress)) = ReshapeProgress::of(&sbs[0]) {
        let pairs: Vec<_> = members.iter().copied().zip(&sbs).collect();
        let rp = reshape_in_progress(p, &pairs, &progress);
        assert_eq!(rp.members.len(), members.len());
        assert!(rp.in_slots().all(|m| m.slot.is_some_and(|s| u32::from(s) < rp.new_raid_disks)));
        // mdadm's revert-reshape of any reshape uraid takes up: uraid takes the revert up too.
        if let Ok(mut back) = reverted(&sbs[0]) {
            back.seal();
            let back = Superblock1::decode(&back.encode()).expect("a reverted one decodes");
            assert!(ReshapeProgress::of(&back).is_ok(), "uraid takes up its revert");
        }
        for sb in &sbs[1..] {
            let Some(mended) = mended_superblock(sb, &sbs[0]) else { continue };
            let mended = Superblock1::decode(&mended.encode()).expect("a mended one decodes");
            assert_eq!((mended.events, mended.raid_disks), (sbs[0].events, sbs[0].raid_disks));
        }
        return;
    }
    let space = |m: &PlannedMember| MemberSpace {
        metadata_end_sectors: 80,
        avail_sectors: (candidates[m.candidate].size_bytes / 512)
            .saturating_sub(m.data_offset_sectors),
        lists_bad_blocks: false,
    };
    // `to`: members (9 bits), then whether the layout changes, the chunk's change, the layout.
    let chunk_sectors = match (to >> 10) & 3 {
        0 => p.chunk_sectors,
        1 => p.chunk_sectors.saturating_mul(2),
        2 => p.chunk_sectors / 2,
        _ => p.chunk_sectors.saturating_mul(3),
    };
    let layout = if to & 0x200 == 0 { p.layout } else { u32::from(to >> 12) };
    // Fewer members are planned as given up to (`--shrink`): the plan is what is checked.
    let raid_disks = u32::from(to & 0x1ff);
    let shape =
        NewShape { raid_disks, layout, chunk_sectors, shrink: true, data_offset_sectors: None };
    let Ok(rp) = plan_reshape(p, shape, &space) else { return };
    let new = rp.members[0].new_offset_sectors;
    assert!(rp.members.iter().all(|m| m.new_offset_sectors == new), "one new offset");
    assert!(new >= 80);
    let (old_chunk, new_chunk) = (u64::from(p.chunk_sectors), u64::from(chunk_sectors));
    assert!(new_chunk.is_power_of_two() && p.size_sectors.is_multiple_of(new_chunk));
    let gap = if old_chunk == new_chunk { new_chunk } else { old_chunk + new_chunk };
    let (up, fewer) = (rp.backwards(), shape.raid_disks < p.raid_disks);
    // The same members go the way with more room, as mdadm.
    assert!(up == fewer || shape.raid_disks == p.raid_disks, "more go down, fewer up");
    for m in members.iter().filter(|_| up) {
        let end = m.data_offset_sectors.saturating_add(space(m).avail_sectors);
        assert!(new + p.size_sectors <= end, "{} holds the component up there", m.name);
    }
    for m in &rp.members[..rp.old_raid_disks as usize] {
        let (old, new) = (m.old_offset_sectors, new);
        let (low, high) = if up { (old, new) } else { (new, old) };
        assert!(low + gap <= high, "{} keeps the copy's gap", m.name);
    }
    let during = reshaping_superblock(&sbs[0], &rp, &rp.members[0], 0, p.events + 1, 1);
    let during = Superblock1::decode(&during.encode()).expect("a reshaping superblock decodes");
    let progress = ReshapeProgress::of(&during).expect("uraid's own").expect("in progress");
    assert_eq!((progress.new_raid_disks, progress.new_layout), (shape.raid_disks, layout));
    let after = reshaped_superblock(&during, &rp, &rp.members[0], p.events + 1, 1);
    let after = Superblock1::decode(&after.encode()).expect("a reshaped superblock decodes");
    assert_eq!((ReshapeProgress::of(&after), after.data_offset_sectors), (Ok(None), new));
    assert_eq!((after.layout, after.chunk_sectors), (layout, chunk_sectors));
    let removed =
        |r: &DevRole| matches!(r, DevRole::Active(s) if u32::from(*s) >= shape.raid_disks);
    assert!(!after.dev_roles.iter().any(removed), "a removed member is a spare after");
}

/// `uraid grow --size` planned over the plan: a size only ever grows, in whole chunks, within
/// every member's room; each superblock it writes decodes and resyncs from the old size; a
/// bitmap added fits before the data.
fn grow(p: &AssemblyPlan, candidates: &[Candidate], grow_to: Option<u64>) {
    let avail = |m: &PlannedMember| {
        (candidates[m.candidate].size_bytes / 512).saturating_sub(m.data_offset_sectors)
    };
    let room = |m: &PlannedMember| MemberRoom { name: m.name.clone(), avail_sectors: avail(m) };
    // The top bit asks for --shrink (the rest the size), so the corpus decodes as it did.
    let target = grow_to.map_or(SizeTarget::Max, |to| match to >> 63 {
        0 => SizeTarget::Sectors(to),
        _ => SizeTarget::Shrink(to & !(1 << 63)),
    });
    let first = p.fresh_members().next().expect("checked");
    let Ok(own) = candidates[first.candidate].superblock_area.as_ref() else { return };
    let own = Superblock1::decode(own).expect("planned from it");
    if let Ok((bitmap, bits)) = add_bitmap(&own, None, p.events + 1) {
        let with = with_bitmap_field(&own, true, p.events + 1, 1);
        assert!(bitmap.chunk_count() == bits.chunks() && with.has_bitmap());
        let end = 16 + (256 + bitmap.bits_bytes() as u64).div_ceil(512);
        assert!(end <= own.data_offset_sectors, "an added bitmap past the data");
    }
    let Ok(change) = plan_size(p, &room, target) else { return };
    let chunk = u64::from(p.chunk_sectors);
    let asked_shrink = matches!(target, SizeTarget::Shrink(_));
    assert!(asked_shrink || !change.shrinks(), "shrinks only when asked");
    if change.unchanged() {
        return;
    }
    assert!(change.new_size_sectors >= chunk, "at least a chunk");
    assert_eq!(change.new_size_sectors % chunk, 0, "whole chunks");
    for m in p.slots.iter().flatten().chain(&p.spares) {
        assert!(avail(m) >= change.new_size_sectors, "within {}'s room", m.name);
    }
    let resized = resized_superblock(&own, &change, avail(first), p.events + 1, 1);
    let decoded = Superblock1::decode(&resized.encode()).expect("a resized superblock decodes");
    assert_eq!(decoded.size_sectors, change.new_size_sectors);
    let resync = if change.shrinks() { own.resync_offset_sectors } else { change.old_size_sectors };
    assert_eq!(decoded.resync_offset_sectors, resync);
}

/// `uraid grow --level` planned over the plan: the count moves by Q's member alone, and the
/// members and spares with the superblocks it writes assemble as the array taken over (the
/// new member in Q's slot to be rebuilt from its start, Q's old member a spare).
fn take_over(p: &AssemblyPlan, candidates: &[Candidate], to: u8) {
    let level = [Level::Raid4, Level::Raid5, Level::Raid6][usize::from(to % 3)];
    let avail = |m: &PlannedMember| {
        (candidates[m.candidate].size_bytes / 512).saturating_sub(m.data_offset_sectors)
    };
    if let Some(layout) = restripe_before(p, level, None) {
        let restriped = AssemblyPlan { layout, ..p.clone() };
        let _ = plan_takeover(&restriped, level, None, &avail);
    }
    let Ok(t) = plan_takeover(p, level, None, &avail) else { return };
    let n = match &t.slots {
        SlotChange::AddsQ(_) => p.raid_disks + 1,
        SlotChange::DropsQ(_) => p.raid_disks - 1,
        SlotChange::Keeps => p.raid_disks,
    };
    assert_eq!(t.raid_disks, n);
    assert_eq!(matches!(t.slots, SlotChange::AddsQ(_)), level == Level::Raid6);
    let mut after = candidates.to_vec();
    for m in p.slots.iter().flatten().chain(&p.spares) {
        let Ok(area) = &candidates[m.candidate].superblock_area else { return };
        let sb = Superblock1::decode(area).expect("planned from it");
        let mut area = area.clone();
        taken_over_superblock(&sb, &t, p.events + 1, 1).encode_into(&mut area);
        after[m.candidate].superblock_area = Ok(area);
    }
    let options = AssembleOptions { uuid: Some(p.uuid), ..AssembleOptions::default() };
    let again = plan(&after, &options).expect("a taken over array assembles");
    assert_eq!((again.level, again.layout, again.raid_disks), (t.level, t.layout, n));
    let in_slots = |plan: &AssemblyPlan| -> Vec<Option<usize>> {
        plan.slots.iter().map(|m| m.as_ref().map(|m| m.candidate)).collect()
    };
    match &t.slots {
        SlotChange::AddsQ(q) => {
            let last = again.slots[n as usize - 1].as_ref().expect("Q's slot held");
            assert_eq!((last.candidate, last.recovery_offset_sectors), (q.candidate, Some(0)));
            assert_eq!(in_slots(&again)[..n as usize - 1], in_slots(p)[..]);
        }
        SlotChange::DropsQ(q) => {
            assert!(again.spares.iter().any(|s| s.candidate == q.candidate), "Q's a spare");
            assert_eq!(in_slots(&again)[..], in_slots(p)[..n as usize]);
        }
        SlotChange::Keeps => assert_eq!(in_slots(&again), in_slots(p)),
    }
}

/// `uraid assemble --update bbl` or `no-bbl` over the plan: where every check passes, each
/// member's new superblock decodes; an added log lies past the superblock and the bitmap
/// and ends at or before the data; a removed one is gone.
fn bad_block_log(p: &AssemblyPlan, candidates: &[Candidate], bitmap_4k: Option<u8>) {
    let update = match bitmap_4k {
        Some(n) => Update::Bbl { bitmap_sectors: u64::from(n) * 8 },
        None => Update::NoBbl,
    };
    let members: Vec<&PlannedMember> = p.slots.iter().flatten().chain(&p.spares).collect();
    let own = |m: &PlannedMember| {
        let area = candidates[m.candidate].superblock_area.as_ref().ok()?;
        Superblock1::decode(area).ok()
    };
    let Some(sbs) = members.iter().map(|m| own(m)).collect::<Option<Vec<_>>>() else { return };
    if check_update(p, &sbs[0], &update).is_err() {
        return;
    }
    for sb in &sbs {
        if check_member_update(sb, &update).is_err() {
            continue;
        }
        let after = updated_superblock(sb, &update, p.events + 1, 1).expect("checked");
        let after = Superblock1::decode(&after.encode()).expect("an updated superblock decodes");
        let Update::Bbl { bitmap_sectors } = update else {
            assert_eq!((after.bblog_size_sectors, after.bblog_offset_sectors), (0, 0));
            continue;
        };
        if sb.bblog_size_sectors > 0 {
            assert_eq!(after.bblog_offset_sectors, sb.bblog_offset_sectors, "kept");
            continue;
        }
        let at = i64::from(after.bblog_offset_sectors);
        assert!(at >= 8 && after.bblog_size_sectors == 8, "past the superblock");
        let start = sb.super_offset_sectors as i64 + at;
        assert!(start + 8 <= sb.data_offset_sectors as i64, "before the data");
        if sb.has_bitmap() && sb.bitmap_offset_sectors > 0 {
            let bitmap_end = i64::from(sb.bitmap_offset_sectors) + bitmap_sectors as i64;
            assert!(at >= bitmap_end, "past the bitmap");
        }
    }
}
