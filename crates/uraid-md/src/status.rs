//! What a running array reports: `uraid detail`, `uraid status` and the control socket all
//! serve these, as JSON (serde) or as text in mdadm's and /proc/mdstat's shapes.

use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// One running array, as `mdadm --detail` describes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
// Independent facts of a report, not a state machine.
#[allow(clippy::struct_excessive_bools)]
pub struct ArrayStatus {
    /// The name it goes by: its control socket's (serve's `--name`, else the part of md's
    /// name after the colon), which the management verbs take.
    pub name: String,
    /// md's name in the superblocks (set_name, "host:name"), which detail's "Name" shows.
    #[serde(default)]
    pub md_name: String,
    pub uuid: String,
    /// 4, 5 or 6.
    pub level: u32,
    /// mdadm's layout name (left-symmetric, ...).
    pub layout: String,
    pub chunk_bytes: u64,
    pub raid_disks: u32,
    pub array_size_bytes: u64,
    /// Bytes of each member used by the array (md's component size).
    pub component_size_bytes: u64,
    /// md's event counter, as last written to the superblocks.
    pub events: u64,
    /// "clean", "active", "active, degraded", "active, degraded, recovering", "active,
    /// resyncing", "active, checking", "active, FAILED", ...
    pub state: String,
    pub degraded: bool,
    /// Whether the array has md's internal write-intent bitmap.
    pub bitmap: bool,
    /// Bitmap chunks set (regions a crash would resync), as of the last bitmap tick.
    pub bitmap_dirty_chunks: u64,
    pub bitmap_chunk_bytes: u64,
    /// Per slot, then hot spares and failed members not yet removed.
    pub members: Vec<MemberStatus>,
    /// The background sync process: what runs now, if anything.
    pub sync: Option<SyncStatus>,
    /// The last check/repair/resync that finished: what it found.
    pub last_sync: Option<SyncResult>,
    /// md's mismatch_cnt (sectors) since the array started.
    pub mismatch_sectors: u64,
    /// md's sync_speed_min and sync_speed_max, KiB/s of each member.
    pub sync_speed_min_kib: u64,
    pub sync_speed_max_kib: u64,
    /// Bytes of the partial parity log's area on each member; 0: no log, the write hole is
    /// open.
    #[serde(default)]
    pub log_bytes: u64,
    /// Parity blocks the log's replay rewrote when the array started (after a crash).
    #[serde(default)]
    pub log_replayed: u64,
    /// The log turned off (consistency policy resync): the write hole open by choice.
    #[serde(default)]
    pub log_off: bool,
    /// Why there is no log though the policy asks for one (empty: a log, or none asked for).
    #[serde(default)]
    pub log_missing: String,
    /// md's read-only mode: nothing is written to the members (`MdOptions::read_only`).
    #[serde(default)]
    pub read_only: bool,
    /// md's sync_action "frozen": no resync, recovery, check or repair starts until thawed.
    #[serde(default)]
    pub frozen: bool,
    /// The member that cannot discard to zeros, for whose sake the array takes no discard
    /// (empty: it takes them).
    #[serde(default)]
    pub discard_off_by: String,
    /// md's consistency policy as the superblocks record it (mdadm's word: ppl for md's own
    /// PPL, bitmap, resync): what the kernel does after a crash.
    #[serde(default)]
    pub consistency_policy: String,
}

impl ArrayStatus {
    /// More slots out of sync than the level survives (mdadm's "FAILED"): writes and the
    /// reads of what is lost fail.
    #[must_use]
    pub fn failed(&self) -> bool {
        let max_degraded = if self.level == 6 { 2 } else { 1 };
        self.in_sync_members() + max_degraded < self.raid_disks
    }

    /// Members in sync in their slots (md's active_disks).
    #[must_use]
    pub fn in_sync_members(&self) -> u32 {
        self.members.iter().filter(|m| m.in_sync()).count() as u32
    }

    /// Hot spares, and devices being rebuilt into a slot (md's spare_disks, which counts both:
    /// neither is in sync nor faulty).
    #[must_use]
    pub fn spare_members(&self) -> u32 {
        self.members.iter().filter(|m| m.spare_or_rebuilding()).count() as u32
    }

