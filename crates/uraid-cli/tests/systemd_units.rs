//! Goal: the systemd units in `contrib/systemd` are ones systemd takes as written, and the
//! commands and options they and their example configurations give uraid exist.
//!
//! Method: `systemd-analyze verify` of each unit with its ExecStart pointed at the built
//! binary (systemd checks that it is executable); it must exit 0 and say nothing (a value it
//! cannot parse is only a warning there). Each `--option` of the examples must be in the help
//! of the verb it is given to. Skips where systemd-analyze is not installed.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_uraid");

fn contrib(name: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/systemd");
    std::fs::read_to_string(dir.join(name)).unwrap()
}

fn help(verb: &str) -> String {
    let out = Command::new(BIN).args([verb, "--help"]).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn systemd_takes_the_units_as_written() {
    let dir = std::env::temp_dir().join(format!("uraid-units-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut units: Vec<PathBuf> = Vec::new();
    for (file, instance) in [
        ("uraid@.service", "uraid@md0.service"),
        ("uraid-monitor.service", "uraid-monitor.service"),
    ] {
        let text = contrib(file);
        assert!(text.contains("ExecStart=/usr/local/bin/uraid "), "{file}");
        let path = dir.join(instance);
        std::fs::write(&path, text.replace("/usr/local/bin/uraid", BIN)).unwrap();
        units.push(path);
    }
    let verify = Command::new("systemd-analyze").arg("verify").args(&units).output();
    let _ = std::fs::remove_dir_all(&dir);
    let Ok(out) = verify else {
        eprintln!("skipping: no systemd-analyze here");
        return;
    };
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "systemd-analyze verify: {said}");
}

#[test]
fn the_options_the_units_and_examples_give_exist() {
    let serve = help("serve");
    let monitor = help("monitor");
    // The `--options` of the lines that are not comments (`VAR="..."` quotes stripped).
    let given = |text: &str| -> Vec<String> {
        let lines = text.lines().filter(|l| !l.trim_start().starts_with('#'));
        let words =
            lines.flat_map(|l| l.split(|c: char| c.is_whitespace() || c == '"' || c == '='));
        words.filter(|w| w.starts_with("--")).map(str::to_owned).collect()
    };
    let serve_options =
        [given(&contrib("md0.conf.example")), given(&contrib("uraid@.service"))].concat();
    assert!(
        serve_options.contains(&"--listen".to_owned())
            && serve_options.contains(&"--name".to_owned())
    );
    for option in serve_options {
        assert!(serve.contains(&format!("{option} ")), "uraid serve has no {option}");
    }
    let monitor_options =
        given(&contrib("monitor.conf.example").replace("URAID_MONITOR_ARGS=", ""));
    assert_eq!(monitor_options, ["--program"]);
    for option in monitor_options {
        assert!(monitor.contains(&format!("{option} ")), "uraid monitor has no {option}");
    }
}
