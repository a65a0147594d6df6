//! Goal: a failed member's slot takes a spare and recovery rebuilds it in windows while
//! clients keep writing, on several workers; afterwards the spare alone (with two other
//! members failed) serves every byte, and check finds no mismatch. Method: RAID6 of 6 shared
//! memory members on 2 workers, a model of every byte written, recovery in 64 KiB windows
//! with the recovery offset advanced after each, as the lifecycle layer does.

mod common;

use common::{KIB, Model, assert_same, client, config, with_workers};
use uraid_core::Level;
use uraid_core::array::SyncKind;
use uraid_runtime::{MemberSource, Runtime, SharedMemory, SharedMemorySource};

const MEMBER_BYTES: usize = 1 << 20;
const CHUNK_BYTES: usize = 16 * KIB;

/// The new device for one slot.
struct Spare(SharedMemory);

impl MemberSource for Spare {
    fn member_count(&self) -> usize {
        6
    }

    fn open(&self, _member: usize) -> std::io::Result<Box<dyn uraid_io::Member>> {
        Ok(Box::new(self.0.member()))
    }
}

#[test]
fn a_spare_is_rebuilt_in_windows_while_clients_write() {
    let cfg = with_workers(config(Level::Raid6, 6, CHUNK_BYTES, MEMBER_BYTES), 2);
    let source = SharedMemorySource::new(6, MEMBER_BYTES);
    let rt = Runtime::start(&cfg, &source).unwrap();
    let model = Model::new(rt.size_bytes());
    let row_bytes = 4 * CHUNK_BYTES as u64;
    let data = common::pattern(1, rt.size_bytes() as usize);
    rt.write_at(0, &data).unwrap();
    model.write(0, &data);

    rt.fail_member(3);
    let spare = Spare(SharedMemory::new("spare", MEMBER_BYTES));
    rt.replace_member(3, &spare).unwrap();
    rt.start_recovery(3, 0);
    let member_sectors = rt.member_sectors();
    let window = 128; // 64 KiB of each member
    let half = rt.size_bytes() / 2 / 512 * 512;
    std::thread::scope(|s| {
        let (rt_ref, model_ref) = (&rt, &model);
        s.spawn(move || client(rt_ref, model_ref, 7, (0, half), row_bytes, false));
        s.spawn(move || client(rt_ref, model_ref, 8, (half, half), row_bytes, false));
        let mut at = 0;
        while at < member_sectors {
            let n = window.min(member_sectors - at);
            rt.sync_wait(SyncKind::Recovery, at, n).unwrap();
            at += n;
            rt.set_recovery_offset(3, at);
        }
    });
    rt.flush().unwrap();
    assert_eq!(rt.failed_members(), Vec::<usize>::new(), "member 3 is back");
    rt.sync_wait(SyncKind::Check, 0, member_sectors).unwrap();
    assert_eq!(rt.mismatches().1, 0, "parity agrees everywhere after the rebuild");

    // The rebuilt member must carry its share: fail two others and read everything.
    rt.fail_member(0);
    rt.fail_member(5);
    rt.flush().unwrap();
    let whole = rt.read_at(0, rt.size_bytes() as usize).unwrap();
    assert_same(&whole, &model.read(0, rt.size_bytes() as usize), "rebuilt member in use");
}

#[test]
fn check_finds_and_repair_fixes_a_corrupted_block() {
    let cfg = with_workers(config(Level::Raid6, 6, CHUNK_BYTES, MEMBER_BYTES), 2);
    let source = SharedMemorySource::new(6, MEMBER_BYTES);
    let rt = Runtime::start(&cfg, &source).unwrap();
    let data = common::pattern(2, rt.size_bytes() as usize);
    rt.write_at(0, &data).unwrap();
    rt.flush().unwrap();
    // Corrupt 4 KiB of member 1 in the second row (worker 1 owns it).
    let at = CHUNK_BYTES + 8 * KIB;
    source.media()[1].write(at, &[0x5a; 4096]);
    let member_sectors = rt.member_sectors();
    rt.sync_wait(SyncKind::Check, 0, member_sectors).unwrap();
    let (found, count) = rt.mismatches();
    assert_eq!(count, 8, "one 4 KiB stripe unit");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].member_sector.0, (at / 512) as u64);
    assert_eq!(
        found[0].member.map(uraid_core::DiskIndex::get),
        Some(1),
        "the syndrome names member 1"
    );
    rt.sync_wait(SyncKind::Repair, 0, member_sectors).unwrap();
    let whole = rt.read_at(0, rt.size_bytes() as usize).unwrap();
    assert_same(&whole, &data, "repaired data");
}
