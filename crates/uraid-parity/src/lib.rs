//! RAID parity kernels (placeholder; see the parity issue).
