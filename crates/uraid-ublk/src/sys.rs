//! ublk_drv's user ABI (Linux `include/uapi/linux/ublk_cmd.h`), the parts uraid uses, encoded
//! by hand at explicit offsets in native byte order (the driver and its server share a CPU).
//!
//! Control commands travel in an 80-byte SQE128 command area (`struct ublksrv_ctrl_cmd`, 32
//! bytes); I/O commands in the 16 bytes of a plain SQE (`struct ublksrv_io_cmd`). The driver
//! writes one 24-byte `struct ublksrv_io_desc` per tag into a shared, read-only mapping of
//! `/dev/ublkcN`.

/// Control command numbers (`UBLK_CMD_*`). Since Linux 6.4 they are also accepted
/// ioctl-encoded (`UBLK_U_CMD_*`), and kernels built without
/// `CONFIG_BLKDEV_UBLK_LEGACY_OPCODES` accept only that form; 6.0..6.3 know only the plain one.
pub const CMD_ADD_DEV: u8 = 0x04;
pub const CMD_DEL_DEV: u8 = 0x05;
pub const CMD_START_DEV: u8 = 0x06;
pub const CMD_STOP_DEV: u8 = 0x07;
pub const CMD_SET_PARAMS: u8 = 0x08;

/// I/O command numbers (`UBLK_IO_*`), sent on `/dev/ublkcN`.
pub const IO_FETCH_REQ: u8 = 0x20;
pub const IO_COMMIT_AND_FETCH_REQ: u8 = 0x21;

/// A fetch completes with OK when a request is there; ABORT (-ENODEV) when the device is
/// going away and the tag will get no more requests.
pub const IO_RES_OK: i32 = 0;
pub const IO_RES_ABORT: i32 = -libc::ENODEV;

/// Request operations (`UBLK_IO_OP_*`), in the low byte of `op_flags`.
pub const OP_READ: u8 = 0;
pub const OP_WRITE: u8 = 1;
pub const OP_FLUSH: u8 = 2;
pub const OP_DISCARD: u8 = 3;
pub const OP_WRITE_ZEROES: u8 = 5;
/// `UBLK_IO_F_FUA`: the write must be durable when completed.
pub const IO_F_FUA: u32 = 1 << 13;
/// `UBLK_IO_F_NOUNMAP`: a write of zeros that must stay allocated (no discard).
pub const IO_F_NOUNMAP: u32 = 1 << 15;

/// `UBLK_F_CMD_IOCTL_ENCODE`: tells the driver we speak the ioctl-encoded opcodes.
pub const F_CMD_IOCTL_ENCODE: u64 = 1 << 6;

/// `UBLK_ATTR_*` in the basic parameters.
pub const ATTR_READ_ONLY: u32 = 1 << 0;
pub const ATTR_VOLATILE_CACHE: u32 = 1 << 2;
pub const ATTR_FUA: u32 = 1 << 3;
pub const PARAM_TYPE_BASIC: u32 = 1 << 0;
pub const PARAM_TYPE_DISCARD: u32 = 1 << 1;

/// `UBLK_MAX_QUEUE_DEPTH`: tags are 12 bits.
pub const MAX_QUEUE_DEPTH: u16 = 4096;
/// Bytes of one `struct ublksrv_io_desc`.
pub const IO_DESC_BYTES: usize = 24;
/// Bytes of `struct ublksrv_ctrl_dev_info` and of the `struct ublk_params` prefix we send.
pub const DEV_INFO_BYTES: usize = 64;
pub const PARAMS_BYTES: usize = 64;

/// The opcode as sent: ioctl-encoded `_IOWR('u', nr, size)` or the plain number.
#[must_use]
pub fn opcode(nr: u8, size: u32, encoded: bool) -> u32 {
    if encoded {
        const IOC_READ_WRITE: u32 = 3;
        (IOC_READ_WRITE << 30) | (size << 16) | (u32::from(b'u') << 8) | u32::from(nr)
    } else {
        u32::from(nr)
    }
}

/// `struct ublksrv_ctrl_cmd`: the target device, a buffer the command reads or fills, and
/// inline data (START_DEV's server pid).
pub struct CtrlCmd {
    pub dev_id: u32,
    pub addr: u64,
    pub len: u16,
    pub data0: u64,
}

impl CtrlCmd {
    pub const BYTES: u32 = 32;

