//! The control plane: `/dev/ublk-control` and an SQE128 io_uring that carries ublk_drv's
//! control commands (ADD_DEV, SET_PARAMS, START_DEV, STOP_DEV, DEL_DEV), one at a time.

use crate::UblkError;
use crate::sys::{self, CtrlCmd, DevInfo, Params};
use io_uring::{IoUring, cqueue, opcode, squeue, types};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

pub const CONTROL_PATH: &str = "/dev/ublk-control";

pub struct Control {
    file: File,
    ring: IoUring<squeue::Entry128, cqueue::Entry>,
    /// Whether the driver takes ioctl-encoded opcodes (decided by ADD_DEV).
    encoded: bool,
}

impl Control {
    pub fn open() -> Result<Control, UblkError> {
        if !Path::new(CONTROL_PATH).exists() {
            return Err(UblkError::NotAvailable);
        }
        let file = OpenOptions::new().read(true).write(true).open(CONTROL_PATH).map_err(|e| {
            if e.kind() == io::ErrorKind::PermissionDenied {
                UblkError::Permission(e)
            } else {
                UblkError::Io { what: "opening /dev/ublk-control", source: e }
            }
        })?;
        let ring = IoUring::builder()
            .build(4)
            .map_err(|source| UblkError::Io { what: "creating the control io_uring", source })?;
        Ok(Control { file, ring, encoded: true })
    }

    /// Whether the queues must send ioctl-encoded opcodes too.
    pub fn encoded(&self) -> bool {
        self.encoded
    }

    /// ADD_DEV: the driver allocates the device (and `/dev/ublkcN`) and answers with what it
    /// granted (the id it chose, the queues and buffer size it clamped).
    pub fn add_dev(&mut self, want: &DevInfo) -> Result<DevInfo, UblkError> {
        let mut buf = want.encode();
        match self.run(sys::CMD_ADD_DEV, want.dev_id, Some(&mut buf), 0) {
            // Linux 6.0..6.3 know only the plain opcodes.
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) && self.encoded => {
                self.encoded = false;
                let mut legacy = DevInfo { flags: want.flags & !sys::F_CMD_IOCTL_ENCODE, ..*want };
                buf = legacy.encode();
                self.run(sys::CMD_ADD_DEV, want.dev_id, Some(&mut buf), 0).map_err(add_error)?;
                legacy = DevInfo::decode(&buf);
                Ok(legacy)
            }
            Err(e) => Err(add_error(e)),
            Ok(_) => Ok(DevInfo::decode(&buf)),
        }
    }

    pub fn set_params(&mut self, dev_id: u32, params: &Params) -> Result<(), UblkError> {
        let mut buf = params.encode();
        self.run(sys::CMD_SET_PARAMS, dev_id, Some(&mut buf), 0)
            .map(drop)
            .map_err(|source| UblkError::Command { what: "SET_PARAMS", dev_id, source })
    }

    /// START_DEV returns once every queue has fetched all its tags and the disk is added
    /// (the kernel reads the partition table through our queues meanwhile).
    pub fn start_dev(&mut self, dev_id: u32) -> Result<(), UblkError> {
        let pid = u64::from(std::process::id());
        self.run(sys::CMD_START_DEV, dev_id, None, pid)
            .map(drop)
            .map_err(|source| UblkError::Command { what: "START_DEV", dev_id, source })
    }

    /// STOP_DEV removes the disk: the block layer drains what is in flight (our queues must
    /// keep serving meanwhile), then the driver aborts the queues' pending fetches.
    pub fn stop_dev(&mut self, dev_id: u32) -> Result<(), UblkError> {
        self.run(sys::CMD_STOP_DEV, dev_id, None, 0)
            .map(drop)
            .map_err(|source| UblkError::Command { what: "STOP_DEV", dev_id, source })
    }

    /// DEL_DEV frees the device; the driver waits until `/dev/ublkcN` is closed.
    pub fn del_dev(&mut self, dev_id: u32) -> Result<(), UblkError> {
        self.run(sys::CMD_DEL_DEV, dev_id, None, 0).map(drop).map_err(|source| UblkError::Command {
            what: "DEL_DEV",
            dev_id,
            source,
        })
    }

    /// One command, waited for: `buf` is the command's in/out buffer.
    fn run(&mut self, nr: u8, dev_id: u32, buf: Option<&mut [u8]>, data0: u64) -> io::Result<i32> {
        let (addr, len) = match buf {
            Some(b) => (b.as_mut_ptr() as u64, b.len() as u16),
            None => (0, 0),
        };
        let cmd = CtrlCmd { dev_id, addr, len, data0 }.encode();
        let op = sys::opcode(nr, CtrlCmd::BYTES, self.encoded);
        let sqe = opcode::UringCmd80::new(types::Fd(self.file.as_raw_fd()), op)
            .cmd(cmd)
            .build()
            .user_data(u64::from(nr));
        // SAFETY: the command's buffer (`buf`) and the control file outlive the command: we
        // wait for its completion below before returning.
        unsafe { self.ring.submission().push(&sqe) }
            .map_err(|_| io::Error::other("the control ring is full"))?;
        loop {
            match self.ring.submit_and_wait(1) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let cqe = self.ring.completion().next().expect("a completion after submit_and_wait(1)");
        if cqe.result() < 0 {
            Err(io::Error::from_raw_os_error(-cqe.result()))
        } else {
            Ok(cqe.result())
        }
    }
}

fn add_error(source: io::Error) -> UblkError {
    match source.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => UblkError::Permission(source),
        _ => UblkError::Command { what: "ADD_DEV", dev_id: u32::MAX, source },
    }
}
