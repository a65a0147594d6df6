//! Reading an assembled array's whole contents through the real engine: `uraid_core`'s
//! `Array` driven by `uraid_io`'s `Driver` over `FileMember`s, with missing and stale slots
//! failed so that their blocks are rebuilt from parity.
//!
//! Never writes to a member: each is opened read-only (so members on read-only media or a
//! read-only mount can be read; until the fourth session of 2026-12-06 they were opened for
//! writing and refused there), and sits behind `ReadOnly`, which completes writes and
//! discards with EROFS without passing them on. The engine only writes on a read error (md's
//! rewrite of a rebuilt block); here that rewrite fails and the member is failed instead,
//! so the read still succeeds from parity when redundancy allows. Ranges a member's md bad
//! block log names are never read (`uraid_md::members::open_member`): they are rebuilt the
//! same way, and their rewrite completes without being written (the range stays in md's
//! list, and the member stays in the array, as md keeps it).

use anyhow::{Context, bail, ensure};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use uraid_core::array::{Array, ArrayConfig, ReqId};
use uraid_core::{DiskIndex, Geometry, Layout, SECTOR_BYTES, Sector};
use uraid_format::assemble::AssemblyPlan;
use uraid_io::{
    Driver, FileOptions, IoCompletion, IoFailure, IoOp, IoRequest, Member, MemberCounters,
    MemberInfo, MemoryMember,
};

use crate::cmd::md_meta::core_level;

/// Bytes per read request, and requests in flight per driver run.
const REQUEST_BYTES: u64 = 1 << 20;
const REQUESTS_IN_FLIGHT: u64 = 8;
/// Linux's EROFS: what a write to a read-only member completes with.
const EROFS: i32 = 30;

/// A member that performs reads and refuses writes and discards.
struct ReadOnly {
    inner: Box<dyn Member>,
    /// Byte ranges the member's bad block log names.
    known_bad: Vec<std::ops::Range<u64>>,
    refused: Vec<IoCompletion>,
}

impl Member for ReadOnly {
    fn info(&self) -> &MemberInfo {
        self.inner.info()
    }

    fn counters(&self) -> &Arc<MemberCounters> {
        self.inner.counters()
    }

    unsafe fn submit(&mut self, req: IoRequest) {
        if matches!(req.op, IoOp::Write { .. } | IoOp::Discard) {
            let span = req.offset_bytes..req.end_bytes();
            let known_bad = uraid_io::known_bad::overlaps(&self.known_bad, &span);
            let result = if known_bad { Ok(()) } else { Err(IoFailure::Os { errno: EROFS }) };
            self.refused.push(IoCompletion { tag: req.tag, result });
            return;
        }
        // SAFETY: the caller's contract for `req` is exactly the one `inner.submit` requires;
        // it is passed on unchanged. (The only unsafe line outside uraid-io: the wrapper
        // completes a refused write as md keeps a listed range, which a device opened
        // read-only would fail instead.)
        unsafe { self.inner.submit(req) }
    }

    fn flush_submissions(&mut self) -> std::io::Result<()> {
        self.inner.flush_submissions()
    }

    fn reap(&mut self, out: &mut Vec<IoCompletion>, wait: bool) -> std::io::Result<()> {
        let had_refused = !self.refused.is_empty();
        out.append(&mut self.refused);
        self.inner.reap(out, wait && !had_refused)
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.refused.len()
    }
}

/// Streams the array's contents to `out`; returns the bytes written.
pub fn read_array(plan: &AssemblyPlan, out: &mut dyn Write) -> anyhow::Result<u64> {
    let level = core_level(plan.level).context("level served by uraid")?;
    let layout = Layout::from_md(level, plan.layout)?;
    let chunk_bytes = u64::from(plan.chunk_sectors) * SECTOR_BYTES;
    let geometry = Geometry::new(level, layout, plan.raid_disks as usize, chunk_bytes)?;
    let config = ArrayConfig {
        geometry,
        stripe_size_bytes: 4096,
        stripe_cache_size: 256,
        member_sectors: plan.size_sectors,
    };
    let mut array = Array::new(config)?;
    let (mut driver, data_offset_sectors) = open_driver(plan)?;
    driver = driver.with_data_offset_bytes(data_offset_sectors * SECTOR_BYTES);
    for slot in plan.missing_slots() {
        array.fail_member(DiskIndex(slot as u16));
    }
    let total_bytes = array.size_sectors() * SECTOR_BYTES;
    ensure!(total_bytes == plan.array_sectors() * SECTOR_BYTES, "engine and plan sizes differ");
    let bar = crate::cmd::progress::byte_bar(total_bytes, "reading the array");
    let mut offset = 0;
    while offset < total_bytes {
        let mut ids = Vec::new();
        while offset < total_bytes && (ids.len() as u64) < REQUESTS_IN_FLIGHT {
            let len = REQUEST_BYTES.min(total_bytes - offset);
            array.submit_read(ReqId(offset), Sector(offset / SECTOR_BYTES), vec![0; len as usize]);
            ids.push(offset);
            offset += len;
        }
        driver.run_until_idle(&mut array).context("reading the members")?;
        let mut done = array.take_completed();
        done.sort_by_key(|(id, _, _)| id.0);
        ensure!(done.len() == ids.len(), "{} of {} reads completed", done.len(), ids.len());
        for (id, result, buf) in done {
            result.with_context(|| format!("reading array byte {}", id.0))?;
            out.write_all(&buf).context("writing the array's contents")?;
            bar.inc(buf.len() as u64);
        }
    }
    bar.finish_and_clear();
    out.flush().context("writing the array's contents")?;
    Ok(total_bytes)
}

/// One driver member per slot: the file of the slot's member, or a stand-in for a slot the
/// engine has failed (it never gets I/O). md allows a data offset per member; uraid's driver
/// takes one for all, so differing offsets are refused.
fn open_driver(plan: &AssemblyPlan) -> anyhow::Result<(Driver, u64)> {
    let mut members: Vec<Box<dyn Member>> = Vec::new();
    let mut data_offset = None;
    let missing = plan.missing_slots();
    for (slot, member) in plan.slots.iter().enumerate() {
        let mut known_bad = Vec::new();
        let inner: Box<dyn Member> = match member {
            Some(member) if !missing.contains(&(slot as u32)) => {
                if *data_offset.get_or_insert(member.data_offset_sectors)
                    != member.data_offset_sectors
                {
                    bail!("{}: data offset differs from the other members", member.name);
                }
                let options =
                    FileOptions { ring_entries: 64, read_only: true, ..FileOptions::default() };
                // Ranges md's bad block log names are read around (rebuilt from parity).
                let path = Path::new(&member.name);
                known_bad = uraid_md::members::known_bad_bytes(path)
                    .context("reading the bad block log")?; // the error names the member
                uraid_md::members::open_member(path, options)
                    .with_context(|| format!("cannot open member {}", member.name))?
            }
            _ => Box::new(MemoryMember::new(&format!("missing-{slot}"), 0)),
        };
        members.push(Box::new(ReadOnly { inner, known_bad, refused: Vec::new() }));
    }
    let data_offset = data_offset.context("no member to read")?;
    Ok((Driver::new(members), data_offset))
}
