//! md's geometry: where each chunk of the array lives, and where P and Q go, for every layout.
//!
//! The array is cut into chunks; `data_disks` consecutive chunks form a stripe, which occupies
//! chunk number `stripe` on every member (data offset aside). Where a stripe's P, Q and data
//! chunks sit depends only on the stripe number modulo a rotation period, so `Geometry::new`
//! evaluates md's placement rules (`raid5_compute_sector`) once per phase into a table of
//! `StripeMap`s; every lookup after that is an index into the table. The table is the one place
//! where levels and layouts differ; everything else is uniform.
//!
//! Invariant (checked by the property tests): `map_sector` and `compute_blocknr` are inverse
//! bijections between array sectors and the data sectors of the members.

use crate::constants::{CHUNK_BYTES_MAX, CHUNK_BYTES_MIN, RAID_DISKS_MAX, RAID_DISKS_MAX_DDF};
use crate::error::GeometryError;
use crate::layout::{Layout, Level};
use crate::units::{DiskIndex, SECTOR_BYTES, Sector, StripeNumber};

/// What a member holds in one stripe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskRole {
    /// Data chunk number `slot` of the stripe (md's `dd_idx` after mapping), entering the
    /// RAID6 Q syndrome with coefficient g^`syndrome_slot`.
    Data { slot: u16, syndrome_slot: u8 },
    #[doc(alias = "pd_idx")]
    P,
    #[doc(alias = "qd_idx")]
    Q,
}

/// The placement of one stripe's chunks on the members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StripeMap {
    #[doc(alias = "pd_idx")]
    pub p_disk: Option<DiskIndex>,
    #[doc(alias = "qd_idx")]
    pub q_disk: Option<DiskIndex>,
    /// Data slot (the order of chunks in the array) to member.
    pub data_disk: Vec<DiskIndex>,
    /// Member to role.
    pub roles: Vec<DiskRole>,
    /// The Q syndrome's inputs in coefficient order: `syndrome[i]` enters Q times g^i. `None`
    /// is a zero block (DDF layouts count the P and Q positions as zero slots).
    pub syndrome: Vec<Option<DiskIndex>>,
}

/// Where an array sector lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkAddress {
    pub stripe: StripeNumber,
    #[doc(alias = "dd_idx")]
    pub data_slot: u16,
    pub disk: DiskIndex,
    /// Sector on the member, counted from the start of its data area (data offset excluded).
    pub member_sector: Sector,
}

/// An array's shape: level, layout, member count and chunk size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    level: Level,
    layout: Layout,
    raid_disks: u16,
    chunk_sectors: u64,
    /// One map per phase of the rotation: stripe `s` uses `maps[s % maps.len()]`.
    maps: Vec<StripeMap>,
}

impl Geometry {
    /// Validates the combination with md's rules and builds the placement table.
    pub fn new(
        level: Level,
        layout: Layout,
        raid_disks: usize,
        chunk_bytes: u64,
    ) -> Result<Geometry, GeometryError> {
        layout.check_level(level)?;
        check_raid_disks(level, layout, raid_disks)?;
        check_chunk(chunk_bytes)?;
        let raid_disks = u16::try_from(raid_disks).expect("checked against RAID_DISKS_MAX");
        let period = rotation_period(level, layout, raid_disks);
        let maps = (0..period).map(|phase| build_map(level, layout, raid_disks, phase)).collect();
        let geometry =
            Geometry { level, layout, raid_disks, chunk_sectors: chunk_bytes / SECTOR_BYTES, maps };
        geometry.maps.iter().for_each(|m| geometry.assert_map(m));
        Ok(geometry)
    }

    #[must_use]
    pub fn level(&self) -> Level {
        self.level
    }

    #[must_use]
    pub fn layout(&self) -> Layout {
        self.layout
    }

    #[must_use]
    pub fn raid_disks(&self) -> usize {
        usize::from(self.raid_disks)
    }

    #[must_use]
    pub fn data_disks(&self) -> usize {
        usize::from(self.raid_disks - self.level.max_degraded())
    }

    #[must_use]
    pub fn max_degraded(&self) -> usize {
        usize::from(self.level.max_degraded())
    }

    #[must_use]
    pub fn chunk_sectors(&self) -> u64 {
        self.chunk_sectors
    }

