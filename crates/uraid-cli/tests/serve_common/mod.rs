//! What the `uraid serve` tests share: member files, the `uraid` binary run as a server in
//! its own process (as users run it), the verbs run against it, and a data pattern that says
//! which block and which generation wrote it.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_uraid");

pub fn tempdir(case: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("uraid-serve-{case}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("run")).unwrap();
    dir
}

/// `n` zeroed member files of `mib` MiB in `dir`, named m0.img...
pub fn member_files(dir: &Path, n: usize, mib: u64) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let path = dir.join(format!("m{i}.img"));
            std::fs::File::create(&path).unwrap().set_len(mib << 20).unwrap();
            path
        })
        .collect()
}

/// `uraid create`: a RAID6 (zeroed members, so --assume-clean is true) with a 1 MiB-chunk
/// internal bitmap.
pub fn create_raid6(name: &str, members: &[PathBuf]) {
    let n = members.len().to_string();
    let out = Command::new(BIN)
        .args(["create", "--level", "6", "-n", &n, "--chunk", "64K", "--name", name])
        .args(["--bitmap", "internal", "--bitmap-chunk", "1M", "--assume-clean"])
        .args(members)
        .output()
        .unwrap();
    assert!(out.status.success(), "create: {}", text(&out.stderr));
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `uraid` verb with the test's run directory; returns the output whatever the status.
pub fn uraid(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN).args(args).env("URAID_RUN_DIR", dir.join("run")).output().unwrap()
}

/// A verb that must succeed; its standard output.
pub fn uraid_ok(dir: &Path, args: &[&str]) -> String {
    let out = uraid(dir, args);
    assert!(
        out.status.success(),
        "uraid {args:?} failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// `uraid detail --json NAME`.
pub fn detail(dir: &Path, name: &str) -> serde_json::Value {
    serde_json::from_str(&uraid_ok(dir, &["detail", "--json", name])).unwrap()
}

/// Numbers each server's socket and log.
static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A `uraid serve` process on a Unix socket (no TCP: tests run in parallel).
pub struct Served {
    pub child: Child,
    pub socket: PathBuf,
    pub log: PathBuf,
}

impl Served {
    /// Starts `uraid serve` and waits for its banner (the listeners are up).
    pub fn start(dir: &Path, name: &str, members: &[PathBuf]) -> Served {
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Served::start_on(dir, name, members, &dir.join(format!("nbd-{n}.sock")))
    }

    /// `start` with the NBD socket at `socket`.
    pub fn start_on(dir: &Path, name: &str, members: &[PathBuf], socket: &Path) -> Served {
        Served::start_with(dir, name, members, socket, &[])
    }

    /// `start_on` with more options for `uraid serve`.
    pub fn start_with(
        dir: &Path,
        name: &str,
        members: &[PathBuf],
        socket: &Path,
        options: &[&str],
    ) -> Served {
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let socket = socket.to_path_buf();
        let log = dir.join(format!("serve-{n}.log"));
        let mut child = Command::new(BIN)
            .args(["serve", "--no-tcp", "--name", name, "--unix"])
            .arg(&socket)
            .args(options)
            .args(members)
            .env("URAID_RUN_DIR", dir.join("run"))
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        wait_banner(stdout, &log);
        Served { child, socket, log }
    }

    pub fn client(&self) -> uraid_nbd::client::Client {
        uraid_nbd::client::Client::connect_unix(&self.socket, "uraid").unwrap()
    }

    /// Waits for the process to exit (after a stop or a signal).
    pub fn wait(mut self, timeout: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(start.elapsed() < timeout, "uraid serve did not exit: {}", self.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args(["-s", signal, &pid]).status().unwrap();
        assert!(status.success());
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads the banner on a thread (a server that dies early must fail the test, not hang it).
fn wait_banner(stdout: ChildStdout, log: &Path) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.starts_with("serving NBD export") {
                let _ = tx.send(());
            }
        }
    });
    let up = rx.recv_timeout(Duration::from_secs(60)).is_ok();
    assert!(
        up,
        "uraid serve did not come up: {}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// What generation `g` writes into 4 KiB block `block`: both numbers in every 16 bytes, so a
/// block from the wrong place or the wrong time is recognised.
pub fn content(block: u64, g: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    for (i, chunk) in v.chunks_mut(16).enumerate() {
        let at = block + (i * 16 / 4096) as u64;
        chunk[..8].copy_from_slice(&at.to_le_bytes());
        chunk[8..16].copy_from_slice(&(g | 1 << 63).to_le_bytes());
    }
    v
}

/// The generation a 4 KiB block holds (0: never written), or None if it is not one of ours.
pub fn generation_of(block: u64, data: &[u8]) -> Option<u64> {
    if data.iter().all(|&b| b == 0) {
        return Some(0);
    }
    let g = u64::from_le_bytes(data[8..16].try_into().unwrap()) & !(1 << 63);
    (data == content(block, g, data.len()).as_slice()).then_some(g)
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Overwrites 4 KiB of a member's data area (past md's 1 MiB data offset) behind the array's
/// back: a check's mismatch.
pub fn corrupt(member: &Path, member_byte: u64) {
    use std::os::unix::fs::FileExt as _;
    let file = std::fs::OpenOptions::new().write(true).open(member).unwrap();
    file.write_all_at(&[0x5a; 4096], (2048 << 9) + member_byte).unwrap();
}
