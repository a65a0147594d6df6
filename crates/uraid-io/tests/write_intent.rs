//! The driver places the engine's write-intent bitmap I/O at the bitmap's offset on each
//! member, apart from the data area.

use uraid_core::array::{Array, ArrayConfig, ReqId, WriteIntentConfig};
use uraid_core::{Geometry, Level, Sector};
use uraid_io::{Driver, Member, MemoryMember};

const BITMAP_AT: usize = 8192; // md v1.2: superblock at 4 KiB, bitmap 8 sectors after it
const DATA_AT: usize = 64 << 10;
const MEMBER_BYTES: usize = DATA_AT + (1 << 20);

#[test]
fn bitmap_pages_land_at_the_bitmap_offset_before_the_data() {
    let g = Geometry::new(Level::Raid5, Level::Raid5.default_layout(), 4, 64 << 10).unwrap();
    let mut a = Array::new(ArrayConfig {
        geometry: g,
        stripe_size_bytes: 4096,
        stripe_cache_size: 64,
        member_sectors: ((MEMBER_BYTES - DATA_AT) / 512) as u64,
    })
    .unwrap();
    let mut image = vec![0u8; 4096];
    image[..4].copy_from_slice(b"bitm"); // the bitmap superblock is the lifecycle layer's
    a.enable_write_intent(&WriteIntentConfig {
        image,
        bits_offset: 256,
        chunk_sectors: 256, // 128 KiB of each member per bit
        chunks: 8,
    });
    let members =
        (0..4).map(|i| Box::new(MemoryMember::new(&format!("m{i}"), MEMBER_BYTES))).collect();
    let mut d = Driver::new(members)
        .with_data_offset_bytes(DATA_AT as u64)
        .with_bitmap_offset_bytes(BITMAP_AT as u64);
    // Member sector 512 (stripe 4 of 64 KiB chunks) is bitmap chunk 2.
    let data = vec![0xa5u8; 4096];
    a.submit_write(ReqId(1), Sector(4 * 3 * 128), data.clone());
    d.run_until_idle(&mut a).unwrap();
    assert!(a.take_completed().pop().unwrap().1.is_ok());
    for m in d.members() {
        let bytes = m.bytes();
        assert_eq!(&bytes[BITMAP_AT..BITMAP_AT + 4], b"bitm", "{}: superblock kept", m.info().name);
        assert_eq!(bytes[BITMAP_AT + 256], 0b100, "{}: bit 2 set", m.info().name);
    }
    a.submit_read(ReqId(2), Sector(4 * 3 * 128), vec![0; 4096]);
    d.run_until_idle(&mut a).unwrap();
    assert_eq!(a.take_completed().pop().unwrap().2, data);
}
