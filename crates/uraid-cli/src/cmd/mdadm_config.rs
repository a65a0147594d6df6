//! An mdadm.conf read for the verbs (`--config`): the file loaded with its warnings said, and
//! its DEVICE lines turned into the devices to scan. The parsing is `uraid_md::mdadm_conf`'s.

use anyhow::Context as _;
use std::path::{Path, PathBuf};
use uraid_md::mdadm_conf::{self, MdadmConf};

/// mdadm's DEVICE when the file has none: every partition (and container, which uraid has
/// none of).
const DEFAULT_DEVICES: [&str; 2] = ["partitions", "containers"];

/// Where mdadm looks when no file is named: Debian's place, then upstream's (mdadm reads the
/// first that exists; its `.d` directories are not read here).
const DEFAULT_FILES: [&str; 2] = ["/etc/mdadm/mdadm.conf", "/etc/mdadm.conf"];

/// The mdadm.conf mdadm would read when none is named, if there is one.
pub fn default_file() -> Option<PathBuf> {
    DEFAULT_FILES.iter().map(PathBuf::from).find(|path| path.exists())
}

/// The file's values; what it ignored is said on stderr, after `who`.
pub fn load(path: &Path, who: &str) -> anyhow::Result<MdadmConf> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the configuration {}", path.display()))?;
    let conf = mdadm_conf::parse(&text).with_context(|| format!("in {}", path.display()))?;
    for warning in &conf.warnings {
        say!("{who}: {}: {warning}", path.display());
    }
    Ok(conf)
}

/// The devices the DEVICE lines name, as paths and patterns for `scan::scan`: `partitions`
/// becomes each device /proc/partitions lists (`/dev/NAME`), as mdadm reads it.
pub fn devices(conf: &MdadmConf) -> anyhow::Result<Vec<String>> {
    let words: Vec<&str> = if conf.devices.is_empty() {
        DEFAULT_DEVICES.to_vec()
    } else {
        conf.devices.iter().map(String::as_str).collect()
    };
    let mut paths = Vec::new();
    for word in words {
        match word {
            "partitions" => paths.extend(partitions()?),
            "containers" => {}
            path => paths.push(path.to_owned()),
        }
    }
    Ok(paths)
}

/// /proc/partitions' devices: its lines after the header are "major minor #blocks name".
fn partitions() -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string("/proc/partitions").context("DEVICE partitions")?;
    let names = text.lines().skip(1).filter_map(|line| line.split_whitespace().nth(3));
    Ok(names.map(|name| format!("/dev/{name}")).collect())
}
