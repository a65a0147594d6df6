//! uraid benchmarks (placeholder).