    /// An action queued, or taken from the queue, that is not walking yet (`state` says
    /// "sync pending"; a read-only array's "resync pending" is not one: it waits for writes).
    #[must_use]
    pub fn sync_pending(&self) -> bool {
        self.sync.is_none() && self.state.split(", ").any(|part| part == "sync pending")
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    /// The slot (md's raid_disk / "RaidDevice"), None for a spare or a failed member.
    pub slot: Option<u32>,
    /// The superblock's dev_number (mdadm's "Number").
    pub dev_number: Option<u32>,
    /// The member's path; "missing" for an empty slot.
    pub path: String,
    /// "active sync", "spare rebuilding", "replacement" (md's replace: the device
    /// taking the slot's place), "spare", "faulty", "removed".
    pub state: String,
    /// While being rebuilt: in sync below this member sector.
    pub recovery_offset_sectors: Option<u64>,
    /// Sectors its bad block log lists (md's `bad_blocks` in sysfs): read around, rebuilt
    /// from parity. Data writes that failed there kept the member in the array.
    #[serde(default)]
    pub bad_sectors: u64,
}

impl MemberStatus {
    /// In sync in its slot.
    #[must_use]
    pub fn in_sync(&self) -> bool {
        self.slot.is_some() && self.state == "active sync"
    }

    /// A hot spare, or a device being rebuilt into a slot (a spare taking it, or a replace's
    /// new device).
    #[must_use]
    pub fn spare_or_rebuilding(&self) -> bool {
        self.state.starts_with("spare") || self.state == "replacement"
    }
}

/// The sync process's current action.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncStatus {
    /// md's sync_action: "resync", "recover", "check" or "repair".
    pub action: String,
    /// Member sectors done (everything below is finished) and to do in all.
    pub done_sectors: u64,
    pub total_sectors: u64,
    /// Per member, KiB/s over the last few seconds (md's sync_speed).
    pub speed_kib: u64,
    /// Seconds to go at that speed.
    pub eta_seconds: Option<u64>,
    /// Whether user I/O made the process yield recently.
    pub throttled: bool,
}

/// What a finished sync action did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SyncResult {
    pub action: String,
    /// "done", "interrupted" or "failed: <why>".
    pub outcome: String,
    /// Member sectors it covered (for a bitmap resync: only the dirty regions).
    pub sectors: u64,
    /// Where a check or repair of part of each member began (0: at the start), so that an
    /// interrupted one goes on at `from_sector + sectors`.
    #[serde(default)]
    pub from_sector: u64,
    /// Bytes of array data covered (sectors x 512 x data disks).
    pub array_bytes: u64,
    pub seconds: f64,
    /// Mismatched sectors it found (check, repair, resync).
    pub mismatch_sectors: u64,
    /// Where, in member sectors, with the member the RAID6 syndrome names (first ones kept).
    pub mismatches: Vec<MismatchAt>,
    /// A recovery's: sectors it could not rebuild (unreadable on another member too), listed
    /// in the rebuilt member's bad block log, as md lists them. Their data is lost.
    #[serde(default)]
    pub listed_bad_sectors: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MismatchAt {
    pub member_sector: u64,
    pub sectors: u64,
    /// The slot holding the bad block when the syndrome names one (RAID6), else None.
    pub slot: Option<u32>,
}

/// md's algorithm number for an mdadm layout name ("left-symmetric" → 2), as /proc/mdstat
/// prints it; None for a name uraid does not know.
fn algorithm_number(layout: &str) -> Option<u32> {
    uraid_core::Layout::parse(layout).ok().map(uraid_core::Layout::md_number)
}

/// A member in sync in its slot ("U" in /proc/mdstat).
/// md's names for its sync actions in /proc/mdstat ("recover" reads "recovery" there).
fn action_word(action: &str) -> &str {
    // md shows a replacement's copy as a recovery too.
    if action == "recover" || action == "replace" { "recovery" } else { action }
}