    #[must_use]
    pub fn encode(&self) -> [u8; 80] {
        let mut b = [0u8; 80];
        b[0..4].copy_from_slice(&self.dev_id.to_ne_bytes());
        // queue_id: -1, the command is not for one queue.
        b[4..6].copy_from_slice(&u16::MAX.to_ne_bytes());
        b[6..8].copy_from_slice(&self.len.to_ne_bytes());
        b[8..16].copy_from_slice(&self.addr.to_ne_bytes());
        b[16..24].copy_from_slice(&self.data0.to_ne_bytes());
        b
    }
}

/// `struct ublksrv_ctrl_dev_info`, the fields ADD_DEV reads and writes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevInfo {
    pub nr_hw_queues: u16,
    pub queue_depth: u16,
    pub max_io_buf_bytes: u32,
    pub dev_id: u32,
    pub flags: u64,
}

impl DevInfo {
    #[must_use]
    pub fn encode(&self) -> [u8; DEV_INFO_BYTES] {
        let mut b = [0u8; DEV_INFO_BYTES];
        b[0..2].copy_from_slice(&self.nr_hw_queues.to_ne_bytes());
        b[2..4].copy_from_slice(&self.queue_depth.to_ne_bytes());
        b[8..12].copy_from_slice(&self.max_io_buf_bytes.to_ne_bytes());
        b[12..16].copy_from_slice(&self.dev_id.to_ne_bytes());
        b[24..32].copy_from_slice(&self.flags.to_ne_bytes());
        b
    }

    #[must_use]
    pub fn decode(b: &[u8; DEV_INFO_BYTES]) -> DevInfo {
        DevInfo {
            nr_hw_queues: u16::from_ne_bytes([b[0], b[1]]),
            queue_depth: u16::from_ne_bytes([b[2], b[3]]),
            max_io_buf_bytes: u32::from_ne_bytes(b[8..12].try_into().unwrap()),
            dev_id: u32::from_ne_bytes(b[12..16].try_into().unwrap()),
            flags: u64::from_ne_bytes(b[24..32].try_into().unwrap()),
        }
    }
}

/// `struct ublk_params` with its basic and discard parts (the driver takes any prefix `len`
/// names; later kernels' extra parts stay zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub attrs: u32,
    pub logical_bs_shift: u8,
    pub physical_bs_shift: u8,
    pub io_opt_shift: u8,
    pub io_min_shift: u8,
    pub max_sectors: u32,
    pub dev_sectors: u64,
    pub discard_granularity: u32,
    pub max_discard_sectors: u32,
    pub max_write_zeroes_sectors: u32,
}

impl Params {
    #[must_use]
    pub fn encode(&self) -> [u8; PARAMS_BYTES] {
        let mut b = [0u8; PARAMS_BYTES];
        b[0..4].copy_from_slice(&(PARAMS_BYTES as u32).to_ne_bytes());
        b[4..8].copy_from_slice(&(PARAM_TYPE_BASIC | PARAM_TYPE_DISCARD).to_ne_bytes());
        // basic, at 8: attrs, four shifts, max_sectors, chunk_sectors (0), dev_sectors,
        // virt_boundary_mask (0).
        b[8..12].copy_from_slice(&self.attrs.to_ne_bytes());
        b[12] = self.logical_bs_shift;
        b[13] = self.physical_bs_shift;
        b[14] = self.io_opt_shift;
        b[15] = self.io_min_shift;
        b[16..20].copy_from_slice(&self.max_sectors.to_ne_bytes());
        b[24..32].copy_from_slice(&self.dev_sectors.to_ne_bytes());
        // discard, at 40: alignment (0), granularity, max_discard_sectors,
        // max_write_zeroes_sectors, max_discard_segments (1: one range per request).
        b[44..48].copy_from_slice(&self.discard_granularity.to_ne_bytes());
        b[48..52].copy_from_slice(&self.max_discard_sectors.to_ne_bytes());
        b[52..56].copy_from_slice(&self.max_write_zeroes_sectors.to_ne_bytes());
        b[56..58].copy_from_slice(&1u16.to_ne_bytes());
        b
    }
}

/// `struct ublksrv_io_cmd`: fetch the next request for `tag`, or commit `result` for it and
/// fetch the next; `addr` is the tag's buffer (write data arrives there, read data is taken
/// from there at commit).
#[must_use]
pub fn io_cmd(q_id: u16, tag: u16, result: i32, addr: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0..2].copy_from_slice(&q_id.to_ne_bytes());
    b[2..4].copy_from_slice(&tag.to_ne_bytes());
    b[4..8].copy_from_slice(&result.to_ne_bytes());
    b[8..16].copy_from_slice(&addr.to_ne_bytes());
    b
}

