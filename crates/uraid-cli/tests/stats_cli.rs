//! `uraid stats --file` prints a saved report: the engine's, the stripe cache's and every
//! member's counters, equal to what the library reports. (A running array's, asked over its
//! control socket, are tested in `serve_cli.rs`.)

use std::process::Command;
use uraid_core::array::{Array, ArrayConfig, ReqId};
use uraid_core::{DiskIndex, Geometry, Level, Sector};
use uraid_io::{Driver, MemoryMember, StatsReport};

#[test]
fn stats_json_reports_the_published_counters() {
    let g = Geometry::new(Level::Raid6, Level::Raid6.default_layout(), 6, 64 << 10).unwrap();
    let mut a = Array::new(ArrayConfig {
        geometry: g,
        stripe_size_bytes: 4096,
        stripe_cache_size: 32,
        member_sectors: 2048,
    })
    .unwrap();
    let members: Vec<_> =
        (0..6).map(|i| Box::new(MemoryMember::new(&format!("m{i}"), 1 << 20))).collect();
    let mut d = Driver::new(members);
    // A full-stripe write, a 4 KiB rmw, a healthy read (bypasses the cache), then a degraded
    // read of the failed member's block.
    a.submit_write(ReqId(1), Sector(0), vec![7u8; 256 << 10]);
    d.run_until_idle(&mut a).unwrap();
    a.submit_write(ReqId(2), Sector(8), vec![9u8; 4096]);
    a.submit_read(ReqId(3), Sector(256), vec![0u8; 4096]);
    d.run_until_idle(&mut a).unwrap();
    a.fail_member(DiskIndex(0));
    a.submit_read(ReqId(4), Sector(0), vec![0u8; 4096]);
    d.run_until_idle(&mut a).unwrap();
    assert!(a.take_completed().iter().all(|c| c.1.is_ok()));

    let names: Vec<String> = (0..6).map(|i| format!("m{i}")).collect();
    let report = StatsReport::new(&a, &names, &d.counters());
    let dir = std::env::temp_dir().join(format!("uraid-stats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("stats.json");
    report.publish(&path).unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["stats", "--json", "--file"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed: StatsReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, report);
    // Counted per stripe head: 256 KiB of data over heads of 4 x 4 KiB.
    assert_eq!(printed.engine.stripe_writes_full, 16);
    assert_eq!(printed.engine.stripe_writes_rmw + printed.engine.stripe_writes_rcw, 1);
    assert!(printed.engine.reads_bypassed >= 1);
    assert!(printed.members[0].failed && !printed.members[1].failed);
    let total_writes: u64 = printed.members.iter().map(|m| m.io.write_bytes).sum();
    assert_eq!(total_writes, d.counters_total().write_bytes);
    assert_eq!(printed.cache.stripe_cache_size, 32);

    let table =
        Command::new(env!("CARGO_BIN_EXE_uraid")).args(["stats", "--file"]).arg(&path).output();
    let table = table.unwrap();
    assert!(String::from_utf8_lossy(&table.stdout).contains("m0 (failed)"));
    let missing = Command::new(env!("CARGO_BIN_EXE_uraid"))
        .args(["stats", "--json", "--file"])
        .arg(dir.join("absent.json"))
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("absent.json"));
    std::fs::remove_dir_all(&dir).unwrap();
}