/// A size as md prints a bitmap chunk: "64MB", "512KB".
fn kb_or_mb(bytes: u64) -> String {
    let kib = bytes / 1024;
    if kib >= 1024 && kib.is_multiple_of(1024) {
        format!("{}MB", kib / 1024)
    } else {
        format!("{kib}KB")
    }
}

/// The running arrays in /proc/mdstat's shape, for `uraid status`:
///
/// ```text
/// md0 : active raid6 m5.img[5] m4.img[4] m3.img[3] m2.img[2](F) m1.img[1] m0.img[0]
///       4190208 blocks super 1.2 level 6, 512k chunk, algorithm 2 [6/5] [UU_UUU]
///       [=====>...............]  recovery = 27.3% (286208/1047552) finish=1.2min speed=12345K/sec
///       bitmap: 3/16 chunks dirty, 64MB chunk
/// ```
#[must_use]
pub fn render_mdstat(arrays: &[ArrayStatus]) -> String {
    let mut text = String::from("Personalities : [raid4] [raid5] [raid6]\n");
    for s in arrays {
        text.push_str(&mdstat_array(s));
        text.push('\n');
    }
    text.push_str("unused devices: <none>\n");
    text
}

fn mdstat_array(s: &ArrayStatus) -> String {
    // md lists members newest first; descending dev_number is the closest we can do.
    let mut listed: Vec<&MemberStatus> = s.members.iter().filter(|m| m.path != "missing").collect();
    listed.sort_by_key(|m| std::cmp::Reverse(m.dev_number));
    let members: Vec<String> = listed.iter().map(|m| mdstat_member(m)).collect();
    // md's own mark for an array started read-only.
    let ro = if s.read_only { " (read-only)" } else { "" };
    let mut text = format!("{} : active{ro} raid{} {}\n", s.name, s.level, members.join(" "));
    let slots: String = (0..s.raid_disks)
        .map(|slot| {
            let up = s.members.iter().any(|m| m.slot == Some(slot) && m.in_sync());
            if up { 'U' } else { '_' }
        })
        .collect();
    let up = slots.chars().filter(|c| *c == 'U').count();
    let algorithm = algorithm_number(&s.layout).map_or_else(|| s.layout.clone(), |n| n.to_string());
    let _ = writeln!(
        text,
        "      {} blocks super 1.2 level {}, {}k chunk, algorithm {algorithm} [{}/{up}] \
         [{slots}]",
        s.array_size_bytes / 1024,
        s.level,
        s.chunk_bytes / 1024,
        s.raid_disks,
    );
    if let Some(sync) = &s.sync {
        let _ = writeln!(text, "      {}", progress_line(sync));
    }
    if s.bitmap {
        let chunks = s.component_size_bytes.div_ceil(s.bitmap_chunk_bytes.max(1));
        let _ = writeln!(
            text,
            "      bitmap: {}/{chunks} chunks dirty, {} chunk",
            s.bitmap_dirty_chunks,
            kb_or_mb(s.bitmap_chunk_bytes)
        );
    }
    text
}

/// "m2.img[2](F)": the path's last component, the dev_number, md's flag for faulty/spare.
fn mdstat_member(m: &MemberStatus) -> String {
    let base =
        Path::new(&m.path).file_name().map_or(m.path.clone(), |n| n.to_string_lossy().into());
    let number = m.dev_number.map_or_else(|| "?".to_owned(), |n| n.to_string());
    let flag = match m.state.as_str() {
        "faulty" => "(F)",
        "spare" => "(S)",
        "replacement" => "(R)",
        _ => "",
    };
    format!("{base}[{number}]{flag}")
}

