//! Starting a device on this host: refusals that need no kernel support, the clear error
//! where ublk_drv is missing, and a real device where it is there (root, `modprobe
//! ublk_drv`). The full filesystem round trip runs in the VM: uraid-cli's tests/kernel_ublk.rs.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;
use uraid_nbd::MemoryBackend;
use uraid_ublk::{UblkConfig, UblkDevice, UblkError};

fn memory(bytes: usize) -> Arc<MemoryBackend> {
    Arc::new(MemoryBackend::new(bytes, 64 << 10))
}

#[test]
fn bad_configurations_are_refused_before_touching_the_driver() {
    let cases = [
        (UblkConfig { queue_depth: 0, ..UblkConfig::default() }, "queue depth 0"),
        (UblkConfig { queue_depth: 5000, ..UblkConfig::default() }, "queue depth 5000"),
        (UblkConfig { queues: 0, ..UblkConfig::default() }, "at least one queue"),
        (UblkConfig { max_io_bytes: 6000, ..UblkConfig::default() }, "max I/O 6000"),
    ];
    for (config, why) in cases {
        let err = UblkDevice::start(memory(1 << 20), &config).err().expect("refused");
        assert!(matches!(err, UblkError::Config(_)), "{why}: {err}");
        assert!(err.to_string().contains(why), "{err} should say {why}");
    }
    let err = UblkDevice::start(memory(1000), &UblkConfig::default()).err().expect("refused");
    assert!(err.to_string().contains("not a positive multiple of 512"), "{err}");
}

#[test]
fn start_serves_or_says_why_not() {
    let backend = memory(8 << 20);
    let device = match UblkDevice::start(Arc::clone(&backend) as _, &UblkConfig::default()) {
        Ok(device) => device,
        Err(e @ UblkError::NotAvailable) => {
            assert_eq!(
                e.to_string(),
                "ublk is not available: /dev/ublk-control missing (modprobe ublk_drv; Linux >= 6.0)"
            );
            eprintln!("skipping the device round trip: {e}");
            return;
        }
        Err(e @ UblkError::Permission(_)) => {
            eprintln!("skipping the device round trip: {e}");
            return;
        }
        Err(e) => panic!("ublk_drv is here but the device did not start: {e}"),
    };
    let path = device.block_path();
    let pattern: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 7 + i / 4096) as u8).collect();
    // O_DIRECT wants memory aligned to the logical block: take an aligned window.
    let mut room = vec![0u8; (1 << 20) + 4096];
    let at = room.as_ptr().align_offset(4096);
    let aligned = &mut room[at..at + (1 << 20)];
    aligned.copy_from_slice(&pattern);
    let mut disk = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    disk.seek(SeekFrom::Start(3 << 20)).unwrap();
    disk.write_all(aligned).unwrap();
    disk.sync_all().unwrap();
    aligned.fill(0);
    disk.seek(SeekFrom::Start(3 << 20)).unwrap();
    disk.read_exact(aligned).unwrap();
    assert!(*aligned == pattern[..], "read back through {} differs", path.display());
    drop(disk);
    let stats = device.stop().expect("a clean stop");
    assert!(stats.writes >= 1 && stats.reads >= 1 && stats.errors == 0, "{stats:?}");
    assert!(backend.snapshot(3 << 20, 1 << 20) == pattern, "the backend holds other data");
    assert!(!path.exists(), "{} still exists after stop", path.display());
}
