//! The stripe planners' member I/O counts: the seed lessons as exact numbers (RAID6 one-block
//! update = 3 reads + 3 writes at any width; full stripes read nothing; a degraded RAID6 read
//! never touches Q), every rotation of every layout, and a property test that every plan is
//! sufficient and never reads a failed member.

use proptest::prelude::*;
use uraid_core::stripe::{
    BlockView, Cover, PlanError, StripeView, WriteMethod, plan_read, plan_write,
};
use uraid_core::{DiskIndex, DiskRole, Geometry, Level, StripeNumber};

fn geometry(level: Level, disks: u16) -> Geometry {
    Geometry::new(level, level.default_layout(), usize::from(disks), 64 << 10)
        .expect("valid geometry")
}

fn data_member(g: &Geometry, stripe: u64, slot: usize) -> DiskIndex {
    g.stripe_map(StripeNumber(stripe)).data_disk[slot]
}

/// Block views with `slot`'s block wholly overwritten.
fn one_block_write(g: &Geometry, stripe: u64, slot: usize, cover: Cover) -> Vec<BlockView> {
    let mut blocks = vec![BlockView::default(); g.raid_disks()];
    blocks[data_member(g, stripe, slot).get()].towrite = cover;
    blocks
}

#[test]
fn one_block_update_reads_data_p_q_at_every_width() {
    for (level, widths) in
        [(Level::Raid6, 6..=20u16), (Level::Raid5, 4..=20), (Level::Raid4, 4..=20)]
    {
        for disks in widths {
            let g = geometry(level, disks);
            for stripe in 0..u64::from(disks) {
                for slot in 0..g.data_disks() {
                    for cover in [Cover::Full, Cover::Partial] {
                        let blocks = one_block_write(&g, stripe, slot, cover);
                        let map = g.stripe_map(StripeNumber(stripe));
                        let plan = plan_write(&StripeView { level, map, blocks: &blocks }).unwrap();
                        let parity = usize::from(level.max_degraded());
                        assert_eq!(plan.method, WriteMethod::ReadModifyWrite, "{level:?} {disks}");
                        assert_eq!(plan.reads.len(), 1 + parity, "{level:?} {disks} reads");
                        assert_eq!(plan.writes, plan.reads, "writes the block and its parity");
                    }
                }
            }
        }
    }
}

#[test]
fn narrow_arrays_reconstruct_write_when_it_reads_less() {
    // RAID5 of 3 (2 data): rcw reads the one other block; RAID6 of 4 and 5 likewise.
    for (level, disks, reads) in [(Level::Raid5, 3, 1), (Level::Raid6, 4, 1), (Level::Raid6, 5, 2)]
    {
        let g = geometry(level, disks);
        let blocks = one_block_write(&g, 0, 0, Cover::Full);
        let plan =
            plan_write(&StripeView { level, map: g.stripe_map(StripeNumber(0)), blocks: &blocks })
                .unwrap();
        assert_eq!((plan.method, plan.reads.len()), (WriteMethod::ReconstructWrite, reads));
        assert_eq!(plan.writes.len(), 1 + usize::from(level.max_degraded()));
    }
}

#[test]
fn full_stripe_writes_read_nothing_even_degraded() {
    for (level, disks) in [(Level::Raid5, 5), (Level::Raid6, 8)] {
        let g = geometry(level, disks);
        for failed in [None, Some(0usize), Some(usize::from(disks) - 1)] {
            let mut blocks = vec![
                BlockView { towrite: Cover::Full, ..BlockView::default() };
                usize::from(disks)
            ];
            let map = g.stripe_map(StripeNumber(3));
            for (b, role) in blocks.iter_mut().zip(&map.roles) {
                if !matches!(role, DiskRole::Data { .. }) {
                    b.towrite = Cover::None;
                }
            }
            if let Some(f) = failed {
                blocks[f].failed = true;
            }
            let plan = plan_write(&StripeView { level, map, blocks: &blocks }).unwrap();
            assert_eq!(plan.method, WriteMethod::FullStripe);
            assert!(plan.reads.is_empty());
            assert_eq!(plan.writes.len(), usize::from(disks) - usize::from(failed.is_some()));
        }
    }
}