/// md's progress line: 21 cells, one '=' per 5% done, then '>'.
///
/// Example: 27.3% done is 273 per mille, 273 / 50 = 5 cells of '=', '>', 15 of '.'.
fn progress_line(sync: &SyncStatus) -> String {
    let per_mille = if sync.total_sectors == 0 {
        0
    } else {
        (u128::from(sync.done_sectors.min(sync.total_sectors)) * 1000
            / u128::from(sync.total_sectors)) as u64
    };
    assert!(per_mille <= 1000);
    let filled = (per_mille / 50) as usize;
    let bar = format!("[{}>{}]", "=".repeat(filled), ".".repeat(20 - filled));
    assert_eq!(bar.len(), 23, "md's bar has 21 cells between brackets");
    let mut line = format!(
        "{bar}  {} ={:>3}.{}% ({}/{})",
        action_word(&sync.action),
        per_mille / 10,
        per_mille % 10,
        sync.done_sectors / 2,
        sync.total_sectors / 2
    );
    if let Some(eta) = sync.eta_seconds {
        let _ = write!(line, " finish={}.{}min", eta / 60, (eta % 60) / 6);
    }
    let _ = write!(line, " speed={}K/sec", sync.speed_kib);
    line
}

/// A size as mdadm --detail prints it: KiB, then a human form from 5000 KiB up.
///
/// Example: 4290772992 bytes is "4190208 (4.00 GiB 4.29 GB)".
/// uraid's own row: whether the partial parity log closes the write hole.
fn write_hole(s: &ArrayStatus) -> String {
    if s.read_only {
        return "not in use (read-only: nothing is written)".into();
    }
    if s.log_off {
        return "open (consistency policy resync: no partial parity log)".into();
    }
    if s.log_bytes == 0 {
        let why = if s.log_missing.is_empty() { "no partial parity log" } else { &s.log_missing };
        return format!("open ({why})");
    }
    format!(
        "closed (partial parity log {}K, {} parity blocks replayed at start)",
        s.log_bytes / 1024,
        s.log_replayed
    )
}

fn detail_size(bytes: u64) -> String {
    let kib = bytes / 1024;
    let (binary, decimal, unit) = if bytes >= 2 << 30 {
        (bytes as f64 / f64::from(1u32 << 30), bytes as f64 / 1e9, "G")
    } else if kib >= 5000 {
        (bytes as f64 / f64::from(1u32 << 20), bytes as f64 / 1e6, "M")
    } else {
        return kib.to_string();
    };
    format!("{kib} ({binary:.2} {unit}iB {decimal:.2} {unit}B)")
}

/// One array's line in `mdadm --detail --scan`'s shape (mdadm 4.2's), for `uraid detail
/// --scan`: what an mdadm.conf takes. `verbose` adds level and device count, and the devices
/// (sorted) on a second line, as `--verbose` does.
#[must_use]
pub fn render_array_line(s: &ArrayStatus, verbose: bool) -> String {
    let mut line = format!("ARRAY /dev/md/{}", s.name);
    if verbose {
        let _ = write!(line, " level=raid{} num-devices={}", s.level, s.raid_disks);
    }
    line.push_str(" metadata=1.2");
    let spares = s.spare_members();
    if spares > 0 {
        let _ = write!(line, " spares={spares}");
    }
    if !s.md_name.is_empty() {
        let _ = write!(line, " name={}", quoted(&s.md_name));
    }
    let _ = write!(line, " UUID={}", s.uuid);
    if verbose {
        let mut devices: Vec<&str> =
            s.members.iter().map(|m| m.path.as_str()).filter(|p| *p != "missing").collect();
        devices.sort_unstable();
        let _ = write!(line, "\n   devices={}", devices.join(","));
    }
    line.push('\n');
    line
}

/// A word of mdadm's files: bare unless it holds a blank or a quote, then in the quote it
/// does not hold (mdadm's print_quoted).
fn quoted(word: &str) -> String {
    if !word.contains([' ', '\t', '"', '\'']) {
        word.to_owned()
    } else if word.contains('"') {
        format!("'{word}'")
    } else {
        format!("\"{word}\"")
    }
}

