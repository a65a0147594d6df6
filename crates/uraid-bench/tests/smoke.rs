//! The parity benchmark runs end to end: every row's outputs are verified against the scalar
//! reference and ISA-L before timing, so a wrong kernel fails here. Figures are not checked
//! (timed assertions on a shared machine would be noise).

use uraid_bench::parity::{ParityBenchOptions, run};

#[test]
fn parity_bench_quick_run_verifies_every_row() {
    if let Err(e) = uraid_bench::isal::Isal::load() {
        println!("skipped: ISA-L is not installed ({e:#}); CI installs libisal2");
        return;
    }
    let mut out = Vec::new();
    run(&ParityBenchOptions { quick: true, json: true, only: Vec::new() }, &mut out)
        .expect("bench rows verify");
    let text = String::from_utf8(out).expect("utf-8");
    let rows: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    for op in ["xor", "pq", "pq_rmw", "recov_2data"] {
        assert!(rows.iter().any(|r| r["op"] == op), "no {op} row in:\n{text}");
    }
    for r in rows.iter().filter(|r| r["uraid_gbps"].is_number()) {
        assert!(r["uraid_gbps"].as_f64() > Some(0.0) && r["isal_gbps"].as_f64() > Some(0.0), "{r}");
    }
}
