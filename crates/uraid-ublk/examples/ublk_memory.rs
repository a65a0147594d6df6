//! Serves a ramdisk as /dev/ublkbN until standard input closes, then stops it gracefully and
//! prints what the queues served. Needs root and `modprobe ublk_drv`.
//!
//!     ublk_memory [SIZE_MIB] <control-fifo
//!
//! `uraid serve --ublk` is the real use; this is the smallest way to try the frontend.

use std::io::Read;
use std::sync::Arc;
use uraid_nbd::MemoryBackend;
use uraid_ublk::{UblkConfig, UblkDevice};

fn main() {
    let mib: usize = std::env::args().nth(1).map_or(64, |a| a.parse().expect("SIZE_MIB"));
    let backend = Arc::new(MemoryBackend::new(mib << 20, 64 << 10));
    let device = match UblkDevice::start(backend, &UblkConfig::default()) {
        Ok(device) => device,
        Err(e) => {
            eprintln!("ublk_memory: {e}");
            std::process::exit(1);
        }
    };
    println!("ublk_memory: serving {mib} MiB as {}", device.block_path().display());
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    match device.stop() {
        Ok(stats) => println!("ublk_memory: stopped: {stats:?}"),
        Err(e) => {
            eprintln!("ublk_memory: stop: {e}");
            std::process::exit(1);
        }
    }
}
