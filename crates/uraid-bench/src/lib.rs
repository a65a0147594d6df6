//! uraid's benchmarks. Figures are ratios measured in one run against a baseline on the same
//! machine (uraid vs ISA-L, RAID5 vs RAID0), never absolute numbers checked by timed tests: the
//! machines we run on are shared and noisy.

pub mod arena;
pub mod io;
pub mod isal;
pub mod parity;
pub mod serve;
pub mod timing;
