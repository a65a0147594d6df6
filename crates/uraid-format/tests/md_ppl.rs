//! md's PPL records as the Linux kernel wrote them: `tests/data/md-ppl-crash.bin.zst` holds,
//! for each of the four members of a RAID5 (chunk 64 KiB, left-symmetric) that mdadm created
//! with `--consistency-policy=ppl` and the 6.12 kernel crashed under small random writes
//! (`echo b > /proc/sysrq-trigger` in the VM, DEVELOPERS.md), its 4 KiB superblock and its
//! 1 MiB PPL area, with every byte zeroed that is neither a header nor the partial parity of
//! the member's newest log write (the rest was random data; zeros keep the file small).

use std::io::Read;
use uraid_format::md_ppl::{EntryCoverage, MdPplHeader, newest_in_chain, signature};
use uraid_format::{Superblock1, feature};

const AREA_BYTES: usize = 1 << 20;

fn members() -> Vec<(Superblock1, Vec<u8>)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/md-ppl-crash.bin.zst");
    let file = std::fs::File::open(path).expect("the fixture");
    let mut bytes = Vec::new();
    ruzstd::decoding::StreamingDecoder::new(file)
        .expect("a zstd frame")
        .read_to_end(&mut bytes)
        .expect("the fixture decompresses");
    bytes
        .chunks(4096 + AREA_BYTES)
        .map(|m| (Superblock1::decode(&m[..4096]).expect("md's superblock"), m[4096..].to_vec()))
        .collect()
}

#[test]
fn the_kernels_headers_decode_and_the_newest_is_the_end_of_each_chain() {
    let members = members();
    assert_eq!(members.len(), 4);
    // The kernel's counter is shared by every member's log (one generation per log write).
    let expected = [(921_600, 1213), (581_632, 1218), (720_896, 1219), (991_232, 1216)];
    for (slot, (sb, area)) in members.iter().enumerate() {
        assert_eq!(sb.feature_map & feature::MULTIPLE_PPLS, feature::MULTIPLE_PPLS);
        assert_eq!(sb.ppl(), Some((8, 2048)), "mdadm's 1 MiB area right after the superblock");
        let sig = signature(&sb.set_uuid.0);
        let first = MdPplHeader::decode(area).expect("a header at the area's start");
        assert_eq!(first.signature, sig);
        let (at, newest) = newest_in_chain(area, sig).expect("a chain");
        assert_eq!((at, newest.generation), expected[slot], "member {slot}");
        assert!(newest_in_chain(area, sig ^ 1).is_none(), "another array's signature");
        let mut pp_at = at + 4096;
        for e in &newest.entries {
            let pp = &area[pp_at..pp_at + e.pp_size as usize];
            assert_eq!(crc32c(pp), e.checksum, "member {slot}: the entry's partial parity");
            pp_at += e.pp_size as usize;
            assert_eq!(e.parity_disk as usize, slot, "a member logs the stripes it holds P of");
            let c = EntryCoverage::of(e, 128, 3).expect("an md entry has md's shape");
            assert_eq!(c.strip * 512 * c.count, u64::from(e.data_size));
            // Every row of the entry lies in one stripe (chunk row) of the array.
            let stripe = |r: u64| r / 128 / 3;
            let rows: Vec<u64> = (0..c.strip).flat_map(|i| c.sectors_at(i, 128)).collect();
            assert!(rows.iter().all(|&r| stripe(r) == stripe(c.first)), "{e:?}");
        }
        // Re-encoding gives the kernel's bytes back.
        assert_eq!(newest.encode(), area[at..at + 4096].to_vec());
    }
}

fn crc32c(b: &[u8]) -> u32 {
    // The standard CRC-32C, bit by bit: an independent check of the crate the codec uses.
    let mut crc = u32::MAX;
    for &byte in b {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
        }
    }
    !crc
}

#[test]
fn shapes_md_does_not_write_are_refused() {
    let e = |pp_size, data_size| uraid_format::md_ppl::MdPplEntry {
        data_sector: 0,
        pp_size,
        data_size,
        parity_disk: 0,
        checksum: 0,
    };
    assert_eq!(EntryCoverage::of(&e(4096, 12288), 128, 3).map(|c| c.count), Some(3));
    assert_eq!(
        EntryCoverage::of(&e(0, 3 * 4096), 128, 3).map(|c| (c.count, c.strip)),
        Some((3, 8))
    );
    assert!(EntryCoverage::of(&e(4096, 4 * 4096), 128, 3).is_none(), "four chunks of three");
    assert!(EntryCoverage::of(&e(4096, 6000), 128, 3).is_none(), "not whole sectors");
    assert!(EntryCoverage::of(&e(8192, 4096), 128, 3).is_none(), "less data than a row");
    assert!(EntryCoverage::of(&e(0, 0), 128, 3).is_none(), "no data");
    // A crafted log (fuzz target md_logs found it): sectors that would wrap around u64.
    let mut far = e(4096, 8192);
    far.data_sector = u64::MAX - 8;
    assert!(EntryCoverage::of(&far, 128, 3).is_none(), "beyond any array");
    far.pp_size = 65536;
    far.data_size = 65536;
    let c = EntryCoverage::of(&far, 128, 3);
    assert!(c.is_none_or(|c| (0..c.strip).all(|i| c.sectors_at(i, 128).all(|r| r < c.last))));
}