#[test]
fn cached_blocks_are_not_read_again() {
    let g = geometry(Level::Raid6, 8);
    let map = g.stripe_map(StripeNumber(0));
    let mut blocks = one_block_write(&g, 0, 2, Cover::Full);
    blocks[map.p_disk.unwrap().get()].uptodate = true;
    blocks[map.q_disk.unwrap().get()].uptodate = true;
    let plan = plan_write(&StripeView { level: Level::Raid6, map, blocks: &blocks }).unwrap();
    assert_eq!(plan.reads, vec![map.data_disk[2]]);
}

#[test]
fn degraded_writes() {
    let g = geometry(Level::Raid6, 8);
    let map = g.stripe_map(StripeNumber(1));
    // A failed data member elsewhere does not change a one-block rmw.
    let mut blocks = one_block_write(&g, 1, 0, Cover::Full);
    blocks[map.data_disk[3].get()].failed = true;
    let plan = plan_write(&StripeView { level: Level::Raid6, map, blocks: &blocks }).unwrap();
    assert_eq!((plan.method, plan.reads.len()), (WriteMethod::ReadModifyWrite, 3));
    // Wholly writing the failed member's block: rcw over the other data; the failed block is
    // not written, its contents live in P and Q.
    let mut blocks = one_block_write(&g, 1, 3, Cover::Full);
    blocks[map.data_disk[3].get()].failed = true;
    let plan = plan_write(&StripeView { level: Level::Raid6, map, blocks: &blocks }).unwrap();
    assert_eq!((plan.method, plan.reads.len()), (WriteMethod::ReconstructWrite, 5));
    assert_eq!(plan.writes.len(), 2);
    // Partially writing it: its old contents must be rebuilt first (all data + P).
    blocks[map.data_disk[3].get()].towrite = Cover::Partial;
    let plan = plan_write(&StripeView { level: Level::Raid6, map, blocks: &blocks }).unwrap();
    assert_eq!(plan.method, WriteMethod::DegradedReconstructWrite);
    assert_eq!(plan.reads.len(), 6, "5 surviving data + P, not Q");
    assert!(!plan.reads.contains(&map.q_disk.unwrap()));
    // RAID5 with P failed: write the data; a block written in part is read first (it is
    // written whole), nothing else.
    let g5 = geometry(Level::Raid5, 5);
    let map5 = g5.stripe_map(StripeNumber(0));
    let mut blocks = one_block_write(&g5, 0, 1, Cover::Partial);
    blocks[map5.p_disk.unwrap().get()].failed = true;
    let plan = plan_write(&StripeView { level: Level::Raid5, map: map5, blocks: &blocks }).unwrap();
    assert_eq!((plan.method, plan.reads.len(), plan.writes.len()), (WriteMethod::DataOnly, 1, 1));
    let mut blocks = one_block_write(&g5, 0, 1, Cover::Full);
    blocks[map5.p_disk.unwrap().get()].failed = true;
    let plan = plan_write(&StripeView { level: Level::Raid5, map: map5, blocks: &blocks }).unwrap();
    assert_eq!((plan.method, plan.reads.len(), plan.writes.len()), (WriteMethod::DataOnly, 0, 1));
}

#[test]
fn degraded_raid6_read_uses_p_not_q() {
    let g = geometry(Level::Raid6, 10);
    for stripe in 0..10 {
        let map = g.stripe_map(StripeNumber(stripe));
        let mut blocks = vec![BlockView::default(); 10];
        let lost = map.data_disk[4];
        blocks[lost.get()].failed = true;
        let view = StripeView { level: Level::Raid6, map, blocks: &blocks };
        let healthy = plan_read(&view, &[map.data_disk[1]]).unwrap();
        assert_eq!((healthy.reads, healthy.rebuild.len()), (vec![map.data_disk[1]], 0));
        let degraded = plan_read(&view, &[lost]).unwrap();
        assert_eq!(degraded.rebuild, vec![lost]);
        assert_eq!(degraded.reads.len(), 8, "7 other data + P");
        assert!(degraded.reads.contains(&map.p_disk.unwrap()));
        assert!(!degraded.reads.contains(&map.q_disk.unwrap()));
        // With P gone as well, Q stands in.
        blocks[map.p_disk.unwrap().get()].failed = true;
        let view = StripeView { level: Level::Raid6, map, blocks: &blocks };
        let plan = plan_read(&view, &[lost]).unwrap();
        assert!(plan.reads.contains(&map.q_disk.unwrap()) && plan.reads.len() == 8);
    }
}

