//! A stripe head: one `stripe_size` unit of every member of one stripe, with the state of each
//! member's block. The buffers belong to the head for its whole life in the pool, so a cached
//! block stays valid after the head goes inactive (a later read of it is a cache hit).

use crate::units::StripeNumber;

/// Which stripe head: stripe number and the unit's index within the chunk. The unit's member
/// offset is `stripe * chunk + unit * stripe_size` past the data offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StripeKey {
    pub stripe: StripeNumber,
    pub unit: u32,
}

/// A member I/O on one block (md's `R5_LOCKED` with `R5_Wantread` or `R5_Wantwrite`): while
/// one is in flight the buffer belongs to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DevIo {
    #[default]
    Idle,
    Reading,
    Writing,
}

/// The state of one member's block in a stripe head (md's `R5_*` flags that matter, as plain
/// fields rather than bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevState {
    /// The buffer holds the block's current contents (md's `R5_UPTODATE`).
    pub uptodate: bool,
    /// The buffer holds data newer than the member (written, parity not yet on disk).
    pub dirty: bool,
    pub io: DevIo,
}

impl DevState {
    /// A member I/O owns the buffer: nobody else may touch it.
    #[must_use]
    pub fn locked(self) -> bool {
        self.io != DevIo::Idle
    }
}

pub struct StripeHead {
    pub key: StripeKey,
    pub devs: Vec<DevState>,
    /// One `stripe_size` buffer per member.
    pub buffers: Vec<crate::buffer::BlockBuf>,
    /// Holders of this head (requests and the handler); 0 = inactive, on the LRU.
    pub(super) users: u32,
}

impl StripeHead {
    pub(super) fn new(members: usize, unit_bytes: usize) -> StripeHead {
        StripeHead {
            key: StripeKey::default(),
            devs: vec![DevState::default(); members],
            buffers: (0..members).map(|_| crate::buffer::BlockBuf::zeroed(unit_bytes)).collect(),
            users: 0,
        }
    }

    /// Reuses the head for another stripe: nothing it held is valid there.
    pub(super) fn reassign(&mut self, key: StripeKey) {
        debug_assert_eq!(self.users, 0, "only an inactive head is reassigned");
        debug_assert!(self.devs.iter().all(|d| !d.locked() && !d.dirty), "no I/O or dirty data");
        self.key = key;
        self.devs.fill(DevState::default());
    }

    /// Whether the head may be evicted: no holder, no I/O in flight, nothing unwritten.
    #[must_use]
    pub fn idle(&self) -> bool {
        self.users == 0 && self.devs.iter().all(|d| !d.locked() && !d.dirty)
    }
}