    #[must_use]
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_sectors * SECTOR_BYTES
    }

    /// Array sectors in one stripe (its data chunks only).
    #[must_use]
    pub fn stripe_data_sectors(&self) -> u64 {
        self.chunk_sectors * self.data_disks() as u64
    }

    /// Stripes that fit in members whose data areas hold `component_sectors` each; md uses
    /// whole chunks only.
    #[must_use]
    pub fn stripes(&self, component_sectors: u64) -> u64 {
        component_sectors / self.chunk_sectors
    }

    /// The array's size for members whose data areas hold `component_sectors` each.
    #[must_use]
    pub fn array_sectors(&self, component_sectors: u64) -> u64 {
        self.stripes(component_sectors) * self.stripe_data_sectors()
    }

    /// How many stripes the placement takes to repeat.
    #[must_use]
    pub fn rotation_period(&self) -> u64 {
        self.maps.len() as u64
    }

    /// The placement of a stripe's chunks.
    #[must_use]
    pub fn stripe_map(&self, stripe: StripeNumber) -> &StripeMap {
        &self.maps[(stripe.0 % self.maps.len() as u64) as usize]
    }

    /// Array sector to member address (md's `raid5_compute_sector`).
    #[must_use]
    pub fn map_sector(&self, array_sector: Sector) -> ChunkAddress {
        let chunk_offset = array_sector.0 % self.chunk_sectors;
        let chunk_number = array_sector.0 / self.chunk_sectors;
        let data_disks = self.data_disks() as u64;
        let data_slot = (chunk_number % data_disks) as u16;
        let stripe = StripeNumber(chunk_number / data_disks);
        let disk = self.stripe_map(stripe).data_disk[usize::from(data_slot)];
        let member_sector = Sector(stripe.0 * self.chunk_sectors + chunk_offset);
        ChunkAddress { stripe, data_slot, disk, member_sector }
    }

    /// Member address to array sector (md's `raid5_compute_blocknr`); `None` for P and Q.
    #[must_use]
    pub fn compute_blocknr(&self, disk: DiskIndex, member_sector: Sector) -> Option<Sector> {
        assert!(disk.get() < self.raid_disks(), "disk {disk} beyond {} members", self.raid_disks);
        let stripe = StripeNumber(member_sector.0 / self.chunk_sectors);
        let chunk_offset = member_sector.0 % self.chunk_sectors;
        match self.stripe_map(stripe).roles[disk.get()] {
            DiskRole::Data { slot, .. } => {
                let chunk_number = stripe.0 * self.data_disks() as u64 + u64::from(slot);
                Some(Sector(chunk_number * self.chunk_sectors + chunk_offset))
            }
            DiskRole::P | DiskRole::Q => None,
        }
    }

    /// Pair assertions on a freshly built map: every member has exactly one role and the data,
    /// role and syndrome tables agree.
    fn assert_map(&self, map: &StripeMap) {
        assert_eq!(map.roles.len(), self.raid_disks());
        assert_eq!(map.data_disk.len(), self.data_disks());
        for (slot, disk) in map.data_disk.iter().enumerate() {
            let DiskRole::Data { slot: s, syndrome_slot } = map.roles[disk.get()] else {
                panic!("data slot {slot} on disk {disk} whose role is {:?}", map.roles[disk.get()]);
            };
            assert_eq!(usize::from(s), slot);
            if self.level == Level::Raid6 {
                assert_eq!(map.syndrome[usize::from(syndrome_slot)], Some(*disk));
            }
        }
        let parity = map.roles.iter().filter(|r| !matches!(r, DiskRole::Data { .. })).count();
        assert_eq!(parity, self.max_degraded());
        assert_eq!(map.p_disk.is_some(), self.level != Level::Raid0);
        assert_eq!(map.q_disk.is_some(), self.level == Level::Raid6);
    }
}

fn check_raid_disks(level: Level, layout: Layout, raid_disks: usize) -> Result<(), GeometryError> {
    let min = level.raid_disks_min();
    if raid_disks < usize::from(min) {
        return Err(GeometryError::TooFewMembers { level: level.number(), min, got: raid_disks });
    }
    if raid_disks > usize::from(RAID_DISKS_MAX) {
        let rule = "uraid's limit; RAID6's GF(2^8) syndrome has 255 distinct coefficients";
        return Err(GeometryError::TooManyMembers { max: RAID_DISKS_MAX, got: raid_disks, rule });
    }
    if layout.is_ddf() && raid_disks > usize::from(RAID_DISKS_MAX_DDF) {
        let rule = "DDF layouts give every member a Q coefficient and GF(2^8) has only 255";
        return Err(GeometryError::TooManyMembers {
            max: RAID_DISKS_MAX_DDF,
            got: raid_disks,
            rule,
        });
    }
    Ok(())
}

