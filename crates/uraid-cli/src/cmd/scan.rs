//! Finding arrays among devices (mdadm's --scan): which devices hold an md v1.2 superblock of
//! which array. `uraid examine --scan` lists the arrays as mdadm --examine --scan does (ARRAY
//! lines for a configuration, and their devices); `serve`, `assemble` and `grow` with `--scan`
//! take from the devices given only the members of the array named by `--uuid` (or of the only
//! array there), so that a unit can name its array by UUID and give every disk
//! (`/dev/disk/by-id/*`): device names move between boots, a UUID does not. A device reached
//! by two paths is taken once; devices that hold no superblock, or another array's, are left.
//! A device pattern (`*`, `?`, `[...]`) is expanded here, as mdadm expands its DEVICE lines,
//! since systemd passes it on as it is written.

use crate::cmd::md_meta::read_candidate;
use crate::cmd::mdadm_config;
use anyhow::{Context, bail};
use clap::Args;
use std::path::PathBuf;
use uraid_format::{Superblock1, Uuid};
use uraid_io::FileIdentity;
use uraid_md::mdadm_conf::MdadmConf;

/// Which array the devices given form, for the verbs that assemble one (serve, assemble,
/// grow): its UUID, and whether to take its members from among every device given.
#[derive(Args)]
pub struct Selection {
    /// The array's UUID: with several arrays' devices given, the one to take (default: the
    /// first device's array; with --scan, the only array the devices hold).
    #[arg(long)]
    pub uuid: Option<String>,
    /// Take from the devices given only the members of the array --uuid names (or of the only
    /// array they hold), passing over the others: give every disk ('/dev/disk/by-id/*', a
    /// pattern uraid expands), since device names move between boots and a UUID does not
    /// (mdadm's --scan). With no device given, mdadm's configuration file says which array
    /// and where to look, as with --config (/etc/mdadm/mdadm.conf, else /etc/mdadm.conf).
    #[arg(long)]
    pub scan: bool,
    /// An mdadm.conf (mdadm's --config), for --scan: its ARRAY line's UUID= names the array
    /// (the line --array names, or its only ARRAY line), and its DEVICE lines say where to
    /// look when no device is given (none: every partition, as mdadm).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// With --config (or --scan and no device): the array of the ARRAY line for /dev/md/NAME
    /// (or /dev/NAME) [serve: default its --name, when a line names that].
    #[arg(long, value_name = "NAME")]
    pub array: Option<String>,
}

/// The array chosen: its UUID (when one was given or configured) and its devices.
pub struct Selected {
    pub uuid: Option<Uuid>,
    pub members: Vec<String>,
}

impl Selection {
    /// Whether devices must be given: not with --config or --scan (which then read mdadm's
    /// configuration file).
    pub fn needs_devices(&self) -> bool {
        self.config.is_none() && !self.scan
    }

    /// The array's devices: those given, or with --scan (or --config) its members among them
    /// (or among the configuration's DEVICE lines), and its UUID.
    pub fn resolve(&self, given: &[String]) -> anyhow::Result<Selected> {
        self.resolve_named(given, None)
    }

    /// `resolve`, taking the ARRAY line `name` names (serve's --name: what a systemd unit's
    /// instance gives it) when no --array is given and one does.
    pub fn resolve_named(&self, given: &[String], name: Option<&str>) -> anyhow::Result<Selected> {
        let uuid: Option<Uuid> = self.uuid.as_deref().map(str::parse).transpose()?;
        let default = || (self.scan && given.is_empty()).then(mdadm_config::default_file);
        let Some(path) = self.config.clone().or_else(|| default().flatten()) else {
            if self.array.is_some() {
                let why = "give --config, or --scan and no device";
                bail!("--array names an ARRAY line of mdadm.conf: {why}");
            }
            if self.scan && given.is_empty() {
                bail!(
                    "--scan with no device reads mdadm.conf: there is no /etc/mdadm/mdadm.conf \
                       nor /etc/mdadm.conf (--config names one, or give the devices)"
                );
            }
            let members = if self.scan { select_members(given, uuid)? } else { given.to_vec() };
            return Ok(Selected { uuid, members });
        };
        let path = &path;
        let conf = mdadm_config::load(path, "uraid")?;
        let uuid = match uuid {
            Some(uuid) => uuid,
            None => configured_uuid(&conf, self.array.as_deref(), name)
                .with_context(|| format!("in {}", path.display()))?,
        };
        let devices = if given.is_empty() { mdadm_config::devices(&conf)? } else { given.to_vec() };
        Ok(Selected { uuid: Some(uuid), members: select_members(&devices, Some(uuid))? })
    }
}