/// One array in `mdadm --detail`'s shape, for `uraid detail`.
#[must_use]
pub fn render_detail(s: &ArrayStatus) -> String {
    let present: Vec<&MemberStatus> = s.members.iter().filter(|m| m.path != "missing").collect();
    let count = |f: &dyn Fn(&MemberStatus) -> bool| present.iter().filter(|m| f(m)).count();
    let active = count(&MemberStatus::in_sync);
    let failed = count(&|m| m.state == "faulty");
    let spares = count(&MemberStatus::spare_or_rebuilding);
    let mut rows: Vec<(&str, String)> = vec![
        ("Version", "1.2".into()),
        ("Raid Level", format!("raid{}", s.level)),
        ("Array Size", detail_size(s.array_size_bytes)),
        ("Used Dev Size", detail_size(s.component_size_bytes)),
        ("Raid Devices", s.raid_disks.to_string()),
        ("Total Devices", present.len().to_string()),
        ("Intent Bitmap", if s.bitmap { "Internal" } else { "none" }.into()),
        ("State", s.state.clone()),
        ("Active Devices", active.to_string()),
        ("Working Devices", (present.len() - failed).to_string()),
        ("Failed Devices", failed.to_string()),
        ("Spare Devices", spares.to_string()),
        ("Layout", s.layout.clone()),
        ("Chunk Size", format!("{}K", s.chunk_bytes / 1024)),
        // md's policy as its superblocks record it (what the kernel does after a crash);
        // uraid's own log is the "Write Hole" row.
        ("Consistency Policy", s.consistency_policy.clone()),
        ("Write Hole", write_hole(s)),
    ];
    if !s.discard_off_by.is_empty() {
        let why = format!("off ({} cannot discard a range to zeros)", s.discard_off_by);
        rows.push(("Discard", why));
    }
    rows.extend(sync_rows(s));
    rows.extend([
        ("Name", if s.md_name.is_empty() { s.name.clone() } else { s.md_name.clone() }),
        ("UUID", s.uuid.clone()),
        ("Events", s.events.to_string()),
        ("Mismatch Cnt", s.mismatch_sectors.to_string()),
        (
            "Sync Speed",
            format!("min {}K/sec, max {}K/sec", s.sync_speed_min_kib, s.sync_speed_max_kib),
        ),
    ]);
    let mut text = format!("{}:\n", s.name);
    for (label, value) in rows {
        let _ = writeln!(text, "{label:>18} : {value}");
    }
    text.push_str("\n    Number   RaidDevice   State\n");
    for m in &s.members {
        let dash = |n: Option<u32>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
        let path = if m.path == "missing" { "" } else { m.path.as_str() };
        let bad = match m.bad_sectors {
            0 => String::new(),
            n => format!("   ({n} bad sectors listed)"),
        };
        let row = format!(
            "    {:>6}   {:>10}   {:<17} {path}{bad}",
            dash(m.dev_number),
            dash(m.slot),
            m.state
        );
        text.push_str(row.trim_end());
        text.push('\n');
    }
    text
}

/// mdadm's "<Action> Status : N% complete" while a sync runs, and what the last one found.
fn sync_rows(s: &ArrayStatus) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    if let Some(sync) = &s.sync {
        let label = match sync.action.as_str() {
            "recover" => "Rebuild Status",
            "resync" => "Resync Status",
            _ => "Check Status",
        };
        let percent =
            (u128::from(sync.done_sectors) * 100 / u128::from(sync.total_sectors.max(1))) as u64;
        let mut value = format!("{percent}% complete");
        if sync.action == "repair" {
            value.push_str(" (repair)");
        }
        rows.push((label, value));
    }
    if let Some(last) = &s.last_sync {
        rows.push(("Last Sync", sync_result_summary(last)));
    }
    rows
}

/// One line for a finished sync action: "check done: 16 mismatched sectors in 2097152
/// sectors, 12.3 s".
#[must_use]
pub fn sync_result_summary(r: &SyncResult) -> String {
    let listed = match r.listed_bad_sectors {
        0 => String::new(),
        sectors => format!("; {}", listed_bad_text(sectors, &r.action)),
    };
    let from = match r.from_sector {
        0 => String::new(),
        from => format!(" from member sector {from}"),
    };
    format!(
        "{} {}: {} mismatched sectors in {} sectors{from}, {:.1} s{listed}",
        r.action, r.outcome, r.mismatch_sectors, r.sectors, r.seconds
    )
}