fn check_chunk(chunk_bytes: u64) -> Result<(), GeometryError> {
    if !chunk_bytes.is_power_of_two() {
        return Err(GeometryError::ChunkNotPowerOfTwo { bytes: chunk_bytes });
    }
    if !(CHUNK_BYTES_MIN..=CHUNK_BYTES_MAX).contains(&chunk_bytes) {
        return Err(GeometryError::ChunkOutOfRange {
            bytes: chunk_bytes,
            min: CHUNK_BYTES_MIN,
            max: CHUNK_BYTES_MAX,
        });
    }
    Ok(())
}

/// Stripes before the placement repeats: fixed-parity layouts never rotate, the `-6` layouts
/// rotate P over the first n-1 members, the others over all n.
fn rotation_period(level: Level, layout: Layout, raid_disks: u16) -> u64 {
    match (level, layout) {
        (Level::Raid0 | Level::Raid4, _)
        | (_, Layout::ParityFirst | Layout::ParityLast | Layout::ParityFirst6) => 1,
        (_, l) if l.is_q_last() => u64::from(raid_disks - 1),
        _ => u64::from(raid_disks),
    }
}

/// The placement of P, Q and each data chunk for one phase, in md's own terms.
fn build_map(level: Level, layout: Layout, raid_disks: u16, phase: u64) -> StripeMap {
    let n = usize::from(raid_disks);
    let data_disks = n - usize::from(level.max_degraded());
    let mut p_disk = None;
    let mut q_disk = None;
    let data_disk: Vec<DiskIndex> = (0..data_disks)
        .map(|dd| {
            let place = md_place(level, layout, n, phase as usize, dd);
            p_disk = place.p;
            q_disk = place.q;
            disk_index(place.disk)
        })
        .collect();
    let mut roles = vec![DiskRole::P; n];
    if let Some(q) = q_disk {
        roles[q] = DiskRole::Q;
    }
    let syndrome = syndrome_order(layout, n, &data_disk, q_disk);
    let mut syndrome_slot_of = vec![0u8; n];
    for (i, disk) in syndrome.iter().enumerate() {
        if let Some(disk) = disk {
            syndrome_slot_of[disk.get()] = u8::try_from(i).expect("at most 255 syndrome slots");
        }
    }
    for (slot, disk) in data_disk.iter().enumerate() {
        let syndrome_slot = syndrome_slot_of[disk.get()];
        roles[disk.get()] = DiskRole::Data { slot: slot as u16, syndrome_slot };
    }
    let p_disk = p_disk.map(disk_index);
    let q_disk = q_disk.map(disk_index);
    let syndrome = if level == Level::Raid6 { syndrome } else { Vec::new() };
    StripeMap { p_disk, q_disk, data_disk, roles, syndrome }
}

fn disk_index(i: usize) -> DiskIndex {
    DiskIndex(u16::try_from(i).expect("member index fits u16"))
}

/// Members of one data chunk's stripe, as md's `raid5_compute_sector` places them.
struct Place {
    p: Option<usize>,
    q: Option<usize>,
    disk: usize,
}

/// md's placement rules for data chunk `dd` of a stripe in rotation phase `s`.
///
/// Worked example, RAID5 left-symmetric on 4 members: stripe 0 has P on member 3 and data
/// 0,1,2 on members 0,1,2; stripe 1 has P on member 2 and data starting just after it, so data
/// 0,1,2 on members 3,0,1.
fn md_place(level: Level, layout: Layout, n: usize, s: usize, dd: usize) -> Place {
    let data = |p: usize, disk: usize| Place { p: Some(p), q: None, disk };
    match level {
        Level::Raid0 => Place { p: None, q: None, disk: dd },
        Level::Raid4 => data(n - 1, dd),
        Level::Raid5 => {
            let (p, disk) = raid5_place(layout, n, s, dd);
            data(p, disk)
        }
        Level::Raid6 => raid6_place(layout, n, s, dd),
    }
}

