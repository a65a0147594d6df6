//! `uraid bench serve --quick --json` runs end to end: fio's nbd engine against nbdkit memory
//! and uraid's NBD server on RAID0 and RAID5, one row per (job, target), each ratio taken to
//! nbdkit's figure of the same job, each goal the issue's, and the summary counting them.
//! Figures are not judged (a timed assertion on a shared machine would be noise).
//! Without fio or nbdkit the test prints why and passes, except under CI=true (CI installs them).

use serde_json::Value;
use std::process::Command;

#[test]
fn bench_serve_quick_prints_a_row_per_job_and_target_with_ratios_to_nbdkit() {
    if let Some(why) = uraid_bench::serve::missing_tools() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true but {why}");
        println!("skipping: {why}");
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_uraid"));
    let out = child.args(["bench", "serve", "--quick", "--json"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "uraid bench serve failed:\n{stdout}\n{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let (summary, rows) = lines.split_last().expect("rows and a summary");
    assert_eq!(summary["family"], "summary", "{stdout}");
    assert_eq!(rows.len(), 12, "4 jobs x 3 targets:\n{stdout}");
    for job in ["seq_read", "seq_write", "rand_read", "rand_write"] {
        let of = |target: &str| {
            let mut found = rows.iter().filter(|r| r["job"] == job && r["target"] == target);
            let row = found.next().unwrap_or_else(|| panic!("no {job} row for {target}"));
            assert!(found.next().is_none(), "two {job} rows for {target}");
            row
        };
        let nbdkit = of("nbdkit");
        let base = nbdkit["value"].as_f64().unwrap();
        assert!(base > 0.0, "{nbdkit}");
        assert_eq!(nbdkit["ratio"].as_f64(), Some(1.0), "{nbdkit}");
        assert!(nbdkit["goal"].is_null(), "the baseline has no goal: {nbdkit}");
        for (target, level) in [("raid0", 0), ("raid5", 5)] {
            let row = of(target);
            assert_eq!(row["level"], level, "{row}");
            assert_eq!(row["export_bytes"], nbdkit["export_bytes"], "same size as nbdkit");
            let value = row["value"].as_f64().unwrap();
            assert!(value > 0.0, "{row}");
            assert_eq!(row["nbdkit"].as_f64(), Some(base), "{row}");
            let ratio = row["ratio"].as_f64().unwrap();
            assert!((ratio - value / base).abs() < 1e-9, "{row}");
            let goal = match (target, job) {
                ("raid0", _) => Some(1.0),
                ("raid5", "rand_write") => None,
                _ => Some(0.8),
            };
            assert_eq!(row["goal"].as_f64(), goal, "{row}");
            let meets = goal.map(|g| ratio >= g);
            assert_eq!(row["meets_goal"].as_bool(), meets, "{row}");
        }
    }
    let judged = |v: bool| rows.iter().filter(|r| r["meets_goal"] == v).count();
    assert_eq!(summary["rows"], 12);
    assert_eq!(summary["meet_goal"], judged(true), "{stdout}");
    assert_eq!(summary["miss"], judged(false), "{stdout}");
    assert_eq!(judged(true) + judged(false), 7, "RAID0 x4 and RAID5 x3 rows have goals");
}
