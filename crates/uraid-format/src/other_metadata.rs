//! RAID metadata uraid does not assemble, recognised by where it sits and its magic, so that a
//! device without a v1.2 superblock is not called blank when it holds another array: md's
//! v0.90, v1.0 and v1.1 superblocks and the two external formats mdadm manages (Intel's IMSM
//! and SNIA's DDF). Only the magic is checked: enough to name the format, since nothing here
//! is decoded or trusted.

use crate::superblock::V1_2_SUPER_OFFSET_SECTORS;

const MD_MAGIC: u32 = 0xa92b_4efc;
const SECTOR: u64 = 512;
/// v0.90 keeps the last 64 KiB-aligned 64 KiB of the device (md's MD_RESERVED_SECTORS).
const V0_90_RESERVED: u64 = 64 * 1024;
/// The start of IMSM's metadata parameter block.
const IMSM_SIGNATURE: &[u8] = b"Intel Raid ISM Cfg Sig. ";
/// DDF's header magic, big-endian on disk.
const DDF_MAGIC: u32 = 0xde11_de11;

/// A metadata format uraid does not assemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherMetadata {
    /// md v0.90: at the end of the device, host-endian.
    V0_90,
    /// md v1.0: at the end of the device.
    V1_0,
    /// md v1.1: at its start.
    V1_1,
    /// Intel Matrix Storage Manager (firmware RAID), near the end.
    Imsm,
    /// SNIA DDF (firmware RAID), its anchor in the last sector.
    Ddf,
}

impl OtherMetadata {
    /// How mdadm's `--metadata` names it, and where it sits.
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            OtherMetadata::V0_90 => "md metadata 0.90 (a superblock 64 KiB from the end)",
            OtherMetadata::V1_0 => "md metadata 1.0 (a superblock at the end)",
            OtherMetadata::V1_1 => "md metadata 1.1 (a superblock at the start)",
            OtherMetadata::Imsm => "Intel IMSM firmware RAID metadata (at the end)",
            OtherMetadata::Ddf => "DDF firmware RAID metadata (at the end)",
        }
    }

    /// Bytes to read at each place: the longest magic checked.
    pub const PROBE_BYTES: usize = 32;

    /// Where each format would sit on a device of `size_bytes`: the byte offsets to read
    /// `PROBE_BYTES` at, for `recognise`. Places without `PROBE_BYTES` before the end are
    /// left out, so that callers read and erase whole probes.
    #[must_use]
    pub fn places(size_bytes: u64) -> Vec<(OtherMetadata, u64)> {
        let sectors = size_bytes / SECTOR;
        let mut places = vec![(OtherMetadata::V1_1, 0)];
        // mdadm's v1.0: 8 KiB from the end, rounded down to 4 KiB.
        if sectors >= 16 {
            places.push((OtherMetadata::V1_0, ((sectors - 16) & !7) * SECTOR));
        }
        let aligned = size_bytes & !(V0_90_RESERVED - 1);
        if aligned >= V0_90_RESERVED {
            places.push((OtherMetadata::V0_90, aligned - V0_90_RESERVED));
        }
        if sectors >= 2 {
            places.push((OtherMetadata::Imsm, (sectors - 2) * SECTOR));
            places.push((OtherMetadata::Ddf, (sectors - 1) * SECTOR));
        }
        let probe = Self::PROBE_BYTES as u64;
        places.retain(|&(_, at)| {
            at != V1_2_SUPER_OFFSET_SECTORS * SECTOR && at + probe <= size_bytes
        });
        places
    }

    /// Whether `bytes`, read at `self`'s place, begin with its magic.
    #[must_use]
    pub fn recognise(self, bytes: &[u8]) -> bool {
        let word =
            |at: usize| bytes.get(at..at + 4).map(|b| <[u8; 4]>::try_from(b).expect("4 bytes"));
        let le = |at| word(at).map(u32::from_le_bytes);
        match self {
            // Magic, then major_version 1 (as the kernel checks).
            OtherMetadata::V1_0 | OtherMetadata::V1_1 => {
                le(0) == Some(MD_MAGIC) && le(4) == Some(1)
            }
            // md_magic, major_version 0 (x86's byte order: v0.90 is host-endian).
            OtherMetadata::V0_90 => le(0) == Some(MD_MAGIC) && le(4) == Some(0),
            OtherMetadata::Imsm => bytes.starts_with(IMSM_SIGNATURE),
            OtherMetadata::Ddf => word(0).map(u32::from_be_bytes) == Some(DDF_MAGIC),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(major: u32) -> Vec<u8> {
        let mut b = vec![0u8; OtherMetadata::PROBE_BYTES];
        b[..4].copy_from_slice(&MD_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&major.to_le_bytes());
        b
    }

    #[test]
    fn each_format_sits_where_mdadm_puts_it() {
        // 100 MiB + 3 sectors: v1.0 8 KiB from the end rounded to 4 KiB, v0.90 64 KiB below the
        // 64 KiB-aligned end, IMSM two sectors and DDF one sector from the end.
        let size = 100 * 1024 * 1024 + 3 * 512;
        let places = OtherMetadata::places(size);
        let at = |m| places.iter().find(|p| p.0 == m).map(|p| p.1);
        assert_eq!(at(OtherMetadata::V1_1), Some(0));
        assert_eq!(at(OtherMetadata::V1_0), Some(100 * 1024 * 1024 - 8192));
        assert_eq!(at(OtherMetadata::V0_90), Some(100 * 1024 * 1024 - 65536));
        assert_eq!(at(OtherMetadata::Imsm), Some(size - 1024));
        assert_eq!(at(OtherMetadata::Ddf), Some(size - 512));
        // A device too small for md's formats at the end; none at all too small for a probe.
        assert_eq!(OtherMetadata::places(31), vec![]);
        let small =
            [(OtherMetadata::V1_1, 0), (OtherMetadata::Imsm, 3072), (OtherMetadata::Ddf, 3584)];
        assert_eq!(OtherMetadata::places(4096), small);
    }

    #[test]
    fn only_the_right_magic_is_recognised() {
        assert!(OtherMetadata::V1_0.recognise(&md(1)) && OtherMetadata::V1_1.recognise(&md(1)));
        assert!(!OtherMetadata::V0_90.recognise(&md(1)));
        assert!(OtherMetadata::V0_90.recognise(&md(0)) && !OtherMetadata::V1_0.recognise(&md(0)));
        let mut imsm = IMSM_SIGNATURE.to_vec();
        imsm.extend_from_slice(b"1.3.00");
        assert!(OtherMetadata::Imsm.recognise(&imsm));
        assert!(!OtherMetadata::Imsm.recognise(&imsm[1..]));
        assert!(OtherMetadata::Ddf.recognise(&DDF_MAGIC.to_be_bytes()));
        assert!(!OtherMetadata::Ddf.recognise(&DDF_MAGIC.to_le_bytes()[..3]));
        for m in [OtherMetadata::V0_90, OtherMetadata::V1_0, OtherMetadata::Imsm] {
            assert!(!m.recognise(&[0; OtherMetadata::PROBE_BYTES]), "{m:?} in zeros");
        }
    }
}