/// RAID5 over `n` members (also the P rotation of RAID6's `-6` layouts, over n-1 members).
fn raid5_place(layout: Layout, n: usize, s: usize, dd: usize) -> (usize, usize) {
    let data_disks = n - 1;
    let skip = |p: usize| if dd >= p { dd + 1 } else { dd };
    match layout {
        Layout::LeftAsymmetric | Layout::LeftAsymmetric6 => {
            let p = data_disks - s % n;
            (p, skip(p))
        }
        Layout::RightAsymmetric | Layout::RightAsymmetric6 => {
            let p = s % n;
            (p, skip(p))
        }
        Layout::LeftSymmetric | Layout::LeftSymmetric6 => {
            let p = data_disks - s % n;
            (p, (p + 1 + dd) % n)
        }
        Layout::RightSymmetric | Layout::RightSymmetric6 => {
            let p = s % n;
            (p, (p + 1 + dd) % n)
        }
        Layout::ParityFirst | Layout::ParityFirst6 => (0, dd + 1),
        Layout::ParityLast => (data_disks, dd),
        other => unreachable!("layout {other:?} is not a RAID5 rotation (check_level refuses it)"),
    }
}

fn raid6_place(layout: Layout, n: usize, s: usize, dd: usize) -> Place {
    if layout.is_q_last() {
        let (p, disk) = raid5_place(layout, n - 1, s, dd);
        return Place { p: Some(p), q: Some(n - 1), disk };
    }
    // Asymmetric layouts skip over P and Q; when P is last, Q wraps to member 0 (Q D D D P).
    let asymmetric = |p: usize| {
        if p == n - 1 {
            Place { p: Some(p), q: Some(0), disk: dd + 1 }
        } else {
            Place { p: Some(p), q: Some(p + 1), disk: if dd >= p { dd + 2 } else { dd } }
        }
    };
    match layout {
        Layout::LeftAsymmetric => asymmetric(n - 1 - s % n),
        Layout::RightAsymmetric | Layout::DdfZeroRestart => asymmetric(s % n),
        // Like left-asymmetric, but the first stripe is D D D P Q rather than Q D D D P.
        Layout::DdfNRestart => asymmetric(n - 1 - (s + 1) % n),
        Layout::LeftSymmetric => {
            let p = n - 1 - s % n;
            Place { p: Some(p), q: Some((p + 1) % n), disk: (p + 2 + dd) % n }
        }
        Layout::RightSymmetric => {
            let p = s % n;
            Place { p: Some(p), q: Some((p + 1) % n), disk: (p + 2 + dd) % n }
        }
        // Like left-symmetric, but Q comes just before P.
        Layout::DdfNContinue => {
            let p = n - 1 - s % n;
            Place { p: Some(p), q: Some((p + n - 1) % n), disk: (p + 1 + dd) % n }
        }
        Layout::ParityFirst => Place { p: Some(0), q: Some(1), disk: dd + 2 },
        Layout::ParityLast => Place { p: Some(n - 2), q: Some(n - 1), disk: dd },
        other => unreachable!("layout {other:?} is not a RAID6 layout (check_level refuses it)"),
    }
}

/// The order in which data chunks enter the Q syndrome.
///
/// md numbers data chunks walking the members from the one just after Q (from member 0 when Q
/// is last), counting data members only. DDF numbers every member by its position from member
/// 0, P and Q included, so P's and Q's slots hold zero blocks. Numbering md's data chunks from
/// member 0 gives a wrong Q even for the default layout.
fn syndrome_order(
    layout: Layout,
    n: usize,
    data_disk: &[DiskIndex],
    q_disk: Option<usize>,
) -> Vec<Option<DiskIndex>> {
    let Some(q) = q_disk else { return Vec::new() };
    let mut data_member = vec![false; n];
    for d in data_disk {
        data_member[d.get()] = true;
    }
    let is_data = |i: usize| data_member[i];
    if layout.is_ddf() {
        return (0..n).map(|i| is_data(i).then(|| disk_index(i))).collect();
    }
    let d0 = if q == n - 1 { 0 } else { q + 1 };
    (0..n).map(|k| (d0 + k) % n).filter(|&i| is_data(i)).map(|i| Some(disk_index(i))).collect()
}
