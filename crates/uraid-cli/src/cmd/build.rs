//! `uraid build`: reassemble an array's contents from member images with no metadata, in the
//! spirit of `mdadm --build`. This is the administrator's tool when the superblocks are gone:
//! the geometry comes from the command line, members are given in role order, and `missing`
//! stands for an absent member, whose chunks are rebuilt from parity.
//!
//! Memory stays bounded whatever the chunk size: each stripe is handled in units of at most
//! `UNIT_BYTES_MAX` (parity is per byte position, so a unit reconstructs on its own).

use crate::args::parse_size;
use anyhow::{Context, bail, ensure};
use clap::Args;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use uraid_core::{Geometry, Layout, Level, SECTOR_BYTES, StripeNumber, reconstruct};
use uraid_io::{same_file_message, same_file_twice};

const UNIT_BYTES_MAX: u64 = 1 << 20;

#[derive(Args)]
#[command(
    about = "Reassemble an array's contents from member images, without metadata",
    long_about = "Reassemble an array's contents from member images, without metadata \
(the spirit of mdadm --build, for recovery when superblocks are gone). Members are given in \
role order; write `missing` for an absent member and its chunks are rebuilt from parity. \
Sizes take mdadm's units: a bare number is KiB; K, M, G, T, s (sectors) and b (bytes).",
    after_help = "Example:\n  uraid build --level 6 --layout left-symmetric --chunk 64K \
--data-offset 2048s -o array.img m0.img m1.img missing m3.img m4.img m5.img"
)]
pub struct BuildArgs {
    /// RAID level: 0, 4, 5 or 6.
    #[arg(short, long)]
    level: String,
    /// md layout name (default: left-symmetric for 5 and 6, parity-last for 4).
    #[arg(short = 'p', long)]
    layout: Option<String>,
    /// Chunk size (mdadm's default is 512K).
    #[arg(short, long, default_value = "512K")]
    chunk: String,
    /// Where data starts on each member (md v1.2 arrays usually start at 2048s).
    #[arg(long, default_value = "0")]
    data_offset: String,
    /// Data bytes used on each member (default: the smallest member, less the data offset).
    #[arg(short = 'z', long)]
    size: Option<String>,
    /// Number of members; must match the members given.
    #[arg(short = 'n', long)]
    raid_devices: Option<usize>,
    /// Write the contents here (default, or `-`: standard output, unless it is a terminal).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Report as JSON (on standard error when the contents go to standard output).
    #[arg(long)]
    json: bool,
    /// Member images in role order; `missing` for an absent one.
    #[arg(required = true)]
    members: Vec<String>,
}

/// What `build` will read: the geometry, the open members and how much of each.
struct BuildPlan {
    geometry: Geometry,
    names: Vec<String>,
    /// `None` for a member given as `missing`.
    files: Vec<Option<File>>,
    data_offset_bytes: u64,
    stripes: u64,
}

pub fn run(args: &BuildArgs) -> anyhow::Result<()> {
    let members: Vec<&String> = args.members.iter().filter(|m| *m != "missing").collect();
    super::output::refuse_output_over_members(args.output.as_deref(), &members)?;
    let plan = BuildPlan::new(args)?;
    let bytes =
        plan.geometry.array_sectors(plan.stripes * plan.geometry.chunk_sectors()) * SECTOR_BYTES;
    // `-` is standard output, as for `assemble -o` (it made a file named `-`).
    let to_file = args.output.as_deref().filter(|p| *p != std::path::Path::new("-"));
    if let Some(path) = to_file {
        super::output::write_file(path, |out| plan.write_contents(out))?;
    } else {
        let stdout = std::io::stdout();
        ensure!(
            !stdout.is_terminal(),
            "refusing to write {bytes} bytes of array contents to a terminal; use -o FILE"
        );
        plan.write_contents(&mut BufWriter::with_capacity(4 << 20, stdout.lock()))?;
    }
    let missing = plan.files.iter().filter(|f| f.is_none()).count();
    let g = &plan.geometry;
    if args.json {
        let report = serde_json::json!({
            "bytes": bytes,
            "level": g.level().number(),
            "layout": g.layout().name(),
            "raid_disks": g.raid_disks(),
            "missing": missing,
            "chunk_bytes": g.chunk_bytes(),
        });
        if to_file.is_some() {
            out!("{report}");
        } else {
            say!("{report}");
        }
        return Ok(());
    }
    say!(
        "uraid build: wrote {bytes} bytes: RAID{} {}, {} members ({missing} missing), chunk {}",
        g.level().number(),
        g.layout().name(),
        g.raid_disks(),
        g.chunk_bytes(),
    );
    Ok(())
}

impl BuildPlan {
    fn new(args: &BuildArgs) -> anyhow::Result<BuildPlan> {
        let level = Level::parse(&args.level)?;
        let layout = match &args.layout {
            Some(name) => Layout::parse(name)?,
            None => level.default_layout(),
        };
        if let Some(n) = args.raid_devices {
            ensure!(n == args.members.len(), "--raid-devices {n} but {} members given", {
                args.members.len()
            });
        }
        let geometry = Geometry::new(level, layout, args.members.len(), parse_size(&args.chunk)?)?;
        let data_offset_bytes = parse_size(&args.data_offset)?;
        ensure!(
            data_offset_bytes.is_multiple_of(SECTOR_BYTES),
            "data offset {data_offset_bytes} bytes is not a whole number of 512-byte sectors"
        );
        let files = open_members(&args.members)?;
        let missing = files.iter().filter(|f| f.is_none()).count();
        if missing > geometry.max_degraded() {
            bail!(
                "{missing} members missing but RAID{} survives at most {}: the contents cannot \
                 be rebuilt",
                level.number(),
                geometry.max_degraded()
            );
        }
        let component_bytes = component_bytes(args, &files, data_offset_bytes)?;
        let stripes = component_bytes / geometry.chunk_bytes();
        ensure!(stripes > 0, "members hold {component_bytes} data bytes, less than one chunk");
        Ok(BuildPlan { geometry, names: args.members.clone(), files, data_offset_bytes, stripes })
    }

