//! uraid's engine core: md's geometry (levels, layouts, the map between array and member
//! addresses) and, later, the stripe cache. This crate performs no I/O: no file descriptor,
//! clock, thread or global random state, so that unit tests and a deterministic simulator can
//! drive it exactly as the io_uring runtime does.
#![forbid(unsafe_code)]

pub mod array;
pub mod buffer;
pub mod constants;
pub mod error;
mod fast_hash;
pub mod geometry;
pub mod layout;
pub mod ppl;
pub mod reconstruct;
pub mod request;
pub mod reshape;
pub mod stripe;
pub mod units;

pub use error::GeometryError;
pub use geometry::{ChunkAddress, DiskRole, Geometry, StripeMap};
pub use layout::{Layout, Level};
pub use reconstruct::{ReconstructError, reconstruct};
pub use units::{DiskIndex, SECTOR_BYTES, Sector, StripeNumber};
