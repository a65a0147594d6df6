//! `uraid zero-superblock`: mdadm --zero-superblock. Overwrites the md superblock a device
//! holds (v1.2, and 1.0, 1.1 or 0.90 if there) with zeros, and the magic of firmware RAID
//! metadata (DDF, IMSM), so that no tool (uraid, mdadm, the kernel) finds an array on it any
//! more: the step before a device is used for something else, or created over without
//! --force. Only the superblock goes: the data, and the bitmap and logs that only the
//! superblock leads to, stay as they were.
//!
//! A device a running array holds is refused: uraid's servers lock their members, and a block
//! device is opened O_EXCL, which the kernel refuses while it is mounted or in an md array.

use anyhow::{Context, bail};
use clap::Args;
use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use uraid_format::{DevRole, OtherMetadata, Superblock1, V1_2_SUPER_OFFSET_SECTORS};
use uraid_md::members::{MD_MAGIC_BYTES, device_size_bytes};

use crate::cmd::md_meta::open_exclusive;

/// md keeps 4 KiB for a v1.x or 0.90 superblock (with its roles table).
const SUPERBLOCK_BYTES: u64 = 4096;
const V1_2_AT: u64 = V1_2_SUPER_OFFSET_SECTORS * 512;

#[derive(Args)]
#[command(
    about = "Erase the md superblock of devices no longer in an array (mdadm --zero-superblock)",
    long_about = "Overwrite each device's md superblock (v1.2; 1.0, 1.1 and 0.90 too) with \
zeros, and the magic of DDF or IMSM firmware RAID metadata, so that no tool finds an array on \
it any more. The data is left as it was. A device a running array holds (uraid's, or the \
kernel's for a block device) is refused. A device with nothing to erase is an error unless \
--force, which zeroes where a v1.2 superblock would be. Every device is tried; the exit status \
is 1 if any was not zeroed.",
    after_help = "Example:\n  uraid zero-superblock /dev/sdb /dev/sdc\n  \
uraid zero-superblock m3.img && uraid create ... m3.img"
)]
pub struct ZeroArgs {
    /// Zero where a v1.2 superblock would be even if none is recognised (mdadm's --force).
    #[arg(long, short = 'f')]
    force: bool,
    /// The devices or member files.
    #[arg(required = true)]
    devices: Vec<PathBuf>,
}

pub fn run(args: &ZeroArgs) -> anyhow::Result<()> {
    let mut failed = 0;
    for path in &args.devices {
        match zero(path, args.force) {
            Ok(erased) => {
                for what in erased {
                    out!("{}: zeroed {what}", path.display());
                }
            }
            Err(e) => {
                say!("uraid zero-superblock: {}: {e:#}", path.display());
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} devices not zeroed", args.devices.len());
    }
    Ok(())
}

/// Erases what `path` holds; what was erased, in words (and what was left, said).
fn zero(path: &Path, force: bool) -> anyhow::Result<Vec<String>> {
    let file = open_exclusive(path, "stop it, or remove this member from it first")?;
    let size = device_size_bytes(&file).context("reading its size")?;
    let mut found: Vec<(String, u64, u64)> = Vec::new();
    // The v1.2 array's data area, whose bytes are the array's whatever they look like (a
    // member holding a nested md device has a superblock's magic in it).
    let mut data = 0..0;
    if let Some((words, data_bytes)) = v1_2_superblock(&file, size) {
        found.push((words, V1_2_AT, SUPERBLOCK_BYTES));
        data = data_bytes;
    }
    for (kind, at) in OtherMetadata::places(size) {
        let mut probe = [0u8; OtherMetadata::PROBE_BYTES];
        if file.read_exact_at(&mut probe, at).is_ok() && kind.recognise(&probe) {
            let len = match kind {
                OtherMetadata::Imsm | OtherMetadata::Ddf => probe.len() as u64,
                _ => SUPERBLOCK_BYTES.min(size - at),
            };
            let words = format!("{} at byte {at}", kind.describe());
            if at < data.end && data.start < at + len {
                say!(
                    "uraid zero-superblock: {}: left the {words}: it lies in the v1.2 array's \
                     data",
                    path.display()
                );
                continue;
            }
            found.push((format!("its {words}"), at, len));
        }
    }
    if found.is_empty() {
        if !force || size < V1_2_AT + SUPERBLOCK_BYTES {
            bail!(
                "no md superblock or RAID metadata found, nothing zeroed (--force zeroes where \
                 a v1.2 superblock would be)"
            );
        }
        let words = format!("the 4 KiB at byte {V1_2_AT} (no superblock recognised; --force)");
        found.push((words, V1_2_AT, SUPERBLOCK_BYTES));
    }
    for (_, at, len) in &found {
        file.write_all_at(&vec![0u8; *len as usize], *at)
            .with_context(|| format!("writing zeros at byte {at}"))?;
    }
    file.sync_all().context("syncing")?;
    Ok(found.into_iter().map(|(words, ..)| words).collect())
}

/// The v1.2 superblock at 4 KiB, in words, if its magic is there, and the bytes its data
/// area covers. One that does not decode (a bad checksum) is still md's and still erased; its
/// data area is then taken to be everything past the superblock, so nothing else is erased.
fn v1_2_superblock(file: &File, size: u64) -> Option<(String, Range<u64>)> {
    let mut area = vec![0u8; SUPERBLOCK_BYTES as usize];
    if size < V1_2_AT + SUPERBLOCK_BYTES || file.read_exact_at(&mut area, V1_2_AT).is_err() {
        return None;
    }
    if area[..4] != MD_MAGIC_BYTES || area[4..8] != 1u32.to_le_bytes() {
        return None;
    }
    Some(match Superblock1::decode(&area) {
        Ok(sb) => {
            let from = sb.data_offset_sectors * 512;
            let data = from..from + sb.data_size_sectors * 512;
            let role = match sb.dev_roles.get(sb.dev_number as usize) {
                Some(DevRole::Active(slot)) => format!("slot {slot}"),
                Some(DevRole::Spare) | None => "a spare".to_owned(),
                Some(DevRole::Faulty) => "faulty".to_owned(),
                Some(DevRole::Journal) => "a journal".to_owned(),
            };
            let words = format!(
                "its md v1.2 superblock (array {} {}, device {}, {role})",
                sb.name(),
                sb.set_uuid,
                sb.dev_number
            );
            (words, data)
        }
        Err(e) => {
            let words = format!("its md v1.2 superblock (which does not decode: {e})");
            (words, V1_2_AT + SUPERBLOCK_BYTES..u64::MAX)
        }
    })
}