/// The UUID of the ARRAY line naming `array`; without one, of the line naming `name` (serve's
/// --name), else of the only ARRAY line.
fn configured_uuid(
    conf: &MdadmConf,
    array: Option<&str>,
    name: Option<&str>,
) -> anyhow::Result<Uuid> {
    let named = |n: &str| conf.arrays.iter().find(|a| a.names(n));
    let line = match (array, name.and_then(named)) {
        (Some(array), _) => named(array),
        (None, Some(line)) => Some(line),
        (None, None) if conf.arrays.len() > 1 => {
            let names: Vec<&str> =
                conf.arrays.iter().filter_map(|a| a.devname.as_deref()).collect();
            bail!("{} ARRAY lines ({}): name one with --array", conf.arrays.len(), names.join(", "))
        }
        (None, None) => conf.arrays.first(),
    };
    let Some(line) = line else {
        match array {
            Some(array) => bail!("no ARRAY line for /dev/md/{array}"),
            None => bail!("no ARRAY line"),
        }
    };
    line.uuid.with_context(|| {
        format!("the ARRAY line at line {} has no UUID=, which uraid finds members by", line.line)
    })
}

/// One array found on the devices scanned.
pub struct FoundArray {
    /// The freshest superblock (the array's UUID, name, level, devices, events).
    pub superblock: Superblock1,
    /// Its devices, in the order given.
    pub devices: Vec<String>,
}

/// The paths `args` give: each pattern replaced by what it matches, sorted (none: nothing).
fn expand(args: &[String]) -> anyhow::Result<Vec<String>> {
    let mut paths = Vec::new();
    for arg in args {
        if !arg.contains(['*', '?', '[']) {
            paths.push(arg.clone());
            continue;
        }
        let matches = glob::glob(arg).with_context(|| format!("device pattern {arg:?}"))?;
        for path in matches {
            let path = path.with_context(|| format!("device pattern {arg:?}"))?;
            paths.push(path.to_string_lossy().into_owned());
        }
    }
    Ok(paths)
}

/// The arrays the devices `args` name (paths or patterns) hold, in the order their first
/// device comes; devices that hold none (no superblock, unreadable, a path to a device already
/// seen) are left out.
pub fn scan(args: &[String]) -> anyhow::Result<Vec<FoundArray>> {
    let mut seen: Vec<FileIdentity> = Vec::new();
    let mut arrays: Vec<FoundArray> = Vec::new();
    for path in &expand(args)? {
        let Ok(identity) = FileIdentity::of_path(path.as_ref()) else { continue };
        if seen.contains(&identity) {
            continue;
        }
        seen.push(identity);
        let candidate = read_candidate(path);
        let Some(sb) = candidate.superblock_area.ok().and_then(|a| Superblock1::decode(&a).ok())
        else {
            continue;
        };
        match arrays.iter_mut().find(|a| a.superblock.set_uuid == sb.set_uuid) {
            Some(found) => {
                found.devices.push(path.clone());
                if sb.events > found.superblock.events {
                    found.superblock = sb;
                }
            }
            None => arrays.push(FoundArray { superblock: sb, devices: vec![path.clone()] }),
        }
    }
    Ok(arrays)
}

/// The devices of the array `uuid` among `paths` (paths or patterns), or of the only array
/// they hold.
fn select_members(paths: &[String], uuid: Option<Uuid>) -> anyhow::Result<Vec<String>> {
    let arrays = scan(paths)?;
    let chosen = match uuid {
        Some(uuid) => arrays.into_iter().find(|a| a.superblock.set_uuid == uuid),
        None if arrays.len() > 1 => {
            let list: Vec<String> = arrays
                .iter()
                .map(|a| format!("{} ({})", a.superblock.set_uuid, a.superblock.name()))
                .collect();
            bail!(
                "the devices hold {} arrays: {}; name one with --uuid",
                list.len(),
                list.join(", ")
            )
        }
        None => arrays.into_iter().next(),
    };
    match chosen {
        Some(array) => Ok(array.devices),
        None => match uuid {
            Some(uuid) => bail!("no device scanned holds a member of array {uuid}"),
            None => bail!("no device scanned holds an md v1.2 superblock"),
        },
    }
}

/// mdadm --examine --scan --verbose's lines for one array: the ARRAY line a configuration
/// takes, and its devices.
pub fn array_lines(array: &FoundArray) -> String {
    let sb = &array.superblock;
    format!(
        "ARRAY /dev/md/{name}  level={level} metadata=1.2 num-devices={disks} UUID={uuid} \
         name={name}\n   devices={devices}",
        name = sb.name(),
        level = sb.level,
        disks = sb.raid_disks,
        uuid = sb.set_uuid,
        devices = array.devices.join(","),
    )
}