#[test]
fn beyond_redundancy_is_refused() {
    let g = geometry(Level::Raid5, 4);
    let map = g.stripe_map(StripeNumber(0));
    let blocks = vec![
        BlockView { failed: true, ..BlockView::default() },
        BlockView { failed: true, ..BlockView::default() },
        BlockView::default(),
        BlockView::default(),
    ];
    let view = StripeView { level: Level::Raid5, map, blocks: &blocks };
    let want = PlanError::BeyondRedundancy { level: 5, failed: 2, max: 1 };
    assert_eq!(plan_write(&view), Err(want.clone()));
    assert_eq!(plan_read(&view, &[DiskIndex(2)]), Err(want));
}

fn any_view() -> impl Strategy<Value = (Level, u16, u64, Vec<(bool, bool, u8)>)> {
    (prop_oneof![Just(Level::Raid4), Just(Level::Raid5), Just(Level::Raid6)], 4u16..=12, 0u64..24)
        .prop_flat_map(|(level, disks, stripe)| {
            let block = (any::<bool>(), any::<bool>(), 0u8..3);
            (
                Just(level),
                Just(disks),
                Just(stripe),
                prop::collection::vec(block, usize::from(disks)),
            )
        })
}

proptest! {
    /// Every plan reads no failed member, reads nothing already cached, and leaves the
    /// stripe able to compute its parity by the method it chose.
    #[test]
    fn plans_are_sufficient((level, disks, stripe, raw) in any_view()) {
        let g = Geometry::new(level, level.default_layout(), usize::from(disks), 64 << 10).unwrap();
        let map = g.stripe_map(StripeNumber(stripe));
        let max_failed = usize::from(level.max_degraded());
        let mut failed_budget = max_failed;
        let blocks: Vec<BlockView> = raw.iter().zip(&map.roles).map(|(&(fail, up, cover), role)| {
            let failed = fail && failed_budget > 0 && { failed_budget -= 1; true };
            let towrite = match (role, cover) {
                (DiskRole::Data { .. }, 1) => Cover::Partial,
                (DiskRole::Data { .. }, 2) => Cover::Full,
                _ => Cover::None,
            };
            BlockView { failed, uptodate: up && !failed, towrite }
        }).collect();
        let view = StripeView { level, map, blocks: &blocks };
        let plan = plan_write(&view).unwrap();
        let mut known: Vec<bool> = blocks.iter().map(|b| b.uptodate).collect();
        for d in &plan.reads {
            prop_assert!(!blocks[d.get()].failed && !blocks[d.get()].uptodate);
            known[d.get()] = true;
        }
        let data: Vec<usize> = map.data_disk.iter().map(|d| d.get()).collect();
        let parity: Vec<usize> = [map.p_disk, map.q_disk].into_iter().flatten().map(DiskIndex::get).collect();
        let live_parity: Vec<usize> = parity.iter().copied().filter(|&p| !blocks[p].failed).collect();
        match plan.method {
            WriteMethod::FullStripe => prop_assert!(plan.reads.is_empty()),
            WriteMethod::DataOnly => {
                for &d in data.iter().filter(|&&d| blocks[d].towrite == Cover::Partial && !blocks[d].failed) {
                    prop_assert!(known[d], "a block written in part is read first");
                }
                prop_assert!(plan.reads.iter().all(|d| blocks[d.get()].towrite == Cover::Partial));
            }
            WriteMethod::ReadModifyWrite => {
                for &d in data.iter().filter(|&&d| blocks[d].towrite != Cover::None) {
                    prop_assert!(known[d]);
                }
                for &p in &live_parity { prop_assert!(known[p]); }
            }
            WriteMethod::ReconstructWrite => {
                for &d in data.iter().filter(|&&d| blocks[d].towrite != Cover::Full) {
                    prop_assert!(known[d]);
                }
            }
            WriteMethod::DegradedReconstructWrite => {
                let unknown = data.iter().filter(|&&d| !known[d]).count();
                let parity_known = parity.iter().filter(|&&p| known[p]).count();
                prop_assert!(unknown <= parity_known, "{unknown} data blocks to rebuild from {parity_known}");
            }
        }
        for w in &plan.writes { prop_assert!(!blocks[w.get()].failed); }
    }
}
