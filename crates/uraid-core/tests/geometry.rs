//! Geometry against md's own pictures of each layout, md's refusals, and a property test that
//! maps every sector of random geometries to its member and back.
//!
//! The pictures are the ones in md's documentation and mdadm's man page (P/Q placement and the
//! order of data chunks), written out by hand: rows are stripes, columns are members, numbers
//! are the array's chunk numbers.

use proptest::prelude::*;
use uraid_core::{
    DiskIndex, DiskRole, Geometry, GeometryError, Layout, Level, Sector, StripeNumber,
};

/// Renders stripes as rows like "0 1 2 P" (chunk numbers counted across the array).
fn picture(level: Level, layout: Layout, disks: usize, stripes: u64) -> Vec<String> {
    let g = Geometry::new(level, layout, disks, 4096).unwrap();
    (0..stripes)
        .map(|s| {
            let map = g.stripe_map(StripeNumber(s));
            let cells: Vec<String> = map
                .roles
                .iter()
                .map(|r| match r {
                    DiskRole::P => "P".to_string(),
                    DiskRole::Q => "Q".to_string(),
                    DiskRole::Data { slot, .. } => {
                        (s * g.data_disks() as u64 + u64::from(*slot)).to_string()
                    }
                })
                .collect();
            cells.join(" ")
        })
        .collect()
}

#[test]
fn raid5_layouts_match_md_pictures() {
    let la = picture(Level::Raid5, Layout::LeftAsymmetric, 4, 4);
    assert_eq!(la, ["0 1 2 P", "3 4 P 5", "6 P 7 8", "P 9 10 11"]);
    let ls = picture(Level::Raid5, Layout::LeftSymmetric, 4, 4);
    assert_eq!(ls, ["0 1 2 P", "4 5 P 3", "8 P 6 7", "P 9 10 11"]);
    let ra = picture(Level::Raid5, Layout::RightAsymmetric, 4, 4);
    assert_eq!(ra, ["P 0 1 2", "3 P 4 5", "6 7 P 8", "9 10 11 P"]);
    let rs = picture(Level::Raid5, Layout::RightSymmetric, 4, 4);
    assert_eq!(rs, ["P 0 1 2", "5 P 3 4", "7 8 P 6", "9 10 11 P"]);
    let p0 = picture(Level::Raid5, Layout::ParityFirst, 4, 2);
    assert_eq!(p0, ["P 0 1 2", "P 3 4 5"]);
    let pn = picture(Level::Raid5, Layout::ParityLast, 4, 2);
    assert_eq!(pn, ["0 1 2 P", "3 4 5 P"]);
    let r4 = picture(Level::Raid4, Layout::ParityLast, 4, 2);
    assert_eq!(r4, ["0 1 2 P", "3 4 5 P"]);
    let r0 = picture(Level::Raid0, Layout::Striped, 3, 2);
    assert_eq!(r0, ["0 1 2", "3 4 5"]);
}

#[test]
fn raid6_layouts_match_md_pictures() {
    let ls = picture(Level::Raid6, Layout::LeftSymmetric, 5, 5);
    assert_eq!(ls, ["Q 0 1 2 P", "3 4 5 P Q", "7 8 P Q 6", "11 P Q 9 10", "P Q 12 13 14"]);
    let la = picture(Level::Raid6, Layout::LeftAsymmetric, 5, 3);
    assert_eq!(la, ["Q 0 1 2 P", "3 4 5 P Q", "6 7 P Q 8"]);
    let ra = picture(Level::Raid6, Layout::RightAsymmetric, 5, 5);
    assert_eq!(ra, ["P Q 0 1 2", "3 P Q 4 5", "6 7 P Q 8", "9 10 11 P Q", "Q 12 13 14 P"]);
    let rs = picture(Level::Raid6, Layout::RightSymmetric, 5, 3);
    assert_eq!(rs, ["P Q 0 1 2", "5 P Q 3 4", "7 8 P Q 6"]);
    let ls6 = picture(Level::Raid6, Layout::LeftSymmetric6, 5, 4);
    assert_eq!(ls6, ["0 1 2 P Q", "4 5 P 3 Q", "8 P 6 7 Q", "P 9 10 11 Q"]);
    let p06 = picture(Level::Raid6, Layout::ParityFirst6, 5, 1);
    assert_eq!(p06, ["P 0 1 2 Q"]);
    let p0 = picture(Level::Raid6, Layout::ParityFirst, 5, 1);
    assert_eq!(p0, ["P Q 0 1 2"]);
    let pn = picture(Level::Raid6, Layout::ParityLast, 5, 1);
    assert_eq!(pn, ["0 1 2 P Q"]);
}