/// `struct ublksrv_io_desc`: what the driver asks of one tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoDesc {
    pub op: u8,
    pub flags: u32,
    pub nr_sectors: u32,
    pub start_sector: u64,
}

impl IoDesc {
    #[must_use]
    pub fn decode(b: &[u8; IO_DESC_BYTES]) -> IoDesc {
        let op_flags = u32::from_ne_bytes(b[0..4].try_into().unwrap());
        IoDesc {
            op: (op_flags & 0xff) as u8,
            flags: op_flags >> 8 << 8,
            nr_sectors: u32::from_ne_bytes(b[4..8].try_into().unwrap()),
            start_sector: u64::from_ne_bytes(b[8..16].try_into().unwrap()),
        }
    }
}

/// Where queue `q_id`'s descriptors are mapped in `/dev/ublkcN`: every queue gets room for
/// the largest depth, whatever the device's depth is.
#[must_use]
pub fn io_desc_offset(q_id: u16, page_bytes: usize) -> i64 {
    let per_queue = (usize::from(MAX_QUEUE_DEPTH) * IO_DESC_BYTES).next_multiple_of(page_bytes);
    i64::try_from(usize::from(q_id) * per_queue).expect("at most 65536 queues of 96 KiB")
}

/// Bytes of queue `depth`'s descriptor mapping.
#[must_use]
pub fn io_desc_len(depth: u16, page_bytes: usize) -> usize {
    (usize::from(depth) * IO_DESC_BYTES).next_multiple_of(page_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_encoded_opcodes_match_the_kernel_header() {
        // UBLK_U_CMD_ADD_DEV and UBLK_U_IO_FETCH_REQ as the kernel's _IOWR computes them.
        assert_eq!(opcode(CMD_ADD_DEV, CtrlCmd::BYTES, true), 0xc020_7504);
        assert_eq!(opcode(IO_FETCH_REQ, 16, true), 0xc010_7520);
        assert_eq!(opcode(CMD_STOP_DEV, CtrlCmd::BYTES, false), 7);
    }

    #[test]
    fn dev_info_round_trips_at_the_kernel_offsets() {
        let info = DevInfo {
            nr_hw_queues: 2,
            queue_depth: 64,
            max_io_buf_bytes: 512 << 10,
            dev_id: u32::MAX,
            flags: F_CMD_IOCTL_ENCODE,
        };
        let b = info.encode();
        assert_eq!(&b[8..12], &(512u32 << 10).to_ne_bytes());
        assert_eq!(&b[24..32], &(1u64 << 6).to_ne_bytes());
        assert_eq!(DevInfo::decode(&b), info);
    }

    #[test]
    fn io_desc_decodes_op_flags_and_range() {
        let mut b = [0u8; IO_DESC_BYTES];
        b[0..4].copy_from_slice(&(u32::from(OP_WRITE) | IO_F_FUA).to_ne_bytes());
        b[4..8].copy_from_slice(&8u32.to_ne_bytes());
        b[8..16].copy_from_slice(&1000u64.to_ne_bytes());
        let d = IoDesc::decode(&b);
        assert_eq!((d.op, d.flags, d.nr_sectors, d.start_sector), (OP_WRITE, IO_F_FUA, 8, 1000));
    }

    #[test]
    fn descriptor_mappings_are_spaced_for_the_largest_depth() {
        assert_eq!(io_desc_offset(0, 4096), 0);
        assert_eq!(io_desc_offset(3, 4096), 3 * 98_304);
        assert_eq!(io_desc_len(64, 4096), 4096);
        assert_eq!(io_desc_len(200, 4096), 8192);
    }

    #[test]
    fn params_carry_their_length_and_types() {
        let p = Params {
            attrs: ATTR_VOLATILE_CACHE | ATTR_FUA,
            logical_bs_shift: 9,
            physical_bs_shift: 12,
            io_opt_shift: 18,
            io_min_shift: 12,
            max_sectors: 1024,
            dev_sectors: 131_072,
            discard_granularity: 4096,
            max_discard_sectors: 1024,
            max_write_zeroes_sectors: 1024,
        };
        let b = p.encode();
        assert_eq!(&b[0..8], &[64, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(&b[24..32], &131_072u64.to_ne_bytes());
        assert_eq!(&b[56..58], &1u16.to_ne_bytes());
    }
}
