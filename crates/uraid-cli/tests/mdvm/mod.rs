//! What the tests that run jobs in the md VM kit (`scripts/mdvm`, DEVELOPERS.md) share:
//! getting the kit or a reason to skip, running a job, and reading what it reported. Used by
//! this crate's kernel tests and, by path, by uraid-nbd's.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// `RESULT <key> <value>` lines by key.
pub type Results = BTreeMap<String, String>;

/// The kit's scripts directory, or None (the reason printed) when the kit cannot be had here
/// or lacks one of `tools` (names in the kit's `tools` list). Under CI=true either fails the
/// test instead: CI installs what the kit needs.
pub fn kit(tools: &[&str]) -> Option<PathBuf> {
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/mdvm");
    let out = Command::new(scripts.join("build-kit"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}/build-kit: {e}", scripts.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reason = match out.status.code() {
        Some(0) => {
            let kit = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            let listed = std::fs::read_to_string(kit.join("tools")).unwrap_or_default();
            let missing: Vec<&str> =
                tools.iter().copied().filter(|t| !listed.lines().any(|l| l == *t)).collect();
            if missing.is_empty() {
                return Some(scripts);
            }
            format!(
                "the VM kit has no {} (tools: {})",
                missing.join(", "),
                listed.replace('\n', " ")
            )
        }
        Some(3) => stderr.trim().to_owned(),
        _ => panic!("building the md VM kit failed ({}):\n{stderr}", out.status),
    };
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true but the VM kit cannot run: {reason}"
    );
    eprintln!("skipping: {reason}");
    None
}

/// Runs a prepared `scripts/mdvm/run` command; the console between the job's markers.
pub fn run(cmd: &mut Command, what: &str) -> String {
    let started = Instant::now();
    let out = cmd.output().expect("running scripts/mdvm/run");
    let console = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the {what} VM job failed ({}):\n{stderr}\n{console}",
        out.status
    );
    let job_output = console
        .split_once("=== mdvm job begin ===")
        .and_then(|(_, rest)| rest.split_once("=== mdvm job end"))
        .map(|(inside, _)| inside.to_owned())
        .expect("the console has the job's markers");
    eprintln!("{what} VM ran {:.0?}; its job printed:{job_output}", started.elapsed());
    job_output
}

/// What every `run_job` job starts with: `r KEY VALUE...` reports a result, `md ATTR` reads
/// md0's sysfs attribute, and `read_and_check NAME` reports the sha256 of md0's first 16 MiB
/// as `NAME_data`, runs md's check and reports its `NAME_mismatches`.
const JOB_PRELUDE: &str = r#"
r() { echo "RESULT $*"; }
md() { cat /sys/block/md0/md/$1; }
read_and_check() {
  r $1_data $(head -c 16777216 /dev/md0 | sha256sum | cut -d' ' -f1)
  echo check > /sys/block/md0/md/sync_action
  mdadm --wait /dev/md0 || true
  r $1_mismatches $(md mismatch_cnt)
}
"#;

/// Writes `job` (after `JOB_PRELUDE`) to `dir/{what}.sh` and runs it in the VM, `disks` its
/// virtio disks in order (/dev/vda, /dev/vdb, ...), for at most `timeout_s`: the job's console
/// and its results.
pub fn run_job<'a>(
    scripts: &Path,
    (dir, what): (&Path, &str),
    job: &str,
    disks: impl IntoIterator<Item = &'a PathBuf>,
    timeout_s: u32,
) -> (String, Results) {
    let path = dir.join(format!("{what}.sh"));
    std::fs::write(&path, format!("{JOB_PRELUDE}{job}")).expect("writing the job");
    let mut cmd = Command::new(scripts.join("run"));
    cmd.args(["--timeout", &timeout_s.to_string()]).arg(&path).args(disks);
    let console = run(&mut cmd, what);
    let results = results(&console);
    (console, results)
}

/// The job's `RESULT` lines.
pub fn results(job_output: &str) -> Results {
    job_output
        .lines()
        .filter_map(|line| line.strip_prefix("RESULT "))
        .map(|rest| {
            let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
            (key.to_owned(), value.trim().to_owned())
        })
        .collect()
}

pub fn result<'a>(results: &'a Results, key: &str) -> &'a str {
    results.get(key).unwrap_or_else(|| panic!("the VM reported no {key}: {results:#?}"))
}

/// A binary (the `uraid` one) and the shared libraries it loads, for `run --add` (the kit
/// carries glibc's loader; the libraries go to /job, which a job puts on LD_LIBRARY_PATH).
pub fn binary_and_libraries(bin: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd").arg(bin).output().expect("running ldd");
    let mut files = vec![bin.to_owned()];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        // "libm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x...)"; the loader and the vdso
        // have no "=>" path.
        if let Some((_, rest)) = line.split_once("=> ")
            && let Some(path) = rest.split_whitespace().next()
        {
            files.push(PathBuf::from(path));
        }
    }
    files
}