#[test]
fn ddf_layouts_match_md_pictures() {
    let zr = picture(Level::Raid6, Layout::DdfZeroRestart, 5, 5);
    assert_eq!(zr, ["P Q 0 1 2", "3 P Q 4 5", "6 7 P Q 8", "9 10 11 P Q", "Q 12 13 14 P"]);
    let nr = picture(Level::Raid6, Layout::DdfNRestart, 5, 5);
    assert_eq!(nr, ["0 1 2 P Q", "3 4 P Q 5", "6 P Q 7 8", "P Q 9 10 11", "Q 12 13 14 P"]);
    let nc = picture(Level::Raid6, Layout::DdfNContinue, 5, 3);
    assert_eq!(nc, ["0 1 2 Q P", "4 5 Q P 3", "8 Q P 6 7"]);
}

/// md numbers Q's data slots from the member after Q; DDF by physical position.
#[test]
fn raid6_syndrome_order_md_and_ddf() {
    let g = Geometry::new(Level::Raid6, Layout::LeftAsymmetric, 5, 4096).unwrap();
    // Stripe 2 is "6 7 P Q 8": walking from the member after Q (member 4) gives 8, 6, 7.
    let map = g.stripe_map(StripeNumber(2));
    assert_eq!(map.syndrome, [Some(DiskIndex(4)), Some(DiskIndex(0)), Some(DiskIndex(1))]);
    let g = Geometry::new(Level::Raid6, Layout::DdfNRestart, 5, 4096).unwrap();
    // Stripe 1 is "3 4 P Q 5": DDF slots are positions, P and Q count as zero blocks.
    let map = g.stripe_map(StripeNumber(1));
    let want = [Some(DiskIndex(0)), Some(DiskIndex(1)), None, None, Some(DiskIndex(4))];
    assert_eq!(map.syndrome, want);
    assert_eq!(map.roles[4], DiskRole::Data { slot: 2, syndrome_slot: 4 });
}

#[test]
fn md_refusals_name_the_rule() {
    let err = Geometry::new(Level::Raid6, Layout::LeftSymmetric, 3, 65536).unwrap_err();
    assert_eq!(err, GeometryError::TooFewMembers { level: 6, min: 4, got: 3 });
    let err = Geometry::new(Level::Raid5, Layout::LeftSymmetric, 1, 65536).unwrap_err();
    assert!(matches!(err, GeometryError::TooFewMembers { min: 2, .. }), "{err}");
    let err = Geometry::new(Level::Raid5, Layout::LeftSymmetric, 257, 65536).unwrap_err();
    assert!(matches!(err, GeometryError::TooManyMembers { max: 256, .. }), "{err}");
    let err = Geometry::new(Level::Raid6, Layout::DdfNContinue, 256, 65536).unwrap_err();
    assert!(matches!(err, GeometryError::TooManyMembers { max: 255, .. }), "{err}");
    let err = Geometry::new(Level::Raid5, Layout::LeftSymmetric, 4, 96 * 1024).unwrap_err();
    assert_eq!(err, GeometryError::ChunkNotPowerOfTwo { bytes: 96 * 1024 });
    let err = Geometry::new(Level::Raid5, Layout::LeftSymmetric, 4, 2048).unwrap_err();
    assert!(matches!(err, GeometryError::ChunkOutOfRange { .. }), "{err}");
    let err = Geometry::new(Level::Raid5, Layout::DdfNRestart, 4, 65536).unwrap_err();
    assert!(err.to_string().contains("RAID5 takes"), "{err}");
    let err = Geometry::new(Level::Raid4, Layout::LeftSymmetric, 4, 65536).unwrap_err();
    assert!(err.to_string().contains("last member"), "{err}");
    assert!(Geometry::new(Level::Raid5, Layout::LeftSymmetric, 2, 4096).is_ok());
    assert!(Geometry::new(Level::Raid6, Layout::LeftSymmetric, 256, 64 << 20).is_ok());
    assert!(Layout::parse("bogus").is_err());
    assert!(Level::parse("raid7").is_err());
}