/// What a recovery (or a replace, `action` "replace") that listed blocks it could not
/// rebuild says about them.
#[must_use]
pub fn listed_bad_text(sectors: u64, action: &str) -> String {
    let (done, whose) = if action == "replace" {
        ("copied nor rebuilt (unreadable on the member and on another)", "new device's")
    } else {
        ("rebuilt (unreadable on another member too)", "rebuilt member's")
    };
    format!(
        "{sectors} sectors could not be {done} and are listed in the {whose} bad block log: \
         they read as errors until rewritten (`uraid examine --badblocks` lists them, with the \
         array bytes they held)"
    )
}

/// Where a sync action found mismatches, one line each: "member sector 1024, 8 sectors,
/// slot 2 (named by the syndrome)".
#[must_use]
pub fn mismatch_lines(r: &SyncResult) -> Vec<String> {
    r.mismatches
        .iter()
        .map(|m| {
            let slot = m.slot.map_or_else(
                || "no slot named".to_owned(),
                |slot| format!("slot {slot} (named by the syndrome)"),
            );
            format!("member sector {}, {} sectors, {slot}", m.member_sector, m.sectors)
        })
        .collect()
}

/// The name an array goes by when none is given (serve's control socket, messages): md's
/// names are "host:name", and the part after the colon is what an administrator types.
#[must_use]
pub fn short_name(md_name: &str) -> String {
    let short = md_name.rsplit(':').next().unwrap_or(md_name);
    let clean: String =
        short.chars().map(|c| if c == '/' || c.is_control() { '_' } else { c }).collect();
    if clean.is_empty() || clean == "." || clean == ".." { "md".into() } else { clean }
}

#[cfg(test)]
mod tests {
    //! Goal: the text verbs read like md's own tools. Method: hand-built statuses (a RAID6
    //! rebuilding one member after another failed, a clean RAID5) against md's line shapes.

    use super::*;

    fn member(slot: Option<u32>, n: Option<u32>, path: &str, state: &str) -> MemberStatus {
        MemberStatus {
            slot,
            dev_number: n,
            path: path.into(),
            state: state.into(),
            recovery_offset_sectors: None,
            bad_sectors: 0,
        }
    }

    fn raid6_recovering() -> ArrayStatus {
        ArrayStatus {
            name: "md0".into(),
            md_name: "host:md0".into(),
            uuid: "0f3b7a4e:11223344:55667788:99aabbcc".into(),
            level: 6,
            layout: "left-symmetric".into(),
            chunk_bytes: 512 << 10,
            raid_disks: 6,
            array_size_bytes: 4 * 1_047_552 * 1024,
            component_size_bytes: 1_047_552 * 1024,
            events: 42,
            state: "active, degraded, recovering".into(),
            degraded: true,
            bitmap: true,
            bitmap_dirty_chunks: 3,
            bitmap_chunk_bytes: 64 << 20,
            members: vec![
                member(Some(0), Some(0), "/img/m0.img", "active sync"),
                member(Some(1), Some(1), "/img/m1.img", "active sync"),
                member(Some(2), Some(6), "/img/m6.img", "spare rebuilding"),
                member(Some(3), Some(3), "/img/m3.img", "active sync"),
                member(Some(4), Some(4), "/img/m4.img", "active sync"),
                member(Some(5), Some(5), "/img/m5.img", "active sync"),
                member(None, Some(2), "/img/m2.img", "faulty"),
            ],
            sync: Some(SyncStatus {
                action: "recover".into(),
                done_sectors: 572_416,
                total_sectors: 2_095_104,
                speed_kib: 12_345,
                eta_seconds: Some(72),
                throttled: false,
            }),
            last_sync: None,
            mismatch_sectors: 0,
            sync_speed_min_kib: 1000,
            sync_speed_max_kib: 200_000,
            log_bytes: 1008 << 10,
            log_replayed: 3,
            log_off: false,
            log_missing: String::new(),
            read_only: false,
            frozen: false,
            discard_off_by: String::new(),
            consistency_policy: "bitmap".into(),
        }
    }

