//! What a running array reports: `uraid detail`, `uraid status` and the control socket all
//! serve these, as JSON (serde) or as text in mdadm's and /proc/mdstat's shapes.

use serde::{Deserialize, Serialize};

/// One running array, as `mdadm --detail` describes it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ArrayStatus {
    /// The array's name (md's set_name; also its control socket's name).
    pub name: String,
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
    /// resyncing", "active, checking", ...
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
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberStatus {
    /// The slot (md's raid_disk / "RaidDevice"), None for a spare or a failed member.
    pub slot: Option<u32>,
    /// The superblock's dev_number (mdadm's "Number").
    pub dev_number: Option<u32>,
    /// The member's path; "missing" for an empty slot.
    pub path: String,
    /// "active sync", "spare rebuilding", "spare", "faulty", "removed".
    pub state: String,
    /// While being rebuilt: in sync below this member sector.
    pub recovery_offset_sectors: Option<u64>,
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
    /// Bytes of array data covered (sectors x 512 x data disks).
    pub array_bytes: u64,
    pub seconds: f64,
    /// Mismatched sectors it found (check, repair, resync).
    pub mismatch_sectors: u64,
    /// Where, in member sectors, with the member the RAID6 syndrome names (first ones kept).
    pub mismatches: Vec<MismatchAt>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MismatchAt {
    pub member_sector: u64,
    pub sectors: u64,
    /// The slot holding the bad block when the syndrome names one (RAID6), else None.
    pub slot: Option<u32>,
}