#[test]
fn layout_names_and_md_numbers_round_trip() {
    for (layout, name) in uraid_core::layout::LAYOUTS {
        assert_eq!(Layout::parse(name).unwrap(), layout);
        assert_eq!(layout.name(), name);
        if layout != Layout::Striped {
            assert_eq!(Layout::from_md(Level::Raid6, layout.md_number()).unwrap(), layout);
        }
    }
    assert_eq!(Layout::parse("ls").unwrap(), Layout::LeftSymmetric);
    assert_eq!(Layout::from_md(Level::Raid4, 0).unwrap(), Layout::ParityLast);
    assert!(Layout::from_md(Level::Raid5, 8).is_err());
}

fn layouts_for(level: Level) -> Vec<Layout> {
    uraid_core::layout::LAYOUTS
        .iter()
        .map(|(l, _)| *l)
        .filter(|l| l.check_level(level).is_ok())
        .collect()
}

fn geometry_strategy() -> impl Strategy<Value = Geometry> {
    let level =
        prop_oneof![Just(Level::Raid0), Just(Level::Raid4), Just(Level::Raid5), Just(Level::Raid6)];
    // Mostly small arrays (every sector of a rotation is then cheap to walk) and some wide ones.
    let disks = prop_oneof![4 => 1usize..=12, 1 => 13usize..=256];
    (level, any::<prop::sample::Index>(), disks, 12u32..=26).prop_filter_map(
        "md refuses the combination",
        |(level, pick, disks, chunk_shift)| {
            let layouts = layouts_for(level);
            let layout = layouts[pick.index(layouts.len())];
            Geometry::new(level, layout, disks, 1u64 << chunk_shift).ok()
        },
    )
}

/// map_sector then compute_blocknr returns the sector, and the address is sane.
fn round_trip(g: &Geometry, sector: u64) {
    let addr = g.map_sector(Sector(sector));
    assert!(addr.disk.get() < g.raid_disks());
    assert!(matches!(g.stripe_map(addr.stripe).roles[addr.disk.get()], DiskRole::Data { .. }));
    assert_eq!(addr.member_sector.0 / g.chunk_sectors(), addr.stripe.0);
    assert_eq!(g.compute_blocknr(addr.disk, addr.member_sector), Some(Sector(sector)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    /// Every sector of a whole rotation (or of a window and every chunk edge, when a rotation is
    /// too big to walk) maps to a data chunk and back; every member sector of those stripes
    /// maps back to the array exactly once per data chunk.
    #[test]
    fn every_sector_maps_there_and_back(g in geometry_strategy(), start in 0u64..1 << 40) {
        let period_sectors = g.rotation_period() * g.stripe_data_sectors();
        if period_sectors <= 1 << 16 {
            (0..period_sectors).for_each(|s| round_trip(&g, s));
        } else {
            let base = start - start % g.chunk_sectors();
            (base..base + 4096).for_each(|s| round_trip(&g, s));
            for chunk in 0..(g.rotation_period() * g.data_disks() as u64).min(1 << 14) {
                round_trip(&g, chunk * g.chunk_sectors());
                round_trip(&g, (chunk + 1) * g.chunk_sectors() - 1);
            }
        }
        for stripe in 0..g.rotation_period().min(64) {
            let member_sector = Sector(stripe * g.chunk_sectors() + start % g.chunk_sectors());
            let mapped = (0..g.raid_disks())
                .filter_map(|d| g.compute_blocknr(DiskIndex(d as u16), member_sector))
                .inspect(|a| assert_eq!(g.map_sector(*a).member_sector, member_sector))
                .count();
            prop_assert_eq!(mapped, g.data_disks());
        }
    }
}