    #[test]
    fn mdstat_lines_have_mds_shape() {
        let text = render_mdstat(&[raid6_recovering()]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Personalities : [raid4] [raid5] [raid6]");
        assert_eq!(
            lines[1],
            "md0 : active raid6 m6.img[6] m5.img[5] m4.img[4] m3.img[3] m2.img[2](F) m1.img[1] \
             m0.img[0]"
        );
        assert_eq!(
            lines[2],
            "      4190208 blocks super 1.2 level 6, 512k chunk, algorithm 2 [6/5] [UU_UUU]"
        );
        // 572416 / 2095104 = 27.3%: 5 cells of '=' (273 / 50), then '>'.
        assert_eq!(
            lines[3],
            "      [=====>...............]  recovery = 27.3% (286208/1047552) finish=1.2min \
             speed=12345K/sec"
        );
        assert_eq!(lines[4], "      bitmap: 3/16 chunks dirty, 64MB chunk");
        assert_eq!(lines[5], "");
        assert_eq!(lines[6], "unused devices: <none>");
        assert_eq!(lines.len(), 7);
    }

    #[test]
    fn mdstat_of_a_clean_raid5_and_of_nothing() {
        let mut s = raid6_recovering();
        s.level = 5;
        s.raid_disks = 3;
        s.layout = "left-asymmetric".into();
        s.bitmap = false;
        s.sync = None;
        s.members = vec![
            member(Some(0), Some(0), "a", "active sync"),
            member(Some(1), None, "missing", "removed"),
            member(Some(2), Some(2), "c", "active sync"),
            member(None, Some(3), "d", "spare"),
        ];
        let text = render_mdstat(&[s]);
        assert!(text.contains("md0 : active raid5 d[3](S) c[2] a[0]\n"), "{text}");
        assert!(text.contains(", algorithm 0 [3/2] [U_U]\n"), "{text}");
        assert!(!text.contains("bitmap:"));
        assert_eq!(
            render_mdstat(&[]),
            "Personalities : [raid4] [raid5] [raid6]\nunused devices: <none>\n"
        );
    }

    #[test]
    fn progress_bar_ends() {
        let mut sync = raid6_recovering().sync.unwrap();
        sync.done_sectors = sync.total_sectors;
        sync.eta_seconds = None;
        sync.action = "check".into();
        assert_eq!(
            progress_line(&sync),
            "[====================>]  check =100.0% (1047552/1047552) speed=12345K/sec"
        );
        sync.done_sectors = 0;
        assert!(progress_line(&sync).starts_with("[>....................]  check =  0.0%"));
    }

    #[test]
    fn write_hole_row_says_why_it_is_open() {
        let mut s = raid6_recovering();
        s.log_off = true;
        assert!(render_detail(&s).contains(
            "        Write Hole : open (consistency policy resync: no partial parity log)"
        ));
        s.log_off = false;
        s.log_bytes = 0;
        assert!(render_detail(&s).contains("        Write Hole : open (no partial parity log)"));
        s.log_missing = "no room for the partial parity log before the data".into();
        assert!(render_detail(&s).contains("        Write Hole : open (no room for the partial"));
    }

    #[test]
    fn detail_reads_like_mdadm() {
        let text = render_detail(&raid6_recovering());
        for line in [
            "md0:",
            "        Raid Level : raid6",
            "        Array Size : 4190208 (4.00 GiB 4.29 GB)",
            "     Used Dev Size : 1047552 (1023.00 MiB 1072.69 MB)",
            "      Raid Devices : 6",
            "     Total Devices : 7",
            "             State : active, degraded, recovering",
            "    Active Devices : 5",
            "   Working Devices : 6",
            "    Failed Devices : 1",
            "     Spare Devices : 1",
            "            Layout : left-symmetric",
            "        Chunk Size : 512K",
            "Consistency Policy : bitmap",
            "        Write Hole : closed (partial parity log 1008K, 3 parity blocks replayed at start)",
            "    Rebuild Status : 27% complete",
            "            Events : 42",
            "    Number   RaidDevice   State",
            "         6            2   spare rebuilding  /img/m6.img",
            "         2            -   faulty            /img/m2.img",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn an_array_goes_by_the_part_of_its_md_name_after_the_colon() {
        for (md_name, short) in
            [("host:md0", "md0"), ("md0", "md0"), ("a:b:c", "c"), ("h:a/b", "a_b"), ("h:", "md")]
        {
            assert_eq!(short_name(md_name), short, "{md_name}");
        }
        assert_eq!(short_name(".."), "md");
    }

    #[test]
    fn detail_shows_check_and_its_result() {
        let mut s = raid6_recovering();
        s.sync.as_mut().unwrap().action = "repair".into();
        s.members[5] = member(Some(5), None, "missing", "removed");
        s.last_sync = Some(SyncResult {
            action: "check".into(),
            outcome: "done".into(),
            sectors: 2_095_104,
            mismatch_sectors: 8,
            seconds: 12.25,
            mismatches: vec![MismatchAt { member_sector: 1024, sectors: 8, slot: Some(2) }],
            ..SyncResult::default()
        });
        let text = render_detail(&s);
        assert!(text.contains("      Check Status : 27% complete (repair)\n"), "{text}");
        assert!(text.contains("Last Sync : check done: 8 mismatched sectors in 2095104"));
        assert!(text.contains("\n         -            5   removed\n"), "{text}");
        let last = s.last_sync.as_ref().unwrap();
        assert_eq!(
            mismatch_lines(last),
            vec!["member sector 1024, 8 sectors, slot 2 (named by the syndrome)".to_owned()]
        );
    }

    #[test]
    fn sizes_and_chunks_print_like_md() {
        assert_eq!(detail_size(1 << 20), "1024");
        assert_eq!(detail_size(10 << 20), "10240 (10.00 MiB 10.49 MB)");
        assert_eq!(kb_or_mb(64 << 20), "64MB");
        assert_eq!(kb_or_mb(512 << 10), "512KB");
        assert_eq!(algorithm_number("parity-last"), Some(5));
        assert_eq!(algorithm_number("left-symmetric-6"), Some(18));
        assert_eq!(algorithm_number("nonsense"), None);
    }

    #[test]
    fn array_lines_are_mdadm_detail_scans() {
        let mut s = ArrayStatus {
            name: "data".into(),
            md_name: "host:data".into(),
            uuid: "eb42de13:44e23c33:a6be9334:ca81223a".into(),
            level: 6,
            raid_disks: 4,
            ..ArrayStatus::default()
        };
        s.members = vec![
            member(Some(0), Some(0), "/dev/sdc", "active sync"),
            member(Some(1), None, "missing", "removed"),
            member(Some(2), Some(2), "/dev/sda", "spare rebuilding"),
            member(Some(3), Some(3), "/dev/sdb", "active sync"),
            member(None, Some(4), "/dev/sdd", "spare"),
        ];
        let uuid = "UUID=eb42de13:44e23c33:a6be9334:ca81223a";
        let brief = format!("ARRAY /dev/md/data metadata=1.2 spares=2 name=host:data {uuid}\n");
        assert_eq!(render_array_line(&s, false), brief);
        let verbose = format!(
            "ARRAY /dev/md/data level=raid6 num-devices=4 metadata=1.2 spares=2 name=host:data \
             {uuid}\n   devices=/dev/sda,/dev/sdb,/dev/sdc,/dev/sdd\n"
        );
        assert_eq!(render_array_line(&s, true), verbose);
        s.members.retain(|m| m.state == "active sync");
        s.md_name = "my array".into();
        let line = format!("ARRAY /dev/md/data metadata=1.2 name=\"my array\" {uuid}\n");
        assert_eq!(render_array_line(&s, false), line);
        // mdadm.conf's parser reads the line back to this array.
        let conf = crate::mdadm_conf::parse(&line).unwrap();
        assert!(conf.warnings.is_empty() && conf.arrays[0].matches(&s), "{conf:?}");
    }
}