    /// Streams the array's contents, stripe by stripe, data chunks in array order.
    fn write_contents(&self, out: &mut dyn Write) -> anyhow::Result<()> {
        let unit_bytes = self.geometry.chunk_bytes().min(UNIT_BYTES_MAX);
        let n = self.geometry.raid_disks();
        let mut units: Vec<Vec<u8>> = vec![vec![0u8; unit_bytes as usize]; n];
        // The stripe unit last reconstructed: a second lost chunk of the same stripe unit (two
        // lost data members in RAID6) is then served without reading the survivors again.
        let mut reconstructed: Option<(u64, u64)> = None;
        let stripe_bytes = self.geometry.chunk_bytes() * self.geometry.data_disks() as u64;
        let bar = crate::cmd::progress::byte_bar(self.stripes * stripe_bytes, "building");
        for stripe in 0..self.stripes {
            bar.inc(stripe_bytes);
            let map = self.geometry.stripe_map(StripeNumber(stripe));
            for disk in &map.data_disk {
                for unit_start in (0..self.geometry.chunk_bytes()).step_by(unit_bytes as usize) {
                    let offset = stripe * self.geometry.chunk_bytes() + unit_start;
                    if self.files[disk.get()].is_some() {
                        self.read_unit(disk.get(), offset, &mut units[disk.get()])?;
                    } else if reconstructed != Some((stripe, unit_start)) {
                        self.reconstruct_unit(stripe, offset, &mut units)?;
                        reconstructed = Some((stripe, unit_start));
                    }
                    out.write_all(&units[disk.get()]).context("writing the array's contents")?;
                }
            }
        }
        bar.finish_and_clear();
        out.flush().context("writing the array's contents")
    }

    /// Reads the unit at `offset` (from the data area's start) of every present member and
    /// rebuilds the missing members' units.
    fn reconstruct_unit(
        &self,
        stripe: u64,
        offset: u64,
        units: &mut [Vec<u8>],
    ) -> anyhow::Result<()> {
        let mut lost = vec![false; units.len()];
        for (disk, unit) in units.iter_mut().enumerate() {
            lost[disk] = self.files[disk].is_none();
            if !lost[disk] {
                self.read_unit(disk, offset, unit)?;
            }
        }
        let map = self.geometry.stripe_map(StripeNumber(stripe));
        let mut blocks: Vec<&mut [u8]> = units.iter_mut().map(Vec::as_mut_slice).collect();
        reconstruct(self.geometry.level(), map, &mut blocks, &lost)?;
        Ok(())
    }

    fn read_unit(&self, disk: usize, offset: u64, unit: &mut [u8]) -> anyhow::Result<()> {
        let file = self.files[disk].as_ref().expect("read_unit on a present member");
        let at = self.data_offset_bytes + offset;
        file.read_exact_at(unit, at)
            .with_context(|| format!("reading member {disk} ({}) at byte {at}", self.names[disk]))
    }
}

/// Opens the images (`missing` for an absent member); one image given twice is refused, by
/// any path: it would be read as two members and the contents rebuilt from it wrong.
fn open_members(names: &[String]) -> anyhow::Result<Vec<Option<File>>> {
    let present: Vec<&String> = names.iter().filter(|n| *n != "missing").collect();
    if let Some((i, j)) = same_file_twice(&present) {
        bail!(same_file_message(present[i], present[j]));
    }
    names
        .iter()
        .enumerate()
        .map(|(role, name)| {
            if name == "missing" {
                return Ok(None);
            }
            // As `assemble -o`: a served array's members would be read torn.
            if uraid_io::held_by_a_server(std::path::Path::new(name)) {
                bail!(
                    "member {role} ({name}) is in use: a running uraid serve holds it, so the \
                     array would be read torn; read the served export instead, or stop it first"
                );
            }
            let file = uraid_io::open_member_path(std::path::Path::new(name), false)
                .with_context(|| format!("cannot open member {role} ({name})"))?;
            Ok(Some(file))
        })
        .collect()
}

/// Data bytes per member: `--size` (checked against every member) or the smallest member's.
fn component_bytes(
    args: &BuildArgs,
    files: &[Option<File>],
    data_offset_bytes: u64,
) -> anyhow::Result<u64> {
    let wanted = args.size.as_deref().map(parse_size).transpose()?;
    let mut smallest = u64::MAX;
    for (role, file) in files.iter().enumerate() {
        let Some(file) = file else { continue };
        let name = &args.members[role];
        // Seeking to the end measures block devices too, whose metadata length is 0.
        let len = (&*file)
            .seek(SeekFrom::End(0))
            .with_context(|| format!("cannot find the size of member {role} ({name})"))?;
        ensure!(
            len > data_offset_bytes,
            "member {role} ({name}) has {len} bytes, not more than the data offset \
             {data_offset_bytes}"
        );
        let available = len - data_offset_bytes;
        if let Some(w) = wanted {
            ensure!(
                available >= w,
                "member {role} ({name}) holds {available} data bytes, less than --size {w}"
            );
        }
        smallest = smallest.min(available);
    }
    Ok(wanted.unwrap_or(smallest))
}
